"""Test MCP server: its tool reports the sha256 of exactly the text it received.

stdio by default; `--http PORT` serves Streamable HTTP on 127.0.0.1:PORT at /mcp.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo-hash", version="1.0.0")


@server.tool()
def digest(text: str) -> dict[str, object]:
    """Return the sha256, byte count and line count of `text` as received."""
    data = text.encode("utf-8")
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    print("echo-hash server starting", file=sys.stderr, flush=True)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
