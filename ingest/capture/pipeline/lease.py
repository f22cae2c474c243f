"""The job's lease: one run at a time works on a job (a redelivered task finds it held), and
what a failed run leaves: a retry with backoff, or a final failure.

A lease is the job's ``run_token`` with a fresh heartbeat; the owner's ``host:pid`` lets a run on
the same host take over at once from a process that no longer exists.

A run that fails for a transient reason (``is_transient``: the storage, the database, I/O) leaves
the job ``retrying`` with ``retry_at`` = now + INGEST_RETRY_BASE_SECONDS * 2^(attempts - 1), until
INGEST_RETRY_MAX retries are spent; then, or at once for a refusal of the input (too large,
malformed) or a bug, the job is ``failed`` with the reason.
"""

from __future__ import annotations

import gzip
import logging
import os
import socket
import traceback
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from ingest.capture.models import IngestJob

logger = logging.getLogger(__name__)
Status = IngestJob.Status


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_gone(worker: str) -> bool:
    """True when the owning process ran on this host and no longer exists."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class LeaseLost(Exception):
    """Another run took the job over (ours was presumed dead); stop without touching it."""


def claim(job_id: int) -> tuple[IngestJob | None, str]:
    """Take the job's lease: (job, token), or (None, "") when it is done or another run holds it."""
    token = uuid.uuid4().hex
    now = timezone.now()
    lease = timedelta(seconds=settings.INGEST_JOB_LEASE_SECONDS)
    with transaction.atomic():
        job = IngestJob.objects.select_for_update().select_related("team").get(pk=job_id)
        if job.status == Status.DONE:
            return None, ""
        if job.status == Status.RETRYING and job.retry_at is not None and job.retry_at > now:
            return None, ""  # an early delivery: the retry is not due yet
        held = (
            job.run_token
            and job.heartbeat_at is not None
            and job.heartbeat_at > now - lease
            and not _owner_gone(job.worker)
        )
        if held:
            return None, ""
        job.run_token = token
        job.worker = _me()[:200]
        job.heartbeat_at = now
        job.status = Status.RUNNING
        job.started = job.started or now
        # A retry keeps the last attempt's reason on show until it ends; other runs start clean.
        job.error = job.error if job.status == Status.RETRYING else ""
        job.retry_at = None
        if job.source != IngestJob.Source.WATCH:  # a watched file's job is driven by every scan
            job.attempts += 1
        job.save(
            update_fields=[
                "run_token",
                "worker",
                "heartbeat_at",
                "status",
                "started",
                "error",
                "retry_at",
                "attempts",
            ]
        )
    return job, token


def is_transient(exc: BaseException) -> bool:
    """A failure that may pass by itself: storage, network or file I/O, the database.

    A corrupt gzip stream is an OSError too, but it is the input's fault and would fail again.
    """
    if isinstance(exc, gzip.BadGzipFile):
        return False
    return isinstance(exc, (OSError, DatabaseError))


def retry_delay(attempts: int) -> timedelta:
    """How long after its ``attempts``-th failed run a job is tried again."""
    return timedelta(seconds=settings.INGEST_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1))


def fail(
    job_id: int, token: str, exc: BaseException, *, detail: str | None = None, transient: bool = False
) -> None:
    """End the run as failed; ``detail`` is the reason to show (default: the exception as text).

    ``transient``: the job is retried later (status ``retrying``, ``retry_at``) while it has
    retries left; the last one says it gave up.
    """
    if detail is None:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        logger.exception("ingest job %s failed", job_id)
    else:
        logger.warning("ingest job %s refused: %s", job_id, detail)
    now = timezone.now()
    attempts = (
        IngestJob.objects.filter(pk=job_id, run_token=token).values_list("attempts", flat=True).first() or 0
    )
    retries_left = attempts <= settings.INGEST_RETRY_MAX
    if transient and retries_left:
        IngestJob.objects.filter(pk=job_id, run_token=token).update(
            status=Status.RETRYING, error=detail[:4000], retry_at=now + retry_delay(attempts), run_token=""
        )
        return
    if transient:
        detail = f"Gave up after {attempts} attempts. The last one failed: {detail}"
    IngestJob.objects.filter(pk=job_id, run_token=token).update(
        status=Status.FAILED, error=detail[:4000], finished=now, run_token="", retry_at=None
    )


def stalled_jobs(now: datetime | None = None) -> list[int]:
    """Jobs that should be running but nobody works on: queued for INGEST_QUEUED_RESEND_SECONDS (the
    message was lost with Redis or the embedded broker's directory, or spent while the database was
    down) or running with a stale heartbeat (the worker
    died and the broker will not redeliver before its visibility timeout), or waiting for a retry
    that is due (its delayed message may be lost). A range of a split job counts as a job; its
    parent only once all its ranges are done. Watched-file jobs are driven by the folder scan
    instead."""
    now = now or timezone.now()
    lease = timedelta(seconds=settings.INGEST_JOB_LEASE_SECONDS)
    stale_running = IngestJob.objects.filter(status=Status.RUNNING, heartbeat_at__lt=now - lease)
    # A queued job is sent again soon: a duplicate message is harmless (``claim`` refuses a job that
    # is running or done), a lost one would otherwise keep the job waiting.
    resend = timedelta(seconds=settings.INGEST_QUEUED_RESEND_SECONDS)
    stale_queued = IngestJob.objects.filter(status=Status.QUEUED, created__lt=now - resend)
    due_retries = IngestJob.objects.filter(status=Status.RETRYING, retry_at__lte=now)
    # A split job waits for its ranges (each resumed on its own); it is stalled only once they are
    # all done and its stitch did not finish.
    waiting = IngestJob.objects.filter(parent__isnull=False).exclude(status=Status.DONE).values("parent_id")
    return list(
        (stale_running | stale_queued | due_retries)
        .exclude(source=IngestJob.Source.WATCH)
        .exclude(pk__in=waiting)
        .values_list("pk", flat=True)[:100]
    )
