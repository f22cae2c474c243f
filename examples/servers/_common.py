"""Shared plumbing for the example MCP servers: command line, sandboxed paths, running.

The examples exist to give the dashboard real servers to poll (fixed tax, releases, paging) and
real bulk-argument traffic to capture. They are deliberately small but behave correctly: every
file tool is confined to one root directory.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ListToolsResult, PaginatedRequestParams

ENV_GROWN = "MCP_EXAMPLE_GROWN"
ENV_ROOT = "MCP_EXAMPLE_ROOT"
HTTP_PATH = "/mcp"
SSE_PATH = "/sse"


@dataclass
class ServerOptions:
    transport: str
    host: str
    port: int
    root: str | None
    grown: bool
    page_size: int | None
    max_bytes: int | None


def build_arg_parser(description: str, *, with_max_bytes: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--transport",
        choices=["stdio", "http", "sse"],
        default="stdio",
        help=f"stdio, Streamable HTTP at {HTTP_PATH}, or the legacy SSE transport at {SSE_PATH}",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--root",
        default=None,
        help=f"directory the file tools are confined to (env {ENV_ROOT}); default: a fresh temporary "
        "directory, removed when the server exits",
    )
    parser.add_argument(
        "--grown",
        action="store_true",
        default=None,
        help=f"serve the next release, with more tools (env {ENV_GROWN}=1)",
    )
    parser.add_argument(
        "--page-size",
        type=int,
        default=None,
        help="split tools/list into pages of N tools linked by nextCursor",
    )
    if with_max_bytes:
        parser.add_argument("--max-bytes", type=int, default=None, help="largest accepted bulk input")
    return parser


def parse_options(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> ServerOptions:
    ns = parser.parse_args(argv)
    grown = ns.grown if ns.grown is not None else os.environ.get(ENV_GROWN, "") not in ("", "0", "false")
    if ns.page_size is not None and ns.page_size < 1:
        parser.error("--page-size must be at least 1")
    return ServerOptions(
        transport=ns.transport,
        host=ns.host,
        port=ns.port,
        root=ns.root or os.environ.get(ENV_ROOT) or None,
        grown=grown,
        page_size=ns.page_size,
        max_bytes=getattr(ns, "max_bytes", None),
    )


@contextlib.contextmanager
def root_directory(configured: str | None) -> Iterator[Path]:
    """Yield the sandbox root; a temporary one (the default) is removed afterwards.

    The default is a temporary directory rather than the working directory because these servers
    have write and delete tools: started by accident from a checkout, they must not touch it.
    """
    if configured:
        root = Path(configured).expanduser()
        root.mkdir(parents=True, exist_ok=True)
        yield root.resolve()
        return
    temp = tempfile.mkdtemp(prefix="mcp-example-root-")
    try:
        yield Path(temp).resolve()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


class Sandbox:
    """Maps tool-supplied paths into one root directory and refuses everything else."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, path: str) -> Path:
        """Return the real path for ``path`` (relative to the root, or absolute inside it).

        Resolving symlinks before the containment check is what stops a link that points out of
        the root; ``..`` segments are resolved away by the same step.
        """
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        real = candidate.resolve(strict=False)
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(f"path {path!r} is outside the server's root directory")
        return real

    def relative(self, real: Path) -> str:
        rel = real.relative_to(self.root).as_posix()
        return rel if rel else "."


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def count_lines(data: bytes) -> int:
    """Lines as an editor counts them: newline-terminated lines plus an unterminated last one."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def install_paging(server: MCPServer, page_size: int) -> None:
    """Serve tools/list in pages of ``page_size`` tools linked by an opaque ``nextCursor``.

    MCPServer always answers with one page, so the example replaces the low-level handler; the
    cursor is just the next offset, which is enough to exercise a client's cursor following.
    """

    async def list_tools_paged(_ctx: Any, params: PaginatedRequestParams) -> ListToolsResult:
        tools = await server.list_tools()
        start = 0
        if params.cursor:
            try:
                start = int(params.cursor.removeprefix("offset-"))
            except ValueError:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown cursor {params.cursor!r}") from None
        end = start + page_size
        next_cursor = f"offset-{end}" if end < len(tools) else None
        return ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)

    # The low-level server is the only place a tools/list handler can be replaced.
    server._lowlevel_server.add_request_handler("tools/list", PaginatedRequestParams, list_tools_paged)


def run_server(server: MCPServer, options: ServerOptions) -> None:
    if options.page_size:
        install_paging(server, options.page_size)
    if options.transport == "stdio":
        server.run("stdio")
    elif options.transport == "sse":
        server.run("sse", host=options.host, port=options.port, sse_path=SSE_PATH)
    else:
        server.run(
            "streamable-http",
            host=options.host,
            port=options.port,
            streamable_http_path=HTTP_PATH,
        )
