"""The tool definitions a request actually sent, counted (a Messages API request body).

Each entry of the body's ``tools`` array is counted as the client rendered it:
``tokens(canonical(entry))`` in each encoding asked for. An entry with ``defer_loading: true`` is
*deferred* (the model sees it only once a search loads it); a client-side search tool
(``ToolSearch``) or a server-side one (``tool_search_tool_regex`` / ``_bm25``) makes the request's
mode ``deferred``, as does any deferred entry; otherwise ``eager``. MCP tools are the entries
named ``mcp__<server>__<tool>``; *loaded* are the MCP tools sent in full (not deferred).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcptax import tokens
from mcptax.formats.claude_code import split_tool_name
from mcptax.otel.events import SEARCH_TOOLS

EAGER = "eager"
DEFERRED = "deferred"
# Over this relative difference between what a client sent and what a profile predicts, the
# methodology page reports a finding.
FINDING_THRESHOLD = 0.02


@dataclass(frozen=True)
class SentTool:
    name: str
    server: str  # "" for a built-in or server tool
    tool: str
    deferred: bool
    tokens: dict[str, int]  # per encoding, over canonical(definition)
    definition: dict[str, Any]


@dataclass(frozen=True)
class SentTools:
    mode: str
    tools: tuple[SentTool, ...]
    totals: dict[str, int]  # per encoding, over canonical(the whole tools array)
    mcp_loaded: dict[str, int] = field(default_factory=dict)  # per encoding, MCP tools sent in full

    @property
    def loaded(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools if t.server and not t.deferred)

    @property
    def deferred(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools if t.deferred)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready form (what the database keeps)."""
        return {
            "mode": self.mode,
            "totals": self.totals,
            "mcp_loaded": self.mcp_loaded,
            "tools": [
                {
                    "name": t.name,
                    "server": t.server,
                    "tool": t.tool,
                    "deferred": t.deferred,
                    "tokens": t.tokens,
                    "definition": t.definition,
                }
                for t in self.tools
            ],
        }


def sent_tools(body: dict[str, Any], encodings: list[str]) -> SentTools:
    """The tools of a Messages API request body, each counted in every encoding of ``encodings``."""
    entries = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    counters = {name: tokens.counter(name) for name in encodings}
    out: list[SentTool] = []
    mode = EAGER
    for entry in entries:
        name = str(entry.get("name") or entry.get("type") or "")
        split = split_tool_name(name)
        deferred = entry.get("defer_loading") is True
        if deferred or name in SEARCH_TOOLS or str(entry.get("type", "")).startswith("tool_search_tool"):
            mode = DEFERRED
        text = tokens.canonical(entry)
        out.append(
            SentTool(
                name=name,
                server=split[0] if split else "",
                tool=split[1] if split else name,
                deferred=deferred,
                tokens={enc: count(text) for enc, count in counters.items()},
                definition=entry,
            )
        )
    whole = tokens.canonical(entries)
    totals = {enc: count(whole) for enc, count in counters.items()}
    loaded = {enc: sum(t.tokens[enc] for t in out if t.server and not t.deferred) for enc in counters}
    return SentTools(mode, tuple(out), totals, loaded)


def difference(measured: int, predicted: int) -> float:
    """Relative difference of a measured figure from a prediction (0 when both are 0)."""
    if predicted == 0:
        return 0.0 if measured == 0 else 1.0
    return (measured - predicted) / predicted


@dataclass(frozen=True)
class Comparison:
    """What a client sent for one server's tools beside what the ``claude`` profile predicts from
    the server's snapshot, for the tools it sent in full (a deferred tool is not compared)."""

    tools: tuple[str, ...]  # compared, as the snapshot names them
    missing: tuple[str, ...]  # sent but not in the snapshot (renamed, removed, or another release)
    measured: dict[str, int]
    predicted: dict[str, int]

    def differences(self) -> dict[str, float]:
        return {enc: difference(self.measured[enc], self.predicted[enc]) for enc in self.measured}

    def finding(self) -> bool:
        return any(abs(d) > FINDING_THRESHOLD for d in self.differences().values())

    def summary(self) -> dict[str, Any]:
        return {
            "tools": list(self.tools),
            "missing": list(self.missing),
            "measured": self.measured,
            "predicted": self.predicted,
            "differences": self.differences(),
            "finding": self.finding(),
        }


def compare(
    sent: SentTools, server_label: str, server_name: str, snapshot_tools: list[dict[str, Any]]
) -> Comparison:
    """``sent``'s tools of ``server_label`` (as the client named the server) beside the profile's
    rendering of the same tools from a snapshot of the server registered as ``server_name``."""
    from mcptax.profiles import render_tool

    by_name = {str(t.get("name", "")): t for t in snapshot_tools}
    mine = [t for t in sent.tools if t.server == server_label and not t.deferred]
    compared = [t for t in mine if t.tool in by_name]
    encodings = list(sent.totals)
    measured = {enc: sum(t.tokens[enc] for t in compared) for enc in encodings}
    predicted = {
        enc: sum(
            tokens.count(tokens.canonical(render_tool("claude", by_name[t.tool], server_name)), enc)
            for t in compared
        )
        for enc in encodings
    }
    missing = tuple(t.tool for t in mine if t.tool not in by_name)
    return Comparison(tuple(t.tool for t in compared), missing, measured, predicted)


def from_summary(summary: dict[str, Any]) -> SentTools:
    """A SentTools back from its stored ``summary()``."""
    tools = tuple(
        SentTool(t["name"], t["server"], t["tool"], t["deferred"], dict(t["tokens"]), t["definition"])
        for t in summary.get("tools", [])
    )
    return SentTools(
        summary.get("mode", EAGER),
        tools,
        dict(summary.get("totals", {})),
        dict(summary.get("mcp_loaded", {})),
    )
