"""`codex exec --json` streams (mcptax/formats/codex_exec.py): MCP calls from ``item.*`` events of
type ``mcp_tool_call``, with their arguments, results and errors. Expectations written out by hand
from tests/data/logs/codex_exec.jsonl (see the README there for the shape's source)."""

from __future__ import annotations

import hashlib
import json

from mcptax.formats import detect_format, read_calls
from tests.mcptax.formats.helpers import LOGS, assert_reconciles, calls_of, outcomes_of

NAME = "codex_exec.jsonl"


def _read() -> tuple[list, int]:
    data = (LOGS / NAME).read_bytes()
    assert detect_format(data) == "codex-exec"
    return list(read_calls(data.splitlines(keepends=True), "codex-exec")), len(data.splitlines())


def test_mcp_tool_call_items_form_one_call_each_with_results_and_errors() -> None:
    items, lines = _read()
    assert_reconciles(items, lines)
    calls = {c.client_call_id: c for c in calls_of(items)}
    assert sorted(calls) == ["item_1", "item_3", "item_4", "item_5"]  # reasoning, shell, messages: no MCP
    assert {c.session_key for c in calls.values()} == {"0199a213-81c0-7800-8aa1-bbab2a035a53"}

    resolve = calls["item_1"]
    assert (resolve.server_label, resolve.tool) == ("context7", "resolve-library-id")
    assert resolve.arguments == {"libraryName": "django-htmx"}
    assert resolve.result == {
        "content": [{"type": "text", "text": "/adamchainz/django-htmx"}],
        "isError": False,
    }
    assert resolve.line_numbers == (4, 5) and resolve.request_ts is None

    write = calls["item_3"]
    notes = "# Release notes\n\n" + "".join(f"- change {i}: fixed the thing number {i}\n" for i in range(60))
    assert write.arguments == {"path": "C:\\work\\NOTES.md", "content": notes}
    # started, updated (adds nothing), completed
    assert write.line_numbers == (8, 10)
    assert write.result["structuredContent"] == {"bytes": len(notes.encode())}
    raw = json.dumps({"path": "C:\\work\\NOTES.md", "content": notes}, separators=(",", ":"))
    assert write.arguments_sha256 == hashlib.sha256(raw.encode()).hexdigest()

    failed = calls["item_4"]
    assert (failed.server_label, failed.tool, failed.is_error) == ("grafana", "query_prometheus", True)
    assert failed.result == {
        "content": [
            {"type": "text", "text": "tool call failed: connection refused (http://127.0.0.1:3000/mcp)"}
        ],
        "isError": True,
    }

    # Seen only at completion, named by the older `item_type` key, arguments null.
    late = calls["item_5"]
    assert (late.tool, late.arguments, late.line_numbers, late.is_error) == (
        "get-library-docs",
        {},
        (15,),
        False,
    )


def test_turn_usage_is_shared_by_the_turns_calls_and_the_stray_line_is_quarantined() -> None:
    items, _ = _read()
    calls = {c.client_call_id: c for c in calls_of(items)}
    assert calls["item_1"].turn_output_tokens == 912 and calls["item_3"].turn_output_tokens == 912
    assert calls["item_1"].output_tokens + calls["item_3"].output_tokens == 912
    assert calls["item_4"].turn_output_tokens == 64
    outcomes = outcomes_of(items)
    assert (outcomes[11].status, outcomes[11].reason) == ("ignored", "token_count")
    assert (outcomes[18].status, outcomes[18].reason) == ("quarantined", "invalid_json")
    assert outcomes[18].raw == b"not json at all"


def test_an_item_before_thread_started_is_quarantined_not_guessed() -> None:
    line = json.dumps(
        {"type": "item.completed", "item": {"id": "i", "type": "mcp_tool_call", "server": "s", "tool": "t"}}
    )
    (outcome,) = [i for i in read_calls([line.encode()], "codex-exec")]
    assert (outcome.status, outcome.reason) == ("quarantined", "missing_field:session_id")
