"""Celery tasks of capture: thin wrappers over the pipeline, the folder watch and retention.

The ``name=`` strings are the ones the tasks had in ``ingest/tasks.py``: messages already queued
and the routes and beat schedule in ``config/celery.py`` use them (all routed to ``ingest``).
"""

from __future__ import annotations

from celery import shared_task

from ingest.capture import pipeline, retention, watch
from ingest.capture.models import IngestJob


@shared_task(name="ingest.tasks.run_ingest_job", ignore_result=True)
def run_ingest_job(job_id: int) -> str:
    """Run or resume one ingest job; safe to deliver twice (the job's lease and dedupe keys).

    A transient failure leaves the job ``retrying``: it is sent again for its ``retry_at`` (and
    the beat's resume_stalled_jobs picks it up then should that message be lost).
    """
    attempts_before = IngestJob.objects.filter(pk=job_id).values_list("attempts", flat=True).first()
    try:
        job = pipeline.run_job(job_id)
    except IngestJob.DoesNotExist:
        return "missing"
    # Only the run that failed sends the retry (an early duplicate delivery, refused, sends none),
    # and never in eager mode, where nothing could hold the message until its time.
    failed_now = job.attempts != attempts_before and job.status == IngestJob.Status.RETRYING
    if failed_now and job.retry_at is not None and not run_ingest_job.app.conf.task_always_eager:
        run_ingest_job.apply_async((job_id,), eta=job.retry_at)
    return str(job.status)


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
    return retention.purge_expired_content()
