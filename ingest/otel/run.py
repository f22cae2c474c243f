"""Running a telemetry job: one stored OTLP body, every record settled once.

The body is decoded (``mcptax.otel.decode``) and each record classified (``mcptax.otel.events``):
an MCP ``tool_result`` becomes an ObservedCall stored by the capture pipeline's own CallStore (so
bulk arguments, verdicts, rollups and paste cost are those of any transcript call); a measured
request, the tools a request sent, and a tool search are stored here; the rest is ignored or
quarantined with its reason. A body is a few megabytes at most, so all of it is one transaction:
a run killed half way stored nothing, and its retry starts over with the same answer.

Accounting is the pipeline's: every record is stored (new), duplicate (its key was stored
before: an exporter's retry), ignored or quarantined, and ``lines_read`` counts records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from ingest.capture.models import IngestJob
from ingest.capture.pipeline.batch import Run, _Batch
from ingest.capture.pipeline.run import InputUnavailable
from ingest.capture.pipeline.values import parse_ts
from ingest.capture.storage import open_job_input
from ingest.otel import store
from mcptax.discovery import select_names
from mcptax.formats.records import CALL, IGNORED, QUARANTINED, LineOutcome, ObservedCall, sha256_hex, utf8
from mcptax.otel import decode_body
from mcptax.otel.decode import OtelRecord, Unreadable
from mcptax.otel.events import (
    CLAUDE,
    ApiRequest,
    Context,
    Ignored,
    Quarantined,
    RequestBody,
    ToolResult,
    ToolSearchRecord,
    classify,
)
from mcptax.tokens import canonical

FORMAT = "otlp"
UNLIMITED = 10**12


@dataclass
class Pending:
    """The telemetry rows of a body, by kind, with the record (line) each came from."""

    requests: list[tuple[int, ApiRequest]] = field(default_factory=list)
    calls: list[tuple[int, ToolResult]] = field(default_factory=list)
    bodies: list[tuple[int, RequestBody]] = field(default_factory=list)
    searches: list[tuple[int, ToolSearchRecord]] = field(default_factory=list)
    events: list[tuple[str, str, Context]] = field(default_factory=list)  # (session, event, context)


def observed_call(event: ToolResult, line_no: int) -> ObservedCall:
    """The call a ``tool_result`` record stands for, as the capture pipeline stores calls."""
    context = event.context
    arguments = event.arguments if event.arguments is not None else {}
    raw = utf8(event.arguments_raw) if event.arguments_raw is not None else utf8(canonical(arguments))
    end = parse_ts(context.at)
    start = end - timedelta(milliseconds=event.duration_ms) if end and event.duration_ms else end
    result = None
    if event.success is not None:
        text = event.output if event.output is not None else (event.error or "")
        content = [{"type": "text", "text": text}] if text else []
        result = {"content": content, "isError": not event.success}
    return ObservedCall(
        format=FORMAT,
        session_key=context.session,
        server_label=event.server,
        conn_id="",
        jsonrpc_id=event.call_id,
        client_call_id=event.call_id,
        tool=event.tool,
        arguments=arguments,
        arguments_raw_bytes=len(raw),
        arguments_sha256=sha256_hex(raw),
        meta=None,
        request_ts=start.isoformat() if start else None,
        response_ts=end.isoformat() if end else None,
        duration_ms=event.duration_ms,
        result=result,
        is_error=None if event.success is None else not event.success,
        jsonrpc_error=None,
        agent=context.agent,
        output_tokens=None,
        line_numbers=(line_no,),
        dedupe_key=context.key,
        claudecode_tool_use_id=event.call_id if context.client == CLAUDE else None,
        arguments_raw=event.arguments_raw,
        transport="telemetry",
        capture_truncated=bool(event.truncated_pointers),
        truncated_pointers=event.truncated_pointers,
        no_content=event.arguments is None,
    )


class TelemetryRun(Run):
    """A Run whose one batch also stores the body's telemetry rows, in the same transaction."""

    def __init__(self, job: IngestJob, token: str) -> None:
        super().__init__(job, token)
        self.limits = (UNLIMITED, UNLIMITED, UNLIMITED)
        self.pending = Pending()

    def flush(self, batch: _Batch, bytes_done: int) -> None:
        with transaction.atomic():
            store.store_pending(self, self.pending)
            super().flush(batch, bytes_done)

    def plan(self, items: list[OtelRecord | Unreadable]) -> _Batch:
        """The calls and one outcome per record; telemetry rows go to ``pending``."""
        batch = _Batch()
        for item in items:
            line = item.index
            if isinstance(item, Unreadable):
                batch.outcomes.append(
                    LineOutcome(line, QUARANTINED, item.reason, raw=item.raw, watermark=line)
                )
                continue
            kind = classify(item)
            if isinstance(kind, Quarantined):
                batch.outcomes.append(
                    LineOutcome(line, QUARANTINED, kind.reason, raw=item.raw(), watermark=line)
                )
                continue
            if isinstance(kind, Ignored):
                batch.outcomes.append(LineOutcome(line, IGNORED, kind.reason, watermark=line))
                continue
            if isinstance(kind, ToolResult):
                batch.calls.append(observed_call(kind, line))
                self.pending.calls.append((line, kind))
            elif isinstance(kind, ApiRequest):
                self.pending.requests.append((line, kind))
            elif isinstance(kind, RequestBody):
                self.pending.bodies.append((line, kind))
            elif select_names(kind.query):
                self.pending.searches.append((line, kind))
            else:
                # A keyword search's matches are not in its record; counted as a miss it would lie.
                batch.outcomes.append(
                    LineOutcome(line, IGNORED, "tool_search_matches_unknown", watermark=line)
                )
                continue
            self.pending.events.append((kind.context.session, item.event, kind.context))
            batch.outcomes.append(
                LineOutcome(line, CALL, None, call_keys=(kind.context.key,), watermark=line)
            )
        return batch


def run_otlp_job(job: IngestJob, token: str) -> None:
    """Read the job's stored body and settle every record (see the module docstring)."""
    where = job.storage_name or job.path
    try:
        raw, total = open_job_input(job.storage_name, job.path)
    except OSError as exc:
        raise InputUnavailable(f"cannot open {where}: {exc.strerror or exc}") from exc
    with raw:
        data = raw.read(max(settings.OTEL_MAX_BYTES, total) + 1)
    items = decode_body(data)
    run = TelemetryRun(job, token)
    batch = run.plan(items)
    run.flush(batch, total)
    run.finish(bytes_done=total, total_bytes=total, lines_in_input=len(items), final=True)
