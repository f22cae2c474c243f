"""A frame repeated in a log (same session and seq) is a duplicate, never a second call."""

from __future__ import annotations

from mcptax.formats import Tally, read_calls
from tests.mcptax.formats.helpers import CALL, RESULT, assert_reconciles, calls_of, env_line, outcomes_of


def _session() -> list[bytes]:
    return [env_line(1, "c2s", CALL), env_line(2, "s2c", RESULT)]


def test_a_log_pasted_twice_into_one_file_forms_each_call_once() -> None:
    items = list(read_calls(_session() + _session(), "envelope"))
    assert [c.line_numbers for c in calls_of(items)] == [(1, 2)]
    outcomes = outcomes_of(items)
    assert [outcomes[n].status for n in (1, 2, 3, 4)] == ["call", "call", "duplicate", "duplicate"]
    assert outcomes[3].reason == outcomes[4].reason == "duplicate_frame"
    assert_reconciles(items, 4)
    tally = Tally()
    for item in items:
        tally.observe(item)
    assert (tally.call_lines, tally.duplicate, tally.calls) == (2, 2, 1)


def test_a_repeated_response_alone_is_a_duplicate_not_a_duplicate_response() -> None:
    lines = [*_session(), env_line(2, "s2c", RESULT)]
    items = list(read_calls(lines, "envelope"))
    assert outcomes_of(items)[3].status == "duplicate"
    assert_reconciles(items, 3)


def test_the_same_seq_in_another_session_is_another_frame() -> None:
    lines = [*_session(), env_line(1, "c2s", CALL, "other"), env_line(2, "s2c", RESULT, "other")]
    calls = calls_of(read_calls(lines, "envelope"))
    assert [c.session_key for c in calls] == ["s", "other"]


def test_the_call_identity_comes_from_its_frame_not_its_place_in_the_file() -> None:
    # The second half of a copied log, ingested on its own, names the same calls as the whole log.
    whole = _session() + [env_line(3, "c2s", {**CALL, "id": 2}), env_line(4, "s2c", {**RESULT, "id": 2})]
    tail = whole[2:]
    keys_whole = [c.dedupe_key for c in calls_of(read_calls(whole, "envelope"))]
    keys_tail = [c.dedupe_key for c in calls_of(read_calls(tail, "envelope"))]
    assert keys_tail == keys_whole[1:]


def test_a_frame_without_seq_is_never_taken_for_a_duplicate() -> None:
    no_seq = [line.replace(b'"seq": 1, ', b"").replace(b'"seq": 2, ', b"") for line in _session()]
    calls = calls_of(read_calls(no_seq + no_seq, "envelope"))
    assert len(calls) == 2 and calls[0].dedupe_key != calls[1].dedupe_key
