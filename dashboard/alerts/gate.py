"""The CI gate: a candidate tools/list judged against a registered server's latest snapshot and rules.

Shared by `POST /api/v1/check` and `manage.py check_budget`. The Markdown report is meant for one
sticky pull-request comment: it starts with a fixed marker line a bot can find and edit, and it is
a pure function of the input and the stored state (no timestamps), so an unchanged check gives a
byte-identical report and the comment need not be re-posted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from dashboard.alerts import budgets
from dashboard.alerts.models import Level, Measure
from dashboard.servers import loading as server_loading
from dashboard.servers.counting import tracked_encodings
from dashboard.servers.models import McpServer, Snapshot
from mcptax import findings, tokens
from mcptax import loading as mcp_loading

PASS, WARN, FAIL = "pass", "warn", "fail"
# Not a verdict on the candidate: the budgets themselves could not be judged (a bug of ours).
ERROR = "error"
STATUS_OK, STATUS_ERROR = "ok", "error"
MAX_FINDINGS_IN_REPORT = 15

log = logging.getLogger(__name__)


class TooManyTools(Exception):
    """The candidate lists more tools than the gate judges (GATE_MAX_TOOLS); nothing was judged."""


def marker(server_name: str) -> str:
    return f"<!-- mcp-tax-report:{server_name} -->"


@dataclass
class ToolDelta:
    name: str
    status: str  # added | removed | grown | shrunk | changed | unchanged
    tokens: int
    baseline_tokens: int | None
    delta: int


@dataclass
class RuleOutcome:
    measure: str
    label: str
    scope: str
    level: str
    limit: float
    value: float
    breached: bool
    detail: str = ""


@dataclass
class CheckResult:
    server: str
    verdict: str
    encoding: str
    version: str | None
    git_ref: str | None
    totals: dict[str, Any]
    rules: list[RuleOutcome] = field(default_factory=list)
    tools: list[ToolDelta] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    report: str = ""
    # Under the team's client (mcptax.loading): the candidate's and baseline's upfront in each mode,
    # and each stack of the server with the candidate swapped in (mode, upfront, auto verdict).
    loading: dict[str, Any] = field(default_factory=dict)
    # "error" when part of the analysis failed; `errors` says which part and why.
    status: str = STATUS_OK
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    for r in budgets.check_rules(budgets.server_thresholds(server), budgets.measure_values(figures)):
        rules.append(
            RuleOutcome(
                r.measure, Measure(r.measure).label, "server", r.level, r.limit, r.value, r.breached, r.detail
            )
        )
    # A stack pays every member's tax: swap this server's current figure for the candidate's.
    for stack in server.stacks.order_by("name", "pk"):
        by_level = budgets.stack_thresholds(stack)
        if not by_level:
            continue
        others = sum(
            stack.servers.exclude(pk=server.pk)
            .filter(current_snapshot__isnull=False)
            .values_list("current_snapshot__fixed_tax_tokens", flat=True)
        )
        stack_rule = budgets.check_rule(
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
        by_level = budgets.stack_thresholds(stack, Measure.STACK_UPFRONT_TOKENS)
        r = budgets.check_rule(Measure.STACK_UPFRONT_TOKENS, float(after.upfront), by_level)
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


def _signed(n: int | float | None) -> str:
    if n is None:
        return "–"
    return f"+{n:,}" if n > 0 else f"{n:,}"


def _number(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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


def _loading_lines(figures: dict[str, Any]) -> list[str]:
    if not figures:
        return []
    server = figures["server"]
    before = server["baseline_upfront"] or {}
    lines = [
        f"#### Up front per request, as `{figures['client']}` loads it",
        "",
        "| | baseline | candidate | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for mode, value in server["upfront"].items():
        old = before.get(mode)
        lines.append(
            f"| This server, {mode} | {_number(old)} | {value:,} | {_signed(None if old is None else value - old)} |"
        )
    for stack in figures["stacks"]:
        old = stack["baseline_upfront"]
        change = None if old is None else stack["upfront"] - old
        lines.append(
            f"| Stack `{_escape(stack['stack'])}`, {stack['mode']} | {_number(old)} | {stack['upfront']:,} "
            f"| {_signed(change)} |"
        )
    lines.append("")
    for stack in figures["stacks"]:
        t = stack["threshold"]
        if t is None:
            continue
        if stack["baseline_crosses"] is not None and stack["baseline_crosses"] != t["crosses"]:
            where = "across" if t["crosses"] else "back under"
            lines.append(
                f"⚠️ This candidate moves stack `{_escape(stack['stack'])}` {where} Claude Code's deferral "
                f"threshold ({t['deferrable_tokens']:,} deferrable tokens against {t['threshold_tokens']:,}, "
                f"{t['share_percent']:g}% of {t['context_window']:,}): Claude Code on auto changes behaviour."
            )
            lines.append("")
    return lines


def _budget_lines(result: CheckResult) -> list[str]:
    lines: list[str] = []
    if result.rules:
        lines += [
            "#### Budgets",
            "",
            "| rule | scope | level | limit | value | result |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for r in result.rules:
            outcome = ("❌ over" if r.level == Level.ERROR else "⚠️ over") if r.breached else "ok"
            detail = f" ({_escape(r.detail)})" if r.detail else ""
            lines.append(
                f"| {r.label}{detail} | {_escape(r.scope)} | {r.level} | {budgets.fmt(r.limit, r.measure)} "
                f"| {budgets.fmt(r.value, r.measure)} | {outcome} |"
            )
        lines.append("")
    else:
        lines += ["No budgets are set for this server (team defaults included).", ""]
    return lines


def _tool_lines(result: CheckResult) -> list[str]:
    lines: list[str] = []
    changed = [c for c in result.tools if c.status != "unchanged"]
    order = {"added": 0, "grown": 1, "changed": 2, "shrunk": 3, "removed": 4}
    changed.sort(key=lambda c: (order[c.status], -c.delta, c.name))
    if changed:
        lines += [
            "#### Tools that changed",
            "",
            "| tool | change | tokens | Δ tokens |",
            "| --- | --- | ---: | ---: |",
        ]
        for c in changed:
            lines.append(f"| `{_escape(c.name)}` | {c.status} | {c.tokens:,} | {_signed(c.delta)} |")
        lines.append("")
    elif result.totals["baseline_fixed_tax_tokens"] is not None:
        lines += ["No tool changed.", ""]
    return lines


def render_report(result: CheckResult) -> str:
    """Deterministic Markdown: same input and stored state, same bytes."""
    t = result.totals
    icon = {PASS: "✅", WARN: "⚠️", FAIL: "❌", ERROR: "⛔"}[result.verdict]
    lines = [marker(result.server), f"### {icon} MCP tool tax: `{result.server}` — **{result.verdict}**", ""]
    candidate = " · ".join(
        part
        for part in (
            f"version `{result.version}`" if result.version else "",
            f"ref `{result.git_ref}`" if result.git_ref else "",
            f"encoding `{result.encoding}`",
        )
        if part
    )
    lines += [f"Candidate: {candidate}", ""]
    if result.errors:
        lines += ["#### Analysis errors (ours, not the candidate's)", ""]
        lines += [f"- {_escape(e.replace(': ', ' could not be computed: ', 1))}" for e in result.errors]
        lines.append("")
    if t["baseline_fixed_tax_tokens"] is None:
        lines += ["No snapshot of this server yet: nothing to compare with.", ""]
    lines += ["| | baseline | candidate | change |", "| --- | ---: | ---: | ---: |"]
    lines.append(
        f"| Fixed tax (tokens) | {_number(t['baseline_fixed_tax_tokens'])} "
        f"| {t['fixed_tax_tokens']:,} | {_signed(t['delta_tokens'])} |"
    )
    tool_delta = t["tool_count"] - t["baseline_tool_count"] if t["baseline_tool_count"] is not None else None
    lines.append(
        f"| Tools | {_number(t['baseline_tool_count'])} | {t['tool_count']} | {_signed(tool_delta)} |"
    )
    for name, figures in t.get("by_encoding", {}).items():
        if name != result.encoding:
            lines.append(
                f"| Fixed tax, `{name}` | {_number(figures['baseline_fixed_tax_tokens'])} "
                f"| {figures['fixed_tax_tokens']:,} | {_signed(figures['delta_tokens'])} |"
            )
    if t["baseline_version"]:
        lines.append(f"| Version | {t['baseline_version']} | {result.version or '–'} | |")
    lines += ["", f"Instructions: {t['instructions_tokens']:,} tokens.", ""]
    lines += _loading_lines(result.loading)

    lines += _budget_lines(result)
    lines += _tool_lines(result)

    if result.findings:
        shown = sorted(
            result.findings,
            key=lambda f: (-(f["estimated_savings_tokens"] or 0), f["kind"], f["tools"]),
        )
        lines += ["#### Findings", ""]
        for f in shown[:MAX_FINDINGS_IN_REPORT]:
            savings = f["estimated_savings_tokens"]
            suffix = f" — could save about {savings:,} tokens" if savings else ""
            names = ", ".join(f"`{_escape(n)}`" for n in f["tools"][:6])
            lines.append(f"- {f['severity']}: **{_escape(f['title'])}** ({names}){suffix}")
        if len(shown) > MAX_FINDINGS_IN_REPORT:
            lines.append(f"- … and {len(shown) - MAX_FINDINGS_IN_REPORT} more")
        lines.append("")
    return "\n".join(lines)
