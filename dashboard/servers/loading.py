"""Loading-mode figures of stored snapshots, for the pages, the API, the gate and the alerts.

The counting is mcptax.loading's, over the raw tools a snapshot stored; this module only picks the
snapshots, the client and its setting (the stack's ENABLE_TOOL_SEARCH, else the team's) and
remembers results per process (a snapshot never changes, so its figures never do).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from dashboard.servers.models import McpServer, Snapshot, Stack, ToolsDocument
from dashboard.teams.models import Team
from mcptax import advice, loading
from mcptax.advice import Advice
from mcptax.loading import PRESETS, ServerLoading, StackLoading

__all__ = [
    "PRESETS",
    "client_of",
    "figures",
    "for_server",
    "for_stack",
    "for_team",
    "per_server",
    "server_advice",
]

# Member key: (tools sha256, instructions, server name, alwaysLoad): what the figures depend on, so
# the cache can never serve one snapshot's figures for another's.
Member = tuple[str, str, str, bool]


def client_of(team: Team) -> str:
    return team.loading_client if team.loading_client in loading.PRESETS else "claude-code"


def setting_for(team: Team, stack: Stack | None = None, client: str = "claude-code") -> str | None:
    """The loading setting in force: the stack's ENABLE_TOOL_SEARCH, else the team's (Claude Code
    only; the other presets use their default), falling back to the default when unreadable."""
    if client != "claude-code":
        return None
    value = (stack.tool_search if stack is not None else "") or team.tool_search
    try:
        loading.parse_setting(client, value)
    except loading.BadSetting:
        return None
    return value


@functools.lru_cache(maxsize=256)
def _stack_figures(
    members: tuple[Member, ...], client: str, encoding: str, setting: str | None, window: int
) -> StackLoading:
    documents = ToolsDocument.objects.in_bulk([sha for sha, _, _, _ in members], field_name="sha256")
    servers = [
        loading.ServerTools(name, documents[sha].raw, instructions or None, always)
        for sha, instructions, name, always in members
    ]
    return loading.stack_figures(servers, client, encoding=encoding, setting=setting, context_window=window)


def figures(
    members: Sequence[tuple[Snapshot, str, bool]],
    client: str,
    *,
    encoding: str,
    setting: str | None,
    window: int,
) -> StackLoading:
    """Figures for (snapshot, server name, alwaysLoad) members, computed once per process."""
    # Pages load snapshots without their instructions: fetch those in one query, not one each.
    deferred = [snap.pk for snap, _, _ in members if "instructions" in snap.get_deferred_fields()]
    texts = (
        dict(Snapshot.objects.filter(pk__in=deferred).values_list("pk", "instructions")) if deferred else {}
    )
    key = tuple(
        # Not texts.get(pk, snap.instructions): that would load each deferred field on its own.
        (snap.sha256, texts[snap.pk] if snap.pk in texts else snap.instructions, name, always)  # noqa: SIM401
        for snap, name, always in members
    )
    return _stack_figures(key, client, encoding, setting, window)


def for_stack(
    stack: Stack,
    team: Team,
    encoding: str,
    client: str | None = None,
    replace: dict[int, Snapshot] | None = None,
) -> StackLoading | None:
    """The stack's figures over its polled members (None when none is polled yet); `replace` puts
    another snapshot in a member's place ({server pk: snapshot}, e.g. the release before)."""
    client = client or client_of(team)
    always = {s.pk for s in stack.always_load.all()}
    replace = replace or {}
    members = [
        (replace.get(m.pk, m.current_snapshot), m.name, m.pk in always)
        # One query for the members and their snapshots, however many the stack holds.
        for m in stack.servers.select_related("current_snapshot")
        if replace.get(m.pk, m.current_snapshot) is not None
    ]
    if not members:
        return None
    setting = setting_for(team, stack, client)
    return figures(
        [(snap, name, always) for snap, name, always in members if snap is not None],
        client,
        encoding=encoding,
        setting=setting,
        window=team.context_window,
    )


def with_candidate(
    stack: Stack,
    team: Team,
    encoding: str,
    server: McpServer,
    tools: list[dict[str, Any]],
    instructions: str | None,
) -> StackLoading:
    """The stack under the team's client with `server`'s tools replaced by a candidate's (the CI
    gate), not cached: a candidate is no stored snapshot."""
    client = client_of(team)
    always = {s.pk for s in stack.always_load.all()}
    servers = []
    for member in stack.servers.select_related("current_snapshot__document").order_by("name"):
        if member.pk == server.pk:
            servers.append(loading.ServerTools(member.name, tools, instructions, member.pk in always))
        elif member.current_snapshot is not None:
            snap = member.current_snapshot
            servers.append(
                loading.ServerTools(
                    member.name, snap.tools_raw, snap.instructions or None, member.pk in always
                )
            )
    return loading.stack_figures(
        servers,
        client,
        encoding=encoding,
        setting=setting_for(team, stack, client),
        context_window=team.context_window,
    )


