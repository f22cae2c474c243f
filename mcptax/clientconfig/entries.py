"""The per-client entry readers: one config entry becomes a server spec, or an EntryError saying
why it is skipped."""

from __future__ import annotations

import re
from typing import Any

from mcptax.clientconfig.types import EntryError, EntryReader, ServerSpec, SkippedEntry, StackSpec

# `${VAR}` (most clients), `${{ secrets.X }}` (Continue), `{env:X}` / `{file:path}` (opencode),
# `{{USER_VAR}}` (LibreChat's per-user variables): each is filled by the client, never by the import.
PLACEHOLDER = re.compile(r"\$\{\{[^}]*\}\}|\$\{[^}]+\}|\{(?:env|file):[^}]+\}|\{\{[^}]+\}\}")
# Goose extension types that run inside Goose itself: no MCP server process or URL to poll.
_GOOSE_INPROCESS = {"builtin", "platform", "frontend", "inline_python"}


def _is_comment(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(("_", "$", "//"))


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
