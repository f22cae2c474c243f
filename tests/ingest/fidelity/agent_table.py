"""Per-agent totals straight from the rollup table: the figures the e2e test checks the agent
pages against, read in one grouped query (kept here: no page needs them in this shape)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import Sum

from dashboard.teams.models import Team
from ingest.fidelity.models import BY_REFERENCE, DAMAGED, JUDGED, FidelityDaily
from ingest.fidelity.selectors.common import exact_rate
from mcptax import verdict_rules


def agent_table(team: Team, *, since: date | None = None) -> dict[int | None, dict[str, Any]]:
    """Per agent id: arguments, judged, exact, exact_rate, calls, by_reference, damaged (one query)."""
    rows = FidelityDaily.objects.filter(team=team)
    if since is not None:
        rows = rows.filter(day__gte=since)
    table: dict[int | None, dict[str, Any]] = {}
    for row in rows.values("agent_id", "verdict").annotate(calls=Sum("calls"), arguments=Sum("arguments")):
        entry = table.setdefault(
            row["agent_id"],
            {"arguments": 0, "judged": 0, "exact": 0, "calls": 0, "by_reference": 0, "damaged": 0},
        )
        entry["calls"] += row["calls"]
        entry["arguments"] += row["arguments"]
        verdict = row["verdict"]
        if verdict in JUDGED:
            entry["judged"] += row["arguments"]
        if verdict == verdict_rules.EXACT:
            entry["exact"] += row["arguments"]
        if verdict == BY_REFERENCE:
            entry["by_reference"] += row["calls"]
        if verdict in DAMAGED:
            entry["damaged"] += row["arguments"]
    for entry in table.values():
        entry["exact_rate"] = exact_rate(entry["exact"], entry["judged"])
    return table
