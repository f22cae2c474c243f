"""The proxy's HTTP mode (mcptax.proxy.http) between real clients and a real upstream."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from pathlib import Path

import anyio
import httpx
import pytest

from mcptax.proxy.http import SseEventParser
from tests.helpers import free_port, wait_for_port
from tests.mcptax.proxy.support import (
    ECHO_HASH_SERVER,
    PROXY,
    PY,
    SseSetup,
    assert_well_formed,
    call_digest,
    read_log,
    response_to,
    running,
    sigterm_until_exit,
    tool_calls,
)

pytestmark = pytest.mark.timeout(90)


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


def test_http_sse_is_streamed_incrementally_with_headers_unchanged(sse_setup: SseSetup) -> None:
    base, log_path, proxy = sse_setup.base, sse_setup.log_path, sse_setup.proxy
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}).encode()
    headers = {"Mcp-Session-Id": "sess-from-client", "Accept": "application/json, text/event-stream"}
    streamed = b""
    with (
        httpx.Client(timeout=90) as client,
        client.stream("POST", f"{base}/mcp?x=1", content=body, headers=headers) as response,
    ):
        assert response.headers["mcp-session-id"] == "sess-fixed"
        assert response.headers["x-upstream"] == "yes"
        assert response.headers["content-type"] == "text/event-stream"
        chunks = response.iter_raw()
        # The upstream holds its result back until released: a proxy that buffered the stream
        # would deliver nothing before that, so the progress event must get here first.
        while b"notifications/progress" not in streamed:
            streamed += next(chunks)
        assert b'"result"' not in streamed
        sse_setup.release()
        for chunk in chunks:
            streamed += chunk
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


def test_http_json_responses_and_concurrent_requests_get_distinct_conn_ids(sse_setup: SseSetup) -> None:
    base, log_path, proxy = sse_setup.base, sse_setup.log_path, sse_setup.proxy

    async def post(client: httpx.AsyncClient, request_id: int, want_json: bool) -> httpx.Response:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        headers = {"X-Want-Json": "1"} if want_json else {}
        return await client.post(f"{base}/", content=body, headers=headers)

    async def both() -> dict[int, httpx.Response]:
        async with httpx.AsyncClient(timeout=90) as client:
            results: dict[int, httpx.Response] = {}

            async def one(request_id: int, want_json: bool) -> None:
                results[request_id] = await post(client, request_id, want_json)

            async with anyio.create_task_group() as group:
                group.start_soon(one, 1, False)  # an SSE answer held back by the upstream...
                await one(2, True)  # ...does not hold up a JSON one
                assert 1 not in results, "the SSE answer is still held, so the JSON one came first"
                await anyio.to_thread.run_sync(sse_setup.release)
            return results

    responses = anyio.run(both)
    assert {i: r.headers["content-type"] for i, r in responses.items()} == {
        1: "text/event-stream",
        2: "application/json",
    }
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


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGHUP, 128 + signal.SIGHUP)])
def test_http_stop_signals_while_shutting_down_lose_no_frame(
    tmp_path: Path, signum: int, status: int
) -> None:
    # The first signal stops serving (SIGTERM through uvicorn, SIGHUP through the proxy's own
    # handler); the ones after it arrive while the log is being written and must not cut it short.
    log_path = tmp_path / "log.jsonl"
    proxy_port = free_port()
    cmd = [*PROXY, "--server-label", "gone", "--log", str(log_path), "--listen", f"127.0.0.1:{proxy_port}"]
    cmd += ["--upstream", f"http://127.0.0.1:{free_port()}/mcp"]
    with running(cmd, stderr=subprocess.DEVNULL, start_new_session=True) as proxy:
        wait_for_port(proxy_port, proxy)
        with httpx.Client(timeout=20) as client:
            for n in range(50):
                body = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % n
                assert client.post(f"http://127.0.0.1:{proxy_port}/mcp", content=body).status_code == 502
        returncode, _ = sigterm_until_exit(proxy, signum)

    log = read_log(log_path)
    assert [e["raw"]["id"] for e in log if e["direction"] == "c2s"] == list(range(50))
    assert sum(e["direction"] == "meta" and e["raw"]["event"] == "upstream_error" for e in log) == 50
    if status == 0:
        assert log[-1]["raw"] == {"event": "exit", "exit_code": 0}
    assert returncode == status


def test_sse_parser_handles_split_crlf_comments_and_multiline_data() -> None:
    parser = SseEventParser()
    stream = (
        b': comment\r\nid: 1\r\n\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata:2\n\ndata: 3\r\r\n'
    )
    events: list[bytes] = []
    for i in range(len(stream)):  # one byte at a time: every split point, CRLF halves included
        events += parser.feed(stream[i : i + 1])
    assert events == [b'{"a":\n1}', b"2", b"3"]
