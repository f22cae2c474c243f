"""Creating jobs, and the synchronous ways to ingest a file or bytes."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from django.conf import settings

from dashboard.system import broker
from dashboard.teams.models import Team
from ingest.capture.models import IngestJob
from ingest.capture.pipeline.run import run_job
from ingest.capture.uploads import store_upload


def create_job(
    team: Team,
    *,
    source: str,
    filename: str,
    path: str | os.PathLike[str] = "",
    storage_name: str = "",
    size: int | None = None,
    format: str = "auto",
    user: Any = None,
) -> IngestJob:
    """A queued job for the file ``storage_name`` in the ingest storage (any worker can run it), or
    for the local file at ``path`` (read in place, on this host).

    ``size`` is the input's size when the caller knows it (else the local file's). ``format`` is ``auto`` (detected when the job runs) or one of ``mcptax.formats.FORMATS``.
    Run it with ``run_job``, or send its id to a worker once the surrounding transaction commits.
    """
    if size is None:
        try:
            size = Path(path).stat().st_size if path else 0
        except OSError:
            size = 0
    job = IngestJob.objects.create(
        team=team,
        source=source,
        filename=filename[:500],
        storage_name=storage_name,
        path=str(path),
        format="" if format == "auto" else format,
        total_bytes=size,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return job


# The Celery tasks that run a job and one range of a large file (ingest.tasks), sent by name.
RUN_JOB_TASK = "ingest.tasks.run_ingest_job"
RUN_RANGE_TASK = "ingest.tasks.run_ingest_range"


def enqueue_job(job: IngestJob) -> broker.Sent:
    """Send the job to a worker once the transaction commits. With the broker down the job stays
    saved and queued (the outage recorded): the stalled-job sweep starts it later."""
    return broker.send_task(RUN_JOB_TASK, job.pk, where=f"queueing ingest job {job.pk}")


def sweep_minutes() -> int:
    """At most how long a queued job whose message never left waits for the sweep: a queued job
    is sent again after INGEST_QUEUED_RESEND_SECONDS, and the sweep runs every minute."""
    return math.ceil(settings.INGEST_QUEUED_RESEND_SECONDS / 60) + 1


def queued_for_sweep_message() -> str:
    return (
        "The task queue (broker) is unavailable, so no worker was told yet: the job is saved and "
        f"queued, and the stalled-job sweep starts it within about {sweep_minutes()} minutes of the "
        "queue answering again."
    )


def ingest_bytes(
    team: Team,
    data: bytes,
    *,
    source: str,
    filename: str,
    format: str = "auto",
    user: Any = None,
    run: bool = True,
) -> IngestJob:
    """Keep ``data`` (JSONL, HAR, or gzip of either) in the ingest storage and ingest it.

    With ``run=False`` the job is only created (queued).
    """
    name = store_upload(team, [data], filename)
    job = create_job(
        team, source=source, filename=filename, storage_name=name, size=len(data), format=format, user=user
    )
    return run_job(job.pk) if run else job


def ingest_path(
    team: Team,
    path: str | os.PathLike[str],
    *,
    format: str = "auto",
    source: str = "command",
    max_bytes: int | None = None,
) -> IngestJob:
    """Ingest the file at ``path`` synchronously (read in place, not copied).

    ``max_bytes`` overrides INGEST_MAX_BYTES for a gzip file's decompressed size.
    """
    path = Path(path).resolve()
    job = create_job(team, source=source, filename=path.name, path=path, format=format)
    return run_job(job.pk, max_bytes=max_bytes)
