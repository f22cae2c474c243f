"""Server secrets are encrypted at rest."""

from __future__ import annotations

import pytest
from django.db import connection

from dashboard.servers.models import McpServer, Transport

pytestmark = pytest.mark.django_db


def test_secrets_are_encrypted_at_rest(team):
    server = McpServer.objects.create(
        team=team,
        name="remote",
        transport=Transport.HTTP,
        url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer sk-very-secret-value"},
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM dashboard_mcpserver WHERE id = %s", [server.pk])
        stored = cursor.fetchone()[0]
    assert "sk-very-secret-value" not in stored
    assert McpServer.objects.get(pk=server.pk).headers == {"Authorization": "Bearer sk-very-secret-value"}
