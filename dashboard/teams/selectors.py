"""Read-side queries of the team pages."""

from __future__ import annotations

from django.db.models import QuerySet

from dashboard.teams.models import ApiToken, Invite, Membership, Team


def memberships(team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user").order_by("user__username")


def api_tokens(team: Team) -> QuerySet[ApiToken]:
    return team.api_tokens.select_related("created_by")


def pending_invites(team: Team) -> QuerySet[Invite]:
    return team.invites.pending().select_related("created_by").order_by("-created")


PAST_INVITES_SHOWN = 20


def past_invites(team: Team) -> list[Invite]:
    """The latest invites that can no longer be used (accepted, revoked, expired), newest first."""
    pending = team.invites.pending().values("pk")
    rows = team.invites.exclude(pk__in=pending).select_related("created_by", "accepted_by", "revoked_by")
    return list(rows.order_by("-created")[:PAST_INVITES_SHOWN])
