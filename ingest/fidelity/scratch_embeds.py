"""SCRATCH (dashboard helper; lead: drop on merge, the fidelity branch owns the real views): the two
htmx regions the dashboard pages now load from ingest.fidelity URLs, so the dashboard branch runs."""

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404

from dashboard.htmx import HtmxHttpRequest, render_fragment
from dashboard.servers.models import McpServer
from dashboard.teams.access import get_team_for_user
from ingest.fidelity.rollups import unused_tools
from ingest.fidelity.selectors import overview_panel


@login_required
def fidelity_overview_panel(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = {"team": team, "fidelity": overview_panel(team)}
    return render_fragment(request, "fidelity/_overview_panel.html", ctx)


@login_required
def fidelity_unused_tools(request: HtmxHttpRequest, team_slug: str, code: UUID) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    server = get_object_or_404(McpServer.objects.select_related("current_snapshot"), team=team, code=code)
    tools = unused_tools(server, days=30)
    ctx = {
        "team": team,
        "server": server,
        "snapshot": server.current_snapshot,
        "unused_tools": tools,
        "unused_tokens": sum(t["tokens"] for t in tools),
    }
    return render_fragment(request, "fidelity/_unused_tools.html", ctx)
