#!/usr/bin/env python3
"""Records the request frames the official Fluss clients send, for the fuzz
corpus (fuzz/corpus/frame_decode/) and for reading what each client says first.

Every frame a client sends is saved, exactly as it crossed the wire (4-byte
big-endian length, then `i16 api_key | i16 api_version | i32 request_id |
proto2 body`), to `<out>/<client>-<api_key>-<n>`, where n counts the frames of
that client and api key (at most --max-per-key of them).

Two ways to run it:

  listen     A loopback listener. With --upstream HOST:PORT it is a recording
             proxy in front of a real server; without, it answers nothing and
             closes each connection shortly after the first frame (the client's
             first words are all there is to hear then).

               scripts/capture_frames.py listen --client pyfluss --port 9123

  server     A stand-in for `fjord server` with the same flags, so any interop
             suite can run through the recorder unchanged: it starts the binary
             named by FJORD_CAPTURE_REAL_BIN on an ephemeral port, puts the
             recording proxy on --listen and prints the ready line for the
             proxy's address. Without FJORD_CAPTURE_REAL_BIN it records only
             (as `listen` without --upstream). The client name comes from
             FJORD_CAPTURE_CLIENT.

               FJORD_CAPTURE_REAL_BIN=target/debug/fjord FJORD_CAPTURE_CLIENT=java \\
               FJORD_BIN=scripts/capture_frames.py mvn -f interop/java test

`summarize DIR` prints, for every saved frame, its header and a generic
protobuf field dump of its body.
"""

import argparse
import asyncio
import os
import re
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "fuzz" / "corpus" / "frame_decode"
# A frame longer than this is not recorded (and the connection is dropped): it
# protects the recorder from a corrupt length, not the clients from anything.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Without an upstream, how long to keep a connection open after its first
# frame, so a client that pipelines a second request gets it recorded too.
LISTEN_ONLY_GRACE_S = 1.0
READY = re.compile(r"fjord server ready.*?listening on ([^,\s]+)")


class Recorder:
    """Saves frames to `<out>/<client>-<api_key>-<n>`, n per client and key."""

    def __init__(self, out_dir, client, max_per_key):
        self.out_dir = Path(out_dir)
        self.client = client
        self.max_per_key = max_per_key
        self.counts = {}
        self.lock = threading.Lock()
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def save(self, frame):
        api_key, version, request_id = struct.unpack(">hhi", frame[4:12])
        with self.lock:
            n = self.counts.get(api_key, 0)
            if n >= self.max_per_key:
                return
            self.counts[api_key] = n + 1
        path = self.out_dir / f"{self.client}-{api_key}-{n}"
        path.write_bytes(frame)
        print(
            f"capture: {path.name}: api_key={api_key} version={version} "
            f"request_id={request_id} body={len(frame) - 12}B",
            file=sys.stderr,
            flush=True,
        )


