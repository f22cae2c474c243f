"""Stack rules on loading modes (mcptax.loading): a budget on a stack's upfront tokens per request
in its client's mode, and an alert when a release moves a stack across Claude Code's deferral
threshold. Called by dashboard.alerts.budgets for every stack of a server with a new snapshot.
"""

from __future__ import annotations

from dashboard.alerts.models import Alert, Level, Measure
from dashboard.alerts.rules import (
    AlertChange,
    check_budget,
    describe,
    open_or_update_alert,
    resolve_alert,
    stack_budgets,
    stack_rule_key,
)
from dashboard.servers import loading as server_loading
from dashboard.servers.models import Snapshot, Stack


def evaluate_stack_loading(
    stack: Stack, snapshot: Snapshot | None = None
) -> tuple[list[AlertChange], list[Alert]]:
    """The stack's upfront budget (in its client's mode) and, for a release of a member, whether
    it moved the stack across Claude Code's deferral threshold (mcptax.loading)."""
    team = stack.team
    changes: list[AlertChange] = []
    resolved: list[Alert] = []
    figures = server_loading.for_stack(stack, team, team.main_encoding)
    key = stack_rule_key(stack, Measure.STACK_UPFRONT_TOKENS)
    by_level = stack_budgets(stack, Measure.STACK_UPFRONT_TOKENS)
    result = check_budget(Measure.STACK_UPFRONT_TOKENS, float(figures.upfront), by_level) if figures else None
    if result is not None and result.breached and figures is not None:
        detail = f"{figures.client}, {figures.mode}"
        changes.append(
            open_or_update_alert(
                team,
                key,
                result.measure,
                result.level,
                result.value,
                result.limit,
                describe(result, f"Stack {stack.name} ({detail})"),
                f"stack {stack.name}",
                stack=stack,
                budget=result.budget,
                snapshot=snapshot,
            )
        )
    else:
        gone = resolve_alert(team, key, snapshot=snapshot, value=float(figures.upfront) if figures else None)
        if gone:
            resolved.append(gone)
    crossing = _deferral_crossing(stack, snapshot) if snapshot is not None else None
    if crossing:
        changes.append(crossing)
    return changes, resolved


def _deferral_crossing(stack: Stack, snapshot: Snapshot) -> AlertChange | None:
    """An alert when `snapshot`, a release, put the stack on the other side of Claude Code's
    `auto` threshold than the release before it: every Claude Code user of the stack on `auto`
    changes behaviour. One alert per (stack, release), resolved by hand."""
    if not snapshot.is_release or snapshot.previous is None:
        return None
    team = stack.team
    after = server_loading.for_stack(stack, team, team.main_encoding, "claude-code")
    before = server_loading.for_stack(
        stack, team, team.main_encoding, "claude-code", replace={snapshot.server_id: snapshot.previous}
    )
    if not (after and before and after.threshold and before.threshold):
        return None
    if after.threshold.crosses == before.threshold.crosses:
        return None
    key = f"stack:{stack.pk}:{Measure.DEFERRAL_CROSSING}:{snapshot.pk}"
    if Alert.objects.filter(team=team, rule_key=key).exists():
        return None  # already told (and maybe resolved by hand): a re-evaluation must not reopen it
    t = after.threshold
    now = "defers every MCP tool behind tool search" if t.crosses else "loads every MCP tool schema again"
    message = (
        f"Release {snapshot.label} of {snapshot.server.name} moves stack {stack.name} "
        f"{'across' if t.crosses else 'back under'} Claude Code's deferral threshold: its deferrable "
        f"schemas go from {before.threshold.deferrable_tokens:,} to {t.deferrable_tokens:,} tokens against "
        f"{t.threshold_tokens:,} ({t.share_percent:g}% of {t.context_window:,}). Claude Code on "
        f"ENABLE_TOOL_SEARCH=auto now {now}."
    )
    return open_or_update_alert(
        team,
        key,
        Measure.DEFERRAL_CROSSING,
        Level.WARNING,
        float(t.deferrable_tokens),
        float(t.threshold_tokens),
        message,
        f"stack {stack.name}",
        stack=stack,
        snapshot=snapshot,
    )
