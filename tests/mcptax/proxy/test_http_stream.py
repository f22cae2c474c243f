"""The proxy's HTTP mode with request bodies too large to hold: streamed to the upstream as they
arrive, relayed byte for byte, and logged as a `truncated` frame with the whole body's digest."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from mcptax.formats import ObservedCall, read_calls
from mcptax.proxy.http import LOGGED_PREFIX, MAX_LOGGED_BODY
from tests.helpers import free_port, wait_for_port, wait_until
from tests.mcptax.proxy.support import PROXY, read_log, running

pytestmark = pytest.mark.timeout(180)

CHUNK = 1024 * 1024


class Received:
    """What the upstream has read so far, visible to the test while the request is in flight."""

    def __init__(self) -> None:
        self.bytes = 0


def _upstream(received: Received) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            digest = hashlib.sha256()
            while received.bytes < length:
                chunk = self.rfile.read(min(CHUNK, length - received.bytes))
                if not chunk:
                    break
                digest.update(chunk)
                received.bytes += len(chunk)
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "result": {"sha256": digest.hexdigest(), "bytes": received.bytes}}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)


def _big_request(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"'
    tail = b'"}}}'
    line = b"0123456789abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\\n"
    middle = (line * (size // len(line) + 1))[: size - len(head) - len(tail)]
    return head + middle + tail


def test_a_large_request_is_streamed_to_the_upstream_byte_identical(tmp_path: Path) -> None:
    body = _big_request(MAX_LOGGED_BODY + 8 * CHUNK)
    received = Received()
    upstream = _upstream(received)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    log_path, proxy_port = tmp_path / "log.jsonl", free_port()
    cmd = [*PROXY, "--server-label", "big", "--log", str(log_path), "--listen", f"127.0.0.1:{proxy_port}"]
    cmd += ["--upstream", f"http://127.0.0.1:{upstream.server_address[1]}/mcp"]

    def sent() -> Iterator[bytes]:
        first = 8 * CHUNK
        yield body[:first]
        # A proxy that buffered the whole request would pass nothing on before the last byte:
        # the upstream must already be reading while most of the body is still with the client.
        wait_until(lambda: received.bytes >= CHUNK, timeout=60, message="the upstream to get the first bytes")
        for start in range(first, len(body), CHUNK):
            yield body[start : start + CHUNK]

    try:
        with running(cmd) as proxy:
            wait_for_port(proxy_port, proxy)
            response = httpx.post(
                f"http://127.0.0.1:{proxy_port}/mcp",
                content=sent(),
                headers={"Content-Length": str(len(body)), "Content-Type": "application/json"},
                timeout=120,
            )
            proxy.terminate()
            assert proxy.wait(15) == 0
    finally:
        upstream.shutdown()
        upstream.server_close()

    assert response.status_code == 200
    assert response.json()["result"] == {"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}
    (request,) = [e for e in read_log(log_path) if e["direction"] == "c2s"]
    # Too large to keep whole: its head (id, method, tool name) and the digest of all of it.
    assert request["truncated"] is True and request["raw"] is None
    assert request["body_bytes"] == len(body)
    assert request["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert request["text"].encode() == body[:LOGGED_PREFIX]
    # The ingest side reads it as the call it was, marked as cut by the capture (not the agent).
    with open(log_path, "rb") as f:
        (call,) = [c for c in read_calls(f, "envelope") if isinstance(c, ObservedCall)]
    assert call.tool == "write_file" and call.capture_truncated