async def read_frame(reader):
    """One whole frame (with its length prefix), or None at end of stream."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    (length,) = struct.unpack(">i", head)
    if length < 8 or length > MAX_FRAME_BYTES:
        raise ValueError(f"frame length {length} out of range")
    return head + await reader.readexactly(length)


async def handle(recorder, upstream, reader, writer):
    up_reader = up_writer = None
    pump = None
    frames_seen = 0
    try:
        if upstream:
            host, port = upstream.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))

            async def responses():
                while data := await up_reader.read(65536):
                    writer.write(data)
                    await writer.drain()
                writer.close()

            pump = asyncio.create_task(responses())
        while True:
            if upstream:
                frame = await read_frame(reader)
            else:
                try:
                    timeout = LISTEN_ONLY_GRACE_S if frames_seen else None
                    frame = await asyncio.wait_for(read_frame(reader), timeout)
                except asyncio.TimeoutError:
                    break
            if frame is None:
                break
            recorder.save(frame)
            frames_seen += 1
            if up_writer is not None:
                up_writer.write(frame)
                await up_writer.drain()
    except (ValueError, ConnectionError, asyncio.IncompleteReadError) as e:
        print(f"capture: connection dropped: {e}", file=sys.stderr, flush=True)
    finally:
        if pump is not None:
            pump.cancel()
        for w in (up_writer, writer):
            if w is not None:
                w.close()


async def serve(host, port, recorder, upstream, on_ready):
    server = await asyncio.start_server(
        lambda r, w: handle(recorder, upstream, r, w), host, port
    )
    bound = server.sockets[0].getsockname()
    on_ready(f"{bound[0]}:{bound[1]}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def start_real_server(binary, data_dir):
    """Starts the real server on an ephemeral port; returns (process, address)."""
    proc = subprocess.Popen(
        [binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        sys.stderr.write(line)
        match = READY.search(line)
        if match:
            # Keep relaying the real server's log so the suite can show it.
            threading.Thread(
                target=lambda: [sys.stderr.write(l) for l in proc.stderr], daemon=True
            ).start()
            return proc, match.group(1)
    proc.wait()
    sys.exit(f"capture: real server exited ({proc.returncode}) before it was ready")


def cmd_listen(args):
    recorder = Recorder(args.out, args.client, args.max_per_key)
    ready = lambda addr: print(f"capture: listening on {addr}", file=sys.stderr, flush=True)
    asyncio.run(serve(args.host, args.port, recorder, args.upstream, ready))


def cmd_server(args):
    client = os.environ.get("FJORD_CAPTURE_CLIENT", "client")
    out = os.environ.get("FJORD_CAPTURE_OUT", str(DEFAULT_OUT))
    recorder = Recorder(out, client, args.max_per_key)
    real_bin = os.environ.get("FJORD_CAPTURE_REAL_BIN")
    proc, upstream = (None, None)
    if real_bin:
        proc, upstream = start_real_server(real_bin, args.data_dir)
    host, port = args.listen.rsplit(":", 1)

    def ready(addr):
        print(
            f"INFO fjord server ready: listening on {addr}, data dir {args.data_dir} "
            f"(recording proxy, upstream {upstream or 'none'})",
            file=sys.stderr,
            flush=True,
        )

    try:
        asyncio.run(serve(host, int(port), recorder, upstream, ready))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            sys.exit(proc.wait())


def varint(buf, i):
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def dump_proto(buf, indent="  "):
    """Generic proto2 field dump (field number, wire type, value)."""
    i, lines = 0, []
    try:
        while i < len(buf):
            key, i = varint(buf, i)
            field, wire = key >> 3, key & 7
            if wire == 0:
                value, i = varint(buf, i)
                lines.append(f"{indent}#{field} varint {value}")
            elif wire == 2:
                length, i = varint(buf, i)
                data = buf[i : i + length]
                i += length
                text = data.decode("utf-8", "replace") if all(32 <= b < 127 for b in data) else None
                shown = repr(text) if text is not None else data[:48].hex() + ("…" if length > 48 else "")
                lines.append(f"{indent}#{field} bytes[{length}] {shown}")
            elif wire == 1:
                lines.append(f"{indent}#{field} fixed64 {buf[i:i+8].hex()}")
                i += 8
            elif wire == 5:
                lines.append(f"{indent}#{field} fixed32 {buf[i:i+4].hex()}")
                i += 4
            else:
                lines.append(f"{indent}unparsed wire type {wire} at {i}")
                break
    except IndexError:
        lines.append(f"{indent}truncated at byte {i}")
    return lines


def cmd_summarize(args):
    for path in sorted(Path(args.dir).iterdir()):
        frame = path.read_bytes()
        if len(frame) < 12:
            continue
        length, api_key, version, request_id = struct.unpack(">ihhi", frame[:12])
        print(
            f"{path.name}: length={length} api_key={api_key} version={version} "
            f"request_id={request_id} header={frame[:12].hex(' ')}"
        )
        for line in dump_proto(frame[12:]):
            print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    listen = sub.add_parser("listen", help="record (and optionally proxy) on a loopback port")
    listen.add_argument("--client", required=True, help="client name used in file names")
    listen.add_argument("--host", default="127.0.0.1")
    listen.add_argument("--port", type=int, default=0)
    listen.add_argument("--upstream", help="HOST:PORT of a real server to forward to")
    listen.add_argument("--out", default=str(DEFAULT_OUT))
    listen.add_argument("--max-per-key", type=int, default=3)
    server = sub.add_parser("server", help="stand-in for `fjord server` (see above)")
    server.add_argument("--listen", default="127.0.0.1:9123")
    server.add_argument("--data-dir", default="./fjord-data")
    server.add_argument("--config")
    server.add_argument("--set", action="append", default=[])
    server.add_argument("--max-per-key", type=int, default=3)
    summarize = sub.add_parser("summarize", help="print saved frames")
    summarize.add_argument("dir", nargs="?", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    {"listen": cmd_listen, "server": cmd_server, "summarize": cmd_summarize}[args.cmd](args)


if __name__ == "__main__":
    main()
