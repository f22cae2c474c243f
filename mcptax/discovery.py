"""Tool discovery under deferred loading: what a session searched for, loaded and called.

A client that defers tool definitions (Claude Code's ``ToolSearch``, Anthropic's
``tool_search_tool_regex`` / ``tool_search_tool_bm25`` with ``defer_loading``, OpenAI's
``tool_search``) starts a session with tool names only and loads a tool's definition when a search
returns it. The readers turn what a log shows into the records below; ``derive`` replays one
session's records in order and says what was searched, loaded, called and carried.

Definitions (docs/methodology.md, "Discovery"):

- a *search* is one run of the client's search tool; a *miss* is a search that returned nothing;
- a *load* is a tool first returned by a search; a tool already loaded is not loaded again until a
  compaction dropped it (a compaction keeps the tools named in ``preCompactDiscoveredTools``);
- a load is *called* when the tool is called after it, before a compaction dropped it; a load
  never called is a *wasted load*; a call of a tool that was never loaded is a *call without a
  load* (the tool was eager);
- *load-to-call rate* = loads called / loads;
- *carried tokens* of a load = the tool's load tokens x the session's requests after the load
  (until a compaction dropped it): the definition rides along in every one of them.

No Django here; the storage side is ``ingest.discovery``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

CLAUDE_CODE_SEARCH_TOOL: Final = "ToolSearch"
SEARCH_TOOLS: Final = frozenset(
    {CLAUDE_CODE_SEARCH_TOOL, "tool_search_tool_regex", "tool_search_tool_bm25", "tool_search"}
)
# The client whose rendering a session's figures take, from the search tool it ran.
CLIENT_OF_SEARCH_TOOL: Final = {
    CLAUDE_CODE_SEARCH_TOOL: "claude-code",
    "tool_search_tool_regex": "anthropic-api",
    "tool_search_tool_bm25": "anthropic-api",
    "tool_search": "openai-tool-search",
}
DEFAULT_CLIENT: Final = "claude-code"
# Claude Code's ``select:`` queries name the tools to load directly (comma separated).
SELECT_PREFIX: Final = "select:"


@dataclass(frozen=True)
class ToolSearch:
    """One search the client ran, with what it returned."""

    key: str  # stable within the session: tool_use id / call id / event key
    at: datetime | None
    query: str  # "select:mcp__echo__echo" or keywords or a regex
    matches: tuple[str, ...]  # tool names as the client names them (mcp__<server>__<tool> ...)
    total_deferred: int | None  # the client's own count of deferred tools, when it reports one
    search_tool: str  # "ToolSearch" | "tool_search_tool_regex" | "tool_search_tool_bm25" | "tool_search"
    # Position in the log (line number x 1000 + block), to order events of equal or missing time.
    seq: int = 0

    @property
    def missed(self) -> bool:
        return not self.matches


@dataclass(frozen=True)
class Compaction:
    """A compaction boundary: only the tools in ``kept_loaded`` stay loaded after it."""

    key: str
    at: datetime | None
    kept_loaded: tuple[str, ...]  # preCompactDiscoveredTools
    seq: int = 0


@dataclass(frozen=True)
class RequestTurn:
    """One model request of the session (what "remaining requests" counts)."""

    key: str
    at: datetime | None
    seq: int = 0


@dataclass(frozen=True)
class ToolUse:
    """One call of a tool the client could defer (an MCP tool, or an API client tool)."""

    key: str  # tool_use id / call id
    at: datetime | None
    tool: str  # as the client names it (mcp__<server>__<tool> ...)
    seq: int = 0


DiscoveryEvent = ToolSearch | Compaction | RequestTurn | ToolUse


def ordered(events: Iterable[DiscoveryEvent]) -> list[DiscoveryEvent]:
    """Events in session order: by time then log position when every event has a time, else by
    log position alone (headless stream-json lines carry no timestamps; mixing the two would
    put the undated ones out of place)."""
    items = list(events)
    if all(e.at is not None for e in items):
        return sorted(items, key=lambda e: (e.at, e.seq))
    return sorted(items, key=lambda e: e.seq)


@dataclass
class Load:
    """A tool loaded by a search, and what became of it."""

    tool: str
    search_key: str
    at: datetime | None
    called: int = 0  # calls while loaded
    requests_after: int = 0  # model requests that carried its definition
    dropped_by: str | None = None  # the compaction that unloaded it

    @property
    def wasted(self) -> bool:
        return self.called == 0


@dataclass
class SessionDiscovery:
    """What one session's discovery records add up to (see the module docstring)."""

    searches: list[ToolSearch] = field(default_factory=list)
    loads: list[Load] = field(default_factory=list)
    calls: list[ToolUse] = field(default_factory=list)
    calls_without_load: list[ToolUse] = field(default_factory=list)
    requests: int = 0
    total_deferred: int | None = None

    @property
    def misses(self) -> list[ToolSearch]:
        return [s for s in self.searches if s.missed]

    @property
    def wasted_loads(self) -> list[Load]:
        return [load for load in self.loads if load.wasted]

    @property
    def load_to_call_rate(self) -> float | None:
        """Loads followed by a call of the tool, over loads; None without loads."""
        if not self.loads:
            return None
        return sum(1 for load in self.loads if not load.wasted) / len(self.loads)

    def carried_tokens(self, load_tokens: Mapping[str, int]) -> int:
        """Definition tokens the loads added to later requests: each tool's load tokens x requests."""
        return sum(load_tokens.get(load.tool, 0) * load.requests_after for load in self.loads)

    def counts(self) -> dict[str, int]:
        return {
            "searches": len(self.searches),
            "misses": len(self.misses),
            "loads": len(self.loads),
            "loads_never_called": len(self.wasted_loads),
            "calls": len(self.calls),
            "calls_without_load": len(self.calls_without_load),
            "requests": self.requests,
        }


