"""Every client config shape people have, read into stacks of servers (mcptax/clientconfig/).

The fixtures in tests/data/configs/ follow each client's published shape (see the README there);
the expected servers below are written by hand from those files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcptax.clientconfig import ConfigError, ServerSpec, parse_config, parse_config_text

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "configs"


def read(name: str):
    return parse_config_text((CONFIGS / name).read_text(), filename=name)


def by_name(servers: list[ServerSpec]) -> dict[str, ServerSpec]:
    return {s.name: s for s in servers}


def only_stack(name: str) -> dict[str, ServerSpec]:
    stacks = read(name)
    assert len(stacks) == 1, [s.shape for s in stacks]
    assert stacks[0].scope is None
    return by_name(stacks[0].servers)


def summary(spec: ServerSpec) -> tuple:
    return (spec.transport, spec.command or spec.url, spec.disabled)


def test_claude_desktop():
    servers = only_stack("claude_desktop.json")
    assert {n: summary(s) for n, s in servers.items()} == {
        "filesystem": ("stdio", "npx", False),
        "github": ("stdio", "npx", False),
    }
    assert servers["filesystem"].args == [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/me/Desktop",
    ]
    assert servers["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    assert servers["github"].placeholders == ["${GITHUB_TOKEN}"]
    assert servers["filesystem"].placeholders == []


def test_claude_code_project_file_types():
    servers = only_stack("claude_code_mcp.json")
    assert {n: summary(s) for n, s in servers.items()} == {
        "playwright": ("stdio", "npx", False),
        "docs": ("http", "https://docs.example.com/mcp", False),
        "events": ("sse", "https://events.example.com/sse", False),
    }
    assert servers["docs"].headers == {"Authorization": "Bearer ${DOCS_TOKEN}"}
    assert servers["docs"].placeholders == ["${DOCS_TOKEN}"]


def test_claude_json_user_and_per_project_servers_each_a_stack():
    stacks = read("claude_code_user.json")
    assert [(s.shape, s.scope) for s in stacks] == [
        ("mcpServers", None),
        ("claude-code-project", "/home/me/src/shop"),
        ("claude-code-project", "/home/me/src/infra"),
    ]  # the blog project has no servers: no empty stack
    user, shop, infra = stacks
    assert [s.name for s in user.servers] == ["memory"]
    assert {n: summary(s) for n, s in by_name(shop.servers).items()} == {
        "postgres": ("stdio", "npx", False),
        "sentry": ("http", "https://mcp.sentry.dev/mcp", False),
    }
    assert by_name(shop.servers)["postgres"].placeholders == ["${DATABASE_URL}"]
    kube = by_name(infra.servers)["kubernetes"]
    assert kube.cwd == "${HOME}/src/infra"
    assert kube.placeholders == ["${HOME}"], "a placeholder in cwd is listed too"
    assert shop.name("claude-code") == "/home/me/src/shop"
    assert user.name("claude-code") == "claude-code"


def test_claude_plugin_servers_at_the_top_level():
    stacks = read("claude_plugin_mcp.json")
    assert [s.shape for s in stacks] == ["plugin"]
    servers = by_name(stacks[0].servers)
    assert summary(servers["plugin-db"]) == ("stdio", "${CLAUDE_PLUGIN_ROOT}/servers/db-server", False)
    assert servers["plugin-db"].placeholders == ["${CLAUDE_PLUGIN_ROOT}", "${DB_URL}"]
    assert summary(servers["plugin-api"]) == ("http", "https://api.example.com/mcp", False)


def test_cursor_remote_url_is_streamable_http():
    servers = only_stack("cursor.json")
    assert summary(servers["context7"]) == ("http", "https://mcp.context7.com/mcp", False)
    assert servers["context7"].placeholders == ["${env:CONTEXT7_API_KEY}"]
    assert servers["time"].args == ["mcp-server-time", "--local-timezone", "UTC"]


def test_vscode_jsonc_with_comments_trailing_commas_and_inputs():
    servers = only_stack("vscode_mcp.jsonc")
    assert {n: summary(s) for n, s in servers.items()} == {
        "perplexity": ("stdio", "npx", False),
        "fetch": ("stdio", "uvx", False),
        "github": ("http", "https://api.githubcopilot.com/mcp/", False),
    }
    assert servers["perplexity"].placeholders == ["${input:perplexity-key}"]
    assert servers["fetch"].placeholders == ["${workspaceFolder}"]


def test_vscode_user_settings_mcp_servers():
    servers = only_stack("vscode_settings.jsonc")
    assert list(servers) == ["memory"]
    assert summary(servers["memory"]) == ("stdio", "npx", False)


def test_windsurf_server_url_and_disabled():
    servers = only_stack("windsurf.json")
    assert {n: summary(s) for n, s in servers.items()} == {
        "git": ("stdio", "uvx", False),
        "remote-docs": ("http", "https://docs.example.com/mcp", False),
        "old-search": ("stdio", "npx", True),
    }


def test_cline_and_roo_streamable_http_type_and_disabled():
    servers = only_stack("cline.json")
    assert {n: summary(s) for n, s in servers.items()} == {
        "sequential-thinking": ("stdio", "npx", False),
        "remote": ("http", "https://mcp.example.com/mcp", True),
        "legacy": ("sse", "https://legacy.example.com/sse", False),
    }


def test_kiro_disabled():
    servers = only_stack("kiro.json")
    assert {n: s.disabled for n, s in servers.items()} == {"aws-docs": False, "paused": True}


def test_gemini_url_is_sse_and_http_url_is_streamable_http():
    stacks = read("gemini_settings.json")
    assert [s.shape for s in stacks] == ["gemini"]
    servers = by_name(stacks[0].servers)
    assert {n: summary(s) for n, s in servers.items()} == {
        "events": ("sse", "http://localhost:8080/sse", False),
        "docs": ("http", "https://docs.example.com/mcp", False),
        "python": ("stdio", "python", False),
    }
    assert servers["python"].cwd == "./mcp-servers/python"


def test_gemini_file_recognised_by_its_location_even_without_gemini_only_keys():
    text = '{"mcpServers": {"events": {"url": "http://localhost:8080/sse"}}}'
    assert read_text_as(text, "/home/me/.gemini/settings.json") == ("sse", "gemini")
    assert read_text_as(text, "/home/me/.cursor/mcp.json") == ("http", "mcpServers")


def read_text_as(text: str, filename: str) -> tuple[str, str]:
    (stack,) = parse_config_text(text, filename=filename)
    return stack.servers[0].transport, stack.shape


def test_zed_context_servers_both_shapes_remote_and_enabled_false():
    stacks = read("zed_settings.jsonc")
    assert [s.shape for s in stacks] == ["zed"]
    servers = by_name(stacks[0].servers)
    assert {n: summary(s) for n, s in servers.items()} == {
        "local-mcp-server": ("stdio", "some-command", False),
        "older-shape": ("stdio", "/usr/local/bin/old-server", False),
        "remote-mcp-server": ("http", "https://example.com/mcp", False),
        "switched-off": ("stdio", "x-server", True),
    }
    assert servers["older-shape"].args == ["--stdio"]
    assert servers["older-shape"].env == {"A": "1"}


def test_codex_toml_tables_bearer_env_var_and_enabled_false():
    stacks = read("codex_config.toml")
    assert [s.shape for s in stacks] == ["codex"]
    servers = by_name(stacks[0].servers)
    assert {n: summary(s) for n, s in servers.items()} == {
        "context7": ("stdio", "npx", False),
        "figma": ("http", "https://mcp.figma.com/mcp", False),
        "notes": ("stdio", "notes-server", True),
    }
    assert servers["context7"].env == {"DEBUG": "0"}
    assert servers["figma"].headers == {
        "X-Figma-Region": "us-east-1",
        "Authorization": "Bearer ${FIGMA_OAUTH_TOKEN}",
    }
    assert servers["figma"].placeholders == ["${FIGMA_OAUTH_TOKEN}"]
    assert servers["notes"].cwd == "/srv/notes"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "not a JSON object"),
        ({"theme": "dark"}, "no MCP server list found"),
    ],
)
def test_unknown_shapes_get_an_error_that_says_why(data, message):
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mcpServers": {"x": "npx foo"}}, "expected an object, got str"),
        ({"mcpServers": {"x": {"env": {}}}}, "needs a 'command'"),
        ({"mcpServers": {"x": {"command": "a", "args": "b c"}}}, "'args' must be a list of strings"),
        ({"mcpServers": {"x": {"url": "https://a", "type": "carrier-pigeon"}}}, "unknown transport type"),
        ({"mcpServers": {"x": {"url": "wss://a", "type": "websocket"}}}, "WebSocket"),
        ({"context_servers": {"x": {"source": "extension", "settings": {}}}}, "Zed extension server"),
    ],
)
def test_a_broken_entry_is_skipped_with_its_reason_and_the_rest_still_read(data, message):
    key = next(iter(data))
    data[key]["ok"] = {"command": "npx", "args": ["-y", "ok-server"]}
    (stack,) = parse_config(data)
    assert [s.name for s in stack.servers] == ["ok"]
    assert [s.name for s in stack.skipped] == ["x"]
    assert message in stack.skipped[0].reason


def test_unknown_shape_error_names_every_shape_it_knows():
    with pytest.raises(ConfigError) as caught:
        parse_config({"something": {"else": 1}})
    text = str(caught.value)
    for client in (
        "Claude Desktop",
        "Cursor",
        "Windsurf",
        "Cline",
        "Roo",
        "Kiro",
        "Gemini CLI",
        "VS Code",
        "Zed",
        "Codex",
    ):
        assert client in text


def test_broken_json_and_toml_are_reported_not_crashed():
    with pytest.raises(ConfigError, match="not valid JSON or JSONC"):
        parse_config_text('{"mcpServers": {', filename="mcp.json")
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config_text("[mcp_servers.x\ncommand = 1", filename="config.toml")


def test_claude_code_always_load_and_enable_tool_search_are_kept():
    (stack,) = parse_config(
        {
            "env": {"ENABLE_TOOL_SEARCH": "auto:5", "OTHER": "x"},
            "mcpServers": {
                "docs": {"command": "docs-server", "alwaysLoad": True},
                "big": {"type": "http", "url": "https://example.test/mcp"},
            },
        }
    )
    assert stack.tool_search == "auto:5"
    assert [(s.name, s.always_load) for s in stack.servers] == [("docs", True), ("big", False)]
    (plain,) = parse_config({"mcpServers": {"a": {"command": "a"}}})
    assert plain.tool_search is None and plain.servers[0].always_load is False
    # A JSON boolean is read as Claude Code reads the variable's text.
    (flag,) = parse_config({"env": {"ENABLE_TOOL_SEARCH": False}, "mcpServers": {"a": {"command": "a"}}})
    assert flag.tool_search == "false"


def test_claude_code_tool_search_fixture():
    (stack,) = read("claude_code_tool_search.json")
    assert stack.tool_search == "auto:5"
    assert {s.name: s.always_load for s in stack.servers} == {"docs": True, "tickets": False}
