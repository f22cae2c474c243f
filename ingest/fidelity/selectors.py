"""Read-only figures for the fidelity pages, aggregated from the FidelityDaily rollups.

Every function here reads the rollup table (grouped sums, a constant number of queries whatever
the traffic), never the raw call table; the paginated call list and the single-call drill-down
(in ingest.fidelity.views) are the only pages that touch calls, through indexed lookups.

A *tally* adds up rollup rows: calls, bulk calls, bulk arguments by verdict, the judged and
exact ones (exact-match rate = exact / judged arguments, judged = the verdicts that blame or clear
the agent, i.e. not unverifiable, capture_truncated or still pending), tokens and money, and the
reference adoption over tools that accept both a paste and a reference.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q, Sum

from dashboard.alerts.models import FIDELITY_MEASURES, Alert
from dashboard.servers.models import McpServer, ToolsDocument
from dashboard.teams.models import Team
from ingest.capture.models import Agent
from ingest.fidelity.models import FidelityDaily, SizeBucket
from ingest.fidelity.rollups import BUCKET_ORDER, BY_REFERENCE, JUDGED, NO_BULK, days_ago, exact_rate
from mcptax import verdict_rules as fidelity
from mcptax.bulk import CONTENT_KEYS, REFERENCE_KEYS

# Period choices of the pages, in days (0 = everything kept).
PERIODS = (7, 30, 90, 365, 0)
DEFAULT_PERIOD = 30
PENDING = "pending"
# Display order of verdict columns: precedence, the unjudged ones, then the non-paste rows.
VERDICT_ORDER: tuple[str, ...] = (*fidelity.verdict_counts_order(), PENDING, NO_BULK)
PASTE_VERDICTS = tuple(v for v in VERDICT_ORDER if v not in (BY_REFERENCE, NO_BULK))
VERDICT_LABELS = {
    **{v: v.replace("_", " ") for v in VERDICT_ORDER},
    BY_REFERENCE: "by reference",
    NO_BULK: "no bulk argument",
}
SEVERITY = {**fidelity.SEVERITY, PENDING: "unknown", NO_BULK: "unknown"}
# Badge classes of app.css for each severity.
SEVERITY_CSS = {"ok": "ok", "cosmetic": "warning", "damaged": "error", "unknown": "muted"}


def verdict_css(verdict: str) -> str:
    return SEVERITY_CSS[SEVERITY.get(verdict or PENDING, "unknown")]


BUCKET_LABELS = {b.value: b.label for b in SizeBucket if b.value}
SUMS = (
    "calls",
    "arguments",
    "bytes",
    "pasted_tokens",
    "output_tokens",
    "billed_tokens",
    "reference_tokens",
    "cost_usd",
    "reference_cost_usd",
    "server_errors",
)


def parse_period(raw: str | None) -> int:
    try:
        days = int(raw) if raw not in (None, "") else DEFAULT_PERIOD
    except ValueError:
        return DEFAULT_PERIOD
    return days if days in PERIODS else DEFAULT_PERIOD


def since_for(days: int) -> date | None:
    return days_ago(days) if days else None


def verdict_label(verdict: str) -> str:
    return VERDICT_LABELS.get(verdict, verdict.replace("_", " "))


@dataclass
class Tally:
    """Sums over rollup rows, with the derived rates the pages show."""

    calls: int = 0
    bulk_calls: int = 0
    reference_calls: int = 0
    arguments: int = 0
    judged: int = 0
    exact: int = 0
    damaged: int = 0
    bytes: int = 0
    pasted_tokens: int = 0
    output_tokens: int = 0
    billed_tokens: int = 0
    reference_tokens: int = 0
    cost_usd: Decimal = field(default_factory=Decimal)
    reference_cost_usd: Decimal = field(default_factory=Decimal)
    server_errors: int = 0
    # Calls to tools that accept both a paste and a reference, and the reference ones among them.
    accepting_calls: int = 0
    accepting_reference_calls: int = 0
    by_verdict: Counter = field(default_factory=Counter)

    def add(self, row: dict[str, Any], *, accepts_both: bool = False) -> None:
        verdict = row["verdict"] or PENDING
        calls = row["calls"] or 0
        arguments = row["arguments"] or 0
        self.calls += calls
        self.arguments += arguments
        if verdict == BY_REFERENCE:
            self.reference_calls += calls
            self.by_verdict[verdict] += calls
        elif verdict == NO_BULK:
            self.by_verdict[verdict] += calls
        else:
            self.bulk_calls += calls
            self.by_verdict[verdict] += arguments
        if verdict in JUDGED:
            self.judged += arguments
        if verdict == fidelity.EXACT:
            self.exact += arguments
        if verdict in (fidelity.TRUNCATED, fidelity.ELEMENTS_DROPPED, fidelity.MUTATED, fidelity.MISMATCH):
            self.damaged += arguments
        if accepts_both:
            self.accepting_calls += calls
            if verdict == BY_REFERENCE:
                self.accepting_reference_calls += calls
        for name in ("bytes", "pasted_tokens", "output_tokens", "billed_tokens", "reference_tokens"):
            setattr(self, name, getattr(self, name) + (row[name] or 0))
        self.server_errors += row["server_errors"] or 0
        self.cost_usd += Decimal(row["cost_usd"] or 0)
        self.reference_cost_usd += Decimal(row["reference_cost_usd"] or 0)

    @property
    def exact_rate(self) -> float | None:
        return exact_rate(self.exact, self.judged)

    @property
    def adoption(self) -> float | None:
        if not self.accepting_calls:
            return None
        return round(100.0 * self.accepting_reference_calls / self.accepting_calls, 2)

    @property
    def saving_usd(self) -> Decimal:
        return self.cost_usd - self.reference_cost_usd

    def verdict_cells(self, verdicts: Iterable[str] = VERDICT_ORDER) -> list[dict[str, Any]]:
        """One cell per verdict for a table row: count, share of bulk arguments, severity."""
        pastes = sum(n for v, n in self.by_verdict.items() if v not in (BY_REFERENCE, NO_BULK))
        cells = []
        for verdict in verdicts:
            count = self.by_verdict.get(verdict, 0)
            base = pastes if verdict not in (BY_REFERENCE, NO_BULK) else self.calls
            cells.append(
                {
                    "verdict": verdict,
                    "label": verdict_label(verdict),
                    "count": count,
                    "share": round(100.0 * count / base, 1) if base and count else None,
                    "severity": SEVERITY.get(verdict, "unknown"),
                    "css": verdict_css(verdict),
                }
            )
        return cells


def _grouped(team: Team, since: date | None, group: list[str], agent_ids: list[int] | None = None):
    rows = FidelityDaily.objects.filter(team=team)
    if since is not None:
        rows = rows.filter(day__gte=since)
    if agent_ids is not None:
        rows = rows.filter(agent_id__in=agent_ids)
    return rows.values(*group).annotate(**{name: Sum(name) for name in SUMS}).order_by()


# -- tools that accept both a paste and a reference --------------------------------------------------


# Tools/list documents are content-addressed: the accepting tools of one sha never change.
_ACCEPTING_BY_SHA: dict[str, frozenset[str]] = {}


def _accepting_tools(raw_json: str) -> frozenset[str]:
    """Tools of a tools/list whose input schema has a content-like and a reference property."""
    try:
        tools = json.loads(raw_json)
    except ValueError:
        return frozenset()
    names = set()
    for tool in tools if isinstance(tools, list) else []:
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict):
            continue
        keys = {str(k).lower() for k in props}
        if keys & CONTENT_KEYS and keys & set(REFERENCE_KEYS):
            names.add(str(tool.get("name", "")))
    return frozenset(names)


def schema_accepting_tools(team: Team) -> set[tuple[str, str]]:
    """``(server label, tool)`` pairs whose current snapshot says they take a paste or a reference.

    One query (two the first time a tools/list is seen); the server name is the label the logging
    proxy writes.
    """
    servers = list(
        McpServer.objects.filter(team=team, current_snapshot__isnull=False)
        .values_list("name", "current_snapshot__document__sha256")
        .order_by()
    )
    unknown = {sha for _, sha in servers if sha not in _ACCEPTING_BY_SHA}
    if unknown:
        for sha, raw_json in ToolsDocument.objects.filter(sha256__in=unknown).values_list(
            "sha256", "raw_json"
        ):
            if len(_ACCEPTING_BY_SHA) > 4096:
                _ACCEPTING_BY_SHA.clear()
            _ACCEPTING_BY_SHA[sha] = _accepting_tools(raw_json)
    pairs: set[tuple[str, str]] = set()
    for name, sha in servers:
        pairs.update((name, tool) for tool in _ACCEPTING_BY_SHA.get(sha, ()))
    return pairs


def observed_accepting_tools(rows: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """Tools that received both reference calls and pastes in the rows given (by anyone)."""
    kinds: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        if not row["calls"]:
            continue
        if row["verdict"] == BY_REFERENCE:
            kinds[(row["server_label"], row["tool"])].add("reference")
        elif row["verdict"] != NO_BULK:
            kinds[(row["server_label"], row["tool"])].add("paste")
    return {tool for tool, seen in kinds.items() if len(seen) == 2}


def accepting_tools(team: Team, rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return schema_accepting_tools(team) | observed_accepting_tools(rows)


# -- agents list ---------------------------------------------------------------------------------------


@dataclass
class AgentRow:
    agent: Agent
    tally: Tally


AGENT_SORTS: dict[str, Any] = {
    "agent": lambda r: (r.agent.family, r.agent.name.lower()),
    "version": lambda r: r.agent.version,
    "rate": lambda r: r.tally.exact_rate if r.tally.exact_rate is not None else -1.0,
    "bulk": lambda r: r.tally.bulk_calls,
    "adoption": lambda r: r.tally.adoption if r.tally.adoption is not None else -1.0,
    "tokens": lambda r: r.tally.billed_tokens,
    "cost": lambda r: r.tally.cost_usd,
    "last_seen": lambda r: r.agent.last_seen.timestamp(),
}
AGENT_COLUMNS = [
    ("agent", "Agent", False),
    ("version", "Version", False),
    ("rate", "Exact match", True),
    ("bulk", "Bulk calls", True),
    ("adoption", "Reference adoption", True),
    ("tokens", "Tokens pasted", True),
    ("cost", "Spent pasting", True),
    ("last_seen", "Last seen", True),
]
DEFAULT_AGENT_SORT = "-last_seen"


def agent_rows(team: Team, *, since: date | None) -> tuple[list[AgentRow], Tally]:
    """Every agent of the team with its tally over the period, and the team's total (3 queries)."""
    rows = list(_grouped(team, since, ["agent_id", "server_label", "tool", "verdict"]))
    accepting = accepting_tools(team, rows)
    tallies: dict[int | None, Tally] = defaultdict(Tally)
    total = Tally()
    for row in rows:
        both = (row["server_label"], row["tool"]) in accepting
        tallies[row["agent_id"]].add(row, accepts_both=both)
        total.add(row, accepts_both=both)
    agents = Agent.objects.filter(team=team).order_by("family", "name", "version")
    return [AgentRow(agent, tallies.get(agent.pk, Tally())) for agent in agents], total


