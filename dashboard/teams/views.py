"""Team pages: the landing redirect, team settings (API tokens; members are in member_views)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.teams import selectors
from dashboard.teams.access import Action, default_team_for_user, get_team_for_user
from dashboard.teams.forms import ApiTokenForm, CountingForm
from dashboard.teams.models import ApiToken


@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    team = default_team_for_user(request)
    if team is None:
        # A first login (a fresh superuser, an account whose last team is gone): make one.
        return redirect("team_create")
    return redirect("team_overview", team_slug=team.slug)


@login_required
def team_settings(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = {
        "team": team,
        "member_count": team.memberships.count(),
        "tokens": selectors.api_tokens(team),
        "counting_form": CountingForm(
            initial={
                "main_encoding": team.main_encoding,
                "encodings": team.tracked_encodings()[1:],
                "context_window": team.context_window,
                "anthropic_model": team.anthropic_model,
                "protocol_era": team.protocol_era,
                "loading_client": team.loading_client,
                "tool_search": team.tool_search,
            }
        ),
        "has_provider_key": bool((team.provider_keys or {}).get("anthropic")),
    }
    return render(request, "teams/settings.html", ctx)


@never_cache  # the page shows a secret once: no cache may keep it
@login_required
@require_POST
def create_api_token(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_TOKENS)
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "Give the token a name of at most 100 characters and no control characters, e.g. the CI job "
            "that will use it.",
        )
        return redirect("team_settings", team_slug=team.slug)
    creator = request.user if isinstance(request.user, User) else None  # login_required: always a User
    token, plaintext = ApiToken.issue(team, form.cleaned_data["name"], created_by=creator)
    ctx = {"team": team, "token": token, "plaintext": plaintext}
    return render(request, "teams/token_created.html", ctx)


@login_required
@require_POST
def revoke_api_token(request: HtmxHttpRequest, team_slug: str, token_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_TOKENS)
    token = get_object_or_404(team.api_tokens, pk=token_id)
    token.revoke()
    if request.htmx:
        return render_page(request, "teams/settings.html#token-row", {"team": team, "t": token})
    return redirect("team_settings", team_slug=team.slug)
