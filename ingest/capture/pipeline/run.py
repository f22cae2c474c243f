"""Running a job: a whole file read in one pass, or cut into ranges (``ranges``), its outputs
committed in batches (``batch.Run``), every line settled exactly once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings

from dashboard.system.broker import Enqueue
from ingest.capture.models import IngestJob
from ingest.capture.pipeline import ranges
from ingest.capture.pipeline.batch import Run
from ingest.capture.pipeline.fidelity_step import FidelityStep
from ingest.capture.pipeline.lease import LeaseLost, claim, fail, is_transient
from ingest.capture.pipeline.limits import InputTooLarge
from ingest.capture.pipeline.reading import UNKNOWN_FORMAT, Lines, detect, open_input, outputs
from ingest.capture.storage import open_job_input
from mcptax.formats import DOCUMENT_FORMATS

logger = logging.getLogger(__name__)

Status = IngestJob.Status
# Jobs a worker runs from the queue: a transient failure is retried (see lease.fail).
RETRIED_SOURCES = (IngestJob.Source.UPLOAD, IngestJob.Source.API, IngestJob.Source.OTEL)
# Formats whose input is not a log of lines but one document another package reads (OTLP bodies,
# ``ingest.otel``): ``runner(job, token)`` runs such a job under the same lease, retries and
# accounting, with the default fidelity step. Registered by the app at start-up.
JobRunner = Callable[[IngestJob, str], None]
FORMAT_RUNNERS: dict[str, JobRunner] = {}


def run_job(
    job_id: int,
    *,
    max_bytes: int | None = None,
    enqueue_range: Enqueue | None = None,
    fidelity: FidelityStep | None = None,
) -> IngestJob:
    """Run or resume job ``job_id`` to the end of its file (see the module docstring).

    ``max_bytes`` overrides INGEST_MAX_BYTES, the most a gzip input may decompress to (the
    ``ingest`` command's ``--max-bytes``). ``enqueue_range`` (a worker's): an envelope log over
    INGEST_RANGE_BYTES is split in line ranges handed to it, to be read side by side; without it
    (a synchronous ingest) the file is read in one pass. A range's id runs that range (and the
    stitch of its parent once every range is done); a split parent's id runs the stitch when its
    ranges are done, else nothing. Returns the job as stored afterwards: done, failed (``error``
    says why), or untouched when it was already done or another live run holds it. Raises
    IngestJob.DoesNotExist only. ``fidelity``: the step that judges each batch (see
    ``fidelity_step``; default: the one the app named).
    """
    job, token = claim(job_id)
    if job is None:
        return IngestJob.objects.get(pk=job_id)
    try:
        if job.parent_id is not None:
            ranges.run_range(job, token, fidelity)
        elif IngestJob.objects.filter(parent=job).exists():
            ranges.stitch_parent(job, token, fidelity)
        elif job.format in FORMAT_RUNNERS:
            FORMAT_RUNNERS[job.format](job, token)
        else:
            limit = settings.INGEST_MAX_BYTES if max_bytes is None else max_bytes
            _run(job, token, limit, enqueue_range, fidelity)
    except LeaseLost:
        logger.warning("ingest job %s was taken over by another run", job_id)
    except (InputTooLarge, UnrecognisedInput) as exc:
        fail(job_id, token, exc, detail=str(exc))
    except Exception as exc:  # a job must never take the worker down with it
        # Storage, database and I/O errors of a queued job are retried with backoff; anything
        # else (and a command's own file, whose user sees the error) fails now.
        fail(job_id, token, exc, transient=is_transient(exc) and job.source in RETRIED_SOURCES)
        if job.parent_id is not None:
            ranges.after_range_failed(job)
    if job.parent_id is not None and ranges.all_done(job.parent_id):
        # Whichever range finishes last runs the file's stitch.
        run_job(job.parent_id, fidelity=fidelity)
    return IngestJob.objects.get(pk=job_id)


class InputUnavailable(OSError):
    """The job's input could not be opened (missing, or its storage unreachable): retried."""


class UnrecognisedInput(ValueError):
    """No known log format: the job fails with the reason, and keeps none of its lines (a wrong
    file is not a log whose lines went bad; quarantining them would leave only debris)."""


def _run(
    job: IngestJob, token: str, max_bytes: int, enqueue_range: Enqueue | None, fidelity: FidelityStep | None
) -> None:
    where = job.storage_name or job.path
    try:
        raw, total = open_job_input(job.storage_name, job.path)
    except OSError as exc:
        raise InputUnavailable(f"cannot open {where}: {exc.strerror or exc}") from exc
    # A gzip input over the limit raises InputTooLarge in open_input, before anything is stored.
    with raw, open_input(raw, max_bytes) as stream:
        format, problem = (job.format, "") if job.format else detect(stream)
        if not job.format:
            job.format = format
            IngestJob.objects.filter(pk=job.pk, run_token=token).update(format=format, total_bytes=total)
        if format == UNKNOWN_FORMAT and total:  # (an empty file is simply done: nothing to read)
            raise UnrecognisedInput(problem or "cannot tell the log format")
        if enqueue_range is not None and ranges.should_split(job, format, stream is not raw, total):
            if ranges.split(job, token, raw, total, enqueue_range):
                return
            raw.seek(0)
        lines = Lines(stream, position=raw.tell)
        run = Run(job, token, fidelity=fidelity)
        run.consume(outputs(lines, format, skip_through_line=job.watermark, finish=True), lines)
        # A document's units are its entries (the parser numbers them); other formats are physical lines.
        units = run.watermark if format in DOCUMENT_FORMATS else lines.count
        run.finish(bytes_done=total, total_bytes=total, lines_in_input=units, final=True)