# -- one agent family ------------------------------------------------------------------------------------


@dataclass
class FamilyReport:
    family: str
    agents: list[Agent]
    total: Tally
    per_agent: dict[int, Tally]
    by_tool: list[tuple[str, str, Tally]]
    by_size: list[tuple[str, str, Tally]]
    accepting: list[tuple[str, str, Tally]]
    verdicts_seen: list[str]


def family_report(team: Team, family: str, *, since: date | None) -> FamilyReport | None:
    """Everything the agent page shows except the chart and the call list (3 queries), or None
    when the team has no agent of that family."""
    agents = list(Agent.objects.filter(team=team, family=family).order_by("first_seen", "pk"))
    if not agents:
        return None
    ids = [a.pk for a in agents]
    rows = list(_grouped(team, since, ["agent_id", "server_label", "tool", "verdict", "size_bucket"], ids))
    # Adoption counts tools that accept both in the team's own schema or traffic, not only this
    # family's: an agent that always pastes must not escape the measure by never trying.
    team_rows = list(
        _grouped(team, since, ["server_label", "tool", "verdict"]).filter(verdict__in=[BY_REFERENCE, *JUDGED])
    )
    accepting = schema_accepting_tools(team) | observed_accepting_tools(team_rows)
    total = Tally()
    per_agent: dict[int, Tally] = defaultdict(Tally)
    tools: dict[tuple[str, str], Tally] = defaultdict(Tally)
    sizes: dict[str, Tally] = defaultdict(Tally)
    for row in rows:
        key = (row["server_label"], row["tool"])
        both = key in accepting
        total.add(row, accepts_both=both)
        per_agent[row["agent_id"]].add(row, accepts_both=both)
        tools[key].add(row, accepts_both=both)
        if row["size_bucket"]:
            sizes[row["size_bucket"]].add(row)
    by_tool = sorted(
        ((s, t, tally) for (s, t), tally in tools.items()), key=lambda x: (-x[2].calls, x[0], x[1])
    )
    by_size = [(b, BUCKET_LABELS[b], sizes.get(b, Tally())) for b in BUCKET_ORDER]
    shown = [v for v in VERDICT_ORDER if total.by_verdict.get(v)]
    return FamilyReport(
        family=family,
        agents=agents,
        total=total,
        per_agent=dict(per_agent),
        by_tool=by_tool,
        by_size=by_size,
        accepting=[(s, t, tally) for s, t, tally in by_tool if (s, t) in accepting],
        verdicts_seen=shown or [fidelity.EXACT],
    )


