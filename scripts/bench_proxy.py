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

    .venv/bin/python scripts/bench_proxy.py [--calls N]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
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


if __name__ == "__main__":
    main()
