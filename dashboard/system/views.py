"""The health page: what an operator checks when polls, ingests or alerts stop moving."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.system import health
from dashboard.teams.access import Action, get_team_for_user
from dashboard.teams.models import Team


@login_required
def team_health(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    # Team owners and admins (the role matrix), and staff for any team: staff run the deployment.
    if request.user.is_staff:
        team = get_object_or_404(Team, slug=team_slug)
    else:
        team = get_team_for_user(request, team_slug, Action.VIEW_HEALTH)
    report = health.build(Team.objects.filter(pk=team.pk))
    ctx = {
        "team": team,
        "report": report,
        "errors": [(kind, report.errors.get(kind)) for kind in health.KINDS],
        "window_hours": int(health.WINDOW.total_seconds() // 3600),
    }
    status = 503 if report.status == health.DOWN else 200
    return render_page(request, "system/health.html", ctx, partial="health-region", status=status)
