"""A log split in ranges and stitched gives what one reader of the whole log gives, and the watched
file's state survives a dump and load (mcptax.formats.ranges, mcptax.formats.state)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from mcptax.formats import LineOutcome, ObservedCall, parse, read_calls
from mcptax.formats.assemble import CallAssembler, assemble
from mcptax.formats.ranges import RangeAssembler, Seed, shifted, split_points, stitch
from mcptax.formats.state import StateError, dump, load
from tests.mcptax.formats.helpers import LOGS


def _frame(session: str, seq: int, direction: str, raw: Any) -> str:
    return json.dumps({"session_id": session, "seq": seq, "direction": direction, "raw": raw}) + "\n"


def _call(i: int, text: str = "x") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "put", "arguments": {"t": text}},
    }


def _answer(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": f"ok {i}"}]}}


def sample_log() -> bytes:
    """Two sessions; responses come 1 to 9 frames after their requests (so many pairs straddle
    any cut), one request is never answered, one response has no request, a ping answered late."""
    lines: list[str] = []
    seq = {"a": 0, "b": 0}

    def put(session: str, direction: str, raw: Any) -> None:
        seq[session] += 1
        lines.append(_frame(session, seq[session], direction, raw))

    init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "claude-code", "version": "2.0.1"}}
    put("a", "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    put("a", "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "files", "version": "1"}}})
    init_b = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "cursor-vscode", "version": "1.7"}}
    put("b", "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init_b})
    waiting: list[tuple[int, str, int]] = []  # (due at frame, session, id)
    for i in range(1, 60):
        session = "a" if i % 3 else "b"
        put(session, "c2s", _call(i, "x" * (i * 7)))
        waiting.append((len(lines) + 1 + i % 9, session, i))
        if i == 20:
            put("a", "c2s", {"jsonrpc": "2.0", "id": 500, "method": "ping"})
        if i == 45:
            put("a", "s2c", {"jsonrpc": "2.0", "id": 500, "result": {}})
            put("b", "s2c", _answer(999))  # nobody asked
        if i % 10 == 0:
            lines.append("not json\n")
        for due, s, n in [w for w in waiting if w[0] <= len(lines)]:
            waiting.remove((due, s, n))
            if n != 33:  # 33 is never answered
                put(s, "s2c", _answer(n))
    for _, s, n in waiting:
        if n != 33:
            put(s, "s2c", _answer(n))
    return "".join(lines).encode()


def _summary(items: list[ObservedCall | LineOutcome]) -> tuple[dict[str, Any], dict[int, Any]]:
    calls = {
        c.dedupe_key: (
            c.jsonrpc_id,
            c.unanswered,
            c.agent.name if c.agent else None,
            bool(c.server_info),
            c.line_numbers,
        )
        for c in items
        if isinstance(c, ObservedCall)
    }
    lines = {o.line_no: (o.status, o.reason) for o in items if isinstance(o, LineOutcome)}
    return calls, lines


def read_in_ranges(data: bytes, parts: int, chunk: int) -> list[ObservedCall | LineOutcome]:
    splits = split_points(io.BytesIO(data), len(data), parts, chunk=chunk)
    items: list[ObservedCall | LineOutcome] = []
    handoffs = []
    for index, split in enumerate(splits):
        part = io.BytesIO(data[split.start : split.end])
        assembler = RangeAssembler(
            "envelope", lines_before=split.lines_before, seed=split.seed, hand_on_orphans=index > 0
        )
        events = shifted(parse(part, "envelope"), split.lines_before, split.start)
        items += assemble(events, "envelope", finish=False, assembler=assembler)
        handoffs.append(json.loads(json.dumps(assembler.handoff(data[split.start : split.end].count(b"\n")))))
    items += stitch("envelope", handoffs, lambda offset, length: data[offset : offset + length], 1 << 20)
    return items


@pytest.mark.parametrize("parts", [2, 3, 5, 8])
@pytest.mark.parametrize("chunk", [64, 4096])
def test_ranges_and_stitch_give_what_one_reader_gives(parts: int, chunk: int) -> None:
    data = sample_log()
    whole = _summary(list(read_calls(io.BytesIO(data), "envelope")))
    split = split_points(io.BytesIO(data), len(data), parts, chunk=chunk)
    assert len(split) == parts
    assert all(data[s.start - 1 : s.start] == b"\n" for s in split[1:])  # cut after a line end
    assert [s.lines_before for s in split] == [data[: s.start].count(b"\n") for s in split]

    items = read_in_ranges(data, parts, chunk)
    outcomes = [o.line_no for o in items if isinstance(o, LineOutcome)]
    assert sorted(outcomes) == list(range(1, data.count(b"\n") + 1))  # each line settled once
    keys = [c.dedupe_key for c in items if isinstance(c, ObservedCall)]
    assert len(keys) == len(set(keys)) == 59  # 59 calls, none twice
    assert _summary(items) == whole


def test_a_late_answer_and_an_orphan_across_a_cut() -> None:
    data = sample_log()
    items = read_in_ranges(data, 8, 4096)
    calls = {c.jsonrpc_id: c for c in items if isinstance(c, ObservedCall)}
    assert calls[33].unanswered and not calls[34].unanswered
    assert calls[1].agent is not None and calls[1].agent.name == "claude-code"
    assert calls[3].agent is not None and calls[3].agent.name == "cursor-vscode"  # session b
    reasons = [o.reason for o in items if isinstance(o, LineOutcome)]
    assert reasons.count("orphan_response") == 1  # id 999 only: every late answer found its request
    assert reasons.count("invalid_json") == 5


def test_seed_round_trips_through_json() -> None:
    data = sample_log()
    seed = split_points(io.BytesIO(data), len(data), 4)[-1].seed
    again = Seed.from_json(json.loads(json.dumps(seed.to_json())))
    assert again == seed and set(again.client_info) == {"a", "b"}


@pytest.mark.parametrize(
    "fmt,name",
    [
        ("envelope", "envelope.jsonl"),
        ("claude-code", "claude_code_session.jsonl"),
        ("codex", "codex_rollout.jsonl"),
    ],
)
def test_state_dumped_and_loaded_mid_file_reads_on_as_one_reader(fmt: str, name: str) -> None:
    """Cut the file after every line: the first part read, the state dumped to bytes and loaded
    into a new assembler, the rest read from there: the same calls and outcomes as one read."""
    data = (LOGS / name).read_bytes()
    whole = _summary(list(read_calls(io.BytesIO(data), fmt)))
    lines = data.splitlines(keepends=True)
    for cut in range(1, len(lines)):
        head, tail = b"".join(lines[:cut]), b"".join(lines[cut:])
        parser_state: dict[str, Any] = {}
        first = CallAssembler(fmt)
        items = list(
            assemble(parse(io.BytesIO(head), fmt, state=parser_state), fmt, finish=False, assembler=first)
        )
        restored, parser_state = load(dump(first, parser_state))
        events = shifted(parse(io.BytesIO(tail), fmt, state=parser_state), cut, len(head))
        items += assemble(events, fmt, assembler=restored)
        assert _summary(items) == whole, cut


def test_a_damaged_state_is_refused() -> None:
    with pytest.raises(StateError):
        load(b"not a state")


def repeated_frames_log() -> bytes:
    """One session whose call is shipped twice (a re-sent chunk of the log): the request frame and
    its answer appear again, same (session, seq), after other frames."""
    init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "claude-code", "version": "2.0.1"}}
    first = [
        _frame("r", 1, "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
        _frame("r", 2, "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "f"}}}),
        _frame("r", 3, "c2s", _call(1, "y" * 2000)),
        _frame("r", 4, "s2c", _answer(1)),
        _frame("r", 5, "c2s", _call(2, "z" * 2000)),
    ]
    # Frames 3 and 4 again (the re-shipped chunk), then the answer to call 2.
    return "".join([*first, first[2], first[3], _frame("r", 6, "s2c", _answer(2))]).encode()


def test_a_frame_seen_before_the_dump_is_still_a_duplicate_after_the_load() -> None:
    """The dump falls between a frame and its repeat: the restored assembler must remember the
    frames it saw, or the repeat becomes a second call (and is counted twice)."""
    data = repeated_frames_log()
    lines = data.splitlines(keepends=True)
    for cut in range(4, 6):  # after the first answer, and after call 2: both before the repeats
        head, tail = b"".join(lines[:cut]), b"".join(lines[cut:])
        parser_state: dict[str, Any] = {}
        first = CallAssembler("envelope")
        items = list(
            assemble(
                parse(io.BytesIO(head), "envelope", state=parser_state),
                "envelope",
                finish=False,
                assembler=first,
            )
        )
        restored, parser_state = load(dump(first, parser_state))
        events = shifted(parse(io.BytesIO(tail), "envelope", state=parser_state), cut, len(head))
        items += assemble(events, "envelope", assembler=restored)
        calls = sorted(c.jsonrpc_id for c in items if isinstance(c, ObservedCall))
        assert calls == [1, 2], cut  # written out: two calls, not three
        outcomes = {o.line_no: o.reason for o in items if isinstance(o, LineOutcome)}
        assert outcomes[6] == outcomes[7] == "duplicate_frame", (cut, outcomes)


def test_a_frame_number_never_seen_before_the_dump_is_new_after_the_load() -> None:
    """Frame numbers are kept as runs: a gap (seq 4, shipped late) must stay a gap through the dump,
    or the late frame is taken for a duplicate and its call is lost."""
    init = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "claude-code", "version": "2.0.1"}}
    head = "".join(
        [
            _frame("g", 1, "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
            _frame("g", 2, "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "f"}}}),
            _frame("g", 3, "c2s", _call(1, "y" * 2000)),
            _frame("g", 5, "s2c", _answer(1)),
        ]
    ).encode()
    tail = "".join([_frame("g", 4, "c2s", _call(2, "z" * 2000)), _frame("g", 6, "s2c", _answer(2))]).encode()
    parser_state: dict[str, Any] = {}
    first = CallAssembler("envelope")
    items = list(
        assemble(
            parse(io.BytesIO(head), "envelope", state=parser_state), "envelope", finish=False, assembler=first
        )
    )
    restored, parser_state = load(dump(first, parser_state))
    items += assemble(
        shifted(parse(io.BytesIO(tail), "envelope", state=parser_state), 4, len(head)),
        "envelope",
        assembler=restored,
    )
    assert sorted(c.jsonrpc_id for c in items if isinstance(c, ObservedCall)) == [1, 2]
    assert not [o for o in items if isinstance(o, LineOutcome) and o.reason == "duplicate_frame"]
