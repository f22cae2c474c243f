"""Commands refuse bad input with a message that names the real problem, and a stdio server
started with another interpreter than the worker's gets a hint on its failed poll."""

from __future__ import annotations

import shutil
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.servers.models import McpServer, PollRun, Transport
from dashboard.tasks import poll as poll_server
from tests.conftest import ROOT, need_service

pytestmark = pytest.mark.django_db


def test_add_server_refuses_a_url_that_is_not_one(team):
    with pytest.raises(
        CommandError,
        match=r"--url wants an http\(s\) URL such as https://mcp.example.com/mcp, got 'not-a-url'",
    ):
        call_command("add_server", "--name", "docs", "--url", "not-a-url", "--team", team.slug)
    with pytest.raises(CommandError, match="--sse wants an http"):
        call_command("add_server", "--name", "docs", "--sse", "ftp://x.example.com/sse", "--team", team.slug)
    assert not McpServer.objects.filter(team=team).exists()


def test_check_budget_blames_the_team_not_the_server(team, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text('{"tools": []}')
    with pytest.raises(CommandError, match="no team 'nope'"):
        call_command("check_budget", str(tools), "--server", "files", "--team", "nope")


def test_a_python_that_is_not_the_workers_gets_a_hint_on_the_failed_poll(team):
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None or system_python == sys.executable:
        need_service("no interpreter other than the worker's to start the server with")
    server = McpServer.objects.create(
        team=team,
        name="lean",
        transport=Transport.STDIO,
        command=system_python,
        args=["-m", "examples.servers.lean", "--transport", "stdio"],
        cwd=str(ROOT),
    )
    summary = poll_server(server.pk, trigger="test")
    assert summary.outcome != "ok"
    message = PollRun.objects.get(server=server).message
    assert (
        f"Hint: `{system_python}` runs {system_python}, not the worker's interpreter ({sys.executable})"
        in message
    )
    ours = McpServer.objects.create(
        team=team,
        name="lean-ours",
        transport=Transport.STDIO,
        command=sys.executable,
        args=["-m", "examples.servers.lean", "--transport", "stdio", "--root", str(ROOT)],
        cwd=str(ROOT),
    )
    assert poll_server(ours.pk, trigger="test").outcome == "ok"
