"""The job's lease: one run at a time works on a job (a redelivered task finds it held).

A lease is the job's ``run_token`` with a fresh heartbeat; the owner's ``host:pid`` lets a run on
the same host take over at once from a process that no longer exists.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
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
        job.error = ""
        job.save(update_fields=["run_token", "worker", "heartbeat_at", "status", "started", "error"])
    return job, token


def fail(job_id: int, token: str, exc: BaseException, *, detail: str | None = None) -> None:
    """Mark the job failed; ``detail`` is the reason to show (default: the exception as text)."""
    if detail is None:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        logger.exception("ingest job %s failed", job_id)
    else:
        logger.warning("ingest job %s refused: %s", job_id, detail)
    IngestJob.objects.filter(pk=job_id, run_token=token).update(
        status=Status.FAILED, error=detail[:4000], finished=timezone.now(), run_token=""
    )


def stalled_jobs(now: datetime | None = None) -> list[int]:
    """Jobs that should be running but nobody works on: queued for a while (the message was lost,
    e.g. the embedded broker's directory was wiped) or running with a stale heartbeat (the worker
    died and the broker will not redeliver before its visibility timeout). Watched-file jobs are
    driven by the folder scan instead."""
    now = now or timezone.now()
    lease = timedelta(seconds=settings.INGEST_JOB_LEASE_SECONDS)
    stale_running = IngestJob.objects.filter(status=Status.RUNNING, heartbeat_at__lt=now - lease)
    stale_queued = IngestJob.objects.filter(status=Status.QUEUED, created__lt=now - 5 * lease)
    return list(
        (stale_running | stale_queued)
        .exclude(source=IngestJob.Source.WATCH)
        .values_list("pk", flat=True)[:100]
    )
