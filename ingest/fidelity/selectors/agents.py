"""The agents list, one agent family's figures and chart series, the team overview's fidelity panel
and the API summary: grouped sums over the FidelityDaily rollups, a constant number of queries
whatever the traffic."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db.models import Q, Sum

from dashboard.alerts.models import FIDELITY_MEASURES, Alert
from dashboard.teams.models import Team
from ingest.capture.models import Agent
from ingest.fidelity.models import BY_REFERENCE, JUDGED, FidelityDaily
from ingest.fidelity.rollups import BUCKET_ORDER
from ingest.fidelity.selectors.common import (
    BUCKET_LABELS,
    DEFAULT_PERIOD,
    VERDICT_ORDER,
    Tally,
    accepting_tools,
    grouped,
    observed_accepting_tools,
    schema_accepting_tools,
    since_for,
)
from mcptax import verdict_rules

# -- agents list ---------------------------------------------------------------------------------------


@dataclass
class AgentRow:
    agent: Agent
    tally: Tally


# Each takes an AgentRow or an AgentGroup (both have .agent and .tally).
AGENT_SORTS: dict[str, Callable[[Any], Any]] = {
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
    """Every agent (each version) of the team with its tally over the period, and the team's total
    (3 queries)."""
    rows, total, _ = _tallies(team, since)
    agents = Agent.objects.filter(team=team).order_by("family", "name", "version")
    return [AgentRow(agent, rows.get(agent.pk, Tally())) for agent in agents], total


def _tallies(
    team: Team, since: date | None
) -> tuple[dict[int | None, Tally], Tally, dict[tuple[str, str], Tally]]:
    """(tally per agent id, the team's total, tally per (family, name) over all its versions)."""
    rows = list(grouped(team, since, ["agent_id", "server_label", "tool", "verdict"]))
    accepting = accepting_tools(team, rows)
    names = dict(
        (pk, (family, name))
        for pk, family, name in Agent.objects.filter(team=team).values_list("pk", "family", "name")
    )
    tallies: dict[int | None, Tally] = defaultdict(Tally)
    by_name: dict[tuple[str, str], Tally] = defaultdict(Tally)
    total = Tally()
    for row in rows:
        both = (row["server_label"], row["tool"]) in accepting
        tallies[row["agent_id"]].add(row, accepts_both=both)
        if row["agent_id"] in names:
            by_name[names[row["agent_id"]]].add(row, accepts_both=both)
        total.add(row, accepts_both=both)
    return tallies, total, by_name


@dataclass
class AgentGroup:
    """One client (family and name) with every version seen: `agent` is the latest version (its
    name, title and last sighting stand for the group), `tally` the sum over the versions."""

    agent: Agent
    tally: Tally
    versions: list[AgentRow]


def agent_groups(
    team: Team, *, since: date | None, sort_key: Callable[[Any], Any], descending: bool
) -> tuple[list[AgentGroup], Tally]:
    """The agents list: one group per client name, groups and the versions inside each sorted by
    `sort_key` (3 queries)."""
    tallies, total, by_name = _tallies(team, since)
    members: dict[tuple[str, str], list[AgentRow]] = defaultdict(list)
    for agent in Agent.objects.filter(team=team).order_by("family", "name", "-last_seen", "-pk"):
        members[(agent.family, agent.name)].append(AgentRow(agent, tallies.get(agent.pk, Tally())))
    groups = []
    for key, versions in members.items():
        versions.sort(key=lambda r: r.agent.version)
        versions.sort(key=sort_key, reverse=descending)
        latest = max(versions, key=lambda r: (r.agent.last_seen, r.agent.pk)).agent
        groups.append(AgentGroup(latest, by_name.get(key, Tally()), versions))
    groups.sort(key=lambda g: (g.agent.family, g.agent.name.lower()))
    groups.sort(key=sort_key, reverse=descending)
    return groups, total


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
    rows = list(grouped(team, since, ["agent_id", "server_label", "tool", "verdict", "size_bucket"], ids))
    # Adoption counts tools that accept both in the team's own schema or traffic, not only this
    # family's: an agent that always pastes must not escape the measure by never trying.
    team_rows = list(
        grouped(team, since, ["server_label", "tool", "verdict"], sums=["calls"]).filter(
            verdict__in=[BY_REFERENCE, *JUDGED]
        )
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
        verdicts_seen=shown or [verdict_rules.EXACT],
    )


DayRate = tuple[date, int, int]  # day, exact arguments, judged arguments


def exact_rate_series(
    team: Team, *, agent_ids: Sequence[int] | None = None, since: date | None = None
) -> dict[int | None, list[DayRate]]:
    """Per agent id: ``[(day, exact, judged), ...]`` by ascending day (one query)."""
    rows = FidelityDaily.objects.filter(team=team, verdict__in=JUDGED)
    if agent_ids is not None:
        rows = rows.filter(agent_id__in=list(agent_ids))
    if since is not None:
        rows = rows.filter(day__gte=since)
    series: dict[int | None, list[DayRate]] = defaultdict(list)
    for row in (
        rows.values("agent_id", "day")
        .annotate(judged=Sum("arguments"), exact=Sum("arguments", filter=Q(verdict=verdict_rules.EXACT)))
        .order_by("agent_id", "day")
    ):
        series[row["agent_id"]].append((row["day"], row["exact"] or 0, row["judged"] or 0))
    return dict(series)


def agent_label(agent: Agent) -> str:
    label = agent.version or "(no version)"
    if agent.name and agent.name != agent.family:
        label = f"{agent.name} {label}"
    return label


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
    for row in grouped(team, since, ["agent_id", "verdict"]):
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
