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

`workload ADDRESS` runs a small pyfluss session (create, append 10 rows,
list offsets, projected scan, drop) so every log-table api is recorded with
small frames. `summarize DIR` prints, for every saved frame, its header and a generic
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
# Frames larger than this are forwarded but not saved: fuzzers work best from
# small seeds, and a few big produce requests would dominate the corpus.
MAX_SAVED_BYTES = 64 * 1024
# Without an upstream, how long to keep a connection open after its first
# frame, so a client that pipelines a second request gets it recorded too.
LISTEN_ONLY_GRACE_S = 1.0
READY = re.compile(r"fjord server ready.*?listening on ([^,\s]+)")


class Recorder:
    """Saves frames to `<out>/<client>-<api_key>-<n>`: at most max_per_key files
    per client and key (counting files already there, so several runs and
    several server processes add up instead of overwriting), and only frames
    of at most max_bytes (a fuzz corpus wants small inputs)."""

    def __init__(self, out_dir, client, max_per_key, max_bytes):
        self.out_dir = Path(out_dir)
        self.client = client
        self.max_per_key = max_per_key
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def save(self, frame):
        api_key, version, request_id = struct.unpack(">hhi", frame[4:12])
        note = f"api_key={api_key} version={version} request_id={request_id} body={len(frame) - 12}B"
        if len(frame) > self.max_bytes:
            print(f"capture: not saved (over {self.max_bytes}B): {note}", file=sys.stderr, flush=True)
            return
        with self.lock:
            prefix = f"{self.client}-{api_key}-"
            taken = {p.name for p in self.out_dir.glob(prefix + "*")}
            if len(taken) >= self.max_per_key:
                return
            n = next(i for i in range(len(taken) + 1) if f"{prefix}{i}" not in taken)
            path = self.out_dir / f"{prefix}{n}"
            path.write_bytes(frame)
        print(f"capture: {path.name}: {note}", file=sys.stderr, flush=True)


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


METADATA_API_KEY = 1012


def encode_varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def proto_fields(buf):
    """Splits a proto2 message into (field, wire_type, encoded_value) triples."""
    i, fields = 0, []
    while i < len(buf):
        key, j = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, end = varint(buf, j)
        elif wire == 2:
            length, k = varint(buf, j)
            end = k + length
        elif wire == 1:
            end = j + 8
        elif wire == 5:
            end = j + 4
        else:
            raise ValueError(f"wire type {wire}")
        fields.append((field, wire, buf[j:end]))
        i = end
    return fields


def rewrite_server_node(node, upstream_port, proxy_port):
    """PbServerNode with port (3) and listeners (4) pointing at the proxy."""
    out = bytearray()
    for field, wire, value in proto_fields(node):
        if field == 3 and wire == 0:
            value = encode_varint(proxy_port)
        elif field == 4 and wire == 2:
            _, k = varint(value, 0)
            text = value[k:].decode().replace(f":{upstream_port}", f":{proxy_port}").encode()
            value = encode_varint(len(text)) + text
        out += encode_varint(field << 3 | wire) + value
    return bytes(out)


def rewrite_metadata_response(body, upstream_port, proxy_port):
    """MetadataResponse whose coordinator (1) and tablet servers (2) are the
    proxy, so clients keep talking through it after bootstrap."""
    out = bytearray()
    for field, wire, value in proto_fields(body):
        if field in (1, 2) and wire == 2:
            _, k = varint(value, 0)
            node = rewrite_server_node(value[k:], upstream_port, proxy_port)
            value = encode_varint(len(node)) + node
        out += encode_varint(field << 3 | wire) + value
    return bytes(out)


async def handle(recorder, upstream, reader, writer):
    up_reader = up_writer = None
    pump = None
    frames_seen = 0
    metadata_requests = set()
    try:
        if upstream:
            host, port = upstream.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            proxy_port = writer.get_extra_info("sockname")[1]

            async def responses():
                while True:
                    head = await up_reader.readexactly(4)
                    (length,) = struct.unpack(">i", head)
                    payload = await up_reader.readexactly(length)
                    kind, request_id = struct.unpack(">bi", payload[:5])
                    if kind == 0 and request_id in metadata_requests:
                        metadata_requests.discard(request_id)
                        body = rewrite_metadata_response(payload[5:], int(port), proxy_port)
                        payload = payload[:5] + body
                        head = struct.pack(">i", len(payload))
                    writer.write(head + payload)
                    await writer.drain()

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
                api_key, _, request_id = struct.unpack(">hhi", frame[4:12])
                if api_key == METADATA_API_KEY:
                    metadata_requests.add(request_id)
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


