"""Pushing envelopes to the dashboard (mcptax.proxy.push) against a real loopback receiver."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcptax.proxy.push import PushSink
from tests.helpers import free_port, wait_until
from tests.mcptax.proxy.support import ECHO, run_proxy

pytestmark = pytest.mark.timeout(90)


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
        # All four are buffered at once, so an unheld call would leave in the first batch with ping.
        sink.write_lines([ping, call, server_ask, client_answer])
        wait_until(lambda: receiver.bodies, timeout=30, message="the first batch")
        with receiver.lock:
            assert receiver.bodies == [ping], "the call waits for its response"
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
        wait_until(lambda: receiver.bodies, timeout=30, message="the held call to be released")
        assert receiver.bodies == [call]
        sink.close()
