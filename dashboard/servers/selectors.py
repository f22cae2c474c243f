"""Query helpers for the fixed-tax pages: each page's data in a fixed number of SQL queries.

Views stay thin; everything here takes already-authorized objects (a team, a server of that team).
Row counts grow with the data, query counts must not: per-server figures come from annotations
and one windowed query, never from a query per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery
from django.utils import timezone

from dashboard.servers import loading
from dashboard.servers.models import McpServer, PollOutcome, PollRun, Snapshot, SnapshotTool, Stack
from dashboard.servers.pending import poll_in_flight
from dashboard.servers.sorting import normalize_sort
from dashboard.servers.sparklines import delta_points, last_taxes, shared_scale
from dashboard.teams.models import Team
from mcptax.loading import ServerLoading, StackLoading
from mcptax.profiles import PROFILES

SPARKLINE_POINTS = 30
CONTEXT_WINDOWS = [32_000, 128_000, 200_000, 400_000, 1_000_000]

BUDGET_OVER = "over budget"
BUDGET_WARNING = "warning"
BUDGET_OK = "ok"
BUDGET_NONE = "no budget"
BUDGET_CSS = {BUDGET_OVER: "error", BUDGET_WARNING: "warning", BUDGET_OK: "ok", BUDGET_NONE: "muted"}

STATUS_FILTERS = {
    "over_budget": "Over budget",
    "warning": "Budget warning",
    "ok": "Within budget",
    "no_budget": "No budget",
    "failing": "Last poll failed",
    "never": "Never polled",
    "polling": "Polling now",
}


def budget_status(checks: dict[str, Any] | None) -> str:
    """Over budget if any error-level limit is breached, warning if a warning one is, else ok."""
    if not checks:
        return BUDGET_NONE
    breached = {v.get("level") for v in checks.values() if isinstance(v, dict) and v.get("breached")}
    if "error" in breached:
        return BUDGET_OVER
    if "warning" in breached:
        return BUDGET_WARNING
    return BUDGET_OK


def share(tokens: int | None, window: int) -> float | None:
    return None if tokens is None or not window else 100.0 * tokens / window


def pct_change(new: int | None, old: int | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return 100.0 * (new - old) / old


# --- Team overview ----------------------------------------------------------------------------------


@dataclass
class ServerRow:
    server: McpServer
    snapshot: Snapshot | None
    window: int
    release_prev_tax: int | None = None
    release_prev_label: str = ""
    release_prev_pk: int | None = None
    release_pk: int | None = None
    sparkline: list[int] = field(default_factory=list)
    # The largest change any row's sparkline shows: every row is drawn on this one scale.
    sparkline_scale: int = 0
    in_flight: bool = False
    # The encoding the tax, share and last-release columns are shown in; None: the main one (the
    # snapshot's own columns). The budget and the sparkline stay in the main encoding.
    encoding: str | None = None
    release_prev_encoding: str = ""
    release_prev_counts: dict[str, Any] | None = None
    # Its share of the team's stack under the team's client (dashboard.servers.loading.per_server).
    loading: ServerLoading | None = None

    @property
    def upfront(self) -> int | None:
        return None if self.loading is None else self.loading.upfront

    @property
    def tax(self) -> int | None:
        if self.snapshot is None:
            return None
        return self.snapshot.figure(self.encoding)

    @property
    def previous_tax(self) -> int | None:
        """The release before's fixed tax in the shown encoding; None when it was not counted so."""
        if self.encoding is None or self.encoding == self.release_prev_encoding:
            return self.release_prev_tax
        found = ((self.release_prev_counts or {}).get("mcp") or {}).get(self.encoding)
        return int(found["fixed_tax_tokens"]) if found and "fixed_tax_tokens" in found else None

    @property
    def share(self) -> float | None:
        return share(self.tax, self.window)

    @property
    def tool_count(self) -> int | None:
        return self.snapshot.tool_count if self.snapshot else None

    @property
    def release_delta(self) -> int | None:
        previous = self.previous_tax
        if self.tax is None or previous is None:
            return None
        return self.tax - previous

    @property
    def release_delta_pct(self) -> float | None:
        return pct_change(self.tax, self.previous_tax)

    @property
    def budget(self) -> str:
        return budget_status(self.snapshot.budget_checks if self.snapshot else None)

    @property
    def budget_css(self) -> str:
        return BUDGET_CSS[self.budget]

    @property
    def sparkline_svg_points(self) -> str:
        return delta_points(self.sparkline, self.sparkline_scale)

    @property
    def sparkline_change(self) -> int:
        return self.sparkline[-1] - self.sparkline[0] if self.sparkline else 0

    @property
    def failing(self) -> bool:
        return bool(self.server.last_outcome) and self.server.last_outcome != PollOutcome.OK

    def matches(self, status: str) -> bool:
        if not status:
            return True
        return {
            "over_budget": self.budget == BUDGET_OVER,
            "warning": self.budget == BUDGET_WARNING,
            "ok": self.budget == BUDGET_OK,
            "no_budget": self.budget == BUDGET_NONE,
            "failing": self.failing,
            "never": self.server.last_poll_at is None,
            "polling": self.in_flight,
        }.get(status, True)


