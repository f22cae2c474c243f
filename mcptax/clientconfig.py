"""Read the MCP server lists of every client config people have, without Django.

A config file becomes one or more *stacks* (the servers one agent loads). Shapes understood:

- `mcpServers` objects: Claude Desktop, Claude Code `.mcp.json`, Cursor, Windsurf, Cline, Roo Code,
  Kiro, Gemini CLI (`url` is SSE, `httpUrl` is Streamable HTTP), Amazon Q (`mcp.json`), LibreChat
  (`librechat.yaml`; a bare `url` is SSE, and `interface.mcpServers` is permissions, not servers);
- Claude Code's `~/.claude.json`: user servers at the top, and `projects.<path>.mcpServers`, each
  project its own stack named after its path;
- a Claude Code plugin's `.mcp.json`, with the servers at the top level;
- VS Code: `servers` (and `inputs`) in `.vscode/mcp.json`, or `mcp.servers` in settings.json;
- Zed: `context_servers` in settings.json;
- Codex: `[mcp_servers.<name>]` tables in `~/.codex/config.toml`;
- Goose: `extensions` in `~/.config/goose/config.yaml` (`cmd`/`args`/`envs`, `uri`; builtins run
  inside Goose and have no server to poll);
- Continue: a `mcpServers` *list* in `config.yaml`, or one block per file in `.continue/mcpServers/`
  (read a folder with :func:`parse_config_files`);
- opencode: `mcp` in `opencode.json(c)` (`type: local` with a `command` argv array, `type: remote`).

JSON files may be JSONC (comments, trailing commas), as VS Code, Zed and opencode write them; YAML
is read with PyYAML's safe loader only (no tag may construct an object). `${...}` placeholders are
kept as written and listed, never resolved: resolving them would copy a developer's secrets into
the dashboard.

Reading is tolerant: one odd entry never loses the rest of the file. Each entry becomes a server,
a server marked disabled (the file switches it off, or it is a placeholder with an empty command),
or a skipped entry with the reason (malformed, a builtin, a transport nobody can poll).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import json5
import yaml

# `${VAR}` (most clients), `${{ secrets.X }}` (Continue), `{env:X}` / `{file:path}` (opencode),
# `{{USER_VAR}}` (LibreChat's per-user variables): each is filled by the client, never by the import.
PLACEHOLDER = re.compile(r"\$\{\{[^}]*\}\}|\$\{[^}]+\}|\{(?:env|file):[^}]+\}|\{\{[^}]+\}\}")
TRANSPORTS = ("stdio", "http", "sse")
KNOWN_SHAPES = (
    "'mcpServers' (Claude Desktop, Claude Code, Cursor, Windsurf, Cline, Roo, Kiro, Gemini CLI, "
    "Amazon Q, LibreChat librechat.yaml)",
    "Claude Code ~/.claude.json (user 'mcpServers' and 'projects.<path>.mcpServers')",
    "a Claude Code plugin .mcp.json (servers at the top level)",
    "'servers' or 'mcp.servers' (VS Code)",
    "'context_servers' (Zed)",
    "[mcp_servers.<name>] tables (Codex config.toml)",
    "'extensions' (Goose config.yaml)",
    "a 'mcpServers' list (Continue config.yaml and .continue/mcpServers/*.yaml)",
    "'mcp' with local/remote servers (opencode.json, JSONC)",
)
_SERVER_KEYS = {"command", "url", "httpUrl", "serverUrl", "type", "transport", "args"}
_GEMINI_KEYS = {"httpUrl", "trust", "includeTools", "excludeTools"}
# Top-level keys only LibreChat's librechat.yaml has: its `mcpServers` reads a bare `url` as SSE.
_LIBRECHAT_KEYS = {"endpoints", "registration", "interface", "fileConfig", "modelSpecs", "balance"}
# Goose extension types that run inside Goose itself: no MCP server process or URL to poll.
_GOOSE_INPROCESS = {"builtin", "platform", "frontend", "inline_python"}
_YAML_SUFFIXES = (".yaml", ".yml")
# The files of a block-file folder that are read (a README or a backup beside them is not).
FOLDER_SUFFIXES = (".yaml", ".yml", ".json", ".jsonc")


class ConfigError(ValueError):
    """The file is not a client config this module understands; the message says why."""


class EntryError(ConfigError):
    """One entry of a config cannot be imported; the rest of the file still is."""


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
    # Why the entry is imported switched off when the file itself does not say so (a placeholder).
    disabled_reason: str = ""
    # What the entry holds that is kept on the developer's machine, never read (an env file).
    notes: list[str] = field(default_factory=list)

    def definition(self) -> tuple[str, str, tuple[str, ...], str, str]:
        """What makes two entries the same server: how it is started or reached, not its secrets."""
        return (self.transport, self.command, tuple(self.args), self.cwd, self.url)


@dataclass(frozen=True)
class SkippedEntry:
    name: str
    reason: str


@dataclass
class StackSpec:
    """The servers of one scope of a config. `scope` is None for the file's main list, else the
    project path it belongs to (Claude Code's per-project servers)."""

    shape: str
    servers: list[ServerSpec]
    scope: str | None = None
    skipped: list[SkippedEntry] = field(default_factory=list)
    # ENABLE_TOOL_SEARCH from the file's `env` (Claude Code settings), kept as written.
    tool_search: str | None = None

    def name(self, base: str) -> str:
        return self.scope if self.scope else base


def _is_yaml_name(filename: str) -> bool:
    return filename.lower().endswith(_YAML_SUFFIXES)


def _yaml(text: str) -> Any:
    try:
        # The safe loader only: a tag like !!python/object is refused, never constructed.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}") from exc


def _json_looking(text: str) -> bool:
    return text.lstrip("\ufeff \t\r\n").startswith(("{", "[", "//", "/*"))


def load_text(text: str, filename: str = "") -> Any:
    """Parse a config file's text: TOML for `.toml`, YAML for `.yaml`/`.yml`, else JSON (JSONC
    allowed), and YAML for a file without a telling name whose text does not look like JSON."""
    if filename.endswith(".toml"):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}") from exc
    if _is_yaml_name(filename):
        return _yaml(text)
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json5.loads(text)
    except ValueError as exc:
        if _json_looking(text):
            raise ConfigError(f"not valid JSON or JSONC: {exc}") from exc
    data = _yaml(text)
    if not isinstance(data, dict):
        raise ConfigError("neither JSON nor YAML holding a mapping (nor TOML, which needs a .toml name)")
    return data


