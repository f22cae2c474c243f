"""Call assembly (mcptax/formats/assemble.py): pairing, dedupe keys, line accounting, resume."""

from __future__ import annotations

import hashlib

import pytest

from mcptax.formats import LineOutcome, read_calls
from mcptax.formats.assemble import CallAssembler
from mcptax.formats.records import Frame, LineEvent
from mcptax.tokens import canonical
from tests.mcptax.formats.helpers import (
    CALL,
    RESULT,
    SAMPLES,
    assert_reconciles,
    calls_of,
    env_line,
    outcomes_of,
    run,
    units,
)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_line_of_every_sample_is_accounted_for(name: str) -> None:
    assert_reconciles(run(name), units(name))


def test_reingesting_yields_the_same_dedupe_keys() -> None:
    for name in SAMPLES:
        first = [c.dedupe_key for c in calls_of(run(name))]
        assert first == [c.dedupe_key for c in calls_of(run(name))]
        assert len(set(first)) == len(first)


def test_a_reused_id_with_the_same_request_is_still_two_calls() -> None:
    lines = [
        env_line(1, "c2s", CALL),
        env_line(2, "s2c", RESULT),
        env_line(3, "c2s", CALL),
        env_line(4, "s2c", RESULT),
    ]
    calls = calls_of(read_calls(lines, "envelope"))
    assert [c.line_numbers for c in calls] == [(1, 2), (3, 4)]
    assert calls[0].dedupe_key != calls[1].dedupe_key


def test_an_id_reused_while_pending_emits_the_first_request_unanswered() -> None:
    other = {**CALL, "params": {"name": "t", "arguments": {"text": "b"}}}
    items = list(
        read_calls(
            [env_line(1, "c2s", CALL), env_line(2, "c2s", other), env_line(3, "s2c", RESULT)], "envelope"
        )
    )
    calls = calls_of(items)
    assert [(c.arguments["text"], c.unanswered) for c in calls] == [("a", True), ("b", False)]
    assert_reconciles(items, 3)


def test_sessions_and_connections_keep_ids_apart() -> None:
    lines = [env_line(1, "c2s", CALL, "s1"), env_line(2, "c2s", CALL, "s2"), env_line(3, "s2c", RESULT, "s2")]
    calls = calls_of(read_calls(lines, "envelope"))
    assert [(c.session_key, c.unanswered) for c in calls] == [("s2", False), ("s1", True)]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_resume_after_a_kill_accounts_for_every_line_once(name: str) -> None:
    full = run(name)
    total = units(name)
    for crash_at in range(len(full)):
        persisted = full[: crash_at + 1]
        marks = [i.watermark for i in persisted if isinstance(i, LineOutcome)]
        watermark = marks[-1] if marks else 0
        resumed = run(name, skip_through_line=watermark)
        persisted_keys = {c.dedupe_key for c in calls_of(persisted)}
        for call in calls_of(resumed):
            assert min(call.line_numbers) > watermark
        lines = {o.line_no for o in persisted if isinstance(o, LineOutcome)} | set(outcomes_of(resumed))
        assert lines == set(range(1, total + 1))
        assert {o.line_no for o in outcomes_of(resumed).values()} == set(range(watermark + 1, total + 1))
        # Every call a resumed outcome names was stored before the kill or is yielded again.
        for outcome in outcomes_of(resumed).values():
            assert set(outcome.call_keys) <= persisted_keys | {c.dedupe_key for c in calls_of(resumed)}


def test_a_proxy_call_s_dedupe_key_is_its_documented_identity() -> None:
    """Keys are stored: a log ingested again after an upgrade must give the keys it gave before.
    The identity (module docstring): session, connection, JSON-RPC id, the request's digest and
    the occurrence number of that identity, 0, 1, 2, ..."""
    lines = [env_line(i, "c2s" if i % 2 else "s2c", CALL if i % 2 else RESULT) for i in range(1, 7)]
    request = hashlib.sha256(canonical(CALL).encode()).hexdigest()
    expected = [
        hashlib.sha256(canonical(["proxy", "s", "", CALL["id"], request, n]).encode()).hexdigest()
        for n in range(3)
    ]
    assert [c.dedupe_key for c in calls_of(read_calls(lines, "envelope"))] == expected


