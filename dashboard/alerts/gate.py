"""The CI gate: a candidate tools/list judged against a registered server's latest snapshot and rules.

Shared by `POST /api/v1/check` and `manage.py check_budget`. The result types and the Markdown
report (one sticky pull-request comment) are in dashboard.alerts.gate_report, re-exported here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from dashboard.alerts import budgets
from dashboard.alerts.gate_report import (
    ERROR,
    FAIL,
    MAX_FINDINGS_IN_REPORT,
    PASS,
    STATUS_ERROR,
    STATUS_OK,
    WARN,
    CheckResult,
    RuleOutcome,
    ToolDelta,
    marker,
    render_report,
)
from dashboard.alerts.models import Level, Measure
from dashboard.servers import loading as server_loading
from dashboard.servers.counting import tracked_encodings
from dashboard.servers.models import McpServer, Snapshot
from mcptax import findings, tokens
from mcptax import loading as mcp_loading

__all__ = [
    "ERROR",
    "FAIL",
    "MAX_FINDINGS_IN_REPORT",
    "PASS",
    "STATUS_ERROR",
    "STATUS_OK",
    "WARN",
    "CheckResult",
    "RuleOutcome",
    "TooManyTools",
    "ToolDelta",
    "marker",
    "render_report",
    "run_check",
]

log = logging.getLogger(__name__)


class TooManyTools(Exception):
    """The candidate lists more tools than the gate judges (GATE_MAX_TOOLS); nothing was judged."""


def _tool_changes(
    report: tokens.TokenReport, candidate_raw: list[dict[str, Any]], baseline: Snapshot | None
) -> list[ToolDelta]:
    before: dict[str, tuple[int, dict[str, Any]]] = {}
    if baseline is not None:
        visible = {t.get("name"): tokens.visible_tool(t) for t in baseline.tools_raw}
        before = {t.name: (t.tokens, visible.get(t.name, {})) for t in baseline.tools.all()}
    changes: list[ToolDelta] = []
    seen = set()
    for tool, raw in zip(report.tools, candidate_raw, strict=True):
        seen.add(tool.name)
        if tool.name not in before:
            status = "added" if baseline is not None else "unchanged"
            changes.append(ToolDelta(tool.name, status, tool.tokens, None, tool.tokens if baseline else 0))
            continue
        old_tokens, old_visible = before[tool.name]
        delta = tool.tokens - old_tokens
        # Compared as data, not as text: clients differ in the key order they relay a schema in.
        if tokens.visible_tool(raw) == old_visible:
            status = "unchanged"
        else:
            status = "grown" if delta > 0 else "shrunk" if delta < 0 else "changed"
        changes.append(ToolDelta(tool.name, status, tool.tokens, old_tokens, delta))
    for name, (old_tokens, _) in before.items():
        if name not in seen:
            changes.append(ToolDelta(name, "removed", 0, old_tokens, -old_tokens))
    return changes


def _rules(server: McpServer, report: tokens.TokenReport, baseline: Snapshot | None) -> list[RuleOutcome]:
    """The server's and its stacks' budgets applied to the candidate's figures."""
    largest = max(report.tools, key=lambda t: t.tokens, default=None)
    figures = budgets.Figures(
        fixed_tax_tokens=report.fixed_tax_tokens,
        instructions_tokens=report.instructions_tokens,
        largest_tool=(largest.name, largest.tokens) if largest else None,
        baseline_fixed_tax_tokens=baseline.fixed_tax_tokens if baseline else None,
        baseline_label=baseline.label if baseline else "",
    )
    rules: list[RuleOutcome] = []
    for r in budgets.check_budgets(budgets.server_budgets(server), budgets.measure_values(figures)):
        rules.append(
            RuleOutcome(
                r.measure, Measure(r.measure).label, "server", r.level, r.limit, r.value, r.breached, r.detail
            )
        )
    # A stack pays every member's tax: swap this server's current figure for the candidate's.
    for stack in server.stacks.order_by("name", "pk"):
        by_level = budgets.stack_budgets(stack)
        if not by_level:
            continue
        others = sum(
            stack.servers.exclude(pk=server.pk)
            .filter(current_snapshot__isnull=False)
            .values_list("current_snapshot__fixed_tax_tokens", flat=True)
        )
        stack_rule = budgets.check_budget(
            Measure.STACK_FIXED_TAX_TOKENS, float(others + report.fixed_tax_tokens), by_level
        )
        if stack_rule is None:  # by_level is not empty, so never; narrows the type
            continue
        r = stack_rule
        rules.append(
            RuleOutcome(
                r.measure,
                Measure(r.measure).label,
                f"stack {stack.name}",
                r.level,
                r.limit,
                r.value,
                r.breached,
            )
        )
    return rules


