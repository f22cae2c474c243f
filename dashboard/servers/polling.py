"""Polling: claim a server, fetch its tools/list, record a snapshot or the failure.

Plain functions; `dashboard.tasks` wraps them for Celery and runs what follows a new snapshot,
the `poll` command calls that flow directly.
"""

from __future__ import annotations

import hashlib
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard import outbound
from dashboard.servers import counting, eras, pollsql
from dashboard.servers.hints import interpreter_hint
from dashboard.servers.models import (
    TRANSIENT_OUTCOMES,
    McpServer,
    PollOutcome,
    PollRun,
    Snapshot,
    SnapshotTool,
    ToolsDocument,
    Transport,
    poll_lock_stale_after,
)
from dashboard.system.broker import Enqueue
from mcptax import findings as findings_mod
from mcptax import tokens
from mcptax.client import FetchResult, PollError, ServerTarget
from mcptax.client.target import Listings

log = logging.getLogger(__name__)
# The Celery task that polls one server (dashboard.tasks), sent by name so nothing here imports it.
POLL_TASK = "dashboard.tasks.poll_server"


# The current snapshot's columns an unchanged poll never reads (large JSON): not loaded with it.
_UNUSED_CURRENT = tuple(f"current_snapshot__{name}" for name in pollsql.UNUSED_CURRENT)


class _Unknown:
    """record_snapshot's caller did not say which snapshot is current."""


@dataclass
class PollSummary:
    server: str
    outcome: str
    message: str
    duration_ms: int
    changed: bool
    snapshot_id: int | None
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def target_for(server: McpServer) -> ServerTarget:
    return ServerTarget(
        # A Transport choice; ServerTarget checks it against the client's literal.
        transport=cast(Any, server.transport),
        command=server.command,
        args=list(server.args or []),
        env=dict(server.env or {}),
        cwd=server.cwd or None,
        url=server.url,
        headers=dict(server.headers or {}),
    )


def claim(server_id: int, lease: str = "", now: datetime | None = None) -> bool:
    """Take the per-server lock with a conditional update, so a slow server is never polled twice.

    Free, stale (its worker died), or held under this same `lease` (the same task, redelivered after
    its worker died mid-poll) can be taken.
    """
    now = now or timezone.now()
    free = McpServer.objects.lock_free(now)
    if lease:
        free = free | McpServer.objects.filter(poll_lease=lease)
    return free.filter(pk=server_id).update(polling_since=now, poll_lease=lease) == 1


def read_server(server_id: int) -> McpServer | None:
    """The server with what a poll uses of it, or None once it is deleted."""
    related = McpServer.objects.select_related("team", "current_snapshot").defer(*_UNUSED_CURRENT)
    return related.filter(pk=server_id).first()


def claim_and_read(
    server_id: int, lease: str = "", now: datetime | None = None
) -> tuple[bool, McpServer | None]:
    """`claim`, then `read_server`: one statement on PostgreSQL (`pollsql`), two elsewhere."""
    if pollsql.available():
        return pollsql.claim_and_read(server_id, lease, now or timezone.now())
    claimed = claim(server_id, lease, now)
    return claimed, read_server(server_id)


def _fetcher(server: McpServer) -> Callable[[str, Listings], FetchResult]:
    """What a poll fetches the server's lists with, in a given mode (eras.fetch_in_eras)."""
    from mcptax.client.fetch import fetch_tools_sync  # the MCP SDK, only when polling

    def fetch(mode: str, listings: Listings) -> FetchResult:
        return fetch_tools_sync(
            target_for(server),
            connect_timeout=settings.POLL_CONNECT_TIMEOUT,
            total_timeout=settings.POLL_TOTAL_TIMEOUT,
            max_bytes=settings.POLL_MAX_BYTES,
            include_prompts_resources=listings,
            outbound=outbound.policy(),
            mode=mode,
        )

    return fetch


