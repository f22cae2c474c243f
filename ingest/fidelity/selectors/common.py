"""What every fidelity page shares: periods, verdict labels and badges, and the *tally*.

A *tally* adds up rollup rows: calls, bulk calls, bulk arguments by verdict, the judged and
exact ones (exact-match rate = exact / judged arguments, judged = the verdicts that blame or clear
the agent, i.e. not unverifiable, capture_truncated or still pending), tokens and money, and the
reference adoption over tools that accept both a paste and a reference.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet, Sum
from django.utils import timezone

from dashboard.servers.models import McpServer, ToolsDocument
from dashboard.teams.models import Team
from ingest.fidelity.models import BY_REFERENCE, JUDGED, NO_BULK, NO_CONTENT, FidelityDaily, SizeBucket
from ingest.fidelity.rollups import COUNTS
from mcptax import verdict_rules
from mcptax.bulk import CONTENT_KEYS, REFERENCE_KEYS

# Period choices of the pages, in days (0 = everything kept).
PERIODS = (7, 30, 90, 365, 0)
DEFAULT_PERIOD = 30
PENDING = "pending"
# Display order of verdict columns: precedence, the unjudged ones, then the non-paste rows.
VERDICT_ORDER: tuple[str, ...] = (*verdict_rules.verdict_counts_order(), PENDING, NO_BULK)
# Verdicts that count calls, not bulk arguments.
CALL_VERDICTS = (BY_REFERENCE, NO_BULK, NO_CONTENT)
PASTE_VERDICTS = tuple(v for v in VERDICT_ORDER if v not in CALL_VERDICTS)
VERDICT_LABELS = {
    **{v: v.replace("_", " ") for v in VERDICT_ORDER},
    BY_REFERENCE: "by reference",
    NO_BULK: "no bulk argument",
    NO_CONTENT: verdict_rules.VERDICT_LABELS[NO_CONTENT],
}
SEVERITY = {**verdict_rules.SEVERITY, PENDING: "unknown", NO_BULK: "unknown"}
# Badge classes of app.css for each severity.
SEVERITY_CSS = {"ok": "ok", "cosmetic": "warning", "damaged": "error", "unknown": "muted"}


def verdict_css(verdict: str) -> str:
    return SEVERITY_CSS[SEVERITY.get(verdict or PENDING, "unknown")]


BUCKET_LABELS = {b.value: b.label for b in SizeBucket if b.value}
# Every column a rollup row adds up: its counts and its money.
SUMS = (*COUNTS, "cost_usd", "reference_cost_usd")


def parse_period(raw: str | None) -> int:
    try:
        days = int(raw) if raw not in (None, "") else DEFAULT_PERIOD
    except ValueError:
        return DEFAULT_PERIOD
    return days if days in PERIODS else DEFAULT_PERIOD


def days_ago(days: int) -> date:
    """The first UTC day of a period of ``days`` days ending today."""
    return timezone.now().astimezone(UTC).date() - timedelta(days=days - 1)


def exact_rate(exact: int, judged: int) -> float | None:
    """Percent of judged arguments that arrived exact; None when nothing could be judged."""
    return round(100.0 * exact / judged, 2) if judged else None


def since_for(days: int) -> date | None:
    return days_ago(days) if days else None


def verdict_label(verdict: str) -> str:
    return VERDICT_LABELS.get(verdict, verdict.replace("_", " "))


@dataclass
class Tally:
    """Sums over rollup rows, with the derived rates the pages show."""

    calls: int = 0
    bulk_calls: int = 0
    reference_calls: int = 0
    arguments: int = 0
    judged: int = 0
    exact: int = 0
    damaged: int = 0
    bytes: int = 0
    pasted_tokens: int = 0
    output_tokens: int = 0
    billed_tokens: int = 0
    reference_tokens: int = 0
    cost_usd: Decimal = field(default_factory=Decimal)
    reference_cost_usd: Decimal = field(default_factory=Decimal)
    server_errors: int = 0
    # Calls whose paste cost rests on counted tool inputs, not on the transcript's figure.
    estimated_calls: int = 0
    # Calls to tools that accept both a paste and a reference, and the reference ones among them.
    accepting_calls: int = 0
    accepting_reference_calls: int = 0
    by_verdict: Counter[str] = field(default_factory=Counter)

    @property
    def counted_tokens(self) -> int:
        """The billed tokens no transcript measured: pasted text counted where a call recorded no
        output figure. With the measured output it adds up to the billed total exactly."""
        return self.billed_tokens - self.output_tokens

    def add(self, row: dict[str, Any], *, accepts_both: bool = False) -> None:
        verdict = row["verdict"] or PENDING
        calls = row["calls"] or 0
        arguments = row["arguments"] or 0
        self.calls += calls
        self.arguments += arguments
        if verdict == BY_REFERENCE:
            self.reference_calls += calls
            self.by_verdict[verdict] += calls
        elif verdict in (NO_BULK, NO_CONTENT):
            self.by_verdict[verdict] += calls
        else:
            self.bulk_calls += calls
            self.by_verdict[verdict] += arguments
        if verdict in JUDGED:
            self.judged += arguments
        if verdict == verdict_rules.EXACT:
            self.exact += arguments
        if verdict in (
            verdict_rules.TRUNCATED,
            verdict_rules.ELEMENTS_DROPPED,
            verdict_rules.MUTATED,
            verdict_rules.MISMATCH,
        ):
            self.damaged += arguments
        if accepts_both:
            self.accepting_calls += calls
            if verdict == BY_REFERENCE:
                self.accepting_reference_calls += calls
        for name in (
            "bytes",
            "pasted_tokens",
            "output_tokens",
            "billed_tokens",
            "reference_tokens",
            "estimated_calls",
        ):
            setattr(self, name, getattr(self, name) + (row.get(name) or 0))
        # .get: a row summed over fewer columns (grouped(sums=...)) adds nothing to the others.
        self.server_errors += row.get("server_errors") or 0
        self.cost_usd += Decimal(row.get("cost_usd") or 0)
        self.reference_cost_usd += Decimal(row.get("reference_cost_usd") or 0)

    @property
    def exact_rate(self) -> float | None:
        return exact_rate(self.exact, self.judged)

    @property
    def adoption(self) -> float | None:
        if not self.accepting_calls:
            return None
        return round(100.0 * self.accepting_reference_calls / self.accepting_calls, 2)

    @property
    def saving_usd(self) -> Decimal:
        return self.cost_usd - self.reference_cost_usd

    def verdict_cells(self, verdicts: Iterable[str] = VERDICT_ORDER) -> list[dict[str, Any]]:
        """One cell per verdict for a table row: count, share of bulk arguments, severity."""
        pastes = sum(n for v, n in self.by_verdict.items() if v not in CALL_VERDICTS)
        cells = []
        for verdict in verdicts:
            count = self.by_verdict.get(verdict, 0)
            base = pastes if verdict not in CALL_VERDICTS else self.calls
            cells.append(
                {
                    "verdict": verdict,
                    "label": verdict_label(verdict),
                    "count": count,
                    "share": round(100.0 * count / base, 1) if base and count else None,
                    "severity": SEVERITY.get(verdict, "unknown"),
                    "css": verdict_css(verdict),
                }
            )
        return cells


def grouped(
    team: Team,
    since: date | None,
    group: list[str],
    agent_ids: list[int] | None = None,
    sums: Iterable[str] = SUMS,
) -> QuerySet[FidelityDaily, dict[str, Any]]:
    """Rollup rows summed per ``group`` (every column of ``sums``, all of SUMS unless told: a
    caller that reads one column saves summing the others, the money ones above all), over the
    period."""
    rows = FidelityDaily.objects.filter(team=team)
    if since is not None:
        rows = rows.filter(day__gte=since)
    if agent_ids is not None:
        rows = rows.filter(agent_id__in=agent_ids)
    summed: QuerySet[FidelityDaily, dict[str, Any]] = (
        rows.values(*group).annotate(**{name: Sum(name) for name in sums}).order_by()
    )
    return summed


# -- tools that accept both a paste and a reference --------------------------------------------------


# Tools/list documents are content-addressed: the accepting tools of one sha never change.
_ACCEPTING_BY_SHA: dict[str, frozenset[str]] = {}


def _accepting_tools(raw_json: str) -> frozenset[str]:
    """Tools of a tools/list whose input schema has a content-like and a reference property."""
    try:
        tools = json.loads(raw_json)
    except ValueError:
        return frozenset()
    names = set()
    for tool in tools if isinstance(tools, list) else []:
        schema = tool.get("inputSchema") if isinstance(tool, dict) else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict):
            continue
        keys = {str(k).lower() for k in props}
        if keys & CONTENT_KEYS and keys & set(REFERENCE_KEYS):
            names.add(str(tool.get("name", "")))
    return frozenset(names)


def schema_accepting_tools(team: Team) -> set[tuple[str, str]]:
    """``(server label, tool)`` pairs whose current snapshot says they take a paste or a reference.

    One query (two the first time a tools/list is seen); the server name is the label the logging
    proxy writes.
    """
    servers = list(
        McpServer.objects.filter(team=team, current_snapshot__isnull=False)
        .values_list("name", "current_snapshot__document__sha256")
        .order_by()
    )
    unknown = {sha for _, sha in servers if sha not in _ACCEPTING_BY_SHA}
    if unknown:
        for sha, raw_json in ToolsDocument.objects.filter(sha256__in=unknown).values_list(
            "sha256", "raw_json"
        ):
            if len(_ACCEPTING_BY_SHA) > 4096:
                _ACCEPTING_BY_SHA.clear()
            _ACCEPTING_BY_SHA[sha] = _accepting_tools(raw_json)
    pairs: set[tuple[str, str]] = set()
    for name, sha in servers:
        pairs.update((name, tool) for tool in _ACCEPTING_BY_SHA.get(sha, ()))
    return pairs


def observed_accepting_tools(rows: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """Tools that received both reference calls and pastes in the rows given (by anyone)."""
    kinds: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        if not row["calls"]:
            continue
        if row["verdict"] == BY_REFERENCE:
            kinds[(row["server_label"], row["tool"])].add("reference")
        elif row["verdict"] not in (NO_BULK, NO_CONTENT):
            kinds[(row["server_label"], row["tool"])].add("paste")
    return {tool for tool, seen in kinds.items() if len(seen) == 2}


def accepting_tools(team: Team, rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return schema_accepting_tools(team) | observed_accepting_tools(rows)
