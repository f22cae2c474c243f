"""replay: serve a captured tools/list (tests/data/servers/<name>@<version>.json) as a real MCP server.

The tools go out exactly as captured: the same keys, in the same order, with whatever the real
server put in them (the SDK's Tool model would reorder keys and normalise values, so the tools/list
handler answers with the raw objects). serverInfo (name, title, version) and instructions come from
the capture's `initialize`. Used by `scripts/bench_poll.py --corpus` to poll the real-server corpus
without installing it, and by the tests to check that a poll of a capture gives its figures back.

Run: ``python -m examples.servers.replay CAPTURE.json --transport stdio|http|sse [--port N]
[--page-size N]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ListToolsResult, PaginatedRequestParams

from examples.servers._common import build_arg_parser, parse_options, run_server


def load_capture(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document.get("tools"), list):
        raise SystemExit(f"{path}: not a capture (no 'tools' array)")
    return document


def build_server(document: dict[str, Any], *, page_size: int | None = None) -> MCPServer:
    initialize = document.get("initialize") or {}
    info = initialize.get("serverInfo") or {}
    server = MCPServer(
        info.get("name") or "replay",
        title=info.get("title"),
        version=str(info.get("version") or ""),
        instructions=initialize.get("instructions"),
    )
    raw: list[dict[str, Any]] = document["tools"]
    size = page_size or max(len(raw), 1)

    def page(params: Any) -> tuple[int, int]:
        cursor = params.get("cursor") if isinstance(params, dict) else None
        start = 0
        if cursor:
            try:
                start = int(str(cursor).removeprefix("offset-"))
            except ValueError:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown cursor {cursor!r}") from None
        return start, start + size

    async def list_tools(_ctx: Any, params: PaginatedRequestParams) -> ListToolsResult:
        # The envelope only (cursor, resultType, _meta): the tools are put in by `raw_tools` below.
        _start, end = page(params.model_dump(exclude_none=True))
        return ListToolsResult(tools=[], next_cursor=f"offset-{end}" if end < len(raw) else None)

    async def raw_tools(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not isinstance(result, dict):
            return result
        start, end = page(ctx.params)
        return {**result, "tools": raw[start:end]}

    # The SDK validates a tools/list result against its Tool model, which reorders keys and drops
    # what it does not know; a middleware sees the wire form after that and restores the capture.
    server._lowlevel_server.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
    server.middleware.append(raw_tools)
    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_arg_parser("replay: serve a captured tools/list as an MCP server")
    parser.add_argument("capture", type=Path, help="a capture written by scripts/capture_servers.py")
    options = parse_options(parser, argv)
    capture = parser.parse_args(argv).capture
    # Paging is done here on the raw tools, not by run_server's paging over the SDK's models.
    page_size, options.page_size = options.page_size, None
    run_server(build_server(load_capture(capture), page_size=page_size), options)


if __name__ == "__main__":
    main()
