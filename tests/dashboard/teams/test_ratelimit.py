"""The API rate limit (dashboard.teams.ratelimit) driven through its clock: requests placed at
chosen points of a minute, so a boundary falls exactly where the test puts it, never by chance."""

from __future__ import annotations

import uuid

import pytest

from dashboard.teams import ratelimit

pytestmark = pytest.mark.django_db


@pytest.fixture
def key() -> str:
    """A token key of this test's own: the shared cache (Redis on the second leg) is never cleared."""
    return uuid.uuid4().hex


def test_the_budget_of_a_minute_and_the_wait_to_the_next(rate_clock, key):
    rate_clock.now = 1_767_225_600.0 + 59.5  # half a second before a minute ends
    assert [ratelimit.retry_after("t", key, 2) for _ in range(2)] == [None, None]
    assert ratelimit.retry_after("t", key, 2) == 1  # 0.5 s left: at least 1 s to wait
    rate_clock.advance(0.5)  # the next minute: a fresh budget
    assert ratelimit.retry_after("t", key, 2) is None
    rate_clock.advance(1.0)
    assert ratelimit.retry_after("t", key, 2) is None
    assert ratelimit.retry_after("t", key, 2) == 60  # 59 s left, rounded up


def test_budgets_are_per_token_and_per_scope_and_zero_is_off(rate_clock, key):
    assert ratelimit.retry_after("check", key, 1) is None
    assert ratelimit.retry_after("check", key, 1) == 51
    assert ratelimit.retry_after("check", key + "-other", 1) is None
    assert ratelimit.retry_after("ingest", key, 1) is None
    assert all(ratelimit.retry_after("check", key, 0) is None for _ in range(5))
