"""Tool-definition tokens of captured sessions, from their discovery records and the team's servers.

A session's *servers* are the team's servers it touched: a search returned one of their tools, or
it loaded or called one. Their current snapshots give the figures (``mcptax.loading``, in the
session client's rendering: Claude Code for ``ToolSearch``, the Anthropic API for its search tools,
OpenAI for ``tool_search``), as a stack of those servers:

- *eager prediction* = requests x the servers' eager upfront (every definition, every request);
- *deferred prediction* = requests x the servers' deferred upfront (name list, search tool,
  instructions);
- *loads* = each load's definition tokens x the requests after it (``Load.requests_after``);
- *paid* = deferred prediction + loads for a session that searched or loaded (it deferred), else
  the eager prediction.

docs/methodology.md ("Discovery") defines each figure with its source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from functools import lru_cache

from dashboard.servers.models import McpServer, Snapshot
from dashboard.teams.models import Team
from ingest.capture.models import CaptureSession
from ingest.discovery.models import DiscoveryCall, DiscoveryLoad, DiscoverySearch, SessionDiscoverySummary
from mcptax import loading, profiles
from mcptax.advice import Locator, deferring
from mcptax.discovery import CLIENT_OF_SEARCH_TOOL, DEFAULT_CLIENT


@dataclass(frozen=True)
class ServerCost:
    """One server's figures inside a session's stack: per request in each mode, and per tool loaded."""

    eager: int
    deferred: int
    load_tokens: dict[str, int]  # bare tool name -> tokens per request once loaded
    name_entry: dict[str, int]  # bare tool name -> its entry in the deferred name list


class Catalog:
    """The team's servers as logs name them (``server_part`` of the name), with their current tools."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.encoding = team.main_encoding
        self.servers: dict[str, McpServer] = {}
        self.snapshots: dict[str, Snapshot] = {}
        for server in McpServer.objects.filter(team=team).select_related("current_snapshot__document"):
            if server.current_snapshot is None:
                continue
            key = profiles.server_part(server.name)
            self.servers[key], self.snapshots[key] = server, server.current_snapshot
        # (server key, bare tool name) of a tool as a client names it, when a team server has it.
        self.locate = Locator(
            {key: [str(t.get("name", "")) for t in snap.tools_raw] for key, snap in self.snapshots.items()}
        )

    def costs(self, servers: Iterable[str], client: str) -> dict[str, ServerCost]:
        keys = tuple(sorted(k for k in set(servers) if k in self.snapshots))
        # Keyed by content, not only by row: a snapshot's tools never change, but its id may be
        # reused once it is deleted.
        stack = tuple(
            (
                self.snapshots[k].pk,
                self.snapshots[k].sha256,
                self.servers[k].name,
                self.snapshots[k].instructions,
            )
            for k in keys
        )
        return dict(zip(keys, _stack_costs(stack, client, self.encoding), strict=True))


@lru_cache(maxsize=256)
def _stack_costs(
    stack: tuple[tuple[int, str, str, str], ...], client: str, encoding: str
) -> tuple[ServerCost, ...]:
    documents = dict(
        Snapshot.objects.filter(pk__in=[pk for pk, *_ in stack]).values_list("pk", "document__raw_json")
    )
    servers = [
        loading.ServerTools(name, json.loads(documents[pk]), instructions or None)
        for pk, _, name, instructions in stack
    ]
    figures = loading.stack_figures(servers, client, encoding=encoding, setting=deferring(client))
    out = []
    for row in figures.servers:
        eager = row.modes[loading.Mode.EAGER]
        deferred = row.modes.get(loading.Mode.DEFERRED, eager)
        out.append(
            ServerCost(eager.upfront, deferred.upfront, dict(deferred.load_tokens), dict(deferred.tools))
        )
    return tuple(out)


@dataclass
class SessionCost:
    session: CaptureSession
    summary: SessionDiscoverySummary
    client: str
    servers: list[str]
    eager: int = 0
    deferred: int = 0
    loads: int = 0
    per_server: dict[str, int] = field(default_factory=dict)  # what the session paid per server

    @property
    def deferring(self) -> bool:
        return bool(self.summary.searches or self.summary.loads)

    @property
    def paid(self) -> int:
        return self.deferred + self.loads if self.deferring else self.eager


def session_costs(catalog: Catalog, summaries: Iterable[SessionDiscoverySummary]) -> list[SessionCost]:
    """Each session's tool-definition tokens (see the module docstring)."""
    rows = list(summaries)
    ids = [r.session_id for r in rows]
    clients = search_clients(ids)
    touched = _touched(catalog, ids)
    loads: dict[int, list[DiscoveryLoad]] = {}
    for load in DiscoveryLoad.objects.filter(session_id__in=ids):
        loads.setdefault(load.session_id, []).append(load)
    out = []
    for summary in rows:
        client = clients.get(summary.session_id, DEFAULT_CLIENT)
        servers = sorted(touched.get(summary.session_id, set()))
        cost = SessionCost(summary.session, summary, client, servers)
        costs = catalog.costs(servers, client)
        for key, server in costs.items():
            cost.eager += summary.requests * server.eager
            cost.deferred += summary.requests * server.deferred
            mode_upfront = server.deferred if cost.deferring else server.eager
            cost.per_server[key] = summary.requests * mode_upfront
        for load in loads.get(summary.session_id, []) if cost.deferring else []:
            located = catalog.locate(load.tool)
            if located is None or located[0] not in costs:
                continue
            carried = costs[located[0]].load_tokens.get(located[1], 0) * load.requests_after
            cost.loads += carried
            cost.per_server[located[0]] += carried
        out.append(cost)
    return out