_NONE_LAST = float("-inf")
SORT_KEYS: dict[str, Any] = {
    "name": lambda r: r.server.name.lower(),
    "tax": lambda r: r.tax if r.tax is not None else _NONE_LAST,
    "share": lambda r: r.tax if r.tax is not None else _NONE_LAST,
    "upfront": lambda r: r.upfront if r.upfront is not None else _NONE_LAST,
    "delta": lambda r: r.release_delta if r.release_delta is not None else _NONE_LAST,
    "delta_pct": lambda r: r.release_delta_pct if r.release_delta_pct is not None else _NONE_LAST,
    "tools": lambda r: r.tool_count if r.tool_count is not None else _NONE_LAST,
    "budget": lambda r: [BUDGET_NONE, BUDGET_OK, BUDGET_WARNING, BUDGET_OVER].index(r.budget),
    "outcome": lambda r: (r.failing, r.server.last_outcome or ""),
    "last_poll": lambda r: r.server.last_poll_at.timestamp() if r.server.last_poll_at else _NONE_LAST,
}
DEFAULT_SORT = "-tax"


def overview_rows(
    team: Team,
    *,
    window: int,
    sort: str | None = None,
    status: str = "",
    pending: tuple[int, datetime] | None = None,
    encoding: str | None = None,
    loading_encoding: str | None = None,
) -> tuple[list[ServerRow], list[ServerRow], str, StackLoading | None]:
    """(rows matching `status`, sorted; every row; the sort applied; the team's stack under its client,
    counted in `loading_encoding`). `encoding` (None: the main one): what the tax columns show."""
    releases = Snapshot.objects.filter(server=OuterRef("pk"), is_release=True).order_by("-first_seen", "-pk")
    servers = (
        McpServer.objects.filter(team=team)
        .select_related("current_snapshot")
        .defer("current_snapshot__instructions", "current_snapshot__findings")
        .annotate(
            release_pk=Subquery(releases.values("pk")[:1]),
            release_prev_pk=Subquery(releases.values("previous_id")[:1]),
            release_prev_tax=Subquery(releases.values("previous__fixed_tax_tokens")[:1]),
            release_prev_label=Subquery(releases.values("previous__server_version")[:1]),
            release_prev_encoding=Subquery(releases.values("previous__encoding")[:1]),
        )
    )
    if encoding is not None:
        servers = servers.annotate(release_prev_counts=Subquery(releases.values("previous__counts")[:1]))
    now = timezone.now()
    rows = [_server_row(s, window, pending, now, encoding) for s in servers]
    team_loading = loading.for_team([r.server for r in rows], team, loading_encoding or team.main_encoding)
    per_server = loading.per_server([r.server for r in rows], team_loading)
    for row in rows:
        row.loading = per_server.get(row.server.pk)
    shown = [r for r in rows if r.matches(status)]
    sort, key, descending = normalize_sort(sort, SORT_KEYS, DEFAULT_SORT)
    shown.sort(key=lambda r: r.server.name.lower())
    shown.sort(key=SORT_KEYS[key], reverse=descending)
    attach_sparklines(shown)
    return shown, rows, sort, team_loading


def _server_row(
    server: Any, window: int, pending: tuple[int, datetime] | None, now: datetime, encoding: str | None = None
) -> ServerRow:
    # `server` is an McpServer carrying the release_* annotations of overview_rows' query.
    return ServerRow(
        server=server,
        snapshot=server.current_snapshot,
        window=window,
        encoding=encoding,
        release_prev_encoding=server.release_prev_encoding or "",
        release_prev_counts=getattr(server, "release_prev_counts", None),
        release_prev_tax=server.release_prev_tax,
        release_prev_label=server.release_prev_label or "",
        release_prev_pk=server.release_prev_pk,
        release_pk=server.release_pk,
        in_flight=poll_in_flight(server, pending, now),
    )


