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


def _discover(home, project):
    """`mcp-tax measure --discover --json` with `home` as the home and `project` as the cwd."""
    run = mcp_tax(
        "measure",
        "--discover",
        "--json",
        env={"HOME": str(home), "XDG_CONFIG_HOME": "", "CODEX_HOME": ""},
        cwd=project,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run


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

    run = _discover(home, project)
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


def test_discover_finds_goose_continue_opencode_amazon_q_and_librechat_at_their_usual_paths(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    lean = server_entry("lean")
    yaml_args = ", ".join(json.dumps(a) for a in lean["args"])
    yaml_env = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in lean["env"].items())
    goose = home / ".config" / "goose" / "config.yaml"
    goose.parent.mkdir(parents=True)
    goose.write_text(
        "extensions:\n  developer: {type: builtin, enabled: true, name: developer}\n"
        f"  lean: {{type: stdio, cmd: {json.dumps(lean['command'])}, args: [{yaml_args}], envs: {{{yaml_env}}}}}\n"
    )
    block = project / ".continue" / "mcpServers" / "lean.yaml"
    block.parent.mkdir(parents=True)
    block.write_text(
        f"name: lean block\nmcpServers:\n  - name: lean\n    command: {json.dumps(lean['command'])}\n"
        f"    args: [{yaml_args}]\n    env: {{{yaml_env}}}\n"
    )
    (project / "opencode.jsonc").write_text(
        json.dumps(
            {
                "mcp": {
                    "lean": {
                        "type": "local",
                        "command": [lean["command"], *lean["args"]],
                        "environment": lean["env"],
                    }
                }
            }
        )
    )
    write_config(
        home / ".aws" / "amazonq" / "mcp.json", {"lean": lean, "todo": {"command": "", "disabled": True}}
    )
    librechat = project / "librechat.yaml"
    librechat.write_text(
        "interface:\n  mcpServers: {use: true}\n"
        f"mcpServers:\n  lean: {{command: {json.dumps(lean['command'])}, args: [{yaml_args}], env: {{{yaml_env}}}}}\n"
    )

    run = _discover(home, project)
    for client, path in [
        ("Goose user", goose),
        ("Continue project", block.parent),
        ("opencode project", project / "opencode.jsonc"),
        ("Amazon Q user", home / ".aws" / "amazonq" / "mcp.json"),
        ("LibreChat project", librechat),
    ]:
        assert f"{client} ({path})" in run.stderr
    stacks = {s["client"]: s for s in json.loads(run.stdout)["stacks"]}
    lean_tax = oracle_tax("lean")
    for client in (
        "Goose, user",
        "Continue, project",
        "opencode, project",
        "Amazon Q, user",
        "LibreChat, project",
    ):
        assert stacks[client]["total"]["fixed_tax_tokens"] == lean_tax, client
    goose_rows = {s["name"]: s for s in stacks["Goose, user"]["servers"]}
    assert goose_rows["developer"]["status"] == "skipped"
    assert "runs inside Goose" in goose_rows["developer"]["reason"]
    todo = next(s for s in stacks["Amazon Q, user"]["servers"] if s["name"] == "todo")
    assert (todo["status"], todo["reason"]) == (
        "disabled",
        "a placeholder with an empty command; not started",
    )


def test_discover_in_a_fresh_clone_runs_the_users_servers_and_not_the_projects(tmp_path):
    """`--discover` in a freshly cloned repository: the user's own config is measured; the clone's
    `.mcp.json` command never runs without --trust."""
    import sys

    home, project = tmp_path / "home", tmp_path / "clone"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"lean": server_entry("lean")}}))
    marker = tmp_path / "ran"
    write_config(
        project / ".mcp.json",
        {"setup": {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w')"]}},
    )
    run = mcp_tax(
        "measure",
        "--discover",
        "--json",
        env={"HOME": str(home), "XDG_CONFIG_HOME": "", "CODEX_HOME": ""},
        cwd=project,
        trust=False,
    )
    assert not marker.exists()
    assert run.returncode == 2, run.stdout + run.stderr  # a server held back: the totals are incomplete
    servers = {s["name"]: s for stack in json.loads(run.stdout)["stacks"] for s in stack["servers"]}
    assert servers["lean"]["status"] == "ok" and servers["lean"]["fixed_tax_tokens"] == oracle_tax("lean")
    assert servers["setup"]["status"] == "not_measurable" and "--trust" in servers["setup"]["reason"]
    assert "skipped setup" in run.stderr
