"""Tolerant imports (each entry imported, imported disabled or skipped, with its reason) and one
server identity across stacks (the same name defined differently is two servers; an import never
changes another stack). Expectations are written out from tests/data/configs/ (see its README).
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.servers.models import McpServer, Stack

pytestmark = pytest.mark.django_db
CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"


def run(team, path: Path, *extra: str) -> dict:
    out = StringIO()
    call_command("import_servers", str(path), "--team", team.slug, "--json", *extra, stdout=out)
    return json.loads(out.getvalue())


def outcomes(report: dict) -> dict[str, tuple[str, str, bool]]:
    (stack,) = report["stacks"]
    return {e["name"]: (e["label"], e["server"], e["disabled"]) for e in stack["entries"]}


def world(team) -> dict[str, dict[str, tuple]]:
    """Every stack with each member's definition and state, as the dashboard would measure it."""
    return {
        stack.name: {
            s.name: (s.transport, s.command, tuple(s.args), s.url, s.enabled, tuple(sorted(s.env.items())))
            for s in stack.servers.all()
        }
        for stack in Stack.objects.filter(team=team)
    }


# -- tolerant imports ----------------------------------------------------------------------------


def test_amazon_q_placeholders_import_disabled_and_the_six_others_import(team):
    report = run(team, CONFIGS / "amazonq_mcp.json")
    found = outcomes(report)
    for name in ("aws-docs", "git", "redis", "clickhouse", "markitdown", "drawio"):
        assert found[name] == ("created", name, False)
    assert found["jira"] == ("created", "jira", True)
    assert found["confluence"] == ("created", "confluence", True)
    assert found["_comment"] == ("skipped", "", False)
    entries = {e["name"]: e for e in report["stacks"][0]["entries"]}
    assert entries["jira"]["reason"] == "a placeholder with an empty command"
    assert entries["_comment"]["reason"] == "a comment, not a server"
    assert not McpServer.objects.get(team=team, name="jira").enabled
    assert McpServer.objects.filter(team=team, enabled=True).count() == 6


def test_a_loopback_url_is_imported_disabled_and_the_stdio_server_beside_it_imports(team, settings):
    settings.OUTBOUND_ALLOW_NETWORKS = []  # the default policy: public addresses only
    found = outcomes(run(team, CONFIGS / "vscode_loopback.jsonc"))
    assert found["memory"] == ("created", "memory", False)
    assert found["next-devtools"] == ("created", "next-devtools", True)
    server = McpServer.objects.get(team=team, name="next-devtools")
    assert (server.url, server.enabled) == ("http://localhost:3000/_next/mcp", False)
    report = run(team, CONFIGS / "vscode_loopback.jsonc")
    entry = next(e for e in report["stacks"][0]["entries"] if e["name"] == "next-devtools")
    assert entry["reason"].startswith("the outbound policy refuses its URL")


def test_a_nested_transport_is_read_and_a_malformed_entry_is_skipped_with_its_reason(team):
    found = outcomes(run(team, CONFIGS / "cursor_nested_transport.json"))
    assert found["figma"] == ("created", "figma", False)
    assert found["chrome-devtools"] == ("created", "chrome-devtools", False)
    assert found["eslint"] == ("skipped", "", False)
    assert McpServer.objects.get(team=team, name="figma").url == "https://mcp.figma.com/mcp"


def test_exit_codes_0_imported_1_nothing_imported_2_unreadable(team, tmp_path):
    builtins_only = tmp_path / "config.yaml"
    builtins_only.write_text("extensions:\n  developer:\n    type: builtin\n    enabled: true\n")
    with pytest.raises(CommandError) as nothing:
        call_command("import_servers", str(builtins_only), "--team", team.slug, stdout=StringIO())
    assert nothing.value.returncode == 1
    broken = tmp_path / "librechat.yaml"
    broken.write_text("mcpServers:\n  a: [\n")
    with pytest.raises(CommandError) as unreadable:
        call_command("import_servers", str(broken), "--team", team.slug)
    assert unreadable.value.returncode == 2 and "not valid YAML" in str(unreadable.value)
    assert "JSON" not in str(unreadable.value)
    with pytest.raises(CommandError) as missing:
        call_command("import_servers", str(tmp_path / "absent.json"), "--team", team.slug)
    assert missing.value.returncode == 2


def test_the_text_output_says_what_became_of_each_entry(team):
    out = StringIO()
    call_command("import_servers", str(CONFIGS / "goose_config.yaml"), "--team", team.slug, stdout=out)
    text = out.getvalue()
    assert "  github: created" in text
    assert "  playwright: created, imported disabled (disabled in the file)" in text
    assert "  developer: skipped (a Goose builtin extension runs inside Goose" in text
    assert "  broken: skipped ('args' must be a list of strings)" in text


