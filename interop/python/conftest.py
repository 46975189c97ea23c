"""Pytest fixtures for the pyfluss interop tests: a real `fjord server` process.

The binary comes from the FJORD_BIN environment variable (scripts/test.sh sets
it to the binary `cargo test --workspace` built). The server listens on an
ephemeral loopback port; its address is read from the one ready line the CLI
promises on stderr (`fjord server ready ... listening on <ip:port>`).
"""

import os
import re
import signal
import subprocess
import tempfile
import threading

import pytest

# How long the server may take from spawn to its ready line; it only bounds
# how long a broken server can hang the suite.
READY_TIMEOUT_S = 60
# How long a clean shutdown (SIGTERM) may take.
SHUTDOWN_TIMEOUT_S = 30

_READY = re.compile(r"fjord server ready.*?listening on (\S+?)(?:,|\s|$)")


class FjordServer:
    """A running `fjord server` child; keeps everything it writes to stderr."""

    def __init__(self, binary, data_dir, extra_args=()):
        self.data_dir = data_dir
        self._lines = []
        self._ready = threading.Event()
        self.address = None
        env = dict(os.environ, NO_COLOR="1")
        env.setdefault("RUST_LOG", "info")
        self._proc = subprocess.Popen(
            [binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir, *extra_args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        # Drain stderr for the child's whole life: a full pipe would block it.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        if not self._ready.wait(READY_TIMEOUT_S) or self.address is None:
            self.kill()
            raise RuntimeError(
                f"fjord server ({binary}) did not print its ready line within "
                f"{READY_TIMEOUT_S}s (exit code {self._proc.poll()})\n"
                f"--- fjord server stderr ---\n{self.stderr()}"
            )

    def _drain(self):
        for line in self._proc.stderr:
            self._lines.append(line)
            if self.address is None:
                match = _READY.search(line)
                if match:
                    self.address = match.group(1)
                    self._ready.set()
        # The child closed stderr (it exited): wake a waiter that still waits.
        self._ready.set()

    def endpoint(self, name):
        """The address the ready line gives for `name` (`postgres`, `flight sql`)."""
        match = re.search(rf", {name} on (\S+?)(?:,|\s|$)", self.stderr())
        assert match, f"no {name} endpoint in the ready line\n{self.stderr()}"
        return match.group(1)

    def stderr(self):
        """Everything the server wrote to stderr so far."""
        return "".join(self._lines)

    def stop(self):
        """SIGTERM, then wait for a clean exit; returns the exit code."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(
                    f"fjord server did not exit within {SHUTDOWN_TIMEOUT_S}s of SIGTERM\n"
                    f"--- fjord server stderr ---\n{self.stderr()}"
                )
        return self._proc.returncode

    def kill(self):
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()


def _fjord_bin():
    binary = os.environ.get("FJORD_BIN")
    if not binary:
        pytest.fail(
            "FJORD_BIN is not set: point it at the fjord binary "
            "(scripts/test.sh does this after `cargo test --workspace`)"
        )
    if not os.access(binary, os.X_OK):
        pytest.fail(f"FJORD_BIN={binary!r} is not an executable file")
    return binary


@pytest.fixture(scope="module")
def fjord_server():
    """One fjord server per test module, on its own temporary data dir."""
    binary = _fjord_bin()
    with tempfile.TemporaryDirectory(prefix="fjord-pytest-") as data_dir:
        server = FjordServer(binary, data_dir)
        try:
            yield server
        finally:
            code = server.stop()
            assert code == 0, (
                f"fjord server exited with {code} on SIGTERM\n"
                f"--- fjord server stderr ---\n{server.stderr()}"
            )


@pytest.fixture(scope="module")
def fjord_sql_server():
    """One fjord server per test module with its Postgres and Flight SQL
    endpoints on ephemeral loopback ports and no users (loopback trust)."""
    binary = _fjord_bin()
    with tempfile.TemporaryDirectory(prefix="fjord-pytest-") as data_dir:
        server = FjordServer(
            binary,
            data_dir,
            ["--pg-listen", "127.0.0.1:0", "--flight-sql-listen", "127.0.0.1:0"],
        )
        try:
            yield server
        finally:
            code = server.stop()
            assert code == 0, (
                f"fjord server exited with {code} on SIGTERM\n"
                f"--- fjord server stderr ---\n{server.stderr()}"
            )
