"""Cline and Roo Code task histories (mcptax/formats/cline.py): MCP calls from ``use_mcp_server``
messages with their server, tool, arguments, result and error. Expectations written out by hand
from the fixtures in tests/data/logs/ (see the README there for each shape's source)."""

from __future__ import annotations

import hashlib
import json

from mcptax.formats import UnknownFormatError, detect_format, read_calls
from tests.mcptax.formats.helpers import LOGS, assert_reconciles, calls_of, outcomes_of


def _read(name: str) -> tuple[list, int]:
    data = (LOGS / name).read_bytes()
    assert detect_format(data[:65536]) == "cline"
    return list(read_calls([data], "cline")), len(json.loads(data))


def test_a_cline_history_whose_three_calls_all_failed() -> None:
    items, entries = _read("cline_ui_messages.json")
    assert_reconciles(items, entries)
    calls = calls_of(items)
    assert [(c.server_label, c.tool, c.is_error) for c in calls] == [
        ("figma", "get_file", True),
        ("jira", "create_issue", True),
        ("jira", "search", True),
    ]
    assert {c.session_key for c in calls} == {"cline:1764680000000"}
    figma, create, search = calls
    # The partial copy (line 3) is ignored; the complete ask (4) and the error (6) form the call.
    assert figma.line_numbers == (4, 6)
    assert figma.arguments == {"fileKey": "AbC123", "depth": 2}
    assert figma.request_ts == "2025-12-02T12:53:20.910Z" and figma.duration_ms == 1190.0
    assert figma.result["content"][0]["text"].startswith("Error executing MCP tool:\nNo connection found")
    # The arguments are hashed as the model wrote them (newlines and indentation included).
    written = '{\n  "project": "OPS",\n  "summary": "Frame 12 misaligned"\n}'
    assert create.arguments_sha256 == hashlib.sha256(written.encode()).hexdigest()
    assert create.result == {
        "content": [{"type": "text", "text": "Error:\n401 Unauthorized: the token has expired"}],
        "isError": True,
    }
    # Auto-approved calls are written as a `say`; a timeout is an error too.
    assert search.line_numbers == (11, 13) and search.duration_ms == 60200.0
    assert outcomes_of(items)[3].reason == "partial"


def test_a_roo_history_with_a_bulk_argument_a_resource_read_and_a_broken_call() -> None:
    items, entries = _read("roo_ui_messages.json")
    assert_reconciles(items, entries)
    (call,) = calls_of(items)
    csv = "id,name\n" + "".join(f"{i},row {i}\n" for i in range(120))
    assert (call.server_label, call.tool, call.is_error) == ("sqlite", "import_csv", False)
    assert call.arguments == {"table": "t", "csv": csv}
    assert call.result == {"content": [{"type": "text", "text": "imported 120 rows"}], "isError": False}
    outcomes = outcomes_of(items)
    # The resource read and its answer are no tool call.
    assert outcomes[2].reason == outcomes[4].reason == "not_a_tool_call"
    assert (outcomes[8].status, outcomes[8].reason) == ("quarantined", "invalid_arguments_json")
    assert (outcomes[9].status, outcomes[9].reason) == ("quarantined", "unknown_shape")
    assert outcomes[9].raw == b'"a stray string"'


def test_the_api_conversation_history_gives_the_call_when_ui_messages_is_gone() -> None:
    items, entries = _read("cline_api_conversation_history.json")
    assert_reconciles(items, entries)
    (call,) = calls_of(items)
    assert (call.server_label, call.tool, call.arguments, call.is_error) == (
        "figma",
        "get_file",
        {"fileKey": "AbC123"},
        True,
    )
    assert call.line_numbers == (2, 3)


def test_a_json_list_of_something_else_is_not_taken_for_a_history() -> None:
    try:
        detect_format(b'[{"name": "x"}]')
    except UnknownFormatError as exc:
        assert "Cline / Roo Code task history" in str(exc)
    else:
        raise AssertionError("detected")