def attach_sparklines(rows: list[ServerRow]) -> None:
    """The last SPARKLINE_POINTS snapshots of every row's server in one query."""
    by_server = {r.server.pk: r for r in rows if r.snapshot is not None}
    if not by_server:
        return
    for server_id, taxes in last_taxes(list(by_server), SPARKLINE_POINTS).items():
        by_server[server_id].sparkline = taxes
    scale = shared_scale([r.sparkline for r in rows])
    for row in rows:
        row.sparkline_scale = scale


@dataclass
class TeamTotal:
    tokens: int
    servers: int
    window: int

    @property
    def share(self) -> float | None:
        return share(self.tokens, self.window)


def team_total(rows: list[ServerRow], window: int) -> TeamTotal:
    """What an agent loading every enabled server pays per request (filters do not change it)."""
    taxes = [r.tax for r in rows if r.server.enabled and r.tax is not None]
    return TeamTotal(sum(taxes), len(taxes), window)


@dataclass
class StackRow:
    stack: Stack
    members: list[McpServer]
    total_tokens: int
    unpolled: list[McpServer]
    # {profile: summed tokens} in the page's encoding; a profile some member lacks is left out.
    by_profile: dict[str, int] = field(default_factory=dict)
    # Under the team's client (mcptax.loading); None when not asked for or nothing is polled.
    loading: StackLoading | None = None


def _profile_totals(members: list[McpServer], encoding: str) -> dict[str, int]:
    snapshots = [m.current_snapshot for m in members if m.current_snapshot]
    totals: dict[str, int] = {}
    for profile in PROFILES:
        figures = [s.figure(encoding, profile) for s in snapshots]
        if snapshots and all(f is not None for f in figures):
            totals[profile] = sum(f for f in figures if f is not None)
    return totals


def stacks_with_totals(
    team: Team, encoding: str | None = None, *, with_loading: bool = False
) -> list[StackRow]:
    """Stacks with their members' current fixed tax summed (members prefetched, two queries), and
    with `with_loading` each stack's loading-mode figures under the team's client."""
    members_qs = McpServer.objects.select_related("current_snapshot").defer(
        "current_snapshot__instructions", "current_snapshot__findings"
    )
    stacks = Stack.objects.filter(team=team).prefetch_related(
        Prefetch("servers", queryset=members_qs.order_by("name")), "always_load"
    )
    rows = []
    for stack in stacks:
        members = list(stack.servers.all())
        total = sum(m.current_snapshot.fixed_tax_tokens for m in members if m.current_snapshot)
        by_profile = _profile_totals(members, encoding or team.main_encoding)
        row = StackRow(stack, members, total, [m for m in members if m.current_snapshot is None], by_profile)
        if with_loading:
            row.loading = loading.for_stack(stack, team, encoding or team.main_encoding)
        rows.append(row)
    return rows


# --- Server page ----------------------------------------------------------------------------------


HISTORY_FIELDS = (
    "pk",
    "first_seen",
    "last_seen",
    "server_version",
    "sha256",
    "fixed_tax_tokens",
    "tool_count",
    "instructions_tokens",
    "is_release",
    "budget_checks",
    "previous_id",
)


@dataclass
class HistoryPoint:
    pk: int
    first_seen: datetime
    last_seen: datetime
    version: str
    sha256: str
    tokens: int
    tool_count: int
    instructions_tokens: int
    is_release: bool
    budget_checks: dict[str, Any]
    previous_id: int | None
    delta: int | None = None
    findings_count: int | None = None

    @property
    def label(self) -> str:
        return self.version or self.sha256[:8]


def snapshot_history(server: McpServer) -> list[HistoryPoint]:
    """All of a server's snapshots, oldest first, with the fields pages need (one query)."""
    rows = Snapshot.objects.filter(server=server).order_by("first_seen", "pk").values_list(*HISTORY_FIELDS)
    points: list[HistoryPoint] = []
    for pk, first, last, version, sha, tax, count, instr, release, checks, prev in rows:
        point = HistoryPoint(pk, first, last, version, sha, tax, count, instr, release, checks or {}, prev)
        if points:
            point.delta = tax - points[-1].tokens
        points.append(point)
    return points