def exact_rate_series(team: Team, agent_ids: list[int], *, since: date | None) -> dict[int, list[tuple]]:
    """Per agent id: ``[(day, exact, judged), ...]`` ascending (one query)."""
    rows = FidelityDaily.objects.filter(team=team, agent_id__in=agent_ids, verdict__in=JUDGED)
    if since is not None:
        rows = rows.filter(day__gte=since)
    rows = (
        rows.values("agent_id", "day")
        .annotate(judged=Sum("arguments"), exact=Sum("arguments", filter=Q(verdict=fidelity.EXACT)))
        .order_by("agent_id", "day")
    )
    series: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        series[row["agent_id"]].append((row["day"], row["exact"] or 0, row["judged"] or 0))
    return dict(series)


CHART_COLORS = ["#2f5fd0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#744210", "#4a5568"]


def agent_label(agent: Agent) -> str:
    label = agent.version or "(no version)"
    if agent.name and agent.name != agent.family:
        label = f"{agent.name} {label}"
    return label


def _day_axis(days: list) -> dict[str, Any]:
    """A date axis with day ticks; with under a week of data, pad it to a week so Plotly does not
    zoom into milliseconds around a single day."""
    axis: dict[str, Any] = {
        "type": "date",
        "title": {"text": "day (UTC)"},
        "gridcolor": "#e3e6eb",
        "tickformat": "%b %d",
    }
    if days:
        first, last = min(days), max(days)
        if (last - first).days < 7:
            pad = timedelta(days=(7 - (last - first).days) / 2 + 0.5)
            axis["range"] = [(first - pad).isoformat(), (last + pad).isoformat()]
            axis["dtick"] = 86_400_000
    return axis