def _loading(
    server: McpServer, raw_tools: list[dict[str, Any]], instructions: str | None, baseline: Snapshot | None
) -> tuple[dict[str, Any], list[RuleOutcome]]:
    """The candidate under the team's client, alone and in each of its stacks, beside the stored
    figures; and the stacks' upfront budgets judged on the candidate's stack."""
    team = server.team
    encoding = baseline.encoding if baseline else tokens.DEFAULT_ENCODING
    client = server_loading.client_of(team)
    setting = server_loading.setting_for(team, None, client)
    alone = mcp_loading.server_figures(
        raw_tools,
        client,
        server=server.name,
        instructions=instructions,
        encoding=encoding,
        setting=setting,
        context_window=team.context_window,
    )
    before = server_loading.for_stack_of_one(server, baseline, team, encoding, client) if baseline else None
    out: dict[str, Any] = {
        "client": client,
        "encoding": encoding,
        "server": {
            "mode": str(alone.mode),
            "upfront": {str(m): f.upfront for m, f in alone.modes.items()},
            "baseline_upfront": {str(m): f.upfront for m, f in before.modes.items()} if before else None,
        },
        "stacks": [],
    }
    rules: list[RuleOutcome] = []
    for stack in server.stacks.order_by("name", "pk"):
        after = server_loading.with_candidate(stack, team, encoding, server, raw_tools, instructions)
        now = server_loading.for_stack(stack, team, encoding)
        out["stacks"].append(
            {
                "stack": stack.name,
                "mode": str(after.mode),
                "upfront": after.upfront,
                "baseline_mode": str(now.mode) if now else None,
                "baseline_upfront": now.upfront if now else None,
                "threshold": after.threshold.to_dict() if after.threshold else None,
                "baseline_crosses": now.threshold.crosses if now and now.threshold else None,
            }
        )
        by_level = budgets.stack_budgets(stack, Measure.STACK_UPFRONT_TOKENS)
        r = budgets.check_budget(Measure.STACK_UPFRONT_TOKENS, float(after.upfront), by_level)
        if r is not None:
            scope = f"stack {stack.name}"
            label = f"{Measure(r.measure).label}: {client}, {after.mode}"
            rules.append(RuleOutcome(r.measure, label, scope, r.level, r.limit, r.value, r.breached))
    return out, rules


def run_check(
    server: McpServer,
    tools_document: Any,
    *,
    instructions: str | None = None,
    version: str | None = None,
    git_ref: str | None = None,
    max_tools: int | None = None,
    time_budget: float | None = None,
) -> CheckResult:
    """Judge a candidate. `tools_document` is anything `tokens.load_tools_document` accepts.

    Raises ValueError for a malformed document and TooManyTools past `max_tools`. The findings
    are given up once `time_budget` seconds have gone since the start (an error in the result,
    like any failed analysis): the exact figures and the budgets' verdict are still answered.
    """
    deadline = None if time_budget is None else time.monotonic() + time_budget
    raw_tools, doc_instructions, server_info = tokens.load_tools_document(tools_document)
    if max_tools is not None and len(raw_tools) > max_tools:
        raise TooManyTools(
            f"the candidate lists {len(raw_tools):,} tools; the gate judges at most {max_tools:,} (GATE_MAX_TOOLS)"
        )
    if instructions is None:
        instructions = doc_instructions
    if version is None and server_info:
        version = server_info.get("version")
    baseline = server.current_snapshot
    encoding = baseline.encoding if baseline else tokens.DEFAULT_ENCODING
    report = tokens.account(raw_tools, instructions, encoding=encoding)
    errors: list[str] = []
    # The figures above are exact; what follows is analysis, each part isolated so that a bug in
    # one is reported as an error of ours and never read as the candidate's verdict.
    found = _findings(server, raw_tools, encoding, report, deadline, time_budget, errors)
    rules, verdict, loading_figures = _judged_rules(server, report, baseline, raw_tools, instructions, errors)
    totals = _totals(report, baseline)
    totals["by_encoding"] = _by_encoding(server, raw_tools, instructions, report, baseline)
    result = CheckResult(
        server=server.name,
        verdict=verdict,
        encoding=report.encoding,
        version=version,
        git_ref=git_ref,
        totals=totals,
        rules=rules,
        tools=_tool_changes(report, raw_tools, baseline),
        findings=found,
        status=STATUS_ERROR if errors else STATUS_OK,
        errors=errors,
        loading=loading_figures,
    )
    result.report = render_report(result)
    return result


