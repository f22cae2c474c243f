"""Access helpers: every team-scoped lookup goes through these, so another team's object is a 404."""

from __future__ import annotations

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from dashboard.teams.models import Team


def get_team_for_user(request: HttpRequest, slug: str, *, admin: bool = False) -> Team:
    team = get_object_or_404(Team.objects.for_user(request.user), slug=slug)
    if admin and not team.is_admin(request.user):
        # The object exists and is visible, so a 403 would be honest; but it is still a
        # privilege the user lacks, and a 404 leaks nothing about what admins can do.
        raise Http404("Team admins only")
    return team


def default_team_for_user(request: HttpRequest) -> Team | None:
    return Team.objects.for_user(request.user).order_by("name").first()