def derive(events: Iterable[DiscoveryEvent]) -> SessionDiscovery:
    """Replay one session's records in order (``ordered``); repeated keys count once."""
    out = SessionDiscovery()
    loaded: dict[str, Load] = {}
    seen: set[tuple[str, str]] = set()
    for event in ordered(events):
        identity = (type(event).__name__, event.key)
        if identity in seen:
            continue
        seen.add(identity)
        if isinstance(event, RequestTurn):
            out.requests += 1
            for load in loaded.values():
                load.requests_after += 1
        elif isinstance(event, ToolSearch):
            out.searches.append(event)
            if event.total_deferred is not None:
                out.total_deferred = event.total_deferred
            for tool in dict.fromkeys(event.matches):
                if tool not in loaded:
                    loaded[tool] = Load(tool, event.key, event.at)
                    out.loads.append(loaded[tool])
        elif isinstance(event, Compaction):
            kept = set(event.kept_loaded)
            for tool in [t for t in loaded if t not in kept]:
                loaded.pop(tool).dropped_by = event.key
        else:
            out.calls.append(event)
            if event.tool in loaded:
                loaded[event.tool].called += 1
            else:
                out.calls_without_load.append(event)
    return out


def client_of(session: SessionDiscovery) -> str:
    """The client of a session: its first search's (CLIENT_OF_SEARCH_TOOL), else Claude Code."""
    for search in session.searches:
        return CLIENT_OF_SEARCH_TOOL.get(search.search_tool, DEFAULT_CLIENT)
    return DEFAULT_CLIENT


def select_names(query: str) -> tuple[str, ...]:
    """The tool names a ``select:`` query asks for (empty for a keyword query)."""
    if not query.startswith(SELECT_PREFIX):
        return ()
    return tuple(name.strip() for name in query[len(SELECT_PREFIX) :].split(",") if name.strip())


def missed_before_call(session: SessionDiscovery, server_of: Mapping[str, str]) -> dict[str, list[str]]:
    """Per server: queries of misses followed, later in the session, by a call of one of its tools.

    Such a miss means the model was looking for that server's tool and its words did not find it:
    the tool's name or description does not say what the model searched for. ``server_of`` maps a
    tool name (as the client names it) to its server.
    """
    position = {id(e): i for i, e in enumerate(ordered([*session.searches, *session.calls]))}
    found: dict[str, list[str]] = {}
    for miss in session.misses:
        later = {
            server_of[c.tool]
            for c in session.calls
            if c.tool in server_of and position[id(c)] > position[id(miss)]
        }
        for server in sorted(later):
            found.setdefault(server, []).append(miss.query)
    return found


def eager_saving_per_session(
    entry: int, definition: int, sessions: Sequence[tuple[int, Sequence[int]]]
) -> int:
    """What keeping one tool eager saves per session, on average over ``sessions`` (each its
    requests and the requests after each of the tool's loads); negative when eager costs more.

    Deferred, a session pays the tool's name-list ``entry`` in every request and its ``definition``
    in the requests after each load; eager, its definition in every request.
    """
    if not sessions:
        return 0
    total = sum(entry * requests + definition * (sum(afters) - requests) for requests, afters in sessions)
    return round(total / len(sessions))


def rate_points(rate: float | None) -> float | None:
    """A rate as percentage points, one decimal (what alerts and pages compare)."""
    return None if rate is None else round(100 * rate, 1)


def share(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


def sessions_with(tool: str, sessions: Sequence[SessionDiscovery]) -> tuple[int, int]:
    """(sessions that loaded ``tool``, sessions that called it)."""
    loaded = sum(1 for s in sessions if any(load.tool == tool for load in s.loads))
    called = sum(1 for s in sessions if any(c.tool == tool for c in s.calls))
    return loaded, called
