"""The operator's health report: the database and the broker, the workers and their queues, queue
depths, the last errors of each kind and the leases nobody renews.

Poll, delivery and ingest errors and leases live in other sub-packages' tables; each registers a
`Source` here (from its app's `ready`), so this package reads them without importing them (the
dependency direction stays: they use dashboard.system, not the other way round).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.system import broker, outages
from dashboard.system.models import STALE_AFTER, WORK_QUEUES, WorkerHeartbeat
from dashboard.teams.models import Team

logger = logging.getLogger(__name__)

# The kinds of error the report names, in its order.
KINDS = ("database", "broker", "poll", "delivery", "ingest")
# Poll, delivery and ingest errors are counted over this window.
WINDOW = timedelta(hours=24)
# A broker or database error this recent makes the status "degraded".
RECENT = timedelta(minutes=15)

OK, DEGRADED, DOWN = "ok", "degraded", "down"


@dataclass(frozen=True)
class ErrorSummary:
    kind: str
    count: int
    since: datetime  # the earliest error counted
    last_at: datetime
    message: str
    where: str = ""  # the server, channel, job or process it happened in
    url: str = ""


@dataclass(frozen=True)
class StaleLease:
    kind: str  # poll | delivery | ingest
    label: str
    held_since: datetime | None
    holder: str = ""
    url: str = ""


Teams = QuerySet[Team]


@dataclass(frozen=True)
class Source:
    """What one sub-package contributes: its last errors and its stale leases, within `teams`."""

    kind: str
    errors: Callable[[Teams, datetime], ErrorSummary | None]
    stale: Callable[[Teams, datetime], list[StaleLease]]


SOURCES: dict[str, Source] = {}


def register(source: Source) -> None:
    SOURCES[source.kind] = source


@dataclass(frozen=True)
class WorkerRow:
    hostname: str
    last_seen: datetime
    alive: bool
    queues: list[str]


@dataclass(frozen=True)
class QueueRow:
    name: str
    depth: int | None  # None: unknown (the broker does not answer)
    consumers: list[str]  # live workers consuming it; empty: stopped, its work only waits

    @property
    def stopped(self) -> bool:
        return not self.consumers


@dataclass
class Report:
    status: str
    problems: list[str]
    checked_at: datetime
    database_ok: bool
    database_error: str
    broker: broker.BrokerState
    workers: list[WorkerRow] = field(default_factory=list)
    unconsumed: list[str] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    errors: dict[str, ErrorSummary | None] = field(default_factory=dict)
    stale: list[StaleLease] = field(default_factory=list)


def _database() -> str:
    """'' when the database answers, else the error (recorded as a database outage)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except outages.DATABASE_ERRORS as exc:
        outages.record(outages.DATABASE, exc, "health check")
        connection.close_if_unusable_or_obsolete()
        return f"{type(exc).__name__}: {exc}"
    return ""


def _workers(now: datetime) -> tuple[list[WorkerRow], list[str]]:
    rows = [
        WorkerRow(hb.hostname, hb.last_seen, now - hb.last_seen < STALE_AFTER, list(hb.queues or []))
        for hb in WorkerHeartbeat.objects.filter(last_seen__gte=now - outages.KEEP_FOR)
    ]
    consumed = {q for row in rows if row.alive for q in row.queues}
    return rows, [q for q in WORK_QUEUES if q not in consumed]


def _outage_summaries() -> dict[str, ErrorSummary | None]:
    out: dict[str, ErrorSummary | None] = {}
    entries = outages.recorded()
    for kind in (outages.DATABASE, outages.BROKER):
        mine = [e for e in entries if e.kind == kind]
        if not mine:
            out[kind] = None
            continue
        last = max(mine, key=lambda e: e.last_at)
        out[kind] = ErrorSummary(
            kind=kind,
            count=sum(e.count for e in mine),
            since=min(e.first_at for e in mine),
            last_at=last.last_at,
            message=last.message,
            where=f"{last.where} on {last.source}" if last.where else last.source,
        )
    return out


def build(teams: Teams, now: datetime | None = None) -> Report:
    """The report; poll, delivery and ingest errors and leases only of `teams`."""
    now = now or timezone.now()
    db_error = _database()
    report = Report(
        status=OK,
        problems=[],
        checked_at=now,
        database_ok=not db_error,
        database_error=db_error,
        broker=broker.state(),
    )
    report.errors = dict.fromkeys(KINDS)
    report.errors.update(_outage_summaries())
    if not db_error:
        try:
            report.workers, report.unconsumed = _workers(now)
            for kind, source in SOURCES.items():
                report.errors[kind] = source.errors(teams, now - WINDOW)
                report.stale += source.stale(teams, now)
        except outages.DATABASE_ERRORS as exc:  # it went away while we read
            outages.record(outages.DATABASE, exc, "health page")
            report.database_ok, report.database_error = False, f"{type(exc).__name__}: {exc}"
            report.errors.update(_outage_summaries())
    report.queues = [
        QueueRow(q, depth, [w.hostname for w in report.workers if w.alive and q in w.queues])
        for q, depth in report.broker.depths.items()
    ]
    report.status, report.problems = judge(report, now)
    return report


def judge(report: Report, now: datetime) -> tuple[str, list[str]]:
    """down: the database or the broker does not answer; degraded: no live worker, a queue nobody
    consumes, a broker or database error in the last 15 minutes, or a stale lease."""
    problems: list[str] = []
    if not report.database_ok:
        problems.append(f"The database does not answer: {report.database_error}")
    if not report.broker.reachable:
        problems.append(f"The broker does not answer: {report.broker.error}")
    if problems:
        return DOWN, problems
    if not any(w.alive for w in report.workers):
        problems.append("No worker is running.")
    elif report.unconsumed:
        problems.append(f"No live worker consumes: {', '.join(report.unconsumed)}.")
    for kind in (outages.DATABASE, outages.BROKER):
        summary = report.errors.get(kind)
        if summary is not None and now - summary.last_at < RECENT:
            problems.append(f"{kind.capitalize()} errors in the last 15 minutes ({summary.message}).")
    if report.stale:
        problems.append(f"{len(report.stale)} stale lease(s): a worker died holding them.")
    return (DEGRADED if problems else OK), problems


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def as_json(report: Report) -> dict[str, Any]:
    """The JSON of `/api/v1/health` (docs/operations.md describes every field)."""
    return {
        "status": report.status,
        "problems": report.problems,
        "checked_at": _iso(report.checked_at),
        "database": {"ok": report.database_ok, "error": report.database_error},
        "broker": {
            "kind": report.broker.kind,
            "ok": report.broker.reachable,
            "error": report.broker.error,
            "reserved": report.broker.reserved,
        },
        "queues": {q.name: {"depth": q.depth, "consumers": q.consumers} for q in report.queues},
        "workers": [
            {"hostname": w.hostname, "last_seen": _iso(w.last_seen), "alive": w.alive, "queues": w.queues}
            for w in report.workers
        ],
        "unconsumed_queues": report.unconsumed,
        "errors": {
            kind: None
            if summary is None
            else {
                "count": summary.count,
                "since": _iso(summary.since),
                "last_at": _iso(summary.last_at),
                "message": summary.message,
                "where": summary.where,
            }
            for kind, summary in report.errors.items()
        },
        "stale_leases": [
            {"kind": s.kind, "label": s.label, "held_since": _iso(s.held_since), "holder": s.holder}
            for s in report.stale
        ],
    }