def attach_findings_counts(points: list[HistoryPoint]) -> None:
    """Findings per snapshot for the rows a page shows (findings JSON is too heavy to load for all)."""
    by_pk = {p.pk: p for p in points}
    for pk, found in Snapshot.objects.filter(pk__in=list(by_pk)).values_list("pk", "findings"):
        by_pk[pk].findings_count = len(found or [])


def previous_release_of(history: list[HistoryPoint], pk: int) -> HistoryPoint | None:
    """The last snapshot of the release before the one `pk` belongs to (what "since release" compares)."""
    index = next((i for i, p in enumerate(history) if p.pk == pk), None)
    if index is None:
        return None
    # Walk back to the snapshot that started this release, then one more.
    while index > 0 and not history[index].is_release:
        index -= 1
    return history[index - 1] if index > 0 else None


@dataclass
class ToolRow:
    name: str
    position: int
    tokens: int
    description_tokens: int
    schema_tokens: int
    share: float
    delta: int | None  # None: the tool is new since the previous release
    previous_tokens: int | None

    @property
    def other_tokens(self) -> int:
        # Name, keys and punctuation around the description and the schema.
        return self.tokens - self.description_tokens - self.schema_tokens


TOOL_SORT_KEYS: dict[str, Any] = {
    "position": lambda t: t.position,
    "name": lambda t: t.name.lower(),
    "tokens": lambda t: t.tokens,
    "description": lambda t: t.description_tokens,
    "schema": lambda t: t.schema_tokens,
    "share": lambda t: t.tokens,
    "delta": lambda t: t.delta if t.delta is not None else float("inf"),
}
DEFAULT_TOOL_SORT = "-tokens"


def tool_rows(
    snapshot: Snapshot, compare_to_pk: int | None, sort: str | None = None
) -> tuple[list[ToolRow], list[dict[str, Any]], str]:
    """The snapshot's tools with their change since `compare_to_pk`, plus the tools that went away."""
    wanted = [snapshot.pk] + ([compare_to_pk] if compare_to_pk else [])
    tools = SnapshotTool.objects.filter(snapshot_id__in=wanted).values_list(
        "snapshot_id", "position", "name", "tokens", "description_tokens", "schema_tokens"
    )
    current, before = [], {}
    for snap_id, position, name, tok, desc, schema in tools:
        if snap_id == snapshot.pk:
            current.append((position, name, tok, desc, schema))
        else:
            before[name] = tok
    total = snapshot.fixed_tax_tokens or 1
    rows = []
    for position, name, tok, desc, schema in current:
        prev = before.get(name) if compare_to_pk else None
        delta = (tok - prev) if prev is not None else (None if compare_to_pk else 0)
        rows.append(ToolRow(name, position, tok, desc, schema, 100.0 * tok / total, delta, prev))
    names = {r.name for r in rows}
    removed = [{"name": n, "tokens": t} for n, t in sorted(before.items()) if n not in names]
    sort, key, descending = normalize_sort(sort, TOOL_SORT_KEYS, DEFAULT_TOOL_SORT)
    rows.sort(key=lambda r: r.position)
    rows.sort(key=TOOL_SORT_KEYS[key], reverse=descending)
    return rows, removed, sort


class AlertMark(Protocol):
    """What the server page's chart shows of an alert. Alerts live in dashboard.alerts, which
    depends on this package, so they are reached through the `alerts` reverse relation."""

    level: str
    message: str
    opened_at: datetime
    snapshot_id: int | None


def server_alerts(server: McpServer) -> list[AlertMark]:
    return list(
        server.alerts.only("pk", "level", "message", "opened_at", "state", "measure", "snapshot_id").order_by(
            "opened_at"
        )[:500]
    )


def snapshot_of(server: McpServer, pk: int) -> Snapshot | None:
    return Snapshot.objects.filter(server=server, pk=pk).first()


def snapshots_with_documents(server: McpServer, pks: list[int]) -> dict[int, Snapshot]:
    return {s.pk: s for s in Snapshot.objects.filter(server=server, pk__in=pks).select_related("document")}


def last_poll_run(server: McpServer) -> PollRun | None:
    return server.poll_runs.order_by("-started", "-pk").first()


def poll_runs(server: McpServer) -> QuerySet[PollRun]:
    return (
        PollRun.objects.filter(server=server)
        .select_related("snapshot")
        .only(
            "pk",
            "started",
            "duration_ms",
            "outcome",
            "message",
            "changed",
            "trigger",
            "snapshot__id",
            "snapshot__server_version",
            "snapshot__sha256",
        )
    )
