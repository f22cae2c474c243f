"""Importing MCP client configs as stacks, through `import_servers` and the web import.

Expectations are written out here from the fixtures in tests/data/configs/ (see its README for the
published shape each follows).
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from dashboard.servers.config_import import SHELL, Importer, import_config_text
from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.servers.polling import dispatch_due
from tests.dashboard.factories import CLAUDE_CONFIG

pytestmark = pytest.mark.django_db
CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"

# file -> {stack name: {server: (transport, enabled)}}, and every placeholder the file holds.
EXPECTED = {
    "claude_code_user.json": (
        {
            "claude_code_user.json": {"memory": ("stdio", True)},
            "/home/me/src/shop": {"postgres": ("stdio", True), "sentry": ("http", True)},
            "/home/me/src/infra": {"kubernetes": ("stdio", True)},
        },
        {"postgres": ["${DATABASE_URL}"], "kubernetes": ["${HOME}"]},
    ),
    "windsurf.json": (
        {
            "windsurf.json": {
                "git": ("stdio", True),
                "remote-docs": ("http", True),
                "old-search": ("stdio", False),
            }
        },
        {"remote-docs": ["${env:DOCS_KEY}"], "old-search": ["${BRAVE_KEY}"]},
    ),
    "cline.json": (
        {
            "cline.json": {
                "sequential-thinking": ("stdio", True),
                "remote": ("http", False),
                "legacy": ("sse", True),
            }
        },
        {},
    ),
    "kiro.json": ({"kiro.json": {"aws-docs": ("stdio", True), "paused": ("stdio", False)}}, {}),
    "vscode_mcp.jsonc": (
        {
            "vscode_mcp.jsonc": {
                "perplexity": ("stdio", True),
                "fetch": ("stdio", True),
                "github": ("http", True),
            }
        },
        {"perplexity": ["${input:perplexity-key}"], "fetch": ["${workspaceFolder}"]},
    ),
    "codex_config.toml": (
        {
            "codex_config.toml": {
                "context7": ("stdio", True),
                "figma": ("http", True),
                "notes": ("stdio", False),
            }
        },
        {"figma": ["${FIGMA_OAUTH_TOKEN}"]},
    ),
}


def _state(team) -> dict[str, dict[str, tuple[str, bool]]]:
    return {
        stack.name: {s.name: (s.transport, s.enabled) for s in stack.servers.all()}
        for stack in Stack.objects.filter(team=team)
    }


@pytest.mark.parametrize("filename", sorted(EXPECTED))
def test_import_servers_reads_every_client_config(team, filename):
    stacks, placeholders = EXPECTED[filename]
    out = StringIO()
    call_command("import_servers", str(CONFIGS / filename), "--team", team.slug, "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert _state(team) == stacks
    assert {s["stack"] for s in report["stacks"]} == set(stacks)
    listed = {name: found for s in report["stacks"] for name, found in s["unresolved_placeholders"].items()}
    assert listed == placeholders
    stored = {p for stack in Stack.objects.filter(team=team) for p in stack.unresolved_placeholders}
    assert stored == {f"{name}: {p}" for name, found in placeholders.items() for p in found}
    disabled = {n for s in stacks.values() for n, (_, enabled) in s.items() if not enabled}
    assert {n for s in report["stacks"] for n in s["disabled"]} == disabled


@pytest.mark.parametrize("filename", sorted(p.name for p in CONFIGS.iterdir() if p.name != "README.md"))
def test_every_fixture_imports_through_the_command(team, filename):
    out = StringIO()
    call_command("import_servers", str(CONFIGS / filename), "--team", team.slug, "--json", stdout=out)
    report = json.loads(out.getvalue())
    created = [n for s in report["stacks"] for n in s["created"]]
    assert created and McpServer.objects.filter(team=team).count() == len(set(created))


def test_a_disabled_server_is_never_polled(team):
    call_command("import_servers", str(CONFIGS / "kiro.json"), "--team", team.slug, stdout=StringIO())
    enqueued: list[int] = []
    dispatch_due(enqueue=lambda pk, eta: enqueued.append(pk))
    assert enqueued == [McpServer.objects.get(team=team, name="aws-docs").pk]


def test_unknown_shape_names_the_shapes_it_knows(team, tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"something": {}}))
    with pytest.raises(CommandError) as failed:
        call_command("import_servers", str(tmp_path / "other.json"), "--team", team.slug)
    # Not a client config this reads: the file is unreadable as one (exit 2), not "nothing imported".
    assert failed.value.returncode == 2
    for shape in ("mcpServers", "context_servers", "mcp_servers", "projects.<path>.mcpServers"):
        assert shape in str(failed.value)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(CommandError, match="broken.json"):
        call_command("import_servers", str(tmp_path / "broken.json"), "--team", team.slug)


def test_reimport_updates_and_the_stack_defaults_to_the_file_name(team, alice, tmp_path):
    text = json.dumps(CLAUDE_CONFIG)
    (first,) = import_config_text(
        team, text, filename=".mcp.json", stack_name="claude-code", importer=Importer("owner", alice)
    )
    assert sorted(first.created) == ["docs", "github", "legacy"]
    assert McpServer.objects.get(team=team, name="github").env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    assert McpServer.objects.get(team=team, name="legacy").transport == Transport.SSE
    (again,) = import_config_text(team, text, filename=".mcp.json", importer=SHELL)
    # The same definitions: the same servers, now in both stacks, nothing changed.
    assert again.created == [] and again.updated == []
    assert sorted(again.unchanged) == ["docs", "github", "legacy"]
    assert again.stack is not None and again.stack.name == ".mcp.json"


def test_web_import_of_jsonc_and_of_claude_json_projects(alice_client, team):
    url = reverse("stacks", args=[team.slug])
    jsonc = (CONFIGS / "vscode_mcp.jsonc").read_text()
    response = alice_client.post(url, {"stack_name": "vscode", "config_text": jsonc})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert _state(team) == {"vscode": EXPECTED["vscode_mcp.jsonc"][0]["vscode_mcp.jsonc"]}

    with (CONFIGS / "claude_code_user.json").open("rb") as upload:
        response = alice_client.post(url, {"stack_name": "claude", "config_file": upload}, follow=True)
    assert response.status_code == 200
    assert set(_state(team)) == {"vscode", "claude", "/home/me/src/shop", "/home/me/src/infra"}
    page = response.content.decode()
    assert "${DATABASE_URL}" in page and "${HOME}" in page

    refused = alice_client.post(url, {"stack_name": "x", "config_text": json.dumps({"something": {}})})
    assert refused.status_code == 200
    assert "the shapes understood are" in refused.content.decode()


# -- who may import what (docs/roles.md, "The stack import") -------------------------------------


def _member_client(client, team, user_factory, name="bob"):
    from dashboard.teams.models import Membership

    member = user_factory(name)
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    client.force_login(member)
    return client, member


def test_a_members_import_never_changes_a_server_they_may_not_edit(client, team, alice, user_factory):
    docs = McpServer.objects.create(
        team=team,
        name="docs",
        transport=Transport.HTTP,
        url="https://docs.internal/mcp",
        headers={"Authorization": "Bearer the-real-one"},
        owner=alice,
    )
    github = McpServer.objects.create(
        team=team,
        name="github",
        transport=Transport.STDIO,
        command="gh-mcp",
        args=["--read-only"],
        env={"GITHUB_TOKEN": "ghp_real"},
        owner=alice,
    )
    client, bob = _member_client(client, team, user_factory)
    response = client.post(
        reverse("stacks", args=[team.slug]),
        {"stack_name": "bob-agent", "config_text": json.dumps(CLAUDE_CONFIG)},
        follow=True,
    )
    assert response.status_code == 200
    docs.refresh_from_db()
    github.refresh_from_db()
    # The admin's HTTP server and the stdio server are exactly as they were, secrets included.
    assert (docs.url, docs.headers, docs.owner) == (
        "https://docs.internal/mcp",
        {"Authorization": "Bearer the-real-one"},
        alice,
    )
    assert (github.transport, github.command, github.args) == (Transport.STDIO, "gh-mcp", ["--read-only"])
    assert github.env == {"GITHUB_TOKEN": "ghp_real"}
    # The file's docs is another server than the admin's (another URL): kept apart as bob's, and
    # the new HTTP server added as bob's; the stdio one bob may not register is listed with why.
    legacy = McpServer.objects.get(team=team, name="legacy")
    assert legacy.owner == bob and McpServer.objects.filter(team=team).count() == 4
    assert McpServer.objects.get(team=team, name="docs (bob-agent)").owner == bob
    page = response.content.decode()
    assert "docs: conflict (kept both as &#x27;docs (bob-agent)&#x27;)" in page
    assert "github (a stdio server runs a command on the worker" in page
    assert set(Stack.objects.get(team=team, name="bob-agent").servers.values_list("name", flat=True)) == {
        "docs (bob-agent)",
        "legacy",
    }


def test_a_member_replaces_only_the_stacks_they_imported(client, team, alice, user_factory):
    shared = json.dumps({"mcpServers": {"shared-http": {"type": "http", "url": "https://a.example.com/mcp"}}})
    client.force_login(alice)
    url = reverse("stacks", args=[team.slug])
    assert client.post(url, {"stack_name": "shared", "config_text": shared}).status_code == 302
    client, bob = _member_client(client, team, user_factory)
    mine = json.dumps({"mcpServers": {"bobs": {"type": "http", "url": "https://b.example.com/mcp"}}})
    response = client.post(url, {"stack_name": "shared", "config_text": mine}, follow=True)
    assert response.status_code == 200
    assert "Stack shared left as it is" in response.content.decode()
    stack = Stack.objects.get(team=team, name="shared")
    assert list(stack.servers.values_list("name", flat=True)) == ["shared-http"]
    assert not McpServer.objects.filter(team=team, name="bobs").exists()
    # Their own stack and their own HTTP server, bob may re-import over.
    assert client.post(url, {"stack_name": "bob-stack", "config_text": mine}).status_code == 302
    moved = mine.replace("https://b.example.com/mcp", "https://c.example.com/mcp")
    assert client.post(url, {"stack_name": "bob-stack", "config_text": moved}).status_code == 302
    assert McpServer.objects.get(team=team, name="bobs").url == "https://c.example.com/mcp"


def test_a_reimport_keeps_the_stored_secrets(team, tmp_path):
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps(CLAUDE_CONFIG))
    call_command("import_servers", str(config), "--team", team.slug, stdout=StringIO())
    github = McpServer.objects.get(team=team, name="github")
    docs = McpServer.objects.get(team=team, name="docs")
    # An admin enters the real values on the edit page (the file only has placeholders).
    github.env = {"GITHUB_TOKEN": "ghp_real", "EXTRA": "kept-too"}
    github.save()
    docs.headers = {"Authorization": "Bearer the-real-one"}
    docs.save()
    call_command("import_servers", str(config), "--team", team.slug, stdout=StringIO())
    github.refresh_from_db()
    docs.refresh_from_db()
    # The placeholder never overwrites a stored value; the file's set says which keys remain.
    assert github.env == {"GITHUB_TOKEN": "ghp_real"}
    assert docs.headers == {"Authorization": "Bearer the-real-one"}
    # An entry without any secrets keeps the stored ones; an entry with a real new value replaces.
    bare = json.loads(json.dumps(CLAUDE_CONFIG))
    del bare["mcpServers"]["github"]["env"]
    bare["mcpServers"]["docs"]["headers"] = {"Authorization": "Bearer rotated"}
    config.write_text(json.dumps(bare))
    call_command("import_servers", str(config), "--team", team.slug, stdout=StringIO())
    github.refresh_from_db()
    docs.refresh_from_db()
    assert github.env == {"GITHUB_TOKEN": "ghp_real"}
    assert docs.headers == {"Authorization": "Bearer rotated"}