def client_of(filename: str) -> str | None:
    """The client a config file belongs to, told by where it lives or what it is called."""
    path = PurePath(filename.replace("\\", "/"))
    parts = {p.lower() for p in path.parts}
    name = path.name.lower()
    if ".gemini" in parts:
        return "gemini"
    if "amazonq" in parts or ".amazonq" in parts or name.startswith("amazonq"):
        return "amazon-q"
    if name.startswith("librechat") and _is_yaml_name(name):
        return "librechat"
    if name.startswith("opencode") or ".opencode" in parts:
        return "opencode"
    if ".continue" in parts:
        return "continue"
    if "goose" in parts:
        return "goose"
    return None


def parse_config_text(text: str, filename: str = "") -> list[StackSpec]:
    return parse_config(load_text(text, filename), client=client_of(filename))


def parse_config_files(files: list[tuple[str, str]]) -> list[StackSpec]:
    """One stack from a folder of one-server block files (Continue's `.continue/mcpServers/`):
    every file's servers, in file-name order. A file that cannot be read is one skipped entry."""
    stack = StackSpec("continue-folder", [])
    for filename, text in sorted(files):
        try:
            specs = parse_config_text(text, filename)
        except ConfigError as exc:
            stack.skipped.append(SkippedEntry(PurePath(filename).name, str(exc)))
            continue
        for spec in specs:
            stack.servers += spec.servers
            stack.skipped += spec.skipped
    if not stack.servers and not stack.skipped:
        raise ConfigError(_unknown("no config file in the folder"))
    return [stack]


def read_config_path(path: Path) -> list[StackSpec]:
    """A config file's stacks, or a folder of one-server block files (Continue's
    `.continue/mcpServers/`) read as one stack. OSError and UnicodeDecodeError pass through."""
    if path.is_dir():
        files = [
            (str(p), p.read_text(encoding="utf-8"))
            for p in sorted(path.iterdir())
            if p.is_file() and p.name.lower().endswith(FOLDER_SUFFIXES)
        ]
        return parse_config_files(files)
    return parse_config_text(path.read_text(encoding="utf-8"), str(path))


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


def _unknown(what: str) -> str:
    return f"{what}; the shapes understood are: " + "; ".join(KNOWN_SHAPES)


