"""The telemetry set-up page: the endpoint and the exact lines for Claude Code and Codex, with a
new team token filled in once (it is never shown again), the agents' last reports and the
telemetry records in quarantine."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.views.decorators.http import require_POST

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.teams.access import Action, get_team_for_user
from dashboard.teams.models import ApiToken, Team
from ingest.capture.models import IngestJob, LineRecord
from ingest.otel import selectors
from ingest.otel.setup import TOKEN_PLACEHOLDER, setup_lines

QUARANTINE_SHOWN = 20


def telemetry_context(request: HtmxHttpRequest, team: Team, token: str = TOKEN_PLACEHOLDER) -> dict[str, Any]:
    quarantined = LineRecord.objects.filter(
        team=team, status=LineRecord.Status.QUARANTINED, job__source=IngestJob.Source.OTEL
    ).select_related("job")
    return {
        "team": team,
        "setup": setup_lines(request.build_absolute_uri("/").rstrip("/"), token),
        "token_shown": token != TOKEN_PLACEHOLDER,
        "agents": selectors.telemetry_agents(team),
        "quarantined": quarantined.order_by("-pk")[:QUARANTINE_SHOWN],
        "quarantined_count": quarantined.count(),
    }


@login_required
def telemetry(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    return render_page(request, "otel/telemetry.html", telemetry_context(request, team))


@login_required
@require_POST
def telemetry_token(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """A new team token for telemetry, shown once in the set-up lines."""
    team = get_team_for_user(request, team_slug, Action.MANAGE_TOKENS)
    creator = request.user if isinstance(request.user, User) else None
    _, plaintext = ApiToken.issue(team, "telemetry", created_by=creator)
    return render_page(request, "otel/telemetry.html", telemetry_context(request, team, plaintext))
