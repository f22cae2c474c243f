"""`mcp-tax measure --discover` on a fake home: real config files where each client keeps them,
read and measured, and named on stderr."""

from __future__ import annotations

import json

import pytest

from tests.mcptax.cli.support import mcp_tax, oracle_tax, server_entry, write_config

pytestmark = pytest.mark.timeout(300)


def _toml_server(name: str, entry: dict) -> str:
    env = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in entry["env"].items())
    return (
        f"[mcp_servers.{name}]\ncommand = {json.dumps(entry['command'])}\n"
        f"args = {json.dumps(entry['args'])}\nenv = {{ {env} }}\n"
    )


def test_discover_reads_every_installed_clients_config_and_names_them(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    lean, sprawl = server_entry("lean"), server_entry("sprawling")
    # Claude Code: user scope and a local (per-project) scope in ~/.claude.json, project scope in .mcp.json.
    (home).mkdir()
    (home / ".claude.json").write_text(
        json.dumps(
            {"mcpServers": {"lean": lean}, "projects": {str(project): {"mcpServers": {"sprawl": sprawl}}}}
        )
    )
    write_config(project / ".mcp.json", {"lean-project": lean})
    write_config(home / ".cursor" / "mcp.json", {"sprawl": sprawl})
    write_config(home / ".config" / "Code" / "User" / "mcp.json", {"lean": lean}, key="servers")
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(_toml_server("lean", lean))
    write_config(home / ".gemini" / "settings.json", {"lean": lean})
    # A settings file without MCP servers is no error: nothing to measure there.
    (home / ".config" / "Code" / "User" / "settings.json").write_text('{"editor.fontSize": 14}')

    run = mcp_tax(
        "measure",
        "--discover",
        "--json",
        env={"HOME": str(home), "XDG_CONFIG_HOME": "", "CODEX_HOME": ""},
        cwd=project,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    named = run.stderr
    for client, path in [
        ("Claude Code user", home / ".claude.json"),
        ("Claude Code project", project / ".mcp.json"),
        ("Cursor user", home / ".cursor" / "mcp.json"),
        ("VS Code user", home / ".config" / "Code" / "User" / "mcp.json"),
        ("Codex CLI user", home / ".codex" / "config.toml"),
        ("Gemini CLI user", home / ".gemini" / "settings.json"),
    ]:
        assert f"{client} ({path})" in named
    stacks = {(s["client"], s["name"]): s for s in json.loads(run.stdout)["stacks"]}
    lean_tax, sprawl_tax = oracle_tax("lean"), oracle_tax("sprawling")
    assert stacks[("Claude Code, user", str(home / ".claude.json"))]["total"]["fixed_tax_tokens"] == lean_tax
    # The project's own list in ~/.claude.json is its local scope, not the user's.
    assert stacks[("Claude Code, local", f"project {project}")]["total"]["fixed_tax_tokens"] == sprawl_tax
    assert (
        stacks[("Claude Code, project", str(project / ".mcp.json"))]["total"]["fixed_tax_tokens"] == lean_tax
    )
    assert (
        stacks[("Cursor, user", str(home / ".cursor" / "mcp.json"))]["total"]["fixed_tax_tokens"]
        == sprawl_tax
    )
    assert (
        stacks[("Codex CLI, user", str(home / ".codex" / "config.toml"))]["total"]["fixed_tax_tokens"]
        == lean_tax
    )
    assert len(stacks) == 7  # the settings.json without servers is read and skipped


def test_discover_with_nothing_installed_says_so_and_exits_2(tmp_path):
    run = mcp_tax(
        "measure",
        "--discover",
        env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": "", "CODEX_HOME": ""},
        cwd=tmp_path,
    )
    assert run.returncode == 2
    assert "discovered: none" in run.stderr
    assert "no client config with MCP servers was found" in run.stderr
