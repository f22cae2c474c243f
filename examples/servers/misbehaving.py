"""A deliberately broken MCP server, for fault tests of the poller.

It is written by hand rather than with the SDK, because the SDK will not misbehave on request. It
speaks just enough of the legacy handshake (it rejects ``server/discover`` so clients fall back to
``initialize``) to reach ``tools/list``, and then fails the way ``--mode`` says:

- ``hang``: never answers anything, not even ``initialize``; ignores stdin EOF (a stuck process).
- ``hang_tools``: completes the handshake, then never answers ``tools/list``.
- ``exit_mid``: exits while writing the ``tools/list`` answer (half a message, then exit code 3).
- ``invalid_json``: answers ``tools/list`` with a line that is not JSON.
- ``huge``: answers ``tools/list`` with a valid list of ``--huge-mb`` megabytes (default 24).
- ``hang_first``: like ``quirky``, except that the first process to be asked ``tools/list`` never
  answers it: with ``--tools-list-file F``, a process that finds no F creates it and hangs, later
  ones answer (so a poll killed mid-way can be shown to succeed when it is retried).
- ``open_stream`` (HTTP only; over stdio it answers as ``quirky``): answers as ``quirky``, each
  answer in an event stream that stays open after the answer, as a server may (the spec only says
  it SHOULD close it), so a client that waits for the stream's end never gets on.
- ``quirky``: answers correctly, but in two pages (``nextCursor``) of tools whose keys come in an
  unusual order with extension keys, so a client can prove it keeps exactly what was sent.

Run: ``python -m examples.servers.misbehaving --mode MODE [--transport stdio|http] [--port N]
[--pid-file F] [--spawn-child] [--ignore-sigterm] [--tools-list-file F]``. ``--pid-file`` records the
server's pid (and the grandchild's, with ``--spawn-child``) so tests can check nothing is left
running; ``--tools-list-file`` is created when a ``tools/list`` request arrives (stdio), so a test
knows the poll is waiting on it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

MODES = ("hang", "hang_tools", "hang_first", "exit_mid", "invalid_json", "huge", "quirky", "open_stream")
SERVER_INFO = {"name": "misbehaving", "version": "0.0.1"}
LEGACY_VERSION = "2025-11-25"
METHOD_NOT_FOUND = -32601
EXIT_MID_CODE = 3


# Key order and extra keys are deliberate: a client that re-serialises pydantic models loses both.
QUIRKY_PAGES: list[dict[str, Any]] = [
    {
        "tools": [
            {
                "inputSchema": {
                    "type": "object",
                    "properties": {"b": {"type": "number"}, "a": {"type": "string"}},
                },
                "name": "zeta",
                "x-vendor": {"weight": 1.5, "tags": ["b", "a"]},
                "description": "Described last <|endoftext|> on purpose.",
            },
            {"name": "alpha", "inputSchema": {"type": "object"}},
        ],
        "nextCursor": "page-2",
        "x-page-note": "first",
    },
    {
        "tools": [
            {
                "description": "Schema-first tool.",
                "name": "mid",
                "inputSchema": {"required": ["q"], "type": "object", "properties": {"q": {"type": "string"}}},
                "annotations": {"readOnlyHint": True},
            }
        ]
    },
]


def quirky_page(message: dict[str, Any]) -> dict[str, Any]:
    cursor = (message.get("params") or {}).get("cursor")
    return QUIRKY_PAGES[1] if cursor == "page-2" else QUIRKY_PAGES[0]


def huge_tools_result(megabytes: float) -> dict[str, Any]:
    """A valid tools/list result of roughly ``megabytes`` MB, so only its size is wrong."""
    filler = "This tool does something very specific and describes it at length. " * 58
    tools = []
    size = 0
    target = int(megabytes * 1024 * 1024)
    index = 0
    while size < target:
        tool = {
            "name": f"tool_{index:06d}",
            "description": filler,
            "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
        size += len(filler) + 90
        tools.append(tool)
        index += 1
    return {"tools": tools}


def answer_handshake(message: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC reply to a handshake-phase request, or None when it is not one."""
    method = message.get("method")
    request_id = message.get("id")
    if method == "server/discover":
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": METHOD_NOT_FOUND, "message": "Method not found: server/discover"},
        }
    if method == "initialize":
        requested = (message.get("params") or {}).get("protocolVersion") or LEGACY_VERSION
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "protocolVersion": requested,
                "capabilities": {"tools": {}},
                "serverInfo": SERVER_INFO,
            },
        }
    if method == "ping":
        return {"jsonrpc": "2.0", "id": request_id, "result": {}}
    return None


