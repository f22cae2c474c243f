"""What the proxy tests share: running the proxy and its upstreams as real processes, and reading
the envelope log it writes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters

from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[3]
SERVERS = ROOT / "tests" / "servers"
ECHO_HASH_SERVER = SERVERS / "echo_hash_server.py"
SSE_UPSTREAM = SERVERS / "sse_upstream.py"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
PROXY = [PY, "-m", "mcptax.proxy"]
# `cat` relays bytes back verbatim: the simplest possible stdio "server".
ECHO = ["cat"]


@contextlib.contextmanager
def running(cmd: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def sigterm_until_exit(proc: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> tuple[int, int]:
    """Send ``signum`` to the process group of ``proc`` (started with ``start_new_session``) every
    2 ms until it exits, as a supervisor that keeps insisting would: (its exit status, signals
    sent)."""
    signals = 0
    while proc.poll() is None and signals < 20_000:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)
        signals += 1
        time.sleep(0.002)
    return proc.wait(30), signals


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def wait_for_exit_meta(path: Path, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The SDK client returns once the proxy exits; give the final flush a moment anyway."""

    def complete_log() -> list[dict[str, Any]] | None:
        log = read_log(path) if path.exists() else []
        return log if any(e["direction"] == "meta" and e["raw"].get("event") == "exit" for e in log) else None

    return wait_until(complete_log, timeout=timeout, message=f"an exit meta envelope in {path}")


def run_proxy(
    args: list[str], command: list[str], stdin: bytes = b"", timeout: float = 30
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PROXY, *args, "--", *command], input=stdin, capture_output=True, env=ENV, cwd=ROOT, timeout=timeout
    )


def sample_text(min_bytes: int = 60 * 1024) -> str:
    """Multi-byte text with an unterminated last line: a file whose copy is easy to get subtly wrong."""
    lines = []
    size = 0
    i = 0
    while size < min_bytes:
        line = f"{i:05d} héllo wörld — ✓ tab\there {'x' * (i % 37)}\n"
        lines.append(line)
        size += len(line.encode())
        i += 1
    return "".join(lines) + "last line without newline"


def tool_calls(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in log
        if e["direction"] == "c2s" and isinstance(e["raw"], dict) and e["raw"].get("method") == "tools/call"
    ]


def response_to(log: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    matches = [
        e
        for e in log
        if e["direction"] == "s2c"
        and e["session_id"] == request["session_id"]
        and e.get("conn_id") == request.get("conn_id")
        and isinstance(e["raw"], dict)
        and e["raw"].get("id") == request["raw"]["id"]
        and "result" in e["raw"]
    ]
    assert len(matches) == 1, matches
    return matches[0]


def assert_well_formed(log: list[dict[str, Any]], label: str, transport: str) -> None:
    for entry in log:
        assert entry["server_label"] == label
        assert entry["transport"] == transport
        assert entry["direction"] in {"c2s", "s2c", "stderr", "meta"}
        assert TS_RE.match(entry["ts"]), entry["ts"]
    by_session: dict[str, list[int]] = {}
    for entry in log:
        by_session.setdefault(entry["session_id"], []).append(entry["seq"])
    for seqs in by_session.values():
        # Written in order, no gaps (nothing was dropped in these runs).
        assert seqs == list(range(1, len(seqs) + 1))


async def call_digest(server: StdioServerParameters | str, text: str, **client_kwargs: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        async with Client(server, **client_kwargs) as client:
            result = await client.call_tool("digest", {"text": text})
    assert not result.is_error, result
    return result.structured_content


def stdio_params(log: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=[
            "-m",
            "mcptax.proxy",
            "--server-label",
            "echo",
            "--log",
            str(log),
            *extra,
            "--",
            PY,
            str(ECHO_HASH_SERVER),
        ],
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT)},
    )


class SseSetup:
    """The proxy in front of the scripted SSE upstream, whose second event waits for `release()`."""

    def __init__(self, base: str, log_path: Path, proxy: subprocess.Popen[bytes], upstream_port: int) -> None:
        self.base, self.log_path, self.proxy = base, log_path, proxy
        self.upstream_port = upstream_port

    def release(self) -> None:
        httpx.post(f"http://127.0.0.1:{self.upstream_port}/release", timeout=20).raise_for_status()
