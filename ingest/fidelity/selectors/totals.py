"""Figures straight from the rollup table, as plain dicts: breakdowns, reference
adoption, calls per tool, a server's unused tools and the paste cost per day. One grouped query
each, whatever the traffic."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.fidelity.models import BY_REFERENCE, NO_BULK, NO_CONTENT, FidelityDaily
from ingest.fidelity.selectors.common import days_ago


def breakdown(
    team: Team,
    by: str,
    *,
    agent: int | None = None,
    since: date | None = None,
    server_label: str | None = None,
) -> list[dict[str, Any]]:
    """Counts grouped by ``verdict``, ``tool`` (with server label) or ``size_bucket`` × verdict.

    Rows: ``{<group...>, "verdict", "calls", "arguments", "bytes", "pasted_tokens", "cost_usd"}``.
    """
    groups = {
        "verdict": ["verdict"],
        "tool": ["server_label", "tool", "verdict"],
        "size": ["size_bucket", "verdict"],
    }
    rows = FidelityDaily.objects.filter(team=team)
    if agent is not None:
        rows = rows.filter(agent_id=agent)
    if since is not None:
        rows = rows.filter(day__gte=since)
    if server_label is not None:
        rows = rows.filter(server_label=server_label)
    if by == "size":
        rows = rows.exclude(size_bucket="")
    return list(
        rows.values(*groups[by])
        .annotate(
            calls=Sum("calls"),
            arguments=Sum("arguments"),
            bytes=Sum("bytes"),
            pasted_tokens=Sum("pasted_tokens"),
            cost_usd=Sum("cost_usd"),
        )
        .order_by(*groups[by])
    )


def reference_adoption(team: Team, *, agent: int | None = None, since: date | None = None) -> dict[str, Any]:
    """Reference calls / all calls to tools that took both a reference and a paste (one query).

    A tool "accepts both" when the captured traffic shows both kinds of call to it (in the
    period, by anyone in the team); ``tools`` lists them with their own figures.
    """
    rows = FidelityDaily.objects.filter(team=team).exclude(verdict__in=(NO_BULK, NO_CONTENT))
    if since is not None:
        rows = rows.filter(day__gte=since)
    per_tool: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"reference": 0, "paste": 0, "mine": 0}
    )
    mine_ref: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows.values("server_label", "tool", "verdict", "agent_id").annotate(calls=Sum("calls")):
        tool = (row["server_label"], row["tool"])
        kind = "reference" if row["verdict"] == BY_REFERENCE else "paste"
        per_tool[tool][kind] += row["calls"]
        if agent is None or row["agent_id"] == agent:
            mine_ref[tool][0 if kind == "reference" else 1] += row["calls"]
    both = [tool for tool, c in per_tool.items() if c["reference"] and c["paste"]]
    reference = sum(mine_ref[t][0] for t in both)
    total = reference + sum(mine_ref[t][1] for t in both)
    return {
        "reference_calls": reference,
        "calls": total,
        "rate": round(100.0 * reference / total, 2) if total else None,
        "tools": [
            {
                "server_label": t[0],
                "tool": t[1],
                "reference_calls": mine_ref[t][0],
                "paste_calls": mine_ref[t][1],
            }
            for t in sorted(both)
        ],
    }


def calls_per_tool(team: Team, server_label: str, *, since: date | None = None) -> dict[str, int]:
    rows = FidelityDaily.objects.filter(team=team, server_label=server_label)
    if since is not None:
        rows = rows.filter(day__gte=since)
    return {r["tool"]: r["calls"] for r in rows.values("tool").annotate(calls=Sum("calls")) if r["calls"]}


def unused_tools(server: McpServer, days: int = 30) -> list[dict[str, Any]]:
    """Tools of the server's current snapshot never called in the captured traffic of the last ``days``.

    Each with ``name``, ``tokens`` and ``share`` (its fraction of the fixed tax, 0..1): what it costs
    every request while nobody uses it. Read from the rollups (calls matched by server label =
    server name). Empty when the server has no snapshot yet.
    """
    snapshot = server.current_snapshot
    if snapshot is None:
        return []
    called = set(calls_per_tool(server.team, server.name, since=days_ago(days)))
    total = snapshot.fixed_tax_tokens or 0
    return [
        {"name": tool.name, "tokens": tool.tokens, "share": (tool.tokens / total) if total else 0.0}
        for tool in snapshot.tools.order_by("position")
        if tool.name not in called
    ]


def cost_by_day(team: Team, days: Iterable[date]) -> dict[date, Decimal]:
    """Paste cost (USD) per day for these days (one query)."""
    rows = (
        FidelityDaily.objects.filter(team=team, day__in=list(days))
        .values("day")
        .annotate(cost=Sum("cost_usd"))
    )
    return {r["day"]: Decimal(r["cost"] or 0) for r in rows}