def team_members(servers: Sequence[McpServer]) -> list[McpServer]:
    """The servers an agent loading every server of the team loads: the enabled, polled ones."""
    return [s for s in servers if s.enabled and s.current_snapshot is not None]


def for_team(servers: Sequence[McpServer], team: Team, encoding: str) -> StackLoading | None:
    """Every enabled, polled server of the team as one stack, under the team's client."""
    members = [(s.current_snapshot, s.name, False) for s in team_members(servers) if s.current_snapshot]
    if not members:
        return None
    client = client_of(team)
    return figures(
        members,
        client,
        encoding=encoding,
        setting=setting_for(team, None, client),
        window=team.context_window,
    )


def per_server(servers: Sequence[McpServer], figures: StackLoading | None) -> dict[int, ServerLoading]:
    """{server pk: its row} of the team's stack (``for_team`` over the same ``servers``): each
    server's share of what every request carries up front, adding up to the team's figure."""
    if figures is None:
        return {}
    return {s.pk: row for s, row in zip(team_members(servers), figures.servers, strict=True)}


def for_stack_of_one(
    server: McpServer, snapshot: Snapshot, team: Team, encoding: str, client: str
) -> ServerLoading:
    """`snapshot` of `server` on its own under `client` with the team's setting."""
    return figures(
        [(snapshot, server.name, False)],
        client,
        encoding=encoding,
        setting=setting_for(team, None, client),
        window=team.context_window,
    ).servers[0]


def for_server(
    server: McpServer, snapshot: Snapshot, team: Team, encoding: str
) -> list[tuple[loading.Preset, ServerLoading]]:
    """The server on its own under every client preset, the team's client first: its tools read
    once for all of them (one query whatever the cache holds, so a page's query count is fixed)."""
    first = client_of(team)
    clients = [first, *(c for c in loading.CLIENTS if c != first)]
    document = ToolsDocument.objects.get(sha256=snapshot.sha256)
    tools = loading.ServerTools(server.name, document.raw, snapshot.instructions or None, False)
    rows = []
    for c in clients:
        setting = setting_for(team, None, c)
        # Remembered by content (the tools/list's sha256 and every input of the figures): a
        # snapshot's figures never change, so this cannot go stale; it saves tokenizing the tools
        # under every preset on every view of the page.
        key = (
            snapshot.sha256,
            tools.instructions or "",
            server.name,
            c,
            encoding,
            setting,
            team.context_window,
        )
        found = _SERVER_FIGURES.get(key)
        if found is None:
            found = loading.stack_figures(
                [tools], c, encoding=encoding, setting=setting, context_window=team.context_window
            ).servers[0]
            if len(_SERVER_FIGURES) > 2048:
                _SERVER_FIGURES.clear()
            _SERVER_FIGURES[key] = found
        rows.append((loading.PRESETS[c], found))
    return rows


_SERVER_FIGURES: dict[tuple[str, str, str, str, str, str | None, int], ServerLoading] = {}


def server_advice(server: McpServer, snapshot: Snapshot, team: Team, encoding: str) -> list[Advice]:
    """Advice the server's own tools give under the team's client; history-based advice is
    appended to this list by its callers."""
    client = client_of(team)
    stack = figures(
        [(snapshot, server.name, False)],
        client,
        encoding=encoding,
        setting=setting_for(team, None, client),
        window=team.context_window,
    )
    return advice.instructions_advice(stack.servers[0], snapshot.instructions or None, encoding)


def tool_rows(
    server: McpServer, snapshot: Snapshot, team: Team, encoding: str, tool: str
) -> list[tuple[loading.Preset, int, int | None]]:
    """The tool under every client preset: (preset, its tokens up front in the mode the client
    uses, its load cost when deferred; None for a client that never defers)."""
    rows = []
    for preset, fig in for_server(server, snapshot, team, encoding):
        if tool not in fig.modes[fig.mode].tools:
            return []
        deferred = fig.modes.get(loading.Mode.DEFERRED)
        rows.append(
            (preset, fig.modes[fig.mode].tools[tool], deferred.load_tokens[tool] if deferred else None)
        )
    return rows
