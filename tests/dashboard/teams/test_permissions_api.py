"""The role matrix beyond the pages: the token API and Django's admin site, walked from the resolver.

An API token belongs to a team and has no role (docs/roles.md, "JSON API"): a session login of any
role is no API credential, a token acts for its own team only. Django's admin site is staff only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import reverse

from ingest.capture.models import IngestJob
from tests.dashboard.teams.roles_world import PRINCIPALS, World, build_world, url_names

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def test_admin_site_is_staff_only(client, tmp_path):
    world = build_world(tmp_path)
    names = [n for n in url_names() if n.startswith("admin:")]
    assert "admin:index" in names and "admin:dashboard_mcpserver_changelist" in names
    for principal in PRINCIPALS:
        if principal != "anonymous":
            client.force_login(world.users[principal])
        for name in ("admin:index", "admin:dashboard_mcpserver_changelist"):
            response = client.get(reverse(name))
            assert response.status_code == 302 and "/admin/login/" in response.url, (principal, name)
        client.logout()


@dataclass(frozen=True)
class ApiCase:
    method: str
    path: Callable[[World], str]
    body: Callable[[World], Any] = lambda w: None
    # How another team's token sees it: "404", "absent" (answers, without this team's data), or
    # "elsewhere" (acts on its own team).
    foreign: str = "absent"
    # Public routes: the status everyone gets, token or not (the API root has no page: 404).
    public: int = 0
    extra: dict[str, str] = field(default_factory=dict)


API: dict[str, ApiCase] = {
    "api:openapi-json": ApiCase("GET", lambda w: "/api/v1/openapi.json", public=200),
    "api:openapi-view": ApiCase("GET", lambda w: "/api/v1/docs", public=200),
    "api:api-root": ApiCase("GET", lambda w: "/api/v1/", public=404),
    "api:whoami": ApiCase("GET", lambda w: "/api/v1/team"),
    "api:list_servers": ApiCase("GET", lambda w: "/api/v1/servers"),
    "api:list_stacks": ApiCase("GET", lambda w: "/api/v1/stacks"),
    "api:server_snapshots": ApiCase(
        "GET", lambda w: f"/api/v1/servers/{w.admin_http.name}/snapshots", foreign="404"
    ),
    "api:check": ApiCase(
        "POST",
        lambda w: "/api/v1/check",
        lambda w: {"server": w.admin_http.name, "tools_list": {"tools": []}},
        foreign="404",
    ),
    # Another team's token ingests into its own team: the job is theirs, never this team's.
    "api:ingest": ApiCase("POST", lambda w: "/api/v1/ingest", lambda w: b'{"a": 1}\n', foreign="elsewhere"),
    "api:ingest_status": ApiCase("GET", lambda w: f"/api/v1/ingest/{w.job.code}", foreign="404"),
    # OTLP's own answer (no job code in it); another team's token stores its body for its own team.
    "api:otel_logs": ApiCase("POST", lambda w: "/api/v1/otel/v1/logs", lambda w: {"resourceLogs": []}),
    "api:agents": ApiCase("GET", lambda w: "/api/v1/agents"),
    "api:fidelity_summary": ApiCase("GET", lambda w: "/api/v1/fidelity"),
    # Public: the overall status alone; a token adds the details of its own team
    # (tests/dashboard/system/test_health.py).
    "api:health_view": ApiCase("GET", lambda w: "/api/v1/health", public=200),
}


def _api_call(client, case: ApiCase, world: World, token: str | None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    body = case.body(world)
    if case.method == "POST":
        if isinstance(body, bytes):
            return client.post(case.path(world), body, content_type="application/x-ndjson", **headers)
        return client.post(case.path(world), body, content_type="application/json", **headers)
    return client.get(case.path(world), **headers)


def test_api_routes_want_a_team_token(client, tmp_path):
    names = {n for n in url_names() if n.startswith("api:")}
    assert names == set(API), "API routes without an entry in API (or entries for routes gone)"
    world = build_world(tmp_path)
    for name, case in API.items():
        # A session login, of any role, is no API credential.
        for principal in PRINCIPALS:
            client.logout()
            if principal != "anonymous":
                client.force_login(world.users[principal])
            status = _api_call(client, case, world, None).status_code
            assert status == (case.public or 401), (name, principal, status)
        client.logout()
        if case.public:
            continue
        own = _api_call(client, case, world, world.token_plaintext)
        assert 200 <= own.status_code < 300, (name, own.status_code, own.content[:300])
        jobs_before = IngestJob.objects.filter(team=world.team).count()
        foreign = _api_call(client, case, world, world.other_token_plaintext)
        if case.foreign == "elsewhere":
            assert 200 <= foreign.status_code < 300, (name, foreign.status_code)
            assert IngestJob.objects.get(code=foreign.json()["code"]).team == world.other_team
            assert IngestJob.objects.filter(team=world.team).count() == jobs_before
        elif case.foreign == "404":
            assert foreign.status_code == 404, (name, foreign.status_code)
        else:
            assert 200 <= foreign.status_code < 300, (name, foreign.status_code)
            for secret in (world.team.slug, world.admin_http.name, world.family):
                assert secret not in foreign.content.decode(), (name, secret)
