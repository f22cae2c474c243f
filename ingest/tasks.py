"""The ingest flow, top to bottom, and its Celery tasks (thin wrappers), all routed to the
``ingest`` queue (the folder scan to ``INGEST_WATCH_QUEUE``).

Upload -> rollups, every step a named call into a sub-package:

1. a job is created and sent here (``pipeline.create_job``, ``pipeline.enqueue_job``; the folder
   scan and the stalled-job sweep below send theirs);
2. ``run_ingest_job`` -> ``pipeline.run_job``: read the file a batch at a time (or cut a large one
   into ranges, each sent to ``run_ingest_range``) and store each batch's calls, bulk arguments and
   line outcomes in one transaction (``batch.Run``);
3. in that transaction the fidelity step passed in, ``batches.STEP``, judges the batch's bulk
   arguments and adds its calls to the daily rollups (``storing``);
4. after the commit it judges what is left, re-judges older arguments the new contents explain and
   evaluates the fidelity alerts, whose deliveries go to the ``notify`` queue (``stored``);
5. the finished job keeps its verdict counts (``verdict_counts``).

Each task's name is its import path (``ingest.tasks.run_ingest_job``): messages in flight, the
routes and beat's schedule in ``config/settings.py`` name them so, and a test checks that every
name resolves to a function here.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from dashboard.system import broker
from ingest.capture import pipeline, retention, watch
from ingest.capture.models import IngestJob
from ingest.fidelity import batches, verdicts


@shared_task(name=pipeline.RUN_JOB_TASK, ignore_result=True)
def run_ingest_job(job_id: int) -> str:
    """Run or resume one ingest job; safe to deliver twice (the job's lease and dedupe keys).

    A transient failure leaves the job ``retrying``: it is sent again for its ``retry_at`` (and
    the beat's resume_stalled_jobs picks it up then should that message be lost).
    """
    return _run(job_id, run_ingest_job)


@shared_task(name=pipeline.RUN_RANGE_TASK, ignore_result=True)
def run_ingest_range(job_id: int) -> str:
    """Run or resume one line range of a large file (``pipeline.ranges``); the last range done
    also runs the file's stitch. Safe to deliver twice, like ``run_ingest_job``."""
    return _run(job_id, run_ingest_range)


def _run(job_id: int, task: Any) -> str:
    attempts_before = IngestJob.objects.filter(pk=job_id).values_list("attempts", flat=True).first()
    enqueue_range = broker.enqueue(pipeline.RUN_RANGE_TASK, "queueing ingest range {pk}", after_commit=False)
    try:
        job = pipeline.run_job(job_id, enqueue_range=enqueue_range, fidelity=batches.STEP)
    except IngestJob.DoesNotExist:
        return "missing"
    # Only the run that failed sends the retry (an early duplicate delivery, refused, sends none),
    # and never in eager mode, where nothing could hold the message until its time.
    failed_now = job.attempts != attempts_before and job.status == IngestJob.Status.RETRYING
    if failed_now and job.retry_at is not None and not task.app.conf.task_always_eager:
        where = f"retrying ingest job {job_id}"
        broker.send_task(task.name, job_id, where=where, eta=job.retry_at, after_commit=False)
    return str(job.status)


@shared_task(name="ingest.tasks.resume_stalled_jobs", ignore_result=True)
def resume_stalled_jobs() -> list[int]:
    """Beat: re-enqueue stalled jobs and due retries (run_job resumes them from their watermark)."""
    job_ids = pipeline.stalled_jobs()
    enqueue = broker.enqueue(pipeline.RUN_JOB_TASK, "resuming ingest job {pk}", after_commit=False)
    for job_id in job_ids:
        enqueue(job_id)
    return job_ids


@shared_task(name=watch.SCAN_TASK, ignore_result=True)
def scan_watched_folders(folder_id: int | None = None) -> int:
    """Beat (every 10 s): tail every enabled watched folder; returns the number of files read."""
    return sum(scan.files_read for scan in watch.scan_all(folder_id))


@shared_task(name="ingest.tasks.purge_expired_content", ignore_result=True)
def purge_expired_content() -> int:
    retention.purge_expired_uploads()
    retention.purge_expired_quarantine()
    return retention.purge_expired_content()


@shared_task(name=verdicts.REJUDGE_TASK, ignore_result=True)
def rejudge_document(document_id: int) -> int:
    """Re-judge what a newly registered document explains (a removed document: nothing to do)."""
    return verdicts.rejudge_document(document_id)
