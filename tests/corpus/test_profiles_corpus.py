"""The real-server corpus counted under every profile and every offline encoding.

The oracle renders each profile's JSON here, from the shapes docs/methodology.md describes, and
counts it with tiktoken's own encodings (tests.helpers.tiktoken_reference), never through mcptax.
"""

from __future__ import annotations

import re

import pytest

from mcptax import profiles
from tests.corpus.conftest import CAPTURES, load_capture, visible
from tests.helpers import compact, tiktoken_reference

ENCODINGS = ("cl100k_base", "o200k_base")
SERVER = "corpus.server"  # the dot becomes "_" in tool names


def oracle_render(profile: str, tools: list[dict]) -> object:
    prefix = "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", SERVER) + "__"
    if profile == "mcp":
        return [visible(t) for t in tools]
    if profile == "wire":
        return {"tools": tools}
    out = []
    for t in tools:
        schema = t.get("inputSchema", {"type": "object"})
        if profile == "claude":
            tool = {"name": prefix + t["name"]}
            if "description" in t:
                tool["description"] = t["description"]
            tool["input_schema"] = schema
        else:
            tool = {
                "type": "function",
                "name": prefix + t["name"],
                "description": t.get("description") or "",
                "strict": False,
                "parameters": schema,
            }
        out.append(tool)
    return out


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("profile", profiles.PROFILES)
@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_every_capture_under_every_profile_and_encoding(path, profile, encoding):
    tools = load_capture(path)["tools"]
    enc = tiktoken_reference(encoding)
    expected = len(enc.encode_ordinary(compact(oracle_render(profile, tools))))
    report = profiles.account(tools, profile=profile, encoding=encoding, server=SERVER)
    assert report.fixed_tax_tokens == expected
    assert report.encoding == encoding and report.tool_count == len(tools)


def test_wire_is_never_below_the_visible_tools():
    # The whole result carries every visible key and more, so it never costs less.
    for path in CAPTURES:
        tools = load_capture(path)["tools"]
        assert (
            profiles.account(tools, profile="wire").fixed_tax_tokens
            >= profiles.account(tools).fixed_tax_tokens
        )
