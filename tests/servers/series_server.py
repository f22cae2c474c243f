"""Test MCP server with an array-taking tool: ``load_series`` reports how many values arrived and
the sha256 of their canonical JSON (what a careful server would report). stdio only."""

from __future__ import annotations

import hashlib
import json

from mcp.server.mcpserver import MCPServer

server = MCPServer("series", version="1.0.0")


@server.tool()
def load_series(name: str, values: list[int]) -> dict[str, object]:
    """Store a series of integers under `name`; returns the count and sha256 of what arrived."""
    canonical = json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return {"name": name, "count": len(values), "sha256": hashlib.sha256(canonical).hexdigest()}


if __name__ == "__main__":
    server.run("stdio")