def _die_with_parent():
    """Runs in the child before exec: the kernel SIGKILLs it when the stand-in
    dies, even by SIGKILL (a harness's "crash" step), so no server leaks."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def start_real_server(binary, data_dir):
    """Starts the real server on an ephemeral port; returns (process, address)."""
    proc = subprocess.Popen(
        [binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
        preexec_fn=_die_with_parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    def relay(line):
        # Relayed with the ready marker defused: the harness must find the
        # proxy's ready line, not the upstream's.
        sys.stderr.write("upstream: " + line.replace("fjord server ready", "upstream ready"))
        sys.stderr.flush()

    for line in proc.stderr:
        relay(line)
        match = READY.search(line)
        if match:
            # Keep relaying the real server's log so the suite can show it.
            threading.Thread(target=lambda: [relay(l) for l in proc.stderr], daemon=True).start()
            return proc, match.group(1)
    proc.wait()
    sys.exit(f"capture: real server exited ({proc.returncode}) before it was ready")


def cmd_listen(args):
    recorder = Recorder(args.out, args.client, args.max_per_key, args.max_bytes)
    ready = lambda addr: print(f"capture: listening on {addr}", file=sys.stderr, flush=True)
    asyncio.run(serve(args.host, args.port, recorder, args.upstream, ready))


def cmd_server(args):
    client = os.environ.get("FJORD_CAPTURE_CLIENT", "client")
    out = os.environ.get("FJORD_CAPTURE_OUT", str(DEFAULT_OUT))
    recorder = Recorder(out, client, args.max_per_key, args.max_bytes)
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


def cmd_workload(args):
    """A small pyfluss session (every log-table api, small frames) against
    `args.address`, normally a `listen --upstream` recorder."""
    import pyarrow as pa

    import fluss

    async def run():
        conn = await fluss.FlussConnection.create(
            fluss.Config({"bootstrap.servers": args.address, "writer.retries": "2"})
        )
        admin = conn.get_admin()
        await admin.create_database("capture", ignore_if_exists=True)
        path = fluss.TablePath("capture", "small")
        schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us"))])
        await admin.create_table(
            path, fluss.TableDescriptor(fluss.Schema(schema), bucket_count=2, bucket_keys=["id"]),
            ignore_if_exists=True,
        )
        await admin.list_databases()
        await admin.list_tables("capture")
        await admin.table_exists(path)
        await admin.get_table_info(path)
        table = await conn.get_table(path)
        writer = table.new_append().create_writer()
        batch = pa.RecordBatch.from_pydict(
            {"id": list(range(10)), "name": [f"n{i}" for i in range(10)], "ts": [1_700_000_000_000_000] * 10},
            schema=schema,
        )
        ack = writer.write_arrow_batch(batch)
        await writer.flush()
        await ack.wait()
        await admin.list_offsets(path, [0, 1], fluss.OffsetSpec.latest())
        await admin.list_offsets(path, [0, 1], fluss.OffsetSpec.earliest())
        scanner = await table.new_scan().project_by_name(["name"]).create_record_batch_log_scanner()
        scanner.subscribe_buckets({0: fluss.EARLIEST_OFFSET, 1: fluss.EARLIEST_OFFSET})
        print((await scanner.to_arrow()).num_rows, "rows scanned", file=sys.stderr)
        await admin.drop_table(path, ignore_if_not_exists=True)
        await admin.drop_database("capture", ignore_if_not_exists=True, cascade=True)
        await conn.close()

    asyncio.run(asyncio.wait_for(run(), 120))


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
    listen.add_argument("--max-bytes", type=int, default=MAX_SAVED_BYTES)
    server = sub.add_parser("server", help="stand-in for `fjord server` (see above)")
    server.add_argument("--listen", default="127.0.0.1:9123")
    server.add_argument("--data-dir", default="./fjord-data")
    server.add_argument("--config")
    server.add_argument("--set", action="append", default=[])
    server.add_argument("--max-per-key", type=int, default=3)
    server.add_argument("--max-bytes", type=int, default=MAX_SAVED_BYTES)
    workload = sub.add_parser("workload", help="a small pyfluss session against ADDRESS")
    workload.add_argument("address")
    summarize = sub.add_parser("summarize", help="print saved frames")
    summarize.add_argument("dir", nargs="?", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    {"listen": cmd_listen, "server": cmd_server, "workload": cmd_workload, "summarize": cmd_summarize}[args.cmd](args)


if __name__ == "__main__":
    main()
