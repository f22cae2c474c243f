"""Regressions: every snapshot change that moved a server's fixed tax, with the tools that moved it.

A regression here is any snapshot whose fixed tax differs from the snapshot before it (a release,
or a tool list changed under the same version), newest first, across the team's servers. Each row
carries its delta, the tools that caused it (added, grown, shrunk, removed, with tokens) and the
alerts it raised. Alerts live in dashboard.alerts, which depends on this package, so they are
reached through the snapshot's `alerts_opened` reverse relation.

Query counts do not grow with the rows: one query for the page of snapshots, one for their tools
and their predecessors' tools, one for their alerts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from dashboard.servers.models import McpServer, Snapshot, SnapshotTool, Stack
from dashboard.teams.models import Team

PERIODS: dict[str, tuple[str, timedelta | None]] = {
    "7d": ("last 7 days", timedelta(days=7)),
    "30d": ("last 30 days", timedelta(days=30)),
    "90d": ("last 90 days", timedelta(days=90)),
    "all": ("all time", None),
}
DEFAULT_PERIOD = "30d"
DIRECTIONS = {"any": "grew or shrank", "grew": "grew", "shrank": "shrank"}
TOOLS_SHOWN = 5


@dataclass
class ToolDelta:
    name: str
    kind: str  # added | grown | shrunk | removed
    tokens: int  # the tool's tokens after (before, for a removed tool)
    delta: int


@dataclass
class Regression:
    snapshot: Snapshot
    tools: list[ToolDelta] = field(default_factory=list)
    alerts: list[Any] = field(default_factory=list)

    @property
    def server(self) -> McpServer:
        return self.snapshot.server

    @property
    def before(self) -> int:
        return int(getattr(self.snapshot, "before_tax", 0) or 0)

    @property
    def delta(self) -> int:
        return self.snapshot.fixed_tax_tokens - self.before

    @property
    def delta_pct(self) -> float | None:
        return 100.0 * self.delta / self.before if self.before else None

    @property
    def before_label(self) -> str:
        return str(getattr(self.snapshot, "before_version", "") or "") or "previous snapshot"

    @property
    def shown_tools(self) -> list[ToolDelta]:
        return self.tools[:TOOLS_SHOWN]

    @property
    def more_tools(self) -> int:
        return max(0, len(self.tools) - TOOLS_SHOWN)


def changes(
    team: Team,
    *,
    server: McpServer | None = None,
    stack: Stack | None = None,
    since: datetime | None = None,
    direction: str = "any",
) -> QuerySet[Snapshot]:
    """The team's snapshots whose fixed tax differs from the one before, newest first."""
    # tax_delta is the fixed tax minus the previous snapshot's, stored when the snapshot was
    # recorded: the filter, the count and the order need no join to the previous row.
    rows = (
        Snapshot.objects.filter(server__team=team, previous__isnull=False)
        .filter(Q(tax_delta__lt=0) | Q(tax_delta__gt=0))
        .annotate(
            before_tax=F("previous__fixed_tax_tokens"),
            before_version=F("previous__server_version"),
            delta=F("fixed_tax_tokens") - F("previous__fixed_tax_tokens"),
        )
        .select_related("server")
        .only(
            "pk",
            "server__id",
            "server__name",
            "server__code",
            "previous_id",
            "first_seen",
            "server_version",
            "sha256",
            "is_release",
            "fixed_tax_tokens",
            "tool_count",
        )
    )
    if server is not None:
        rows = rows.filter(server=server)
    if stack is not None:
        rows = rows.filter(server__stacks=stack)
    if since is not None:
        rows = rows.filter(first_seen__gte=since)
    if direction == "grew":
        rows = rows.filter(tax_delta__gt=0)
    elif direction == "shrank":
        rows = rows.filter(tax_delta__lt=0)
    return rows.order_by("-first_seen", "-pk")


def tool_deltas(before: dict[str, int], after: dict[str, int]) -> list[ToolDelta]:
    """What each tool added to the change, largest first (by name: a renamed tool is removed + added)."""
    out = []
    for name, tokens in after.items():
        old = before.get(name)
        if old is None:
            out.append(ToolDelta(name, "added", tokens, tokens))
        elif tokens != old:
            out.append(ToolDelta(name, "grown" if tokens > old else "shrunk", tokens, tokens - old))
    out.extend(
        ToolDelta(name, "removed", tokens, -tokens) for name, tokens in before.items() if name not in after
    )
    out.sort(key=lambda t: (-abs(t.delta), t.name))
    return out


def explain(snapshots: list[Snapshot]) -> list[Regression]:
    """The rows of one page with their tool changes and alerts (two queries for any page size)."""
    if not snapshots:
        return []
    wanted = {s.pk for s in snapshots} | {s.previous_id for s in snapshots if s.previous_id}
    tokens: dict[int, dict[str, int]] = {pk: {} for pk in wanted}
    for snap_id, name, count in SnapshotTool.objects.filter(snapshot_id__in=wanted).values_list(
        "snapshot_id", "name", "tokens"
    ):
        tokens[snap_id][name] = count
    alerts: dict[int, list[Any]] = {s.pk: [] for s in snapshots}
    alert_model: Any = Snapshot._meta.get_field("alerts_opened").related_model
    for alert in (
        alert_model._default_manager.filter(snapshot_id__in=list(alerts))
        .only("pk", "code", "level", "state", "measure", "message", "snapshot_id")
        .order_by("level", "pk")  # "error" before "warning"
    ):
        alerts[alert.snapshot_id].append(alert)
    return [
        Regression(
            snapshot=s,
            tools=tool_deltas(tokens.get(s.previous_id or 0, {}), tokens[s.pk]),
            alerts=alerts[s.pk],
        )
        for s in snapshots
    ]


def biggest_this_week(team: Team, limit: int = 5) -> list[Regression]:
    """The largest growths of the last seven days (the overview's panel)."""
    since = timezone.now() - timedelta(days=7)
    grew = changes(team, since=since, direction="grew")
    rows = list(grew.order_by("-tax_delta", "-first_seen")[:limit])
    return explain(rows)


def period_start(period: str, now: datetime | None = None) -> datetime | None:
    span = PERIODS.get(period, PERIODS[DEFAULT_PERIOD])[1]
    return None if span is None else (now or timezone.now()) - span
