"""The SDK's real OTLP exporters (protobuf and JSON, gzip on and off) send Claude Code and Codex
fixture events to a running server; the worker's run of the stored body gives exact figures."""

from __future__ import annotations

import hashlib
import json

import pytest
from opentelemetry.sdk._logs.export import LogRecordExportResult

from ingest.capture.models import BulkArgument, IngestJob, ToolCall
from ingest.discovery.models import SessionDiscoverySummary
from ingest.otel.models import MeasuredRequest, SentTools, TelemetryAgent
from mcptax import tokens
from tests.ingest.otel.exporters import fixture, records, send
from tests.ingest.otel.support import run_to_end

pytestmark = pytest.mark.django_db(transaction=True)

CLAUDE = fixture("claude_code_session.json")
CODEX = fixture("codex_session.json")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def only_job(team) -> IngestJob:
    (job,) = IngestJob.objects.filter(team=team, source="otel")
    return job


@pytest.mark.parametrize(
    ("protocol", "gzip"), [("protobuf", True), ("protobuf", False), ("json", True), ("json", False)]
)
def test_claude_code_events_become_calls_verdicts_measured_tokens_and_sent_tools(
    otel_url, team, team_token, protocol, gzip
):
    result = send(otel_url, team_token[1], records(CLAUDE), protocol=protocol, gzip=gzip)
    assert result == LogRecordExportResult.SUCCESS
    job = only_job(team)
    # Stored first and mapped by a worker (a session's worker on the PostgreSQL leg may already
    # have taken it; with no worker it waits queued: test_receiver_answers' broker-down case).
    assert job.format == "otlp" and job.status in ("queued", "running", "done")
    job = run_to_end(job.pk)
    figures = (job.status, job.lines_read, job.stored, job.duplicate, job.ignored, job.quarantined)
    assert figures == ("done", 11, 7, 0, 4, 0)
    assert job.ignored_reasons == {
        "otel_user_prompt": 1,
        "builtin_tool": 1,
        "otel_tool_decision": 1,
        "tool_search_matches_unknown": 1,
    }

    calls = {c.client_call_id: c for c in ToolCall.objects.filter(team=team)}
    assert set(calls) == {"toolu_01WRITE", "toolu_01WRITE2", "toolu_01NODETAIL", "toolu_01TICKET"}
    write = calls["toolu_01WRITE"]
    assert (write.server_label, write.tool, write.is_error, write.duration_ms) == (
        "docs",
        "write_doc",
        False,
        250.0,
    )
    assert write.agent.family == "claude-code" and write.agent.version == "2.1.220"
    assert write.session.session_key == CLAUDE["events"][0]["attributes"]["session.id"]
    content = "# Notes\n\nline one\nline two\n"
    arguments = {"path": "notes.md", "content": content, "expected_sha256": sha(content)}
    assert write.argument_sha256 == sha(compact(arguments))
    verdicts = {
        a.call.client_call_id: (a.pointer, a.verdict, a.sha256)
        for a in BulkArgument.objects.filter(team=team)
    }
    assert verdicts == {
        "toolu_01WRITE": ("/content", "exact", sha(content)),
        "toolu_01WRITE2": ("/content", "newline_only", sha(content.rstrip("\n"))),
    }
    blind = calls["toolu_01NODETAIL"]
    assert (blind.no_content, blind.tool, blind.server_label, blind.is_error, blind.bulk_count) == (
        True,
        "mcp_tool",
        "",
        True,
        0,
    )
    assert job.verdict_counts == {"exact": 1, "newline_only": 1, "no_content": 1}

    (measured,) = MeasuredRequest.objects.filter(team=team)
    assert (measured.input_tokens, measured.cache_read_tokens, measured.cache_creation_tokens) == (
        1200,
        15400,
        820,
    )
    assert (measured.output_tokens, measured.cost_usd, measured.model) == (310, 0.0421, "claude-sonnet-5")
    assert measured.session_id == write.session_id

    (sent,) = SentTools.objects.filter(team=team)
    body = json.loads(CLAUDE["events"][1]["attributes"]["body"])
    expected = {enc: tokens.count(compact(body["tools"]), enc) for enc in ("cl100k_base", "o200k_base")}
    loaded = {
        enc: sum(tokens.count(compact(t), enc) for t in body["tools"] if t["name"].startswith("mcp__docs"))
        for enc in expected
    }
    assert (sent.mode, sent.tool_count, sent.deferred_count, sent.loaded_count) == ("deferred", 4, 1, 2)
    assert sent.totals == expected and sent.mcp_loaded == loaded
    assert [(t["name"], t["deferred"]) for t in sent.tools] == [
        ("Bash", False),
        ("mcp__docs__write_doc", False),
        ("mcp__docs__read_doc", False),
        ("mcp__tickets__search", True),
    ]
    assert sent.tools[1]["definition"] == body["tools"][1]
    (seen,) = TelemetryAgent.objects.filter(team=team)
    assert (seen.records, seen.last_event) == (7, "claude_code.tool_result")
    assert seen.last_event_at.isoformat() == "2026-11-30T10:00:10+00:00"
    # The select: search loaded the tickets tool, which was then called; the write calls were eager.
    summary = SessionDiscoverySummary.objects.get(session=write.session)
    assert (summary.searches, summary.misses, summary.loads, summary.loads_never_called) == (1, 0, 1, 0)
    assert (summary.calls, summary.calls_without_load, summary.requests) == (4, 3, 1)


@pytest.mark.parametrize(("protocol", "gzip"), [("protobuf", False), ("json", True)])
def test_codex_events_keep_the_raw_arguments_and_quarantine_the_bad_record(
    otel_url, team, team_token, protocol, gzip
):
    assert (
        send(otel_url, team_token[1], records(CODEX), protocol=protocol, gzip=gzip)
        == LogRecordExportResult.SUCCESS
    )
    job = run_to_end(only_job(team).pk)
    assert (job.lines_read, job.stored, job.ignored, job.quarantined) == (6, 2, 3, 1)
    assert job.quarantined_reasons == {"invalid_arguments_json": 1}
    (call,) = ToolCall.objects.filter(team=team)
    raw = '{"path": "plan.md",  "content": "step 1\\r\\nstep 2\\r\\n"}'
    assert (call.server_label, call.tool, call.client_call_id) == ("docs", "write_doc", "call_W1")
    assert (call.argument_bytes, call.argument_sha256) == (len(raw), sha(raw))
    assert call.agent.family == "codex" and call.agent.name == "codex_cli_rs"
    (argument,) = BulkArgument.objects.filter(team=team)
    assert (argument.pointer, argument.verdict, argument.crlf_count) == ("/content", "unverifiable", 2)
    (measured,) = MeasuredRequest.objects.filter(team=team)
    assert (measured.input_tokens, measured.cache_read_tokens, measured.output_tokens) == (2000, 7000, 450)
