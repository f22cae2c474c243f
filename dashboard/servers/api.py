"""Fixed-tax endpoints of the JSON API: servers and their snapshots.

Every query is scoped to the token's team (`request.team`, set by dashboard.teams.api.TeamTokenAuth);
a server of another team is simply not found.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema

from dashboard.servers import loading
from dashboard.servers.models import McpServer, Snapshot
from dashboard.servers.selectors import stacks_with_totals
from dashboard.teams.api import TeamApiRequest
from dashboard.teams.models import Team

router = Router(tags=["fixed tax"])


class SnapshotSummary(Schema):
    id: int
    version: str
    sha256: str
    first_seen: datetime
    last_seen: datetime
    is_release: bool
    tool_count: int
    encoding: str
    fixed_tax_tokens: int
    overhead_tokens: int
    instructions_tokens: int
    bytes: int
    limits: dict[str, Any]  # Snapshot.budget_checks, under its published name
    # Every profile in every tracked encoding: {profile: {encoding: {fixed_tax_tokens, instructions_tokens, bytes}}}.
    counts: dict[str, Any]


class ServerOut(Schema):
    name: str
    transport: str
    enabled: bool
    last_poll_at: datetime | None
    last_outcome: str
    current: SnapshotSummary | None
    # The current snapshot on its own under the team's client (mcptax.loading): every mode's
    # upfront with its parts, the mode the client uses, each tool's upfront part and load cost.
    loading: dict[str, Any] | None


class StackOut(Schema):
    name: str
    source: str
    servers: list[str]
    always_load: list[str]
    tool_search: str
    fixed_tax_tokens: int
    # Under the team's client: mode, upfront, the auto rule's verdict (Claude Code), every mode's
    # upfront and parts, and each polled member's share.
    loading: dict[str, Any] | None


class SnapshotPage(Schema):
    server: str
    count: int
    limit: int
    offset: int
    items: list[SnapshotSummary]


class ErrorOut(Schema):
    detail: str


def _summary(snapshot: Snapshot | None) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    return {
        "id": snapshot.pk,
        "version": snapshot.server_version,
        "sha256": snapshot.sha256,
        "first_seen": snapshot.first_seen,
        "last_seen": snapshot.last_seen,
        "is_release": snapshot.is_release,
        "tool_count": snapshot.tool_count,
        "encoding": snapshot.encoding,
        "fixed_tax_tokens": snapshot.fixed_tax_tokens,
        "overhead_tokens": snapshot.overhead_tokens,
        "instructions_tokens": snapshot.instructions_tokens,
        "bytes": snapshot.bytes,
        "limits": snapshot.budget_checks,
        "counts": snapshot.counts,
    }


@router.get("/servers", response=list[ServerOut], summary="The team's servers with their current fixed tax")
def list_servers(request: TeamApiRequest) -> list[dict[str, Any]]:
    servers = McpServer.objects.filter(team=request.team).select_related("current_snapshot").order_by("name")
    return [
        {
            "name": s.name,
            "transport": s.transport,
            "enabled": s.enabled,
            "last_poll_at": s.last_poll_at,
            "last_outcome": s.last_outcome,
            "current": _summary(s.current_snapshot),
            "loading": _server_loading(s, request.team),
        }
        for s in servers
    ]


def _server_loading(server: McpServer, team: Team) -> dict[str, Any] | None:
    snapshot = server.current_snapshot
    if snapshot is None:
        return None
    client = loading.client_of(team)
    figures = loading.figures(
        [(snapshot, server.name, False)],
        client,
        encoding=team.main_encoding,
        setting=loading.setting_for(team, None, client),
        window=team.context_window,
    )
    return {"client": client, "setting": figures.setting, **figures.servers[0].to_dict()}


@router.get("/stacks", response=list[StackOut], summary="The team's stacks with what each request carries")
def list_stacks(request: TeamApiRequest) -> list[dict[str, Any]]:
    rows = stacks_with_totals(request.team, with_loading=True)
    return [
        {
            "name": row.stack.name,
            "source": row.stack.source,
            "servers": [m.name for m in row.members],
            "always_load": sorted(s.name for s in row.stack.always_load.all()),
            "tool_search": row.stack.tool_search,
            "fixed_tax_tokens": row.total_tokens,
            "loading": row.loading.to_dict() if row.loading else None,
        }
        for row in rows
    ]


class PageParams(Schema):
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)


@router.get(
    "/servers/{name}/snapshots",
    response={200: SnapshotPage, 404: ErrorOut},
    summary="A server's snapshots, newest first, with the limits judged at each",
)
def server_snapshots(request: TeamApiRequest, name: str, page: Query[PageParams]) -> dict[str, Any]:
    server = get_object_or_404(McpServer, team=request.team, name=name)
    snapshots = Snapshot.objects.filter(server=server).order_by("-first_seen", "-pk")
    items = snapshots[page.offset : page.offset + page.limit]
    return {
        "server": server.name,
        "count": snapshots.count(),
        "limit": page.limit,
        "offset": page.offset,
        "items": [_summary(s) for s in items],
    }
