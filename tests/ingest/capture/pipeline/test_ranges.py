"""A large envelope log read in line ranges (ingest.capture.pipeline.ranges) against a real
database: the same counts, calls and kept lines as one pass, each line settled once, a pair split
by a cut still one answered call, re-ingest stores nothing, and the sweep's view of a split job."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall
from ingest.capture.pipeline import create_job, run_job, stalled_jobs
from tests.ingest.capture.logs import assert_reconciles
from tests.mcptax.formats.test_ranges import sample_log

COUNTS = ("lines_read", "stored", "duplicate", "ignored", "quarantined", "calls_stored")


def _counts(job: IngestJob) -> tuple[int, ...]:
    return tuple(getattr(job, name) for name in COUNTS)


def _split_run(team, path: Path, *, order=reversed) -> tuple[IngestJob, list[int]]:
    """Run the file's job as a worker does, handing ranges to a list; then run the ranges."""
    queued: list[int] = []
    job = create_job(team, source=IngestJob.Source.UPLOAD, filename=path.name, path=path)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the ranges are sent once committed
        run_job(job.pk, enqueue_range=queued.append)
    for pk in order(list(queued)):
        run_job(pk)
    return IngestJob.objects.get(pk=job.pk), queued


@pytest.fixture
def log_file(tmp_path, settings) -> Path:
    path = tmp_path / "big.jsonl"
    path.write_bytes(sample_log())
    settings.INGEST_RANGE_BYTES = path.stat().st_size // 5 + 1  # five ranges
    settings.INGEST_BATCH_LINES = 7
    return path


@pytest.mark.django_db
def test_a_split_file_ends_as_one_pass_ends_it(team, team_factory, log_file):
    data = log_file.read_bytes()
    lines = data.count(b"\n")
    other = team_factory("One pass")
    whole = pipeline.ingest_path(other, log_file)  # no worker to hand ranges to: one pass
    assert not IngestJob.objects.filter(parent=whole).exists()

    job, ranges = _split_run(team, log_file)
    assert len(ranges) == 5
    assert job.status == "done" and job.error == ""
    assert_reconciles(job, lines)
    assert _counts(job) == _counts(whole)
    # The sample's make-up: 59 calls (one never answered), 5 broken lines, one orphan response.
    assert job.calls_stored == 59 and job.quarantined == 5
    assert job.ignored_reasons == whole.ignored_reasons and job.ignored_reasons["orphan_response"] == 1
    calls = ToolCall.objects.filter(job=job)
    assert set(calls.values_list("dedupe_key", flat=True)) == set(
        ToolCall.objects.filter(job=whole).values_list("dedupe_key", flat=True)
    )
    assert list(calls.filter(unanswered=True).values_list("jsonrpc_id", flat=True)) == ["33"]
    assert set(calls.values_list("agent__name", flat=True)) == {"claude-code", "cursor-vscode"}
    kept = LineRecord.objects.filter(job=job, status="quarantined").values_list("line_no", flat=True)
    assert sorted(kept) == sorted(
        LineRecord.objects.filter(job=whole, status="quarantined").values_list("line_no", flat=True)
    )
    parts = IngestJob.objects.filter(parent=job).order_by("range_index")
    assert [p.status for p in parts] == ["done"] * 5
    assert sum(p.range_end - p.range_start for p in parts) == len(data)
    assert all(data[p.range_start - 1 : p.range_start] == b"\n" for p in parts[1:])


@pytest.mark.django_db
def test_re_ingesting_a_split_file_stores_nothing_new(team, log_file):
    first, _ = _split_run(team, log_file)
    again, _ = _split_run(team, log_file, order=list)
    assert again.status == "done"
    assert again.stored == 0 and again.calls_stored == 0
    assert again.duplicate == first.stored
    assert_reconciles(again, log_file.read_bytes().count(b"\n"))
    assert ToolCall.objects.filter(team=team).count() == 59


@pytest.mark.django_db
def test_a_range_run_twice_counts_its_lines_once(team, log_file):
    """A redelivered range (its lease free again) finds its work done: nothing counted twice."""
    queued: list[int] = []
    job = create_job(team, source=IngestJob.Source.UPLOAD, filename="big.jsonl", path=log_file)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the ranges are sent once committed
        run_job(job.pk, enqueue_range=queued.append)
    run_job(queued[0])
    before = _counts(IngestJob.objects.get(pk=queued[0]))
    IngestJob.objects.filter(pk=queued[0]).update(status="running")  # as if its end was never saved
    run_job(queued[0])
    assert _counts(IngestJob.objects.get(pk=queued[0])) == before
    for pk in queued[1:]:
        run_job(pk)
    assert_reconciles(IngestJob.objects.get(pk=job.pk), log_file.read_bytes().count(b"\n"))


@pytest.mark.django_db
def test_the_sweep_resumes_ranges_and_waits_for_them_before_the_parent(team, log_file, settings):
    queued: list[int] = []
    job = create_job(team, source=IngestJob.Source.UPLOAD, filename="big.jsonl", path=log_file)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the ranges are sent once committed
        run_job(job.pk, enqueue_range=queued.append)
    stale = timezone.now() - timedelta(seconds=10 * settings.INGEST_JOB_LEASE_SECONDS)
    IngestJob.objects.filter(pk__in=[job.pk, *queued]).update(created=stale, heartbeat_at=stale)
    # Every range is due (queued long ago); the parent waits for them.
    assert set(stalled_jobs()) == set(queued)
    for pk in queued:
        run_job(pk)
    assert IngestJob.objects.get(pk=job.pk).status == "done"
    assert stalled_jobs() == []


@pytest.mark.django_db
def test_the_page_shows_the_ranges_done_while_they_run(client, alice, team, log_file):
    queued: list[int] = []
    job = create_job(team, source=IngestJob.Source.UPLOAD, filename="big.jsonl", path=log_file)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the ranges are sent once committed
        run_job(job.pk, enqueue_range=queued.append)
    run_job(queued[1])
    client.force_login(alice)
    page = client.get(reverse("ingest_job", args=[team.slug, job.code])).content.decode()
    assert "1 of 5 ranges done" in page
    part = IngestJob.objects.get(pk=queued[1])
    assert f'data-count="lines_read">{part.lines_read}<' in page


@pytest.mark.django_db
def test_small_gzip_and_har_files_are_read_in_one_pass(team, tmp_path, settings, log_file):
    settings.INGEST_RANGE_BYTES = 1000
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(log_file.read_bytes()))
    har = Path(__file__).resolve().parents[3] / "data" / "logs" / "mcp_session.har"
    for path in (gz, har):
        queued: list[int] = []
        job = create_job(team, source=IngestJob.Source.UPLOAD, filename=path.name, path=path)
        with TestCase.captureOnCommitCallbacks(execute=True):
            done = run_job(job.pk, enqueue_range=queued.append)
        assert queued == [] and done.status == "done", path
    settings.INGEST_RANGE_BYTES = log_file.stat().st_size  # not larger than the threshold
    queued = []
    job = create_job(team, source=IngestJob.Source.UPLOAD, filename="big.jsonl", path=log_file)
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert run_job(job.pk, enqueue_range=queued.append).status == "done"
    assert queued == []
