"""The dashboard's management commands, run through call_command."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.servers.models import McpServer, Stack
from examples.servers.launch import stdio_command
from tests.dashboard.factories import CLAUDE_CONFIG, independent_tax

pytestmark = pytest.mark.django_db


def test_tokens_command_prints_the_section_5_keys(tmp_path):
    path = tmp_path / "tools.json"
    tools = [{"name": "echo", "description": "Echo <|endoftext|> back", "inputSchema": {"type": "object"}}]
    path.write_text(json.dumps({"tools": tools, "nextCursor": None}))
    out = StringIO()
    call_command("tokens", str(path), "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert set(report) == {
        "encoding",
        "tool_count",
        "fixed_tax_tokens",
        "instructions_tokens",
        "overhead_tokens",
        "bytes",
        "sha256",
        "tools",
    }
    assert report["fixed_tax_tokens"] == independent_tax(tools)
    assert report["tools"][0]["name"] == "echo"


def test_add_server_and_poll_commands(team, tmp_path):
    command, argv, _ = stdio_command("lean")
    out = StringIO()
    call_command(
        "add_server", "--name", "lean", "--stdio", " ".join([command, *argv]), "--team", team.slug, stdout=out
    )
    out = StringIO()
    call_command("poll", "lean", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["outcome"] == "ok" and result["server_version"] == "2.0.0"
    assert result["fixed_tax_tokens"] > 0 and result["changed"] is True


def test_import_servers_command_creates_a_stack_from_a_client_config(team, tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(CLAUDE_CONFIG))
    out = StringIO()
    call_command(
        "import_servers", str(path), "--team", team.slug, "--stack", "claude-code", "--json", stdout=out
    )
    (report,) = json.loads(out.getvalue())["stacks"]
    assert report["stack"] == "claude-code"
    assert sorted(report["created"]) == ["docs", "github", "legacy"] and report["updated"] == []
    assert report["unresolved_placeholders"] == {"docs": ["${env:DOCS}"], "github": ["${GITHUB_TOKEN}"]}
    stack = Stack.objects.get(team=team, name="claude-code")
    assert sorted(stack.servers.values_list("name", flat=True)) == ["docs", "github", "legacy"]
    assert McpServer.objects.get(team=team, name="github").env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}

    # Again: the same servers are found again (unchanged), not duplicated; the stack defaults to
    # the file's name.
    out = StringIO()
    call_command("import_servers", str(path), "--team", team.slug, "--json", stdout=out)
    (again,) = json.loads(out.getvalue())["stacks"]
    assert again["created"] == [] and again["updated"] == []
    assert sorted(again["unchanged"]) == ["docs", "github", "legacy"]
    assert again["stack"] == ".mcp.json"
    assert McpServer.objects.filter(team=team).count() == 3

    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(CommandError, match="broken.json"):
        call_command("import_servers", str(tmp_path / "broken.json"), "--team", team.slug)
    (tmp_path / "empty.json").write_text(json.dumps({"something": {}}))
    with pytest.raises(CommandError, match="mcpServers"):
        call_command("import_servers", str(tmp_path / "empty.json"), "--team", team.slug)
