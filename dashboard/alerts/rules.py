"""Budget checks and the alert life cycle, shared by every evaluator: the snapshot and stack
evaluation (dashboard.alerts.budgets), the stack loading rules (dashboard.alerts.loading_rules), the
CI gate and the fidelity and discovery alerts.

- `open_or_update_alert(team, rule_key, measure, level, value, limit, message, subject_label,
  server=None, budget=None, snapshot=None, stack=None)` opens the rule's alert, or updates the
  open one. It creates the notification event when the alert is new, escalates from warning to
  error, or wakes from an expired silence; repeated calls with a still-breached rule send nothing.
- `resolve_alert(team, rule_key, snapshot=None, value=None)` resolves the rule's open alert, if
  any, and notifies (unless the alert was silenced).

Both are idempotent and safe to call from concurrent workers: at most one alert per `rule_key` is
open (a database constraint), and the event is created in the same transaction as the change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.alerts.models import (
    MEASURE_UNITS,
    SERVER_MEASURES,
    Alert,
    AlertState,
    Budget,
    Level,
    Measure,
    format_measure,
)
from dashboard.alerts.notify.delivery import create_event
from dashboard.alerts.notify.models import EventKind
from dashboard.origin import current_origin
from dashboard.servers.models import McpServer, Snapshot, Stack
from dashboard.teams.models import Team

LEVEL_RANK: dict[str, int] = {Level.WARNING: 1, Level.ERROR: 2}
# Evaluation order, so limits and alerts read the same way everywhere.
SERVER_MEASURE_ORDER = [
    Measure.FIXED_TAX_TOKENS,
    Measure.RELEASE_GROWTH_PCT,
    Measure.RELEASE_GROWTH_TOKENS,
    Measure.MAX_TOOL_TOKENS,
    Measure.INSTRUCTIONS_TOKENS,
]
UNITS = MEASURE_UNITS
fmt = format_measure


# --- budgets ------------------------------------------------------------------------------------


BudgetsByMeasure = dict[str, dict[str, Budget]]


def _merge(rows: Iterable[Budget], specific: str) -> BudgetsByMeasure:
    """Per (measure, level): the subject's own budget wins over the team default."""
    chosen: BudgetsByMeasure = {}
    for row in sorted(rows, key=lambda t: getattr(t, f"{specific}_id") is not None):
        chosen.setdefault(row.measure, {})[row.level] = row
    return chosen


def server_budgets(server: McpServer) -> BudgetsByMeasure:
    rows = Budget.objects.filter(
        Q(server=server) | Q(server__isnull=True, stack__isnull=True),
        team_id=server.team_id,
        enabled=True,
        measure__in=SERVER_MEASURES,
    )
    return _merge(rows, "server")


def stack_budgets(stack: Stack, measure: str = Measure.STACK_FIXED_TAX_TOKENS) -> dict[str, Budget]:
    rows = Budget.objects.filter(
        Q(stack=stack) | Q(server__isnull=True, stack__isnull=True),
        team_id=stack.team_id,
        enabled=True,
        measure=measure,
    )
    return _merge(rows, "stack").get(measure, {})


@dataclass
class BudgetCheck:
    """One measure judged against its budgets; `limit`/`level` are the ones to show and alert on."""

    measure: str
    value: float
    limit: float
    level: str
    breached: bool
    levels: dict[str, float] = field(default_factory=dict)
    budget: Budget | None = None
    detail: str = ""

    def stored(self) -> dict[str, Any]:
        # The shape Snapshot.budget_checks documents, plus every configured level for the chart's bands.
        return {
            "limit": self.limit,
            "level": self.level,
            "value": self.value,
            "breached": self.breached,
            "levels": dict(sorted(self.levels.items())),
        }


