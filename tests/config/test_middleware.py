"""NUL characters in a request (path, query string, JSON field, form field) are a client error.

PostgreSQL refuses NUL in text ("A string literal cannot contain NUL (0x00) characters"), so
before the fix every one of these reached a query and answered 500 there. The table covers each
kind of entry point: path kwargs, query parameters used as filters, API query parameters, JSON
fields and form fields. It runs on every database; the 500s it guards against happen on
PostgreSQL, where the services leg runs it.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from dashboard.servers.models import McpServer, Transport
from dashboard.teams.models import ApiToken

# Every GET of a page with a NUL in a path kwarg or a query parameter (filters, sorts, pages).
PAGE_URLS = [
    "/t/{team}/agents/claude%00code/",
    "/t/{team}/ingest/quarantine/?reason=%00",
    "/t/{team}/ingest/quarantine/?job=%00",
    "/t/{team}/?sort=%00&status=%00",
    "/t/{team}/alerts/?state=%00&sort=%00",
    "/t/{team}/servers/{server}/?at=%00&axis=%00&tsort=%00",
    "/t/{team}/servers/{server}/diff/?a=%00&b=%00",
    "/t/{team}/agents/?days=%00&sort=%00",
    "/t/{team}/ingest/?sort=%00&page=%00",
    "/t/te%00am/",
]
# Form fields with a NUL: the form refuses them (Django's CharField and the name rule).
FORMS = [
    ("/t/{team}/servers/add/", {"name": "a\x00b", "transport": "http", "url": "http://127.0.0.1:9/mcp"}),
    ("/t/{team}/stacks/", {"stack_name": "s\x00", "config_text": '{"mcpServers": {}}'}),
    ("/t/{team}/settings/tokens/", {"name": "ci\x00"}),
]
# API routes: path and query through the middleware (400), JSON fields through the schema (422).
API = [
    ("get", "/api/v1/servers/files%00/snapshots", None, 400),
    ("get", "/api/v1/servers?limit=%00", None, 400),
    ("get", "/api/v1/fidelity?days=%00", None, 400),
    ("post", "/api/v1/ingest?filename=a%00b", "{}", 400),
    ("post", "/api/v1/check", json.dumps({"server": "files\u0000", "tools_list": []}), 422),
]


@pytest.fixture
def server(team):
    return McpServer.objects.create(
        team=team, name="files", transport=Transport.HTTP, url="http://127.0.0.1:9/mcp"
    )


def _send(client, method, url, body, **extra):
    if method == "get":
        return client.get(url, **extra)
    if isinstance(body, str):
        return client.post(url, data=body, content_type="application/json", **extra)
    return client.post(url, data=body, **extra)


def _pg_note() -> str:
    return f" (database: {connection.vendor})"


@pytest.mark.parametrize("url", PAGE_URLS)
def test_nul_in_a_page_path_or_query_is_a_400(alice_client, team, server, url):
    response = alice_client.get(url.format(team=team.slug, server=server.code))
    assert response.status_code == 400, f"{url}: {response.status_code}{_pg_note()}"


@pytest.mark.parametrize(("url", "data"), FORMS)
def test_nul_in_a_form_field_is_a_form_error_and_stores_nothing(alice_client, team, server, url, data):
    before = (McpServer.objects.count(), ApiToken.objects.count())
    response = alice_client.post(url.format(team=team.slug, server=server.code), data)
    assert response.status_code < 500, f"{url}: {response.status_code}{_pg_note()}"
    assert (McpServer.objects.count(), ApiToken.objects.count()) == before


@pytest.mark.parametrize(("method", "url", "body", "status"), API)
def test_nul_in_an_api_request_is_a_client_error(client, team, server, method, url, body, status):
    _, token = ApiToken.issue(team, "ci")
    response = _send(client, method, url, body, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == status, f"{method} {url}: {response.status_code}{_pg_note()}"


def test_nul_in_the_path_or_query_string_is_refused_with_400_before_any_view(client, team):
    for url in ("/t/%00/", "/login/?next=%00", "/api/v1/team?x=%00", "/api/v1/ingest?filename=a%00b"):
        response = client.get(url)
        assert response.status_code == 400, url
        assert b"NUL" in response.content
