"""Import the servers of an MCP client's config file as stacks.

Reading the file is `mcptax.clientconfig`'s job (every client's shape, JSONC, YAML, TOML); this
module turns each of its stacks into a `Stack` of `McpServer`s. The file's main list becomes the
stack named by the caller (the file name by default); Claude Code's per-project lists become stacks
named after their project paths. `${...}` placeholders are kept as written and listed on the
stack: resolving them would copy a developer's secrets into the dashboard.

Every entry gets an outcome, and the rest of the file always imports:

- created / updated / unchanged: the server the entry describes;
- conflict: the team already has a server of that name defined differently, and it belongs to
  another stack (or to no stack): both are kept, the new one named `<name> (<stack>)`;
- skipped: malformed, not pollable (a Goose builtin), or a change the importer's role may not make.

A server the file marks disabled, an empty-command placeholder, and an HTTP server whose URL the
outbound policy refuses are imported switched off, with the reason: the stack still lists what the
file holds, and nothing is polled that should not be.

One server identity across stacks: an entry is the same server as a stored one when it is started
or reached the same way (transport, command, args, working directory, URL), whatever stack it came
from. An import changes a stored server only when no other stack holds it, so importing one config
never changes what another stack measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Q

from dashboard import outbound
from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.teams.models import Team
from dashboard.teams.permissions import Action, Role, allows
from dashboard.teams.validators import NAME_RULE, has_control
from mcptax import loading
from mcptax.clientconfig import PLACEHOLDER, ConfigError, ServerSpec, StackSpec, parse_config_text

__all__ = [
    "SHELL",
    "ConfigError",
    "EntryOutcome",
    "Importer",
    "StackImport",
    "import_config_text",
    "import_specs",
]

NAME_MAX = 100
CREATED, UPDATED, UNCHANGED, CONFLICT, SKIPPED = "created", "updated", "unchanged", "conflict", "skipped"


@dataclass
class EntryOutcome:
    """What became of one entry of the file."""

    name: str
    outcome: str
    server: str = ""  # the stored server's name (differs from `name` for a conflict kept apart)
    disabled: bool = False
    reason: str = ""  # why it was skipped, or why it is switched off

    def label(self) -> str:
        if self.outcome == CONFLICT:
            return f"conflict (kept both as {self.server!r})"
        return self.outcome

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "label": self.label(),
            "server": self.server,
            "imported": self.outcome != SKIPPED,
            "disabled": self.disabled,
            "reason": self.reason,
        }


@dataclass
class StackImport:
    stack: Stack | None
    name: str = ""
    entries: list[EntryOutcome] = field(default_factory=list)
    placeholders: dict[str, list[str]] = field(default_factory=dict)
    # Set when the whole stack was left alone (it belongs to someone else).
    refused: str = ""

    def _named(self, *outcomes: str) -> list[str]:
        return [e.server for e in self.entries if e.outcome in outcomes]

    @property
    def created(self) -> list[str]:
        return self._named(CREATED, CONFLICT)

    @property
    def updated(self) -> list[str]:
        return self._named(UPDATED)

    @property
    def unchanged(self) -> list[str]:
        return self._named(UNCHANGED)

    @property
    def skipped(self) -> dict[str, str]:
        return {e.name: e.reason for e in self.entries if e.outcome == SKIPPED}

    @property
    def disabled(self) -> list[str]:
        return [e.server for e in self.entries if e.disabled and e.outcome != SKIPPED]

    @property
    def imported(self) -> int:
        return sum(e.outcome != SKIPPED for e in self.entries)

    def to_dict(self) -> dict[str, object]:
        return {
            "stack": self.name,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "conflicts": {e.name: e.server for e in self.entries if e.outcome == CONFLICT},
            "skipped": list(self.skipped),
            "skipped_reasons": self.skipped,
            "refused": self.refused,
            "disabled": self.disabled,
            "unresolved_placeholders": self.placeholders,
            "entries": [e.to_dict() for e in self.entries],
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

    Raises ConfigError (naming the shapes understood) for a file that is no client config. What
    `importer` may not do is skipped with the reason, never done: a stdio server (it runs a command
    on the worker) without REGISTER_STDIO_SERVER, an existing server it may not edit, an existing
    stack someone else imported.
    """
    specs = parse_config_text(text, filename)
    return import_specs(
        team, specs, base_name=stack_name or filename, source=source or filename, importer=importer
    )


def import_specs(
    team: Team, specs: list[StackSpec], *, base_name: str, source: str, importer: Importer
) -> list[StackImport]:
    """Import already-read stacks (a file, or a folder of block files read as one stack)."""
    for spec in specs:
        if spec.tool_search:
            try:
                loading.parse_setting("claude-code", spec.tool_search)
            except loading.BadSetting as exc:
                raise ConfigError(f"Nothing was imported: env {exc}") from exc
    for spec in specs:
        for what, name in [("stack", spec.name(base_name)), *(("server", s.name) for s in spec.servers)]:
            if has_control(name):
                raise ConfigError(f"{what} name {name!r}: {NAME_RULE}")
    with transaction.atomic():
        return [_import_stack(team, spec, spec.name(base_name), source, importer) for spec in specs]


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
    before = set(stack.servers.values_list("pk", flat=True))
    members: list[McpServer] = []
    always_load: list[McpServer] = []
    for server_spec in spec.servers:
        _switch_off_refused_url(server_spec)
        outcome, server = _import_entry(team, stack, before, server_spec, importer)
        result.entries.append(outcome)
        if server is not None:
            members.append(server)
            if server_spec.always_load:
                always_load.append(server)
            if server_spec.placeholders:
                result.placeholders[server.name] = server_spec.placeholders
    result.entries += [EntryOutcome(s.name, SKIPPED, reason=s.reason) for s in spec.skipped]
    stack.servers.set(members)
    # By the server each entry became (a conflict kept apart is stored under another name).
    stack.always_load.set(always_load)
    # A re-import follows the file: a file without the variable leaves the team's setting in force.
    stack.tool_search = spec.tool_search or ""
    stack.source = source or stack.source
    stack.unresolved_placeholders = [f"{n}: {p}" for n, found in result.placeholders.items() for p in found]
    stack.save()
    return result


