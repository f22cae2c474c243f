"""Read the MCP server lists of every client config people have, without Django.

A config file becomes one or more *stacks* (the servers one agent loads). Shapes understood:

- `mcpServers` objects: Claude Desktop, Claude Code `.mcp.json`, Cursor, Windsurf, Cline, Roo Code,
  Kiro, Gemini CLI (`url` is SSE, `httpUrl` is Streamable HTTP);
- Claude Code's `~/.claude.json`: user servers at the top, and `projects.<path>.mcpServers`, each
  project its own stack named after its path;
- a Claude Code plugin's `.mcp.json`, with the servers at the top level;
- VS Code: `servers` (and `inputs`) in `.vscode/mcp.json`, or `mcp.servers` in settings.json;
- Zed: `context_servers` in settings.json;
- Codex: `[mcp_servers.<name>]` tables in `~/.codex/config.toml`.

JSON files may be JSONC (comments, trailing commas), as VS Code and Zed write them. `${...}`
placeholders are kept as written and listed, never resolved: resolving them would copy a
developer's secrets into the dashboard. A server marked `"disabled": true` (or `enabled = false`)
is returned with `disabled=True`, so it can be imported switched off.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import json5

PLACEHOLDER = re.compile(r"\$\{[^}]+\}")
TRANSPORTS = ("stdio", "http", "sse")
KNOWN_SHAPES = (
    "'mcpServers' (Claude Desktop, Claude Code, Cursor, Windsurf, Cline, Roo, Kiro, Gemini CLI)",
    "Claude Code ~/.claude.json (user 'mcpServers' and 'projects.<path>.mcpServers')",
    "a Claude Code plugin .mcp.json (servers at the top level)",
    "'servers' or 'mcp.servers' (VS Code)",
    "'context_servers' (Zed)",
    "[mcp_servers.<name>] tables (Codex config.toml)",
)
_SERVER_KEYS = {"command", "url", "httpUrl", "serverUrl", "type", "transport", "args"}
_GEMINI_KEYS = {"httpUrl", "trust", "includeTools", "excludeTools"}


class ConfigError(ValueError):
    """The file is not a client config this module understands; the message says why."""


@dataclass
class ServerSpec:
    name: str
    transport: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    disabled: bool = False
    placeholders: list[str] = field(default_factory=list)
    always_load: bool = False  # Claude Code's `alwaysLoad`: never deferred behind tool search


@dataclass
class StackSpec:
    """The servers of one scope of a config. `scope` is None for the file's main list, else the
    project path it belongs to (Claude Code's per-project servers)."""

    shape: str
    servers: list[ServerSpec]
    scope: str | None = None
    # ENABLE_TOOL_SEARCH from the file's `env` (Claude Code settings), kept as written.
    tool_search: str | None = None

    def name(self, base: str) -> str:
        return self.scope if self.scope else base


def load_text(text: str, filename: str = "") -> Any:
    """Parse a config file's text: TOML for `.toml` files, else JSON with JSONC allowed."""
    if filename.endswith(".toml"):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json5.loads(text)
    except ValueError as exc:
        raise ConfigError(f"not valid JSON or JSONC: {exc}") from exc


def parse_config_text(text: str, filename: str = "") -> list[StackSpec]:
    client = "gemini" if ".gemini" in filename.replace("\\", "/").split("/") else None
    return parse_config(load_text(text, filename), client=client)


def parse_config(data: Any, *, client: str | None = None) -> list[StackSpec]:
    """Every stack of a parsed config file. Raises ConfigError naming the shapes it knows.

    `client="gemini"` reads a bare `url` as SSE, as Gemini CLI does; a file is also taken to be
    Gemini CLI's when one of its servers uses a key only Gemini CLI has (`httpUrl`, `trust`,
    `includeTools`, `excludeTools`).
    """
    if not isinstance(data, dict):
        raise ConfigError(_unknown("the file is not a JSON object or TOML table"))
    stacks: list[StackSpec] = []
    if isinstance(data.get("mcp_servers"), dict):
        stacks.append(StackSpec("codex", _servers(data["mcp_servers"], _codex_entry)))
    if isinstance(data.get("context_servers"), dict):
        stacks.append(StackSpec("zed", _servers(data["context_servers"], _zed_entry)))
    if isinstance(data.get("mcpServers"), dict):
        entries = data["mcpServers"]
        if client == "gemini" or any(
            isinstance(e, dict) and _GEMINI_KEYS & e.keys() for e in entries.values()
        ):
            stacks.append(StackSpec("gemini", _servers(entries, _gemini_entry)))
        else:
            stacks.append(StackSpec("mcpServers", _servers(entries, _json_entry)))
    if isinstance(data.get("servers"), dict):
        stacks.append(StackSpec("vscode", _servers(data["servers"], _json_entry)))
    elif isinstance(data.get("mcp"), dict) and isinstance(data["mcp"].get("servers"), dict):
        stacks.append(StackSpec("vscode", _servers(data["mcp"]["servers"], _json_entry)))
    if isinstance(data.get("projects"), dict):
        for path, project in data["projects"].items():
            if (
                isinstance(project, dict)
                and isinstance(project.get("mcpServers"), dict)
                and project["mcpServers"]
            ):
                servers = _servers(project["mcpServers"], _json_entry)
                stacks.append(StackSpec("claude-code-project", servers, scope=str(path)))
    if not stacks and data and all(_looks_like_server(v) for v in data.values()):
        stacks.append(StackSpec("plugin", _servers(data, _json_entry)))
    if not stacks:
        raise ConfigError(_unknown("no MCP server list found"))
    tool_search = _tool_search(data)
    for stack in stacks:
        stack.tool_search = tool_search
    return stacks


def _tool_search(data: dict[str, Any]) -> str | None:
    """Claude Code's ENABLE_TOOL_SEARCH, from a settings file's (or ~/.claude.json's) `env`."""
    env = data.get("env")
    if isinstance(env, dict) and isinstance(env.get("ENABLE_TOOL_SEARCH"), str | bool | int):
        value = env["ENABLE_TOOL_SEARCH"]
        return str(value).lower() if isinstance(value, bool) else str(value)
    return None


def _unknown(what: str) -> str:
    return f"{what}; the shapes understood are: " + "; ".join(KNOWN_SHAPES)


def _looks_like_server(value: Any) -> bool:
    return isinstance(value, dict) and bool(_SERVER_KEYS & value.keys())


def _servers(entries: dict[str, Any], read: Any) -> list[ServerSpec]:
    specs = []
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"server {name!r}: expected an object, got {type(entry).__name__}")
        spec: ServerSpec = read(str(name), entry)
        spec.placeholders = sorted(
            set(_placeholders([spec.command, spec.args, spec.env, spec.cwd, spec.url, spec.headers]))
        )
        specs.append(spec)
    return specs


