"""The three outputs of `mcp-tax measure`: a terminal table, JSON, and Markdown for a PR comment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcptax.advice import Advice
from mcptax.cli.measure import OK, ServerRow, StackRow

if TYPE_CHECKING:
    from mcptax.cli.history import HistoryReport

MARKER = "<!-- mcp-tax-measure -->"


@dataclass
class Settings:
    encoding: str
    context_window: int
    budget: int | None
    budget_server: int | None
    profile: str = "mcp"
    client: str | None = None
    history: HistoryReport | None = None  # with --history: what its files held


def share(tokens: int, window: int) -> float:
    """Percent of the context window, two decimals."""
    return round(100.0 * tokens / window, 2) if window else 0.0


def _title(stack: StackRow) -> str:
    client = f" ({stack.client})" if stack.client else ""
    return f"{stack.name}{client}"


def _status(row: ServerRow) -> str:
    if row.status == OK:
        return "over budget" if row.over_budget else "ok"
    if row.outcome:
        return f"failed ({row.outcome})"
    return row.status.replace("_", " ")


def _row_cells(row: ServerRow, window: int) -> list[str]:
    if row.status != OK:
        return [row.name, row.transport, "-", "-", "-", "-", _status(row)]
    return [
        row.name,
        row.transport,
        str(row.tools),
        f"{row.fixed_tax_tokens:,}",
        f"{row.instructions_tokens:,}",
        f"{share(row.fixed_tax_tokens + row.instructions_tokens, window):.2f}%",
        _status(row),
    ]


def _total_cells(stack: StackRow, window: int) -> list[str]:
    measured = len(stack.measured())
    counted = len([s for s in stack.servers if s.status not in ("disabled", "skipped")])
    label = "total" if measured == counted else f"total ({measured} of {counted} measured)"
    fixed, instructions = stack.fixed_tax_tokens(), stack.instructions_tokens()
    return [
        label,
        "",
        str(stack.tools()),
        f"{fixed:,}",
        f"{instructions:,}",
        f"{share(fixed + instructions, window):.2f}%",
        "over budget" if stack.over_budget else "",
    ]


HEADERS = ["server", "transport", "tools", "fixed tax", "instructions", "context", "status"]
_RIGHT = {2, 3, 4, 5}


def _budget_line(settings: Settings) -> str:
    parts = []
    if settings.budget is not None:
        parts.append(f"budget {settings.budget:,} tokens per config")
    if settings.budget_server is not None:
        parts.append(f"{settings.budget_server:,} tokens per server")
    window = f"context window {settings.context_window:,} tokens"
    counted = (
        settings.encoding if settings.profile == "mcp" else f"{settings.encoding}, {settings.profile} profile"
    )
    return f"{counted}; {window}" + (f"; {', '.join(parts)}" if parts else "")


def table(stacks: list[StackRow], settings: Settings) -> str:
    out: list[str] = []
    for stack in stacks:
        out.append(_title(stack))
        if stack.error:
            out += [f"  error: {stack.error}", ""]
            continue
        rows = [HEADERS, *(_row_cells(r, settings.context_window) for r in stack.servers)]
        rows.append(_total_cells(stack, settings.context_window))
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
        for index, cells in enumerate(rows):
            if index == len(rows) - 1:
                out.append("  " + "  ".join("-" * w for w in widths))
            line = "  ".join(
                c.rjust(w) if i in _RIGHT else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            out.append(("  " + line).rstrip())
        for row in stack.servers:
            if row.status != OK and row.reason:
                out.append(f"  {row.name}: {row.reason}")
        out += [f"  {line}" for line in loading_lines(stack)]
        out += [f"  advice ({a.server}): {a.message} ({saving(a)})" for a in stack.advice]
        out.append("")
    if settings.history is not None:
        out += [settings.history.line, *(f"  {line}" for line in settings.history.details)]
    out.append(_budget_line(settings))
    return "\n".join(out)


def saving(advice: Advice) -> str:
    """The advice's saving in words: what it saves, or what it costs more, per request/session/period."""
    amount = advice.saving_tokens
    what = f"saves {amount:,}" if amount >= 0 else f"costs {-amount:,} more"
    source = ", from the sessions read" if advice.source == "history" else ""
    return f"{what} tokens per {advice.per}{source}"


def loading_lines(stack: StackRow) -> list[str]:
    """The stack's loading modes in plain sentences (empty without --client)."""
    figures = stack.loading
    if figures is None:
        return []
    modes = ", ".join(f"{mode} {f.upfront:,}" for mode, f in figures.modes.items())
    setting = f" (ENABLE_TOOL_SEARCH={figures.setting})" if figures.setting else ""
    lines = [
        f"{figures.client}{setting}: {figures.mode}, {figures.upfront:,} tokens up front per request; {modes}"
    ]
    if figures.threshold is not None:
        t = figures.threshold
        verdict = "crosses" if t.crosses else "stays under"
        lines.append(
            f"auto rule: {t.deferrable_tokens:,} deferrable tokens {verdict} {t.share_percent:g}% of "
            f"{t.context_window:,} ({t.threshold_tokens:,})"
        )
    return lines


