"""Read-side queries of the team pages."""

from __future__ import annotations

from django.db.models import QuerySet

from dashboard.teams.models import ApiToken, Membership, Team


def memberships(team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user").order_by("user__username")


def api_tokens(team: Team) -> QuerySet[ApiToken]:
    return team.api_tokens.select_related("created_by")
