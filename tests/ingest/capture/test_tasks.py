"""Capture's Celery tasks, eager and on a real worker (PostgreSQL + Redis leg)."""

from __future__ import annotations

import gzip
import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from dashboard.teams.models import ApiToken
from ingest.capture import pipeline
from ingest.capture.models import (
    BulkArgument,
    IngestJob,
    ToolCall,
)
from ingest.tasks import resume_stalled_jobs, run_ingest_job
from tests.conftest import make_envelope_log
from tests.helpers import wait_until
from tests.ingest.capture.logs import (
    API,
    EnvelopeLog,
    assert_reconciles,
    bearer,
    receiving,
    text_of,
)


def stalled_mid_file(team, path: Path, settings) -> IngestJob:
    """A job whose worker died after its first committed batch: running, leased, heartbeat stale."""
    settings.INGEST_BATCH_CALLS = 2
    job = pipeline.create_job(team, source="upload", filename=path.name, path=path)

    def die(sender, **kwargs):
        raise KeyboardInterrupt  # stands in for the kill, right after the first commit

    with receiving(die), pytest.raises(KeyboardInterrupt):
        pipeline.run_job(job.pk)
    IngestJob.objects.filter(pk=job.pk).update(
        worker="gone-host:1", heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    job.refresh_from_db()
    assert job.status == "running" and job.run_token and job.calls_stored == 2
    return job


def ended(job: IngestJob) -> bool:
    job.refresh_from_db()
    return job.status in ("done", "failed")


def six_calls(session: str) -> EnvelopeLog:
    log = EnvelopeLog(session=session).initialize()
    for i in range(6):
        log.call("write", {"content": text_of(2000, i) + session})
    return log


@pytest.mark.django_db
def test_resume_stalled_jobs_finishes_each_stalled_job_and_leaves_the_rest(
    team, tmp_path, settings, eager_celery
):
    settings.INGEST_JOB_LEASE_SECONDS = 60
    killed_log, lost_log = six_calls("killed"), six_calls("lost")
    killed = stalled_mid_file(team, killed_log.write(tmp_path / "killed.jsonl"), settings)
    lost = pipeline.create_job(
        team, source="api", filename="lost", path=lost_log.write(tmp_path / "lost.jsonl")
    )
    IngestJob.objects.filter(pk=lost.pk).update(created=timezone.now() - timedelta(hours=1))
    fresh = pipeline.create_job(team, source="upload", filename="fresh", path=tmp_path / "lost.jsonl")

    assert sorted(resume_stalled_jobs()) == sorted([killed.pk, lost.pk])

    for job, log in ((killed, killed_log), (lost, lost_log)):
        job.refresh_from_db()
        assert_reconciles(job, len(log.lines))
        assert job.calls_stored == ToolCall.objects.filter(job=job).count() == 6
        assert (job.stored, job.duplicate) == (12, 0)  # a request and its response per call
    fresh.refresh_from_db()
    assert fresh.status == "queued" and fresh.lines_read == 0
    assert resume_stalled_jobs() == []


@pytest.mark.services
@pytest.mark.slow  # starts with a real worker; the job goes through the broker
@pytest.mark.django_db(transaction=True)
def test_a_stalled_job_is_resumed_to_completion_exactly_once_on_a_real_worker(
    postgres_and_redis, celery_worker_process, team, tmp_path, settings
):
    log = six_calls("killed")
    job = stalled_mid_file(team, log.write(tmp_path / "killed.jsonl"), settings)
    assert pipeline.stalled_jobs() == [job.pk]
    # The beat may fire again before the worker picks the job up: two deliveries, one run's work.
    assert resume_stalled_jobs() == [job.pk]
    resume_stalled_jobs()

    wait_until(lambda: ended(job), timeout=60, message="the resumed job to end")
    assert_reconciles(job, len(log.lines))
    assert job.worker.split(":")[-1] != str(os.getpid())
    assert job.calls_stored == ToolCall.objects.filter(job=job).count() == 6
    assert BulkArgument.objects.filter(call__job=job).count() == 6
    assert (job.stored, job.duplicate) == (12, 0)  # a request and its response per call
    assert pipeline.stalled_jobs() == []


@pytest.mark.services
@pytest.mark.slow  # starts with a real worker; the job goes through the broker
@pytest.mark.django_db(transaction=True)
def test_the_task_runs_a_job_on_a_real_worker(postgres_and_redis, celery_worker_process, team, tmp_path):
    log = EnvelopeLog().initialize()
    for i in range(4):
        log.call("write", {"content": text_of(3000, i)})
    path = log.write(tmp_path / "c.jsonl")
    job = pipeline.create_job(team, source="upload", filename="c.jsonl", path=path)
    run_ingest_job.delay(job.pk)
    wait_until(lambda: ended(job), timeout=60, message="the job to end")
    assert_reconciles(job, len(log.lines))
    assert job.calls_stored == 4 and BulkArgument.objects.filter(call__job=job).count() == 4
    assert pipeline.stalled_jobs() == []


@pytest.mark.services
@pytest.mark.slow  # starts with a real worker; the job goes through the broker
@pytest.mark.django_db(transaction=True)
def test_upload_and_api_jobs_run_on_a_real_worker(
    postgres_and_redis, celery_worker_process, alice_client, team, settings, rate_clock
):
    """PostgreSQL + Redis: the upload's job goes through the broker to a real `celery worker`, and the
    API's queued mode too; the rate limit counts in the shared (Redis) cache."""
    data = make_envelope_log(5, bad_lines=1)
    response = alice_client.post(
        reverse("ingest_upload", args=[team.slug]), {"file": SimpleUploadedFile("w.jsonl", data)}
    )
    assert response.status_code == 302
    _, plaintext = ApiToken.issue(team, "worker-test")
    queued = alice_client.post(
        f"{API}?wait=false",
        gzip.compress(make_envelope_log(2, session="api")),
        content_type="application/gzip",
        **bearer(plaintext),
    )
    assert queued.status_code == 202
    wait_until(
        lambda: IngestJob.objects.filter(team=team, status__in=("done", "failed")).count() == 2,
        timeout=60,
        message="both jobs to end",
    )
    upload_job = IngestJob.objects.get(team=team, source="upload")
    api_job = IngestJob.objects.get(team=team, source="api")
    assert upload_job.status == "done" and upload_job.worker.split(":")[-1] != str(os.getpid())
    assert (upload_job.lines_read, upload_job.stored, upload_job.quarantined, upload_job.calls_stored) == (
        13,
        10,
        1,
        5,
    )
    assert api_job.status == "done" and api_job.calls_stored == 2 and api_job.reconciles

    settings.INGEST_API_RATE_PER_MINUTE = 2  # one request already counted for this token
    ok = alice_client.post(API, make_envelope_log(1, seed="r"), content_type="x", **bearer(plaintext))
    assert ok.status_code == 202  # stored and queued; the worker ingests it
    assert (
        alice_client.post(
            API, make_envelope_log(1, seed="s"), content_type="x", **bearer(plaintext)
        ).status_code
        == 429
    )


def test_the_periodic_task_scans_enabled_folders_only(watched, team, eager_celery):
    from config.celery import app
    from ingest.tasks import scan_watched_folders

    assert app.conf.beat_schedule["scan-watched-folders"]["task"] == "ingest.tasks.scan_watched_folders"
    with open(os.path.join(watched.path, "a.jsonl"), "wb") as f:
        f.write(make_envelope_log(1))
    watched.enabled = False
    watched.save()
    assert scan_watched_folders.delay().get() == 0
    watched.enabled = True
    watched.save()
    assert scan_watched_folders.delay().get() == 1
    assert ToolCall.objects.filter(team=team).count() == 1
