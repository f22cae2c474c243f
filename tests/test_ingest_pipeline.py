"""The ingest pipeline against a real database: accounting, dedupe, resume after SIGKILL, tails.

Run: VAR_DIR=/tmp/x-var .venv/bin/pytest tests/test_ingest_pipeline.py -q (and on PostgreSQL with
DATABASE_URL=postgres://... for the services leg).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.servers.models import McpServer
from ingest.capture import pipeline
from ingest.capture.models import (
    Agent,
    BulkArgument,
    BulkContent,
    CaptureSession,
    IngestJob,
    LineRecord,
    TeamCaptureSettings,
    ToolCall,
    WatchedFile,
    WatchedFolder,
)
from ingest.capture.signals import calls_ingested
from ingest.capture.uploads import upload_dir
from tests.conftest import ROOT

LOGS = ROOT / "tests" / "data" / "logs"
pytestmark = pytest.mark.timeout(240)


# -- building logs -----------------------------------------------------------------------------


class EnvelopeLog:
    """Writes envelope JSONL the way our proxy does, one session at a time."""

    def __init__(self, session: str = "s1", label: str = "files", client: str = "claude-code") -> None:
        self.session, self.label, self.client = session, label, client
        self.lines: list[bytes] = []
        self.seq = 0
        self.next_id = 1

    def frame(self, direction: str, raw: object, **extra: object) -> EnvelopeLog:
        self.seq += 1
        record = {
            "session_id": self.session,
            "server_label": self.label,
            "seq": self.seq,
            "ts": f"2026-01-05T10:{self.seq // 60 % 60:02d}:{self.seq % 60:02d}.000000Z",
            "direction": direction,
            "transport": "stdio",
            "raw": raw,
            **extra,
        }
        try:
            line = json.dumps(record, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate can only be written as a \ud800 escape
            line = json.dumps(record).encode()
        self.lines.append(line + b"\n")
        return self

    def initialize(self, version: str = "2.0.14") -> EnvelopeLog:
        init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": self.client, "version": version}}
        self.frame("c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.frame(
            "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "x", "version": "1"}}}
        )
        self.frame("c2s", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def call(
        self, tool: str, arguments: dict, *, result: dict | None = None, meta: dict | None = None
    ) -> EnvelopeLog:
        call_id = self.next_id
        self.next_id += 1
        params: dict = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        self.frame("c2s", {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params})
        answer = result if result is not None else {"content": [{"type": "text", "text": "ok"}]}
        self.frame("s2c", {"jsonrpc": "2.0", "id": call_id, "result": answer})
        return self

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(self.lines))
        return path


def text_of(size: int, seed: int = 0) -> str:
    line = f"{seed:04d} héllo wörld — ✓ the quick brown fox\n"
    return (line * (size // len(line.encode()) + 1))[: size // 2] + "end"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def assert_reconciles(job: IngestJob, lines: int) -> None:
    assert job.status == IngestJob.Status.DONE, job.error
    assert job.lines_read == lines
    assert job.stored + job.duplicate + job.ignored + job.quarantined == lines
    assert job.reconciles
    assert not job.error


def count_lines(data: bytes) -> int:
    """Lines as the ingest reads them: split at \\n only, a final unterminated line counts."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def line_count(path: Path) -> int:
    return count_lines(path.read_bytes())


