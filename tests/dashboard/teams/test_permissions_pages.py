"""Roles as the pages show them: each role's page leaves out the controls it may not use (the
server refuses them anyway: test_permissions.py walks every URL), and the membership roles are the
roles of the permission matrix.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dashboard.teams.roles_cases import RANK

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def test_pages_hide_the_controls_a_role_lacks(client, role_world):
    """The server's refusal is what counts (test_permissions.py); the pages also leave out what would be refused."""
    world = role_world
    slug = world.team.slug
    pages = {
        "poll": reverse("server_detail", args=[slug, world.stdio.code]),
        "budget": reverse("budgets", args=[slug]),
        "ack": reverse("alert_list", args=[slug]),
        "upload": reverse("ingest_home", args=[slug]),
        "import": reverse("stacks", args=[slug]),
    }
    markers = {
        "poll": 'id="poll-now"',
        "budget": "Add a budget",
        "ack": "Acknowledge</button>",
        "upload": 'id="upload-form"',
        "import": "Import an MCP client config",
    }
    shown = {}
    for role in ("admin", "member", "viewer"):
        client.force_login(world.users[role])
        shown[role] = {key: markers[key] in client.get(url).content.decode() for key, url in pages.items()}
    assert shown["admin"] == dict.fromkeys(pages, True)
    assert shown["member"] == {"poll": False, "budget": False, "ack": True, "upload": True, "import": True}
    assert shown["viewer"] == dict.fromkeys(pages, False)


def test_the_membership_roles_are_the_matrix_roles():
    from dashboard.teams.models import Membership
    from dashboard.teams.permissions import MATRIX, Action, Role, allows

    assert set(Membership.Role.values) == {r.value for r in Role} == set(RANK)
    assert set(MATRIX) == set(Action), "every action needs its least role"
    # Not a member at all, or a role the matrix does not know, may do nothing.
    assert not any(allows(None, a) or allows("guest", a) for a in Action)
