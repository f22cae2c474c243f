"""The server registration form."""

from __future__ import annotations

import json

import pytest

from dashboard.servers.config_import import Importer, import_config_text
from dashboard.servers.forms import ServerForm
from dashboard.teams.models import Membership
from tests.dashboard.factories import CLAUDE_CONFIG

pytestmark = pytest.mark.django_db


def test_non_admins_cannot_register_stdio_servers(team, user_factory):
    member = user_factory("member")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    data = {
        "name": "x",
        "transport": "stdio",
        "command_line": "echo hi",
        "poll_interval_seconds": 900,
        "enabled": True,
        "url": "",
        "cwd": "",
    }
    form = ServerForm(data, team=team, allow_stdio=False)
    assert not form.is_valid()
    assert "Only team owners and admins" in str(form.errors)
    form = ServerForm(data, team=team, allow_stdio=True)
    assert form.is_valid(), form.errors
    server = form.save()
    assert (server.command, server.args) == ("echo", ["hi"])
    http = ServerForm(
        {**data, "name": "h", "transport": "http", "url": "http://127.0.0.1:1/mcp"},
        team=team,
        allow_stdio=False,
    )
    assert http.is_valid(), http.errors
    (result,) = import_config_text(
        team,
        json.dumps(CLAUDE_CONFIG),
        filename=".mcp.json",
        stack_name="s",
        importer=Importer("member", member),
    )
    assert list(result.skipped) == ["github"] and "stdio" in result.skipped["github"]
