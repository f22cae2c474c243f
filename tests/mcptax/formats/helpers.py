"""What the format tests share: the sample logs under tests/data/logs, reading them, and the check
that every line is accounted for once with each call before its lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcptax.formats import LineOutcome, ObservedCall, Tally, read_calls
from mcptax.formats.records import Discovered

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
SAMPLES = {
    "envelope.jsonl": "envelope",
    "envelope_redacted.jsonl": "envelope",
    "mcp_session.har": "har",
    "claude_code_session.jsonl": "claude-code",
    "codex_rollout.jsonl": "codex",
}


def run(name: str, **kwargs: Any) -> list[ObservedCall | LineOutcome]:
    with open(LOGS / name, "rb") as f:
        return list(read_calls(f, SAMPLES[name], **kwargs))


def units(name: str) -> int:
    data = (LOGS / name).read_bytes()
    if SAMPLES[name] == "har":
        return len(json.loads(data)["log"]["entries"])
    return len(data.splitlines())


# A minimal tools/call and its answer.
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "t", "arguments": {"text": "a"}},
}
RESULT = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


def calls_of(items) -> list[ObservedCall]:
    return [i for i in items if isinstance(i, ObservedCall)]


def outcomes_of(items) -> dict[int, LineOutcome]:
    return {i.line_no: i for i in items if isinstance(i, LineOutcome)}


def assert_reconciles(items, expected_lines: int) -> None:
    """Every line exactly once; each call before its lines; every key names an emitted call."""
    seen_lines: list[int] = []
    emitted: set[str] = set()
    for item in items:
        if isinstance(item, ObservedCall):
            emitted.add(item.dedupe_key)
        elif isinstance(item, Discovered):
            continue  # discovery records ride beside the line outcomes (tests/mcptax/formats/test_tool_search.py)
        else:
            seen_lines.append(item.line_no)
            assert item.status in ("call", "duplicate", "ignored", "quarantined")
            assert (item.status == "call") == bool(item.call_keys)
            assert set(item.call_keys) <= emitted, "a line's outcome came before its call"
            assert (item.reason is None) == (item.status == "call")
    assert sorted(seen_lines) == list(range(1, expected_lines + 1))
    for call in calls_of(items):
        for line_no in call.line_numbers:
            assert call.dedupe_key in outcomes_of(items)[line_no].call_keys
    tally = Tally()
    for item in items:
        tally.observe(item)
    assert tally.complete and tally.read == expected_lines


def env_line(seq: int, direction: str, raw: dict, session: str = "s") -> bytes:
    record = {"session_id": session, "seq": seq, "ts": f"2025-01-01T00:00:{seq:02d}Z", "direction": direction}
    return json.dumps({**record, "raw": raw}).encode() + b"\n"


def seen_after_cut(cut: str, opening: str) -> str:
    """A JSON string value as a cut frame shows it: what follows ``opening`` in ``cut``, decoded
    here with json.loads (an escape the cut split is dropped)."""
    tail = cut[cut.index(opening) + len(opening) :]
    while tail:
        try:
            return json.loads(f'"{tail}"')
        except json.JSONDecodeError:
            tail = tail[:-1]
    return ""
