"""Creating a team: the one path every way of making a team goes through (page, admin, command)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from dashboard.teams.models import Membership, Team
from dashboard.teams.signals import team_created


def announce_team(team: Team) -> None:
    """Tell the listeners (default budgets) about a new team once its transaction commits."""
    transaction.on_commit(lambda: team_created.send(sender=Team, team=team))


def create_team(name: str, owner: User | None = None, **fields: object) -> Team:
    """A new team, `owner` (if given) as its owner, announced with `team_created`."""
    with transaction.atomic():
        team = Team.objects.create(name=name, **fields)
        if owner is not None:
            Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
        announce_team(team)
    return team