def _is_comment(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(("_", "$", "//"))


def _looks_like_server(value: Any) -> bool:
    return isinstance(value, dict) and bool(_SERVER_KEYS & value.keys())


EntryReader = Callable[[str, dict[str, Any]], ServerSpec]


def _stack(shape: str, entries: dict[str, Any], read: EntryReader, scope: str | None = None) -> StackSpec:
    stack = StackSpec(shape, [], scope=scope)
    for name, entry in entries.items():
        _add(stack, str(name), entry, read)
    return stack


def _add(stack: StackSpec, name: str, entry: Any, read: EntryReader) -> None:
    """Read one entry into `stack`: a server, or a skipped entry with the reason."""
    if not isinstance(entry, dict):
        if _is_comment(name):
            reason = "a comment, not a server"
        else:
            reason = f"expected an object, got {type(entry).__name__}"
        stack.skipped.append(SkippedEntry(name, reason))
        return
    try:
        spec = read(name, entry)
    except EntryError as exc:
        stack.skipped.append(SkippedEntry(name, str(exc)))
        return
    spec.placeholders = sorted(
        set(_placeholders([spec.command, spec.args, spec.env, spec.cwd, spec.url, spec.headers]))
    )
    stack.servers.append(spec)


def _str_list(name: str, key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(a, str | int | float) for a in value):
        raise EntryError(f"'{key}' must be a list of strings")
    return [str(a) for a in value]


def _str_map(name: str, key: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EntryError(f"'{key}' must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def _disabled(entry: dict[str, Any]) -> bool:
    return entry.get("disabled") is True or entry.get("enabled") is False


def _remote_transport(name: str, kind: str, *, default: str) -> str:
    kind = kind.lower().replace("-", "").replace("_", "")
    if kind in ("", "http", "streamablehttp", "remote"):
        return default if kind == "" else "http"
    if kind == "sse":
        return "sse"
    if kind in ("websocket", "ws"):
        raise EntryError("a WebSocket server: MCP over WebSocket is not a transport the dashboard polls")
    raise EntryError(f"unknown transport type {kind!r}")


def _gemini_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    return _json_entry(name, entry, bare_url="sse")


def _librechat_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    # LibreChat infers SSE for a `url` without a type (Streamable HTTP must be named).
    return _json_entry(name, entry, bare_url="sse")


def _flatten_transport(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry whose `transport` is an object (`{type, url, headers}`, as some Cursor and
    generated configs write it) read as the flat shape every client documents."""
    nested = entry.get("transport")
    if not isinstance(nested, dict):
        return entry
    flat = {k: v for k, v in entry.items() if k != "transport"}
    for key, value in nested.items():
        flat.setdefault(key, value)
    return flat


def _json_entry(name: str, entry: dict[str, Any], bare_url: str = "http") -> ServerSpec:
    """One server of an `mcpServers` / `servers` object (Claude, Cursor, VS Code, Windsurf, Cline,
    Roo, Kiro, Gemini CLI, Amazon Q, LibreChat, Continue). `bare_url` is the transport of a `url`
    whose entry names no type."""
    entry = _flatten_transport(entry)
    kind = str(entry.get("type") or entry.get("transport") or "")
    url = str(entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl") or "")
    if entry.get("command") or ("command" in entry and not url):
        spec = _stdio_entry(name, entry, kind)
    elif entry.get("httpUrl"):  # Gemini CLI's Streamable HTTP key
        spec = ServerSpec(name, "http", url=str(entry["httpUrl"]))
    elif url:
        spec = ServerSpec(name, _remote_transport(name, kind, default=bare_url), url=url)
    else:
        raise EntryError("needs a 'command' (stdio) or a 'url'/'httpUrl' (HTTP or SSE)")
    spec.headers = _str_map(name, "headers", entry.get("headers"))
    spec.disabled = spec.disabled or _disabled(entry)
    spec.always_load = entry.get("alwaysLoad") is True
    if entry.get("envFile"):
        spec.notes.append(
            f"env file {entry['envFile']} is not read: its values stay on the developer's machine"
        )
    return spec


def _stdio_entry(name: str, entry: dict[str, Any], kind: str) -> ServerSpec:
    if kind and kind.lower() not in ("stdio", "local"):
        raise EntryError(f"has a 'command' but its type is {kind!r}")
    command = entry.get("command")
    if command is None or (isinstance(command, str) and not command.strip()):
        # Amazon Q and Cline users park a server as `"command": ""` until they fill it in.
        return ServerSpec(name, "stdio", disabled=True, disabled_reason="a placeholder with an empty command")
    if not isinstance(command, str):
        raise EntryError("'command' must be a string")
    return ServerSpec(
        name,
        "stdio",
        command=command,
        args=_str_list(name, "args", entry.get("args")),
        env=_str_map(name, "env", entry.get("env")),
        cwd=str(entry.get("cwd") or ""),
    )


def _zed_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    command = entry.get("command")
    if isinstance(command, dict):  # older Zed: "command": {"path", "args", "env"}
        entry = {**entry, **command, "command": command.get("path")}
    if entry.get("command") or entry.get("url"):
        return _json_entry(name, entry)
    raise EntryError("a Zed extension server (no command or url); install it as a custom server to import it")


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
    raise EntryError("needs 'command' (stdio) or 'url' (Streamable HTTP)")


def _goose_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    """One Goose extension: `type` stdio (`cmd`, `args`, `envs`, `env_keys`), sse or
    streamable_http (`uri`, `headers`), or one that runs inside Goose (builtin, platform ...)."""
    if isinstance(entry.get("config"), dict):  # an older layout: {enabled, config: {...}}
        entry = {**entry["config"], "enabled": entry.get("enabled", True)}
    kind = str(entry.get("type") or "").lower()
    if kind in _GOOSE_INPROCESS:
        raise EntryError(f"a Goose {kind} extension runs inside Goose: there is no MCP server to poll")
    env = _str_map(name, "envs", entry.get("envs"))
    # env_keys name secrets Goose keeps in the system keyring: a placeholder each, never a value.
    for key in _str_list(name, "env_keys", entry.get("env_keys")):
        env.setdefault(key, "${" + key + "}")
    if kind == "stdio" or (not kind and "cmd" in entry):
        spec = _stdio_entry(
            name, {"command": entry.get("cmd"), "args": entry.get("args"), "cwd": entry.get("cwd")}, ""
        )
        spec.env = env if spec.command else {}
    elif kind in ("sse", "streamable_http", "streamablehttp", "http"):
        url = str(entry.get("uri") or entry.get("url") or "")
        if not url:
            raise EntryError(f"a {kind} extension without a 'uri'")
        spec = ServerSpec(name, "sse" if kind == "sse" else "http", url=url)
        spec.headers = _str_map(name, "headers", entry.get("headers"))
    else:
        raise EntryError(f"unknown Goose extension type {kind!r}")
    spec.disabled = spec.disabled or entry.get("enabled") is False
    return spec


def _continue_stack(entries: list[Any]) -> StackSpec:
    """Continue's `mcpServers`: a list of blocks, each naming itself (`name`)."""
    stack = StackSpec("continue", [])
    for index, entry in enumerate(entries, start=1):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(entry, dict) and entry.get("uses") and not name:
            stack.skipped.append(
                SkippedEntry(
                    str(entry["uses"]),
                    "a Continue Hub block reference (uses:): its definition is not in the file",
                )
            )
            continue
        if not isinstance(name, str) or not name.strip():
            stack.skipped.append(SkippedEntry(f"#{index}", "a Continue server block without a 'name'"))
            continue
        _add(stack, name, entry, _continue_entry)
    return stack


def _continue_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    options = entry.get("requestOptions")
    headers = options.get("headers") if isinstance(options, dict) else None
    flat = {k: v for k, v in entry.items() if k not in ("name", "requestOptions")}
    if headers is not None and "headers" not in flat:
        flat["headers"] = headers
    return _json_entry(name, flat)


def _opencode_entry(name: str, entry: dict[str, Any]) -> ServerSpec:
    """opencode: `type: local` with `command` as one argv array and `environment`, or
    `type: remote` with `url` and `headers` (Streamable HTTP first, as opencode tries it)."""
    kind = str(entry.get("type") or "").lower()
    disabled = entry.get("enabled") is False or entry.get("disabled") is True
    if kind == "remote" or (not kind and entry.get("url")):
        if not entry.get("url"):
            raise EntryError("a remote server without a 'url'")
        spec = ServerSpec(name, "http", url=str(entry["url"]))
        spec.headers = _str_map(name, "headers", entry.get("headers"))
    elif kind == "local" or (not kind and "command" in entry):
        argv = entry.get("command")
        if isinstance(argv, str):
            argv = [argv]
        argv = _str_list(name, "command", argv)
        if not argv or not argv[0].strip():
            return ServerSpec(
                name, "stdio", disabled=True, disabled_reason="a placeholder with an empty command"
            )
        spec = ServerSpec(name, "stdio", command=argv[0], args=argv[1:])
        spec.env = _str_map(name, "environment", entry.get("environment"))
    else:
        raise EntryError(f"unknown opencode server type {kind!r} (expected local or remote)")
    spec.disabled = disabled
    return spec


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        return PLACEHOLDER.findall(value)
    if isinstance(value, list):
        return [p for v in value for p in _placeholders(v)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _placeholders(v)]
    return []
