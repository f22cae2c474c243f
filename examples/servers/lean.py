"""files-lean: the same file server cut down to four coarse tools plus an on-demand ``help``.

This is the "after" picture: short descriptions (details live behind ``help``), and a ``write``
that follows the bulk-argument recommendations: it accepts the content *or* a reference (``path``
to a file inside the root, or an allow-listed ``url``), refuses over-size input instead of
truncating it, checks ``expected_sha256`` and answers ``isError: true`` on a mismatch, and reports
bytes, lines and sha256 of exactly what it wrote, both as ``structuredContent`` and as JSON text.

Environment: ``MCP_EXAMPLE_URL_ALLOWLIST`` (comma-separated ``host`` or ``host:port`` entries that
``url`` may fetch from; empty by default, so no URL is fetched), ``MCP_EXAMPLE_MAX_BYTES`` (largest
accepted input, default 1 MiB), plus the common ``MCP_EXAMPLE_ROOT`` / ``MCP_EXAMPLE_GROWN``.

Run: ``python -m examples.servers.lean --transport stdio|http [--port N] [--root DIR] [--grown]
[--max-bytes N]``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from urllib.parse import urljoin, urlsplit

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from examples.servers._common import (
    Sandbox,
    build_arg_parser,
    count_lines,
    parse_options,
    root_directory,
    run_server,
    sha256_hex,
)

SERVER_NAME = "files-lean"
VERSION = "2.0.0"
GROWN_VERSION = "2.1.0"
DEFAULT_MAX_BYTES = 1024 * 1024
ENV_MAX_BYTES = "MCP_EXAMPLE_MAX_BYTES"
ENV_URL_ALLOWLIST = "MCP_EXAMPLE_URL_ALLOWLIST"
MAX_REDIRECTS = 5
URL_TIMEOUT_SECONDS = 10.0
MAX_LISTED = 2000

HELP_TOPICS: dict[str, str] = {
    "overview": (
        "files-lean serves the files under one root directory with four tools: read, write, list and "
        "search. Every path is relative to the root (absolute paths must point inside it); paths that "
        "escape the root, including through symbolic links, are refused. Call help with one of the "
        "topics read, write, references, integrity, limits, list, search for details."
    ),
    "read": (
        "read(path, offset=0, length=0): returns the file's text decoded as UTF-8. offset and length "
        "are in bytes; length 0 means 'to the end'. Invalid UTF-8 is an error rather than being "
        "replaced, so what you see is what is stored."
    ),
    "write": (
        "write(target, content='', path='', url='', expected_sha256='', append=false): writes the "
        "destination file 'target'. Give the new text as 'content', or - preferably - give a "
        "reference instead: 'path' names a file inside the root to copy from, 'url' an http(s) "
        "address on the allow-list. With a reference the bytes never pass through the model, so "
        "they cannot be mistyped and cost no output tokens. See help('integrity') and help('limits')."
    ),
    "references": (
        "A reference is 'path' (a file inside the root) or 'url'. URLs are fetched only from hosts "
        f"listed in the server's {ENV_URL_ALLOWLIST} setting (empty by default, so no URL is fetched); "
        "a redirect is followed only when it stays on an allowed host, at most "
        f"{MAX_REDIRECTS} times. Give exactly one of content, path or url."
    ),
    "integrity": (
        "Every successful write answers with bytes, lines and sha256 of exactly the bytes written "
        "(sha256 is the same as 'shasum -a 256 FILE'). Pass expected_sha256 (hex) to have the server "
        "check the input before writing: on a mismatch nothing is written and the result has "
        "isError: true, with both digests. lines counts newline-terminated lines plus an unterminated "
        "last line."
    ),
    "limits": (
        "Input larger than the server's max-bytes setting (1 MiB unless configured otherwise) is "
        "refused with isError: true and nothing is written. The server never truncates input."
    ),
    "list": (
        "list(path='.', recursive=false, pattern='*'): one entry per line, directories with a "
        "trailing '/', files with their size. pattern is a glob matched against entry names."
    ),
    "search": (
        "search(query, path='.', in_contents=true, ignore_case=false): with in_contents, lines "
        "containing query as 'path:line: text'; otherwise paths whose names match query as a glob."
    ),
}

# Optional string arguments default to "" rather than None on purpose: MCPServer JSON-decodes a
# string argument whose annotation is not exactly `str` (so "null" or "[1]" would not arrive as
# the text that was sent), which would break the byte-exact promise of `write`.
TargetArg = Annotated[str, Field(description="Destination file, relative to the root.")]
ContentArg = Annotated[
    str, Field(description="The full text to write. Prefer path or url when the text exists.")
]
RefPathArg = Annotated[str, Field(description="Reference: a file inside the root to copy the bytes from.")]
RefUrlArg = Annotated[
    str, Field(description="Reference: an allow-listed http(s) URL to fetch the bytes from.")
]
ExpectedArg = Annotated[str, Field(description="Hex sha256 the input must have; mismatch writes nothing.")]


@dataclass
class LeanSettings:
    max_bytes: int = DEFAULT_MAX_BYTES
    url_allowlist: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, max_bytes: int | None = None) -> LeanSettings:
        if max_bytes is None:
            max_bytes = int(os.environ.get(ENV_MAX_BYTES) or DEFAULT_MAX_BYTES)
        raw = os.environ.get(ENV_URL_ALLOWLIST, "")
        allow = tuple(entry.strip().lower() for entry in raw.split(",") if entry.strip())
        return cls(max_bytes=max_bytes, url_allowlist=allow)


class InputRefused(Exception):
    """The input cannot be accepted; carries the structured reason for the isError result."""

    def __init__(self, details: dict[str, object]) -> None:
        super().__init__(str(details.get("message", "")))
        self.details = details


def _result(payload: dict[str, object], *, is_error: bool = False) -> CallToolResult:
    # Same figures twice: structured for clients that read it, JSON text for those that don't.
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error
    )


def host_allowed(url: str, allowlist: Sequence[str]) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname.lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host in allowlist or f"{host}:{port}" in allowlist


def fetch_url(url: str, settings: LeanSettings) -> bytes:
    """Fetch ``url`` without ever leaving the allow-list and without reading past the size limit."""
    current = url
    with httpx.Client(follow_redirects=False, timeout=URL_TIMEOUT_SECONDS) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            if not host_allowed(current, settings.url_allowlist):
                raise InputRefused(
                    {
                        "error": "url_not_allowed",
                        "message": f"{current} is not on the server's URL allow-list",
                        "url": current,
                    }
                )
            with client.stream("GET", current) as response:
                if response.is_redirect:
                    current = urljoin(current, response.headers.get("location", ""))
                    continue
                if response.status_code != 200:
                    raise InputRefused(
                        {
                            "error": "url_failed",
                            "message": f"GET {current} answered HTTP {response.status_code}",
                            "url": current,
                        }
                    )
                received = bytearray()
                for chunk in response.iter_bytes():
                    received += chunk
                    if len(received) > settings.max_bytes:
                        raise _too_large(None, settings.max_bytes, source="url")
                return bytes(received)
    raise InputRefused({"error": "too_many_redirects", "message": f"more than {MAX_REDIRECTS} redirects"})


def _too_large(size: int | None, limit: int, *, source: str) -> InputRefused:
    seen = f"{size} bytes" if size is not None else f"more than {limit} bytes"
    return InputRefused(
        {
            "error": "too_large",
            "message": f"input from {source} is {seen}; the limit is {limit} bytes; nothing was written",
            "bytes": size,
            "max_bytes": limit,
            "source": source,
        }
    )


def build_server(root: Path, *, grown: bool = False, settings: LeanSettings | None = None) -> MCPServer:
    sandbox = Sandbox(root)
    settings = settings or LeanSettings.from_env()
    server = MCPServer(
        SERVER_NAME,
        title="Lean file server",
        version=GROWN_VERSION if grown else VERSION,
        instructions="Files under one root. Call help(topic) for details instead of guessing.",
    )

    def load_input(content: str, path: str, url: str) -> tuple[bytes, str]:
        given = [name for name, value in (("path", path), ("url", url)) if value]
        if content and given:
            raise ToolError(f"give content or a reference ({', '.join(given)}), not both")
        if len(given) > 1:
            raise ToolError("give one reference: path or url")
        if path:
            source = sandbox.resolve(path)
            if not source.is_file():
                raise ToolError(f"reference {path!r} is not an existing file")
            size = source.stat().st_size
            if size > settings.max_bytes:
                raise _too_large(size, settings.max_bytes, source="path")
            with source.open("rb") as handle:
                # Read one byte past the limit: the file may have grown since the stat.
                data = handle.read(settings.max_bytes + 1)
            if len(data) > settings.max_bytes:
                raise _too_large(None, settings.max_bytes, source="path")
            return data, "path"
        if url:
            return fetch_url(url, settings), "url"
        data = content.encode("utf-8")
        if len(data) > settings.max_bytes:
            raise _too_large(len(data), settings.max_bytes, source="content")
        return data, "content"

    @server.tool(description="Read a file's text (UTF-8), optionally a byte range. See help('read').")
    def read(
        path: Annotated[str, Field(description="File to read, relative to the root.")],
        offset: Annotated[int, Field(ge=0, description="Start byte.")] = 0,
        length: Annotated[int, Field(ge=0, description="Bytes to read; 0 = to the end.")] = 0,
    ) -> str:
        real = sandbox.resolve(path)
        if not real.is_file():
            raise ToolError(f"{path!r} is not an existing file")
        with real.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(length or -1)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(f"{path!r} is not valid UTF-8 in that range: {exc}") from exc

    @server.tool(
        description=(
            "Write a file from content, or from a reference: path (a file in the root) or url. Prefer the "
            "reference when the text already exists: it is exact and costs no output tokens. Pass "
            "expected_sha256 to have the input verified. Returns bytes, lines and sha256 of what was "
            "written. Over-size input is refused, never truncated. See help('write')."
        ),
        structured_output=False,
    )
    def write(
        target: TargetArg,
        content: ContentArg = "",
        path: RefPathArg = "",
        url: RefUrlArg = "",
        expected_sha256: ExpectedArg = "",
        append: Annotated[bool, Field(description="Append instead of replacing.")] = False,
    ) -> CallToolResult:
        if not target:
            raise ToolError("target is required")
        destination = sandbox.resolve(target)
        if not destination.parent.is_dir():
            raise ToolError(f"the parent directory of {target!r} does not exist")
        if destination.is_dir():
            raise ToolError(f"{target!r} is a directory")
        try:
            data, source = load_input(content, path, url)
        except InputRefused as refused:
            return _result({**refused.details, "written": False}, is_error=True)
        figures: dict[str, object] = {
            "target": sandbox.relative(destination),
            "source": source,
            "bytes": len(data),
            "lines": count_lines(data),
            "sha256": sha256_hex(data),
        }
        expected = expected_sha256.strip().lower()
        if expected and expected != figures["sha256"]:
            return _result(
                {
                    **figures,
                    "error": "sha256_mismatch",
                    "message": "the input does not have the expected sha256; nothing was written",
                    "expected_sha256": expected,
                    "written": False,
                },
                is_error=True,
            )
        with destination.open("ab" if append else "wb") as handle:
            handle.write(data)
        return _result({**figures, "appended": append, "written": True})

    @server.tool(
        name="list",
        description="List a directory (optionally recursive, filtered by glob). See help('list').",
    )
    def list_entries(
        path: Annotated[str, Field(description="Directory, relative to the root.")] = ".",
        recursive: Annotated[bool, Field(description="Include all levels below.")] = False,
        pattern: Annotated[str, Field(description="Glob on entry names.")] = "*",
    ) -> str:
        start = sandbox.resolve(path)
        if not start.is_dir():
            raise ToolError(f"{path!r} is not an existing directory")
        entries = sorted(start.rglob("*") if recursive else start.iterdir())
        lines = []
        for entry in entries:
            if not fnmatch.fnmatchcase(entry.name, pattern):
                continue
            name = sandbox.relative(entry)
            lines.append(f"{name}/" if entry.is_dir() else f"{name} ({entry.lstat().st_size} bytes)")
            if len(lines) >= MAX_LISTED:
                lines.append(f"... cut off after {MAX_LISTED} entries")
                break
        return "\n".join(lines) if lines else "(nothing)"

    @server.tool(description="Search file contents for text, or file names by glob. See help('search').")
    def search(
        query: Annotated[str, Field(min_length=1, description="Text to find, or a name glob.")],
        path: Annotated[str, Field(description="Directory to search, relative to the root.")] = ".",
        in_contents: Annotated[bool, Field(description="Search inside files (else names).")] = True,
        ignore_case: Annotated[bool, Field(description="Case-insensitive match.")] = False,
    ) -> str:
        start = sandbox.resolve(path)
        if not start.is_dir():
            raise ToolError(f"{path!r} is not an existing directory")
        hits: list[str] = []
        needle = query.lower() if ignore_case else query
        for entry in sorted(start.rglob("*")):
            if not in_contents:
                name = entry.name.lower() if ignore_case else entry.name
                if fnmatch.fnmatchcase(name, needle):
                    hits.append(sandbox.relative(entry))
            elif entry.is_file():
                try:
                    text = entry.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                for number, line in enumerate(text.splitlines(), start=1):
                    if needle in (line.lower() if ignore_case else line):
                        hits.append(f"{sandbox.relative(entry)}:{number}: {line}")
            if len(hits) >= MAX_LISTED:
                break
        return "\n".join(hits[:MAX_LISTED]) if hits else "(no matches)"

    @server.tool(
        name="help",
        description="Detailed usage of this server. Topics: overview, read, write, references, integrity.",
    )
    def show_help(
        topic: Annotated[str, Field(description="Topic name; 'overview' lists them all.")] = "overview",
    ) -> str:
        text = HELP_TOPICS.get(topic.strip().lower())
        if text is None:
            return f"Unknown topic {topic!r}. Topics: {', '.join(HELP_TOPICS)}."
        return text

    if grown:
        add_grown_tools(server, sandbox)
    return server


def add_grown_tools(server: MCPServer, sandbox: Sandbox) -> None:
    """The 2.1.0 release: two more coarse tools."""

    @server.tool(description="Move or rename a file or directory inside the root. Refuses to overwrite.")
    def move(
        source: Annotated[str, Field(description="Existing path, relative to the root.")],
        destination: Annotated[str, Field(description="New path, relative to the root.")],
    ) -> str:
        src = sandbox.resolve(source)
        dst = sandbox.resolve(destination)
        if not src.exists() or src == sandbox.root:
            raise ToolError(f"{source!r} cannot be moved")
        if dst.exists():
            raise ToolError(f"{destination!r} already exists")
        shutil.move(src, dst)
        return f"moved to {sandbox.relative(dst)}"

    @server.tool(description="Delete a file or an empty directory inside the root.")
    def delete(path: Annotated[str, Field(description="Path to delete, relative to the root.")]) -> str:
        real = sandbox.resolve(path)
        if real == sandbox.root or not real.exists():
            raise ToolError(f"{path!r} cannot be deleted")
        if real.is_dir():
            try:
                real.rmdir()
            except OSError as exc:
                raise ToolError(f"{path!r} is not empty") from exc
        else:
            real.unlink()
        return f"deleted {path}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_arg_parser("files-lean: an example MCP file server with coarse tools", with_max_bytes=True)
    options = parse_options(parser, argv)
    settings = LeanSettings.from_env(options.max_bytes)
    with root_directory(options.root) as root:
        run_server(build_server(root, grown=options.grown, settings=settings), options)


if __name__ == "__main__":
    main()
