"""Storing a telemetry body's rows: sessions, measured requests, sent tools and the agents' last
report. Called inside the job's one transaction (``run.TelemetryRun.flush``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.models import CaptureSession
from ingest.capture.pipeline.values import db_safe_json, fit, parse_ts
from ingest.discovery.models import DiscoverySearch
from ingest.discovery.store import record_discovery
from ingest.otel.models import MeasuredRequest, SentTools, TelemetryAgent
from mcptax import tokens
from mcptax.discovery import DiscoveryEvent, RequestTurn, ToolSearch, ToolUse, select_names
from mcptax.otel.events import Context
from mcptax.otel.sent_tools import SentTools as SentToolsFigures
from mcptax.otel.sent_tools import compare, sent_tools
from mcptax.profiles import qualified_name

if TYPE_CHECKING:
    from ingest.otel.run import Pending, TelemetryRun


def tracked_encodings() -> list[str]:
    """The encodings sent tools are counted in: both offline ones and any configured."""
    return tokens.available_encodings([*tokens.OFFLINE_ENCODINGS, *settings.TOKEN_ENCODINGS])


def _session(run: TelemetryRun, context: Context) -> CaptureSession:
    run.store.remember_client(context.session, context.agent)
    return run.store.sessions[(run.job.format, fit(context.session, 300, "session", []))]


def _new_keys(run: TelemetryRun, model: type[MeasuredRequest] | type[SentTools], keys: list[str]) -> set[str]:
    """The keys not stored yet; settles ``key_ours`` for those stored before (ours if by this job)."""
    existing = dict(model.objects.filter(team=run.team, key__in=keys).values_list("key", "job_id"))
    for key, job_id in existing.items():
        run.store.key_ours[key] = job_id == run.job.pk
    return {k for k in keys if k not in existing}


def _store_rows(run: TelemetryRun, model: Any, rows: list[Any]) -> None:
    model.objects.bulk_create(rows, ignore_conflicts=True)
    stored = dict(
        model.objects.filter(team=run.team, key__in=[r.key for r in rows]).values_list("key", "job_id")
    )
    for row in rows:
        run.store.key_ours[row.key] = stored.get(row.key) == run.job.pk


def _row_fields(run: TelemetryRun, context: Context, model: str, request_id: str) -> dict[str, Any]:
    """The fields every telemetry row has: team, key, job, session, agent, time, model, request."""
    session = _session(run, context)
    return {
        "team": run.team,
        "key": context.key,
        "job": run.job,
        "session": session,
        "agent_id": session.agent_id,
        "at": parse_ts(context.at),
        "model": fit(model, 100, "model", []),
        "request_id": fit(request_id, 100, "request_id", []),
    }


def _requests(run: TelemetryRun, pending: Pending) -> None:
    new = _new_keys(run, MeasuredRequest, [e.context.key for _, e in pending.requests])
    rows = []
    for _, event in pending.requests:
        if event.context.key not in new:
            continue
        new.discard(event.context.key)  # the same record twice in one body
        rows.append(
            MeasuredRequest(
                **_row_fields(run, event.context, event.model, event.request_id),
                input_tokens=event.input_tokens,
                cache_read_tokens=event.cache_read_tokens,
                cache_creation_tokens=event.cache_creation_tokens,
                output_tokens=event.output_tokens,
                cost_usd=event.cost_usd,
                duration_ms=event.duration_ms,
            )
        )
    _store_rows(run, MeasuredRequest, rows)


def polled_servers(team: Team) -> list[McpServer]:
    """The team's servers with a current snapshot (read once per job: a body holds a request body
    per model request)."""
    return list(
        McpServer.objects.filter(team=team, current_snapshot__isnull=False).select_related(
            "current_snapshot__document"
        )
    )


def predictions(servers: list[McpServer], counted: SentToolsFigures) -> dict[str, Any]:
    """For each server of the request that the team registered and polled, the comparison with
    its current snapshot (``mcptax.otel.sent_tools.compare``)."""
    labels = {t.server for t in counted.tools if t.server and not t.deferred}
    if not labels:
        return {}
    out: dict[str, Any] = {}
    for server in servers:
        label = qualified_name(server.name, "")[len("mcp__") : -2]
        snapshot = server.current_snapshot
        if label not in labels or snapshot is None:
            continue
        comparison = compare(counted, label, server.name, snapshot.tools_raw)
        out[label] = {
            "server": server.pk,
            "snapshot": snapshot.pk,
            "version": snapshot.label,
            **comparison.summary(),
        }
    return out


def _bodies(run: TelemetryRun, pending: Pending) -> None:
    new = _new_keys(run, SentTools, [e.context.key for _, e in pending.bodies])
    encodings = tracked_encodings()
    servers = polled_servers(run.team)
    rows = []
    for _, event in pending.bodies:
        if event.context.key not in new:
            continue
        new.discard(event.context.key)
        counted = sent_tools(event.body, encodings)
        rows.append(
            SentTools(
                **_row_fields(run, event.context, event.model, event.request_id),
                mode=counted.mode,
                tool_count=len(counted.tools),
                deferred_count=len(counted.deferred),
                loaded_count=len(counted.loaded),
                totals=counted.totals,
                mcp_loaded=counted.mcp_loaded,
                tools=db_safe_json(counted.summary()["tools"], [], "tools"),
                predicted=predictions(servers, counted),
            )
        )
    _store_rows(run, SentTools, rows)


def touch_agents(run: TelemetryRun, contexts: Iterable[tuple[str, str, Context]], now: datetime) -> None:
    """Each agent's last report: when received, its latest event, how many records."""
    latest: dict[int, tuple[datetime | None, str, int]] = {}
    for _, event, context in contexts:
        session = _session(run, context)
        if session.agent_id is None:
            continue
        at = parse_ts(context.at)
        previous = latest.get(session.agent_id)
        count = (previous[2] if previous else 0) + 1
        if previous is None or (at is not None and (previous[0] is None or at >= previous[0])):
            latest[session.agent_id] = (at, event, count)
        else:
            latest[session.agent_id] = (previous[0], previous[1], count)
    for agent_id, (at, event, count) in latest.items():
        row, created = TelemetryAgent.objects.get_or_create(
            team=run.team,
            agent_id=agent_id,
            defaults={"last_received": now, "last_event": event[:100], "last_event_at": at, "records": count},
        )
        if not created:
            TelemetryAgent.objects.filter(pk=row.pk).update(
                last_received=now, last_event=event[:100], last_event_at=at, records=F("records") + count
            )


