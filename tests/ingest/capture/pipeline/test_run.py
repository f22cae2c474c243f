"""Running a job (ingest.capture.pipeline.run) against a real database: every line settled once,
dedupe, failures, the signal per batch, resume after a failure and after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from dashboard.servers.models import McpServer
from ingest.capture import pipeline
from ingest.capture.models import (
    BulkArgument,
    BulkContent,
    IngestJob,
    LineRecord,
    ToolCall,
)
from ingest.capture.uploads import upload_dir
from tests.conftest import ROOT
from tests.helpers import sha, wait_until
from tests.ingest.capture.logs import (
    EnvelopeLog,
    assert_reconciles,
    line_count,
    receiving,
    text_of,
)

pytestmark = pytest.mark.timeout(240)


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
    assert third.storage_name.startswith(upload_dir(team) + "/") and third.path == ""
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

    with receiving(explode):
        job = pipeline.ingest_path(team, path)
    assert job.status == "failed" and "RuntimeError: receiver broke" in job.error
    assert job.calls_stored == 4 and job.run_token == ""  # both committed batches kept
    assert job.stored + job.duplicate + job.ignored + job.quarantined == job.lines_read > 0
    # Re-running resumes and finishes with the same counts as a clean run.
    resumed = pipeline.run_job(job.pk)
    clean = pipeline.ingest_path(team.__class__.objects.create(name="Clean"), path)
    assert_reconciles(resumed, len(log.lines))
    for field in ("stored", "duplicate", "ignored", "quarantined", "calls_stored"):
        assert getattr(resumed, field) == getattr(clean, field), field

    # A missing input is transient for a queued job (retried), final for a command's own file.
    missing = pipeline.create_job(team, source="upload", filename="gone", path=tmp_path / "gone.jsonl")
    retrying = pipeline.run_job(missing.pk)
    assert retrying.status == "retrying" and "cannot open" in retrying.error and retrying.attempts == 1
    failed = pipeline.ingest_path(team, tmp_path / "gone.jsonl")
    assert failed.status == "failed" and "cannot open" in failed.error and failed.retry_at is None


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

    with receiving(receiver):
        job = pipeline.ingest_path(team, path)
        again = pipeline.ingest_path(team, path)
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

    with receiving(die_after_three), pytest.raises(KeyboardInterrupt):
        pipeline.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == "running" and job.watermark == 3  # held back by line 4
    assert LineRecord.objects.filter(job=job, line_no__gt=3).exists()
    IngestJob.objects.filter(pk=job.pk).update(worker="gone-host:1", heartbeat_at=None)  # owner is dead
    resumed = pipeline.run_job(job.pk)
    assert_reconciles(resumed, len(log.lines))
    assert (resumed.stored, resumed.calls_stored) == (17, 9)
    assert ToolCall.objects.get(job=job, tool="slow").unanswered


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
    if len(sys.argv) > 3:
        # Hold the run once 100 calls are committed and signalled: the kill then always lands in
        # the middle of the file, never after the last line, whatever the machine's speed.
        import threading
        from ingest.capture.signals import calls_ingested
        signalled = []
        def hold(sender, call_ids, **kwargs):
            signalled.extend(call_ids)
            if len(signalled) >= 100:
                open(sys.argv[3], "w").close()
                threading.Event().wait()
        calls_ingested.connect(hold, weak=False)
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


@pytest.mark.slow
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

    held = tmp_path / "held"
    worker = child("run", str(killed_job), str(held))

    def holding() -> bool:
        assert worker.poll() is None, "the ingest ended before it was held"
        return held.exists()

    wait_until(holding, timeout=120, message="the run to hold after 100 calls")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)  # reaped: its pid is gone, so the next run may take the job over at once
    # Four batches of 25 committed, the rest of the file never read.
    assert _calls_of(db_url, killed_job) == 100

    resumed = json.loads(child("run", str(killed_job)).communicate(timeout=180)[0])
    clean = json.loads(child("run", str(clean_job)).communicate(timeout=180)[0])
    assert resumed["status"] == clean["status"] == "done", (resumed, clean)
    assert resumed == clean
    assert clean["lines_read"] == len(log.lines) and clean["calls_stored"] == 600
    assert (clean["stored"], clean["quarantined"], clean["duplicate"]) == (1200, 12, 0)
    assert _calls_of(db_url, killed_job) == 600