def exact_rate_figure(agents: list[Agent], series: dict[int, list[tuple]]) -> dict[str, Any]:
    """Plotly figure: one line per agent version, daily exact-match rate (%)."""
    data = []
    for index, agent in enumerate(agents):
        points = series.get(agent.pk, [])
        if not points:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if len(points) <= 60 else "lines",
                "name": agent_label(agent),
                "x": [day.isoformat() for day, _, _ in points],
                "y": [exact_rate(e, j) for _, e, j in points],
                "customdata": [[e, j] for _, e, j in points],
                "line": {"color": CHART_COLORS[index % len(CHART_COLORS)], "width": 2},
                "marker": {"size": 6},
                "hovertemplate": "%{y:.1f}% exact (%{customdata[0]:,} of %{customdata[1]:,})<extra>%{fullData.name}</extra>",
            }
        )
    layout = {
        "height": 320,
        "margin": {"l": 56, "r": 20, "t": 30, "b": 50},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1d2330"},
        "hovermode": "closest",
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.14},
        "xaxis": _day_axis([day for points in series.values() for day, _, _ in points]),
        "yaxis": {
            "title": {"text": "exact-match rate (%)"},
            "range": [0, 105],
            "gridcolor": "#e3e6eb",
            "ticksuffix": "%",
        },
    }
    return {"data": data, "layout": layout}


