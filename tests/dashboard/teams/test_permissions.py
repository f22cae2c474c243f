"""The role matrix, walked: every URL pattern of the project, every role, the real request.

The URL list comes from Django's resolver, never from a hand-written list: a new URL with no entry
in TABLE fails `test_every_url_pattern_has_an_entry` (and its own case). Each entry names the
least role the page or change needs, written here from docs/roles.md, not read from
dashboard.teams.permissions, so a wrong row in the product's matrix fails. For each principal
(owner, admin, member, viewer, a user of another team, nobody) the request is sent; when the role
suffices the answer is 2xx/3xx and the change happened, otherwise the answer is the project's
404 (the login page for nobody) and the object is unchanged.
"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.alerts.models import Budget
from dashboard.servers.models import McpServer
from dashboard.teams.models import ApiToken, Team
from ingest.capture.models import IngestJob, LineRecord, WatchedFolder
from ingest.fidelity.models import ModelPrice, ReferenceDocument
from tests.dashboard.teams.roles_cases import (
    LOGIN,
    MEMBERSHIP_TABLE,
    PUBLIC,
    RANK,
    SEE,
    Case,
    edited,
    gone,
    import_over,
    obj,
    queued,
    server,
    server_form,
    url_of,
)
from tests.dashboard.teams.roles_world import PRINCIPALS, alert_is, bulk_ack, url_names

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


TABLE: dict[str, list[Case]] = {
    "login": [Case("GET", PUBLIC, kwargs=lambda w: {})],
    "logout": [Case("POST", PUBLIC, kwargs=lambda w: {})],
    "home": [Case("GET", LOGIN, kwargs=lambda w: {})],
    "methodology": [Case("GET", LOGIN, kwargs=lambda w: {})],
    # -- servers
    "team_overview": [Case("GET", SEE)],
    "server_detail": [Case("GET", SEE, server("admin_http"))],
    "server_status": [Case("GET", SEE, server("admin_http"))],
    "snapshot_diff": [Case("GET", SEE, server("admin_http"))],
    "stacks": [
        Case("GET", SEE),
        Case(
            "POST",
            "member",
            data=import_over("new-remote", "http://127.0.0.1:9/new"),
            changed=lambda w, _: McpServer.objects.filter(team=w.team, name="new-remote").exists(),
            label="import new http",
        ),
        Case(
            "POST",
            "admin",
            data=import_over("admin-docs", "http://127.0.0.1:9/hijacked", into="agent"),
            changed=url_of("admin_http", "http://127.0.0.1:9/hijacked"),
            answered="member",
            label="import over admin's server",
        ),
        Case(
            "POST",
            "member",
            data=import_over("member-docs", "http://127.0.0.1:9/moved", own=True),
            changed=url_of("own_http", "http://127.0.0.1:9/moved"),
            answered="member",
            label="import over own server",
        ),
    ],
    "server_add": [
        Case("GET", "member"),
        Case(
            "POST",
            "member",
            data=lambda w: server_form(w, "added"),
            changed=lambda w, _: McpServer.objects.filter(team=w.team, name="added").exists(),
            label="http",
        ),
        Case(
            "POST",
            "admin",
            data=lambda w: server_form(w, "added-stdio", transport="stdio", url="", command_line="echo hi"),
            changed=lambda w, _: McpServer.objects.filter(team=w.team, name="added-stdio").exists(),
            answered="member",
            label="stdio",
        ),
    ],
    "server_edit": [
        Case("GET", "member", server("own_http"), label="own"),
        Case("GET", "admin", server("admin_http"), label="admin's"),
        Case(
            "POST", "member", server("own_http"), lambda w: server_form(w, "member-docs"), edited("own_http")
        ),
        Case(
            "POST",
            "admin",
            server("admin_http"),
            lambda w: server_form(w, "admin-docs"),
            edited("admin_http"),
        ),
        Case(
            "POST",
            "admin",
            server("stdio"),
            lambda w: server_form(w, "files", transport="stdio", url="", command_line="python -m x"),
            edited("stdio"),
        ),
        # The member's own stdio server: owning it is not enough, a command line needs an admin.
        Case("GET", "admin", server("member_stdio"), label="member's stdio form"),
        Case(
            "POST",
            "admin",
            server("member_stdio"),
            lambda w: server_form(w, "member-files", transport="stdio", url="", command_line="python -m x"),
            edited("member_stdio"),
            label="member's stdio",
        ),
    ],
    "server_delete": [
        Case("GET", "member", server("own_http")),
        Case("POST", "member", server("own_http"), changed=gone("own_http")),
        Case("POST", "admin", server("admin_http"), changed=gone("admin_http")),
        Case("POST", "admin", server("stdio"), changed=gone("stdio")),
        Case("GET", "admin", server("member_stdio"), label="member's stdio form"),
        Case("POST", "admin", server("member_stdio"), changed=gone("member_stdio"), label="member's stdio"),
    ],
    "poll_now": [
        Case("POST", "member", server("admin_http"), changed=queued, label="http"),
        Case("POST", "admin", server("stdio"), changed=queued, label="stdio"),
        Case("POST", "admin", server("stdio"), changed=queued, htmx=True, label="stdio htmx"),
    ],
    # -- alerts, budgets, channels
    "alert_list": [Case("GET", SEE)],
    "alert_banner": [Case("GET", SEE), Case("GET", SEE, query="?server=not-a-code", label="unknown server")],
    "alert_nav_count": [Case("GET", SEE)],
    "regressions": [Case("GET", SEE), Case("GET", SEE, query="?period=all&direction=grew", label="filtered")],
    "alert_resolve": [Case("POST", "member", obj("code", "alert", "code"), changed=alert_is("resolved"))],
    "alert_bulk": [Case("POST", "member", data=bulk_ack, changed=alert_is("acknowledged"))],
    "alert_acknowledge": [
        Case(
            "POST",
            "member",
            obj("code", "alert", "code"),
            lambda w: {"note": "seen"},
            lambda w, _: w.fresh(w.alert).state == "acknowledged",
        ),
        Case(
            "POST",
            "member",
            obj("code", "alert", "code"),
            changed=lambda w, _: w.fresh(w.alert).state == "acknowledged",
            htmx=True,
        ),
    ],
    "alert_silence": [
        Case(
            "POST",
            "member",
            obj("code", "alert", "code"),
            lambda w: {"until_release": "1"},
            lambda w, _: w.fresh(w.alert).state == "silenced",
        )
    ],
    "budgets": [
        Case("GET", SEE),
        Case(
            "POST",
            "admin",
            data=lambda w: {
                "scope": "team",
                "measure": "fixed_tax_tokens",
                "level": "warning",
                "limit": "99",
            },
            changed=lambda w, _: Budget.objects.filter(team=w.team, level="warning").exists(),
        ),
    ],
    "budget_update": [
        Case(
            "POST",
            "admin",
            obj("budget_id", "budget"),
            lambda w: {"action": "toggle"},
            lambda w, _: not w.fresh(w.budget).enabled,
        ),
        Case(
            "POST",
            "admin",
            obj("budget_id", "budget"),
            lambda w: {"action": "limit", "limit": "999999"},
            lambda w, _: w.fresh(w.budget).limit == 999999,
            htmx=True,
        ),
        Case("POST", "admin", obj("budget_id", "budget"), lambda w: {"action": "delete"}, gone("budget")),
    ],
    "channels": [
        Case("GET", SEE),
        Case(
            "POST",
            "admin",
            data=lambda w: {
                "name": "pager",
                "kind": "email",
                "target": "a@example.com",
                "min_level": "warning",
            },
            changed=lambda w, _: w.team.channels.filter(name="pager").exists(),
        ),
    ],
    "channel_detail": [Case("GET", SEE, obj("code", "channel", "code"))],
    "channel_action": [
        Case(
            "POST",
            "admin",
            obj("code", "channel", "code"),
            lambda w: {"action": "disable"},
            lambda w, _: not w.fresh(w.channel).enabled,
        ),
        Case(
            "POST", "admin", obj("code", "channel", "code"), lambda w: {"action": "delete"}, gone("channel")
        ),
    ],
    # -- team settings
    "team_settings": [Case("GET", SEE)],
    "team_counting": [
        Case(
            "POST",
            "admin",
            data=lambda w: {
                "main_encoding": "o200k_base",
                "encodings": ["cl100k_base"],
                "context_window": "128000",
                "anthropic_model": "claude-sonnet-4-5",
            },
            changed=lambda w, _: (
                Team.objects.get(pk=w.team.pk).token_encodings == ["o200k_base", "cl100k_base"]
            ),
        )
    ],
    # Worker hosts, queue depths and outage messages: operator information (staff too, see
    # tests/dashboard/system/test_health.py).
    "team_health": [Case("GET", "admin")],
    "create_api_token": [
        Case(
            "POST",
            "admin",
            data=lambda w: {"name": "new-ci"},
            changed=lambda w, _: ApiToken.objects.filter(team=w.team, name="new-ci").exists(),
        )
    ],
    "revoke_api_token": [
        Case(
            "POST",
            "admin",
            obj("token_id", "token"),
            changed=lambda w, _: w.fresh(w.token).revoked_at is not None,
        )
    ],
    # -- ingest
    "ingest_home": [Case("GET", SEE)],
    "ingest_upload": [
        Case(
            "POST",
            "member",
            data=lambda w: {"format": "auto", "file": SimpleUploadedFile("up.jsonl", b'{"a": 1}\n')},
            changed=lambda w, _: IngestJob.objects.filter(team=w.team, filename="up.jsonl").exists(),
        )
    ],
    "ingest_job": [Case("GET", SEE, obj("code", "job", "code"))],
    "ingest_job_progress": [Case("GET", SEE, obj("code", "job", "code"))],
    "ingest_quarantine": [Case("GET", SEE)],
    "ingest_quarantine_delete": [
        Case("POST", "admin", changed=lambda w, _: not LineRecord.objects.filter(pk=w.line.pk).exists())
    ],
    "ingest_line": [Case("GET", SEE, obj("line_id", "line"))],
    "ingest_line_raw": [Case("GET", SEE, obj("line_id", "line"))],
    "ingest_watch": [
        Case("GET", SEE),
        Case(
            "POST",
            "admin",
            data=lambda w: {"path": str(w.watch_root), "pattern": "*.log", "format": "auto"},
            changed=lambda w, _: WatchedFolder.objects.filter(team=w.team, pattern="*.log").exists(),
        ),
    ],
    "ingest_watch_toggle": [
        Case("POST", "admin", obj("folder_id", "folder"), changed=lambda w, _: not w.fresh(w.folder).enabled)
    ],
    "ingest_watch_scan": [Case("POST", "admin", obj("folder_id", "folder"), changed=queued)],
    "ingest_watch_delete": [Case("POST", "admin", obj("folder_id", "folder"), changed=gone("folder"))],
    # -- fidelity
    "fidelity_agents": [Case("GET", SEE)],
    "fidelity_overview_panel": [Case("GET", SEE)],
    "fidelity_agent": [Case("GET", SEE, lambda w: {"team_slug": w.team.slug, "family": w.family})],
    # Tool discovery (deferred loading): read-only pages and the panels they load.
    "discovery_team": [Case("GET", SEE)],
    "discovery_agent": [Case("GET", SEE, lambda w: {"team_slug": w.team.slug, "family": w.family})],
    "discovery_server": [Case("GET", SEE, server("admin_http"))],
    "discovery_tool": [
        Case("GET", SEE, lambda w: {"team_slug": w.team.slug, "code": w.admin_http.code, "tool": "read"})
    ],
    # Telemetry set-up: anyone who sees the team reads the lines; a token is an admin's to issue.
    "ingest_telemetry": [Case("GET", SEE)],
    "ingest_telemetry_token": [
        Case(
            "POST",
            "admin",
            changed=lambda w, _: ApiToken.objects.filter(team=w.team, name="telemetry").exists(),
        )
    ],
    "fidelity_call": [Case("GET", SEE, obj("call_id", "call"))],
    "fidelity_unused_tools": [Case("GET", SEE, server("admin_http"))],
    "fidelity_tool": [
        Case("GET", SEE, lambda w: {"team_slug": w.team.slug, "code": w.admin_http.code, "tool": "read"})
    ],
    "fidelity_references": [
        Case("GET", SEE),
        Case(
            "POST",
            "member",
            data=lambda w: {
                "action": "upload",
                "name": "added.md",
                "file": SimpleUploadedFile("a.md", b"x" * 300),
            },
            changed=lambda w, _: ReferenceDocument.objects.filter(team=w.team, name="added.md").exists(),
        ),
    ],
    "fidelity_reference_delete": [
        Case("POST", "admin", obj("code", "document", "code"), changed=gone("document"))
    ],
    "fidelity_prices": [
        Case("GET", SEE),
        Case(
            "POST",
            "admin",
            data=lambda w: {
                "model": "added-model",
                "agent_family": "gemini-cli",
                "input_usd_per_mtok": "1",
                "output_usd_per_mtok": "2",
                "note": "",
            },
            changed=lambda w, _: ModelPrice.objects.filter(team=w.team, model="added-model").exists(),
        ),
    ],
    "fidelity_price_edit": [
        Case("GET", "admin", obj("price_id", "team_price")),
        Case(
            "POST",
            "admin",
            obj("price_id", "team_price"),
            lambda w: {
                "model": "team-model",
                "agent_family": "codex",
                "input_usd_per_mtok": "7",
                "output_usd_per_mtok": "8",
                "note": "edited",
            },
            lambda w, _: w.fresh(w.team_price).note == "edited",
        ),
    ],
    "fidelity_price_override": [
        Case(
            "POST",
            "admin",
            obj("price_id", "global_price"),
            changed=lambda w, _: ModelPrice.objects.filter(team=w.team, model=w.global_price.model).exists(),
        )
    ],
    "fidelity_price_delete": [
        Case("POST", "admin", obj("price_id", "team_price"), changed=gone("team_price"))
    ],
}
TABLE.update(MEMBERSHIP_TABLE)
# Django's admin site and the token API take other credentials: test_permissions_api.py walks them.
SEPARATE = {"admin": "test_admin_site_is_staff_only", "api": "test_api_routes_want_a_team_token"}


def page_names() -> set[str]:
    return {n for n in url_names() if n.split(":")[0] not in SEPARATE}


def test_every_url_pattern_has_an_entry():
    names = page_names()
    assert names - set(TABLE) == set(), "URL patterns without an entry in TABLE: give each one"
    assert set(TABLE) - names == set(), "TABLE entries for URLs that no longer exist"
    namespaces = {n.split(":")[0] for n in url_names() if ":" in n}
    assert namespaces == set(SEPARATE), namespaces


def _expected(least: str, principal: str) -> bool:
    if least == PUBLIC:
        return True
    if principal == "anonymous":
        return False
    if least == LOGIN:
        return True
    return principal in RANK and RANK[principal] >= RANK[least]


CASES = [
    pytest.param(name, i, principal, id=f"{name}[{case.label or f'{case.method} {i}'}]-{principal}")
    for name in sorted(page_names() | set(TABLE))
    for i, case in enumerate(TABLE.get(name, [Case("GET", "?")]))
    for principal in PRINCIPALS
]


@pytest.mark.parametrize(("name", "index", "principal"), CASES)
def test_role_matrix(
    name, index, principal, client, role_world, settings, django_capture_on_commit_callbacks
):
    if name not in TABLE:
        pytest.fail(f"{name} has no entry in TABLE: say which role it needs")
    case = TABLE[name][index]
    world = role_world
    settings.INGEST_WATCH_DIRS = [str(world.watch_root)]
    if principal != "anonymous":
        client.force_login(world.users[principal])
    url = reverse(name, kwargs=case.kwargs(world)) + case.query
    headers = {"HTTP_HX_REQUEST": "true"} if case.htmx else {}
    before = case.changed(world, []) if case.changed else False
    assert not before, "the change must not be there before the request"
    with django_capture_on_commit_callbacks() as callbacks:
        if case.method == "POST":
            response = client.post(url, case.data(world), **headers)
        else:
            response = client.get(url, **headers)
    allowed = _expected(case.least, principal)
    status = response.status_code
    answered = allowed or bool(case.answered) and _expected(case.answered, principal)
    if answered:
        assert 200 <= status < 400, (status, response.content[:300])
    elif principal == "anonymous":
        assert status == 302 and response.url.startswith(reverse("login")), status
    else:
        assert status == 404, (status, response.content[:300])
    if case.changed is not None:
        assert case.changed(world, callbacks) is allowed, f"changed should be {allowed}"
    elif case.method == "POST" and not allowed:
        assert callbacks == []
