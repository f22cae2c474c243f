"""Test MCP server of the handshake era that asks the client something before it answers.

It sends a ``ping`` request to the client as soon as it has answered ``initialize``, and answers
``tools/list`` only once the client has answered that ping (as a client must). Two tools, one of
them with a ``null`` title, which the SDK's models accept.
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "ask", "description": "Asks first.", "inputSchema": {"type": "object"}},
    {"name": "untitled", "title": None, "inputSchema": {"type": "object", "properties": {}}},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    pinged = False
    waiting: list[dict[str, object]] = []
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None and request_id == "server-ping":
            pinged = True
            for request in waiting:
                send({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": TOOLS}})
            waiting.clear()
        elif method == "server/discover":
            send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
            )
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "asks-first", "version": "1.0"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
            send({"jsonrpc": "2.0", "id": "server-ping", "method": "ping"})
        elif method == "tools/list":
            if pinged:
                send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
            else:
                waiting.append(message)
        elif request_id is not None:
            send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
            )


if __name__ == "__main__":
    main()