def poll_and_record(
    server_id: int, *, trigger: str = "schedule", lease: str = ""
) -> tuple[PollSummary, Snapshot | None]:
    """Claim the server, fetch its tools/list, record the snapshot (or the failure) and release it.

    Returns the summary and the snapshot when it is new (the caller, `dashboard.tasks.poll`, runs
    what a new snapshot leads to), else None.
    """
    # Read after (or with) the claim: under the lock nobody else records a snapshot of this server,
    # so its current snapshot is the newest (record_snapshot need not look it up again).
    claimed, server = claim_and_read(server_id, lease)
    if server is None:
        # Deleted before its poll ran, or between the claim and this read: nothing to record.
        log.info("server %s was deleted before its poll read it; nothing is recorded", server_id)
        gone = "the server was deleted during its poll" if claimed else "the server no longer exists"
        return PollSummary(f"#{server_id}", "deleted", gone, 0, False, None, True), None
    if not claimed:
        skipped = PollSummary(
            server.name, "skipped", "a poll of this server is already running", 0, False, None, True
        )
        return skipped, None
    started = timezone.now()
    t0 = time.monotonic()
    outcome: str = PollOutcome.OK
    message, snapshot, changed = "", None, False
    run: PollRun | None = None
    try:
        try:
            result, other_era = eras.fetch_in_eras(server, _fetcher(server))
            # extend=False: an unchanged snapshot's last_seen is written with the run (_finish).
            snapshot, changed = record_snapshot(server, result, current=server.current_snapshot, extend=False)
            eras.record_eras(snapshot, result, other_era)
        except PollError as exc:
            outcome, message = exc.outcome, exc.message
            if server.transport == Transport.STDIO:
                message += interpreter_hint(server.command)
        except Exception as exc:  # a bug or an unforeseen failure must not stop the worker or the lock
            if isinstance(exc, IntegrityError) and _deleted(server):
                raise
            # Ours, not the server's: `crashed` is kept for a server process that died.
            log.exception("poll of %s failed in the dashboard", server.name)
            outcome, message = PollOutcome.INTERNAL_ERROR, _describe(exc)
        duration_ms = int((time.monotonic() - t0) * 1000)
        finished = PollRun(
            server=server,
            started=started,
            duration_ms=duration_ms,
            outcome=outcome,
            message=message[:5000],
            snapshot=snapshot,
            changed=changed,
            trigger=trigger,
        )
        _finish(server, finished, extended=None if changed else snapshot)
        run = finished
    except IntegrityError:
        if not _deleted(server):
            raise
        return _deleted_during_poll(server, t0), None
    finally:
        if run is None:
            # The PollRun could not be written (the database went away mid-poll, or a bug): give the
            # lock back anyway, so the server is polled again; if even this fails, it goes stale.
            _release_after_failure(server, started)
    summary = PollSummary(
        server.name, outcome, message, duration_ms, changed, snapshot.pk if snapshot else None
    )
    return summary, (snapshot if changed else None)


def _deleted_during_poll(server: McpServer, t0: float) -> PollSummary:
    # Nothing of the poll has a server to belong to any more: drop it, quietly.
    log.info("server %s was deleted during its poll; its result is dropped", server.name)
    message = "the server was deleted during its poll"
    return PollSummary(
        server.name, "deleted", message, int((time.monotonic() - t0) * 1000), False, None, True
    )


def _deleted(server: McpServer) -> bool:
    return not McpServer.objects.filter(pk=server.pk).exists()


def _release_after_failure(server: McpServer, started: datetime) -> None:
    try:
        McpServer.objects.filter(pk=server.pk, polling_since__isnull=False).update(
            polling_since=None,
            poll_lease="",
            last_outcome=PollOutcome.INTERNAL_ERROR,
            next_poll_at=timezone.now() + timedelta(seconds=server.backoff_seconds()),
        )
    except Exception:
        log.exception("could not release the poll lock of %s; it goes stale by itself", server.name)


