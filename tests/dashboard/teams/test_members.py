"""Creating a team, the first login, the members page: roles, removing, leaving, the last owner."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from dashboard.teams.models import Membership, Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(team, alice, user_factory):
    """Platform with alice (owner), an admin, a member and a viewer."""
    people = {"owner": alice}
    for role in ("admin", "member", "viewer"):
        people[role] = user_factory(f"{role}-user")
        Membership.objects.create(team=team, user=people[role], role=role)
    return people


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _role(team, user) -> str | None:
    m = Membership.objects.filter(team=team, user=user).first()
    return m.role if m else None


def test_a_first_login_of_a_fresh_superuser_lands_on_create_your_team(client, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "violet-harbour-417")
    call_command("createsuperuser", "--noinput", "--username", "root", "--email", "root@example.com")
    login = client.post(reverse("login"), {"username": "root", "password": "violet-harbour-417"}, follow=True)
    assert login.redirect_chain[-1][0] == reverse("team_create")
    text = login.content.decode()
    assert "Create your team" in text and "You are in none yet" in text

    created = client.post(reverse("team_create"), {"name": "Research"}, follow=True)
    team = Team.objects.get(name="Research")
    assert created.redirect_chain[-1][0] == reverse("team_members", args=[team.slug])
    assert (
        _role(team, team.memberships.get().user) == "owner" and team.memberships.get().user.username == "root"
    )
    assert "you are its owner" in created.content.decode() and 'id="invite-form"' in created.content.decode()
    # From now on the landing page is the team.
    assert client.get(reverse("home"))["Location"] == reverse("team_overview", args=[team.slug])


def test_team_names_are_unique_among_my_teams_and_checked(alice_client, team):
    page = alice_client.get(reverse("team_create")).content.decode()
    assert "Create a team" in page and "Create your team" not in page  # alice has a team already
    duplicate = alice_client.post(reverse("team_create"), {"name": "platform"})
    assert duplicate.status_code == 200 and "You already have a team named" in duplicate.content.decode()
    control = alice_client.post(reverse("team_create"), {"name": "two\nlines"})
    assert control.status_code == 200 and "control characters" in control.content.decode()
    assert Team.objects.count() == 1
    # The same slug from another spelling gets its own slug, never someone else's.
    alice_client.post(reverse("team_create"), {"name": "Platform!"})
    new = Team.objects.exclude(pk=team.pk).get()
    assert new.slug != "platform" and re.fullmatch(r"platform-[0-9a-f]{6}", new.slug)


def test_create_team_does_not_tell_whether_another_users_team_name_exists(client, team, user_factory):
    """Mallory, in no team, probes for "Platform" (alice's) and for a name nobody uses: both are
    created alike, and neither answer nor slug says which one existed."""
    mallory = user_factory("mallory")
    client.force_login(mallory)
    answers = {}
    for name in ("Platform", "Nobody Uses This"):
        response = client.post(reverse("team_create"), {"name": name})
        created = Team.objects.get(name=name, memberships__user=mallory)
        assert response.status_code == 302 and response["Location"] == reverse(
            "team_members", args=[created.slug]
        )
        answers[name] = re.sub(r"-[0-9a-f]{6}$", "-X", created.slug)
    assert answers == {"Platform": "platform-X", "Nobody Uses This": "nobody-uses-this-X"}
    assert Team.objects.filter(name__iexact="platform").count() == 2  # alice's is untouched


def test_the_switcher_lists_my_teams_marks_the_current_one_and_offers_create(
    alice_client, team, team_factory, alice
):
    other = team_factory("Zeta", alice)
    team_factory("Not mine")
    page = alice_client.get(reverse("team_members", args=[other.slug])).content.decode()
    switcher = page[page.index('id="team-switcher"') : page.index("</select>")]
    assert f'value="{reverse("team_overview", args=[other.slug])}" selected' in switcher
    assert f'value="{reverse("team_overview", args=[team.slug])}">' in switcher
    assert "Not mine" not in switcher
    assert f'value="{reverse("team_create")}">+ Create a team' in switcher


def test_roles_change_within_the_matrix(crew, team):
    owner, admin = _as(crew["owner"]), _as(crew["admin"])
    member = Membership.objects.get(team=team, user=crew["member"])
    row = admin.post(
        reverse("member_role", args=[team.slug, member.pk]), {"role": "admin"}, HTTP_HX_REQUEST="true"
    )
    text = row.content.decode()
    assert row.status_code == 200 and text.lstrip().startswith("<tr") and 'data-role="admin"' in text
    assert "is now admin" in text and _role(team, crew["member"]) == "admin"
    # The owner's row is not the admin's to change, and neither is handing out the owner role.
    alice = Membership.objects.get(team=team, user=crew["owner"])
    assert (
        admin.post(reverse("member_role", args=[team.slug, alice.pk]), {"role": "viewer"}).status_code == 404
    )
    viewer = Membership.objects.get(team=team, user=crew["viewer"])
    assert (
        admin.post(reverse("member_role", args=[team.slug, viewer.pk]), {"role": "owner"}).status_code == 404
    )
    assert _role(team, crew["owner"]) == "owner" and _role(team, crew["viewer"]) == "viewer"
    # An owner may make another owner.
    assert (
        owner.post(reverse("member_role", args=[team.slug, viewer.pk]), {"role": "owner"}).status_code == 302
    )
    assert _role(team, crew["viewer"]) == "owner"
    # A member may change no one.
    assert (
        _as(crew["member"])
        .post(reverse("member_role", args=[team.slug, viewer.pk]), {"role": "viewer"})
        .status_code
        == 404
    )
    assert _role(team, crew["viewer"]) == "owner"


def test_the_last_owner_keeps_the_role_and_cannot_be_removed_or_leave(crew, team):
    owner = _as(crew["owner"])
    alice = Membership.objects.get(team=team, user=crew["owner"])
    demote = owner.post(reverse("member_role", args=[team.slug, alice.pk]), {"role": "admin"}, follow=True)
    assert "last owner" in demote.content.decode() and _role(team, crew["owner"]) == "owner"
    row = owner.post(
        reverse("member_role", args=[team.slug, alice.pk]), {"role": "member"}, HTTP_HX_REQUEST="true"
    )
    assert "last owner" in row.content.decode() and 'data-role="owner"' in row.content.decode()
    remove = owner.post(reverse("member_remove", args=[team.slug, alice.pk]), follow=True)
    assert "last owner" in remove.content.decode()
    leave = owner.post(reverse("team_leave", args=[team.slug]), follow=True)
    assert "last owner" in leave.content.decode() and _role(team, crew["owner"]) == "owner"

    # With a second owner, the first may step down, and then leave is open to the other... until
    # they are the last one again.
    admin_m = Membership.objects.get(team=team, user=crew["admin"])
    owner.post(reverse("member_role", args=[team.slug, admin_m.pk]), {"role": "owner"})
    self_demote = owner.post(
        reverse("member_role", args=[team.slug, alice.pk]), {"role": "admin"}, HTTP_HX_REQUEST="true"
    )
    assert self_demote.status_code == 200 and self_demote["HX-Redirect"] == reverse(
        "team_members", args=[team.slug]
    )
    assert _role(team, crew["owner"]) == "admin"
    second = _as(crew["admin"])
    assert "last owner" in second.post(reverse("team_leave", args=[team.slug]), follow=True).content.decode()
    assert Membership.objects.filter(team=team, role="owner").count() == 1


def test_removing_and_leaving(crew, team):
    admin = _as(crew["admin"])
    viewer = Membership.objects.get(team=team, user=crew["viewer"])
    removed = admin.post(reverse("member_remove", args=[team.slug, viewer.pk]), follow=True)
    assert "viewer-user is no longer a member" in removed.content.decode()
    assert _role(team, crew["viewer"]) is None
    # Gone means gone: the team's pages are a 404 for them now.
    assert _as(crew["viewer"]).get(reverse("team_overview", args=[team.slug])).status_code == 404

    member = _as(crew["member"])
    left = member.post(reverse("team_leave", args=[team.slug]), follow=True)
    assert _role(team, crew["member"]) is None and "You left Platform" in left.content.decode()
    assert left.redirect_chain[-1][0] == reverse("team_create")  # no team left: make one
    # An admin cannot remove the owner.
    alice = Membership.objects.get(team=team, user=crew["owner"])
    assert admin.post(reverse("member_remove", args=[team.slug, alice.pk])).status_code == 404
    assert _role(team, crew["owner"]) == "owner"


def test_the_members_page_shows_each_role_what_it_may_do(crew, team):
    pages = {
        role: _as(user).get(reverse("team_members", args=[team.slug])).content.decode()
        for role, user in crew.items()
    }
    assert all("alice" in p and "viewer-user" in p for p in pages.values())
    assert 'id="invite-form"' in pages["owner"] and 'id="invite-form"' in pages["admin"]
    assert 'id="invite-form"' not in pages["member"] and 'id="invite-form"' not in pages["viewer"]
    assert "Pending invites" not in pages["member"]
    assert all('id="leave-team"' in p for p in pages.values())
    # The admin sees role controls on the member's row but not on the owner's.
    admin_page = pages["admin"]
    alice_row = admin_page[admin_page.index(f'id="member-{Membership.objects.get(user=crew["owner"]).pk}"') :]
    assert "<select" not in alice_row.split("</tr>")[0]
    assert (
        'aria-label="Role of member-user"' in admin_page
        and 'aria-label="Role of member-user"' not in pages["member"]
    )


@pytest.mark.parametrize("page", ["token", "invite"])
def test_pages_that_show_a_new_secret_are_never_cached(alice_client, team, page):
    if page == "token":
        response = alice_client.post(reverse("create_api_token", args=[team.slug]), {"name": "ci"})
        assert "mcpt_" in response.content.decode()
    else:
        response = alice_client.post(reverse("invite_create", args=[team.slug]), {"role": "member"})
        assert "/invite/" in response.content.decode()
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
