"""Importing an MCP client config as a stack."""

from __future__ import annotations

import pytest

from dashboard.servers.config_import import ConfigImportError, import_client_config, parse_client_config
from dashboard.servers.models import McpServer, Transport
from tests.dashboard.factories import CLAUDE_CONFIG, VSCODE_CONFIG

pytestmark = pytest.mark.django_db


def test_client_config_import_becomes_a_stack_and_reports_placeholders(team, alice):
    result = import_client_config(
        team, CLAUDE_CONFIG, stack_name="claude-code", source=".mcp.json", user=alice
    )
    assert sorted(result.created) == ["docs", "github", "legacy"]
    assert sorted(s.name for s in result.stack.servers.all()) == ["docs", "github", "legacy"]
    assert result.placeholders == {"docs": ["${env:DOCS}"], "github": ["${GITHUB_TOKEN}"]}
    github = McpServer.objects.get(team=team, name="github")
    assert github.env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}  # left unresolved
    assert McpServer.objects.get(team=team, name="legacy").transport == Transport.SSE
    again = import_client_config(team, CLAUDE_CONFIG, stack_name="claude-code")
    assert again.created == [] and sorted(again.updated) == ["docs", "github", "legacy"]

    vscode = parse_client_config(VSCODE_CONFIG)
    assert vscode[0].transport == Transport.STDIO and vscode[0].placeholders == ["${workspaceFolder}"]
    assert parse_client_config({"mcp": VSCODE_CONFIG})[0].name == "fs"
    with pytest.raises(ConfigImportError, match="mcpServers"):
        parse_client_config({"something": {}})
    with pytest.raises(ConfigImportError, match="command"):
        parse_client_config({"mcpServers": {"x": {"args": []}}})
