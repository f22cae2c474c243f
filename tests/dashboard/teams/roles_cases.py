"""The request cases of the role-matrix test (tests/dashboard/teams/test_permissions.py): the `Case`
shape, its helpers, and the entries of the team and membership pages.

Each entry names the least role a page or change needs, written from docs/roles.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dashboard.servers.models import Stack
from dashboard.teams.models import Invite, Membership, Team
from tests.dashboard.teams.roles_world import World

RANK = {"viewer": 0, "member": 1, "admin": 2, "owner": 3}
PUBLIC, LOGIN = "public", "login"  # anyone at all; any logged-in user, of any team or none

Kwargs = Callable[[World], dict[str, Any]]
Effect = Callable[[World, list[Any]], bool]


@dataclass(frozen=True)
class Case:
    """One request: `least` is the least role it needs (or PUBLIC / LOGIN)."""

    method: str
    least: str
    kwargs: Kwargs = lambda w: {"team_slug": w.team.slug}
    data: Callable[[World], dict[str, Any]] = lambda w: {}
    # Did the change happen? (for a POST; the captured on-commit callbacks are the queued tasks)
    changed: Effect | None = None
    query: str = ""
    htmx: bool = False
    # From this role up, a role below `least` is still answered normally (2xx/3xx) but the change
    # is left undone: the stack import skips what the importer may not edit and says so, the
    # server form refuses stdio with a form error. Below it: 404.
    answered: str = ""
    label: str = ""


def team(w: World) -> dict[str, Any]:
    return {"team_slug": w.team.slug}


def server(which: str) -> Kwargs:
    return lambda w: {"team_slug": w.team.slug, "code": getattr(w, which).code}


def obj(key: str, attr: str, pk: str = "pk") -> Kwargs:
    return lambda w: {"team_slug": w.team.slug, key: getattr(getattr(w, attr), pk)}


def gone(attr: str) -> Effect:
    return lambda w, _: w.fresh(getattr(w, attr)) is None


def queued(w: World, callbacks: list[Any]) -> bool:
    return len(callbacks) > 0


SEE = "viewer"


def membership_of(role: str) -> Kwargs:
    """The URL kwargs naming the membership of the world's user of `role` (or "co-owner")."""
    return lambda w: {"team_slug": w.team.slug, "membership_id": w.memberships[role].pk}


def role_now(role: str, expected: str) -> Effect:
    return lambda w, _: w.fresh(w.memberships[role]).role == expected


def member_gone(role: str) -> Effect:
    return lambda w, _: w.fresh(w.memberships[role]) is None


def someone_left(w: World, _: list[Any]) -> bool:
    return Membership.objects.filter(team=w.team).count() < len(w.memberships)


def invited(email: str, role: str) -> Effect:
    return lambda w, _: Invite.objects.filter(team=w.team, email=email, role=role).exists()


def revoked(attr: str) -> Effect:
    return lambda w, _: w.fresh(getattr(w, attr)).revoked_at is not None


MEMBERSHIP_TABLE: dict[str, list[Case]] = {
    "team_create": [
        Case("GET", LOGIN, kwargs=lambda w: {}),
        Case(
            "POST",
            LOGIN,
            kwargs=lambda w: {},
            data=lambda w: {"name": "Fresh start"},
            changed=lambda w, _: Team.objects.filter(name="Fresh start").exists(),
        ),
    ],
    "team_members": [Case("GET", SEE)],
    "member_role": [
        Case(
            "POST",
            "admin",
            membership_of("member"),
            lambda w: {"role": "viewer"},
            role_now("member", "viewer"),
            label="member to viewer",
        ),
        Case(
            "POST",
            "admin",
            membership_of("member"),
            lambda w: {"role": "admin"},
            role_now("member", "admin"),
            htmx=True,
            label="member to admin htmx",
        ),
        Case(
            "POST",
            "owner",
            membership_of("viewer"),
            lambda w: {"role": "owner"},
            role_now("viewer", "owner"),
            label="make an owner",
        ),
        Case(
            "POST",
            "owner",
            membership_of("co-owner"),
            lambda w: {"role": "admin"},
            role_now("co-owner", "admin"),
            label="demote an owner",
        ),
    ],
    "member_remove": [
        Case("POST", "admin", membership_of("viewer"), changed=member_gone("viewer"), label="a viewer"),
        Case("POST", "owner", membership_of("co-owner"), changed=member_gone("co-owner"), label="an owner"),
    ],
    # With a co-owner in the world, even the owner may leave; the last-owner rule is tested apart.
    "team_leave": [Case("POST", SEE, changed=someone_left)],
    "invite_create": [
        Case(
            "POST",
            "admin",
            data=lambda w: {"role": "member", "email": "new@example.com"},
            changed=invited("new@example.com", "member"),
            label="member by e-mail",
        ),
        Case(
            "POST",
            "owner",
            data=lambda w: {"role": "owner", "email": ""},
            changed=invited("", "owner"),
            label="owner by link",
        ),
    ],
    "invite_revoke": [
        Case("POST", "admin", obj("invite_id", "invite"), changed=revoked("invite"), label="member invite"),
        Case(
            "POST",
            "owner",
            obj("invite_id", "owner_invite"),
            changed=revoked("owner_invite"),
            htmx=True,
            label="owner invite",
        ),
    ],
    # The page of a valid link answers anyone (a visitor signs up there); test_invites.py walks
    # joining, signing up and the links that no longer work.
    "invite_accept": [Case("GET", PUBLIC, kwargs=lambda w: {"token": w.invite_token})],
}


def server_form(w: World, name: str, **extra: str) -> dict[str, Any]:
    base = {
        "name": name,
        "transport": "http",
        "url": "http://127.0.0.1:9/edited",
        "cwd": "",
        "poll_interval_seconds": "3600",
        "enabled": "on",
        "command_line": "",
        "env_text": "",
        "headers_text": "",
    }
    return {**base, **extra}


def edited(which: str) -> Effect:
    return lambda w, _: w.fresh(getattr(w, which)).poll_interval_seconds == 3600


def import_over(
    name: str, url: str, *, into: str = "mine", own: bool = False
) -> Callable[[World], dict[str, Any]]:
    """Import `name` at `url` into stack `into`.

    An import changes a server only through the one stack that holds it (one server identity
    across stacks): the admin's server sits in the world's "agent" stack; with `own`, the member's
    own server is first put in a stack "mine" the member imported.
    """
    config = json.dumps({"mcpServers": {name: {"type": "http", "url": url}}})

    def data(w: World) -> dict[str, Any]:
        if own:
            mine = Stack.objects.create(team=w.team, name=into, owner=w.users["member"])
            mine.servers.set([w.own_http])
        return {"stack_name": into, "config_text": config}

    return data


def url_of(which: str, url: str) -> Effect:
    return lambda w, _: w.fresh(getattr(w, which)).url == url
