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
    query = f"pending={token.replace(':', '%3A')}&amp;first=1&amp;shown=0"
    assert f'hx-get="{status}?{query}" hx-trigger="every 2s"' in page

    waiting = alice_client.get(status, {"pending": token, "first": "1", "shown": "0"}, HTTP_HX_REQUEST="true")
    assert waiting.status_code == 200 and "first poll due…" in waiting.content.decode()
    record(server, [tool("read", "Read a file.")], "1.0")
    McpServer.objects.filter(pk=server.pk).update(last_poll_at=timezone.now(), last_outcome="ok")
    landed = alice_client.get(status, {"pending": token, "shown": "0"}, HTTP_HX_REQUEST="true")
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


def test_the_body_lands_with_the_header_while_the_poll_still_runs(alice_client, team):
    """The poll makes its snapshot current, then still has work left (its run, the lock). The header
    shows the new snapshot from then on, so the status answer that first shows it carries the body
    too: the page never shows "No snapshot yet" under a header with the new figures (seen when
    the README's first run was followed in a browser)."""
    server = http_server(team, "files")
    status = reverse("server_status", args=[team.slug, server.code])
    token = pending_token(server, server.created)
    McpServer.objects.filter(pk=server.pk).update(polling_since=timezone.now())  # a worker took it
    snapshot = record(server, [tool("read", "Read a file."), tool("write", "Write a file.")], "1.0")
    moved = alice_client.get(status, {"pending": token, "first": "1", "shown": "0"}, HTTP_HX_REQUEST="true")
    html = moved.content.decode()
    assert moved.status_code == 200, "still polling: the lock is held"
    assert 'id="current-tax"' in html and "polling…" in html
    assert '<div id="server-body" hx-swap-oob="true">' in html
    assert html.count("data-tool=") == 2 and 'id="no-snapshot"' not in html
    assert "HX-Trigger" not in moved, "the poll has not finished: no pollFinished yet"
    assert f"shown={snapshot.pk}" in html  # the next status asks about this snapshot
    same = alice_client.get(
        status, {"pending": token, "first": "1", "shown": str(snapshot.pk)}, HTTP_HX_REQUEST="true"
    )
    assert same.status_code == 200 and "server-body" not in same.content.decode()
