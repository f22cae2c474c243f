"""Discovery pages: a tool's and a server's panels (loaded into their pages), an agent's
tool-definition tokens per session, and the team's 30 days of tool-definition spend per server.

Every lookup is scoped to a team of the user (anything else is a 404). Figures come from the
stored discovery records and the team's current snapshots (ingest.discovery.figures).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.servers.models import McpServer
from dashboard.teams.access import get_team_for_user
from dashboard.teams.models import Team
from ingest.discovery.advice import history_advice
from ingest.discovery.figures import Catalog, deferring_sessions, session_costs, tool_discovery
from ingest.discovery.models import SessionDiscoverySummary
from ingest.fidelity.selectors.common import parse_period, since_for
from mcptax import profiles

TEAM_DAYS = 30
SESSIONS_PER_PAGE = 25


def _get_server_for_user(request: HtmxHttpRequest, team_slug: str, code: UUID) -> tuple[Team, McpServer]:
    team = get_team_for_user(request, team_slug)
    return team, get_object_or_404(McpServer, team=team, code=code)


def _since() -> Any:
    return timezone.now() - timedelta(days=TEAM_DAYS)


@login_required
def tool_panel(request: HtmxHttpRequest, team_slug: str, code: UUID, tool: str) -> HttpResponse:
    """The tool page's discovery panel: loaded and called in what share of sessions, its searches."""
    team, server = _get_server_for_user(request, team_slug, code)
    catalog = Catalog(team)
    key = profiles.server_part(server.name)
    # The tool page's period (?days=, 0 = all time).
    days = parse_period(request.GET.get("days"))
    since = since_for(days)
    advice = [a for a in history_advice(catalog, since, key) if a.tool in (tool, None)]
    ctx = {
        "team": team,
        "server": server,
        "tool": tool,
        "days": days,
        "found": tool_discovery(team, server.name, tool, since),
        "advice": advice,
        "client_name": profiles.qualified_name(server.name, tool),
    }
    return render_page(request, "discovery/_tool_panel.html", ctx)


@login_required
def server_panel(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    """The server page's advice from the team's sessions (and on its instructions)."""
    team, server = _get_server_for_user(request, team_slug, code)
    catalog = Catalog(team)
    ctx = {
        "team": team,
        "server": server,
        "days": TEAM_DAYS,
        "advice": history_advice(catalog, _since(), profiles.server_part(server.name)),
        "sessions": len(deferring_sessions(team, _since())),
    }
    return render_page(request, "discovery/_server_panel.html", ctx)


@login_required
def agent_panel(request: HtmxHttpRequest, team_slug: str, family: str) -> HttpResponse:
    """An agent family's sessions: tool-definition tokens paid against the eager and deferred predictions."""
    team = get_team_for_user(request, team_slug)
    rows = SessionDiscoverySummary.objects.filter(
        session__team=team, session__agent__family=family, requests__gt=0
    ).order_by("-first_at", "-pk")
    page = Paginator(rows.select_related("session"), SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    costs = session_costs(Catalog(team), page.object_list)
    ctx = {"team": team, "family": family, "page": page, "costs": costs, "totals": _totals(costs)}
    return render_page(request, "discovery/_agent_panel.html", ctx)


def _totals(costs: list[Any]) -> dict[str, int]:
    return {k: sum(getattr(c, k) for c in costs) for k in ("paid", "eager", "deferred", "loads")}


@login_required
def team_discovery(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """The team's tool-definition spend over 30 days per server (requests x upfront + loads)."""
    team = get_team_for_user(request, team_slug)
    catalog = Catalog(team)
    summaries = SessionDiscoverySummary.objects.filter(
        session__team=team, first_at__gte=_since(), requests__gt=0
    )
    costs = session_costs(catalog, summaries.select_related("session"))
    per_server: dict[str, dict[str, int]] = {}
    for cost in costs:
        for key, paid in cost.per_server.items():
            row = per_server.setdefault(key, {"paid": 0, "sessions": 0, "deferring": 0})
            row["paid"] += paid
            row["sessions"] += 1
            row["deferring"] += int(cost.deferring)
    order = sorted(per_server, key=lambda k: -per_server[k]["paid"])
    rows = [{"server": catalog.servers[k], **per_server[k]} for k in order]
    ctx = {
        "team": team,
        "days": TEAM_DAYS,
        "rows": rows,
        "totals": _totals(costs),
        "sessions": len(costs),
        "deferring": sum(1 for c in costs if c.deferring),
        "searches": sum(c.summary.searches for c in costs),
        "misses": sum(c.summary.misses for c in costs),
        "wasted": sum(c.summary.loads_never_called for c in costs),
        "loads": sum(c.summary.loads for c in costs),
        "advice": history_advice(catalog, _since())[:20],
    }
    return render_page(request, "discovery/team.html", ctx)