def _discovery(run: TelemetryRun, pending: Pending) -> None:
    """Tool searches, MCP calls and model requests, per session, to the deferred-loading figures
    (``record_discovery`` skips what a session stored before, so a retried body adds nothing)."""
    by_session: dict[str, tuple[Context, list[DiscoveryEvent]]] = {}

    def add(context: Context, event: DiscoveryEvent) -> None:
        by_session.setdefault(context.session, (context, []))[1].append(event)

    for line, search in pending.searches:
        at = parse_ts(search.context.at)
        add(
            search.context,
            ToolSearch(
                search.call_id, at, search.query, select_names(search.query), None, search.search_tool, line
            ),
        )
    for line, call in pending.calls:
        name = qualified_name(call.server, call.tool) if call.server else call.tool
        add(call.context, ToolUse(call.call_id or call.context.key, parse_ts(call.context.at), name, line))
    for line, request in pending.requests:
        add(request.context, RequestTurn(request.context.key, parse_ts(request.context.at), line))
    for context, events in by_session.values():
        session = _session(run, context)
        searches = {e.key: e for e in events if isinstance(e, ToolSearch)}
        known = set(
            DiscoverySearch.objects.filter(session=session, key__in=list(searches)).values_list(
                "key", flat=True
            )
        )
        for _, search in pending.searches:
            if search.context.session == context.session:
                run.store.key_ours[search.context.key] = search.call_id not in known
        record_discovery(session, events)


def store_pending(run: TelemetryRun, pending: Pending) -> None:
    """Every telemetry row of the body (not its calls: the CallStore writes those)."""
    if pending.searches or pending.calls or pending.requests:
        _discovery(run, pending)
    if pending.requests:
        _requests(run, pending)
    if pending.bodies:
        _bodies(run, pending)
    if pending.events:
        touch_agents(run, pending.events, timezone.now())
