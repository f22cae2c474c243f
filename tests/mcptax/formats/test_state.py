"""The pairing state's codec (mcptax.formats.state) on its own: lossless, compact, and strict about
what it reads. The end-to-end dump-and-load stories are in test_ranges.py."""

from __future__ import annotations

import json

import pytest

from mcptax.formats.assemble import CallAssembler
from mcptax.formats.pending import LineState, PendingCall, Turn
from mcptax.formats.records import AgentInfo, Frame
from mcptax.formats.state import VERSION, StateError, dump, from_json, load, pack, to_json

CLAUDE = AgentInfo(family="claude-code", name="claude-code", version="2.0.1", source="initialize")
CURSOR = AgentInfo(family="cursor", name="cursor-vscode", version=None, source="initialize")


def _request(session: str, conn: str, seq: int) -> Frame:
    message = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "put", "arguments": {}}}
    return Frame(
        kind="request",
        session_key=session,
        message=message,
        conn_id=conn,
        seq=seq,
        agent=CLAUDE,
        capture_truncated=True,
        truncated_pointers=("/params/arguments/t",),
    )


def held_state() -> CallAssembler:
    """An assembler holding what a live log leaves open: lines with and without a session's client,
    cut requests without an id waiting on two connections, frame numbers with gaps."""
    a = CallAssembler("envelope")
    a.watermark = 3
    a._done_above_watermark = {5, 6, 7, 9}
    a._lines = {
        4: LineState(open=False, pending=1, call_keys=["k"], reasons=["r"], context=("s1", CLAUDE)),
        8: LineState(open=True, pending=2, context=None),
        10: LineState(open=False, pending=1, context=("s2", CURSOR)),
    }
    a._client_info = {"s1": CLAUDE, "s2": CURSOR}
    a._idless = {
        ("s1", "conn-a"): [(_request("s1", "conn-a", 4), 4)],
        ("s2", "conn-b"): [(_request("s2", "conn-b", 8), 8)],
    }
    a._seen_frames = {("s1", n) for n in (1, 2, 3, 4, 7, 8, 12, 15)} | {("s2", 1), ("s2", 2)}
    return a


def test_a_dump_and_load_gives_back_every_piece_of_the_state() -> None:
    a = held_state()
    again, parser = load(dump(a, {"offset": 12}))
    assert parser == {"offset": 12}
    assert again._lines == a._lines
    assert again._idless == a._idless
    assert again._seen_frames == a._seen_frames
    assert again._done_above_watermark == a._done_above_watermark
    assert again._client_info == a._client_info
    assert to_json(again) == to_json(a)


def test_open_turns_come_back_with_their_keys_calls_and_which_one_is_current() -> None:
    """A transcript's open turns: the current turn of a key (in `_turns`) and an older turn only a
    chain still points at. After a load the current one is again the very turn its chain points at,
    the older one stays out of `_turns`, and each keeps its (session, turn) key, tokens, inputs
    and calls."""
    a = CallAssembler("claude-code")
    call = PendingCall(request=_request("s1", "conn-a", 3), lines=[3], dedupe_key="d-3")
    current = Turn(("s1", "turn-2"), None, {"toolu_2": '{"path":"a.md"}'}, [call])
    older = Turn(("s1", "turn-1"), 40, {"toolu_1": "{}"}, [])
    a._calls = {("s1", "conn-a", "c2s", "3"): call}
    a._turns = {current.key: current}
    a._open_turn_by_chain = {"chain-b": current, "chain-a": older}

    again, _ = load(dump(a))

    assert list(again._turns) == [("s1", "turn-2")]
    turn = again._turns["s1", "turn-2"]
    assert (turn.key, turn.output_tokens, turn.inputs) == (
        ("s1", "turn-2"),
        None,
        {"toolu_2": '{"path":"a.md"}'},
    )
    assert again._open_turn_by_chain["chain-b"] is turn
    (pending,) = again._calls.values()
    assert turn.calls == [pending] and pending.dedupe_key == "d-3"
    stale = again._open_turn_by_chain["chain-a"]
    assert (stale.key, stale.output_tokens, stale.inputs, stale.calls) == (
        ("s1", "turn-1"),
        40,
        {"toolu_1": "{}"},
        [],
    )
    assert stale is not turn and ("s1", "turn-1") not in again._turns
    assert to_json(again) == to_json(a)


def test_consecutive_frame_numbers_are_kept_as_one_run() -> None:
    """What a state costs: one run per stretch of consecutive numbers, not one entry per frame."""
    a = CallAssembler("envelope")
    a._seen_frames = {("s", n) for n in [*range(1, 5_001), *range(5_005, 10_001), 10_005]}
    a._done_above_watermark = set(range(20, 120))
    state = to_json(a)
    assert state["seen_frames"] == {"s": [[1, 5_000], [5_005, 10_000], [10_005, 10_005]]}
    assert state["done_above"] == [[20, 119]]
    assert len(dump(a)) < 500


@pytest.mark.parametrize("version", [VERSION - 1, VERSION + 1, None])
def test_a_state_of_another_version_is_refused_by_name(version) -> None:
    state = to_json(held_state())
    state["version"] = version
    with pytest.raises(StateError, match="not a pairing state of this version"):
        from_json(state)
    with pytest.raises(StateError, match="^not a pairing state of this version$"):
        load(pack({"assembler": state, "parser": {}}))


@pytest.mark.parametrize(
    "damage",
    [
        {"idless": None},  # a part missing (KeyError)
        {"lines": 5},  # not a list (TypeError)
        {"lines": [[1]]},  # a pair short (ValueError)
        {"pending": [[["s", "c", "c2s", 1], 99]]},  # a call that is not there (IndexError)
    ],
)
def test_a_damaged_state_is_refused_as_unreadable(damage) -> None:
    state = to_json(held_state())
    for part, value in damage.items():
        if value is None:
            del state[part]
        else:
            state[part] = value
    with pytest.raises(StateError, match="unreadable pairing state"):
        load(pack({"assembler": state, "parser": {}}))


def test_bytes_that_are_no_state_are_refused() -> None:
    with pytest.raises(StateError, match="unreadable state"):
        load(json.dumps({"assembler": {}}).encode())
