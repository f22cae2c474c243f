"""Who may see the fixed-tax pages: another team's servers are not found, and every page wants a
login (the role matrix in tests/dashboard/teams covers what each role may do)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.servers.models import McpServer
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def test_another_teams_servers_are_not_found(alice_client, team, user_factory, team_factory):
    bob = user_factory("bob")
    other = team_factory("Other", bob)
    theirs = http_server(other, "theirs")
    snap = record(theirs, [tool("a", "x")], "1")
    mine = http_server(team, "mine")
    my_snap = record(mine, [tool("a", "x")], "1")
    for name in ("server_detail", "server_status", "snapshot_diff", "server_edit", "server_delete"):
        assert alice_client.get(reverse(name, args=[other.slug, theirs.code])).status_code == 404, name
        # Their server's code under my team's slug is no better.
        assert alice_client.get(reverse(name, args=[team.slug, theirs.code])).status_code == 404, name
    assert alice_client.post(reverse("poll_now", args=[team.slug, theirs.code])).status_code == 404
    assert alice_client.post(reverse("server_delete", args=[team.slug, theirs.code])).status_code == 404
    assert McpServer.objects.filter(pk=theirs.pk).exists()
    # Another server's snapshot in a diff of mine is not found either.
    diff = reverse("snapshot_diff", args=[team.slug, mine.code])
    assert alice_client.get(diff, {"a": snap.pk, "b": my_snap.pk}).status_code == 404
    assert (
        alice_client.get(reverse("server_detail", args=[team.slug, mine.code]), {"at": snap.pk})
        .context["snapshot"]
        .pk
        == my_snap.pk
    )
    assert alice_client.get(reverse("stacks", args=[other.slug])).status_code == 404


def test_pages_need_login(client, team):
    server = http_server(team, "x")
    for url in (
        reverse("team_overview", args=[team.slug]),
        reverse("server_detail", args=[team.slug, server.code]),
        reverse("snapshot_diff", args=[team.slug, server.code]),
        reverse("stacks", args=[team.slug]),
    ):
        assert client.get(url).status_code == 302