def markdown(stacks: list[StackRow], settings: Settings) -> str:
    out = [MARKER, "## mcp-tax", ""]
    for stack in stacks:
        out.append(f"### `{_title(stack)}`")
        out.append("")
        if stack.error:
            out += [f"**Not read:** {stack.error}", ""]
            continue
        out.append("| " + " | ".join(HEADERS) + " |")
        out.append("|" + "|".join("---:" if i in _RIGHT else "---" for i in range(len(HEADERS))) + "|")
        for row in stack.servers:
            cells = _row_cells(row, settings.context_window)
            cells[0] = f"`{cells[0]}`"
            out.append("| " + " | ".join(cells) + " |")
        total = _total_cells(stack, settings.context_window)
        out.append("| " + " | ".join(f"**{c}**" if c else "" for c in total) + " |")
        problems = [r for r in stack.servers if r.status != OK and r.reason]
        if problems:
            out.append("")
            out += [f"- `{r.name}`: {r.reason}" for r in problems]
        out += _loading_markdown(stack)
        if stack.advice:
            out += ["", "**Advice:**", ""]
            out += [f"- `{a.server}`: {a.message} ({saving(a)})" for a in stack.advice]
        out.append("")
    if settings.history is not None:
        out += [f"_{settings.history.line}_", ""]
        out += [f"- {line}" for line in settings.history.details]
        out += [""] if settings.history.details else []
    out.append(f"_{_budget_line(settings)}_")
    return "\n".join(out)


def _loading_markdown(stack: StackRow) -> list[str]:
    figures = stack.loading
    if figures is None:
        return []
    out = [
        "",
        f"**Loading ({figures.client}):** {figures.mode}, {figures.upfront:,} tokens up front per request",
        "",
    ]
    out.append("| mode | up front | tools | search tool | instructions | other |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for mode, f in figures.modes.items():
        out.append(
            f"| {mode} | {f.upfront:,} | {sum(f.tools.values()):,} | {f.search_tool:,} | "
            f"{f.instructions:,} | {f.server_entry + f.overhead:,} |"
        )
    if figures.threshold is not None:
        t = figures.threshold
        verdict = "crosses" if t.crosses else "stays under"
        out += [
            "",
            f"Auto rule: {t.deferrable_tokens:,} deferrable tokens {verdict} {t.share_percent:g}% of a "
            f"{t.context_window:,}-token window ({t.threshold_tokens:,}).",
        ]
    return out


def to_json(stacks: list[StackRow], settings: Settings, exit_code: int) -> str:
    def server(row: ServerRow) -> dict[str, Any]:
        measured = row.status == OK
        return {
            "name": row.name,
            "transport": row.transport,
            "status": row.status,
            "outcome": row.outcome,
            "reason": row.reason or None,
            "tools": row.tools if measured else None,
            "fixed_tax_tokens": row.fixed_tax_tokens if measured else None,
            "instructions_tokens": row.instructions_tokens if measured else None,
            "context_share_percent": share(
                row.fixed_tax_tokens + row.instructions_tokens, settings.context_window
            )
            if measured
            else None,
            "server_info": {"name": row.server_name, "version": row.server_version} if measured else None,
            "pages": row.pages if measured else None,
            "elapsed_seconds": round(row.elapsed_seconds, 3) if measured else None,
            "over_budget": row.over_budget,
        }

    document = {
        "encoding": settings.encoding,
        "profile": settings.profile,
        "client": settings.client,
        "context_window": settings.context_window,
        "budget": settings.budget,
        "budget_server": settings.budget_server,
        "exit_code": exit_code,
        "history": settings.history.figures if settings.history is not None else None,
        "stacks": [
            {
                "source": stack.source,
                "client": stack.client,
                "name": stack.name,
                "error": stack.error,
                "servers": [server(r) for r in stack.servers],
                "total": {
                    "servers": len(stack.servers),
                    "measured": len(stack.measured()),
                    "tools": stack.tools(),
                    "fixed_tax_tokens": stack.fixed_tax_tokens(),
                    "instructions_tokens": stack.instructions_tokens(),
                    "context_share_percent": share(
                        stack.fixed_tax_tokens() + stack.instructions_tokens(), settings.context_window
                    ),
                },
                "over_budget": stack.over_budget,
                "loading": stack.loading.to_dict() if stack.loading else None,
                "advice": [a.to_dict() for a in stack.advice],
            }
            for stack in stacks
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=2)
