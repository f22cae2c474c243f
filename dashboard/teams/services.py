"""Changing teams and memberships: creating a team, roles, removing and leaving.

Who may ask for a change is the role matrix's business (the views ask `dashboard.teams.access`);
what no one may do is decided here: a team never loses its last owner, whoever asks (an owner
demoting themselves, an owner removing the other owner at the same moment, a command). The owner
rows are locked while a change is judged, so two concurrent changes cannot both pass the check.
Every change is logged on the `dashboard.teams` logger with who made it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils.text import slugify

from dashboard.teams.models import Membership, Team
from dashboard.teams.signals import team_created
from dashboard.teams.validators import NAME_RULE, has_control
from mcptax import tokens

logger = logging.getLogger("dashboard.teams")

OWNER = Membership.Role.OWNER
DEFAULT_TEAM = "default"


class TeamError(Exception):
    """A change that cannot be made; the message says why, for the person who asked."""


def announce_team(team: Team) -> None:
    """Tell the listeners (default budgets) about a new team once its transaction commits."""
    transaction.on_commit(lambda: team_created.send(sender=Team, team=team))


def create_team(
    name: str, owner: User, slug: str = "", context_window: int | None = None, *, private: bool = False
) -> Team:
    """A new team with `owner` as its owner, announced with `team_created` (its default budgets).

    A name is unique (ignoring case) among the owner's own teams only: refusing a name another
    team uses would tell anyone which team names exist. Slugs are unique; ``private`` (the web
    form) gives the team a slug with a random tail, so neither the answer nor the new URL says
    whether another team has the plain one.
    """
    name = name.strip()
    if not name:
        raise TeamError("Give the team a name.")
    if has_control(name):
        raise TeamError(NAME_RULE)
    if len(name) > 100:
        raise TeamError("A team name has at most 100 characters.")
    if Team.objects.filter(name__iexact=name, memberships__user=owner).exists():
        raise TeamError(f"You already have a team named {name!r}; pick another name.")
    if private and not slug:
        slug = f"{slugify(name)[:80].strip('-') or 'team'}-{secrets.token_hex(3)}"
    if slug:
        try:
            validate_slug(slug)
        except ValidationError:
            raise TeamError(
                f"{slug!r} is not a slug: use letters, digits, hyphens and underscores."
            ) from None
        if Team.objects.filter(slug=slug).exists():
            raise TeamError(f"The slug {slug!r} is taken by another team; pick another one.")
    with transaction.atomic():
        team = Team.objects.create(
            name=name, slug=slug, context_window=context_window or settings.DEFAULT_CONTEXT_WINDOW
        )
        Membership.objects.create(team=team, user=owner, role=OWNER)
        announce_team(team)
    logger.info("team %s created by %s, its owner", team.slug, owner.username)
    return team


def team_for_command(slug: str | None, say: Callable[[str], object]) -> Team:
    """The team a management command acts on: `slug`, else the only team, else (no team at all) a
    new team named `default`, announced through `say`. With several teams, `slug` is required.

    Every active superuser becomes an owner of `default`, so whoever runs the commands on a fresh
    install sees their servers on the web at once.
    """
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None:
            raise TeamError(f"no team with slug {slug!r}")
        return team
    teams = list(Team.objects.order_by("slug")[:6])
    if len(teams) == 1:
        return teams[0]
    if teams:
        names = ", ".join(t.slug for t in teams[:5]) + (", ..." if len(teams) > 5 else "")
        raise TeamError(f"--team SLUG is required when there are several teams ({names})")
    with transaction.atomic():
        team = Team.objects.create(
            name=DEFAULT_TEAM, slug=DEFAULT_TEAM, context_window=settings.DEFAULT_CONTEXT_WINDOW
        )
        owners = list(User.objects.filter(is_superuser=True, is_active=True).order_by("username"))
        Membership.objects.bulk_create([Membership(team=team, user=u, role=OWNER) for u in owners])
        announce_team(team)
    who = (
        f"owners: {', '.join(u.username for u in owners)}"
        if owners
        else "no members yet: create a superuser (manage.py createsuperuser) and make them its owner in "
        "the admin, or create your team on the web and pass --team"
    )
    say(f"No team yet: created team {DEFAULT_TEAM!r} (slug {team.slug}; {who}).")
    logger.info("team %s created by a management command (%s)", team.slug, who)
    return team


def _last_owner_guard(membership: Membership, message: str) -> None:
    """Refuse when `membership` is its team's only owner; the owner rows stay locked until commit."""
    if membership.role != OWNER:
        return
    owners = list(
        Membership.objects.select_for_update()
        .filter(team_id=membership.team_id, role=OWNER)
        .values_list("pk")
    )
    if len(owners) <= 1:
        raise TeamError(message)


