"""Storing calls (ingest.capture.pipeline.calls): agents and sessions, linking, contents, values a
database refuses."""

from __future__ import annotations

import hashlib

import pytest

from ingest.capture import pipeline
from ingest.capture.models import (
    Agent,
    BulkArgument,
    BulkContent,
    CaptureSession,
    LineRecord,
    TeamCaptureSettings,
    ToolCall,
)
from tests.helpers import sha
from tests.ingest.capture.logs import (
    LOGS,
    EnvelopeLog,
    assert_reconciles,
    line_count,
    text_of,
)


@pytest.mark.django_db
def test_a_later_batch_of_a_session_keeps_its_client(team, tmp_path):
    # The proxy pushes in batches, one job each: only the first holds `initialize`.
    log = EnvelopeLog().initialize(version="2.0.15")
    first = pipeline.ingest_path(team, log.write(tmp_path / "batch-1.jsonl"))
    later = EnvelopeLog()
    later.seq, later.next_id = 100, 50
    later.call("write", {"content": text_of(2000, 1)})
    second = pipeline.ingest_path(team, later.write(tmp_path / "batch-2.jsonl"))
    assert first.status == second.status == "done"
    call = ToolCall.objects.get(job=second)
    assert call.agent is not None and (call.agent.family, call.agent.version) == ("claude-code", "2.0.15")


@pytest.mark.django_db
def test_transcript_and_proxy_captures_of_one_call_are_linked_not_counted_twice(team):
    proxy_job = pipeline.ingest_path(team, LOGS / "envelope.jsonl")
    transcript_job = pipeline.ingest_path(team, LOGS / "claude_code_session.jsonl")
    transcript = ToolCall.objects.filter(job=transcript_job).exclude(linked_call=None)
    assert transcript.exists()
    for call in transcript:
        proxy = call.linked_call
        assert proxy.job == proxy_job and proxy.linked_call_id == call.pk
        assert proxy.claudecode_tool_use_id == call.client_call_id
        assert call.counts_in_rollups is False and proxy.counts_in_rollups is True
    # Ingesting the transcript first links the same way.
    other = team.__class__.objects.create(name="Reverse order")
    pipeline.ingest_path(other, LOGS / "claude_code_session.jsonl")
    pipeline.ingest_path(other, LOGS / "envelope.jsonl")
    assert ToolCall.objects.filter(team=other, counts_in_rollups=False).count() == transcript.count()
    assert ToolCall.objects.filter(team=other, source_format="envelope").exclude(
        linked_call=None
    ).count() == (transcript.count())


@pytest.mark.django_db
def test_agents_and_sessions_are_shared_across_jobs(team, tmp_path):
    a = EnvelopeLog("s-a", client="claude-code").initialize("2.0.14").call("w", {"content": "1"})
    b = EnvelopeLog("s-b", client="codex-mcp-client").initialize("0.40.0").call("w", {"content": "2"})
    c = EnvelopeLog("s-c", client="claude-code")
    c.seq = 1000  # a later session
    c.initialize("2.0.14").call("w", {"content": "3"})
    pipeline.ingest_path(team, a.write(tmp_path / "a.jsonl"))
    pipeline.ingest_path(team, b.write(tmp_path / "b.jsonl"))
    pipeline.ingest_path(team, c.write(tmp_path / "c.jsonl"))
    assert sorted(Agent.objects.filter(team=team).values_list("family", "version")) == [
        ("claude-code", "2.0.14"),
        ("codex", "0.40.0"),
    ]
    claude = Agent.objects.get(team=team, family="claude-code")
    assert claude.calls.count() == 2 and claude.first_seen < claude.last_seen
    assert CaptureSession.objects.filter(team=team).count() == 3


@pytest.mark.django_db
def test_content_retention_settings_are_honoured(team, tmp_path):
    small, big = text_of(3000, 1), text_of(20000, 2)
    path = (
        EnvelopeLog()
        .initialize()
        .call("w", {"content": small})
        .call("w", {"content": big})
        .write(tmp_path / "c.jsonl")
    )
    capture = TeamCaptureSettings.for_team(team)
    capture.max_content_bytes = 10_000
    capture.save()
    pipeline.ingest_path(team, path)
    kept = {arg.sha256: arg.content_id is not None for arg in BulkArgument.objects.all()}
    assert kept == {sha(small): True, sha(big): False}

    other = team.__class__.objects.create(name="No content")
    TeamCaptureSettings.objects.create(team=other, keep_bulk_content=False)
    pipeline.ingest_path(other, path)
    assert BulkArgument.objects.filter(team=other).count() == 2
    assert not BulkContent.objects.filter(team=other).exists()
    assert BulkArgument.objects.filter(team=other, content__isnull=False).count() == 0


@pytest.mark.django_db
def test_the_same_pasted_value_is_one_content_row(team, tmp_path):
    body = text_of(4000)
    log = EnvelopeLog().initialize()
    for _ in range(4):
        log.call("w", {"content": body})
    pipeline.ingest_path(team, log.write(tmp_path / "c.jsonl"))
    assert BulkArgument.objects.filter(team=team).count() == 4
    assert BulkContent.objects.filter(team=team).count() == 1


@pytest.mark.django_db
def test_oversize_lines_and_database_unsafe_values_never_crash_the_job(team, tmp_path, settings):
    settings.INGEST_MAX_LINE_BYTES = 4096
    nul_text = "before\x00after " * 200
    log = EnvelopeLog().initialize()
    log.call("write", {"content": "x" * 5000})  # request line over the limit
    log.call(
        "wr\x00ite", {"content": nul_text, "text": "\ud800 lone"}, result={"content": [], "isError": True}
    )
    log.frame("s2c", {"jsonrpc": "2.0", "id": 99, "error": {"code": -1, "message": "nul \x00 here"}})
    path = log.write(tmp_path / "c.jsonl")

    job = pipeline.ingest_path(team, path)

    assert_reconciles(job, line_count(path))
    oversize = LineRecord.objects.get(job=job, reason="oversize_line")
    assert oversize.raw_bytes > 4096 and oversize.exact_raw() == log.lines[3].rstrip(b"\n")  # kept whole
    call = ToolCall.objects.get(job=job, is_error=True)
    assert call.tool == "wr\ufffdite" and "nul_replaced:tool" in call.ingest_notes
    arg = call.bulk_arguments.get(pointer="/content")
    assert arg.sha256 == hashlib.sha256(nul_text.encode()).hexdigest()  # over the exact captured text
    assert arg.content is None and any(n.startswith("content_not_kept:/content") for n in call.ingest_notes)
    assert call.bulk_arguments.get(pointer="/text").content is None
