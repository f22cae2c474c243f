"""The bulk_without_reference finding: which arguments are bulk, and each part of the rule (a
reference alternative, expected_sha256, advice to prefer the reference) failing on its own."""

from __future__ import annotations

import copy

from mcptax import findings
from tests.mcptax.findings_tools import STRING, load, make_tool, of_kind

# --- each part of the bulk rule can fail on its own ----------------------------------------------


def lean_write() -> dict:
    return copy.deepcopy(next(t for t in load("filesystem_lean.json") if t["name"] == "write"))


def bulk_titles(tool: dict) -> list[str]:
    return [f.title for f in of_kind(findings.analyze([tool]), findings.BULK_WITHOUT_REFERENCE)]


def test_lean_write_without_expected_sha256_is_flagged_for_that_only():
    tool = lean_write()
    del tool["inputSchema"]["properties"]["expected_sha256"]
    (finding,) = of_kind(findings.analyze([tool]), findings.BULK_WITHOUT_REFERENCE)
    assert finding.title == "write takes bulk content with no expected_sha256"
    assert finding.severity == findings.INFO


def test_lean_write_without_advice_is_flagged_for_that_only():
    tool = lean_write()
    tool["description"] = "Write a file. Refuses over-size input; returns bytes, lines, sha256."
    assert bulk_titles(tool) == ["write takes bulk content with no advice to prefer the reference"]


def test_reference_that_is_only_a_destination_is_not_an_alternative():
    tool = lean_write()
    schema = tool["inputSchema"]
    del schema["anyOf"]
    schema["required"] = ["target", "content", "path"]
    assert bulk_titles(tool) == ["write takes bulk content with no reference alternative"]


def test_plain_sha256_parameter_counts_as_expected_hash():
    tool = make_tool(
        "upload",
        "Upload a document. Prefer a url over pasting the document.",
        document=STRING,
        url=STRING,
        sha256=STRING,
    )
    assert bulk_titles(tool) == []


def test_array_parameters_are_bulk_unless_short_string_lists():
    plot = make_tool("plot", "Plot values.", values={"type": "array", "items": {"type": "number"}})
    tagged = make_tool("tag", "Tag things.", labels={"type": "array", "items": {"type": "string"}})
    capped = make_tool("pick", "Pick.", points={"type": "array", "items": {"type": "number"}, "maxItems": 10})
    paths = make_tool("many", "Read many.", paths={"type": "array", "items": {"type": "string"}})
    files = make_tool(
        "push",
        "Push files.",
        files={
            "type": "array",
            "items": {"type": "object", "properties": {"path": STRING, "content": STRING}},
        },
    )
    assert bulk_titles(plot) == [
        "plot takes bulk values with no reference alternative, no expected_sha256 "
        "and no advice to prefer the reference"
    ]
    assert bulk_titles(tagged) == []
    assert bulk_titles(capped) == []
    assert bulk_titles(paths) == []
    assert len(bulk_titles(files)) == 1


# The content-key list as docs/definitions.md states it, written out here so that a name dropped
# from (or misspelt in) the product's own list fails this test.
DESIGN_CONTENT_NAMES = (
    "text", "content", "body", "markdown", "code", "csv", "data", "source", "document", "html", "json", "yaml",
)  # fmt: skip


def test_content_names_follow_the_design_list():
    for name in DESIGN_CONTENT_NAMES:
        assert bulk_titles(make_tool("t", "x", **{name: STRING})), name
    assert bulk_titles(make_tool("t", "x", new_content=STRING, issue_body=STRING))
    for name in ("country_code", "query", "title", "source_url", "data_source"):
        assert bulk_titles(make_tool("t", "x", **{name: STRING})) == [], name


# --- JSON Schema read as JSON Schema (issue 11) ------------------------------------------------


def test_bulk_parameters_are_seen_through_ref_and_any_of():
    nullable = make_tool("note", "Write a note.", content={"anyOf": [STRING, {"type": "null"}]})
    referenced = {
        "name": "push",
        "description": "Push files.",
        "inputSchema": {
            "type": "object",
            "properties": {"files": {"$ref": "#/$defs/files"}},
            "$defs": {
                "files": {"type": "array", "items": {"$ref": "#/$defs/file"}},
                "file": {"type": "object", "properties": {"path": STRING, "content": STRING}},
            },
        },
    }
    assert len(bulk_titles(nullable)) == 1
    assert len(bulk_titles(referenced)) == 1
    # A reference-typed alternative spelt through anyOf is still a reference name, not content.
    assert bulk_titles(make_tool("open", "Open.", path={"anyOf": [STRING, {"type": "null"}]})) == []


def test_expected_sha256_is_advised_only_for_arguments_that_carry_documents():
    """A knowledge-graph server's records (entities, observations with their text fields) are data,
    not a copy of a document: no hash to check them against. A text or a flat list of values is."""
    observation = {
        "type": "object",
        "properties": {"entityName": STRING, "contents": {"type": "array", "items": STRING}},
    }
    graph = make_tool(
        "add_observations",
        "Add observations to existing entities in the knowledge graph.",
        observations={"type": "array", "items": observation},
    )
    (title,) = bulk_titles(graph)
    assert title == (
        "add_observations takes bulk observations with no reference alternative and no advice to "
        "prefer the reference"
    )
    (finding,) = [f for f in findings.analyze([graph]) if f.kind == findings.BULK_WITHOUT_REFERENCE]
    assert "expected_sha256" not in finding.detail and "both are additive changes" in finding.detail
    write = make_tool("write", "Write a file.", path=STRING, content=STRING)
    (title,) = bulk_titles(write)
    assert "no expected_sha256" in title
