"""Test MCP server that speaks both protocol eras and lists its tool differently in each.

In the 2026-07-28 revision (``server/discover``, every request stamped in ``_meta``) the tool's
schema lists ``sheet`` before ``range``; in the handshake era (``initialize``) ``range`` comes first
and the description is worded otherwise, as some real servers do across their two code paths.
"""

from __future__ import annotations

import json
import sys

MODERN = "2026-07-28"
META = "io.modelcontextprotocol/"
INFO = {"name": "two-eras", "version": "1.0"}
SHEET = {"type": "string", "description": "Sheet name"}
RANGE = {"type": "string", "description": "Cell range such as A1:C9"}
TOOLS = {
    "modern": [
        {
            "name": "read_sheet",
            "description": "Read cells from a workbook sheet",
            "inputSchema": {"type": "object", "properties": {"sheet": SHEET, "range": RANGE}},
        }
    ],
    "handshake": [
        {
            "name": "read_sheet",
            "description": "Read the cells of one sheet of a workbook.",
            "inputSchema": {"type": "object", "properties": {"range": RANGE, "sheet": SHEET}},
        }
    ],
}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(message: dict[str, object]) -> dict[str, object] | None:
    method, params = message.get("method"), message.get("params") or {}
    meta = params.get("_meta", {}) if isinstance(params, dict) else {}
    if method == "server/discover":
        return {
            "supportedVersions": [MODERN, "2025-11-25"],
            "capabilities": {"tools": {}},
            "resultType": "complete",
            "_meta": {META + "serverInfo": INFO},
        }
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": INFO}
    if method == "tools/list":
        modern = isinstance(meta, dict) and meta.get(META + "protocolVersion") == MODERN
        result: dict[str, object] = {"tools": TOOLS["modern" if modern else "handshake"]}
        if modern:
            result.update(resultType="complete", ttlMs=0, cacheScope="private")
        return result
    if method == "ping":
        return {}
    return None


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        request_id = message.get("id")
        if request_id is None:
            continue  # a notification
        result = answer(message)
        if result is None:
            error = {"code": -32601, "message": f"Method not found: {message.get('method')}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