def tools_result(mode: str, message: dict[str, Any], huge_mb: float) -> dict[str, Any]:
    if mode == "huge":
        return huge_tools_result(huge_mb)
    if mode in ("quirky", "hang_first", "open_stream"):
        return quirky_page(message)
    return {"tools": []}


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def write_line(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def serve_stdio(mode: str, huge_mb: float, tools_list_file: str | None = None) -> None:
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if mode == "hang":
            continue
        if "id" not in message:
            continue  # notifications need no answer
        if message.get("method") != "tools/list":
            reply = answer_handshake(message)
            if reply is None:
                reply = {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {
                        "code": METHOD_NOT_FOUND,
                        "message": f"Method not found: {message.get('method')}",
                    },
                }
            write_line(json.dumps(reply).encode())
            continue
        first = not (tools_list_file and os.path.exists(tools_list_file))
        if tools_list_file:
            with open(tools_list_file, "w") as handle:
                handle.write(f"{message['id']}\n")
        if mode == "hang_tools" or (mode == "hang_first" and first):
            continue
        if mode == "invalid_json":
            write_line(b"this is not json {")
            continue
        result = tools_result(mode, message, huge_mb)
        line = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        if mode == "exit_mid":
            sys.stdout.buffer.write(line[: len(line) // 2])
            sys.stdout.buffer.flush()
            os._exit(EXIT_MID_CODE)
        write_line(line)
    if mode == "hang":
        sleep_forever()  # a stuck server does not notice that its stdin closed


def build_http_app(mode: str, huge_mb: float) -> Any:
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    async def endpoint(request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        message = json.loads(await request.body())
        if mode == "hang":
            await anyio.sleep_forever()
        if "id" not in message:
            return Response(status_code=202)
        if mode == "open_stream":
            reply = answer_handshake(message) or {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": tools_result(mode, message, huge_mb),
            }

            async def answer_then_stay_open() -> AsyncIterator[bytes]:
                yield b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n"
                await anyio.sleep_forever()

            return StreamingResponse(answer_then_stay_open(), media_type="text/event-stream")
        if message.get("method") != "tools/list":
            reply = answer_handshake(message) or {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"},
            }
            return JSONResponse(reply)
        if mode == "hang_tools":
            await anyio.sleep_forever()
        if mode == "invalid_json":
            return Response(b"this is not json {", media_type="application/json")
        result = tools_result(mode, message, huge_mb)
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        if mode == "exit_mid":

            async def half_then_die() -> AsyncIterator[bytes]:
                yield body[: len(body) // 2]
                await anyio.sleep(0.05)
                os._exit(EXIT_MID_CODE)

            return StreamingResponse(half_then_die(), media_type="application/json")
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])


def spawn_grandchild() -> int:
    # Stays in our process group, like a helper a real server might start.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    return child.pid


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An MCP server that fails on purpose")
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--huge-mb", type=float, default=24.0)
    parser.add_argument("--pid-file", default=None)
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--tools-list-file", default=None)
    options = parser.parse_args(argv)

    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = [os.getpid()]
    if options.spawn_child:
        pids.append(spawn_grandchild())
    if options.pid_file:
        with open(options.pid_file, "w") as handle:
            handle.write("\n".join(str(pid) for pid in pids) + "\n")

    if options.transport == "stdio":
        serve_stdio(options.mode, options.huge_mb, options.tools_list_file)
        return
    import uvicorn

    uvicorn.run(
        build_http_app(options.mode, options.huge_mb),
        host=options.host,
        port=options.port,
        log_level="warning",
        # Hanging handlers never finish; without a bound, a graceful stop would wait for them.
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
