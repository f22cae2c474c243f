"""The tool page: one tool of one server, its schema tokens release by release and the fidelity of
the bulk arguments agents pasted into it, its recent calls, the agents that called it and its open
alerts.

Seen like the server page: any member of the server's team; anyone else gets a 404. The tool is
named by the server's snapshots or by captured calls (server label = the server's name); a name
neither knows is a 404.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.servers import loading
from dashboard.servers.models import McpServer
from dashboard.servers.sorting import normalize_sort, sort_columns
from dashboard.servers.tool_history import tool_history
from dashboard.teams.access import get_team_for_user
from ingest.capture.models import ToolCall
from ingest.fidelity.charts import tool_figure
from ingest.fidelity.selectors.calls import (
    DEFAULT_TOOL_CALL_SORT,
    TOOL_CALL_SORTS,
    page_number,
    tool_calls_page,
)
from ingest.fidelity.selectors.common import DEFAULT_PERIOD, PERIODS, parse_period, since_for, verdict_label
from ingest.fidelity.selectors.tools import tool_report

CALL_COLUMNS = [("when", "When (UTC)", True), ("bytes", "Bytes", True)]
# Rows of the per-day table at a time, newest first (the chart above it shows the whole period).
DAYS_PER_PAGE = 30


def _period_choices(days: int) -> list[dict[str, Any]]:
    return [{"days": d, "label": f"{d} days" if d else "all", "active": d == days} for d in PERIODS]


@login_required
def tool_detail(request: HtmxHttpRequest, team_slug: str, code: UUID, tool: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    server = get_object_or_404(McpServer.objects.select_related("current_snapshot"), team=team, code=code)
    days = parse_period(request.GET.get("days"))
    since = since_for(days)
    sort, _, _ = normalize_sort(request.GET.get("sort"), TOOL_CALL_SORTS, DEFAULT_TOOL_CALL_SORT)
    calls = tool_calls_page(team, server.name, tool, since, sort, page_number(request.GET.get("page")))
    extra = {"days": days if days != DEFAULT_PERIOD else None}
    ctx: dict[str, Any] = {
        "team": team,
        "server": server,
        "tool": tool,
        "days": days,
        "periods": _period_choices(days),
        "calls_page": calls,
        "sort": sort,
        "call_columns": sort_columns(CALL_COLUMNS, sort, extra),
        "calls_query": urlencode({k: v for k, v in {**extra, "sort": sort}.items() if v is not None}),
    }
    if request.htmx.target == "calls-region":
        return render_page(request, "fidelity/tool.html", ctx, partial="calls-region")
    report = tool_report(team, server.name, tool, since=since)
    ctx.update(
        report=report,
        days_page=Paginator(report.days_newest_first, DAYS_PER_PAGE).get_page(request.GET.get("days_page")),
        days_query=urlencode({k: v for k, v in extra.items() if v is not None}),
        verdict_labels=[verdict_label(v) for v in report.verdicts_seen],
    )
    if request.htmx.target == "tool-days" and report.days:
        return render_page(request, "fidelity/tool.html", ctx, partial="days-region")
    history = tool_history(server, tool, team.main_encoding)
    called_ever = (
        bool(calls.rows) or ToolCall.objects.filter(team=team, server_label=server.name, tool=tool).exists()
    )
    if not history.ever_listed and not called_ever:
        raise Http404("No such tool on this server")
    per_day = [(d.day, dict(d.tally.by_verdict)) for d in report.days]
    snapshot = server.current_snapshot
    if snapshot is not None and history.current is not None:
        ctx["loading_rows"] = loading.tool_rows(server, snapshot, team, team.main_encoding, tool)
        ctx["advice"] = loading.server_advice(server, snapshot, team, team.main_encoding)
    ctx.update(
        history=history,
        called_ever=called_ever,
        figure=tool_figure(per_day, report.rate_points) if report.days else None,
        verdict_cells=[c for c in report.total.verdict_cells() if c["count"]],
    )
    return render_page(request, "fidelity/tool.html", ctx)
