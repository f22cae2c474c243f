"""Import servers from an MCP client's config file, and make the file a stack.

Understands the `mcpServers` object of Claude Desktop, Claude Code (`.mcp.json`) and Cursor, and
VS Code's `servers` object (top level in `.vscode/mcp.json`, or under `mcp` in settings.json).
`${...}` placeholders are kept as written and reported: resolving them would copy a developer's
secrets into the dashboard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.teams.models import Team

PLACEHOLDER = re.compile(r"\$\{[^}]+\}")


class ConfigImportError(ValueError):
    pass


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
    placeholders: list[str] = field(default_factory=list)


def _servers_object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigImportError("expected a JSON object with an 'mcpServers' or 'servers' key")
    for key in ("mcpServers", "servers"):
        if isinstance(data.get(key), dict):
            return dict(data[key])
    if isinstance(data.get("mcp"), dict) and isinstance(data["mcp"].get("servers"), dict):
        return dict(data["mcp"]["servers"])
    raise ConfigImportError("no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) object found")


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str):
        return PLACEHOLDER.findall(value)
    if isinstance(value, list):
        return [p for v in value for p in _placeholders(v)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in _placeholders(v)]
    return []


def parse_client_config(data: Any) -> list[ServerSpec]:
    specs = []
    for name, entry in _servers_object(data).items():
        if not isinstance(entry, dict):
            raise ConfigImportError(f"server {name!r}: expected an object")
        kind = str(entry.get("type") or entry.get("transport") or "").lower()
        url = entry.get("url") or entry.get("serverUrl") or ""
        if entry.get("command"):
            transport = Transport.STDIO
        elif url:
            transport = Transport.SSE if kind == "sse" else Transport.HTTP
        else:
            raise ConfigImportError(f"server {name!r}: needs a 'command' (stdio) or a 'url' (HTTP/SSE)")
        args = entry.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigImportError(f"server {name!r}: 'args' must be a list of strings")
        env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
        headers = {str(k): str(v) for k, v in (entry.get("headers") or {}).items()}
        spec = ServerSpec(
            name=str(name)[:100],
            transport=transport,
            command=str(entry.get("command") or ""),
            args=args,
            env=env,
            cwd=str(entry.get("cwd") or ""),
            url=str(url),
            headers=headers,
        )
        spec.placeholders = sorted(
            set(_placeholders([spec.command, spec.args, spec.env, spec.url, spec.headers]))
        )
        specs.append(spec)
    return specs


@dataclass
class ImportResult:
    stack: Stack
    created: list[str]
    updated: list[str]
    skipped: list[str]
    placeholders: dict[str, list[str]]


def import_client_config(
    team: Team,
    data: Any,
    *,
    stack_name: str,
    source: str = "",
    user: User | AnonymousUser | None = None,
    allow_stdio: bool = True,
) -> ImportResult:
    """Create or update the file's servers in `team` and a stack holding them.

    `allow_stdio=False` (a non-admin importing) skips stdio servers, since those run a command on
    the worker.
    """
    specs = parse_client_config(data)
    created, updated, skipped, placeholders = [], [], [], {}
    with transaction.atomic():
        stack, _ = Stack.objects.get_or_create(team=team, name=stack_name[:100], defaults={"source": source})
        members = []
        for spec in specs:
            if spec.transport == Transport.STDIO and not allow_stdio:
                skipped.append(spec.name)
                continue
            fields = {
                "transport": spec.transport,
                "command": spec.command,
                "args": spec.args,
                "env": spec.env,
                "cwd": spec.cwd,
                "url": spec.url,
                "headers": spec.headers,
            }
            server = McpServer.objects.filter(team=team, name=spec.name).first()
            if server is None:
                server = McpServer.objects.create(
                    team=team, name=spec.name, owner=user if isinstance(user, User) else None, **fields
                )
                created.append(spec.name)
            else:
                for key, value in fields.items():
                    setattr(server, key, value)
                server.save()
                updated.append(spec.name)
            if spec.placeholders:
                placeholders[spec.name] = spec.placeholders
            members.append(server)
        stack.servers.set(members)
        stack.source = source or stack.source
        stack.unresolved_placeholders = [f"{n}: {p}" for n, ps in placeholders.items() for p in ps]
        stack.save()
    return ImportResult(stack, created, updated, skipped, placeholders)
