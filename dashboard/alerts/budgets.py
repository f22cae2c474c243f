"""Budget evaluation: the checks kept beside each snapshot, alerts opened, escalated and resolved.

Runs on every new snapshot (`snapshot_recorded`, after the snapshot commits) and on demand
(`evaluate_server`). The CI gate reuses `measure_values` and `check_budget` so a pull request is held
to exactly the budgets the dashboard alerts on.

The budget checks and the alert life cycle (`open_or_update_alert`, `resolve_alert`) live in
dashboard.alerts.rules, shared with the stack loading rules (dashboard.alerts.loading_rules) without
an import cycle; they are re-exported here for the callers that know them by this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.alerts import loading_rules
from dashboard.alerts.models import Alert, Measure
from dashboard.alerts.rules import (
    LEVEL_RANK,
    SERVER_MEASURE_ORDER,
    UNITS,
    AlertChange,
    BudgetCheck,
    BudgetsByMeasure,
    Figures,
    check_budget,
    check_budgets,
    describe,
    expire_silences,
    fmt,
    measure_values,
    open_or_update_alert,
    release_baseline,
    resolve_alert,
    server_budgets,
    server_rule_key,
    snapshot_figures,
    stack_budgets,
    stack_rule_key,
)
from dashboard.servers.models import McpServer, Snapshot, Stack
from dashboard.teams.models import Team

__all__ = [
    "LEVEL_RANK",
    "SERVER_MEASURE_ORDER",
    "UNITS",
    "AlertChange",
    "Evaluation",
    "Figures",
    "BudgetCheck",
    "BudgetsByMeasure",
    "check_budget",
    "check_budgets",
    "describe",
    "evaluate_server",
    "evaluate_snapshot",
    "evaluate_stack",
    "evaluate_team",
    "expire_silences",
    "fmt",
    "measure_values",
    "open_or_update_alert",
    "release_baseline",
    "resolve_alert",
    "server_rule_key",
    "server_budgets",
    "snapshot_figures",
    "stack_fixed_tax",
    "stack_rule_key",
    "stack_budgets",
]


# --- evaluation ---------------------------------------------------------------------------------


@dataclass
class Evaluation:
    snapshot_id: int
    results: list[BudgetCheck]
    changes: list[AlertChange]
    resolved: list[Alert]


def evaluate_snapshot(snapshot: Snapshot) -> Evaluation:
    """Store the budget checks beside the snapshot; when it is the server's current one, update alerts too."""
    server = McpServer.objects.select_related("team", "current_snapshot").get(pk=snapshot.server_id)
    results = check_budgets(server_budgets(server), measure_values(snapshot_figures(snapshot)))
    checks = {r.measure: r.stored() for r in results}
    Snapshot.objects.filter(pk=snapshot.pk).update(budget_checks=checks)
    snapshot.budget_checks = checks

    changes: list[AlertChange] = []
    resolved: list[Alert] = []
    if server.current_snapshot_id != snapshot.pk:
        # An old snapshot re-evaluated (a budget edit) gets its band, but must not move alerts.
        return Evaluation(snapshot.pk, results, changes, resolved)

    judged = {r.measure for r in results}
    for result in results:
        key = server_rule_key(server, result.measure)
        if result.breached:
            subject = server.name + (
                f" / {result.detail}" if result.measure == Measure.MAX_TOOL_TOKENS else ""
            )
            changes.append(
                open_or_update_alert(
                    server.team,
                    key,
                    result.measure,
                    result.level,
                    result.value,
                    result.limit,
                    describe(result, f"{server.name} {snapshot.label}"),
                    subject,
                    server=server,
                    budget=result.budget,
                    snapshot=snapshot,
                )
            )
        else:
            done = resolve_alert(server.team, key, snapshot=snapshot, value=result.value)
            if done:
                resolved.append(done)
    # A budget that was removed or disabled cannot stay breached.
    for measure in SERVER_MEASURE_ORDER:
        if measure not in judged:
            done = resolve_alert(server.team, server_rule_key(server, measure), snapshot=snapshot)
            if done:
                resolved.append(done)

    for stack in server.stacks.all():
        change, gone = evaluate_stack(stack, snapshot=snapshot)
        if change:
            changes.append(change)
        if gone:
            resolved.append(gone)
        more, gone_too = loading_rules.evaluate_stack_loading(stack, snapshot=snapshot)
        changes += more
        resolved += gone_too
    return Evaluation(snapshot.pk, results, changes, resolved)


def stack_fixed_tax(stack: Stack) -> int:
    return sum(
        stack.servers.filter(current_snapshot__isnull=False).values_list(
            "current_snapshot__fixed_tax_tokens", flat=True
        )
    )


def evaluate_stack(stack: Stack, snapshot: Snapshot | None = None) -> tuple[AlertChange | None, Alert | None]:
    """The stack's summed fixed tax against its budget; the only stack measure so far."""
    by_level = stack_budgets(stack)
    key = stack_rule_key(stack)
    if not by_level:
        return None, resolve_alert(stack.team, key, snapshot=snapshot)
    value = float(stack_fixed_tax(stack))
    result = check_budget(Measure.STACK_FIXED_TAX_TOKENS, value, by_level)
    if result is not None and result.breached:
        message = describe(result, f"Stack {stack.name}")
        change = open_or_update_alert(
            stack.team,
            key,
            result.measure,
            result.level,
            result.value,
            result.limit,
            message,
            f"stack {stack.name}",
            stack=stack,
            budget=result.budget,
            snapshot=snapshot,
        )
        return change, None
    return None, resolve_alert(stack.team, key, snapshot=snapshot, value=value)


def evaluate_server(server: McpServer) -> Evaluation | None:
    """On demand (a budget changed, the `evaluate` button): judge the current snapshot again."""
    server = McpServer.objects.select_related("current_snapshot").get(pk=server.pk)
    if server.current_snapshot is None:
        return None
    return evaluate_snapshot(server.current_snapshot)


def evaluate_team(team: Team) -> int:
    """Re-evaluate every server's current snapshot and every stack (after editing budgets)."""
    count = 0
    for server in team.servers.filter(current_snapshot__isnull=False).select_related("current_snapshot"):
        if server.current_snapshot is not None:  # filtered above; narrows the type
            evaluate_snapshot(server.current_snapshot)
            count += 1
    for stack in team.stacks.filter(servers__isnull=True):
        # Stacks with members were judged with their servers; empty ones resolve here.
        evaluate_stack(stack)
        loading_rules.evaluate_stack_loading(stack)
    return count
