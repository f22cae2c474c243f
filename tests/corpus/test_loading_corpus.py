"""Loading modes over the real-server corpus: every mode's parts add up, and every figure equals the
text docs/methodology.md describes, rendered here and counted with tiktoken directly."""

from __future__ import annotations

import pytest

from mcptax import loading
from tests.corpus.conftest import CAPTURES, load_capture
from tests.corpus.test_profiles_corpus import SERVER, oracle_render
from tests.helpers import compact, tiktoken_reference

ENCODINGS = ("cl100k_base", "o200k_base")
PREFIX = "mcp__corpus_server__"


def _instructions(document: dict) -> str | None:
    return (document.get("initialize") or {}).get("instructions")


def profile_of(client: str) -> str:
    """The rendering each client's full definitions take (docs/methodology.md, client presets)."""
    return {
        "claude-code": "claude",
        "anthropic-api": "claude",
        "openai-tool-search": "openai",
        "codex": "openai",
    }.get(client, "mcp")


def _expected(client: str, mode: str, tools: list[dict], instructions: str | None, enc) -> int:
    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    instr = n(instructions) if instructions else 0
    if mode == "eager":
        return n(compact(oracle_render(profile_of(client), tools))) + instr
    if client == "claude-code":
        names = "".join(PREFIX + t["name"] + "\n" for t in tools)
        listing = "<available-deferred-tools>\n" + names + "</available-deferred-tools>"
        return n(listing) + n(compact(loading.CLAUDE_CODE_TOOL_SEARCH)) + instr
    if client == "anthropic-api":
        return n('{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}') + instr
    return n('{"type":"namespace","name":"mcp__corpus_server"}') + n('{"type":"tool_search"}') + instr


def _parts(f: loading.ModeFigures) -> dict[str, int]:
    return {
        "server_entry": f.server_entry,
        "search_tool": f.search_tool,
        "instructions": f.instructions,
        "overhead": f.overhead,
    }


def _expected_parts(
    client: str, mode: str, tools: list[dict], instructions: str | None, enc
) -> dict[str, int]:
    """Each part of a mode from its own text: what no tool owns is the whole text less the tools'."""

    def n(text: str) -> int:
        return len(enc.encode_ordinary(text))

    parts = {"server_entry": 0, "search_tool": 0, "instructions": n(instructions) if instructions else 0}
    if mode == "eager":
        rendered = oracle_render(profile_of(client), tools)
        parts["overhead"] = n(compact(rendered)) - sum(n(compact(t)) for t in rendered)
    elif client == "claude-code":
        names = [PREFIX + t["name"] + "\n" for t in tools]
        listing = "<available-deferred-tools>\n" + "".join(names) + "</available-deferred-tools>"
        parts["search_tool"] = n(compact(loading.CLAUDE_CODE_TOOL_SEARCH))
        parts["overhead"] = n(listing) - sum(n(name) for name in names)
    elif client == "anthropic-api":
        parts["search_tool"] = n('{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}')
        parts["overhead"] = 0
    else:
        parts["server_entry"] = n('{"type":"namespace","name":"mcp__corpus_server"}')
        parts["search_tool"] = n('{"type":"tool_search"}')
        parts["overhead"] = 0
    return parts


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("client", loading.CLIENTS)
@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_mode_adds_up_and_matches_its_text(path, client, encoding):
    document = load_capture(path)
    tools, instructions = document["tools"], _instructions(document)
    enc = tiktoken_reference(encoding)
    figures = loading.server_figures(
        tools, client, server=SERVER, instructions=instructions, encoding=encoding
    )
    for mode, f in figures.modes.items():
        assert f.upfront == f.parts_sum(), (mode, f)
        assert f.upfront == _expected(client, str(mode), tools, instructions, enc)
        assert list(f.tools) == [t["name"] for t in tools]
        assert _parts(f) == _expected_parts(client, str(mode), tools, instructions, enc)
        if mode == loading.Mode.EAGER:  # each tool's part: its own full definition
            own = [len(enc.encode_ordinary(compact(t))) for t in oracle_render(profile_of(client), tools)]
            assert list(f.tools.values()) == own
    deferred = figures.modes.get(loading.Mode.DEFERRED)
    if deferred is None:
        assert client in ("cursor", "vscode", "codex", "opencode")
        return
    profile = "openai" if client == "openai-tool-search" else "claude"
    for tool in tools:
        rendered = compact(oracle_render(profile, [tool])[0])
        assert deferred.load_tokens[tool["name"]] == len(enc.encode_ordinary(rendered))
        if client == "claude-code":
            assert deferred.tools[tool["name"]] == len(enc.encode_ordinary(PREFIX + tool["name"] + "\n"))
        else:
            assert deferred.tools[tool["name"]] == 0


@pytest.mark.parametrize("client", ["claude-code", "anthropic-api", "openai-tool-search"])
def test_the_whole_corpus_as_one_stack_adds_up_server_by_server(client):
    servers = [
        loading.ServerTools(path.stem, load_capture(path)["tools"], _instructions(load_capture(path)))
        for path in CAPTURES
    ]
    stack = loading.stack_figures(servers, client)
    enc = tiktoken_reference("cl100k_base")
    for mode, total in stack.modes.items():
        rows = [s.modes[mode] for s in stack.servers]
        assert total.upfront == sum(r.upfront for r in rows) == total.parts_sum()
        assert all(r.upfront == r.parts_sum() for r in rows)
    # The search tool is counted once for the stack, not once per server.
    search = {"claude-code": compact(loading.CLAUDE_CODE_TOOL_SEARCH)}.get(
        client,
        compact(loading.ANTHROPIC_TOOL_SEARCH if client == "anthropic-api" else loading.OPENAI_TOOL_SEARCH),
    )
    assert stack.modes[loading.Mode.DEFERRED].search_tool == len(enc.encode_ordinary(search))
