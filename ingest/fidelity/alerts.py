"""Fidelity alerts, evaluated after each ingest batch through the alerts' budgets and channels.

Three measures (``dashboard.alerts.models.Measure``), each a team budget (``Budget`` with no
server and no stack); a damaged-arrivals budget may also be set on a server, whose own budget wins
for the tools of that server:

- ``agent_exact_rate`` (a minimum, %): an agent's exact copies among its last N judged bulk
  arguments (N = the budget's ``window``; unverifiable and capture-truncated ones are not
  judgements and are skipped). Rule key ``agent:<id>:agent_exact_rate``.
- ``damaged_arrivals``: truncated or elements_dropped arrivals among a tool's last N bulk
  arguments; a limit of 0 alerts on any. Rule key ``tool:<server label>/<tool>:damaged_arrivals``.
- ``paste_cost_per_day`` (USD): the team's paste cost on a day, from the rollups. Rule key
  ``team:<id>:paste_cost_per_day:<day>``, one alert per day over budget.

Only agents, tools and days touched by the batch are evaluated, each by one indexed query, so the
cost of alerting does not grow with the size of the call table. Opening, escalating and resolving
go through ``dashboard.alerts.budgets.open_or_update_alert`` / ``resolve_alert``, which notify channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from dashboard.alerts.budgets import check_budget, open_or_update_alert, resolve_alert
from dashboard.alerts.models import FIDELITY_MEASURES, Budget, Measure
from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.models import Agent, BulkArgument, ToolCall
from ingest.fidelity.models import DAMAGED, JUDGED
from ingest.fidelity.rollups import call_day
from ingest.fidelity.selectors.totals import cost_by_day
from mcptax import verdict_rules


@dataclass
class Outcome:
    rule_key: str
    value: float
    breached: bool
    change: str  # opened | escalated | reopened | updated | resolved | ""


# {scope: {level: budget}} of one measure; scope "" = team default, else a server id.
BudgetsByScope = dict[str, dict[str, Budget]]


def _team_budgets(team: Team) -> dict[str, BudgetsByScope]:
    """``{measure: {scope: {level: budget}}}``; scope "" = team default, else a server id."""
    budgets: dict[str, dict[str, dict[str, Budget]]] = {}
    for budget in Budget.objects.filter(
        team=team, enabled=True, measure__in=FIDELITY_MEASURES, stack__isnull=True
    ):
        scope = str(budget.server_id or "")
        budgets.setdefault(budget.measure, {}).setdefault(scope, {})[budget.level] = budget
    return budgets


def _levels(budgets: dict[str, dict[str, Budget]], server: McpServer | None) -> dict[str, Budget]:
    merged = dict(budgets.get("", {}))
    if server is not None:
        merged.update(budgets.get(str(server.pk), {}))
    return merged


def _settle(
    team: Team,
    rule_key: str,
    measure: str,
    value: float,
    by_level: dict[str, Budget],
    subject: str,
    message: str,
    server: McpServer | None = None,
) -> Outcome | None:
    result = check_budget(measure, value, by_level)
    if result is None:
        return None
    if result.breached:
        change = open_or_update_alert(
            team,
            rule_key,
            measure,
            result.level,
            value,
            result.limit,
            message.format(limit=result.limit, level=result.level),
            subject,
            server=server,
            budget=result.budget,
        )
        return Outcome(rule_key, value, True, change.change)
    resolved = resolve_alert(team, rule_key, value=value)
    return Outcome(rule_key, value, False, "resolved" if resolved else "")


def agent_exact_rate(team: Team, agent: Agent, window: int) -> tuple[float | None, int]:
    """(exact %, judged count) over the agent's last ``window`` judged bulk arguments."""
    verdicts = list(
        BulkArgument.objects.filter(
            team=team, call__agent=agent, call__counts_in_rollups=True, verdict__in=JUDGED
        )
        .order_by("-call__request_ts", "-call_id")
        .values_list("verdict", flat=True)[:window]
    )
    if not verdicts:
        return None, 0
    return round(100.0 * verdicts.count(verdict_rules.EXACT) / len(verdicts), 2), len(verdicts)


