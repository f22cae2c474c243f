"""Store a session's discovery records (every source calls ``record_discovery``) and derive its loads.

Idempotent: a record whose (session, key) is stored already is skipped, so a log read twice, a
resumed ingest or telemetry repeating a transcript's events store nothing twice. After new
records the session's loads and summary are rebuilt from all its records (``mcptax.discovery``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from django.db import transaction
from django.utils import timezone

from dashboard.teams.models import Team
from ingest.capture.models import CaptureSession
from ingest.discovery.alerts import evaluate_load_rate_alerts
from ingest.discovery.models import (
    DiscoveryCall,
    DiscoveryCompaction,
    DiscoveryLoad,
    DiscoveryRequest,
    DiscoverySearch,
    SessionDiscoverySummary,
)
from mcptax.discovery import (
    Compaction,
    DiscoveryEvent,
    RequestTurn,
    SessionDiscovery,
    ToolSearch,
    ToolUse,
    derive,
)
from mcptax.formats.claude_code import split_tool_name

_KEY_MAX = 200


@dataclass
class DiscoveryCounts:
    """What a call of ``record_discovery`` added (loads: the change in the session's derived loads)."""

    searches: int = 0
    misses: int = 0
    loads: int = 0
    loads_never_called: int = 0
    calls: int = 0
    requests: int = 0
    compactions: int = 0

    def add(self, other: DiscoveryCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def server_of(tool: str) -> str:
    """The MCP server of a tool as the client names it (``mcp__<server>__<tool>``), else ""."""
    split = split_tool_name(tool)
    return split[0] if split else ""


def _row(session: CaptureSession, event: DiscoveryEvent) -> object:
    common = {"session": session, "key": event.key[:_KEY_MAX], "at": event.at, "seq": event.seq}
    if isinstance(event, ToolSearch):
        return DiscoverySearch(
            query=event.query,
            matches=list(event.matches),
            missed=event.missed,
            total_deferred=event.total_deferred,
            search_tool=event.search_tool[:60],
            **common,
        )
    if isinstance(event, Compaction):
        return DiscoveryCompaction(kept_loaded=list(event.kept_loaded), **common)
    if isinstance(event, RequestTurn):
        return DiscoveryRequest(**common)
    return DiscoveryCall(tool=event.tool[:300], server_label=server_of(event.tool)[:200], **common)


_MODELS: tuple[tuple[type, type], ...] = (
    (ToolSearch, DiscoverySearch),
    (Compaction, DiscoveryCompaction),
    (RequestTurn, DiscoveryRequest),
    (ToolUse, DiscoveryCall),
)


def record_discovery(session: CaptureSession, events: Iterable[DiscoveryEvent]) -> DiscoveryCounts:
    """Store the records not stored yet for ``session``; return what was new (see module docstring)."""
    counts = DiscoveryCounts()
    by_kind: dict[type, dict[str, DiscoveryEvent]] = {kind: {} for kind, _ in _MODELS}
    for event in events:
        by_kind[type(event)].setdefault(event.key[:_KEY_MAX], event)
    if not any(by_kind.values()):
        return counts
    with transaction.atomic():
        added = False
        for kind, model in _MODELS:
            wanted = by_kind[kind]
            stored = set(
                model.objects.filter(session=session, key__in=list(wanted)).values_list("key", flat=True)  # type: ignore[attr-defined]
            )
            new = [event for key, event in wanted.items() if key not in stored]
            if not new:
                continue
            added = True
            model.objects.bulk_create([_row(session, e) for e in new], ignore_conflicts=True)  # type: ignore[attr-defined]
            _count_new(counts, kind, new)
        if added:
            before = _summary_counts(session)
            after = rebuild_session(session)
            counts.loads = after.loads - before.loads
            counts.loads_never_called = after.loads_never_called - before.loads_never_called
    return counts


def _count_new(counts: DiscoveryCounts, kind: type, new: list[DiscoveryEvent]) -> None:
    if kind is ToolSearch:
        counts.searches += len(new)
        counts.misses += sum(1 for e in new if isinstance(e, ToolSearch) and e.missed)
    elif kind is Compaction:
        counts.compactions += len(new)
    elif kind is RequestTurn:
        counts.requests += len(new)
    else:
        counts.calls += len(new)


def _summary_counts(session: CaptureSession) -> SessionDiscoverySummary:
    found = SessionDiscoverySummary.objects.filter(session=session).first()
    return found or SessionDiscoverySummary(session=session)


def events_of(session_ids: Iterable[int]) -> dict[int, list[DiscoveryEvent]]:
    """Every stored discovery record of each session, as the Django-free records (four queries)."""
    ids = list(session_ids)
    events: dict[int, list[DiscoveryEvent]] = {pk: [] for pk in ids}
    for s in DiscoverySearch.objects.filter(session_id__in=ids):
        events[s.session_id].append(
            ToolSearch(s.key, s.at, s.query, tuple(s.matches), s.total_deferred, s.search_tool, s.seq)
        )
    for c in DiscoveryCompaction.objects.filter(session_id__in=ids):
        events[c.session_id].append(Compaction(c.key, c.at, tuple(c.kept_loaded), c.seq))
    for r in DiscoveryRequest.objects.filter(session_id__in=ids):
        events[r.session_id].append(RequestTurn(r.key, r.at, r.seq))
    for u in DiscoveryCall.objects.filter(session_id__in=ids):
        events[u.session_id].append(ToolUse(u.key, u.at, u.tool, u.seq))
    return events


def session_events(session: CaptureSession) -> list[DiscoveryEvent]:
    """Every stored discovery record of ``session``, as the Django-free records."""
    return events_of([session.pk])[session.pk]


def derive_sessions(session_ids: Iterable[int]) -> dict[int, SessionDiscovery]:
    """Each session's records replayed (``mcptax.discovery.derive``), in four queries for all."""
    return {pk: derive(events) for pk, events in events_of(session_ids).items()}


def derive_session(session: CaptureSession) -> SessionDiscovery:
    return derive(session_events(session))


def rebuild_session(session: CaptureSession) -> SessionDiscoverySummary:
    """Recompute the session's loads and summary from all its records."""
    derived = derive_session(session)
    searches = dict(DiscoverySearch.objects.filter(session=session).values_list("key", "pk"))
    DiscoveryLoad.objects.filter(session=session).delete()
    DiscoveryLoad.objects.bulk_create(
        DiscoveryLoad(
            session=session,
            search_id=searches[load.search_key],
            tool=load.tool[:300],
            server_label=server_of(load.tool)[:200],
            at=load.at,
            calls=load.called,
            requests_after=load.requests_after,
        )
        for load in derived.loads
    )
    figures = derived.counts()
    dates = [e.at for e in session_events(session) if e.at is not None]
    # A session whose records carry no time (stream-json) counts from when it was first stored.
    stored = (
        SessionDiscoverySummary.objects.filter(session=session).values_list("first_at", flat=True).first()
    )
    first_at = min(dates) if dates else (stored or timezone.now())
    summary, _ = SessionDiscoverySummary.objects.update_or_create(
        session=session,
        defaults={"total_deferred": derived.total_deferred, "first_at": first_at, **figures},
    )
    return summary


class IngestSink:
    """What the ingest run calls for each batch (registered in ``ingest.apps``)."""

    def record(self, session: CaptureSession, events: list[DiscoveryEvent]) -> dict[str, int]:
        return record_discovery(session, events).as_dict()

    def after_batch(self, team: Team, tools: Iterable[str]) -> list[str]:
        return evaluate_load_rate_alerts(team, tools)
