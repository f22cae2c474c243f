"""Advice from the team's own sessions (``source="history"``), beside the advice a server's tools
alone give. The rules and their savings are ``mcptax.advice.history_advice``'s (``mcp-tax measure
--history`` gives the same from transcripts); this module feeds them the team's stored sessions
under deferred loading and its servers' current snapshots, with the DISCOVERY_* settings.

docs/methodology.md ("Discovery") defines each piece with its source.
"""

from __future__ import annotations

from datetime import date

from django.conf import settings

from ingest.discovery.figures import Catalog, deferring_sessions, search_clients
from ingest.discovery.store import derive_sessions
from mcptax import advice, loading
from mcptax.advice import (
    KEEP_EAGER,
    REMOVE_UNUSED,
    RENAME_MISSED,
    Advice,
    HistoryRules,
    ServerCosts,
    ServerUse,
    by_saving,
    instructions_advice,
    session_uses,
)
from mcptax.discovery import DEFAULT_CLIENT

__all__ = ["KEEP_EAGER", "REMOVE_UNUSED", "RENAME_MISSED", "history_advice", "rules"]


def rules() -> HistoryRules:
    return HistoryRules(
        keep_eager_percent=settings.DISCOVERY_KEEP_EAGER_PERCENT,
        unused_sessions=settings.DISCOVERY_UNUSED_SESSIONS,
        min_sessions=settings.DISCOVERY_MIN_SESSIONS,
    )


def history_advice(catalog: Catalog, since: date | None, server_key: str | None = None) -> list[Advice]:
    """Advice for the team's servers (or the one ``server_key``), largest saving first."""
    summaries = deferring_sessions(catalog.team, since)
    # Oldest first: "the last N sessions" are the newest ones.
    summaries.sort(key=lambda s: (s.first_at or s.updated, s.pk))
    derived = derive_sessions(s.session_id for s in summaries)
    clients = search_clients([s.session_id for s in summaries])
    touching: dict[str, list[tuple[int, ServerUse]]] = {}
    for summary in summaries:
        for key, use in session_uses(derived[summary.session_id], catalog.locate).items():
            touching.setdefault(key, []).append((summary.session_id, use))
    found: list[Advice] = []
    for key in [server_key] if server_key else sorted(catalog.servers):
        if key not in catalog.servers:
            continue
        found += _instructions(catalog, key)
        uses = touching.get(key, [])
        if uses:
            client = clients.get(uses[0][0], DEFAULT_CLIENT)
            found += advice.history_advice(_costs(catalog, key, client), [u for _, u in uses], rules())
    return by_saving(found)


def _costs(catalog: Catalog, key: str, client: str) -> ServerCosts:
    cost = catalog.costs([key], client)[key]
    tools = tuple(str(t.get("name", "")) for t in catalog.snapshots[key].tools_raw)
    return ServerCosts(catalog.servers[key].name, tools, cost.name_entry, cost.load_tokens, cost.deferred)


# A server's instructions advice depends only on its tools/list, its name, its instructions and the
# encoding: remembered by content (the document's sha256), so it can never go stale, and the
# discovery pages do not tokenize every server's tools again on every request.
_INSTRUCTIONS_ADVICE: dict[tuple[str, str, str, str], tuple[Advice, ...]] = {}


def _instructions(catalog: Catalog, key: str) -> list[Advice]:
    snapshot = catalog.snapshots[key]
    name = catalog.servers[key].name
    memo = (snapshot.document.sha256, name, snapshot.instructions or "", catalog.encoding)
    found = _INSTRUCTIONS_ADVICE.get(memo)
    if found is None:
        figures = loading.server_figures(
            snapshot.tools_raw,
            "claude-code",
            server=name,
            instructions=snapshot.instructions or None,
            encoding=catalog.encoding,
            setting="true",
        )
        # Adding instructions is advice only where deferral saves tokens at all (a server of a few
        # small tools costs more deferred: the search tool and name list outweigh its definitions).
        advised = instructions_advice(figures, snapshot.instructions or None, catalog.encoding)
        found = tuple(a for a in advised if a.saving_tokens > 0)
        if len(_INSTRUCTIONS_ADVICE) > 4096:
            _INSTRUCTIONS_ADVICE.clear()
        _INSTRUCTIONS_ADVICE[memo] = found
    return list(found)