def _locked(membership: Membership) -> Membership:
    current = Membership.objects.select_for_update().select_related("user", "team").filter(pk=membership.pk)
    found = current.first()
    if found is None:
        raise TeamError("That person is no longer a member of the team.")
    return found


def change_role(membership: Membership, role: str, by: User) -> Membership:
    """Give `membership` the role `role`; the last owner keeps theirs."""
    if role not in Membership.Role.values:
        raise TeamError(f"{role!r} is not a role; pick one of {', '.join(Membership.Role.values)}.")
    with transaction.atomic():
        current = _locked(membership)
        if current.role == role:
            return current
        if role != OWNER:
            _last_owner_guard(
                current,
                f"{current.user.username} is the team's last owner: make someone else an owner first.",
            )
        old, current.role = current.role, role
        current.save(update_fields=["role"])
    logger.info(
        "team %s: %s changed %s's role from %s to %s",
        current.team.slug,
        by.username,
        current.user.username,
        old,
        role,
    )
    return current


def remove_member(membership: Membership, by: User) -> None:
    """Take `membership`'s user out of the team; never the last owner."""
    with transaction.atomic():
        current = _locked(membership)
        _last_owner_guard(
            current,
            f"{current.user.username} is the team's last owner and cannot be removed: make someone else "
            "an owner first.",
        )
        current.delete()
    logger.info(
        "team %s: %s removed %s (%s)", current.team.slug, by.username, current.user.username, current.role
    )


def leave_team(team: Team, user: User) -> None:
    """`user` leaves `team`; the last owner cannot."""
    membership = Membership.objects.filter(team=team, user=user).first()
    if membership is None:
        raise TeamError(f"You are not a member of {team.name}.")
    with transaction.atomic():
        current = _locked(membership)
        _last_owner_guard(
            current,
            "You are the team's last owner: make someone else an owner before you leave, so the team "
            "keeps one.",
        )
        current.delete()
    logger.info("team %s: %s left (%s)", team.slug, user.username, current.role)


def set_counting(
    team: Team,
    *,
    encodings: list[str] | None = None,
    context_window: int | None = None,
    model: str | None = None,
    key: str | None = None,
    remove_key: bool = False,
    protocol_era: str | None = None,
    by: str = "",
    loading_client: str | None = None,
    tool_search: str | None = None,
) -> Team:
    """Change what `team`'s figures are counted in (`encodings`, main first) and its provider key:
    a non-empty `key` replaces the stored one, `remove_key` forgets it, None keeps it. The web form
    and `manage.py set_provider_key` both come here."""
    if encodings is not None:
        names = list(dict.fromkeys(e for e in encodings if e))
        unknown = [n for n in names if n not in tokens.OFFLINE_ENCODINGS]
        if not names or unknown:
            raise TeamError(f"Encodings must be among {', '.join(tokens.OFFLINE_ENCODINGS)}.")
        team.token_encodings = names
    if context_window is not None:
        team.context_window = context_window
    if model:
        team.anthropic_model = model
    if protocol_era:
        team.protocol_era = protocol_era
    if loading_client is not None:
        team.loading_client = loading_client
    if tool_search is not None:
        team.tool_search = tool_search
    if remove_key:
        team.provider_keys = {k: v for k, v in (team.provider_keys or {}).items() if k != "anthropic"}
    elif key:
        team.provider_keys = {**(team.provider_keys or {}), "anthropic": key}
    team.save()
    logger.info(
        "%s set the counting of team %s: encodings %s, key %s",
        by or "a command",
        team.slug,
        team.tracked_encodings(),
        "stored" if (team.provider_keys or {}).get("anthropic") else "none",
    )
    return team
