"""Repeated frames through a real ingest: counted duplicate, stored and judged once."""

from __future__ import annotations

import pytest

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, LineRecord, ToolCall
from tests.ingest.capture.logs import EnvelopeLog, assert_reconciles, line_count, text_of


def _log() -> EnvelopeLog:
    log = EnvelopeLog().initialize()
    for i in range(3):
        log.call("write", {"target": f"f{i}", "content": text_of(1500, i)})
    return log


@pytest.mark.django_db
def test_a_log_pasted_twice_stores_every_call_once(team, tmp_path):
    log = _log()
    log.lines = log.lines + log.lines
    path = log.write(tmp_path / "twice.jsonl")
    job = pipeline.ingest_path(team, path)

    assert_reconciles(job, line_count(path))
    assert (job.stored, job.duplicate, job.ignored, job.quarantined) == (6, 9, 3, 0)
    assert job.calls_stored == ToolCall.objects.filter(job=job).count() == 3
    assert BulkArgument.objects.filter(call__job=job).count() == 3
    assert sum(job.verdict_counts.values()) == 3
    duplicates = LineRecord.objects.filter(job=job, status=LineRecord.Status.DUPLICATE)
    assert sorted(duplicates.values_list("line_no", flat=True)) == list(range(10, 19))
    assert set(duplicates.values_list("reason", flat=True)) == {"duplicate_frame"}


@pytest.mark.django_db
def test_frames_seen_in_an_earlier_ingest_are_duplicates(team, tmp_path):
    log = _log()
    first = pipeline.ingest_path(team, log.write(tmp_path / "a.jsonl"))
    # A later file re-ships the last call's frames after new ones.
    overlap = EnvelopeLog()
    overlap.lines = log.lines[-2:]
    overlap.seq = log.seq
    overlap.next_id = log.next_id
    overlap.call("write", {"target": "new", "content": text_of(1500, 9)})
    second = pipeline.ingest_path(team, overlap.write(tmp_path / "b.jsonl"))

    assert first.calls_stored == 3
    assert_reconciles(second, 4)
    assert (second.stored, second.duplicate, second.calls_stored) == (2, 2, 1)
    assert ToolCall.objects.filter(team=team).count() == 4
    assert BulkArgument.objects.filter(call__team=team).count() == 4
