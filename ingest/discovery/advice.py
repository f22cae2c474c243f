"""Advice from the team's own sessions (``source="history"``), beside the advice a server's tools
alone give (``mcptax.advice``). Each piece carries its saving in tokens:

- *keep eager* (``alwaysLoad``) a tool called in most deferring sessions that touched its server:
  per session, what deferral costs for it (its name-list entry x requests + its definition x the
  requests after each load) minus what eager costs (its definition x every request); negative
  when eager costs more (the point is then the searches and misses it saves);
- *remove or merge* a tool never loaded nor called in the last N deferring sessions that touched
  its server: per request, its definition (eager clients) and its name-list entry (deferred);
- *rename or re-describe* the tools of a server whose searches missed before one of its tools was
  called later in the same session: per period, each such miss cost a model request that carried
  the server's deferred upfront for nothing.

docs/methodology.md ("Discovery") defines each with its source; thresholds are settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from django.conf import settings

from ingest.discovery.figures import Catalog, SessionCost, deferring_sessions, session_costs
from ingest.discovery.models import DiscoveryCall, DiscoveryLoad
from ingest.discovery.store import derive_session
from mcptax import loading
from mcptax.advice import Advice, by_saving, instructions_advice
from mcptax.discovery import eager_saving_per_session, missed_before_call

KEEP_EAGER = "keep_eager"
REMOVE_UNUSED = "remove_unused"
RENAME_MISSED = "rename_missed"


def history_advice(catalog: Catalog, since: date | None, server_key: str | None = None) -> list[Advice]:
    """Advice for the team's servers (or the one ``server_key``), largest saving first."""
    costs = session_costs(catalog, deferring_sessions(catalog.team, since))
    keys = [server_key] if server_key else sorted(catalog.servers)
    found: list[Advice] = []
    for key in keys:
        if key not in catalog.servers:
            continue
        touching = [c for c in costs if key in c.servers]
        found += _instructions(catalog, key)
        if len(touching) < settings.DISCOVERY_MIN_SESSIONS:
            continue
        found += _keep_eager(catalog, key, touching)
        found += _unused(catalog, key, touching)
        found += _missed(catalog, key, touching)
    return by_saving(found)


def _instructions(catalog: Catalog, key: str) -> list[Advice]:
    snapshot = catalog.snapshots[key]
    name = catalog.servers[key].name
    figures = loading.server_figures(
        snapshot.tools_raw,
        "claude-code",
        server=name,
        instructions=snapshot.instructions or None,
        encoding=catalog.encoding,
        setting="true",
    )
    # Adding instructions is advice only where deferral saves tokens at all (a server of a few small
    # tools costs more deferred: the search tool and name list outweigh its definitions).
    found = instructions_advice(figures, snapshot.instructions or None, catalog.encoding)
    return [a for a in found if a.saving_tokens > 0]


def _tool_rows(catalog: Catalog, key: str, touching: Sequence[SessionCost]) -> dict[str, dict[int, list]]:
    """{bare tool: {session id: [calls, [requests_after of each load]]}} over ``touching``."""
    ids = [c.session.pk for c in touching]
    rows: dict[str, dict[int, list]] = {}
    for session_id, tool in DiscoveryCall.objects.filter(session_id__in=ids).values_list(
        "session_id", "tool"
    ):
        located = catalog.locate(tool)
        if located and located[0] == key:
            rows.setdefault(located[1], {}).setdefault(session_id, [0, []])[0] += 1
    loads = DiscoveryLoad.objects.filter(session_id__in=ids).values_list(
        "session_id", "tool", "requests_after"
    )
    for session_id, tool, after in loads:
        located = catalog.locate(tool)
        if located and located[0] == key:
            rows.setdefault(located[1], {}).setdefault(session_id, [0, []])[1].append(after)
    return rows


def _keep_eager(catalog: Catalog, key: str, touching: Sequence[SessionCost]) -> list[Advice]:
    rows = _tool_rows(catalog, key, touching)
    name = catalog.servers[key].name
    out = []
    for tool, sessions in sorted(rows.items()):
        called = [c for c in touching if sessions.get(c.session.pk, [0])[0]]
        if 100 * len(called) <= settings.DISCOVERY_KEEP_EAGER_PERCENT * len(touching):
            continue
        cost = catalog.costs(touching[0].servers, touching[0].client)[key]
        saving = eager_saving_per_session(
            cost.name_entry.get(tool, 0),
            cost.load_tokens.get(tool, 0),
            [(c.summary.requests, sessions.get(c.session.pk, [0, []])[1]) for c in touching],
        )
        out.append(
            Advice(
                KEEP_EAGER,
                name,
                f"Keep {tool} loaded (alwaysLoad on {name}): called in {len(called)} of {len(touching)} "
                f"deferring sessions. Eager, each session "
                + (f"saves {saving:,} tokens" if saving >= 0 else f"carries {-saving:,} tokens more")
                + " and needs no search to find it.",
                saving,
                tool=tool,
                per="session",
                source="history",
            )
        )
    return out


def _unused(catalog: Catalog, key: str, touching: Sequence[SessionCost]) -> list[Advice]:
    recent = sorted(touching, key=lambda c: c.summary.first_at or c.summary.updated, reverse=True)
    recent = recent[: settings.DISCOVERY_UNUSED_SESSIONS]
    if len(recent) < settings.DISCOVERY_UNUSED_SESSIONS:
        return []
    used = _tool_rows(catalog, key, recent)
    name = catalog.servers[key].name
    cost = catalog.costs([key], touching[0].client)[key]
    out = []
    for tool in (str(t.get("name", "")) for t in catalog.snapshots[key].tools_raw):
        if tool in used:
            continue
        definition, entry = cost.load_tokens.get(tool, 0), cost.name_entry.get(tool, 0)
        out.append(
            Advice(
                REMOVE_UNUSED,
                name,
                f"Remove {tool} or merge it into another tool: never loaded nor called in the last "
                f"{len(recent)} deferring sessions that used {name}. It costs {definition:,} tokens per "
                f"request where sent eagerly, {entry:,} in the deferred name list.",
                definition,
                tool=tool,
                source="history",
            )
        )
    return out


def _missed(catalog: Catalog, key: str, touching: Sequence[SessionCost]) -> list[Advice]:
    server_of = {}
    queries: list[str] = []
    for c in touching:
        derived = derive_session(c.session)
        for call in derived.calls:
            located = catalog.locate(call.tool)
            if located:
                server_of[call.tool] = located[0]
        queries += missed_before_call(derived, server_of).get(key, [])
    if not queries:
        return []
    name = catalog.servers[key].name
    upfront = catalog.costs([key], touching[0].client)[key].deferred
    shown = ", ".join(f'"{q}"' for q in list(dict.fromkeys(queries))[:5])
    return [
        Advice(
            RENAME_MISSED,
            name,
            f"Rename or re-describe {name}'s tools: {len(queries)} search{'es' if len(queries) != 1 else ''} "
            f"found nothing before one of its tools was called later in the session ({shown}). Name "
            "the tools and describe them in the words the model searched with.",
            len(queries) * upfront,
            per="period",
            source="history",
        )
    ]