def _findings(
    server: McpServer,
    raw_tools: list[Any],
    encoding: str,
    report: tokens.TokenReport,
    deadline: float | None,
    time_budget: float | None,
    errors: list[str],
) -> list[dict[str, Any]]:
    """The candidate's findings, or none with the reason added to `errors`."""
    try:
        return [
            f.to_dict()
            for f in findings.analyze(raw_tools, encoding=encoding, report=report, deadline=deadline)
        ]
    except findings.AnalysisTimeout:
        log.warning("gate findings for %s gave up after the %s s budget", server.name, time_budget)
        errors.append(
            f"findings: not finished within the time budget of {time_budget:g} s (GATE_TIME_BUDGET_SECONDS)"
        )
    except Exception as exc:
        log.exception("gate findings for %s failed", server.name)
        errors.append(f"findings: {type(exc).__name__}: {exc}")
    return []


def _judged_rules(
    server: McpServer,
    report: tokens.TokenReport,
    baseline: Snapshot | None,
    raw_tools: list[Any],
    instructions: str | None,
    errors: list[str],
) -> tuple[list[RuleOutcome], str, dict[str, Any]]:
    """The budgets' results (the upfront budgets of the loading modes included), the verdict and
    the loading figures, or ERROR with the reason added to `errors`."""
    try:
        rules = _rules(server, report, baseline)
        loading_figures, upfront_rules = _loading(server, raw_tools, instructions, baseline)
        rules += upfront_rules
    except Exception as exc:
        log.exception("gate budgets for %s failed", server.name)
        errors.append(f"budgets: {type(exc).__name__}: {exc}")
        return [], ERROR, {}
    breached_levels = {r.level for r in rules if r.breached}
    return (
        rules,
        FAIL if Level.ERROR in breached_levels else WARN if breached_levels else PASS,
        loading_figures,
    )


def _totals(report: tokens.TokenReport, baseline: Snapshot | None) -> dict[str, Any]:
    return {
        "tool_count": report.tool_count,
        "fixed_tax_tokens": report.fixed_tax_tokens,
        "instructions_tokens": report.instructions_tokens,
        "overhead_tokens": report.overhead_tokens,
        "bytes": report.bytes,
        "sha256": report.sha256,
        "baseline_version": baseline.server_version if baseline else None,
        "baseline_sha256": baseline.sha256 if baseline else None,
        "baseline_fixed_tax_tokens": baseline.fixed_tax_tokens if baseline else None,
        "baseline_tool_count": baseline.tool_count if baseline else None,
        "delta_tokens": report.fixed_tax_tokens - baseline.fixed_tax_tokens if baseline else None,
    }


def _by_encoding(
    server: McpServer,
    raw_tools: list[dict[str, Any]],
    instructions: str | None,
    report: tokens.TokenReport,
    baseline: Snapshot | None,
) -> dict[str, dict[str, int | None]]:
    """The candidate beside its baseline in every encoding the team tracks (the budgets are judged
    in the main one, `encoding`); a baseline not counted in an encoding has None there."""
    out: dict[str, dict[str, int | None]] = {}
    for name in dict.fromkeys([report.encoding, *tracked_encodings(server.team)]):
        counted = (
            report if name == report.encoding else tokens.account(raw_tools, instructions, encoding=name)
        )
        before = baseline.figure(name) if baseline else None
        out[name] = {
            "fixed_tax_tokens": counted.fixed_tax_tokens,
            "instructions_tokens": counted.instructions_tokens,
            "baseline_fixed_tax_tokens": before,
            "delta_tokens": None if before is None else counted.fixed_tax_tokens - before,
        }
    return out
