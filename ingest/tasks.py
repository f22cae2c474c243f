"""Celery tasks of the ingest app: thin wrappers over ingest.capture.pipeline (all routed to ``ingest``)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from ingest.capture import pipeline
from ingest.capture.models import IngestJob


@shared_task(name="ingest.tasks.run_ingest_job", ignore_result=True)
def run_ingest_job(job_id: int) -> str:
    """Run or resume one ingest job; safe to deliver twice (the job's lease and dedupe keys)."""
    try:
        job = pipeline.run_job(job_id)
    except IngestJob.DoesNotExist:
        return "missing"
    return job.status


def stalled_jobs(now=None) -> list[int]:
    """Jobs that should be running but nobody works on: queued for a while (the message was lost,
    e.g. the embedded broker's directory was wiped) or running with a stale heartbeat (the worker
    died and the broker will not redeliver before its visibility timeout). Watched-file jobs are
    driven by the folder scan instead."""
    now = now or timezone.now()
    lease = timedelta(seconds=settings.INGEST_JOB_LEASE_SECONDS)
    stale_running = IngestJob.objects.filter(status=IngestJob.Status.RUNNING, heartbeat_at__lt=now - lease)
    stale_queued = IngestJob.objects.filter(status=IngestJob.Status.QUEUED, created__lt=now - 5 * lease)
    return list(
        (stale_running | stale_queued)
        .exclude(source=IngestJob.Source.WATCH)
        .values_list("pk", flat=True)[:100]
    )


@shared_task(name="ingest.tasks.resume_stalled_jobs", ignore_result=True)
def resume_stalled_jobs() -> list[int]:
    """Beat: re-enqueue stalled jobs (run_job resumes them from their watermark)."""
    job_ids = stalled_jobs()
    for job_id in job_ids:
        run_ingest_job.delay(job_id)
    return job_ids


@shared_task(name="ingest.tasks.scan_watched_folders", ignore_result=True)
def scan_watched_folders(folder_id: int | None = None) -> int:
    """Beat (every 10 s): tail every enabled watched folder (ingest.capture.watch); returns files read."""
    from ingest.capture.watch import scan_all

    return sum(scan.files_read for scan in scan_all(folder_id))


@shared_task(name="ingest.tasks.purge_expired_content", ignore_result=True)
def purge_expired_content() -> int:
    from ingest.capture.retention import purge_expired_content as purge

    return purge()
