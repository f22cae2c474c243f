"""Celery tasks of capture: thin wrappers over the pipeline, the folder watch and retention.

The ``name=`` strings are the ones the tasks had in ``ingest/tasks.py``: messages already queued
and the routes and beat schedule in ``config/celery.py`` use them (all routed to ``ingest``).
"""

from __future__ import annotations

import math
from typing import Any

from celery import shared_task
from django.conf import settings

from dashboard.system import broker
from ingest.capture import pipeline, retention, watch
from ingest.capture.models import IngestJob


@shared_task(name="ingest.tasks.run_ingest_job", ignore_result=True)
def run_ingest_job(job_id: int) -> str:
    """Run or resume one ingest job; safe to deliver twice (the job's lease and dedupe keys).

    A transient failure leaves the job ``retrying``: it is sent again for its ``retry_at`` (and
    the beat's resume_stalled_jobs picks it up then should that message be lost).
    """
    return _run(job_id, run_ingest_job)


@shared_task(name="ingest.tasks.run_ingest_range", ignore_result=True)
def run_ingest_range(job_id: int) -> str:
    """Run or resume one line range of a large file (``pipeline.ranges``); the last range done
    also runs the file's stitch. Safe to deliver twice, like ``run_ingest_job``."""
    return _run(job_id, run_ingest_range)


def enqueue_range(job_id: int) -> None:
    """Send a range to whichever worker is free (called once the ranges are committed)."""
    broker.send(lambda: run_ingest_range.delay(job_id), f"queueing ingest range {job_id}")


def _run(job_id: int, task: Any) -> str:
    attempts_before = IngestJob.objects.filter(pk=job_id).values_list("attempts", flat=True).first()
    try:
        job = pipeline.run_job(job_id, enqueue_range=enqueue_range)
    except IngestJob.DoesNotExist:
        return "missing"
    # Only the run that failed sends the retry (an early duplicate delivery, refused, sends none),
    # and never in eager mode, where nothing could hold the message until its time.
    failed_now = job.attempts != attempts_before and job.status == IngestJob.Status.RETRYING
    if failed_now and job.retry_at is not None and not task.app.conf.task_always_eager:
        task.apply_async((job_id,), eta=job.retry_at)
    return str(job.status)


def enqueue_job(job: IngestJob) -> broker.Sent:
    """Send the job to a worker once the transaction commits. With the broker down the job stays
    saved and queued (the outage recorded): `resume_stalled_jobs` starts it later."""
    return broker.send_on_commit(lambda: run_ingest_job.delay(job.pk), f"queueing ingest job {job.pk}")


def sweep_minutes() -> int:
    """At most how long a queued job whose message never left waits for the sweep: a queued job
    counts as stalled after 5 leases, and the sweep runs every minute."""
    return math.ceil(5 * settings.INGEST_JOB_LEASE_SECONDS / 60) + 1


def queued_for_sweep_message() -> str:
    return (
        "The task queue (broker) is unavailable, so no worker was told yet: the job is saved and "
        f"queued, and the stalled-job sweep starts it within about {sweep_minutes()} minutes of the "
        "queue answering again."
    )


@shared_task(name="ingest.tasks.resume_stalled_jobs", ignore_result=True)
def resume_stalled_jobs() -> list[int]:
    """Beat: re-enqueue stalled jobs and due retries (run_job resumes them from their watermark)."""
    job_ids = pipeline.stalled_jobs()
    for job_id in job_ids:
        run_ingest_job.delay(job_id)
    return job_ids


@shared_task(name="ingest.tasks.scan_watched_folders", ignore_result=True)
def scan_watched_folders(folder_id: int | None = None) -> int:
    """Beat (every 10 s): tail every enabled watched folder; returns the number of files read."""
    return sum(scan.files_read for scan in watch.scan_all(folder_id))


@shared_task(name="ingest.tasks.purge_expired_content", ignore_result=True)
def purge_expired_content() -> int:
    retention.purge_expired_uploads()
    retention.purge_expired_quarantine()
    return retention.purge_expired_content()