def check_budget(
    measure: str, value: float, by_level: dict[str, Budget], detail: str = ""
) -> BudgetCheck | None:
    """The worst breached level, else the nearest limit (warning before error)."""
    if not by_level:
        return None
    ordered = sorted(by_level.values(), key=lambda t: LEVEL_RANK[t.level])
    breached = [t for t in ordered if t.breached_by(value)]
    shown = breached[-1] if breached else ordered[0]
    return BudgetCheck(
        measure=measure,
        value=value,
        limit=shown.limit,
        level=shown.level,
        breached=bool(breached),
        levels={t.level: t.limit for t in ordered},
        budget=shown,
        detail=detail,
    )


@dataclass
class Figures:
    """What the server rules look at, from a stored snapshot or from a CI candidate alike."""

    fixed_tax_tokens: int
    instructions_tokens: int
    largest_tool: tuple[str, int] | None
    baseline_fixed_tax_tokens: int | None = None
    baseline_label: str = ""


def measure_values(figures: Figures) -> dict[str, tuple[float, str]]:
    """(value, detail) per server measure; growth only when there is a previous release to grow from."""
    values: dict[str, tuple[float, str]] = {
        Measure.FIXED_TAX_TOKENS: (float(figures.fixed_tax_tokens), ""),
        Measure.INSTRUCTIONS_TOKENS: (float(figures.instructions_tokens), ""),
    }
    if figures.largest_tool is not None:
        name, tokens = figures.largest_tool
        values[Measure.MAX_TOOL_TOKENS] = (float(tokens), name)
    base = figures.baseline_fixed_tax_tokens
    if base is not None:
        growth = figures.fixed_tax_tokens - base
        since = f"since {figures.baseline_label}" if figures.baseline_label else ""
        values[Measure.RELEASE_GROWTH_TOKENS] = (float(growth), since)
        if base > 0:
            values[Measure.RELEASE_GROWTH_PCT] = (round(100.0 * growth / base, 2), since)
    return values


def check_budgets(budgets: BudgetsByMeasure, values: dict[str, tuple[float, str]]) -> list[BudgetCheck]:
    results = []
    for measure in SERVER_MEASURE_ORDER:
        if measure in values and measure in budgets:
            value, detail = values[measure]
            result = check_budget(measure, value, budgets[measure], detail)
            if result is not None:
                results.append(result)
    return results


def release_baseline(snapshot: Snapshot) -> Snapshot | None:
    """The last snapshot of the previous release: growth per release is measured from there."""
    earlier = Snapshot.objects.filter(server_id=snapshot.server_id, pk__lt=snapshot.pk).order_by("-pk")
    if snapshot.server_version:
        return earlier.exclude(server_version=snapshot.server_version).first()
    return earlier.first()


def snapshot_figures(snapshot: Snapshot) -> Figures:
    top = snapshot.tools.order_by("-tokens", "position").values_list("name", "tokens").first()
    baseline = release_baseline(snapshot)
    return Figures(
        fixed_tax_tokens=snapshot.fixed_tax_tokens,
        instructions_tokens=snapshot.instructions_tokens,
        largest_tool=(top[0], top[1]) if top else None,
        baseline_fixed_tax_tokens=baseline.fixed_tax_tokens if baseline else None,
        baseline_label=baseline.label if baseline else "",
    )


def server_rule_key(server: McpServer, measure: str) -> str:
    return f"server:{server.pk}:{measure}"


def stack_rule_key(stack: Stack, measure: str = Measure.STACK_FIXED_TAX_TOKENS) -> str:
    return f"stack:{stack.pk}:{measure}"


def describe(result: BudgetCheck, subject: str) -> str:
    label = Measure(result.measure).label
    detail = f" ({result.detail})" if result.detail else ""
    if result.breached:
        return (
            f"{subject}: {label} is {fmt(result.value, result.measure)}{detail}, over the "
            f"{result.level} limit of {fmt(result.limit, result.measure)}."
        )
    return f"{subject}: {label} is {fmt(result.value, result.measure)}{detail}, within {fmt(result.limit, result.measure)}."


# --- alerts -------------------------------------------------------------------------------------


