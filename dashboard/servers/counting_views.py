"""The team's counting settings: tracked encodings, the context window, the provider key.

Lives with the servers because saving recounts the team's current snapshots in any encoding it
starts tracking (from their stored documents), so the new figures show at once.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard.servers.counting import recount_current
from dashboard.teams import selectors
from dashboard.teams.access import get_team_for_user
from dashboard.teams.forms import CountingForm
from dashboard.teams.permissions import Action
from dashboard.teams.services import TeamError, set_counting


@login_required
@require_POST
def update_counting(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_COUNTING)
    form = CountingForm(request.POST)
    if form.is_valid():
        try:
            set_counting(
                team,
                encodings=form.tracked(),
                context_window=form.cleaned_data["context_window"],
                model=form.cleaned_data["anthropic_model"],
                loading_client=form.cleaned_data["loading_client"] or None,
                tool_search=form.cleaned_data["tool_search"] if "tool_search" in request.POST else None,
                key=form.cleaned_data["anthropic_key"] or None,
                remove_key=form.cleaned_data["remove_key"],
                protocol_era=form.cleaned_data["protocol_era"],
                by=request.user.get_username(),
            )
        except TeamError as exc:
            form.add_error(None, str(exc))
        else:
            recounted = recount_current(team)
            note = (
                f" {recounted} current snapshot{'s' if recounted != 1 else ''} recounted."
                if recounted
                else ""
            )
            messages.success(request, f"Counting saved: {', '.join(team.tracked_encodings())}.{note}")
            return redirect("team_settings", team_slug=team.slug)
    ctx = {
        "team": team,
        "member_count": team.memberships.count(),
        "tokens": selectors.api_tokens(team),
        "counting_form": form,
        "has_provider_key": bool((team.provider_keys or {}).get("anthropic")),
    }
    return render(request, "teams/settings.html", ctx, status=400)
