"""The methodology page's worked example: one real server's capture counted every way we count it,
and each peer tool's figure reproduced from ours (docs/methodology.md says where it is approximate).

The capture ships with the code (`examples/captures/`), a byte-identical copy of the corpus one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from mcptax import profiles, tokens

CAPTURE = Path(__file__).resolve().parents[2] / "examples" / "captures" / "memory@2026.8.31.json"
SERVER = "memory"


@dataclass
class PeerFigure:
    tool: str
    how: str
    encoding: str
    tokens: int
    exact: bool


@dataclass
class WorkedExample:
    server: str
    version: str
    tool_count: int
    instructions_tokens: int
    # {profile: {encoding: tokens}}
    matrix: dict[str, dict[str, int]] = field(default_factory=dict)
    peers: list[PeerFigure] = field(default_factory=list)
    dropped_keys: list[str] = field(default_factory=list)

    def figure(self, profile: str, encoding: str) -> int:
        return self.matrix[profile][encoding]

    @property
    def rows(self) -> list[tuple[str, str, list[tuple[str, int]]]]:
        """(profile, label, [(encoding, tokens), ...]) in profile order, for the page's table."""
        return [(p, profiles.LABELS[p], list(self.matrix[p].items())) for p in profiles.PROFILES]


def _sorted_visible(tools: list[dict[str, Any]]) -> str:
    return json.dumps(
        [tokens.visible_tool(t) for t in tools], separators=(",", ":"), ensure_ascii=False, sort_keys=True
    )


def _renamed_without_list(tools: list[dict[str, Any]], encoding: str) -> int:
    total = 0
    for tool in tools:
        renamed = {
            ("input_schema" if k == "inputSchema" else k): v for k, v in tokens.visible_tool(tool).items()
        }
        total += tokens.count(tokens.canonical(renamed), encoding)
    return total


@lru_cache(maxsize=1)
def worked_example() -> WorkedExample:
    document = json.loads(CAPTURE.read_text(encoding="utf-8"))
    tools: list[dict[str, Any]] = document["tools"]
    init = document.get("initialize", {})
    instructions = init.get("instructions")
    encodings = list(tokens.OFFLINE_ENCODINGS)
    counted = profiles.matrix(tools, instructions, encodings, server=SERVER)
    example = WorkedExample(
        server=SERVER,
        version=str(init.get("serverInfo", {}).get("version", "")),
        tool_count=len(tools),
        instructions_tokens=counted["mcp"]["cl100k_base"].instructions_tokens,
        matrix={p: {e: r.fixed_tax_tokens for e, r in by.items()} for p, by in counted.items()},
        dropped_keys=sorted({k for t in tools for k in t} - {"name", "description", "inputSchema"}),
    )
    example.peers = [
        PeerFigure(
            "mcp-tax (this dashboard)",
            "the visible tools as one compact array",
            "cl100k_base",
            example.figure("mcp", "cl100k_base"),
            True,
        ),
        PeerFigure(
            "mcptokens",
            "the whole tools/list result as received: our wire profile",
            "cl100k_base",
            example.figure("wire", "cl100k_base"),
            False,
        ),
        PeerFigure(
            "toolbill",
            "the visible tools with keys sorted, o200k_base",
            "o200k_base",
            tokens.count(_sorted_visible(tools), "o200k_base"),
            False,
        ),
        PeerFigure(
            "mcp-token-lint",
            "each tool alone with inputSchema renamed input_schema, no list brackets or commas",
            "cl100k_base",
            _renamed_without_list(tools, "cl100k_base"),
            False,
        ),
    ]
    return example


def profile_table(
    counts: dict[str, dict[str, dict[str, int]]],
) -> list[tuple[str, str, list[tuple[str, int]]]]:
    """A snapshot's stored counts as the server page's "why other tools give other numbers" rows."""
    return [
        (p, profiles.LABELS[p], [(e, f["fixed_tax_tokens"]) for e, f in counts[p].items()])
        for p in profiles.PROFILES
        if p in counts
    ]


# Measured findings: what a client was seen sending differs from what a profile predicts. Other
# parts of the product (telemetry, in ``ingest``) register a source at start-up; this module must
# not import them (``ingest`` depends on ``dashboard``, never the reverse).
FindingSource = Callable[[Any], list[dict[str, Any]]]
FINDING_SOURCES: list[FindingSource] = []


def register_findings(source: FindingSource) -> None:
    if source not in FINDING_SOURCES:
        FINDING_SOURCES.append(source)


def measured_findings(user: Any) -> list[dict[str, Any]]:
    """Every registered source's findings for the teams ``user`` belongs to."""
    return [finding for source in FINDING_SOURCES for finding in source(user)]