@dataclass
class AlertChange:
    alert: Alert
    change: str  # opened | escalated | reopened | updated


def open_or_update_alert(
    team: Team,
    rule_key: str,
    measure: str,
    level: str,
    value: float,
    limit: float,
    message: str,
    subject_label: str,
    server: McpServer | None = None,
    budget: Budget | None = None,
    snapshot: Snapshot | None = None,
    stack: Stack | None = None,
) -> AlertChange:
    """Open the alert for `rule_key`, or update the open one; notify only on a real change."""
    now = timezone.now()
    with transaction.atomic():
        alert = Alert.objects.select_for_update().open().filter(team=team, rule_key=rule_key).first()
        if alert is None:
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(
                        team=team,
                        rule_key=rule_key,
                        measure=measure,
                        level=level,
                        value=value,
                        limit=limit,
                        message=message,
                        subject_label=subject_label[:300],
                        server=server,
                        stack=stack,
                        budget=budget,
                        snapshot=snapshot,
                        opened_at=now,
                        last_evaluated_at=now,
                        origin=current_origin()[:300],
                    )
            except IntegrityError:
                # Another worker opened it between our read and insert; update theirs instead.
                alert = Alert.objects.select_for_update().open().get(team=team, rule_key=rule_key)
            else:
                create_event(alert, EventKind.OPENED)
                return AlertChange(alert, "opened")

        event = None
        if alert.silence_expired(snapshot, now):
            alert.state = AlertState.ACTIVE
            alert.silenced_until, alert.silenced_until_release, alert.silenced_at_version = None, False, ""
            event = EventKind.REOPENED
        elif LEVEL_RANK[level] > LEVEL_RANK[alert.level] and alert.state != AlertState.SILENCED:
            # An acknowledged warning that became an error needs eyes again.
            alert.state = AlertState.ACTIVE
            event = EventKind.ESCALATED
        alert.level, alert.value, alert.limit, alert.message = level, value, limit, message
        alert.budget = budget
        alert.subject_label = subject_label[:300]
        alert.last_evaluated_at = now
        alert.save()
        if event:
            create_event(alert, event)
        return AlertChange(
            alert, "escalated" if event == EventKind.ESCALATED else "reopened" if event else "updated"
        )


def resolve_alert(
    team: Team,
    rule_key: str,
    snapshot: Snapshot | None = None,
    value: float | None = None,
    by: User | None = None,
) -> Alert | None:
    """Resolve the open alert for `rule_key` (none open: nothing happens) and tell the channels.

    `value` is what resolved it (kept beside the breaching value, which stays); `by` a person who
    resolved it by hand."""
    with transaction.atomic():
        alert = Alert.objects.select_for_update().open().filter(team=team, rule_key=rule_key).first()
        if alert is None:
            return None
        was_silenced = alert.state == AlertState.SILENCED
        alert.state = AlertState.RESOLVED
        alert.resolved_at = timezone.now()
        alert.last_evaluated_at = alert.resolved_at
        alert.resolved_snapshot = snapshot
        alert.resolved_value = value
        alert.resolved_by = by
        alert.save()
        if not was_silenced:
            create_event(alert, EventKind.RESOLVED)
        return alert


def expire_silences(now: datetime | None = None) -> int:
    """Wake alerts whose silence date passed (a new-release silence wakes at evaluation)."""
    now = now or timezone.now()
    woken = 0
    for alert in Alert.objects.filter(state=AlertState.SILENCED, silenced_until__lte=now).select_related(
        "team", "server", "stack", "snapshot"
    ):
        with transaction.atomic():
            updated = Alert.objects.filter(pk=alert.pk, state=AlertState.SILENCED).update(
                state=AlertState.ACTIVE, silenced_until=None, silenced_until_release=False
            )
            if updated == 1:
                alert.state = AlertState.ACTIVE
                create_event(alert, EventKind.REOPENED)
                woken += 1
    return woken
