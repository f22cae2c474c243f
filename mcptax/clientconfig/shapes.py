"""Which shape a parsed config file has (mcpServers, VS Code, Zed, Codex, Goose, Continue, opencode,
Claude Code projects and plugins), and its stacks read with the matching entry reader."""

from __future__ import annotations

from typing import Any

from mcptax.clientconfig.entries import (
    _codex_entry,
    _continue_stack,
    _gemini_entry,
    _goose_entry,
    _is_comment,
    _json_entry,
    _librechat_entry,
    _opencode_entry,
    _stack,
    _zed_entry,
)
from mcptax.clientconfig.types import ConfigError, StackSpec, _unknown

_SERVER_KEYS = {"command", "url", "httpUrl", "serverUrl", "type", "transport", "args"}
_GEMINI_KEYS = {"httpUrl", "trust", "includeTools", "excludeTools"}
# Top-level keys only LibreChat's librechat.yaml has: its `mcpServers` reads a bare `url` as SSE.
_LIBRECHAT_KEYS = {"endpoints", "registration", "interface", "fileConfig", "modelSpecs", "balance"}


def parse_config(data: Any, *, client: str | None = None) -> list[StackSpec]:
    """Every stack of a parsed config file. Raises ConfigError naming the shapes it knows.

    `client` is who wrote the file when its location tells (see :func:`client_of`): Gemini CLI
    reads a bare `url` as SSE, as does LibreChat. A file is also taken to be Gemini CLI's when one
    of its servers uses a key only Gemini CLI has (`httpUrl`, `trust`, `includeTools`,
    `excludeTools`), and LibreChat's when it has LibreChat's top-level sections.
    """
    if not isinstance(data, dict):
        raise ConfigError(_unknown("the file is not a JSON object, YAML mapping or TOML table"))
    stacks: list[StackSpec] = []
    if isinstance(data.get("mcp_servers"), dict):
        stacks.append(_stack("codex", data["mcp_servers"], _codex_entry))
    if isinstance(data.get("context_servers"), dict):
        stacks.append(_stack("zed", data["context_servers"], _zed_entry))
    if _is_goose(data.get("extensions")):
        stacks.append(_stack("goose", data["extensions"], _goose_entry))
    servers = data.get("mcpServers")
    if isinstance(servers, dict):
        stacks.append(_mcp_servers_stack(servers, data, client))
    elif isinstance(servers, list):
        stacks.append(_continue_stack(servers))
    if isinstance(data.get("servers"), dict):
        stacks.append(_stack("vscode", data["servers"], _json_entry))
    elif isinstance(data.get("mcp"), dict):
        stacks += _mcp_key_stacks(data["mcp"], client)
    stacks += _project_stacks(data.get("projects"))
    if not stacks and data and all(_looks_like_server(v) or _is_comment(k) for k, v in data.items()):
        stacks.append(_stack("plugin", data, _json_entry))
    if not stacks:
        raise ConfigError(_unknown("no MCP server list found"))
    tool_search = _tool_search(data)
    for stack in stacks:
        stack.tool_search = tool_search
    return stacks


def _mcp_servers_stack(entries: dict[str, Any], data: dict[str, Any], client: str | None) -> StackSpec:
    if client == "gemini" or any(isinstance(e, dict) and _GEMINI_KEYS & e.keys() for e in entries.values()):
        return _stack("gemini", entries, _gemini_entry)
    if client == "librechat" or _LIBRECHAT_KEYS & data.keys():
        return _stack("librechat", entries, _librechat_entry)
    return _stack("amazon-q" if client == "amazon-q" else "mcpServers", entries, _json_entry)


def _mcp_key_stacks(mcp: dict[str, Any], client: str | None) -> list[StackSpec]:
    """`mcp` is VS Code's settings section (`mcp.servers`) or opencode's server map (`mcp.<name>`,
    or `mcp.servers.<name>` in newer opencode); opencode's entries say `type: local|remote`."""
    nested = mcp.get("servers")
    entries = nested if isinstance(nested, dict) else mcp
    opencode = client == "opencode" or any(
        isinstance(e, dict) and str(e.get("type", "")).lower() in ("local", "remote")
        for e in entries.values()
    )
    if opencode:
        return [_stack("opencode", entries, _opencode_entry)]
    if isinstance(nested, dict):
        return [_stack("vscode", nested, _json_entry)]
    return []


def _project_stacks(projects: Any) -> list[StackSpec]:
    if not isinstance(projects, dict):
        return []
    return [
        _stack("claude-code-project", project["mcpServers"], _json_entry, scope=str(path))
        for path, project in projects.items()
        if isinstance(project, dict) and isinstance(project.get("mcpServers"), dict) and project["mcpServers"]
    ]


def _is_goose(extensions: Any) -> bool:
    return isinstance(extensions, dict) and any(
        isinstance(e, dict) and ("cmd" in e or "type" in e or isinstance(e.get("config"), dict))
        for e in extensions.values()
    )


def _tool_search(data: dict[str, Any]) -> str | None:
    """Claude Code's ENABLE_TOOL_SEARCH, from a settings file's (or ~/.claude.json's) `env`."""
    env = data.get("env")
    if isinstance(env, dict) and isinstance(env.get("ENABLE_TOOL_SEARCH"), str | bool | int):
        value = env["ENABLE_TOOL_SEARCH"]
        return str(value).lower() if isinstance(value, bool) else str(value)
    return None


def _looks_like_server(value: Any) -> bool:
    return isinstance(value, dict) and bool(_SERVER_KEYS & value.keys())