def test_a_continue_folder_imports_as_one_stack(team):
    report = run(team, CONFIGS / "continue_mcpServers")
    assert [s["stack"] for s in report["stacks"]] == ["continue_mcpServers"]
    assert world(team)["continue_mcpServers"].keys() == {"sqlite", "markitdown", "Browser search"}


# -- one server identity across stacks -----------------------------------------------------------


def test_the_same_name_defined_differently_is_two_servers_and_no_stack_changes_behind_your_back(team):
    run(team, CONFIGS / "codex_config.toml")
    codex_before = world(team)["codex_config.toml"]
    assert codex_before["context7"][:3] == ("stdio", "npx", ("-y", "@upstash/context7-mcp"))

    found = outcomes(run(team, CONFIGS / "cursor.json"))
    assert found["context7"] == (
        "conflict (kept both as 'context7 (cursor.json)')",
        "context7 (cursor.json)",
        False,
    )
    assert found["time"] == ("created", "time", False)
    after = world(team)
    # The Codex stack is exactly as it was: same members, same definitions, same state.
    assert after["codex_config.toml"] == codex_before
    assert after["cursor.json"]["context7 (cursor.json)"][:4] == (
        "http",
        "",
        (),
        "https://mcp.context7.com/mcp",
    )

    # Re-importing either file finds its own servers again: nothing created, nothing changed.
    assert set(outcomes(run(team, CONFIGS / "codex_config.toml")).values()) == {
        ("unchanged", "context7", False),
        ("unchanged", "figma", False),
        ("unchanged", "notes", True),
    }
    assert outcomes(run(team, CONFIGS / "cursor.json"))["context7"][0] == "unchanged"
    assert world(team) == after
    assert McpServer.objects.filter(team=team).count() == 5


def test_a_changed_definition_updates_that_server_only(team, tmp_path):
    run(team, CONFIGS / "codex_config.toml")
    run(team, CONFIGS / "cursor.json")
    before = world(team)
    moved = tmp_path / "cursor.json"
    moved.write_text((CONFIGS / "cursor.json").read_text().replace("mcp.context7.com", "eu.context7.com"))
    found = outcomes(run(team, moved))
    assert found["context7"] == ("updated", "context7 (cursor.json)", False)
    after = world(team)
    assert after["codex_config.toml"] == before["codex_config.toml"]
    assert after["cursor.json"]["context7 (cursor.json)"][3] == "https://eu.context7.com/mcp"
    assert McpServer.objects.filter(team=team).count() == 5


def test_a_server_shared_by_two_stacks_is_never_changed_by_one_of_them(team, tmp_path):
    entry = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"mcpServers": {"memory": entry}}))
    second.write_text(json.dumps({"mcpServers": {"memory": entry}}))
    run(team, first)
    assert outcomes(run(team, second))["memory"] == ("unchanged", "memory", False)
    # b.json now switches it off: a.json's stack must keep its running server.
    second.write_text(json.dumps({"mcpServers": {"memory": {**entry, "disabled": True}}}))
    found = outcomes(run(team, second))
    assert found["memory"] == ("conflict (kept both as 'memory (b.json)')", "memory (b.json)", True)
    state = world(team)
    assert state["a.json"] == {
        "memory": ("stdio", "npx", ("-y", "@modelcontextprotocol/server-memory"), "", True, ())
    }
    assert state["b.json"]["memory (b.json)"][4] is False


def test_a_stack_never_loses_a_member_because_another_config_was_imported(team):
    for name in ("codex_config.toml", "windsurf.json", "cline.json", "kiro.json"):
        run(team, CONFIGS / name)
    before = world(team)
    for name in ("cursor.json", "goose_config.yaml", "opencode.jsonc", "amazonq_mcp.json", "librechat.yaml"):
        run(team, CONFIGS / name)
        now = world(team)
        for stack, members in before.items():
            assert now[stack] == members, f"{name} changed stack {stack}"


def test_web_import_of_pasted_goose_yaml_lists_every_entry(alice_client, team):
    from django.urls import reverse

    text = (CONFIGS / "goose_config.yaml").read_text()
    response = alice_client.post(
        reverse("stacks", args=[team.slug]), {"stack_name": "goose", "config_text": text}, follow=True
    )
    assert response.status_code == 200
    assert world(team)["goose"].keys() == {"github", "excel", "playwright", "context7"}
    page = response.content.decode()
    assert "4 servers added" in page
    assert "playwright (disabled in the file)" in page
    assert "developer (a Goose builtin extension runs inside Goose: there is no MCP server to poll)" in page
    assert "not valid JSON" not in page