def _switch_off_refused_url(spec: ServerSpec) -> None:
    """An HTTP server whose URL the outbound policy refuses is imported switched off, with the
    reason: the stack still lists it (it is in the file), and the dashboard never asks it."""
    if spec.transport == Transport.STDIO or not spec.url:
        return
    problem = outbound.url_problem(spec.url)
    if problem:
        spec.disabled = True
        spec.disabled_reason = f"the outbound policy refuses its URL ({problem})"


def _disabled_reason(spec: ServerSpec) -> str:
    return spec.disabled_reason or ("disabled in the file" if spec.disabled else "")


def _import_entry(
    team: Team, stack: Stack, before: set[int], spec: ServerSpec, importer: Importer
) -> tuple[EntryOutcome, McpServer | None]:
    """Decide which stored server `spec` is, and create or update it (see the module docstring)."""
    base = spec.name[:NAME_MAX]
    family = list(McpServer.objects.filter(team=team).filter(Q(name=base) | Q(name__startswith=f"{base} (")))
    family = [s for s in family if s.name == base or _apart_base(s.name, base)]
    own = [s for s in family if s.pk in before]
    same = sorted(
        (s for s in family if _definition(s) == spec.definition()), key=lambda s: (s.pk not in before, s.pk)
    )
    outcome = EntryOutcome(spec.name, CREATED, disabled=spec.disabled, reason=_disabled_reason(spec))
    if same:
        server: McpServer | None = same[0]
        assert server is not None
        if not _changes(server, spec):
            outcome.outcome, outcome.server = UNCHANGED, server.name
            return outcome, server
        if _free(server, stack):
            return _update(outcome, server, spec, importer)
    elif own and _free(own[0], stack):
        return _update(outcome, own[0], spec, importer)
    elif not any(s.name == base for s in family):
        return _create(outcome, team, base, spec, importer)
    outcome.outcome = CONFLICT
    return _create(outcome, team, _name_apart(team, base, stack.name), spec, importer)


def _apart_base(name: str, base: str) -> bool:
    return name.startswith(f"{base} (") and (name.endswith(")") or name.rsplit(" ", 1)[-1].isdigit())


def _name_apart(team: Team, base: str, stack_name: str) -> str:
    """`<name> (<stack>)`, then `<name> (<stack>) 2`, 3 ... until free."""
    first = f"{base} ({stack_name})"
    candidate, n = first, 1
    while McpServer.objects.filter(team=team, name=candidate[:NAME_MAX]).exists():
        n += 1
        candidate = f"{first} {n}"
    return candidate[:NAME_MAX]


def _definition(server: McpServer) -> tuple[str, str, tuple[str, ...], str, str]:
    return (server.transport, server.command, tuple(server.args), server.cwd, server.url)


def _changes(server: McpServer, spec: ServerSpec) -> bool:
    """Would importing `spec` over `server` (same definition) change anything stored?"""
    return (
        server.enabled == spec.disabled
        or keep_secrets(server.env, spec.env) != server.env
        or keep_secrets(server.headers, spec.headers) != server.headers
    )


def _free(server: McpServer, stack: Stack) -> bool:
    """No stack but this one holds `server`: changing it changes nothing behind anyone's back."""
    return not server.stacks.exclude(pk=stack.pk).exists()


def _create(
    outcome: EntryOutcome, team: Team, name: str, spec: ServerSpec, importer: Importer
) -> tuple[EntryOutcome, McpServer | None]:
    if spec.transport == Transport.STDIO and not importer.may(Action.REGISTER_STDIO_SERVER):
        return _skip(outcome, "a stdio server runs a command on the worker: only admins can register one")
    secrets: dict[str, Any] = {"env": spec.env, "headers": spec.headers}
    server = McpServer.objects.create(team=team, name=name, owner=importer.user, **_fields(spec), **secrets)
    outcome.server = server.name
    return outcome, server


def _update(
    outcome: EntryOutcome, server: McpServer, spec: ServerSpec, importer: Importer
) -> tuple[EntryOutcome, McpServer | None]:
    if spec.transport == Transport.STDIO and not importer.may(Action.REGISTER_STDIO_SERVER):
        return _skip(outcome, "a stdio server runs a command on the worker: only admins can register one")
    if not importer.may_edit(server):
        if server.transport == Transport.STDIO:
            return _skip(outcome, "an existing stdio server: only admins can change it")
        return _skip(outcome, "an existing server someone else registered: only admins can change it")
    for key, value in _fields(spec).items():
        setattr(server, key, value)
    server.env = keep_secrets(server.env, spec.env)
    server.headers = keep_secrets(server.headers, spec.headers)
    server.save()
    outcome.outcome, outcome.server = UPDATED, server.name
    return outcome, server


def _skip(outcome: EntryOutcome, reason: str) -> tuple[EntryOutcome, None]:
    outcome.outcome, outcome.reason, outcome.disabled = SKIPPED, reason, False
    return outcome, None


def _fields(spec: ServerSpec) -> dict[str, Any]:
    return {
        "transport": spec.transport,
        "command": spec.command,
        "args": spec.args,
        "cwd": spec.cwd,
        "url": spec.url,
        # The file says whether the client runs it: a re-import follows the file.
        "enabled": not spec.disabled,
    }


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
