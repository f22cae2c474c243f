"""`mcp-tax measure --history PATH ...`: advice from transcripts and logs, without a database.

The files (Claude Code transcripts and stream-json, proxy envelopes, HARs of Anthropic or OpenAI
API traffic; folders are read for every such file under them) are read by the same readers the
dashboard's ingest uses (``mcptax.formats``). Each session's tool-discovery records (searches,
loads, compactions, model requests, calls) are replayed by ``mcptax.discovery.derive``; a record
seen twice (the same transcript in two files) counts once. The measured servers' tools give the
costs, and ``mcptax.advice.history_advice`` the advice: the dashboard's rules, word for word.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcptax import profiles
from mcptax.advice import (
    HistoryRules,
    Locator,
    ServerUse,
    by_saving,
    history_advice,
    server_costs,
    session_uses,
)
from mcptax.cli.measure import ServerRow, StackRow
from mcptax.discovery import DiscoveryEvent, SessionDiscovery, client_of, derive
from mcptax.formats import DETECT_BYTES, LineOutcome, UnknownFormatError, detect_format, read_calls
from mcptax.formats.records import Discovered

# What a folder is searched for: the files the readers take.
SUFFIXES = (".jsonl", ".json", ".har", ".ndjson", ".log")


@dataclass(frozen=True)
class HistoryReport:
    """What measure prints about the files read: one line, its details, and the JSON object."""

    line: str
    details: list[str]
    figures: dict[str, Any]


@dataclass
class History:
    """What the files held: each session's discovery records, and what could not be read."""

    paths: list[str]
    files: list[str] = field(default_factory=list)
    unread: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    quarantined: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, reason)
    events: dict[str, list[DiscoveryEvent]] = field(default_factory=dict)  # by session key
    order: dict[str, tuple[int, int]] = field(default_factory=dict)  # first (file, line) of each session

    def sessions(self) -> list[SessionDiscovery]:
        """Every session replayed, oldest first (by its first record's time, else by where it was
        read), so "the last N sessions" are the newest."""
        derived = [(key, derive(events)) for key, events in self.events.items()]

        def start(item: tuple[str, SessionDiscovery]) -> tuple[Any, ...]:
            times = [e.at for e in self.events[item[0]] if e.at is not None]
            first = min(times).timestamp() if times else float("inf")
            return (first, self.order[item[0]])

        return [session for _, session in sorted(derived, key=start)]

    def to_dict(self, sessions: Sequence[SessionDiscovery]) -> dict[str, Any]:
        return {
            "paths": self.paths,
            "files": self.files,
            "unread": [{"path": p, "reason": r} for p, r in self.unread],
            "quarantined_lines": [{"path": p, "line": n, "reason": r} for p, n, r in self.quarantined],
            "sessions": len(sessions),
            "deferring_sessions": sum(1 for s in sessions if s.searches or s.loads),
        }

    def summary(self, sessions: Sequence[SessionDiscovery]) -> str:
        deferring = sum(1 for s in sessions if s.searches or s.loads)
        parts = [
            f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}",
            f"{len(sessions)} session{'s' if len(sessions) != 1 else ''} ({deferring} deferring)",
        ]
        if self.quarantined:
            parts.append(
                f"{len(self.quarantined)} line{'s' if len(self.quarantined) != 1 else ''} quarantined"
            )
        if self.unread:
            parts.append(f"{len(self.unread)} not read")
        return "history: " + ", ".join(parts)

    def report(self, sessions: Sequence[SessionDiscovery]) -> HistoryReport:
        details = [f"not read: {p}: {r}" for p, r in self.unread]
        details += [f"quarantined: {p} line {n}: {r}" for p, n, r in self.quarantined]
        return HistoryReport(self.summary(sessions), details, self.to_dict(sessions))


def files_under(paths: Iterable[str]) -> tuple[list[Path], list[tuple[str, str]]]:
    """The files to read (a folder: its files with a known suffix, recursively, in name order),
    and the paths that are neither a file nor a folder."""
    found: list[Path] = []
    missing: list[tuple[str, str]] = []
    for text in paths:
        path = Path(text).expanduser()
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            found.append(path)
        else:
            missing.append((text, "no such file or folder"))
    return found, missing


def read_history(paths: Sequence[str]) -> History:
    """Read every file (see the module docstring); a file no reader knows is listed as unread."""
    files, missing = files_under(paths)
    history = History(list(paths), unread=missing)
    for index, path in enumerate(files):
        try:
            with open(path, "rb") as stream:
                fmt = detect_format(stream.read(DETECT_BYTES))
                stream.seek(0)
                for item in read_calls(stream, fmt):
                    _take(history, str(path), index, item)
        except (OSError, UnknownFormatError) as exc:
            history.unread.append((str(path), str(exc)))
            continue
        history.files.append(str(path))
    return history


def _take(history: History, path: str, index: int, item: Any) -> None:
    if isinstance(item, Discovered):
        history.events.setdefault(item.session_key, []).extend(item.events)
        history.order.setdefault(item.session_key, (index, item.line_no))
    elif isinstance(item, LineOutcome) and item.status == "quarantined":
        history.quarantined.append((path, item.line_no, item.reason or "quarantined"))


def add_history(
    stacks: list[StackRow],
    sessions: Sequence[SessionDiscovery],
    rules: HistoryRules,
    encoding: str,
) -> None:
    """Append to each stack the history advice for its measured servers (a server in several
    stacks is weighed once). A server's costs are counted in the rendering of the client its
    sessions searched with (the first that touched it)."""
    servers: dict[str, ServerRow] = {}
    for stack in stacks:
        for row in stack.measured():
            servers.setdefault(profiles.server_part(row.name), row)
    locate = Locator({key: [str(t.get("name", "")) for t in row.listed] for key, row in servers.items()})
    touching: dict[str, list[tuple[SessionDiscovery, ServerUse]]] = {}
    for session in sessions:
        for key, use in session_uses(session, locate).items():
            touching.setdefault(key, []).append((session, use))
    advice = {}
    for key, row in servers.items():
        uses = touching.get(key, [])
        client = client_of(uses[0][0]) if uses else "claude-code"
        costs = server_costs(row.name, row.listed, row.instructions, client, encoding)
        advice[key] = history_advice(costs, [u for _, u in uses], rules)
    for stack in stacks:
        keys = dict.fromkeys(profiles.server_part(r.name) for r in stack.measured())
        stack.advice = by_saving([*stack.advice, *(a for k in keys for a in advice[k])])