def _finish(server: McpServer, run: PollRun, *, extended: Snapshot | None) -> None:
    """Record the run and release the lock with its outcome; for an unchanged poll, extend its
    snapshot to the time it was seen as well.

    On PostgreSQL an unchanged, successful poll (the common case by far) does all three in one
    statement, a data-modifying WITH: one round trip and one commit instead of three. Elsewhere,
    and for any other poll, they are three ORM statements.
    """
    if extended is not None and run.outcome == PollOutcome.OK and pollsql.available():
        pollsql.finish_unchanged(server, run, extended, _released(server, run))
        return
    if extended is not None:
        Snapshot.objects.filter(pk=extended.pk).update(last_seen=extended.last_seen)
    run.save(force_insert=True)
    _release(server, run)


def _release(server: McpServer, run: PollRun) -> None:
    McpServer.objects.filter(pk=server.pk).update(**_released(server, run))


def _released(server: McpServer, run: PollRun) -> dict[str, Any]:
    """The server's columns once its poll ended with ``run``: the lock given back, the outcome
    recorded and the next poll due."""
    now = timezone.now()
    if run.outcome == PollOutcome.OK:
        failures = 0
        # Counted from the poll's start, so the time a poll takes never adds up into drift.
        next_at = max(run.started + timedelta(seconds=server.poll_interval_seconds), now)
    else:
        failures = server.consecutive_failures + 1
        server.consecutive_failures = failures - 1
        delay = (
            server.backoff_seconds() if run.outcome in TRANSIENT_OUTCOMES else server.poll_interval_seconds
        )
        next_at = now + timedelta(seconds=delay)
    return {
        "polling_since": None,
        "poll_lease": "",
        "consecutive_failures": failures,
        "last_poll_at": run.started,
        "last_outcome": run.outcome,
        "last_error": "" if run.outcome == PollOutcome.OK else run.message[:2000],
        "next_poll_at": next_at,
    }


def record_snapshot(
    server: McpServer,
    result: FetchResult,
    *,
    seen_at: datetime | None = None,
    current: Snapshot | None | type[_Unknown] = _Unknown,
    extend: bool = True,
) -> tuple[Snapshot, bool]:
    """Extend the current snapshot when nothing changed, else store a new one. Returns (snapshot, changed).

    The comparison costs one sha256; tokenizing happens only for a new list. ``current`` is the
    server's newest snapshot when the caller knows it (read under the poll's lock), else looked up
    here. ``extend=False``: an unchanged snapshot's ``last_seen`` is set on the object only.
    """
    seen_at = seen_at or timezone.now()
    sha = tokens.snapshot_sha256(result.tools, float_free_json=result.float_free_json)
    version = result.server_version or ""
    instructions = result.instructions or ""
    if current is _Unknown:
        # The newest row, not server.current_snapshot: the caller's copy of the server may be stale.
        current = Snapshot.objects.filter(server=server).order_by("-pk").first()
    assert current is None or isinstance(current, Snapshot)
    if (
        current is not None
        and current.sha256 == sha
        and current.server_version == version
        and current.instructions == instructions
    ):
        if extend:
            Snapshot.objects.filter(pk=current.pk).update(last_seen=seen_at)
        current.last_seen = seen_at
        return current, False

    counted = counting.count(result.tools, instructions, tracked_encodings(server), server=server.name)
    report, encoding = counted.report, counted.report.encoding
    with transaction.atomic():
        document = ToolsDocument.store(sha, result.tools)
        snapshot = Snapshot.objects.create(
            server=server,
            previous=current,
            document=document,
            sha256=sha,
            first_seen=seen_at,
            last_seen=seen_at,
            server_name=result.server_name or "",
            server_title=result.server_title or "",
            server_version=version,
            protocol_version=result.protocol_version or "",
            is_release=current is None or current.server_version != version,
            tool_count=report.tool_count,
            bytes=report.bytes,
            raw_bytes=len(document.raw_json.encode()),
            encoding=report.encoding,
            fixed_tax_tokens=report.fixed_tax_tokens,
            tax_delta=None if current is None else report.fixed_tax_tokens - current.fixed_tax_tokens,
            overhead_tokens=report.overhead_tokens,
            instructions_tokens=report.instructions_tokens,
            instructions=instructions,
            tokens_by_encoding=counted.tokens_by_encoding,
            counts=counted.counts,
            prompts_count=result.prompts_count,
            resources_count=result.resources_count,
        )
        SnapshotTool.objects.bulk_create(
            SnapshotTool(
                snapshot=snapshot,
                position=i,
                name=t.name,
                tokens=t.tokens,
                description_tokens=t.description_tokens,
                schema_tokens=t.schema_tokens,
                sha256=hashlib.sha256(tokens.canonical(tokens.visible_tool(raw)).encode()).hexdigest(),
                counts=counted.tool_counts[i],
            )
            for i, (t, raw) in enumerate(zip(report.tools, result.tools, strict=True))
        )
        McpServer.objects.filter(pk=server.pk).update(current_snapshot=snapshot)
        server.current_snapshot = snapshot
    _store_findings(server, snapshot, result.tools, encoding)
    return snapshot, True


