"""One tool's fidelity, for the tool page: its bulk arguments' verdicts per day and per agent, from
the FidelityDaily rollups (one grouped query). Calls are matched to a server's tool by the label
the capture gave the server (the logging proxy writes the registered server's name) and the tool
name, as the rollups and the damaged-arrivals alert match them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from dashboard.teams.models import Team
from ingest.capture.models import Agent
from ingest.fidelity.models import DAMAGED
from ingest.fidelity.selectors.agents import DayRate, agent_label
from ingest.fidelity.selectors.common import VERDICT_ORDER, Tally, grouped


def damaged_arrivals(tally: Tally) -> int:
    """Truncated or dropped-element arrivals: what the damaged-arrivals alert counts (a mutated or
    mismatched paste is damaged too, but is not an arrival cut short)."""
    return sum(tally.by_verdict.get(v, 0) for v in DAMAGED)


@dataclass
class ToolDay:
    day: date
    tally: Tally
    verdicts: list[str] = field(default_factory=list)  # the columns of the per-day table

    @property
    def damaged_arrivals(self) -> int:
        return damaged_arrivals(self.tally)

    @property
    def verdict_counts(self) -> list[int]:
        """The day's count under each verdict the period saw, in the table's column order."""
        return [self.tally.by_verdict.get(v, 0) for v in self.verdicts]


@dataclass
class ToolAgent:
    agent: Agent
    label: str
    tally: Tally

    @property
    def damaged_arrivals(self) -> int:
        return damaged_arrivals(self.tally)


@dataclass
class ToolReport:
    total: Tally
    days: list[ToolDay]  # oldest first
    agents: list[ToolAgent]  # most calls first
    verdicts_seen: list[str] = field(default_factory=list)

    @property
    def damaged_arrivals(self) -> int:
        return sum(d.damaged_arrivals for d in self.days)

    @property
    def rate_points(self) -> list[DayRate]:
        return [(d.day, d.tally.exact, d.tally.judged) for d in self.days if d.tally.judged]

    @property
    def days_newest_first(self) -> list[ToolDay]:
        return list(reversed(self.days))


AGENT_SUMS = ("calls", "arguments", "cost_usd")
# What the page shows of the whole period and of each day: calls, verdicts (from calls and
# arguments), tokens and money spent pasting, the estimated ones, and the cost by reference.
DAY_SUMS = ("calls", "arguments", "billed_tokens", "estimated_calls", "cost_usd", "reference_cost_usd")


def tool_report(team: Team, server_label: str, tool: str, *, since: date | None) -> ToolReport:
    """The tool's tally over the period, per day and per agent version (three queries).

    Summed in SQL per (day, verdict) and per (agent, verdict), not per (day, agent, verdict): at
    20 agents over 90 days that is a twentieth of the rows to read and add up in Python."""
    rows = grouped(team, since, ["day", "verdict"], sums=DAY_SUMS).filter(
        server_label=server_label, tool=tool
    )
    total = Tally()
    per_day: dict[date, Tally] = defaultdict(Tally)
    for row in rows:
        total.add(row)
        per_day[row["day"]].add(row)
    per_agent: dict[int | None, Tally] = defaultdict(Tally)
    # The agents table shows calls, exact rate, damaged arrivals and cost: only those are summed.
    per_agent_rows = grouped(team, since, ["agent_id", "verdict"], sums=AGENT_SUMS)
    for row in per_agent_rows.filter(server_label=server_label, tool=tool):
        per_agent[row["agent_id"]].add(row)
    ids = [pk for pk in per_agent if pk is not None]
    agents = [
        ToolAgent(agent, agent_label(agent), per_agent[agent.pk])
        for agent in Agent.objects.filter(team=team, pk__in=ids)
    ]
    agents.sort(key=lambda a: (-a.tally.calls, a.agent.family, a.agent.name, a.agent.version))
    verdicts_seen = [v for v in VERDICT_ORDER if total.by_verdict.get(v)]
    return ToolReport(
        total=total,
        days=[ToolDay(day, per_day[day], verdicts_seen) for day in sorted(per_day)],
        agents=agents,
        verdicts_seen=verdicts_seen,
    )