# -- the basics ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_envelope_log_ends_every_line_in_one_fate_and_stores_full_calls(team, tmp_path):
    server = McpServer.objects.create(team=team, name="files", transport="stdio", command="x")
    body = text_of(5000)
    log = EnvelopeLog().initialize()
    log.frame("stderr", None, text="server says hi")
    log.call(
        "write",
        {"target": "a.md", "content": body, "expected_sha256": sha(body)},
        result={
            "content": [{"type": "text", "text": json.dumps({"sha256": sha(body)})}],
            "structuredContent": {"bytes": 1, "sha256": sha(body).upper()},
            "isError": False,
        },
    )
    log.call("write", {"target": "b.md", "path": "docs/a.md"})  # a reference call
    log.call(
        "read",
        {"query": "x"},
        result={"content": [{"type": "text", "text": '{"sha256": "' + "ab" * 32 + '"}'}]},
    )
    log.lines.append(b"{not json\n")
    log.lines.append(b"\n")
    path = log.write(tmp_path / "capture.jsonl")

    job = pipeline.ingest_path(team, path)

    assert_reconciles(job, line_count(path))
    assert (job.stored, job.ignored, job.quarantined, job.duplicate) == (6, 5, 1, 0)
    assert job.format == "envelope" and job.calls_stored == 3
    assert job.ignored_reasons == {"session_context": 2, "notification": 1, "stderr": 1, "blank": 1}
    assert job.quarantined_reasons == {"invalid_json": 1}
    bad = LineRecord.objects.get(job=job, status="quarantined")
    assert (bad.line_no, bad.reason, bad.raw) == (11, "invalid_json", "{not json")

    write, ref, read = ToolCall.objects.filter(job=job).order_by("request_ts")
    assert write.server == server and write.server_label == "files" and write.tool == "write"
    assert write.agent.family == "claude-code" and write.agent.version == "2.0.14"
    assert write.session.session_key == "s1" and write.session.agent == write.agent
    assert write.server_reported_sha256 == sha(body)  # structuredContent wins, lowercased
    assert write.is_error is False and write.duration_ms == 1000.0 and write.jsonrpc_id == "1"
    assert write.bulk_count == 1 and not write.is_reference_call
    (arg,) = write.bulk_arguments.all()
    assert (arg.pointer, arg.kind, arg.sha256, arg.bytes) == (
        "/content",
        "string",
        sha(body),
        len(body.encode()),
    )
    assert arg.lines == body.count("\n") + 1 and not arg.ends_with_newline and arg.tokens > 100
    assert arg.content.text == body and arg.content.sha256 == sha(body)
    assert ref.is_reference_call and (ref.reference_key, ref.reference_value) == ("path", "docs/a.md")
    assert read.server_reported_sha256 == "ab" * 32  # from a JSON text result
    assert job.verdict_counts == {"exact": 1, "by_reference": 1}


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
def test_reingesting_the_same_file_stores_nothing_new(team, tmp_path):
    log = EnvelopeLog().initialize()
    for i in range(5):
        log.call("write", {"content": text_of(2000, i)})
    path = log.write(tmp_path / "c.jsonl")
    first = pipeline.ingest_path(team, path)
    counts = (ToolCall.objects.count(), BulkArgument.objects.count(), BulkContent.objects.count())
    second = pipeline.ingest_path(team, path)

    assert first.stored == 10 and first.calls_stored == 5
    assert_reconciles(second, line_count(path))
    assert (second.stored, second.duplicate, second.calls_stored) == (0, 10, 0)
    assert (ToolCall.objects.count(), BulkArgument.objects.count(), BulkContent.objects.count()) == counts
    # Same bytes uploaded again through another way in: still nothing new.
    third = pipeline.ingest_bytes(team, path.read_bytes(), source="api", filename="c.jsonl")
    assert (third.stored, third.duplicate) == (0, 10)
    assert Path(third.path).parent == Path(upload_dir(team))
    # Another team is another world.
    other = pipeline.ingest_path(team.__class__.objects.create(name="Other"), path)
    assert other.stored == 10


@pytest.mark.django_db
def test_run_job_is_idempotent_and_a_done_job_is_left_alone(team, tmp_path):
    path = EnvelopeLog().initialize().call("write", {"content": "x"}).write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c.jsonl", path=path)
    assert job.status == "queued" and job.total_bytes == path.stat().st_size
    done = pipeline.run_job(job.pk)
    again = pipeline.run_job(job.pk)
    assert done.status == again.status == "done"
    assert (again.stored, again.calls_stored, again.finished) == (done.stored, 1, done.finished)
    assert again.bytes_done == again.total_bytes and again.progress_pct == 100


@pytest.mark.django_db
def test_sample_logs_of_every_format_ingest_and_reconcile(team):
    expected = {
        "envelope.jsonl": "envelope",
        "envelope_redacted.jsonl": "envelope",
        "mcp_session.har": "har",
        "claude_code_session.jsonl": "claude-code",
        "codex_rollout.jsonl": "codex",
    }
    for name, fmt in expected.items():
        job = pipeline.ingest_path(team, LOGS / name)
        lines = len(json.loads((LOGS / name).read_bytes())["log"]["entries"]) if fmt == "har" else None
        assert_reconciles(job, lines if lines is not None else line_count(LOGS / name))
        assert job.format == fmt and job.calls_stored > 0, name
    redacted = ToolCall.objects.get(source_format="envelope", redacted=True)
    digest = redacted.bulk_arguments.get()
    assert digest.kind == "digest" and len(digest.sha256) == 64 and digest.content is None


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