# -- team overview panel -----------------------------------------------------------------------------------


@dataclass
class OverviewPanel:
    rows: list[AgentRow]
    total: Tally
    alerts: list[Alert]
    days: int


def overview_panel(team: Team, *, days: int = DEFAULT_PERIOD, limit: int = 8) -> OverviewPanel:
    """The fidelity panel of the team overview: busiest agents with their exact-match rate, and the
    open fidelity alerts (3 queries: rollups grouped by agent and verdict, agents, alerts)."""
    since = since_for(days)
    tallies: dict[int | None, Tally] = defaultdict(Tally)
    total = Tally()
    for row in _grouped(team, since, ["agent_id", "verdict"]):
        row = {**row, "server_label": "", "tool": ""}
        tallies[row["agent_id"]].add(row)
        total.add(row)
    ids = [pk for pk in tallies if pk is not None]
    agents = Agent.objects.filter(team=team, pk__in=ids) if ids else Agent.objects.none()
    rows = [AgentRow(a, tallies[a.pk]) for a in agents]
    rows.sort(key=lambda r: (-r.tally.bulk_calls, r.agent.family, r.agent.version))
    alerts = list(
        Alert.objects.open()
        .filter(team=team, measure__in=[str(m) for m in FIDELITY_MEASURES])
        .order_by("-opened_at")[:10]
    )
    return OverviewPanel(rows=rows[:limit], total=total, alerts=alerts, days=days)


# -- API ---------------------------------------------------------------------------------------------------


def api_summary(team: Team, *, days: int) -> list[dict[str, Any]]:
    """Per agent, the figures of the agents list (for ``GET /api/v1/fidelity``)."""
    rows, _ = agent_rows(team, since=since_for(days))
    out = []
    for row in rows:
        t = row.tally
        out.append(
            {
                "agent_id": row.agent.pk,
                "family": row.agent.family,
                "name": row.agent.name,
                "version": row.agent.version,
                "title": row.agent.title,
                "last_seen": row.agent.last_seen,
                "calls": t.calls,
                "bulk_calls": t.bulk_calls,
                "reference_calls": t.reference_calls,
                "bulk_arguments": t.arguments,
                "judged_arguments": t.judged,
                "exact_arguments": t.exact,
                "exact_rate": t.exact_rate,
                "reference_adoption": t.adoption,
                "verdicts": {v: n for v, n in t.by_verdict.items() if n},
                "pasted_tokens": t.pasted_tokens,
                "billed_tokens": t.billed_tokens,
                "reference_tokens": t.reference_tokens,
                "cost_usd": float(t.cost_usd),
                "reference_cost_usd": float(t.reference_cost_usd),
            }
        )
    return out
