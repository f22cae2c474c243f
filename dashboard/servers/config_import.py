"""Import the servers of an MCP client's config file as stacks.

Reading the file is `mcptax.clientconfig`'s job (every client's shape, JSONC, TOML); this module
turns each of its stacks into a `Stack` of `McpServer`s. The file's main list becomes the stack
named by the caller (the file name by default); Claude Code's per-project lists become stacks
named after their project paths. `${...}` placeholders are kept as written and listed on the
stack: resolving them would copy a developer's secrets into the dashboard. A server the file marks
disabled is imported switched off, so it is never polled. A file with an HTTP server whose host
resolves inward (the outbound policy) is refused whole, naming each such server: importing the
rest would quietly change what the stack measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from dashboard import outbound
from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.teams.models import Team
from dashboard.teams.permissions import Action, Role, allows
from dashboard.teams.validators import NAME_RULE, has_control
from mcptax import loading
from mcptax.clientconfig import PLACEHOLDER, ConfigError, ServerSpec, StackSpec, parse_config_text

__all__ = ["SHELL", "ConfigError", "Importer", "StackImport", "import_config_text"]

NAME_MAX = 100


@dataclass
class StackImport:
    stack: Stack | None
    name: str = ""
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    # Entries left alone, each with the reason (the importer's role may not make that change).
    skipped: dict[str, str] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    placeholders: dict[str, list[str]] = field(default_factory=dict)
    # Set when the whole stack was left alone (it belongs to someone else).
    refused: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "stack": self.name,
            "created": self.created,
            "updated": self.updated,
            "skipped": list(self.skipped),
            "skipped_reasons": self.skipped,
            "refused": self.refused,
            "disabled": self.disabled,
            "unresolved_placeholders": self.placeholders,
        }


@dataclass(frozen=True)
class Importer:
    """Who imports: their role decides what the import may create or change (the role matrix).

    The `import_servers` command runs with shell access and imports as an owner.
    """

    role: str
    user: User | None = None

    def may(self, action: Action) -> bool:
        return allows(self.role, action)

    def may_edit(self, server: McpServer) -> bool:
        return self.may(server.edit_action(self.user or AnonymousUser()))


SHELL = Importer(role=Role.OWNER)


def import_config_text(
    team: Team,
    text: str,
    *,
    filename: str,
    importer: Importer,
    stack_name: str = "",
    source: str = "",
) -> list[StackImport]:
    """Create or update the file's servers in `team`, one stack per list in the file.

    Raises ConfigError (naming the shapes understood) for a file that is no client config, and
    (naming the servers) for one whose HTTP servers point inward. What `importer` may not do is
    skipped with the reason, never done: a stdio server (it runs a command on the worker) without
    REGISTER_STDIO_SERVER, an existing server it may not edit, an existing stack someone else
    imported.
    """
    specs = parse_config_text(text, filename)
    _refuse_inward_urls(specs)
    for spec in specs:
        if spec.tool_search:
            try:
                loading.parse_setting("claude-code", spec.tool_search)
            except loading.BadSetting as exc:
                raise ConfigError(f"Nothing was imported: env {exc}") from exc
    for spec in specs:
        for what, name in [
            ("stack", spec.name(stack_name or filename)),
            *(("server", s.name) for s in spec.servers),
        ]:
            if has_control(name):
                raise ConfigError(f"{what} name {name!r}: {NAME_RULE}")
    with transaction.atomic():
        return [
            _import_stack(team, spec, spec.name(stack_name or filename), source or filename, importer)
            for spec in specs
        ]


def _refuse_inward_urls(specs: list[StackSpec]) -> None:
    problems: dict[str, str] = {}
    for spec in specs:
        for server in spec.servers:
            if server.transport != "stdio" and server.name not in problems:
                problem = outbound.url_problem(server.url)
                if problem:
                    problems[server.name] = problem
    if problems:
        raise ConfigError(
            "Nothing was imported: the URL of "
            + "; of ".join(f"{name} is refused ({problem})" for name, problem in problems.items())
        )


def _import_stack(team: Team, spec: StackSpec, name: str, source: str, importer: Importer) -> StackImport:
    # Long project paths keep their end, which tells projects apart.
    name = name[-NAME_MAX:]
    stack = Stack.objects.filter(team=team, name=name).first()
    if stack is not None and not importer.may(stack.replace_action(importer.user or AnonymousUser())):
        reason = "an existing stack someone else imported: only admins can replace its servers"
        return StackImport(None, name=name, refused=reason)
    if stack is None:
        stack = Stack.objects.create(team=team, name=name, source=source, owner=importer.user)
    result = StackImport(stack, name=name)
    members = []
    for server_spec in spec.servers:
        existing = McpServer.objects.filter(team=team, name=server_spec.name[:NAME_MAX]).first()
        reason = _refusal(importer, server_spec, existing)
        if reason:
            result.skipped[server_spec.name] = reason
            if existing is not None:
                # Left as it is, and still in the stack the file describes.
                members.append(existing)
            continue
        server, created = _upsert(team, server_spec, existing, importer.user)
        (result.created if created else result.updated).append(server.name)
        if server_spec.disabled:
            result.disabled.append(server.name)
        if server_spec.placeholders:
            result.placeholders[server.name] = server_spec.placeholders
        members.append(server)
    stack.servers.set(members)
    always = {s.name[:NAME_MAX] for s in spec.servers if s.always_load}
    stack.always_load.set([m for m in members if m.name in always])
    # A re-import follows the file: a file without the variable leaves the team's setting in force.
    stack.tool_search = spec.tool_search or ""
    stack.source = source or stack.source
    stack.unresolved_placeholders = [f"{n}: {p}" for n, found in result.placeholders.items() for p in found]
    stack.save()
    return result


def _refusal(importer: Importer, spec: ServerSpec, existing: McpServer | None) -> str:
    """Why `importer` may not import `spec` over `existing` ("" when it may)."""
    if spec.transport == Transport.STDIO and not importer.may(Action.REGISTER_STDIO_SERVER):
        return "a stdio server runs a command on the worker: only admins can register one"
    if existing is not None and not importer.may_edit(existing):
        if existing.transport == Transport.STDIO:
            return "an existing stdio server: only admins can change it"
        return "an existing server someone else registered: only admins can change it"
    return ""


def _upsert(
    team: Team, spec: ServerSpec, server: McpServer | None, owner: User | None
) -> tuple[McpServer, bool]:
    fields: dict[str, Any] = {
        "transport": spec.transport,
        "command": spec.command,
        "args": spec.args,
        "cwd": spec.cwd,
        "url": spec.url,
        # The file says whether the client runs it: a re-import follows the file.
        "enabled": not spec.disabled,
    }
    if server is None:
        secrets: dict[str, Any] = {"env": spec.env, "headers": spec.headers}
        server = McpServer.objects.create(
            team=team, name=spec.name[:NAME_MAX], owner=owner, **fields, **secrets
        )
        return server, True
    for key, value in fields.items():
        setattr(server, key, value)
    server.env = keep_secrets(server.env, spec.env)
    server.headers = keep_secrets(server.headers, spec.headers)
    server.save()
    return server, False


def keep_secrets(stored: dict[str, str], imported: dict[str, str]) -> dict[str, str]:
    """The secrets a re-import leaves on a server.

    A file usually holds `${...}` placeholders where the dashboard holds the real value (entered on
    the edit page), or no secrets at all: neither may wipe what is stored. An entry without any
    keeps the stored set; otherwise the entry's set replaces it, except that a key whose imported
    value holds a placeholder keeps the value stored for it.
    """
    if not imported:
        return dict(stored)
    return {
        key: stored[key] if key in stored and PLACEHOLDER.search(value) else value
        for key, value in imported.items()
    }
