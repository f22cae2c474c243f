"""The server page's poll status: while a new server's first poll is due (or a requested poll
runs) the header polls its status; the answer that sees the poll land carries the whole page body
out of band, so every region shows the new snapshot; an older, never-polled server does not poll."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.servers.models import McpServer
from dashboard.servers.pending import FIRST_POLL_WAIT, pending_token
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def test_a_new_servers_status_polls_until_the_first_poll_lands_then_swaps_in_the_body(alice_client, team):
    server = http_server(team, "files")
    url = reverse("server_detail", args=[team.slug, server.code])
    page = alice_client.get(url).content.decode()
    assert 'id="no-snapshot"' in page and "the first poll is due now" in page
    assert "wait for" not in page
    status = reverse("server_status", args=[team.slug, server.code])
    token = pending_token(server, server.created)
    assert f'hx-get="{status}?pending={token.replace(":", "%3A")}&amp;first=1" hx-trigger="every 2s"' in page

    waiting = alice_client.get(status, {"pending": token, "first": "1"}, HTTP_HX_REQUEST="true")
    assert waiting.status_code == 200 and "first poll due…" in waiting.content.decode()
    record(server, [tool("read", "Read a file.")], "1.0")
    McpServer.objects.filter(pk=server.pk).update(last_poll_at=timezone.now(), last_outcome="ok")
    landed = alice_client.get(status, {"pending": token}, HTTP_HX_REQUEST="true")
    html = landed.content.decode()
    assert landed.status_code == 286  # stop polling
    assert html.index('id="status-region"') < html.index('<div id="server-body" hx-swap-oob="true">')
    for region in ("chart-region", "snapshot-figures", "tools-region", "snapshots-region", "polls-region"):
        assert f'id="{region}"' in html, region
    assert 'id="no-snapshot"' not in html
    assert "HX-Request" in landed["Vary"]


def test_an_older_never_polled_server_does_not_poll_and_says_what_to_do(alice_client, team):
    server = http_server(team, "files")
    McpServer.objects.filter(pk=server.pk).update(
        created=timezone.now() - FIRST_POLL_WAIT - timedelta(seconds=1)
    )
    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    assert 'hx-trigger="every 2s"' not in page
    assert "wait for the next scheduled poll (every 900 s)" in page
    assert "never polled" in page
