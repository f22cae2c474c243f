"""Access helpers: every team-scoped lookup and every rights check goes through these.

Another team's object is a 404, and so is an action the user's role lacks (dashboard.teams.permissions
holds the matrix): the object exists and a 403 would be honest, but a 404 leaks nothing about what
other roles can do, and it is what every page already answered.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404

from dashboard.teams.models import Team
from dashboard.teams.permissions import Action, allows, capabilities, membership_actions

__all__ = [
    "Action",
    "allowed",
    "capabilities_for",
    "default_team_for_user",
    "get_team_for_user",
    "require",
    "require_membership_change",
    "role_in",
]


def role_in(request: HttpRequest, team: Team) -> str | None:
    """The user's role in `team`, read once per request (the views and the `can` context share it)."""
    cache: dict[int, str | None] = request.__dict__.setdefault("_team_roles", {})
    if team.pk not in cache:
        cache[team.pk] = team.role_of(request.user)
    return cache[team.pk]


def allowed(request: HttpRequest, team: Team, action: Action) -> bool:
    return allows(role_in(request, team), action)


def require(request: HttpRequest, team: Team, action: Action) -> None:
    """Raise 404 unless the user's role in `team` permits `action`."""
    if not allowed(request, team, action):
        raise Http404(f"Your role in this team cannot {action.value.replace('_', ' ')}")


def require_membership_change(request: HttpRequest, team: Team, *roles: str) -> None:
    """Raise 404 unless the user may change memberships or invites that have (or get) `roles`:
    MANAGE_MEMBERS, and MANAGE_OWNERS when the owner role is one of them."""
    for action in membership_actions(*roles):
        require(request, team, action)


def get_team_for_user(request: HttpRequest, slug: str, action: Action = Action.VIEW) -> Team:
    """The user's team `slug`, provided their role there permits `action`; else 404."""
    team = get_object_or_404(Team.objects.for_user(request.user), slug=slug)
    require(request, team, action)
    return team


def capabilities_for(request: HttpRequest, team: Team | None) -> dict[str, bool]:
    """`{action name: allowed}` for the templates' `can`; all False outside a team."""
    return capabilities(role_in(request, team) if team is not None else None)


def default_team_for_user(request: HttpRequest) -> Team | None:
    return Team.objects.for_user(request.user).order_by("name").first()
