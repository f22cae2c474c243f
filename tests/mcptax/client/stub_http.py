"""A hand-written Streamable HTTP server of the handshake era for the fast-path tests: it records
every request (method, headers, body) and answers ``tools/list`` the way a scenario says (JSON,
SSE with framing a parser must get right, an HTTP error, a malformed event, a redirect, a request
to the client), so each test can compare what the SDK and the fast path sent and concluded."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOLS = [
    {"name": "b_tool", "inputSchema": {"type": "object", "properties": {"z": {}, "a": {}}}, "x-extra": 1},
    {"name": "a_tool", "description": "Two\nlines é", "inputSchema": {"type": "object"}},
]
HANDSHAKE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}, "prompts": {}},
    "serverInfo": {"name": "stub", "version": "3.1", "title": "Stub"},
    "instructions": "Use the stub.",
}
PROMPTS = {"prompts": [{"name": "p1", "arguments": [{"name": "x"}]}, {"name": "p2"}]}


@dataclass
class Stub:
    """What the server answers (``scenario``) and what it was sent (``requests``)."""

    scenario: str = "json"
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def posts(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["method"] in ("POST", "DELETE")]


def _sse(*payloads: str) -> bytes:
    return "".join(payloads).encode()


def _tools_answer(stub: Stub, request_id: Any) -> tuple[int, str, bytes]:
    answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    if stub.scenario == "json":
        return 200, "application/json", answer.encode()
    if stub.scenario == "sse":
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        # A comment, a priming event, a notification, then the answer split over two data lines
        # with CRLF line ends: every rule of the framing at once.
        half = len(answer) // 2
        return (
            200,
            "text/event-stream",
            _sse(
                ": keep-alive\r\n\r\n",
                "id: 1\r\ndata:\r\n\r\n",
                f"event: message\r\ndata: {note}\r\n\r\n",
                f"data: {answer[:half]}\r\ndata:{answer[half:]}\r\n\r\n",
            ),
        )
    if stub.scenario == "bad_sse":
        return 200, "text/event-stream", _sse("data: {this is not json\n\n")
    if stub.scenario == "asks":
        ask = json.dumps({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
        return 200, "text/event-stream", _sse(f"data: {ask}\n\n", f"data: {answer}\n\n")
    if stub.scenario.startswith("status_"):
        return int(stub.scenario.removeprefix("status_")), "text/plain", b"no"
    if stub.scenario == "text":
        return 200, "text/plain", answer.encode()
    raise AssertionError(stub.scenario)


def _answer(stub: Stub, message: dict[str, Any]) -> tuple[int, str, bytes]:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return 202, "application/json", b""
    if method == "tools/list":
        return _tools_answer(stub, request_id)
    if method == "initialize":
        result: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": HANDSHAKE}
    elif method == "prompts/list":
        result = {"jsonrpc": "2.0", "id": request_id, "result": PROMPTS}
    else:
        result = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32601, "message": "Method not found"},
        }
    return 200, "application/json", json.dumps(result).encode()


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _record(self, body: bytes) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            # As sent: names in their case and order (the dict above is for reading).
            raw = list(self.headers.items())
            stub.requests.append({"method": self.command, "headers": headers, "raw": raw, "body": body})

        def _reply(self, status: int, content_type: str, body: bytes, extra: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if "Content-Length" not in extra:
                self.send_header("Content-Length", str(len(body)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._record(body)
            message = json.loads(body)
            if stub.scenario == "redirect" and message.get("method") == "tools/list":
                self._reply(307, "text/plain", b"", {"Location": "http://127.0.0.1:9/elsewhere"})
                return
            if stub.scenario == "cut_sse" and message.get("method") == "tools/list":
                # Headers promising more than is sent, half an event, and the connection closed.
                self.close_connection = True
                self._reply(200, "text/event-stream", b'data: {"jsonrpc": "2.0", ', {"Content-Length": "500"})
                return
            status, content_type, answer = _answer(stub, message)
            extra = {"Mcp-Session-Id": "session-7"}
            if message.get("method") == "initialize":
                extra["Set-Cookie"] = "poll=1; Path=/"
            self._reply(status, content_type, answer, extra)

        def do_GET(self) -> None:
            self._record(b"")
            self._reply(405, "text/plain", b"", {})

        def do_DELETE(self) -> None:
            self._record(b"")
            self._reply(200, "application/json", b"", {})

    return Handler


@contextlib.contextmanager
def serve(scenario: str = "json") -> Iterator[Stub]:
    stub = Stub(scenario)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