def search_clients(session_ids: list[int]) -> dict[int, str]:
    """Each session's client, from its search tool (Claude Code when it searched with none)."""
    found: dict[int, str] = {}
    rows = DiscoverySearch.objects.filter(session_id__in=session_ids).values_list("session_id", "search_tool")
    for session_id, search_tool in rows.distinct():
        found.setdefault(session_id, CLIENT_OF_SEARCH_TOOL.get(search_tool, DEFAULT_CLIENT))
    return found


def _touched(catalog: Catalog, session_ids: list[int]) -> dict[int, set[str]]:
    names: dict[int, set[str]] = {}
    for session_id, tool in DiscoveryCall.objects.filter(session_id__in=session_ids).values_list(
        "session_id", "tool"
    ):
        names.setdefault(session_id, set()).add(tool)
    for session_id, tool in DiscoveryLoad.objects.filter(session_id__in=session_ids).values_list(
        "session_id", "tool"
    ):
        names.setdefault(session_id, set()).add(tool)
    out: dict[int, set[str]] = {}
    for session_id, tools in names.items():
        located = (catalog.locate(t) for t in tools)
        out[session_id] = {found[0] for found in located if found is not None}
    return out


# -- one tool -------------------------------------------------------------------------------------


@dataclass
class ToolDiscovery:
    """One tool across the team's deferring sessions (those that searched or loaded)."""

    sessions: int = 0
    loaded_in: int = 0
    called_in: int = 0
    loads: int = 0
    wasted_loads: int = 0
    searches: list[DiscoverySearch] = field(default_factory=list)  # those that loaded it, newest first
    misses: list[DiscoverySearch] = field(default_factory=list)  # missed before it was called

    @staticmethod
    def pct(part: int, whole: int) -> float | None:
        return None if not whole else round(100 * part / whole, 1)

    @property
    def loaded_pct(self) -> float | None:
        return self.pct(self.loaded_in, self.sessions)

    @property
    def called_pct(self) -> float | None:
        return self.pct(self.called_in, self.sessions)

    @property
    def load_to_call_pct(self) -> float | None:
        return self.pct(self.loads - self.wasted_loads, self.loads)


def client_names(server_name: str, tool: str) -> list[str]:
    """The names a tool goes by in logs: Claude Code's ``mcp__<server>__<tool>``, and bare."""
    return [profiles.qualified_name(server_name, tool), tool]


def as_moment(since: date | None) -> datetime | None:
    """A period's start (a day, UTC midnight, or a moment) as an aware datetime."""
    if since is None or isinstance(since, datetime):
        return since
    return datetime.combine(since, time.min, tzinfo=UTC)


def deferring_sessions(team: Team, since: date | None = None) -> list[SessionDiscoverySummary]:
    rows = SessionDiscoverySummary.objects.filter(session__team=team).exclude(searches=0, loads=0)
    if since is not None:
        rows = rows.filter(first_at__gte=as_moment(since))
    return list(rows.select_related("session"))


def tool_discovery(
    team: Team, server_name: str, tool: str, since: date | None = None, limit: int = 20
) -> ToolDiscovery:
    """Loaded in / called in how many deferring sessions, wasted loads, and the searches for it."""
    names = client_names(server_name, tool)
    summaries = deferring_sessions(team, since)
    ids = [s.session_id for s in summaries]
    out = ToolDiscovery(sessions=len(ids))
    loads = DiscoveryLoad.objects.filter(session_id__in=ids, tool__in=names)
    out.loads = loads.count()
    out.wasted_loads = loads.filter(calls=0).count()
    out.loaded_in = loads.values("session_id").distinct().count()
    calls = DiscoveryCall.objects.filter(session_id__in=ids, tool__in=names)
    out.called_in = calls.values("session_id").distinct().count()
    out.searches = list(
        DiscoverySearch.objects.filter(loads__in=loads)
        .distinct()
        .select_related("session")
        .order_by("-at", "-pk")[:limit]
    )
    first_call: dict[int, tuple[datetime | None, int]] = {}
    for call in calls.order_by("at", "seq"):
        first_call.setdefault(call.session_id, (call.at, call.seq))
    misses = DiscoverySearch.objects.filter(session_id__in=list(first_call), missed=True).select_related(
        "session"
    )
    out.misses = [m for m in misses.order_by("-at", "-pk") if _before(m, first_call[m.session_id])][:limit]
    return out


def _before(search: DiscoverySearch, call: tuple[datetime | None, int]) -> bool:
    at, seq = call
    if search.at is not None and at is not None:
        return (search.at, search.seq) < (at, seq)
    return search.seq < seq
