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
