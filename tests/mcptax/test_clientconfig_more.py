"""YAML clients (Goose, LibreChat, Continue), opencode and Amazon Q, and tolerant reading: one odd
entry is skipped with its reason and never loses the rest of the file (mcptax/clientconfig/).

The fixtures in tests/data/configs/ follow each client's published shape (see the README there);
the expected servers below are written by hand from those files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcptax.clientconfig import ConfigError, StackSpec, parse_config_files, parse_config_text

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "configs"


def read(name: str) -> StackSpec:
    (stack,) = parse_config_text((CONFIGS / name).read_text(), filename=name)
    return stack


def servers(stack: StackSpec) -> dict[str, tuple]:
    return {s.name: (s.transport, s.command or s.url, s.args, s.disabled) for s in stack.servers}


def skipped(stack: StackSpec) -> dict[str, str]:
    return {s.name: s.reason for s in stack.skipped}


def test_goose_extensions_builtins_listed_as_not_pollable():
    stack = read("goose_config.yaml")
    assert stack.shape == "goose"
    assert servers(stack) == {
        "github": ("stdio", "npx", ["-y", "@modelcontextprotocol/server-github"], False),
        "excel": (
            "stdio",
            "C:\\Users\\dev\\AppData\\Local\\Programs\\uv\\uvx.exe",
            ["excel-mcp-server", "stdio"],
            False,
        ),
        "playwright": ("sse", "http://localhost:8931/sse", [], True),
        "context7": ("http", "https://mcp.context7.com/mcp", [], False),
    }
    by_name = {s.name: s for s in stack.servers}
    # env_keys live in the keyring: a placeholder each, never a value.
    assert by_name["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}
    assert by_name["excel"].env == {"EXCEL_FILES_PATH": "D:\\Reports"}
    assert by_name["context7"].headers == {"CONTEXT7_API_KEY": "${CONTEXT7_API_KEY}"}
    reasons = skipped(stack)
    assert set(reasons) == {"developer", "memory", "broken"}
    assert "builtin extension runs inside Goose" in reasons["developer"]
    assert reasons["broken"] == "'args' must be a list of strings"


def test_librechat_servers_not_the_interface_permissions():
    stack = read("librechat.yaml")
    assert stack.shape == "librechat"
    assert servers(stack) == {
        "everything": ("sse", "http://localhost:3001/sse", [], False),
        "puppeteer": ("stdio", "npx", ["-y", "@modelcontextprotocol/server-puppeteer"], False),
        "hubspot": ("http", "https://mcp.hubspot.example.com/mcp", [], False),
        "obsidian": ("stdio", "npx", ["-y", "mcp-obsidian", "/home/user/vault"], False),
    }
    assert "WebSocket" in skipped(stack)["chat-socket"]
    hubspot = next(s for s in stack.servers if s.name == "hubspot")
    assert hubspot.placeholders == ["${HUBSPOT_TOKEN}", "{{LIBRECHAT_USER_ID}}"]


def test_continue_config_yaml_list_of_named_blocks():
    stack = read("continue_config.yaml")
    assert stack.shape == "continue"
    assert servers(stack) == {
        "SQLite": ("stdio", "npx", ["-y", "mcp-sqlite", "${{ secrets.SQLITE_PATH }}"], False),
        "Docs search": ("http", "https://docs.example.com/mcp", [], False),
        "Local SSE": ("sse", "http://127.0.0.1:8000/sse", [], False),
    }
    docs = next(s for s in stack.servers if s.name == "Docs search")
    assert docs.headers == {"Authorization": "Bearer ${{ secrets.DOCS_TOKEN }}"}
    assert docs.placeholders == ["${{ secrets.DOCS_TOKEN }}"]
    assert skipped(stack) == {
        "anthropic/memory-mcp": "a Continue Hub block reference (uses:): its definition is not in the file",
        "#5": "a Continue server block without a 'name'",
    }


def test_continue_folder_of_block_files_is_one_stack():
    folder = CONFIGS / "continue_mcpServers"
    (stack,) = parse_config_files([(str(p), p.read_text()) for p in folder.iterdir()])
    # File-name order: copied-from-claude.json, markitdown.yml, playwright.yaml.
    assert [(s.name, s.command, s.args) for s in stack.servers] == [
        ("sqlite", "uvx", ["mcp-server-sqlite", "--db-path", "C:\\data\\app.db"]),
        ("markitdown", "uvx", ["markitdown-mcp"]),
        ("Browser search", "npx", ["@playwright/mcp@latest"]),
    ]


def test_a_folder_file_that_cannot_be_read_is_one_skipped_entry():
    (stack,) = parse_config_files(
        [("a.yaml", "mcpServers:\n  - name: a\n    command: a-server\n"), ("b.yaml", "mcpServers: [\n")]
    )
    assert [s.name for s in stack.servers] == ["a"]
    assert [s.name for s in stack.skipped] == ["b.yaml"]
    assert stack.skipped[0].reason.startswith("not valid YAML")


def test_opencode_local_argv_remote_and_enabled():
    stack = read("opencode.jsonc")
    assert stack.shape == "opencode"
    assert servers(stack) == {
        "everything": ("stdio", "npx", ["-y", "@modelcontextprotocol/server-everything"], False),
        "sentry": ("http", "https://mcp.sentry.dev/mcp", [], False),
        "grafana": ("stdio", "C:\\tools\\mcp-grafana.exe", ["--debug"], True),
        "todo": ("stdio", "", [], True),
    }
    by_name = {s.name: s for s in stack.servers}
    assert by_name["everything"].env == {"LOG_LEVEL": "warn"}
    assert by_name["sentry"].placeholders == ["{env:SENTRY_TOKEN}"]
    assert by_name["todo"].disabled_reason == "a placeholder with an empty command"
    assert "unknown opencode server type 'docker'" in skipped(stack)["odd"]


def test_opencode_v2_servers_under_mcp_servers_with_disabled():
    text = '{"mcp": {"servers": {"x": {"type": "local", "command": ["x-server"], "disabled": true}}}}'
    (stack,) = parse_config_text(text, "opencode.json")
    assert stack.shape == "opencode"
    assert servers(stack) == {"x": ("stdio", "x-server", [], True)}


def test_amazon_q_placeholders_imported_disabled_and_the_six_others_kept():
    stack = read("amazonq_mcp.json")
    assert stack.shape == "amazon-q"
    enabled = [s.name for s in stack.servers if not s.disabled]
    assert enabled == ["aws-docs", "git", "redis", "clickhouse", "markitdown", "drawio"]
    placeholders = {s.name: s.disabled_reason for s in stack.servers if s.disabled}
    assert placeholders == {
        "jira": "a placeholder with an empty command",
        "confluence": "a placeholder with an empty command",
    }
    git = next(s for s in stack.servers if s.name == "git")
    assert git.notes == [
        "env file ${workspaceFolder}/.env is not read: its values stay on the developer's machine"
    ]
    assert skipped(stack) == {"_comment": "a comment, not a server"}


def test_cursor_nested_transport_is_read_and_one_bad_entry_loses_nothing_else():
    stack = read("cursor_nested_transport.json")
    assert servers(stack) == {
        "figma": ("http", "https://mcp.figma.com/mcp", [], False),
        "chrome-devtools": ("stdio", "npx", ["-y", "chrome-devtools-mcp@latest"], False),
    }
    assert skipped(stack) == {
        "_comment": "a comment, not a server",
        "eslint": "'env' must be an object of strings",
    }


@pytest.mark.parametrize("filename", ["goose_config.yaml", "librechat.yaml", "continue_config.yaml"])
def test_yaml_is_found_by_content_under_any_name(filename):
    text = (CONFIGS / filename).read_text()
    assert servers(parse_config_text(text, "config")[0]) == servers(read(filename))


def test_a_broken_yaml_file_is_never_called_broken_json():
    with pytest.raises(ConfigError) as caught:
        parse_config_text("extensions:\n  github: [\n", "config.yaml")
    assert str(caught.value).startswith("not valid YAML")
    with pytest.raises(ConfigError) as caught:
        parse_config_text("extensions:\n  github: [\n", "settings")
    assert "JSON or JSONC" not in str(caught.value) and "YAML" in str(caught.value)


def test_yaml_tags_that_construct_objects_are_refused():
    text = "mcpServers: !!python/object/apply:os.system ['echo owned']\n"
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_config_text(text, "librechat.yaml")


def test_an_unknown_yaml_file_lists_the_formats_understood():
    with pytest.raises(ConfigError) as caught:
        parse_config_text("theme: dark\nfont: 12\n", "prefs.yaml")
    text = str(caught.value)
    for shape in ("Goose", "LibreChat", "Continue", "opencode", "Amazon Q", "Codex", "VS Code"):
        assert shape in text
