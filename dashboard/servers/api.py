"""Schema-tax endpoints of the JSON API: servers and their snapshots.

Every query is scoped to the token's team (`request.team`, set by dashboard.teams.api.TeamTokenAuth);
a server of another team is simply not found.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema

from dashboard.servers.models import McpServer, Snapshot
from dashboard.teams.api import TeamApiRequest

router = Router(tags=["schema tax"])


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
    limits: dict[str, Any]
    # Every profile in every tracked encoding: {profile: {encoding: {fixed_tax_tokens, instructions_tokens, bytes}}}.
    counts: dict[str, Any]


class ServerOut(Schema):
    name: str
    transport: str
    enabled: bool
    last_poll_at: datetime | None
    last_outcome: str
    current: SnapshotSummary | None


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
        "limits": snapshot.limits,
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
        }
        for s in servers
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