def test_an_identical_request_resent_while_pending_is_a_second_call() -> None:
    """A proxy client retrying with the same id and the same request: the first went unanswered."""
    items = list(
        read_calls(
            [env_line(1, "c2s", CALL), env_line(2, "c2s", CALL), env_line(3, "s2c", RESULT)], "envelope"
        )
    )
    calls = calls_of(items)
    assert [(c.line_numbers, c.unanswered) for c in calls] == [((1,), True), ((2, 3), False)]
    assert_reconciles(items, 3)


def _deeply_nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param({1, 2}, id="no JSON for a set (TypeError)"),
        pytest.param(_deeply_nested(100_000), id="too deep to encode (RecursionError)"),
        pytest.param(10**5000, id="an integer too long to write (ValueError)"),
    ],
)
def test_a_frame_the_assembler_cannot_process_marks_its_line_and_the_ingest_goes_on(odd) -> None:
    # The readers never build such a frame (they quarantine what JSON cannot hold); the assembler
    # still must not stop on one: its line says why, the next call is formed as usual.
    assembler = CallAssembler("envelope")
    bad = {**CALL, "params": {"name": "t", "arguments": {"text": odd}}}
    out = assembler.feed(LineEvent(1, "frame", frames=[Frame("request", "s", bad, seq=1)]))
    out += assembler.feed(LineEvent(2, "frame", frames=[Frame("request", "s", {**CALL, "id": 2}, seq=2)]))
    answer = {**RESULT, "id": 2}
    out += assembler.feed(
        LineEvent(3, "frame", frames=[Frame("response", "s", answer, direction="s2c", seq=3)])
    )
    out += assembler.finish()
    assert [(o.line_no, o.status, o.reason) for o in outcomes_of(out).values()] == [
        (1, "ignored", "unprocessable_message"),
        (2, "call", None),
        (3, "call", None),
    ]
    assert [c.line_numbers for c in calls_of(out)] == [(2, 3)]


@pytest.mark.parametrize(
    "params",
    [
        pytest.param("t", id="params not an object"),
        pytest.param({"name": 5, "arguments": {"text": "a"}}, id="name not a string"),
        pytest.param({"name": "t", "arguments": ["a"]}, id="arguments not an object"),
    ],
)
def test_a_tools_call_of_the_wrong_shape_is_named_invalid(params) -> None:
    lines = [env_line(1, "c2s", {**CALL, "params": params}), env_line(2, "s2c", RESULT)]
    outcomes = outcomes_of(read_calls(lines, "envelope"))
    assert (outcomes[1].status, outcomes[1].reason) == ("ignored", "invalid_tools_call")


def test_a_line_waiting_for_its_answer_holds_the_watermark_back() -> None:
    # The watermark is how far a resumed ingest may skip: never past a line still in the air.
    assembler = CallAssembler("envelope")
    waiting = assembler.feed(LineEvent(1, "frame", frames=[Frame("request", "s", CALL, seq=1)]))
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    noted = assembler.feed(LineEvent(2, "frame", frames=[Frame("notification", "s", note, seq=2)]))
    answered = assembler.feed(
        LineEvent(3, "frame", frames=[Frame("response", "s", RESULT, direction="s2c", seq=3)])
    )
    assert waiting == []
    assert [(o.line_no, o.reason, o.watermark) for o in noted] == [(2, "notification", 0)]
    assert [(o.line_no, o.watermark) for o in answered if isinstance(o, LineOutcome)] == [(1, 2), (3, 3)]


def test_a_session_record_is_meta_not_a_notification() -> None:
    assembler = CallAssembler("codex")
    out = assembler.feed(LineEvent(1, "frame", frames=[Frame("session", "s")]))
    assert [(o.status, o.reason) for o in out] == [("ignored", "meta")]


def test_a_transcript_call_outside_any_turn_is_formed_when_its_result_arrives() -> None:
    # A tool_use whose message has no id cannot wait for its turn's usage: nothing would close it.
    assembler = CallAssembler("claude-code")
    tool_use = Frame("request", "s", CALL, client_call_id="toolu_1", chain="main")
    other = Frame("request", "s", {"jsonrpc": "2.0", "id": "x", "method": "agent/other"}, chain="main")
    assembler.feed(LineEvent(1, "frame", frames=[tool_use]))
    assert [o.reason for o in assembler.feed(LineEvent(2, "frame", frames=[other]))] == ["not_a_tool_call"]
    result = Frame("response", "s", RESULT, direction="s2c", chain="main")
    formed = assembler.feed(LineEvent(3, "frame", frames=[result]))
    assert [c.line_numbers for c in calls_of(formed)] == [(1, 3)]
