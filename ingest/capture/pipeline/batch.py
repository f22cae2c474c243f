"""One batch at a time: ``Run`` persists a job's parsed outputs in batches under its lease.

One transaction per batch holds the new calls (``calls.CallStore``), the line outcomes and the
job's counters and watermark (lines 1..watermark are settled). See the package docstring for how a
killed run resumes. A whole file (``run``), a range of one and its stitch (``ranges``) and a
watched file (``watched``) each drive a ``Run``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingest import bulkwrite
from ingest.capture.models import IngestJob, LineRecord, ToolCall
from ingest.capture.pipeline import fidelity_step
from ingest.capture.pipeline.calls import CallStore
from ingest.capture.pipeline.fidelity_step import FidelityStep
from ingest.capture.pipeline.lease import LeaseLost
from ingest.capture.pipeline.limits import keep_bytes, utf8_head
from ingest.capture.pipeline.readahead import ReadAhead, gc_quiet
from ingest.capture.pipeline.reading import Lines
from ingest.capture.pipeline.sinks import discovery_sink
from ingest.capture.signals import calls_ingested
from mcptax.formats.records import (
    CALL,
    DUPLICATE,
    QUARANTINED,
    Discovered,
    LineOutcome,
    LongLine,
    ObservedCall,
)

logger = logging.getLogger(__name__)

Status = IngestJob.Status


def batch_limits() -> tuple[int, int, int]:
    """(calls, lines, argument bytes) after which a batch is committed."""
    return (settings.INGEST_BATCH_CALLS, settings.INGEST_BATCH_LINES, settings.INGEST_BATCH_BYTES)


@dataclass
class _Batch:
    calls: list[ObservedCall] = field(default_factory=list)
    outcomes: list[LineOutcome] = field(default_factory=list)
    discovered: list[Discovered] = field(default_factory=list)
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
        fidelity: FidelityStep | None = None,
    ) -> None:
        self.job = job
        self.owner = owner if owner is not None else job
        self.team = job.team
        self.token = token
        self.fidelity = fidelity_step.current(fidelity)
        self.store = CallStore(self.owner, self.fidelity)
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
        self.discovery: Counter[str] = Counter(job.discovery_counts or {})

    def consume(self, items: Iterable[ObservedCall | LineOutcome | Discovered], lines: Lines) -> None:
        """Persist ``items`` in batches; the input is read one batch ahead in a thread
        (``readahead``) unless INGEST_READ_AHEAD is off. The last batch is flushed even empty."""
        batches = self._batches(items, lines)
        with gc_quiet():
            if not settings.INGEST_READ_AHEAD:
                for batch, bytes_done in batches:
                    self.flush(batch, bytes_done)
                return
            with ReadAhead(batches) as ahead:
                for batch, bytes_done in ahead:
                    self.flush(batch, bytes_done)

    def _batches(
        self, items: Iterable[ObservedCall | LineOutcome | Discovered], lines: Lines
    ) -> Iterator[tuple[_Batch, int]]:
        """The batches and the input's position after each (no database: see ``readahead``)."""
        batch = _Batch()
        limits = self.limits
        for item in items:
            if isinstance(item, ObservedCall):
                batch.calls.append(item)
                batch.argument_bytes += item.arguments_raw_bytes
            elif isinstance(item, Discovered):
                batch.discovered.append(item)
            else:
                batch.outcomes.append(item)
            if batch.full(limits):
                yield batch, lines.position()
                batch = _Batch()
        yield batch, lines.position()

    def flush(self, batch: _Batch, bytes_done: int) -> None:
        clients = [(o.session_key, o.agent) for o in batch.outcomes if o.agent is not None and o.session_key]
        found = [(d.format, d.session_key) for d in batch.discovered] if discovery_sink() else []
        self.store.ensure_parties(batch.calls, clients, found)
        with transaction.atomic(), bulkwrite.deferring() as late:
            signal_ids = self.store.store(batch.calls)
            loaded = self._record_discovery(batch.discovered)
            self._settle(batch.outcomes)
            self._save_progress(bytes_done)
            for write in late:  # agents' spans and rollups, shared with other runs: last
                write()
        sink = discovery_sink()
        if loaded and sink is not None:
            sink.after_batch(self.team, loaded)
        if signal_ids:
            # The rows just written and their contents' texts, so the fidelity step need not read
            # them back: judge what was not judged in the batch, re-judge, alert. Then the
            # extension point (docs/architecture.md).
            store = self.store
            self.fidelity.stored(self.team, signal_ids, store.contents, store.rows, store.arguments)
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

    def _record_discovery(self, found: list[Discovered]) -> set[str]:
        """Each session's discovery records of the batch, stored once (idempotent by record key);
        the tools of the sessions whose loads changed (for the load-to-call alert)."""
        sink = discovery_sink()
        if sink is None or not found:
            return set()
        by_session: dict[tuple[str, str], list[Any]] = {}
        for item in found:
            by_session.setdefault((item.format, item.session_key), []).extend(item.events)
        changed: set[str] = set()
        for (format, session_key), events in by_session.items():
            counts = sink.record(self.store.session_for(format, session_key), events)
            self.discovery.update(counts)
            if counts.get("loads") or counts.get("calls") or counts.get("searches"):
                changed.update(_tools_of(events))
        return changed

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
            discovery_counts=dict(self.discovery),
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
                status=Status.DONE,
                finished=timezone.now(),
                verdict_counts=self.fidelity.verdict_counts(self.job),
                error="",
            )
            self.store.calls_stored = ToolCall.objects.filter(job=self.job).count()
            if lines_in_input is not None and settled != lines_in_input:
                # Should never happen; say so loudly rather than show counts that do not add up.
                extra["error"] = f"accounting error: {lines_in_input} lines read but {settled} settled"
                logger.error("ingest job %s: %s", self.job.pk, extra["error"])
        self._save_progress(bytes_done, **extra)


def _tools_of(events: Iterable[Any]) -> set[str]:
    """The tools discovery records load (a search's matches) or call."""
    found: set[str] = set()
    for event in events:
        found.update(getattr(event, "matches", ()))
        tool = getattr(event, "tool", None)
        if isinstance(tool, str):
            found.add(tool)
    return found
