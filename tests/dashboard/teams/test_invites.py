"""Invites end to end through the test client: mailed and hand-on links, signing up on the accept
page, single use, expiry (a shifted clock, no sleeping), revoking, and the owner-role rule."""

from __future__ import annotations

import re
import socket
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard.teams.models import Invite, Membership

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "violet-harbour-417"


@pytest.fixture
def clock(monkeypatch):
    """`timezone.now()` moved forward by `clock["ahead"]`, for the code under test and the test."""
    real = timezone.now
    state = {"ahead": timedelta(0)}
    monkeypatch.setattr(timezone, "now", lambda: real() + state["ahead"])
    return state


def _invite(client, team, role="member", email=""):
    response = client.post(reverse("invite_create", args=[team.slug]), {"role": role, "email": email})
    assert response.status_code == 200, response.content[:300]
    return response


def _link(response) -> str:
    """The accept path from the "invite created" page (the one time it is shown)."""
    match = re.search(r'<pre[^>]*id="invite-link">([^<]+)</pre>', response.content.decode())
    assert match, "the page shows the link"
    return match.group(1).strip()


def _path(url: str) -> str:
    match = re.search(r"(/invite/[^/\s]+/)", url)
    assert match, url
    return match.group(1)


def test_an_emailed_invite_lets_a_visitor_sign_up_and_join(alice_client, team, settings):
    settings.SITE_URL = "https://tax.example.com/"
    settings.INVITE_LINK_DAYS = 7
    created = _invite(alice_client, team, role="viewer", email="dana@example.com")
    assert 'id="mail-sent"' in created.content.decode()

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["dana@example.com"]
    assert "alice invites you to Platform" in message.subject
    links = re.findall(r"https://tax\.example\.com/invite/\S+/", message.body)
    assert len(links) == 1, message.body
    assert links[0] == _link(created)
    invite = Invite.objects.get(team=team)
    assert invite.role == "viewer" and invite.email == "dana@example.com" and invite.status == "pending"
    # Stored hashed: the token is not in the row, and never shown again on the members page.
    token = links[0].rstrip("/").rsplit("/", 1)[1]
    assert token.split("_", 1)[1] not in invite.secret_hash and len(invite.secret_hash) == 64
    members_page = alice_client.get(reverse("team_members", args=[team.slug])).content.decode()
    assert token not in members_page and invite.display in members_page
    assert (invite.expires_at - invite.created) == timedelta(days=7)

    visitor = Client()
    page = visitor.get(_path(links[0]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Join Platform" in text and "viewer" in text and 'value="dana@example.com"' in text

    # Django's password validators apply: a common password is refused and nothing is created.
    weak = visitor.post(
        _path(links[0]),
        {"username": "dana", "email": "dana@example.com", "password1": "password", "password2": "password"},
    )
    assert weak.status_code == 200 and "too common" in weak.content.decode()
    assert not User.objects.filter(username="dana").exists()
    assert Invite.objects.get(pk=invite.pk).status == "pending"

    joined = visitor.post(
        _path(links[0]),
        {
            "username": "dana",
            "email": "dana@example.com",
            "password1": GOOD_PASSWORD,
            "password2": GOOD_PASSWORD,
        },
    )
    assert joined.status_code == 302 and joined["Location"] == reverse("team_overview", args=[team.slug])
    dana = User.objects.get(username="dana")
    assert dana.email == "dana@example.com" and dana.check_password(GOOD_PASSWORD)
    assert Membership.objects.get(team=team, user=dana).role == "viewer"
    # Logged in: the team's pages open.
    assert visitor.get(reverse("team_overview", args=[team.slug])).status_code == 200
    invite.refresh_from_db()
    assert invite.status == "accepted" and invite.accepted_by == dana


def test_a_link_works_once(alice_client, team, user_factory, client):
    link = _link(_invite(alice_client, team, role="admin"))
    assert not mail.outbox  # a link without an address is handed on by hand
    bob, carol = user_factory("bob"), user_factory("carol")
    client.force_login(bob)
    page = client.get(_path(link))
    assert page.status_code == 200 and 'id="join"' in page.content.decode()
    assert client.post(_path(link)).status_code == 302
    assert Membership.objects.get(team=team, user=bob).role == "admin"

    other = Client()
    other.force_login(carol)
    again = other.post(_path(link))
    assert again.status_code == 410 and "already been used" in again.content.decode()
    assert not Membership.objects.filter(team=team, user=carol).exists()
    # A visitor trying to sign up through the used link gets the same answer, and no account.
    signup = Client().post(
        _path(link), {"username": "eve", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD}
    )
    assert signup.status_code == 410 and not User.objects.filter(username="eve").exists()


def test_a_link_expires_after_invite_link_days(alice_client, team, user_factory, settings, clock):
    settings.INVITE_LINK_DAYS = 2
    link = _path(_link(_invite(alice_client, team)))
    bob = user_factory("bob")
    visitor = Client()
    visitor.force_login(bob)
    clock["ahead"] = timedelta(days=1, hours=23)
    assert visitor.get(link).status_code == 200  # still valid just before the end
    clock["ahead"] = timedelta(days=2, minutes=1)
    page = visitor.get(link)
    assert page.status_code == 410 and "expired on" in page.content.decode()
    assert visitor.post(link).status_code == 410
    assert not Membership.objects.filter(team=team, user=bob).exists()
    # It is listed as expired, no longer as pending.
    members_page = alice_client.get(reverse("team_members", args=[team.slug])).content.decode()
    assert "No pending invites." in members_page and "expired on" in members_page


def test_a_revoked_link_says_so_and_an_unknown_one_is_not_found(alice_client, team, user_factory):
    link = _path(_link(_invite(alice_client, team)))
    invite = Invite.objects.get(team=team)
    revoke = alice_client.post(reverse("invite_revoke", args=[team.slug, invite.pk]), HTTP_HX_REQUEST="true")
    assert revoke.status_code == 200 and "revoked" in revoke.content.decode()
    assert "<tr" in revoke.content.decode() and "<html" not in revoke.content.decode()
    invite.refresh_from_db()
    assert invite.revoked_by is not None and invite.revoked_by.username == "alice"

    page = Client().get(link)
    assert page.status_code == 410 and "revoked" in page.content.decode()
    tampered = link[:-3] + "xx/"
    missing = Client().get(tampered)
    assert missing.status_code == 404 and "not valid" in missing.content.decode()


def test_accepting_when_already_a_member_leaves_the_invite_unused(alice_client, team):
    link = _path(_link(_invite(alice_client, team)))
    page = alice_client.get(link)
    assert 'id="already-member"' in page.content.decode()
    response = alice_client.post(link, follow=True)
    assert "already a member" in response.content.decode()
    assert Invite.objects.get(team=team).status == "pending"
    assert Membership.objects.get(team=team, user__username="alice").role == "owner"


def test_an_admin_cannot_invite_an_owner(client, team, user_factory):
    admin = user_factory("adam")
    Membership.objects.create(team=team, user=admin, role="admin")
    client.force_login(admin)
    page = client.get(reverse("team_members", args=[team.slug])).content.decode()
    form = page[page.index('id="invite-form"') :]
    assert 'value="admin"' in form and 'value="owner"' not in form.split("</form>")[0]
    refused = client.post(reverse("invite_create", args=[team.slug]), {"role": "owner", "email": ""})
    assert refused.status_code == 404 and not Invite.objects.exists()
    assert client.post(reverse("invite_create", args=[team.slug]), {"role": "admin"}).status_code == 200
    assert Invite.objects.get().role == "admin"


def test_bad_invites_are_refused_with_a_reason(alice_client, team, alice):
    alice.email = "alice@example.com"
    alice.save()
    response = alice_client.post(
        reverse("invite_create", args=[team.slug]),
        {"role": "member", "email": "ALICE@example.com"},
        follow=True,
    )
    assert "already a member of Platform (alice)" in response.content.decode()
    response = alice_client.post(
        reverse("invite_create", args=[team.slug]), {"role": "member", "email": "not-an-address"}, follow=True
    )
    assert "The invite was not created" in response.content.decode()
    response = alice_client.post(reverse("invite_create", args=[team.slug]), {"role": "boss"}, follow=True)
    assert "The invite was not created" in response.content.decode()
    assert not Invite.objects.exists() and not mail.outbox


def test_a_mail_server_that_refuses_leaves_a_valid_link_to_hand_on(alice_client, team, settings):
    with socket.socket() as s:  # a port nothing listens on: the SMTP connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", port, False
    settings.EMAIL_TIMEOUT = 5
    response = _invite(alice_client, team, email="dana@example.com")
    text = response.content.decode()
    assert 'id="mail-error"' in text and "could not be sent" in text
    link = _path(_link(response))
    assert Client().get(link).status_code == 200 and Invite.objects.get().status == "pending"


def test_a_taken_username_is_a_form_error_and_the_invite_stays(alice_client, team, user_factory):
    user_factory("bob")
    link = _path(_link(_invite(alice_client, team)))
    response = Client().post(
        link, {"username": "bob", "password1": GOOD_PASSWORD, "password2": GOOD_PASSWORD}
    )
    assert response.status_code == 200 and "already exists" in response.content.decode()
    assert Invite.objects.get().status == "pending" and team.memberships.count() == 1
