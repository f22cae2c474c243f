"""A large file read in line ranges by several workers at once, then stitched at the range edges.

An envelope log (not gzip) larger than INGEST_RANGE_BYTES is cut, by the worker that picks its job
up, into about size / INGEST_RANGE_BYTES ranges that start after a ``\\n`` (one pass that counts
lines and reads the lines that open sessions: ``mcptax.formats.ranges.split_points``). Each range
is a job of its own under the file's job (``parent``), with its own lease, watermark and counters,
queued as a task any worker takes, killed and resumed like any job (``stalled_jobs``). A range
stores its calls and line records under the parent and hands on the lines it cannot settle alone
(a response whose request may lie in an earlier range, a request still unanswered at its end).
Once every range is done, the parent's stitch reads only those lines, pairs them across ranges and
finishes the input; the parent's counts are the ranges' sums plus the stitch's, and
``lines_read == stored + duplicate + ignored + quarantined`` holds as for one reader, each line
settled once.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from dashboard.system.broker import Enqueue
from ingest.capture.models import IngestJob, LineRecord
from ingest.capture.pipeline.batch import Run
from ingest.capture.pipeline.fidelity_step import FidelityStep
from ingest.capture.pipeline.lease import LeaseLost
from ingest.capture.pipeline.reading import Lines
from ingest.capture.storage import open_job_input
from mcptax.formats import parse
from mcptax.formats.assemble import assemble
from mcptax.formats.ranges import SPLIT_FORMATS, RangeAssembler, Seed, shifted, split_points, stitch
from mcptax.formats.state import pack, unpack

Status = IngestJob.Status
COUNTS = ("stored", "duplicate", "ignored", "quarantined")


def should_split(job: IngestJob, format: str, compressed: bool, size: int) -> bool:
    """Whether the job's input is read in ranges: a large envelope log not yet started."""
    return (
        format in SPLIT_FORMATS
        and not compressed
        and size > settings.INGEST_RANGE_BYTES
        and job.source != IngestJob.Source.WATCH
        and job.watermark == 0
        and job.lines_read == 0
    )


def split(job: IngestJob, token: str, raw: Any, size: int, enqueue: Enqueue) -> bool:
    """Create the job's ranges and queue them; False when the file cannot be cut (one long line)."""
    parts = math.ceil(size / settings.INGEST_RANGE_BYTES)
    cuts = split_points(raw, size, parts, max_line=settings.INGEST_MAX_LINE_BYTES)
    if len(cuts) < 2:
        return False
    with transaction.atomic():
        updated = IngestJob.objects.filter(pk=job.pk, run_token=token).update(
            run_token="", heartbeat_at=timezone.now(), total_bytes=size, edge=pack({"ranges": len(cuts)})
        )
        if updated != 1:
            raise LeaseLost()
        for index, cut in enumerate(cuts):
            part = IngestJob.objects.create(
                team=job.team,
                source=job.source,
                filename=job.filename,
                format=job.format,
                total_bytes=cut.end - cut.start,
                created_by=job.created_by,
                parent=job,
                range_index=index,
                range_start=cut.start,
                range_end=cut.end,
                first_line=cut.lines_before,
                watermark=cut.lines_before,
                edge=pack({"seed": cut.seed.to_json()}),
            )
            transaction.on_commit(partial(enqueue, part.pk))
    return True


def run_range(job: IngestJob, token: str, fidelity: FidelityStep | None = None) -> None:
    """Read one range to its end (or on from its watermark after a kill) and hand on its edges."""
    assert job.parent_id is not None
    parent = IngestJob.objects.select_related("team").get(pk=job.parent_id)
    raw, _ = open_job_input(parent.storage_name, parent.path)
    following = (
        IngestJob.objects.filter(parent=parent, range_index=job.range_index + 1)
        .values_list("first_line", flat=True)
        .first()
    )
    records = LineRecord.objects.filter(job=parent, line_no__gt=job.watermark)
    if following is not None:
        records = records.filter(line_no__lte=following)
    seed = unpack(job.edge or b"")["seed"] if job.edge else {}
    start, size = job.range_start, job.range_end - job.range_start
    with raw:
        raw.seek(start)
        lines = Lines(raw, limit=size, position=lambda: raw.tell() - start)
        assembler = RangeAssembler(
            job.format,
            lines_before=job.first_line,
            seed=Seed.from_json(seed),
            hand_on_orphans=job.range_index > 0,
        )
        events = shifted(
            parse(lines, job.format, max_line_bytes=settings.INGEST_MAX_LINE_BYTES), job.first_line, start
        )
        settled_above = set(records.values_list("line_no", flat=True))
        run = Run(job, token, owner=parent, settled_above=settled_above, fidelity=fidelity)
        items = assemble(
            events, job.format, skip_through_line=job.watermark, finish=False, assembler=assembler
        )
        run.consume(items, lines)
        handoff = assembler.handoff(lines.count)
        settled = sum(run.counts.values())
        error = ""
        if settled + len(handoff["edge"]) != lines.count:
            error = f"accounting error: {lines.count} lines read but {settled} settled and {len(handoff['edge'])} handed on"
        run.finish(
            bytes_done=size,
            total_bytes=size,
            lines_in_input=None,
            final=False,
            status=Status.DONE,
            finished=timezone.now(),
            error=error,
            edge=pack({"seed": seed, "handoff": handoff}),
        )


