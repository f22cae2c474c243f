from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard.access import default_team_for_user, get_team_for_user
from dashboard.models import ApiToken


@login_required
def home(request: HttpRequest) -> HttpResponse:
    team = default_team_for_user(request)
    if team is None:
        return render(request, "dashboard/no_team.html")
    return redirect("team_overview", team_slug=team.slug)


@login_required
def team_overview(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    return render(request, "dashboard/overview.html", {"team": team})


@login_required
def team_settings(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = {
        "team": team,
        "is_admin": team.is_admin(request.user),
        "memberships": team.memberships.select_related("user").order_by("user__username"),
        "tokens": team.api_tokens.select_related("created_by"),
    }
    return render(request, "dashboard/team_settings.html", ctx)


@login_required
@require_POST
def create_api_token(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    name = request.POST.get("name", "").strip()[:100]
    if not name:
        messages.error(request, "Give the token a name, e.g. the CI job that will use it.")
        return redirect("team_settings", team_slug=team.slug)
    token, plaintext = ApiToken.issue(team, name, created_by=request.user)
    ctx = {"team": team, "token": token, "plaintext": plaintext}
    return render(request, "dashboard/token_created.html", ctx)


@login_required
@require_POST
def revoke_api_token(request: HttpRequest, team_slug: str, token_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    token = team.api_tokens.filter(pk=token_id).first()
    if token is None:
        return HttpResponse(status=404)
    token.revoke()
    if request.htmx:
        return render(request, "dashboard/team_settings.html#token-row", {"team": team, "t": token})
    return redirect("team_settings", team_slug=team.slug)