def _store_findings(server: McpServer, snapshot: Snapshot, tools: list[Any], encoding: str) -> None:
    # The counts are stored: from here on a failure costs the findings, never the snapshot.
    try:
        found = findings_mod.analyze(tools, encoding=encoding, **_team_medians(server))
    except Exception as exc:
        log.exception("findings of snapshot %s (server %s) failed", snapshot.pk, server.name)
        record_analysis_error(snapshot, "findings", exc)
    else:
        snapshot.findings = [f.to_dict() for f in found]
        Snapshot.objects.filter(pk=snapshot.pk).update(findings=snapshot.findings)


def tracked_encodings(server: McpServer) -> list[str]:
    """The server's team's tracked encodings that load here, main one first."""
    return counting.tracked_encodings(server.team)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def record_analysis_error(snapshot: Snapshot, stage: str, exc: BaseException) -> None:
    """Note on the snapshot that one analysis of it failed (the caller has logged the traceback)."""
    snapshot.analysis_errors = [*snapshot.analysis_errors, {"stage": stage, "error": _describe(exc)[:2000]}]
    Snapshot.objects.filter(pk=snapshot.pk).update(analysis_errors=snapshot.analysis_errors)


def _team_medians(server: McpServer) -> dict[str, Any]:
    """Median description and schema tokens over the team's current tools, for the 'far above' rules."""
    rows = SnapshotTool.objects.filter(
        snapshot__in=McpServer.objects.filter(team=server.team)
        .exclude(pk=server.pk)
        .values("current_snapshot")
    ).values_list("description_tokens", "schema_tokens")[:5000]
    if len(rows) < 5:
        return {}
    return {
        "team_median_description_tokens": statistics.median(r[0] for r in rows),
        "team_median_schema_tokens": statistics.median(r[1] for r in rows),
    }


def dispatch_due(
    now: datetime | None = None,
    *,
    enqueue: Enqueue,
    lookahead: timedelta | None = None,
) -> list[int]:
    """Find servers due for a poll within the next beat tick and hand each server's id and its
    exact due time to `enqueue` (beat's task sends the poll task with that ETA), so a poll starts
    on time rather than at the first tick after it falls due.

    next_poll_at is pushed forward when dispatching, so beat ticking again before the poll runs
    does not enqueue the same server twice. A server whose lock went stale (its worker died) is
    dispatched like a free one.
    """
    now = now or timezone.now()
    horizon = now + (lookahead if lookahead is not None else timedelta(seconds=settings.POLL_DISPATCH_EVERY))
    dispatched = []
    due = McpServer.objects.lock_free(now).due(horizon).only("pk", "next_poll_at")
    for server in due:
        eta = max(server.next_poll_at, now)
        # Due again when a poll that never ran, or died holding the lock, would have gone stale.
        hold = eta + poll_lock_stale_after()
        claimed = McpServer.objects.filter(pk=server.pk, next_poll_at=server.next_poll_at).update(
            next_poll_at=hold
        )
        if claimed == 1:
            enqueue(server.pk, eta=eta)
            dispatched.append(server.pk)
    return dispatched
