"""Creating jobs, and the synchronous ways to ingest a file or bytes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import transaction

from dashboard.teams.models import Team
from ingest.capture.models import IngestJob
from ingest.capture.pipeline.run import run_job
from ingest.capture.uploads import store_upload

Enqueue = Callable[[int], Any]
"""Hands a job id to whatever runs it later (the caller passes ``run_ingest_job.delay``)."""


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
    enqueue: Enqueue | None = None,
) -> IngestJob:
    """A queued job for the file ``storage_name`` in the ingest storage (any worker can run it), or
    for the local file at ``path`` (read in place, on this host).

    ``size`` is the input's size when the caller knows it (else the local file's). ``format`` is ``auto`` (detected when the job runs) or one of ``mcptax.formats.FORMATS``.
    With ``enqueue`` the job id is handed to it once the surrounding transaction commits (so the
    worker finds the row); without, run it with ``run_job``.
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
    if enqueue is not None:
        transaction.on_commit(lambda: enqueue(job.pk))
    return job


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
