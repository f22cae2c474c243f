"""The envelope parser (mcptax/formats/envelope.py) on the sample proxy logs."""

from __future__ import annotations

import hashlib
import json

from mcptax.bulk import find_bulk_arguments
from tests.mcptax.formats.conftest import LOGS, calls_of, outcomes_of, run


def test_envelope_calls_and_line_fates() -> None:
    items = run("envelope.jsonl")
    outcomes = outcomes_of(items)
    calls = {(c.session_key, c.jsonrpc_id): c for c in calls_of(items)}
    assert len(calls) == 5
    assert {n: (o.status, o.reason) for n, o in outcomes.items() if o.status != "call"} == {
        1: ("ignored", "meta"),
        2: ("ignored", "session_context"),
        3: ("ignored", "session_context"),
        4: ("ignored", "notification"),
        5: ("ignored", "not_a_tool_call"),
        6: ("ignored", "not_a_tool_call"),
        7: ("ignored", "stderr"),
        14: ("quarantined", "invalid_json"),
        15: ("ignored", "orphan_response"),
        17: ("ignored", "blank"),
        18: ("quarantined", "missing_field:session_id"),
    }
    # Quarantined lines keep their raw bytes exactly.
    raw_line_14 = (LOGS / "envelope.jsonl").read_bytes().splitlines()[13]
    assert outcomes[14].raw == raw_line_14

    write = calls[("s-7f3a", 2)]
    assert (write.tool, write.server_label, write.line_numbers) == ("write_file", "files", (8, 9))
    assert write.agent.family == "claude-code" and write.agent.version == "2.0.14"
    assert write.server_info == {"name": "acme-files", "version": "1.4.0"}
    assert write.claudecode_tool_use_id == "toolu_01HXcM2f8ZqV3wR9t5Ybe7Ld"
    assert write.duration_ms == 1750.0 and write.is_error is False
    canonical = json.dumps(write.arguments, separators=(",", ":"), ensure_ascii=False).encode()
    assert write.arguments_sha256 == hashlib.sha256(canonical).hexdigest()
    assert write.arguments_raw_bytes == len(canonical)
    (bulk,) = find_bulk_arguments(write.arguments)
    assert bulk.pointer == "/content" and bulk.sha256 == write.result["structuredContent"]["sha256"]

    # A batch: the call inside pairs with its response inside the response batch.
    rows = calls[("s-7f3a", 3)]
    assert rows.line_numbers == (10, 11) and rows.result["content"][0]["text"] == "appended 120 rows"
    assert find_bulk_arguments(rows.arguments)[0].elements == 120

    failed = calls[("s-7f3a", 5)]
    assert failed.jsonrpc_error["code"] == -32602 and failed.result is None and failed.is_error is None

    unanswered = calls[("s-7f3a", 7)]
    assert unanswered.unanswered and unanswered.response_ts is None and unanswered.line_numbers == (16,)

    # 2026-07-28 style: no initialize; the agent comes from _meta; the capture was cut.
    modern = calls[("h-91c2", "req-1")]
    assert (modern.agent.family, modern.agent.version, modern.agent.source) == ("gemini-cli", "0.9.0", "meta")
    assert modern.conn_id == "c1" and modern.transport == "http"
    assert modern.capture_truncated and modern.truncated_pointers == ("/params/arguments/csv",)


def test_redacted_envelope_keeps_digest_figures() -> None:
    (call,) = calls_of(run("envelope_redacted.jsonl"))
    (bulk,) = find_bulk_arguments(call.arguments)
    assert (bulk.pointer, bulk.kind, bulk.content_known) == ("/content", "digest", False)
    # The digest stands for the same README the unredacted log carries in full.
    clear = next(c for c in calls_of(run("envelope.jsonl")) if c.jsonrpc_id == 2)
    (original,) = find_bulk_arguments(clear.arguments)
    assert (bulk.sha256, bulk.bytes, bulk.lines, bulk.tokens) == (
        original.sha256,
        original.bytes,
        original.lines,
        400,
    )
    assert call.redacted