def damaged_arrivals(team: Team, server_label: str, tool: str, window: int) -> int:
    """Truncated or dropped-element arrivals among the tool's last ``window`` bulk arguments."""
    recent = list(
        BulkArgument.objects.filter(
            team=team, call__server_label=server_label, call__tool=tool, call__counts_in_rollups=True
        )
        .exclude(verdict="")
        .order_by("-call__request_ts", "-call_id")
        .values_list("verdict", flat=True)[:window]
    )
    return sum(1 for verdict in recent if verdict in DAMAGED)


def evaluate_after_ingest(team: Team, call_ids: Sequence[int]) -> list[Outcome]:
    """Evaluate the fidelity budgets against what this batch touched (see the module docstring)."""
    budgets = _team_budgets(team)
    if not budgets or not call_ids:
        return []
    calls = list(
        ToolCall.objects.filter(pk__in=list(call_ids), team=team, counts_in_rollups=True).only(
            "agent_id", "server_label", "tool", "request_ts", "created", "bulk_count"
        )
    )
    outcomes: list[Outcome | None] = []
    if Measure.AGENT_EXACT_RATE in budgets:
        outcomes += _agent_exact_rates(team, budgets[Measure.AGENT_EXACT_RATE], calls)
    if Measure.DAMAGED_ARRIVALS in budgets:
        outcomes += _damaged_arrivals(team, budgets[Measure.DAMAGED_ARRIVALS], calls)
    if Measure.PASTE_COST_PER_DAY in budgets:
        outcomes += _paste_costs(team, budgets[Measure.PASTE_COST_PER_DAY], calls)
    return [outcome for outcome in outcomes if outcome]


def _agent_exact_rates(team: Team, budgets: BudgetsByScope, calls: list[ToolCall]) -> list[Outcome | None]:
    by_level = _levels(budgets, None)
    window = max(t.window for t in by_level.values())
    agent_ids = {c.agent_id for c in calls if c.agent_id and c.bulk_count}
    outcomes = []
    for agent in Agent.objects.filter(pk__in=agent_ids):
        rate, judged = agent_exact_rate(team, agent, window)
        if rate is None:
            continue
        subject = f"{agent.family} {agent.version}".strip()
        message = (
            f"{subject}: {rate:.1f}% of its last {judged} judged bulk arguments arrived exact, "
            "below the {level} limit of {limit:g}%."
        )
        key = f"agent:{agent.pk}:agent_exact_rate"
        outcomes.append(_settle(team, key, Measure.AGENT_EXACT_RATE, rate, by_level, subject, message))
    return outcomes


def _damaged_arrivals(team: Team, budgets: BudgetsByScope, calls: list[ToolCall]) -> list[Outcome | None]:
    tools = {(c.server_label, c.tool) for c in calls if c.bulk_count}
    labels = {label for label, _ in tools}
    servers = {s.name: s for s in McpServer.objects.filter(team=team, name__in=labels)}
    outcomes = []
    for label, tool in sorted(tools):
        server = servers.get(label)
        by_level = _levels(budgets, server)
        if not by_level:
            continue
        window = max(t.window for t in by_level.values())
        count = damaged_arrivals(team, label, tool, window)
        subject = f"{label}/{tool}" if label else tool
        message = (
            f"{subject}: {count} truncated or dropped-element arrival(s) among its last {window} bulk "
            "arguments, over the {level} limit of {limit:g}."
        )
        key = f"tool:{label}/{tool}:damaged_arrivals"
        outcomes.append(
            _settle(team, key, Measure.DAMAGED_ARRIVALS, count, by_level, subject, message, server=server)
        )
    return outcomes


def _paste_costs(team: Team, budgets: BudgetsByScope, calls: list[ToolCall]) -> list[Outcome | None]:
    by_level = _levels(budgets, None)
    days: set[date] = {call_day(c) for c in calls}
    outcomes = []
    for day, cost in sorted(cost_by_day(team, days).items()):
        value = float(cost)
        message = f"{team.name}: paste cost on {day.isoformat()} is ${value:,.2f}, over the {{level}} budget of ${{limit:,.2f}}."
        key = f"team:{team.pk}:paste_cost_per_day:{day.isoformat()}"
        subject = f"{team.name} paste cost {day.isoformat()}"
        outcomes.append(_settle(team, key, Measure.PASTE_COST_PER_DAY, value, by_level, subject, message))
    return outcomes
