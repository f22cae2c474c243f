"""The job's lease (ingest.capture.pipeline.lease): one run per job, and the jobs nobody works on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.capture import pipeline
from ingest.capture.models import (
    IngestJob,
)
from tests.ingest.capture.logs import (
    EnvelopeLog,
)


@pytest.mark.django_db
def test_a_live_lease_keeps_a_second_run_out(team, tmp_path):
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c", path=path)
    IngestJob.objects.filter(pk=job.pk).update(
        status="running", run_token="other", worker="elsewhere:42", heartbeat_at=timezone.now()
    )
    assert pipeline.run_job(job.pk).calls_stored == 0
    IngestJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert pipeline.run_job(job.pk).calls_stored == 1


@pytest.mark.django_db
def test_stalled_jobs_are_the_stale_running_and_the_long_queued_ones(team, tmp_path, settings):
    settings.INGEST_JOB_LEASE_SECONDS = 60
    now = timezone.now()
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")

    def job(name: str, **fields: object) -> int:
        pk = pipeline.create_job(team, source="upload", filename=name, path=path).pk
        IngestJob.objects.filter(pk=pk).update(**fields)
        return pk

    running = {"status": "running", "run_token": "t", "worker": "gone-host:1"}
    stale = job("stale heartbeat", **running, heartbeat_at=now - timedelta(seconds=61))
    job("live heartbeat", **running, heartbeat_at=now - timedelta(seconds=59))
    # A lost message is sent again after a minute (INGEST_QUEUED_RESEND_SECONDS), not five leases.
    lost = job("queued past a minute", created=now - timedelta(seconds=61))
    job("queued a moment ago", created=now - timedelta(seconds=59))
    # A watched file's job is driven by the folder scan; ended jobs are nobody's business.
    job("watched", source="watch", **running, heartbeat_at=now - timedelta(hours=1))
    job("watched, queued", source="watch", created=now - timedelta(hours=1))
    job("done", status="done", heartbeat_at=now - timedelta(hours=1), created=now - timedelta(hours=1))
    job("failed", status="failed", heartbeat_at=now - timedelta(hours=1), created=now - timedelta(hours=1))

    assert sorted(pipeline.stalled_jobs(now)) == sorted([stale, lost])
