"""The team's regressions page: every snapshot change that moved a fixed tax, filterable, paginated."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.servers import regressions
from dashboard.teams.access import get_team_for_user

PAGE_SIZE = 25


@login_required
def regression_list(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    params = request.GET
    servers = {str(s.code): s for s in team.servers.order_by("name").only("pk", "code", "name", "team_id")}
    stacks = {str(s.code): s for s in team.stacks.order_by("name").only("pk", "code", "name", "team_id")}
    server = servers.get(params.get("server", ""))
    stack = stacks.get(params.get("stack", ""))
    period = params.get("period", regressions.DEFAULT_PERIOD)
    period = period if period in regressions.PERIODS else regressions.DEFAULT_PERIOD
    direction = params.get("direction", "any")
    direction = direction if direction in regressions.DIRECTIONS else "any"
    rows = regressions.changes(
        team,
        server=server,
        stack=stack,
        since=regressions.period_start(period),
        direction=direction,
    )
    page = Paginator(rows, PAGE_SIZE).get_page(params.get("page"))
    filters = {
        "server": str(server.code) if server else "",
        "stack": str(stack.code) if stack else "",
        "period": period,
        "direction": direction,
    }
    ctx = {
        "team": team,
        "page": page,
        "rows": regressions.explain(list(page.object_list)),
        "servers": servers.values(),
        "stacks": stacks.values(),
        "filters": filters,
        "periods": {k: label for k, (label, _) in regressions.PERIODS.items()},
        "directions": regressions.DIRECTIONS,
        "query": urlencode({k: v for k, v in filters.items() if v}),
        "filtered": bool(server or stack or direction != "any"),
    }
    return render_page(request, "servers/regressions.html", ctx, partial="regressions-region")