@pytest.mark.django_db
def test_invalid_utf8_quarantine_keeps_the_exact_bytes(team, tmp_path):
    path = tmp_path / "c.jsonl"
    raw = b'{"session_id":"s","direction":"c2s","raw":{"x":"\xff\xfe"}}'
    path.write_bytes(raw + b"\n" + b"\x00\x00\n")
    job = pipeline.ingest_path(team, path, format="envelope")
    assert_reconciles(job, 2)
    first, second = LineRecord.objects.filter(job=job).order_by("line_no")
    assert first.reason == "invalid_utf8" and first.exact_raw() == raw and "\\xff" in first.raw
    assert second.exact_raw() == b"\x00\x00" and "\x00" not in second.raw


@pytest.mark.django_db
def test_gzip_input_and_unknown_formats(team, tmp_path):
    source = EnvelopeLog().initialize().call("w", {"content": "abc"})
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(b"".join(source.lines)))
    job = pipeline.ingest_path(team, gz)
    assert_reconciles(job, len(source.lines))
    assert job.calls_stored == 1 and job.bytes_done == gz.stat().st_size

    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n\nworld\n")
    unknown = pipeline.ingest_path(team, junk)
    assert unknown.status == "done" and unknown.format == "unknown"
    assert (unknown.lines_read, unknown.quarantined, unknown.ignored) == (3, 2, 1)
    assert "cannot tell the log format" in unknown.error

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    job = pipeline.ingest_path(team, empty)
    assert job.status == "done" and job.lines_read == 0 and not job.error


