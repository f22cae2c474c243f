"""mcptax.loading on small hand-made servers: every figure below is tiktoken's count of a text
written out here from docs/methodology.md, never a call into mcptax's counting."""

from __future__ import annotations

import pytest

from mcptax import advice, loading
from mcptax.loading import Mode
from tests.helpers import compact, tiktoken_reference

ENC = tiktoken_reference("cl100k_base")
SEARCH = compact(loading.CLAUDE_CODE_TOOL_SEARCH)


def n(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def tool(name: str, words: int = 3) -> dict:
    return {
        "name": name,
        "description": " ".join(["Reads"] * words),
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }


A = [tool("read"), tool("write", 40)]
B = [tool("search", 200), tool("fetch"), tool("list")]


def claude(server: str, tools: list[dict]) -> str:
    return compact(
        [
            {
                "name": f"mcp__{server}__{t['name']}",
                "description": t["description"],
                "input_schema": t["inputSchema"],
            }
            for t in tools
        ]
    )


def test_presets_cover_the_clients_and_the_cli_lists_them_all():
    from mcptax.cli.main import CLIENTS

    assert loading.CLIENTS == CLIENTS
    assert [c for c, p in loading.PRESETS.items() if not p.can_defer] == [
        "cursor",
        "vscode",
        "codex",
        "opencode",
    ]


def test_claude_code_stack_defers_with_one_name_list_and_one_search_tool():
    stack = loading.stack_figures(
        [loading.ServerTools("a", A, "Use a for files."), loading.ServerTools("b", B)], "claude-code"
    )
    names = "".join(f"mcp__a__{t['name']}\n" for t in A) + "".join(f"mcp__b__{t['name']}\n" for t in B)
    listing = n("<available-deferred-tools>\n" + names + "</available-deferred-tools>")
    instructions = n("Use a for files.")
    deferred = stack.modes[Mode.DEFERRED]
    assert deferred.upfront == listing + n(SEARCH) + instructions
    assert deferred.search_tool == n(SEARCH)
    assert stack.modes[Mode.EAGER].upfront == n(claude("a", A)) + n(claude("b", B)) + instructions
    # Unset ENABLE_TOOL_SEARCH: recent releases always defer.
    assert (stack.setting, stack.mode, stack.upfront) == ("", Mode.DEFERRED, deferred.upfront)
    # The shared parts go out by deferred tool count (2 and 3): the servers add up to the stack.
    rows = [s.modes[Mode.DEFERRED] for s in stack.servers]
    assert sum(r.upfront for r in rows) == deferred.upfront
    assert [r.search_tool for r in rows] == loading.share_out(n(SEARCH), [2, 3])
    assert rows[1].load_tokens["search"] == n(claude("b", [B[0]])[1:-1])


def test_always_load_server_stays_eager_and_out_of_the_threshold():
    servers = [loading.ServerTools("a", A, always_load=True), loading.ServerTools("b", B)]
    window = 1000
    stack = loading.stack_figures(servers, "claude-code", setting="auto:10", context_window=window)
    assert stack.threshold is not None
    assert (stack.threshold.threshold_tokens, stack.threshold.deferrable_tokens) == (100, n(claude("b", B)))
    assert stack.threshold.crosses and stack.mode == Mode.DEFERRED
    a, b = stack.servers
    assert (a.mode, a.upfront) == (Mode.EAGER, n(claude("a", A)))
    names = "".join(f"mcp__b__{t['name']}\n" for t in B)
    assert b.upfront == n("<available-deferred-tools>\n" + names + "</available-deferred-tools>") + n(SEARCH)
    # Under the threshold, auto sends everything.
    wide = loading.stack_figures(servers, "claude-code", setting="auto", context_window=200_000)
    assert not wide.threshold.crosses and wide.mode == Mode.EAGER
    assert wide.upfront == n(claude("a", A)) + n(claude("b", B))


def test_api_presets_count_their_declared_search_tools():
    anthropic = loading.server_figures(B, "anthropic-api", server="b")
    assert anthropic.modes[Mode.DEFERRED].upfront == n(
        '{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}'
    )
    openai = loading.server_figures(B, "openai-tool-search", server="b.x")
    assert openai.modes[Mode.DEFERRED].upfront == n('{"type":"namespace","name":"mcp__b_x"}') + n(
        '{"type":"tool_search"}'
    )
    assert openai.mode == Mode.DEFERRED
    eager_only = loading.server_figures(B, "cursor", server="b")
    assert list(eager_only.modes) == [Mode.EAGER] and eager_only.mode == Mode.EAGER


@pytest.mark.parametrize(
    ("client", "value", "mode"),
    [
        ("claude-code", "true", Mode.DEFERRED),
        ("claude-code", "1", Mode.DEFERRED),
        ("claude-code", "false", Mode.EAGER),
        ("claude-code", "0", Mode.EAGER),
        ("anthropic-api", "eager", Mode.EAGER),
        ("anthropic-api", None, Mode.DEFERRED),
        ("openai-tool-search", "eager", Mode.EAGER),
    ],
)
def test_each_setting_picks_its_mode_whatever_the_size(client, value, mode):
    # A stack of one small server: far under any auto threshold, so only the setting decides.
    stack = loading.stack_figures([loading.ServerTools("b", B)], client, setting=value)
    assert stack.mode == mode and stack.upfront == stack.modes[mode].upfront


@pytest.mark.parametrize("value", ["auto:0", "auto:101", "maybe"])
def test_bad_settings_are_refused(value):
    with pytest.raises(loading.BadSetting):
        loading.parse_setting("claude-code", value)


def test_share_out_adds_up_and_favours_the_larger_remainder():
    assert loading.share_out(10, [1, 1, 1]) == [4, 3, 3]
    assert loading.share_out(7, [0, 5, 2]) == [0, 5, 2]
    assert loading.share_out(5, [0, 0]) == [3, 2]
    assert loading.share_out(0, []) == []


def test_instructions_advice_missing_and_oversized():
    missing = loading.server_figures(B, "claude-code", server="b")
    (item,) = advice.instructions_advice(missing, None)
    assert item.kind == advice.ADD_INSTRUCTIONS
    assert "sees only the names of 3 tools and no word" in item.message
    (one,) = advice.instructions_advice(loading.server_figures(B[:1], "claude-code", server="b"), None)
    assert "sees only the name of its one tool and no word" in one.message
    assert item.saving_tokens == missing.modes[Mode.EAGER].upfront - missing.modes[Mode.DEFERRED].upfront
    long_text = "Use this server to read files. " * 100  # 3,100 characters
    long = loading.server_figures(B, "claude-code", server="b", instructions=long_text)
    (cut,) = advice.instructions_advice(long, long_text)
    assert cut.kind == advice.SHORTEN_INSTRUCTIONS
    assert cut.saving_tokens == n(long_text) - n(long_text[:2048])
    fine = loading.server_figures(B, "claude-code", server="b", instructions="Use b to search.")
    assert advice.instructions_advice(fine, "Use b to search.") == []
    # A client that never defers gets no such advice.
    assert advice.instructions_advice(loading.server_figures(B, "cursor", server="b"), None) == []
