"""Team pages: login, team scoping, API tokens."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone


def test_login_page_and_demo_user_can_log_in(client, db):
    assert client.get(reverse("home")).status_code == 302
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="password"' in page.content
    out = StringIO()
    call_command("demo", "--json", "--skip-servers", stdout=out)
    demo = json.loads(out.getvalue().strip().splitlines()[-1])
    response = client.post(reverse("login"), {"username": demo["username"], "password": demo["password"]})
    assert response.status_code == 302
    overview = client.get(reverse("home"), follow=True)
    assert overview.status_code == 200
    assert overview.redirect_chain[-1][0] == reverse("team_overview", args=[demo["team"]])


def test_another_teams_pages_are_not_found(alice_client, team, user_factory, team_factory):
    bob = user_factory("bob")
    other = team_factory("Other", bob)
    assert alice_client.get(reverse("team_settings", args=[team.slug])).status_code == 200
    assert alice_client.get(reverse("team_overview", args=[other.slug])).status_code == 404
    assert alice_client.get(reverse("team_settings", args=[other.slug])).status_code == 404
    token_id = other.api_tokens.create(name="x", key_id="abc", secret_hash="0" * 64).pk
    response = alice_client.post(reverse("revoke_api_token", args=[other.slug, token_id]))
    assert response.status_code == 404
    assert other.api_tokens.get(pk=token_id).revoked_at is None


def test_api_tokens_are_shown_once_stored_hashed_and_revocable(alice_client, team, client):
    response = alice_client.post(reverse("create_api_token", args=[team.slug]), {"name": "github-actions"})
    assert response.status_code == 200
    plaintext = response.context["plaintext"]
    assert plaintext.startswith("mcpt_")
    token = team.api_tokens.get(name="github-actions")
    assert plaintext.split("_", 2)[2] not in token.secret_hash and len(token.secret_hash) == 64
    assert plaintext not in alice_client.get(reverse("team_settings", args=[team.slug])).content.decode()

    api = client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert api.status_code == 200 and api.json()["slug"] == team.slug
    assert client.get("/api/v1/team").status_code == 401
    assert client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}x").status_code == 401

    revoke = alice_client.post(
        reverse("revoke_api_token", args=[team.slug, token.pk]), HTTP_HX_REQUEST="true"
    )
    assert revoke.status_code == 200 and b"revoked" in revoke.content
    assert client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 401


def test_members_cannot_create_tokens(client, team, user_factory):
    from dashboard.teams.models import Membership

    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    client.force_login(carol)
    assert client.post(reverse("create_api_token", args=[team.slug]), {"name": "x"}).status_code == 404
    assert not team.api_tokens.exists()


def _login(client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address)


def test_five_wrong_passwords_lock_the_username_from_that_address_until_the_cool_off(
    client, alice, team, team_token
):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.test import Client

    for _ in range(4):
        response = _login(client, "alice", "wrong-guess")
        assert response.status_code == 200 and "didn't match" in response.content.decode()
    assert _login(client, "alice", "wrong-guess").status_code == 429  # the fifth failure locks
    # The right password is refused now: the locked page, no session.
    locked = _login(client, "alice", "pw-for-tests-123")
    assert locked.status_code == 429 and 'id="locked-out"' in locked.content.decode()
    assert "15 minutes" in locked.content.decode()
    assert client.get(reverse("home")).status_code == 302
    # The lock is per username and address: alice elsewhere, and bob here, are not locked.
    assert _login(Client(), "alice", "pw-for-tests-123", address="198.51.100.9").status_code == 302
    # API tokens never pass through the login, so the team's automation keeps working.
    _, plaintext = team_token
    api = Client().get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {plaintext}", REMOTE_ADDR="203.0.113.7")
    assert api.status_code == 200

    # Once the cool-off has passed since the last failure, the right password works again.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login(client, "alice", "pw-for-tests-123").status_code == 302
    assert client.get(reverse("home")).status_code == 302  # redirected to the team, not to login
    assert "/login/" not in client.get(reverse("home"))["Location"]


def test_an_admin_reset_lifts_a_lockout(client, alice):
    for _ in range(5):
        _login(client, "alice", "wrong-guess")
    assert _login(client, "alice", "pw-for-tests-123").status_code == 429
    call_command("axes_reset_username", "alice", stdout=StringIO())
    assert _login(client, "alice", "pw-for-tests-123").status_code == 302


def test_production_hashes_passwords_with_pbkdf2_at_a_million_rounds():
    """The suite hashes with MD5 for speed (tests/conftest.py); the product, as `manage.py` starts
    it, must still hash with PBKDF2-SHA256 at Django's 1,000,000 rounds."""
    import os

    from tests.helpers import manage_shell

    code = (
        "from django.contrib.auth.hashers import make_password\n"
        "algorithm, rounds, _salt, _hash = make_password('pw').split('$')\n"
        "print(algorithm, rounds)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    # The last line: `shell` may first say how many objects it imported.
    assert manage_shell(env, code).strip().splitlines()[-1].split() == ["pbkdf2_sha256", "1000000"]


def test_the_suite_hashes_with_the_fast_hasher(db, django_user_model):
    user = django_user_model.objects.create_user("speedy", password="pw-for-tests-123")
    assert user.password.startswith("md5$") and user.check_password("pw-for-tests-123")
