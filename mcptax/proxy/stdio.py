"""stdio mode: spawn the server and relay bytes both ways, logging each line as an envelope.

Each direction is one thread doing read -> split lines -> `writer.record` -> write. A line is
stamped (its `seq`) before its bytes are passed on, so nothing it causes on the other side can be
logged before it; stamping only queues the line, and parsing happens later on the writer thread,
so the relay stays byte-for-byte and logging adds next to no latency.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from types import FrameType

from mcptax.proxy.writer import PROXY_VERSION, EnvelopeWriter, new_session_id, warn

READ_SIZE = 64 * 1024
STDIN_FD, STDOUT_FD, STDERR_FD = 0, 1, 2
# How long to wait for the child's pipes to reach EOF after it exits (a grandchild may hold them).
PIPE_DRAIN_TIMEOUT = 5.0


class LineSplitter:
    """Incremental newline splitter that scans each byte once, so multi-MB lines stay linear."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scan_from = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        lines: list[bytes] = []
        start = 0
        while True:
            end = self._buffer.find(b"\n", max(start, self._scan_from))
            if end < 0:
                break
            lines.append(bytes(self._buffer[start:end]))
            start = end + 1
        if start:
            del self._buffer[:start]
        self._scan_from = len(self._buffer)
        return lines

    def rest(self) -> bytes:
        """The unterminated tail left at EOF."""
        tail = bytes(self._buffer)
        self._buffer.clear()
        self._scan_from = 0
        return tail


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pump(
    source_fd: int,
    dest_fd: int | None,
    on_line: Callable[[bytes], None],
    on_eof: Callable[[], None] | None = None,
) -> None:
    """Copy source to dest until EOF, handing each complete line to `on_line` before the chunk
    that completes it is written on (the reply a line causes is then always logged after it).

    If the destination goes away we keep reading (and logging) so the other side never
    blocks on a full pipe.
    """
    splitter = LineSplitter()
    dest_alive = dest_fd is not None
    while True:
        try:
            chunk = os.read(source_fd, READ_SIZE)
        except OSError:
            break
        if not chunk:
            break
        for line in splitter.feed(chunk):
            on_line(line)
        if dest_alive:
            try:
                _write_all(dest_fd, chunk)  # type: ignore[arg-type]
            except OSError:
                dest_alive = False
    tail = splitter.rest()
    if tail:
        on_line(tail)
    if on_eof is not None:
        on_eof()


def _exit_status(returncode: int) -> int:
    # A child killed by a signal is reported the way a shell would (128 + signal number).
    return 128 - returncode if returncode < 0 else returncode


def run_stdio(command: Sequence[str], writer: EnvelopeWriter, session_id: str | None = None) -> int:
    """Run `command` as the MCP server behind this proxy; returns the child's exit status."""
    session_id = session_id or new_session_id()
    start_meta = {
        "event": "start",
        "command": list(command),
        "cwd": os.getcwd(),
        "proxy_pid": os.getpid(),
        "proxy_version": PROXY_VERSION,
    }
    try:
        child = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
        )
    except OSError as exc:
        warn(f"cannot start server {command[0]!r}: {exc}")
        writer.record(session_id, "meta", meta={**start_meta, "pid": None, "error": str(exc)})
        writer.record(session_id, "meta", meta={"event": "exit", "exit_code": 127})
        return 127
    # From the moment the server runs, a stop signal is passed on to it, before anything is
    # relayed. Left in place after the server exits: a stop signal then finds nothing to stop, and
    # the frames still on their way to the log are written before the process exits.
    _forward_signals(child)
    writer.record(session_id, "meta", meta={**start_meta, "pid": child.pid})

    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child_stdin_fd = child.stdin.fileno()

    def close_child_stdin() -> None:
        # The agent hung up: pass the EOF on so the server can shut down by itself.
        with contextlib.suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]

    def log_c2s(line: bytes) -> None:
        writer.record(session_id, "c2s", line)

    def log_s2c(line: bytes) -> None:
        writer.record(session_id, "s2c", line)

    def log_stderr(line: bytes) -> None:
        writer.record(session_id, "stderr", text=line.decode("utf-8", "replace").rstrip("\r"))

    # stdin: daemon, because the agent may keep our stdin open after the server is gone.
    threading.Thread(
        target=pump,
        args=(STDIN_FD, child_stdin_fd, log_c2s, close_child_stdin),
        daemon=True,
        name="relay-c2s",
    ).start()
    out_thread = threading.Thread(
        target=pump, args=(child.stdout.fileno(), STDOUT_FD, log_s2c), daemon=True, name="relay-s2c"
    )
    err_thread = threading.Thread(
        target=pump, args=(child.stderr.fileno(), STDERR_FD, log_stderr), daemon=True, name="relay-stderr"
    )
    out_thread.start()
    err_thread.start()

    returncode = child.wait()
    out_thread.join(PIPE_DRAIN_TIMEOUT)
    err_thread.join(PIPE_DRAIN_TIMEOUT)
    status = _exit_status(returncode)
    writer.record(session_id, "meta", meta={"event": "exit", "exit_code": status, "returncode": returncode})
    return status


_FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _forward_signals(child: subprocess.Popen[bytes]) -> None:
    """Pass termination signals on to the server, so it (not us) decides how to exit."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            child.send_signal(signum)  # a no-op once the server has exited and been reaped

    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _FORWARDED_SIGNALS:
        signal.signal(signum, forward)