def _str_list(name: str, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ConfigError(f"server {name!r}: '{key}' must be a list of strings")
    return list(value)


def _str_map(name: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"server {name!r}: '{key}' must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def _disabled(entry: dict[str, Any]) -> bool:
    return entry.get("disabled") is True or entry.get("enabled") is False


def _remote_transport(name: str, kind: str, *, default: str) -> str:
    kind = kind.lower().replace("-", "").replace("_", "")
    if kind in ("", "http", "streamablehttp", "remote"):
        return default if kind == "" else "http"
    if kind == "sse":
        return "sse"
    raise ConfigError(f"server {name!r}: unknown transport type {kind!r}")


def _gemini_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    return _json_entry(name, entry, bare_url="sse")


def _json_entry(name: str, entry: dict[str, Any], bare_url: str = "http") -> ServerSpec:
    """One server of an `mcpServers` / `servers` object (Claude, Cursor, VS Code, Windsurf, Cline,
    Roo, Kiro, Gemini CLI). `bare_url` is the transport of a `url` whose entry names no type."""
    kind = str(entry.get("type") or entry.get("transport") or "")
    command, args, url = "", [], ""
    if entry.get("command"):
        if kind and kind.lower() not in ("stdio", "local"):
            raise ConfigError(f"server {name!r}: has a 'command' but its type is {kind!r}")
        transport, command = "stdio", str(entry["command"])
        args = _str_list(name, "args", entry.get("args"))
    elif entry.get("httpUrl"):  # Gemini CLI's Streamable HTTP key
        transport, url = "http", str(entry["httpUrl"])
    elif entry.get("url") or entry.get("serverUrl"):
        url = str(entry.get("url") or entry.get("serverUrl"))
        transport = _remote_transport(name, kind, default=bare_url)
    else:
        raise ConfigError(f"server {name!r}: needs a 'command' (stdio) or a 'url'/'httpUrl' (HTTP or SSE)")
    return ServerSpec(
        name,
        transport,
        command=command,
        args=args,
        env=_str_map(name, "env", entry.get("env")),
        cwd=str(entry.get("cwd") or ""),
        url=url,
        headers=_str_map(name, "headers", entry.get("headers")),
        disabled=_disabled(entry),
        always_load=entry.get("alwaysLoad") is True,
    )


def _zed_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    command = entry.get("command")
    if isinstance(command, dict):  # older Zed: "command": {"path", "args", "env"}
        entry = {**entry, **command, "command": command.get("path")}
    if entry.get("command") or entry.get("url"):
        return _json_entry(name, entry)
    raise ConfigError(
        f"server {name!r}: a Zed extension server (no command or url); install it as a custom server "
        "to import it"
    )


def _codex_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    headers = _str_map(name, "http_headers", entry.get("http_headers"))
    for header, variable in _str_map(name, "env_http_headers", entry.get("env_http_headers")).items():
        headers[header] = "${" + variable + "}"
    if entry.get("bearer_token_env_var"):
        headers["Authorization"] = "Bearer ${" + str(entry["bearer_token_env_var"]) + "}"
    disabled = _disabled(entry)
    if entry.get("command"):
        return ServerSpec(
            name,
            "stdio",
            command=str(entry["command"]),
            args=_str_list(name, "args", entry.get("args")),
            env=_str_map(name, "env", entry.get("env")),
            cwd=str(entry.get("cwd") or ""),
            disabled=disabled,
        )
    if entry.get("url"):
        return ServerSpec(name, "http", url=str(entry["url"]), headers=headers, disabled=disabled)
    raise ConfigError(f"server {name!r}: needs 'command' (stdio) or 'url' (Streamable HTTP)")


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        return PLACEHOLDER.findall(value)
    if isinstance(value, list):
        return [p for v in value for p in _placeholders(v)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _placeholders(v)]
    return []
