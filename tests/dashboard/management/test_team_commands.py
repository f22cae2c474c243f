"""`create_team`, and the team the commands that fill a team pick: the slug given, the only team, or
(no team at all) a new team named `default`."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from dashboard.servers.models import McpServer
from dashboard.teams.models import Membership, Team
from examples.servers.launch import stdio_command
from tests.conftest import make_envelope_log
from tests.dashboard.factories import CLAUDE_CONFIG

pytestmark = pytest.mark.django_db


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_team_makes_the_user_its_owner(alice):
    out, _ = _run("create_team", "Platform Ops", "--owner", "alice")
    team = Team.objects.get(name="Platform Ops")
    assert team.slug == "platform-ops" and "Created team Platform Ops (slug platform-ops)" in out
    assert Membership.objects.get(team=team).user == alice and team.role_of(alice) == "owner"
    out, _ = _run("create_team", "Research", "--owner", "alice", "--slug", "lab", "--json")
    assert json.loads(out) == {"name": "Research", "slug": "lab", "owner": "alice"}


def test_create_team_errors_are_clear_and_change_nothing(alice):
    with pytest.raises(CommandError, match="no user 'bob'"):
        _run("create_team", "Platform", "--owner", "bob")
    _run("create_team", "Platform", "--owner", "alice")
    with pytest.raises(CommandError, match="You already have a team named 'PLATFORM'"):
        _run("create_team", "PLATFORM", "--owner", "alice")
    with pytest.raises(CommandError, match="The slug 'platform' is taken"):
        _run("create_team", "Another", "--owner", "alice", "--slug", "platform")
    with pytest.raises(CommandError, match="is not a slug"):
        _run("create_team", "Another", "--owner", "alice", "--slug", "no spaces")
    assert list(Team.objects.values_list("name", flat=True)) == ["Platform"]


def test_add_server_on_a_fresh_install_creates_the_default_team_and_the_server_is_polled():
    root = User.objects.create_superuser("root", "root@example.com", "violet-harbour-417")
    command, argv, _ = stdio_command("lean")
    out, _ = _run("add_server", "--name", "lean", "--stdio", " ".join([command, *argv]))
    team = Team.objects.get()
    assert team.name == team.slug == "default"
    assert "No team yet: created team 'default'" in out and "owners: root" in out
    assert team.role_of(root) == "owner" and McpServer.objects.get().team == team

    polled, _ = _run("poll", "lean", "--json")
    assert json.loads(polled)["outcome"] == "ok"
    # The superuser sees the polled server on the web at once.
    web = Client()
    web.force_login(root)
    page = web.get(reverse("team_overview", args=["default"]), follow=True).content.decode()
    assert "lean" in page
    # Exactly one team now: the next command uses it and says nothing about teams.
    out, _ = _run("add_server", "--name", "other", "--url", "http://127.0.0.1:9/mcp")
    assert "No team yet" not in out and Team.objects.count() == 1
    assert McpServer.objects.get(name="other").team == team


def test_import_servers_creates_the_default_team_and_keeps_json_clean(tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(CLAUDE_CONFIG))
    out, err = _run("import_servers", str(path), "--json")
    assert json.loads(out)["stacks"]  # stdout is still one JSON document
    assert "created team 'default'" in err and "no members yet" in err
    assert Team.objects.get().slug == "default" and McpServer.objects.filter(team__slug="default").exists()


def test_ingest_creates_the_default_team(tmp_path):
    log = tmp_path / "cap.jsonl"
    log.write_bytes(make_envelope_log(calls=1))
    out, _ = _run("ingest", str(log))
    assert "No team yet: created team 'default'" in out and "1 calls stored" in out
    assert Team.objects.get().ingest_jobs.count() == 1


def test_several_teams_still_need_team_and_an_unknown_slug_is_an_error(team_factory, tmp_path):
    team_factory("Alpha")
    team_factory("Beta")
    with pytest.raises(
        CommandError, match=r"--team SLUG is required when there are several teams \(alpha, beta\)"
    ):
        _run("add_server", "--name", "x", "--url", "http://127.0.0.1:9/mcp")
    log = tmp_path / "cap.jsonl"
    log.write_bytes(make_envelope_log(calls=1))
    with pytest.raises(CommandError, match="several teams"):
        _run("ingest", str(log))
    with pytest.raises(CommandError, match="no team with slug 'gamma'"):
        _run("add_server", "--name", "x", "--url", "http://127.0.0.1:9/mcp", "--team", "gamma")
    assert Team.objects.count() == 2 and not McpServer.objects.exists()
