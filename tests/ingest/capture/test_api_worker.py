"""The push API never ingests in the web request: it stores the body, queues the job and answers;
a real worker (PostgreSQL, Redis, `celery worker`) does the ingest. And a job whose queue message
was lost is sent again after about a minute, never run twice.

What failed: `POST /api/v1/ingest` ingested inside the request by default, so two 28 MiB pushes
held both web workers (and `/login/`) for 67 s until gunicorn killed them, leaving the jobs
`running` with 0 lines; a job whose message died with Redis waited 10 to 11 minutes.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.teams.models import ApiToken
from ingest.capture import pipeline
from ingest.capture.models import IngestJob, ToolCall
from ingest.tasks import resume_stalled_jobs, run_ingest_job
from tests.conftest import make_envelope_log
from tests.helpers import wait_until
from tests.ingest.capture.logs import API, EnvelopeLog, bearer, text_of


def _ended(job: IngestJob) -> bool:
    job.refresh_from_db()
    return job.status in ("done", "failed")


def _run_here(job: IngestJob) -> bool:
    """Whether this (the web) process ran the job: its lease names host:pid of the runner."""
    return job.worker == f"{socket.gethostname()}:{os.getpid()}"


@pytest.mark.services
@pytest.mark.slow  # a real worker takes the job through Redis
@pytest.mark.django_db(transaction=True)
def test_a_push_is_answered_once_queued_and_the_worker_ingests_it(
    postgres_and_redis, celery_worker_process, client, team
):
    _, plaintext = ApiToken.issue(team, "push")
    calls = 400
    data = make_envelope_log(calls, content_bytes=12_000)  # about 10 MB
    response = client.post(API, data, content_type="application/x-ndjson", **bearer(plaintext))
    assert response.status_code == 202, response.content[:300]
    body = response.json()
    assert body["url"] == f"/api/v1/ingest/{body['code']}" and body["total_bytes"] == len(data)
    job = IngestJob.objects.get(code=body["code"])
    wait_until(lambda: _ended(job), timeout=240, message="the worker to ingest the push")
    assert job.status == "done" and job.reconciles and job.calls_stored == calls
    assert job.worker and not _run_here(job)  # the worker's lease, not the web process's
    status = client.get(body["url"], **bearer(plaintext)).json()
    assert (status["status"], status["calls_stored"]) == ("done", calls)


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_wait_true_answers_with_the_counts_the_worker_found(
    postgres_and_redis, celery_worker_process, client, team, settings
):
    settings.INGEST_API_WAIT_SECONDS = 30  # the cap: a loaded test machine, a small batch
    _, plaintext = ApiToken.issue(team, "push")
    response = client.post(
        f"{API}?wait=true", make_envelope_log(3, bad_lines=1), content_type="x", **bearer(plaintext)
    )
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert (body["status"], body["calls_stored"], body["quarantined"]) == ("done", 3, 1)
    assert not _run_here(IngestJob.objects.get(code=body["code"]))


@pytest.mark.django_db(transaction=True)
def test_waiting_is_bounded_when_no_worker_takes_the_job(client, team, settings):
    """No worker consumes the queue here: `?wait=true` gives up after INGEST_API_WAIT_SECONDS and
    answers 202 with the queued job, instead of running it in the request."""
    if settings.REDIS_URL:
        pytest.skip("the services leg's session worker would take the job; this is the SQLite leg's")
    settings.INGEST_API_WAIT_SECONDS = 0.5
    _, plaintext = ApiToken.issue(team, "push")
    response = client.post(f"{API}?wait=true", make_envelope_log(2), content_type="x", **bearer(plaintext))
    assert response.status_code == 202
    assert response.json()["status"] == "queued" and response.json()["lines_read"] == 0
    job = IngestJob.objects.get(code=response.json()["code"])
    assert job.status == "queued" and job.worker == "" and ToolCall.objects.count() == 0


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_message_was_lost_is_sent_again_after_a_minute_and_runs_once(
    postgres_and_redis, celery_worker_process, team, tmp_path
):
    log = EnvelopeLog(session="lost").initialize()
    for i in range(5):
        log.call("write", {"content": text_of(3000, i)})
    path = log.write(tmp_path / "lost.jsonl")
    # Accepted (202) 61 s ago; its message died with Redis, so no worker was ever told.
    job = pipeline.create_job(team, source="api", filename="lost.jsonl", path=path)
    IngestJob.objects.filter(pk=job.pk).update(created=timezone.now() - timedelta(seconds=61))

    assert resume_stalled_jobs() == [job.pk]  # beat's sweep, every minute
    # The message was only late, not lost: it arrives too. The lease lets one of them run it.
    run_ingest_job.delay(job.pk)
    wait_until(lambda: _ended(job), timeout=90, message="the re-sent job to end")
    assert job.status == "done" and job.reconciles
    assert job.attempts == 1  # one run; the other delivery found it running or done
    assert job.calls_stored == ToolCall.objects.filter(job=job).count() == 5
    assert resume_stalled_jobs() == []
