"""Server secrets are encrypted at rest."""

from __future__ import annotations

import base64
import hashlib
import json
from io import StringIO

import pytest
from cryptography.fernet import Fernet, InvalidToken
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from dashboard.servers.models import McpServer, Transport

pytestmark = pytest.mark.django_db


def test_secrets_are_encrypted_at_rest(team):
    server = _remote(team, {"Authorization": "Bearer sk-very-secret-value"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM dashboard_mcpserver WHERE id = %s", [server.pk])
        stored = cursor.fetchone()[0]
    assert "sk-very-secret-value" not in stored
    assert McpServer.objects.get(pk=server.pk).headers == {"Authorization": "Bearer sk-very-secret-value"}


def _remote(team, headers: dict[str, str]) -> McpServer:
    return McpServer.objects.create(
        team=team, name="remote", transport=Transport.HTTP, url="https://mcp.example.com/mcp", headers=headers
    )


def _stored(column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM dashboard_mcpserver WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def _fernet_for(material: str) -> Fernet:
    # Written here, not imported: a key is the sha256 of the configured string, urlsafe-base64.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(material.encode()).digest()))


def test_empty_values_are_not_encrypted(team):
    server = McpServer.objects.create(
        team=team, name="plain", transport=Transport.HTTP, url="https://mcp.example.com/mcp"
    )
    assert _stored("headers", server.pk) == "" and _stored("env", server.pk) == ""
    assert McpServer.objects.get(pk=server.pk).headers == {}


def test_a_key_rotation_keeps_every_secret_readable_and_ends_under_the_new_key(team, settings):
    settings.FIELD_ENCRYPTION_KEY = "old-key"
    server = _remote(team, {"Authorization": "Bearer sk-1"})
    json.loads(_fernet_for("old-key").decrypt(_stored("headers", server.pk).encode()))

    # The new key first, the old one kept for reading: nothing breaks before the rewrite.
    settings.FIELD_ENCRYPTION_KEY = "new-key,old-key"
    assert McpServer.objects.get(pk=server.pk).headers == {"Authorization": "Bearer sk-1"}
    out = StringIO()
    call_command("reencrypt_secrets", "--json", stdout=out)
    assert json.loads(out.getvalue())["reencrypted"]["dashboard.McpServer"] == 1
    token = _stored("headers", server.pk).encode()
    assert json.loads(_fernet_for("new-key").decrypt(token)) == {"Authorization": "Bearer sk-1"}
    with pytest.raises(InvalidToken):
        _fernet_for("old-key").decrypt(token)

    # The old key dropped: still readable.
    settings.FIELD_ENCRYPTION_KEY = "new-key"
    assert McpServer.objects.get(pk=server.pk).headers == {"Authorization": "Bearer sk-1"}


def test_values_from_before_the_field_key_was_set_still_read(team, settings):
    settings.FIELD_ENCRYPTION_KEY = ""
    server = _remote(team, {"X-Key": "v"})
    json.loads(_fernet_for(settings.SECRET_KEY).decrypt(_stored("headers", server.pk).encode()))
    settings.FIELD_ENCRYPTION_KEY = "a-dedicated-key"
    assert McpServer.objects.get(pk=server.pk).headers == {"X-Key": "v"}


def test_reencrypt_names_rows_no_key_can_read(team, settings):
    settings.FIELD_ENCRYPTION_KEY = "lost-key"
    server = _remote(team, {"X-Key": "v"})
    settings.FIELD_ENCRYPTION_KEY = "other-key"
    with pytest.raises(CommandError, match=f"dashboard.McpServer {server.pk}"):
        call_command("reencrypt_secrets", stdout=StringIO())
