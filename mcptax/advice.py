"""Advice on how a server's tools load, each piece with the saving in tokens.

Two sources, one list of `Advice`:

- a server's own tools and `instructions` (``instructions_advice``);
- the history of sessions under deferred loading (``history_advice``): keep eager the tools
  called in most sessions, remove or merge the tools never loaded, rename or re-describe the
  tools of a server whose searches missed before one of its tools was called. The dashboard feeds
  it the team's stored sessions (ingest.discovery.advice), ``mcp-tax measure --history`` the
  transcripts it reads; the rules and their wording live here only.

docs/methodology.md ("Discovery") defines each piece with its source. Django-free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mcptax import loading, tokens
from mcptax.discovery import SessionDiscovery, eager_saving_per_session, missed_before_call
from mcptax.formats.claude_code import split_tool_name
from mcptax.loading import Mode, ServerLoading

# Claude Code puts a server's instructions in the first user turn and cuts them at 2,048
# characters (its MCP documentation; measured in public write-ups): text beyond is never read.
INSTRUCTIONS_CHAR_LIMIT = 2048

ADD_INSTRUCTIONS = "add_instructions"
SHORTEN_INSTRUCTIONS = "shorten_instructions"


@dataclass(frozen=True)
class Advice:
    """One piece of advice. `saving_tokens` is per request unless `per` says otherwise."""

    kind: str
    server: str
    message: str
    saving_tokens: int
    tool: str | None = None
    per: str = "request"
    source: str = "tools"  # "tools" (the server's own list) or "history" (the team's logs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def instructions_advice(
    figures: ServerLoading, instructions: str | None, encoding: str = tokens.DEFAULT_ENCODING
) -> list[Advice]:
    """Missing or oversized `instructions`, for a server its client defers (under tool search they
    are how the model knows to look for the server's tools)."""
    deferred = figures.modes.get(Mode.DEFERRED)
    if deferred is None or figures.always_load or not deferred.tools:
        return []
    eager = figures.modes[Mode.EAGER]
    text = instructions or ""
    if not text.strip():
        saving = eager.upfront - deferred.upfront
        return [
            Advice(
                ADD_INSTRUCTIONS,
                figures.server,
                f"Add server instructions: deferred, the model sees only {_names_of(len(deferred.tools))} "
                f"and no word on when to search for them. Deferral saves "
                f"{saving:,} tokens per request only if the model finds the tools it needs.",
                saving,
            )
        ]
    if len(text) <= INSTRUCTIONS_CHAR_LIMIT:
        return []
    count = tokens.counter(encoding)
    saving = count(text) - count(text[:INSTRUCTIONS_CHAR_LIMIT])
    return [
        Advice(
            SHORTEN_INSTRUCTIONS,
            figures.server,
            f"Shorten the server instructions to {INSTRUCTIONS_CHAR_LIMIT:,} characters (now "
            f"{len(text):,}): Claude Code cuts them there, so the last {saving:,} tokens never reach "
            "the model; put what says when to search for this server's tools first.",
            saving,
        )
    ]


def by_saving(items: Iterable[Advice]) -> list[Advice]:
    """Largest saving first (stable for equal savings)."""
    return sorted(items, key=lambda a: -a.saving_tokens)


# --- advice from the history of sessions ---------------------------------------------------------

KEEP_EAGER = "keep_eager"
REMOVE_UNUSED = "remove_unused"
RENAME_MISSED = "rename_missed"


@dataclass(frozen=True)
class HistoryRules:
    """The history advice's thresholds (the dashboard's DISCOVERY_* settings, measure's options)."""

    keep_eager_percent: int = 50  # keep eager: called in more than this share of the sessions
    unused_sessions: int = 20  # remove or merge: never loaded nor called in the last N sessions
    min_sessions: int = 3  # no history advice for a server fewer sessions touched


@dataclass(frozen=True)
class ServerCosts:
    """One server's tools as the history rules weigh them, in the sessions' client's rendering."""

    name: str
    tools: tuple[str, ...]  # bare names, in the server's order
    name_entry: Mapping[str, int]  # each tool's line in the deferred name list
    load_tokens: Mapping[str, int]  # each tool's definition, per request once loaded (or eager)
    deferred_upfront: int  # what a request carries up front for the server alone, deferred


def server_costs(
    name: str,
    tools: list[dict[str, Any]],
    instructions: str | None,
    client: str,
    encoding: str = tokens.DEFAULT_ENCODING,
) -> ServerCosts:
    """``ServerCosts`` of a server on its own under ``client`` deferring (mcptax.loading)."""
    figures = loading.server_figures(
        tools, client, server=name, instructions=instructions, encoding=encoding, setting=deferring(client)
    )
    deferred = figures.modes.get(Mode.DEFERRED, figures.modes[Mode.EAGER])
    return ServerCosts(
        name,
        tuple(str(t.get("name", "")) for t in tools),
        dict(deferred.tools),
        dict(deferred.load_tokens),
        deferred.upfront,
    )


def deferring(client: str) -> str:
    """The setting under which ``client`` defers (Claude Code's ENABLE_TOOL_SEARCH, the APIs')."""
    return "true" if client == "claude-code" else "deferred"


class Locator:
    """Which server a tool belongs to, as a log names it: ``mcp__<server>__<tool>`` (Claude Code),
    ``<namespace>.<tool>`` or a bare name (API traffic; a bare name only when one server has it).
    ``servers``: {server key (``profiles.server_part`` of its name): its bare tool names}."""

    def __init__(self, servers: Mapping[str, Iterable[str]]) -> None:
        self.keys = set(servers)
        owners: dict[str, list[str]] = {}
        for key, names in servers.items():
            for name in names:
                owners.setdefault(name, []).append(key)
        self.bare = {name: keys[0] for name, keys in owners.items() if len(keys) == 1}

    def __call__(self, tool: str) -> tuple[str, str] | None:
        """(server key, bare tool name), or None when no server has the tool."""
        split = split_tool_name(tool)
        if split is not None and split[0] in self.keys:
            return split
        if "." in tool:  # an OpenAI namespace: <namespace>.<tool>
            tool = tool.rsplit(".", 1)[1]
        return (self.bare[tool], tool) if tool in self.bare else None


@dataclass
class ServerUse:
    """What one deferring session did with one server's tools."""

    requests: int
    calls: dict[str, int] = field(default_factory=dict)  # bare tool -> calls
    load_afters: dict[str, list[int]] = field(default_factory=dict)  # bare tool -> requests after each load
    missed: list[str] = field(default_factory=list)  # queries that missed before a call of its tools


def session_uses(
    session: SessionDiscovery, locate: Callable[[str], tuple[str, str] | None]
) -> dict[str, ServerUse]:
    """{server key: its use} for every server the session touched (called or loaded a tool of);
    {} for a session that never searched nor loaded (its client did not defer)."""
    if not session.searches and not session.loads:
        return {}
    uses: dict[str, ServerUse] = {}
    for call in session.calls:
        found = locate(call.tool)
        if found is not None:
            use = uses.setdefault(found[0], ServerUse(session.requests))
            use.calls[found[1]] = use.calls.get(found[1], 0) + 1
    for load in session.loads:
        found = locate(load.tool)
        if found is not None:
            uses.setdefault(found[0], ServerUse(session.requests)).load_afters.setdefault(
                found[1], []
            ).append(load.requests_after)
    server_of = {c.tool: found[0] for c in session.calls if (found := locate(c.tool)) is not None}
    for key, queries in missed_before_call(session, server_of).items():
        if key in uses:
            uses[key].missed += queries
    return uses


def history_advice(server: ServerCosts, uses: Sequence[ServerUse], rules: HistoryRules) -> list[Advice]:
    """The history advice for one server, from the deferring sessions that touched it (oldest
    first); none below ``rules.min_sessions`` sessions. Largest saving first."""
    if len(uses) < rules.min_sessions:
        return []
    return by_saving(
        [*_keep_eager(server, uses, rules), *_unused(server, uses, rules), *_missed(server, uses)]
    )


def _keep_eager(server: ServerCosts, uses: Sequence[ServerUse], rules: HistoryRules) -> list[Advice]:
    out = []
    for tool in sorted({t for u in uses for t in (*u.calls, *u.load_afters)}):
        called = sum(1 for u in uses if u.calls.get(tool))
        if 100 * called <= rules.keep_eager_percent * len(uses):
            continue
        saving = eager_saving_per_session(
            server.name_entry.get(tool, 0),
            server.load_tokens.get(tool, 0),
            [(u.requests, u.load_afters.get(tool, [])) for u in uses],
        )
        effect = f"saves {saving:,} tokens" if saving >= 0 else f"carries {-saving:,} tokens more"
        out.append(
            Advice(
                KEEP_EAGER,
                server.name,
                f"Keep {tool} loaded (alwaysLoad on {server.name}): called in {called} of {len(uses)} "
                f"deferring sessions. Eager, each session {effect} and needs no search to find it.",
                saving,
                tool=tool,
                per="session",
                source="history",
            )
        )
    return out


def _unused(server: ServerCosts, uses: Sequence[ServerUse], rules: HistoryRules) -> list[Advice]:
    recent = list(uses)[-rules.unused_sessions :]
    if len(recent) < rules.unused_sessions:
        return []
    used = {t for u in recent for t in (*u.calls, *u.load_afters)}
    out = []
    for tool in (t for t in server.tools if t not in used):
        definition, entry = server.load_tokens.get(tool, 0), server.name_entry.get(tool, 0)
        out.append(
            Advice(
                REMOVE_UNUSED,
                server.name,
                f"Remove {tool} or merge it into another tool: never loaded nor called in the last "
                f"{len(recent)} deferring sessions that used {server.name}. It costs {definition:,} tokens "
                f"per request where sent eagerly, {entry:,} in the deferred name list.",
                definition,
                tool=tool,
                source="history",
            )
        )
    return out


def _missed(server: ServerCosts, uses: Sequence[ServerUse]) -> list[Advice]:
    queries = [q for u in uses for q in u.missed]
    if not queries:
        return []
    shown = ", ".join(f'"{q}"' for q in list(dict.fromkeys(queries))[:5])
    searches = "search" if len(queries) == 1 else "searches"
    return [
        Advice(
            RENAME_MISSED,
            server.name,
            f"Rename or re-describe {server.name}'s tools: {len(queries)} {searches} found nothing before "
            f"one of its tools was called later in the session ({shown}). Name the tools and describe "
            "them in the words the model searched with.",
            len(queries) * server.deferred_upfront,
            per="period",
            source="history",
        )
    ]


def _names_of(tools: int) -> str:
    return "the name of its one tool" if tools == 1 else f"the names of {tools:,} tools"
