"""Benchmark the logging proxy's hot path: what `EnvelopeWriter.record` costs the relay thread.

The relay forwards bytes before it records them, so `record` must stay cheap even when the log
sink is stuck (a full disk, a dashboard that stopped answering). Two figures are printed for N
calls (--calls, default 2000): against a sink that never returns, and against a sink that
accepts at once. The suite checks only that `record` never blocks (tests/mcptax/proxy); speed
belongs here, where a loaded machine cannot turn it into a failure.

The stalled case uses a small queue (64 KiB) so the drop path is what gets timed. The accepting
case uses the proxy's default queue: N back-to-back calls with no I/O between them hold the GIL
for the whole burst, so the writer thread barely runs until it ends; a 64 KiB queue (about 220 of
these frames) would then drop most of the burst, which measures the benchmark's loop, not the
proxy (a relay thread blocks on a read between frames, and the writer drains then).

The third figure is the HTTP mode's memory: the proxy (a real `python -m mcptax.proxy --listen`
process) relays one large request (--request-mb, default 200) to a loopback upstream that only
counts and hashes what it reads; printed is the proxy's peak RSS (VmHWM) beside its idle RSS.

    .venv/bin/python scripts/bench_proxy.py [--calls N] [--request-mb M]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcptax.proxy.writer import DEFAULT_QUEUE_BYTES, EnvelopeWriter  # noqa: E402 - after the path setup above

MESSAGE = b'{"jsonrpc":"2.0","method":"ping"}'
STALLED_QUEUE_BYTES = 64 * 1024


class StalledSink:
    def __init__(self) -> None:
        self.release = threading.Event()

    def write_lines(self, lines: list[bytes]) -> None:
        self.release.wait()

    def close(self) -> None:
        self.release.set()


class CountingSink:
    def __init__(self) -> None:
        self.lines = 0

    def write_lines(self, lines: list[bytes]) -> None:
        self.lines += len(lines)

    def close(self) -> None:
        pass


def time_records(sink: StalledSink | CountingSink, calls: int, queue_bytes: int) -> tuple[float, int]:
    writer = EnvelopeWriter("bench", "stdio", [sink], max_queue_bytes=queue_bytes, report=lambda _: None)
    started = time.perf_counter()
    for _ in range(calls):
        writer.record("s", "c2s", MESSAGE)
    elapsed = time.perf_counter() - started
    if isinstance(sink, StalledSink):
        sink.release.set()
    writer.close()
    return elapsed, writer.dropped


def _sha256_of(stream: Any, length: int) -> str:
    digest = hashlib.sha256()
    for offset in range(0, length, 1 << 20):
        digest.update(stream.read(min(1 << 20, length - offset)))
    return digest.hexdigest()


class CountingUpstream(BaseHTTPRequestHandler):
    """Reads and hashes the request as it comes, answering with the digest; keeps nothing."""

    def do_POST(self) -> None:
        answer = '{"jsonrpc":"2.0","id":1,"result":{"sha256":"%s"}}'
        body = (answer % _sha256_of(self.rfile, int(self.headers["Content-Length"]))).encode()
        self.send_response(200)
        for name, value in (("Content-Type", "application/json"), ("Content-Length", str(len(body)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proxy_peak_rss(request_mb: int) -> tuple[int, int, bool]:
    """(idle KiB, peak KiB, relayed intact) for one request of `request_mb` MiB through --listen."""
    upstream = ThreadingHTTPServer(("127.0.0.1", _free_port()), CountingUpstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = _free_port()
    size = request_mb * 1024 * 1024
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"text":"'
    tail = b'"}}}'
    block = b"x" * (1 << 20)

    def body() -> Iterator[bytes]:
        yield head
        left = size - len(head) - len(tail)
        while left:
            yield block[: min(left, len(block))]
            left -= min(left, len(block))
        yield tail

    expected = hashlib.sha256()
    for piece in body():
        expected.update(piece)
    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mcptax.proxy", "--server-label", "bench", "--log", f"{tmp}/log.jsonl"]
        cmd += [
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            f"http://127.0.0.1:{upstream.server_address[1]}/",
        ]
        proxy = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proxy.poll() is not None:
                        raise RuntimeError("the proxy did not start") from None
                    time.sleep(0.05)
            idle = _kib(proxy.pid, "VmRSS")
            response = httpx.post(
                f"http://127.0.0.1:{port}/",
                content=body(),
                headers={"Content-Length": str(size)},
                timeout=600,
            )
            peak = _kib(proxy.pid, "VmHWM")
        finally:
            proxy.terminate()
            proxy.wait(30)
            upstream.shutdown()
    intact = response.status_code == 200 and expected.hexdigest() in response.text
    return idle, peak, intact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--request-mb", type=int, default=200)
    args = parser.parse_args()
    calls = args.calls
    stalled = StalledSink()
    elapsed, dropped = time_records(stalled, calls, STALLED_QUEUE_BYTES)
    print(
        f"  stalled sink: {calls} record() calls in {elapsed * 1000:.1f} ms "
        f"({elapsed / calls * 1e6:.1f} µs each), {dropped} dropped by the {STALLED_QUEUE_BYTES // 1024} KiB queue"
    )
    accepting = CountingSink()
    elapsed, dropped = time_records(accepting, calls, DEFAULT_QUEUE_BYTES)
    print(
        f"accepting sink: {calls} record() calls in {elapsed * 1000:.1f} ms "
        f"({elapsed / calls * 1e6:.1f} µs each), {accepting.lines} logged, {dropped} dropped"
    )
    idle, peak, intact = proxy_peak_rss(args.request_mb)
    print(
        f"  http --listen: one {args.request_mb} MiB request, proxy RSS idle {idle / 1024:.0f} MiB, "
        f"peak {peak / 1024:.0f} MiB, relayed {'intact' if intact else 'NOT intact'}"
    )


if __name__ == "__main__":
    main()
