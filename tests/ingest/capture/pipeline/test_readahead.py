"""Reading one batch ahead (ingest.capture.pipeline.readahead): a failure leaves the job exactly
as when reading and writing took turns, and the reading thread always ends."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import OperationalError

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall
from ingest.capture.pipeline.batch import Run
from ingest.capture.pipeline.readahead import RUN_GC_THRESHOLD, THREAD_NAME, ReadAhead, gc_quiet
from tests.helpers import wait_until
from tests.ingest.capture.logs import EnvelopeLog, assert_reconciles

pytestmark = pytest.mark.timeout(120)


def reading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def failing_second_write(monkeypatch, *, wait_for_third: bool) -> dict[str, int]:
    """Batch 2's write fails with a database error; with ``wait_for_third``, only once batch 3
    has been read (the thread is a batch ahead). Returns the counts of batches read and written."""
    seen = {"read": 0, "written": 0}
    batches, flush = Run._batches, Run.flush

    def counted(self, items, lines):
        for batch in batches(self, items, lines):
            seen["read"] += 1
            yield batch

    def failing(self, batch, bytes_done):
        if seen["written"] == 1:
            if wait_for_third:
                wait_until(lambda: seen["read"] >= 3, timeout=30)
            raise OperationalError("the database went away")
        flush(self, batch, bytes_done)
        seen["written"] += 1

    monkeypatch.setattr(Run, "_batches", counted)
    monkeypatch.setattr(Run, "flush", failing)
    return seen


def state(job: IngestJob) -> tuple:
    """What a run leaves behind, independent of ids and of the team."""
    job.refresh_from_db()
    fields = ("status", "stored", "duplicate", "ignored", "quarantined", "calls_stored", "watermark")
    lines = sorted(LineRecord.objects.filter(job=job).values_list("line_no", "status", "reason"))
    calls = sorted(ToolCall.objects.filter(job=job).values_list("tool", "argument_sha256", "request_ts"))
    return tuple(getattr(job, f) for f in fields), lines, calls


def log_of(calls: int) -> EnvelopeLog:
    log = EnvelopeLog().initialize()
    for i in range(calls):
        log.call("write", {"content": f"value {i} " * 50})
    return log


@pytest.mark.django_db
def test_a_write_failing_while_the_next_batch_was_read_ahead_leaves_the_job_as_before(
    team_factory, tmp_path, settings, monkeypatch
):
    settings.INGEST_BATCH_CALLS = 3
    log = log_of(14)
    path = log.write(tmp_path / "c.jsonl")
    after: dict[bool, tuple] = {}
    jobs: dict[bool, IngestJob] = {}
    for ahead in (True, False):
        settings.INGEST_READ_AHEAD = ahead
        with monkeypatch.context() as patch:
            seen = failing_second_write(patch, wait_for_third=ahead)
            team = team_factory(name=f"ahead {ahead}")
            job = pipeline.create_job(team, source="upload", filename="c.jsonl", path=path)
            pipeline.run_job(job.pk)
        assert seen["written"] == 1 and seen["read"] == (3 if ahead else 2)
        assert not reading_threads()  # the thread ended with the run
        after[ahead], jobs[ahead] = state(job), job
    assert after[True] == after[False]
    assert after[True][0][0] == IngestJob.Status.RETRYING and after[True][0][5] == 3  # batch 1 kept
    assert "the database went away" in jobs[True].error
    # The retry reads on from batch 1's watermark and ends as an uninterrupted run: nothing lost.
    settings.INGEST_READ_AHEAD = True
    clean = pipeline.ingest_path(team_factory(name="clean"), path)
    for job in jobs.values():
        IngestJob.objects.filter(pk=job.pk).update(retry_at=None)
        resumed = pipeline.run_job(job.pk)
        assert_reconciles(resumed, len(log.lines))
        assert state(resumed)[0] == state(clean)[0] and state(resumed)[2] == state(clean)[2]
    assert not reading_threads()


@pytest.mark.django_db
def test_the_batches_are_the_same_with_and_without_reading_ahead(team_factory, tmp_path, settings):
    settings.INGEST_BATCH_CALLS = 2
    path = log_of(9).write(tmp_path / "c.jsonl")
    ends = []
    for ahead in (True, False):
        settings.INGEST_READ_AHEAD = ahead
        job = pipeline.ingest_path(team_factory(name=f"ahead {ahead}"), path)
        ends.append(state(job))
    assert ends[0] == ends[1] and ends[0][0][5] == 9


def test_an_error_while_reading_is_raised_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad input")

    got: list[int] = []
    with pytest.raises(ValueError, match="bad input"), ReadAhead(source()) as ahead:
        for item in ahead:
            got.append(item)
    assert got == [1, 2] and not reading_threads()


def test_the_thread_stays_one_item_ahead_and_stops_when_the_reader_fails() -> None:
    produced: list[int] = []
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()  # the generator's clean-up ran (in the thread that iterated it)

    with pytest.raises(RuntimeError), ReadAhead(source()) as ahead:
        for item in ahead:
            if item == 3:
                time.sleep(0.2)  # the thread has every chance to run further ahead
                assert produced == [0, 1, 2, 3, 4]  # one item ahead of the one in hand
                raise RuntimeError("write failed")
    assert closed.is_set() and not reading_threads()
    assert produced == [0, 1, 2, 3, 4]


def test_gc_is_quiet_during_a_run_and_restored_after() -> None:
    before = gc.get_threshold()
    with gc_quiet():
        with gc_quiet():
            assert gc.get_threshold()[0] == RUN_GC_THRESHOLD and gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == RUN_GC_THRESHOLD  # the outer run still runs
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