@pytest.mark.django_db
def test_unexpected_errors_fail_the_job_with_the_error_and_keep_counts(team, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 2
    log = EnvelopeLog().initialize()
    for i in range(6):
        log.call("w", {"content": f"v{i}"})
    path = log.write(tmp_path / "c.jsonl")
    batches: list[list[int]] = []

    def explode(sender, team, call_ids, job, **kwargs):
        batches.append(call_ids)
        if len(batches) == 2:
            raise RuntimeError("receiver broke")

    calls_ingested.connect(explode)
    try:
        job = pipeline.ingest_path(team, path)
    finally:
        calls_ingested.disconnect(explode)
    assert job.status == "failed" and "RuntimeError: receiver broke" in job.error
    assert job.calls_stored == 4 and job.run_token == ""  # both committed batches kept
    assert job.stored + job.duplicate + job.ignored + job.quarantined == job.lines_read > 0
    # Re-running resumes and finishes with the same counts as a clean run.
    resumed = pipeline.run_job(job.pk)
    clean = pipeline.ingest_path(team.__class__.objects.create(name="Clean"), path)
    assert_reconciles(resumed, len(log.lines))
    for field in ("stored", "duplicate", "ignored", "quarantined", "calls_stored"):
        assert getattr(resumed, field) == getattr(clean, field), field

    missing = pipeline.create_job(team, source="upload", filename="gone", path=tmp_path / "gone.jsonl")
    failed = pipeline.run_job(missing.pk)
    assert failed.status == "failed" and "cannot open" in failed.error


@pytest.mark.django_db
def test_signal_carries_each_batch_of_stored_calls(team, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 3
    log = EnvelopeLog().initialize()
    for i in range(7):
        log.call("w", {"content": f"v{i}"})
    path = log.write(tmp_path / "c.jsonl")
    seen: list[list[int]] = []

    def receiver(sender, team, call_ids, job, **kwargs):
        assert ToolCall.objects.filter(pk__in=call_ids, job=job).count() == len(call_ids)  # committed
        seen.append(list(call_ids))

    calls_ingested.connect(receiver)
    try:
        job = pipeline.ingest_path(team, path)
        again = pipeline.ingest_path(team, path)
    finally:
        calls_ingested.disconnect(receiver)
    assert sorted(i for batch in seen for i in batch) == sorted(
        ToolCall.objects.filter(job=job).values_list("pk", flat=True)
    )
    assert len(seen) >= 3 and again.calls_stored == 0


@pytest.mark.django_db
def test_lines_above_the_watermark_are_not_counted_twice_on_resume(team, tmp_path, settings):
    """An unanswered request early on holds the watermark back while later lines settle."""
    settings.INGEST_BATCH_LINES = 3
    log = EnvelopeLog().initialize()
    log.frame(
        "c2s",
        {"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": {"name": "slow", "arguments": {}}},
    )
    for i in range(8):
        log.call("w", {"content": f"v{i}"})
    path = log.write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c", path=path)
    calls = {"n": 0}

    def die_after_three(sender, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # stands in for a kill between batches

    calls_ingested.connect(die_after_three)
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_job(job.pk)
    finally:
        calls_ingested.disconnect(die_after_three)
    job.refresh_from_db()
    assert job.status == "running" and job.watermark == 3  # held back by line 4
    assert LineRecord.objects.filter(job=job, line_no__gt=3).exists()
    IngestJob.objects.filter(pk=job.pk).update(worker="gone-host:1", heartbeat_at=None)  # owner is dead
    resumed = pipeline.run_job(job.pk)
    assert_reconciles(resumed, len(log.lines))
    assert (resumed.stored, resumed.calls_stored) == (17, 9)
    assert ToolCall.objects.get(job=job, tool="slow").unanswered


@pytest.mark.django_db
def test_a_live_lease_keeps_a_second_run_out(team, tmp_path):
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c", path=path)
    from django.utils import timezone

    IngestJob.objects.filter(pk=job.pk).update(
        status="running", run_token="other", worker="elsewhere:42", heartbeat_at=timezone.now()
    )
    assert pipeline.run_job(job.pk).calls_stored == 0
    IngestJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timezone.timedelta(hours=1))
    assert pipeline.run_job(job.pk).calls_stored == 1


@pytest.mark.django_db
def test_management_command_prints_counts(team, tmp_path):
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")
    out = StringIO()
    call_command("ingest", str(path), "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["read"] == 5 and summary["stored"] == 2 and summary["ignored"] == 3
    assert summary["calls_stored"] == 1 and summary["reconciles"] and summary["status"] == "done"
    assert summary["verdict_counts"] == {"unverifiable": 1}


# -- watched files ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_tailing_a_growing_file_stores_each_call_once_complete(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    log = EnvelopeLog().initialize()
    log.call("w", {"content": "first"})
    path = tmp_path / "live.jsonl"
    st = None

    def watched() -> WatchedFile:
        nonlocal st
        st = os.stat(path)
        obj, _ = WatchedFile.objects.get_or_create(
            folder=folder, device=st.st_dev, inode=st.st_ino, defaults={"path": str(path)}
        )
        return obj

    # Initialize, one call, then a request whose response is not written yet, then half a line.
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "w", "arguments": {"content": "2"}},
    }
    log.frame("c2s", request)
    partial = b'{"session_id":"s1","direction":"s2c","raw":{"jsonrpc":"2.0","id":7,'
    path.write_bytes(b"".join(log.lines) + partial)
    job = pipeline.ingest_watched_file(watched())
    w = WatchedFile.objects.get()
    assert w.offset == sum(map(len, log.lines)) and w.line_no == 6
    assert job.status == "running" and job.source == "watch"
    assert list(ToolCall.objects.filter(job=job).values_list("tool", "unanswered")) == [("w", False)]
    assert job.lines_read == 5  # line 6 waits for its response

    # The rest of the response arrives, then more.
    with open(path, "ab") as f:
        f.write(b'"result":{"content":[]}}}\n')
    log.lines.append(partial + b'"result":{"content":[]}}}\n')
    more = EnvelopeLog()
    more.seq, more.next_id = 100, 50
    more.call("w", {"content": "third"})
    with open(path, "ab") as f:
        f.write(b"".join(more.lines))
    job = pipeline.ingest_watched_file(watched())
    assert ToolCall.objects.filter(job=job).count() == 3
    assert not ToolCall.objects.filter(job=job, unanswered=True).exists()
    assert job.lines_read == 9 and job.stored == 6 and job.reconciles
    # Nothing new: nothing happens; final ends the job.
    assert pipeline.ingest_watched_file(watched()).lines_read == 9
    done = pipeline.ingest_watched_file(watched(), final=True)
    assert_reconciles(done, 9)

    # Rotation: a new file at the same path is not this WatchedFile.
    rotated = WatchedFile.objects.get()
    path.rename(tmp_path / "live.jsonl.1")
    path.write_bytes(b"".join(log.lines[:2]))
    assert pipeline.ingest_watched_file(rotated) is None


@pytest.mark.django_db
def test_the_final_read_counts_a_last_line_without_newline(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    path = tmp_path / "rotated.jsonl"
    log = EnvelopeLog().initialize().call("w", {"content": "a"})
    body = b"".join(log.lines)
    path.write_bytes(body + b'{"not": "an envelope"')  # the writer died before the newline
    st = os.stat(path)
    w = WatchedFile.objects.create(folder=folder, path=str(path), device=st.st_dev, inode=st.st_ino)
    tailing = pipeline.ingest_watched_file(w)
    assert tailing.lines_read == len(log.lines)  # the incomplete line waits
    done = pipeline.ingest_watched_file(WatchedFile.objects.get(pk=w.pk), final=True)
    assert_reconciles(done, len(log.lines) + 1)
    assert done.quarantined == 1


@pytest.mark.django_db
def test_a_file_truncated_in_place_starts_a_new_job_without_duplicates(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    path = tmp_path / "t.jsonl"
    log = EnvelopeLog().initialize().call("w", {"content": "a"}).call("w", {"content": "b"})
    path.write_bytes(b"".join(log.lines))
    st = os.stat(path)
    w = WatchedFile.objects.create(folder=folder, path=str(path), device=st.st_dev, inode=st.st_ino)
    first = pipeline.ingest_watched_file(w)
    with open(path, "r+b") as f:  # copytruncate-style rotation keeps the inode
        f.truncate(0)
        f.write(b"".join(log.lines[:5]))
    second = pipeline.ingest_watched_file(w)
    assert second.pk != first.pk and second.calls_stored == 0 and second.duplicate == 2


# -- SIGKILL in the middle of a file -----------------------------------------------------------

CHILD = """
import json, os, sys
import django
django.setup()
from django.conf import settings
settings.INGEST_BATCH_CALLS = 25
from dashboard.teams.models import Team
from ingest.capture import pipeline
from ingest.capture.models import IngestJob
mode = sys.argv[1]
if mode == "setup":
    ids = []
    for name in ("Killed", "Clean"):
        team = Team.objects.create(name=name)
        ids.append(pipeline.create_job(team, source="upload", filename="big", path=sys.argv[2]).pk)
    print(json.dumps(ids))
elif mode == "run":
    job = pipeline.run_job(int(sys.argv[2]))
    print(json.dumps({f: getattr(job, f) for f in ("status", "lines_read", "stored", "duplicate", "ignored",
        "quarantined", "calls_stored", "ignored_reasons", "quarantined_reasons", "error")}))
"""


def _child_db_url(tmp_path: Path) -> tuple[str, bool]:
    """The test database for PostgreSQL; a private migrated SQLite file otherwise (the SQLite test
    database lives in this process's memory)."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = f"{db['USER'] or ''}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
        return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}", False
    return f"sqlite:///{tmp_path / 'kill.sqlite3'}", True


def _calls_of(db_url: str, job_id: int) -> int:
    query = "SELECT count(*) FROM ingest_toolcall WHERE job_id = %s"
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30) as conn:
            return conn.execute(query.replace("%s", "?"), (job_id,)).fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute(query, [job_id])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_file_resumes_to_the_same_counts(tmp_path):
    log = EnvelopeLog().initialize()
    for i in range(600):
        log.call("write", {"target": f"f{i}", "content": text_of(3000 + i, i)})
        if i % 50 == 0:
            log.lines.append(b"garbage line\n")
    path = log.write(tmp_path / "big.jsonl")
    db_url, migrate = _child_db_url(tmp_path)
    env = {**os.environ, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("REDIS_URL", None)

    def child(*args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, **kwargs
        )

    if migrate:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--skip-checks", "-v0"], cwd=ROOT, env=env, check=True
        )
    out, _ = child("setup", str(path)).communicate(timeout=60)
    killed_job, clean_job = json.loads(out)

    worker = child("run", str(killed_job))
    deadline = time.monotonic() + 120
    while _calls_of(db_url, killed_job) < 100:
        assert worker.poll() is None, "the ingest finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)  # reaped: its pid is gone, so the next run may take the job over at once
    at_kill = _calls_of(db_url, killed_job)
    assert 100 <= at_kill < 600, at_kill

    resumed = json.loads(child("run", str(killed_job)).communicate(timeout=180)[0])
    clean = json.loads(child("run", str(clean_job)).communicate(timeout=180)[0])
    assert resumed["status"] == clean["status"] == "done", (resumed, clean)
    assert resumed == clean
    assert clean["lines_read"] == len(log.lines) and clean["calls_stored"] == 600
    assert (clean["stored"], clean["quarantined"], clean["duplicate"]) == (1200, 12, 0)
    assert _calls_of(db_url, killed_job) == 600


# -- fuzz -------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
_SAMPLES = {
    "envelope": (LOGS / "envelope.jsonl").read_bytes().splitlines(keepends=True),
    "claude-code": (LOGS / "claude_code_session.jsonl").read_bytes().splitlines(keepends=True),
    "codex": (LOGS / "codex_rollout.jsonl").read_bytes().splitlines(keepends=True),
}
_HOSTILE = [
    b"[" * 3000 + b"\n",
    b'{"n": 1e999}\n',
    b'{"x": "\xff"}\n',
    b"\x00\x00\n",
    b'{"session_id":"s","direction":"c2s","raw":{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"t\\u0000","arguments":{"content":"\\u0000\\ud800"}}}}\n',
    b'{"session_id":"s","direction":"s2c","raw":{"jsonrpc":"2.0","id":1,"error":{"\\u0000":"\\u0000"}}}\n',
    b"\n",
]


@st.composite
def mangled_logs(draw) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(sorted(_SAMPLES)))
    lines = list(_SAMPLES[fmt])
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["drop", "dup", "cut", "hostile", "swap"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop" and len(lines) > 1:
            lines.pop(i)
        elif op == "dup":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))] + b"\n"
        elif op == "hostile":
            lines.insert(i, draw(st.sampled_from(_HOSTILE)))
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    if draw(st.booleans()):
        lines.append(draw(st.binary(max_size=200)))
    return fmt, b"".join(lines)


@pytest.mark.django_db
@FUZZ
@given(case=mangled_logs(), batch=st.integers(1, 4))
def test_fuzzed_logs_never_crash_and_always_reconcile_twice(team, tmp_path_factory, case, batch):
    fmt, data = case
    from django.conf import settings as dj_settings

    dj_settings.INGEST_BATCH_CALLS = batch
    dj_settings.INGEST_BATCH_LINES = batch * 3
    try:
        path = tmp_path_factory.mktemp("fuzz") / "f.jsonl"
        path.write_bytes(data)
        lines = count_lines(data)
        # The database is not rolled back between examples: each gets its own team.
        team = team.__class__.objects.create(name=f"fuzz {team.__class__.objects.count()}")
        first = pipeline.ingest_path(team, path, format=fmt)
        second = pipeline.ingest_path(team, path, format=fmt)
    finally:
        del dj_settings.INGEST_BATCH_CALLS, dj_settings.INGEST_BATCH_LINES
    for job in (first, second):
        assert job.status == "done", job.error
        assert job.lines_read == lines and job.reconciles, (job.lines_read, lines)
    assert second.calls_stored == 0 and second.stored == 0
    assert second.duplicate == first.stored


# -- through a real worker ------------------------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_task_runs_a_job_on_a_real_worker(postgres_and_redis, celery_worker_process, team, tmp_path):
    from ingest.capture.tasks import run_ingest_job, stalled_jobs

    log = EnvelopeLog().initialize()
    for i in range(4):
        log.call("write", {"content": text_of(3000, i)})
    path = log.write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c.jsonl", path=path)
    run_ingest_job.delay(job.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in ("done", "failed"):
            break
        time.sleep(0.2)
    assert_reconciles(job, len(log.lines))
    assert job.calls_stored == 4 and BulkArgument.objects.filter(call__job=job).count() == 4
    assert stalled_jobs() == []
