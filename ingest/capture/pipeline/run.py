"""Running a job: outputs of the parsers committed in batches, every line settled exactly once.

One transaction per batch holds the new calls (``calls.CallStore``), the line outcomes and the
job's counters and watermark (lines 1..watermark are settled). See the package docstring for
how a killed run resumes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from ingest.capture.models import BulkArgument, IngestJob, LineRecord, ToolCall
from ingest.capture.pipeline.calls import CallStore
from ingest.capture.pipeline.lease import LeaseLost, claim, fail, is_transient
from ingest.capture.pipeline.limits import InputTooLarge, keep_bytes, utf8_head
from ingest.capture.pipeline.reading import UNKNOWN_FORMAT, Lines, detect, open_input, outputs
from ingest.capture.signals import calls_ingested
from ingest.capture.storage import open_job_input
from mcptax.formats.records import CALL, DUPLICATE, QUARANTINED, LineOutcome, LongLine, ObservedCall

logger = logging.getLogger(__name__)
Enqueue = Callable[[int], Any]

Status = IngestJob.Status
# Jobs a worker runs from the queue: a transient failure is retried (see lease.fail).
RETRIED_SOURCES = (IngestJob.Source.UPLOAD, IngestJob.Source.API)


def batch_limits() -> tuple[int, int, int]:
    """(calls, lines, argument bytes) after which a batch is committed."""
    return (settings.INGEST_BATCH_CALLS, settings.INGEST_BATCH_LINES, settings.INGEST_BATCH_BYTES)


@dataclass
class _Batch:
    calls: list[ObservedCall] = field(default_factory=list)
    outcomes: list[LineOutcome] = field(default_factory=list)
    argument_bytes: int = 0

    def full(self, limits: tuple[int, int, int]) -> bool:
        calls, lines, size = limits
        return len(self.calls) >= calls or len(self.outcomes) >= lines or self.argument_bytes >= size


class Run:
    """One run of one job: persists batches under the job's lease.

    ``owner``: the job the calls and line records belong to when ``job`` is one range of it (see
    ``ranges``); ``settled_above``: the lines an earlier run of ``job`` settled above its
    watermark (default: the owner's line records above it).
    """

    def __init__(
        self,
        job: IngestJob,
        token: str,
        *,
        owner: IngestJob | None = None,
        settled_above: set[int] | None = None,
    ) -> None:
        self.job = job
        self.owner = owner if owner is not None else job
        self.team = job.team
        self.token = token
        self.store = CallStore(self.owner)
        self.store.calls_stored = job.calls_stored
        self.watermark = job.watermark
        # Lines above the watermark settled by an earlier (killed) run: not to be counted again.
        if settled_above is None:
            settled_above = set(
                LineRecord.objects.filter(job=job, line_no__gt=job.watermark).values_list(
                    "line_no", flat=True
                )
            )
        self.settled_above = settled_above
        self.counts = {
            "stored": job.stored,
            "duplicate": job.duplicate,
            "ignored": job.ignored,
            "quarantined": job.quarantined,
        }
        self.ignored_reasons: Counter[str] = Counter(job.ignored_reasons or {})
        self.quarantined_reasons: Counter[str] = Counter(job.quarantined_reasons or {})
        self.limits = batch_limits()

    def consume(self, items: Iterable[ObservedCall | LineOutcome], lines: Lines) -> None:
        batch = _Batch()
        for item in items:
            if isinstance(item, ObservedCall):
                batch.calls.append(item)
                batch.argument_bytes += item.arguments_raw_bytes
            else:
                batch.outcomes.append(item)
            if batch.full(self.limits):
                self.flush(batch, lines.position())
                batch = _Batch()
        self.flush(batch, lines.position())

    def flush(self, batch: _Batch, bytes_done: int) -> None:
        with transaction.atomic():
            signal_ids = self.store.store(batch.calls)
            self._settle(batch.outcomes)
            self._save_progress(bytes_done)
        if signal_ids:
            # The rows just written and their contents' texts, so the fidelity step need not read
            # them back.
            calls_ingested.send(
                sender=IngestJob,
                team=self.team,
                call_ids=signal_ids,
                job=self.owner,
                contents=self.store.contents,
                rows=self.store.rows,
                arguments=self.store.arguments,
            )
        self.store.forget_batch()

    # -- lines -------------------------------------------------------------------------------------

    def _ours(self, keys: Iterable[str]) -> None:
        missing = [k for k in keys if k not in self.store.key_ours]
        if missing:
            found = dict(
                ToolCall.objects.filter(team=self.team, dedupe_key__in=missing).values_list(
                    "dedupe_key", "job_id"
                )
            )
            for key in missing:
                self.store.key_ours[key] = found.get(key) == self.owner.pk

    def _settle(self, outcomes: list[LineOutcome]) -> None:
        if not outcomes:
            return
        watermark = max(self.watermark, max(o.watermark for o in outcomes))
        self._ours({k for o in outcomes if o.status == CALL for k in o.call_keys})
        for outcome in outcomes:
            if outcome.agent is not None and outcome.session_key:
                self.store.remember_client(outcome.session_key, outcome.agent)
        records: list[LineRecord] = []
        for outcome in outcomes:
            if outcome.line_no in self.settled_above:
                self.settled_above.discard(outcome.line_no)
                continue
            reason = outcome.reason or ""
            if outcome.status == CALL:
                stored = any(self.store.key_ours.get(k) for k in outcome.call_keys)
                status = LineRecord.Status.STORED if stored else LineRecord.Status.DUPLICATE
                reason = "" if stored else "already_ingested"
            elif outcome.status == DUPLICATE:
                status = LineRecord.Status.DUPLICATE
            elif outcome.status == QUARANTINED:
                status = LineRecord.Status.QUARANTINED
                self.quarantined_reasons[reason] += 1
            else:
                status = LineRecord.Status.IGNORED
                self.ignored_reasons[reason] += 1
            self.counts[str(status)] += 1
            keep_row = status in (LineRecord.Status.QUARANTINED, LineRecord.Status.DUPLICATE)
            if keep_row or outcome.line_no > watermark:
                records.append(self._record(outcome, status, reason))
        LineRecord.objects.bulk_create(records, ignore_conflicts=True, batch_size=500)
        self.watermark = watermark

    def _record(self, outcome: LineOutcome, status: str, reason: str) -> LineRecord:
        raw_text, raw_data = "", None
        data = outcome.raw
        size, sha256, ref = (len(data) if data is not None else 0), "", ""
        if isinstance(data, LongLine):
            # Read past without holding it: the reader kept it as a file already.
            size, sha256, ref = data.size, data.sha256, data.ref
        elif data is not None and len(data) > settings.INGEST_MAX_RAW_BYTES:
            sha256, ref = keep_bytes(data)
            data = utf8_head(data, settings.INGEST_MAX_RAW_BYTES)
        if data is not None:
            try:
                raw_text = data.decode("utf-8")
            except UnicodeDecodeError:
                raw_text = None  # type: ignore[assignment]
            if raw_text is None or "\x00" in raw_text:
                raw_text = data.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")
                raw_data = bytes(data)
        return LineRecord(
            job=self.owner,
            team=self.team,
            line_no=outcome.line_no,
            status=status,
            reason=reason[:200],
            raw=raw_text,
            raw_bytes=size,
            raw_data=raw_data,
            raw_sha256=sha256,
            raw_file=ref,
        )

    # -- progress ------------------------------------------------------------------------------------

    def _save_progress(self, bytes_done: int, **extra: Any) -> None:
        updated = IngestJob.objects.filter(pk=self.job.pk, run_token=self.token).update(
            **self.counts,
            lines_read=sum(self.counts.values()),
            calls_stored=self.store.calls_stored,
            ignored_reasons=dict(self.ignored_reasons),
            quarantined_reasons=dict(self.quarantined_reasons),
            watermark=self.watermark,
            bytes_done=bytes_done,
            heartbeat_at=timezone.now(),
            **extra,
        )
        if updated != 1:
            raise LeaseLost()

    def finish(
        self, *, bytes_done: int, total_bytes: int, lines_in_input: int | None, final: bool, **fields: Any
    ) -> None:
        """Close the run: counts checked against the input, lease released; ``final`` = job done.

        ``fields``: more of the job's fields to save with it."""
        extra: dict[str, Any] = {"run_token": "", "total_bytes": total_bytes, **fields}
        settled = sum(self.counts.values())
        if final:
            # error="": a retried job that now succeeds no longer shows the reason of its last failure.
            extra.update(
                status=Status.DONE, finished=timezone.now(), verdict_counts=verdict_counts(self.job), error=""
            )
            self.store.calls_stored = ToolCall.objects.filter(job=self.job).count()
            if lines_in_input is not None and settled != lines_in_input:
                # Should never happen; say so loudly rather than show counts that do not add up.
                extra["error"] = f"accounting error: {lines_in_input} lines read but {settled} settled"
                logger.error("ingest job %s: %s", self.job.pk, extra["error"])
        self._save_progress(bytes_done, **extra)


def verdict_counts(job: IngestJob) -> dict[str, int]:
    """{verdict: n} over the job's bulk arguments ("pending" = not judged yet), plus ``by_reference``."""
    counts = {
        (row["verdict"] or "pending"): row["n"]
        for row in BulkArgument.objects.filter(call__job=job).values("verdict").annotate(n=Count("pk"))
    }
    by_reference = ToolCall.objects.filter(job=job, is_reference_call=True).count()
    if by_reference:
        counts["by_reference"] = by_reference
    return counts


def refresh_verdict_counts(job: IngestJob) -> IngestJob:
    """Recompute the job's verdict counts (for the fidelity step, once it has judged)."""
    IngestJob.objects.filter(pk=job.pk).update(verdict_counts=verdict_counts(job))
    job.refresh_from_db(fields=["verdict_counts"])
    return job


# -- running a job --------------------------------------------------------------------------------


def run_job(job_id: int, *, max_bytes: int | None = None, enqueue_range: Enqueue | None = None) -> IngestJob:
    """Run or resume job ``job_id`` to the end of its file (see the module docstring).

    ``max_bytes`` overrides INGEST_MAX_BYTES, the most a gzip input may decompress to (the
    ``ingest`` command's ``--max-bytes``). ``enqueue_range`` (a worker's): an envelope log over
    INGEST_RANGE_BYTES is split in line ranges handed to it, to be read side by side; without it
    (a synchronous ingest) the file is read in one pass. A range's id runs that range (and the
    stitch of its parent once every range is done); a split parent's id runs the stitch when its
    ranges are done, else nothing. Returns the job as stored afterwards: done, failed (``error``
    says why), or untouched when it was already done or another live run holds it. Raises
    IngestJob.DoesNotExist only.
    """
    from ingest.capture.pipeline import ranges

    job, token = claim(job_id)
    if job is None:
        return IngestJob.objects.get(pk=job_id)
    try:
        if job.parent_id is not None:
            ranges.run_range(job, token)
        elif IngestJob.objects.filter(parent=job).exists():
            ranges.stitch_parent(job, token)
        else:
            _run(job, token, settings.INGEST_MAX_BYTES if max_bytes is None else max_bytes, enqueue_range)
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
    if job.parent_id is not None:
        ranges.stitch_when_ready(job.parent_id)
    return IngestJob.objects.get(pk=job_id)


class InputUnavailable(OSError):
    """The job's input could not be opened (missing, or its storage unreachable): retried."""


class UnrecognisedInput(ValueError):
    """No known log format: the job fails with the reason, and keeps none of its lines (a wrong
    file is not a log whose lines went bad; quarantining them would leave only debris)."""


def _run(job: IngestJob, token: str, max_bytes: int, enqueue_range: Enqueue | None = None) -> None:
    from ingest.capture.pipeline import ranges

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
        run = Run(job, token)
        run.consume(outputs(lines, format, skip_through_line=job.watermark, finish=True), lines)
        # A HAR's units are its entries (the parser numbers them); other formats are physical lines.
        units = run.watermark if format == "har" else lines.count
        run.finish(bytes_done=total, total_bytes=total, lines_in_input=units, final=True)
