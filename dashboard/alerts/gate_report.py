"""The CI gate's result and its Markdown report.

The report is meant for one sticky pull-request comment: it starts with a fixed marker line a bot
can find and edit, and it is a pure function of the result (no timestamps), so an unchanged check
gives a byte-identical report and the comment need not be re-posted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dashboard.alerts import budgets
from dashboard.alerts.models import Level

PASS, WARN, FAIL = "pass", "warn", "fail"
# Not a verdict on the candidate: the budgets themselves could not be judged (a bug of ours).
ERROR = "error"
STATUS_OK, STATUS_ERROR = "ok", "error"
MAX_FINDINGS_IN_REPORT = 15


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


def _signed(n: int | float | None) -> str:
    if n is None:
        return "–"
    return f"+{n:,}" if n > 0 else f"{n:,}"


def _number(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
    lines = [marker(result.server), f"### {icon} mcp-tax: `{result.server}` — **{result.verdict}**", ""]
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
