"""Call assembly (mcptax/formats/assemble.py): pairing, dedupe keys, line accounting, resume."""

from __future__ import annotations

import hashlib

import pytest

from mcptax.formats import LineOutcome, read_calls
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
