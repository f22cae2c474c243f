"""``GET /api/v1/fidelity``: per-agent paste fidelity and paste cost, read from the daily rollups."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Schema

from dashboard.teams.models import Team
from ingest.fidelity.selectors.agents import api_summary
from ingest.fidelity.selectors.common import DEFAULT_PERIOD, PERIODS

router = Router(tags=["fidelity"])


class TeamTokenRequest(HttpRequest):
    """A request config.api's token auth let through: it carries the token's team."""

    team: Team


class FidelityParams(Schema):
    days: int = DEFAULT_PERIOD


class AgentFidelityOut(Schema):
    agent_id: int
    family: str
    name: str
    version: str
    title: str
    last_seen: datetime
    calls: int
    bulk_calls: int
    reference_calls: int
    bulk_arguments: int
    judged_arguments: int
    exact_arguments: int
    exact_rate: float | None
    reference_adoption: float | None
    verdicts: dict[str, int]
    pasted_tokens: int
    billed_tokens: int
    reference_tokens: int
    cost_usd: float
    reference_cost_usd: float


class FidelityOut(Schema):
    days: int
    agents: list[AgentFidelityOut]


class ErrorOut(Schema):
    detail: str


@router.get(
    "/fidelity",
    response={200: FidelityOut, 400: ErrorOut},
    summary="Paste fidelity and paste cost per agent",
    description="Per agent (family, name, version): bulk calls, verdict counts (bulk arguments; "
    "`by_reference` and `no_bulk` count calls), the exact-match rate over judged arguments (not "
    "`unverifiable`/`capture_truncated`), reference adoption over tools that accept both, and tokens "
    "and USD spent pasting, over the last `days` days (UTC; 0 = everything kept). Read from the daily "
    f"rollups. `days` is one of {', '.join(map(str, PERIODS))}.",
)
def fidelity_summary(request: TeamTokenRequest, params: Query[FidelityParams]) -> tuple[int, dict[str, Any]]:
    if params.days not in PERIODS:
        allowed = ", ".join(map(str, PERIODS))
        return 400, {"detail": f"days must be one of {allowed}"}
    return 200, {"days": params.days, "agents": api_summary(request.team, days=params.days)}
