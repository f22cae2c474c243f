"""After the first poll, the server page's empty state fetches the whole body again (htmx)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def test_the_empty_server_page_refreshes_its_whole_body_when_the_poll_finishes(alice_client, team):
    server = http_server(team, "files")
    url = reverse("server_detail", args=[team.slug, server.code])
    empty = alice_client.get(url).content.decode()
    assert 'id="no-snapshot"' in empty
    assert 'hx-trigger="pollFinished from:body" hx-select="#server-body" hx-target="#server-body"' in empty
    record(server, [tool("read", "Read a file.")], "1.0")
    # What htmx asks for then: the page, from which it selects #server-body.
    after = alice_client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="server-body")
    html = after.content.decode()
    assert 'id="server-body"' in html and 'id="chart-region"' in html and 'id="tools-region"' in html
    assert 'id="no-snapshot"' not in html
    assert "HX-Request" in after["Vary"]
