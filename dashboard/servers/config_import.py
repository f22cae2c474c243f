"""Import the servers of an MCP client's config file as stacks.

Reading the file is `mcptax.clientconfig`'s job (every client's shape, JSONC, TOML); this module
turns each of its stacks into a `Stack` of `McpServer`s. The file's main list becomes the stack
named by the caller (the file name by default); Claude Code's per-project lists become stacks
named after their project paths. `${...}` placeholders are kept as written and listed on the
stack: resolving them would copy a developer's secrets into the dashboard. A server the file marks
disabled is imported switched off, so it is never polled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from dashboard.servers.models import McpServer, Stack
from dashboard.teams.models import Team
from dashboard.teams.validators import NAME_RULE, has_control
from mcptax.clientconfig import ConfigError, ServerSpec, StackSpec, parse_config_text

__all__ = ["ConfigError", "StackImport", "import_config_text"]

NAME_MAX = 100


@dataclass
class StackImport:
    stack: Stack
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    placeholders: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "stack": self.stack.name,
            "created": self.created,
            "updated": self.updated,
            "skipped": self.skipped,
            "disabled": self.disabled,
            "unresolved_placeholders": self.placeholders,
        }


def import_config_text(
    team: Team,
    text: str,
    *,
    filename: str,
    stack_name: str = "",
    source: str = "",
    user: User | AnonymousUser | None = None,
    allow_stdio: bool = True,
) -> list[StackImport]:
    """Create or update the file's servers in `team`, one stack per list in the file.

    Raises ConfigError (naming the shapes understood) for a file that is no client config.
    `allow_stdio=False` (a non-admin importing) skips stdio servers, since those run a command on
    the worker.
    """
    specs = parse_config_text(text, filename)
    for spec in specs:
        for what, name in [
            ("stack", spec.name(stack_name or filename)),
            *(("server", s.name) for s in spec.servers),
        ]:
            if has_control(name):
                raise ConfigError(f"{what} name {name!r}: {NAME_RULE}")
    owner = user if isinstance(user, User) else None
    with transaction.atomic():
        return [
            _import_stack(
                team, spec, spec.name(stack_name or filename), source or filename, owner, allow_stdio
            )
            for spec in specs
        ]


def _import_stack(
    team: Team, spec: StackSpec, name: str, source: str, owner: User | None, allow_stdio: bool
) -> StackImport:
    # Long project paths keep their end, which tells projects apart.
    stack, _ = Stack.objects.get_or_create(team=team, name=name[-NAME_MAX:], defaults={"source": source})
    result = StackImport(stack)
    members = []
    for server_spec in spec.servers:
        if server_spec.transport == "stdio" and not allow_stdio:
            result.skipped.append(server_spec.name)
            continue
        server, created = _upsert(team, server_spec, owner)
        (result.created if created else result.updated).append(server.name)
        if server_spec.disabled:
            result.disabled.append(server.name)
        if server_spec.placeholders:
            result.placeholders[server.name] = server_spec.placeholders
        members.append(server)
    stack.servers.set(members)
    stack.source = source or stack.source
    stack.unresolved_placeholders = [f"{n}: {p}" for n, found in result.placeholders.items() for p in found]
    stack.save()
    return result


def _upsert(team: Team, spec: ServerSpec, owner: User | None) -> tuple[McpServer, bool]:
    fields = {
        "transport": spec.transport,
        "command": spec.command,
        "args": spec.args,
        "env": spec.env,
        "cwd": spec.cwd,
        "url": spec.url,
        "headers": spec.headers,
        # The file says whether the client runs it: a re-import follows the file.
        "enabled": not spec.disabled,
    }
    name = spec.name[:NAME_MAX]
    server = McpServer.objects.filter(team=team, name=name).first()
    if server is None:
        return McpServer.objects.create(team=team, name=name, owner=owner, **fields), True
    for key, value in fields.items():
        setattr(server, key, value)
    server.save()
    return server, False
