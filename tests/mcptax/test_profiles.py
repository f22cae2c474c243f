"""Client renderings: each profile's JSON written out here literally, counted with tiktoken directly.

The expected text of each profile is typed by hand from the client's public shape (docs/methodology.md):
if the product renders one key, one order or one name differently, the text and the counts differ.
"""

from __future__ import annotations

import pytest

from mcptax import profiles, tokens
from tests.helpers import tiktoken_reference

ENCODINGS = ("cl100k_base", "o200k_base")
REF = {name: tiktoken_reference(name) for name in ENCODINGS}

# As a server sends it: with the keys no client shows the model (title, annotations, outputSchema).
TOOLS = [
    {
        "name": "search",
        "title": "Search notes",
        "description": "Find notes whose text contains a phrase.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "annotations": {"readOnlyHint": True},
        "outputSchema": {"type": "object", "properties": {"ids": {"type": "array"}}},
    },
    {"name": "read", "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}}},
]
SERVER = "my notes"  # the space is not allowed in a tool name: it becomes "_"

EXPECTED = {
    "mcp": (
        '[{"name":"search","description":"Find notes whose text contains a phrase.",'
        '"inputSchema":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}},'
        '{"name":"read","inputSchema":{"type":"object","properties":{"id":{"type":"integer"}}}}]'
    ),
    "claude": (
        '[{"name":"mcp__my_notes__search","description":"Find notes whose text contains a phrase.",'
        '"input_schema":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}},'
        '{"name":"mcp__my_notes__read","input_schema":{"type":"object","properties":{"id":{"type":"integer"}}}}]'
    ),
    "openai": (
        '[{"type":"function","name":"mcp__my_notes__search","description":"Find notes whose text contains a phrase.",'
        '"strict":false,"parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}},'
        '{"type":"function","name":"mcp__my_notes__read","description":"","strict":false,'
        '"parameters":{"type":"object","properties":{"id":{"type":"integer"}}}}]'
    ),
    "wire": (
        '{"tools":[{"name":"search","title":"Search notes","description":"Find notes whose text contains a phrase.",'
        '"inputSchema":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]},'
        '"annotations":{"readOnlyHint":true},'
        '"outputSchema":{"type":"object","properties":{"ids":{"type":"array"}}}},'
        '{"name":"read","inputSchema":{"type":"object","properties":{"id":{"type":"integer"}}}}]}'
    ),
}
# The figures of the texts above, checked by hand with tiktoken at a prompt (`len(enc.encode_ordinary(text))`);
# the mcp one is also the 58 of the worked example in docs/definitions.md (the same two tools).
HAND_CHECKED = {
    "mcp": {"cl100k_base": 58, "o200k_base": 59},
    "claude": {"cl100k_base": 70, "o200k_base": 71},
    "openai": {"cl100k_base": 86, "o200k_base": 87},
    "wire": {"cl100k_base": 88, "o200k_base": 90},
}


def ref_count(text: str, encoding: str) -> int:
    return len(REF[encoding].encode_ordinary(text))


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("profile", profiles.PROFILES)
def test_each_profile_renders_and_counts_as_written_out(profile, encoding):
    assert profiles.payload(profile, TOOLS, SERVER) == EXPECTED[profile]
    report = profiles.account(TOOLS, "Be brief.", profile=profile, encoding=encoding, server=SERVER)
    assert report.encoding == encoding
    assert (
        report.fixed_tax_tokens == ref_count(EXPECTED[profile], encoding) == HAND_CHECKED[profile][encoding]
    )
    assert report.bytes == len(EXPECTED[profile].encode())
    assert report.instructions_tokens == ref_count("Be brief.", encoding)
    assert report.overhead_tokens == report.fixed_tax_tokens - sum(t.tokens for t in report.tools)


def test_mcp_is_the_fixed_tax_unchanged():
    assert profiles.account(TOOLS).to_dict() == tokens.account(TOOLS).to_dict()
    assert tokens.account(TOOLS).fixed_tax_tokens == 58


def test_per_tool_parts_use_the_profiles_own_keys():
    claude = profiles.account(TOOLS, profile="claude", server=SERVER).tools
    assert claude[0].schema_tokens == ref_count(
        '{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}', "cl100k_base"
    )
    assert claude[0].tokens == ref_count(
        EXPECTED["claude"][1 : EXPECTED["claude"].index("},{") + 1], "cl100k_base"
    )
    openai = profiles.account(TOOLS, profile="openai", server=SERVER).tools
    # An absent description is sent as "" by Codex: zero description tokens, the key still there.
    assert openai[1].description_tokens == 0
    assert openai[1].tokens == ref_count(
        '{"type":"function","name":"mcp__my_notes__read","description":"","strict":false,'
        '"parameters":{"type":"object","properties":{"id":{"type":"integer"}}}}',
        "cl100k_base",
    )


def test_wire_counts_what_the_others_drop():
    wire = profiles.account(TOOLS, profile="wire").fixed_tax_tokens
    mcp = profiles.account(TOOLS).fixed_tax_tokens
    assert (
        wire - mcp
        == ref_count(EXPECTED["wire"], "cl100k_base") - ref_count(EXPECTED["mcp"], "cl100k_base")
        > 0
    )


def test_names_and_unknown_profiles():
    assert profiles.qualified_name("github.com/x", "get_issue") == "mcp__github_com_x__get_issue"
    assert profiles.qualified_name("a-b_c", "t") == "mcp__a-b_c__t"
    with pytest.raises(profiles.UnknownProfile, match="unknown profile 'cursor'.*mcp, claude, openai, wire"):
        profiles.account(TOOLS, profile="cursor")
    # A tool with no inputSchema gets the empty object schema both APIs require.
    assert profiles.render_tool("claude", {"name": "ping"}, "s") == {
        "name": "mcp__s__ping",
        "input_schema": {"type": "object"},
    }


# Instructions whose count differs between the encodings ("Be brief." is 3 tokens in both, so a
# count in the wrong encoding would pass with it): hand-checked with tiktoken at a prompt.
JAPANESE_INSTRUCTIONS = "Always answer in Japanese: 日本語で簡潔に答えてください。"
INSTRUCTIONS_HAND_CHECKED = {"cl100k_base": 22, "o200k_base": 15}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_instructions_are_counted_in_the_reports_encoding(encoding):
    expected = INSTRUCTIONS_HAND_CHECKED[encoding]
    assert ref_count(JAPANESE_INSTRUCTIONS, encoding) == expected
    assert tokens.account(TOOLS, JAPANESE_INSTRUCTIONS, encoding=encoding).instructions_tokens == expected
    for profile in profiles.PROFILES:
        report = profiles.account(
            TOOLS, JAPANESE_INSTRUCTIONS, profile=profile, encoding=encoding, server=SERVER
        )
        assert report.instructions_tokens == expected, profile