def after_range_failed(job: IngestJob) -> None:
    """A range that failed for good fails the file's job (a retrying one leaves it running)."""
    failed = IngestJob.objects.filter(pk=job.pk, status=Status.FAILED).values_list("error", flat=True).first()
    if failed is None or job.parent_id is None:
        return
    IngestJob.objects.filter(pk=job.parent_id).exclude(status=Status.DONE).update(
        status=Status.FAILED,
        finished=timezone.now(),
        error=f"range {job.range_index + 1} (bytes {job.range_start}-{job.range_end}) failed: {failed}"[
            :4000
        ],
    )


def all_done(parent_id: int) -> bool:
    """Whether every range of the file is done, so its stitch may run."""
    return not IngestJob.objects.filter(parent_id=parent_id).exclude(status=Status.DONE).exists()


def stitch_parent(job: IngestJob, token: str, fidelity: FidelityStep | None = None) -> None:
    """The parent's run: settle the lines handed on by its ranges and close the job (sums + stitch)."""
    parts = list(IngestJob.objects.filter(parent=job).order_by("range_index"))
    if any(p.status != Status.DONE for p in parts):
        # The ranges are still read (or will be resumed on their own); nothing to do here yet.
        IngestJob.objects.filter(pk=job.pk, run_token=token).update(run_token="", status=Status.RUNNING)
        return
    meta = unpack(job.edge) if job.edge else {}
    if not meta.get("stitching"):
        ignored: Counter[str] = Counter()
        quarantined: Counter[str] = Counter()
        for p in parts:
            ignored.update(p.ignored_reasons or {})
            quarantined.update(p.quarantined_reasons or {})
        sums = {name: sum(getattr(p, name) for p in parts) for name in (*COUNTS, "calls_stored")}
        updated = IngestJob.objects.filter(pk=job.pk, run_token=token).update(
            **sums,
            lines_read=sum(sums[name] for name in COUNTS),
            ignored_reasons=dict(ignored),
            quarantined_reasons=dict(quarantined),
            edge=pack({**meta, "stitching": True}),
        )
        if updated != 1:
            raise LeaseLost()
        job.refresh_from_db()
    handoffs = [unpack(p.edge or b"")["handoff"] for p in parts]
    edge_lines = [n for h in handoffs for n, _, _ in h["edge"]]
    settled: set[int] = set()
    for i in range(0, len(edge_lines), 500):
        chunk = edge_lines[i : i + 500]
        settled.update(
            LineRecord.objects.filter(job=job, line_no__in=chunk).values_list("line_no", flat=True)
        )
    raw, total = open_job_input(job.storage_name, job.path)
    with raw:

        def read(offset: int, length: int) -> bytes:
            raw.seek(offset)
            return raw.read(length)

        run = Run(job, token, settled_above=settled, fidelity=fidelity)
        items = stitch(job.format, handoffs, read, settings.INGEST_MAX_LINE_BYTES)
        # The stitch reads lines here and there: its progress is the whole file.
        run.consume(items, Lines(io.BytesIO(), position=lambda: total))
        lines = sum(h["lines"] for h in handoffs)
        run.watermark = lines
        run.finish(bytes_done=total, total_bytes=total, lines_in_input=lines, final=True)


def progress(job: IngestJob) -> dict[str, int] | None:
    """A split job's progress while its ranges run: ranges done and total, and the counters summed
    (set on ``job`` for the page); None for a job read in one pass or already finished."""
    if job.status == Status.DONE or not job.edge:
        return None
    parts = IngestJob.objects.filter(parent=job)
    sums = parts.aggregate(*(Sum(name) for name in (*COUNTS, "lines_read", "calls_stored", "bytes_done")))
    total = parts.count()
    if not total:
        return None
    if not unpack(job.edge).get("stitching"):
        for name in (*COUNTS, "lines_read", "calls_stored"):
            setattr(job, name, sums[f"{name}__sum"] or 0)
        job.bytes_done = sums["bytes_done__sum"] or 0
    return {"ranges_done": parts.filter(status=Status.DONE).count(), "ranges_total": total}
