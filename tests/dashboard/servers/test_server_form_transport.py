"""The server form marks each transport-specific field, so the page shows only the chosen
transport's fields (static/js/app.js); without JS every field stays visible."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_fields_are_marked_with_their_transports(alice_client, team):
    html = alice_client.get(reverse("server_add", args=[team.slug])).content.decode()
    assert "data-transport-form" in html
    pattern = r'data-transports="([^"]+)">\s*<label for="id_([a-z_]+)"'
    by_field = {field: transports for transports, field in re.findall(pattern, html)}
    assert by_field == {
        "url": "http sse",
        "headers_text": "http sse",
        "command_line": "stdio",
        "env_text": "stdio",
        "cwd": "stdio",
    }
    # Name, transport, interval and enabled belong to every transport: not marked.
    assert not re.search(r'data-transports="[^"]+">\s*<label for="id_name"', html)


def _form(name: str, **extra: str) -> dict[str, str]:
    from tests.dashboard.teams.test_permissions import server_form

    return server_form(None, name, **extra)


def test_a_transport_change_drops_the_environment_and_headers_a_member_planted(
    client, team, alice, user_factory
):
    """A member saves an HTTP server carrying BASH_ENV; an admin turns it into stdio without looking
    at the environment: nothing planted may run. What the admin enters now is kept."""
    from dashboard.servers.models import McpServer
    from dashboard.teams.models import Membership

    mallory = user_factory("mallory")
    Membership.objects.create(team=team, user=mallory, role=Membership.Role.MEMBER)
    client.force_login(mallory)
    planted = _form("docs", env_text="BASH_ENV=/tmp/pwn.sh", headers_text="X-Token: member-secret")
    assert client.post(reverse("server_add", args=[team.slug]), planted).status_code == 302
    server = McpServer.objects.get(team=team, name="docs")
    assert server.headers == {"X-Token": "member-secret"}

    client.force_login(alice)  # the owner converts it
    edit = reverse("server_edit", args=[team.slug, server.code])
    to_stdio = _form("docs", transport="stdio", url="", command_line="python -m docs_server")
    assert client.post(edit, to_stdio).status_code == 302
    server.refresh_from_db()
    assert (server.transport, server.command, server.env, server.headers) == ("stdio", "python", {}, {})

    # Re-entered by the person making the change: kept. An unchanged transport keeps its own.
    again = _form("docs", transport="stdio", url="", command_line="python -m docs_server", env_text="LOG=1")
    assert client.post(edit, again).status_code == 302
    assert client.post(edit, {**again, "env_text": ""}).status_code == 302
    server.refresh_from_db()
    assert server.env == {"LOG": "1"}
    back = _form("docs", headers_text="Authorization: Bearer admin")
    assert client.post(edit, back).status_code == 302
    server.refresh_from_db()
    assert (server.env, server.headers) == ({}, {"Authorization": "Bearer admin"})
