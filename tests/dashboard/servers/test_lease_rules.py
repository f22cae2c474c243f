"""The staleness rules of the poll and delivery leases, at their exact boundaries (no server runs).

A poll lock is a dead worker's once it is older than twice POLL_TOTAL_TIMEOUT plus
LEASE_GRACE_SECONDS; a delivery lock, twice NOTIFY_HTTP_TIMEOUT plus the grace. "Older than" is
strict: a lock exactly that old is still live. The figures below are written out, not computed
from the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard.alerts.notify.delivery import claim, lock_stale_after, sweep_pending, unlocked
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery
from dashboard.servers.models import McpServer, Transport, poll_lock_stale_after
from tests.dashboard.alerts.factories import deliveries_for, open_alert

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
SECOND = timedelta(seconds=1)
POLL_STALE = timedelta(seconds=2 * 100 + 60)  # POLL_TOTAL_TIMEOUT 100, grace 60
DELIVERY_STALE = timedelta(seconds=2 * 10 + 60)  # NOTIFY_HTTP_TIMEOUT 10, grace 60


@pytest.fixture(autouse=True)
def rules(settings):
    settings.POLL_TOTAL_TIMEOUT, settings.NOTIFY_HTTP_TIMEOUT, settings.LEASE_GRACE_SECONDS = 100.0, 10.0, 60


def _server(team, polling_since: datetime | None) -> McpServer:
    server = McpServer.objects.create(
        team=team, name="http", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    McpServer.objects.filter(pk=server.pk).update(polling_since=polling_since, poll_lease="a-worker")
    server.refresh_from_db()
    return server


def test_the_poll_rule_is_twice_the_longest_poll_plus_the_grace():
    assert poll_lock_stale_after() == POLL_STALE


@pytest.mark.parametrize(
    ("age", "stale"),
    [(timedelta(0), False), (POLL_STALE - SECOND, False), (POLL_STALE, False), (POLL_STALE + SECOND, True)],
)
def test_a_poll_lock_is_stale_only_once_older_than_the_rule(team, age, stale):
    server = _server(team, AT)
    assert server.lock_is_stale(AT + age) is stale
    assert McpServer.objects.lock_free(AT + age).filter(pk=server.pk).exists() is stale


def test_a_server_without_a_lock_is_free_and_not_polling(team):
    server = _server(team, None)
    assert server.lock_is_stale(AT) is False
    assert server.lock_is_stale() is False
    assert server.is_polling is False
    assert list(McpServer.objects.lock_free(AT)) == [server]
    assert list(McpServer.objects.lock_free()) == [server]


def test_is_polling_and_the_default_now_follow_the_clock(team):
    live = _server(team, timezone.now() - timedelta(seconds=5))
    assert live.is_polling is True and live.lock_is_stale() is False
    assert not McpServer.objects.lock_free().exists()
    McpServer.objects.filter(pk=live.pk).update(polling_since=timezone.now() - POLL_STALE - 5 * SECOND)
    live.refresh_from_db()
    assert live.is_polling is False and live.lock_is_stale() is True
    assert McpServer.objects.lock_free().get() == live


def test_the_delivery_rule_is_twice_the_send_timeout_plus_the_grace():
    assert lock_stale_after() == DELIVERY_STALE


def _delivery(team) -> Delivery:
    Channel.objects.create(
        team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": "http://127.0.0.1:9/"}
    )
    (delivery,) = deliveries_for(open_alert(team).alert)
    return delivery


def test_a_claim_takes_a_free_delivery_once_and_counts_the_attempt(team):
    delivery = _delivery(team)
    assert claim(delivery.pk, AT) is True
    delivery.refresh_from_db()
    assert (delivery.locked_at, delivery.attempts) == (AT, 1)
    assert claim(delivery.pk, AT) is False
    assert claim(delivery.pk, AT + DELIVERY_STALE) is False, "exactly the rule's age is still live"
    assert not Delivery.objects.filter(unlocked(AT + DELIVERY_STALE), pk=delivery.pk).exists()
    assert claim(delivery.pk, AT + DELIVERY_STALE + SECOND) is True, "a dead worker's lock is taken over"
    delivery.refresh_from_db()
    assert (delivery.locked_at, delivery.attempts) == (AT + DELIVERY_STALE + SECOND, 2)


def test_a_claim_leaves_finished_and_other_deliveries_alone(team):
    delivery = _delivery(team)
    assert claim(delivery.pk + 1000, AT) is False
    delivery.refresh_from_db()
    assert (delivery.locked_at, delivery.attempts) == (None, 0)
    Delivery.objects.filter(pk=delivery.pk).update(processed=AT)
    assert claim(delivery.pk, AT) is False
    assert Delivery.objects.get(pk=delivery.pk).attempts == 0


def test_a_claim_without_a_time_uses_the_clock(team):
    delivery = _delivery(team)
    before = timezone.now()
    assert claim(delivery.pk) is True
    delivery.refresh_from_db()
    assert before <= delivery.locked_at <= timezone.now()


def test_the_sweep_takes_unlocked_retries_overdue_by_more_than_the_grace(team):
    delivery = _delivery(team)
    grace = timedelta(seconds=60)
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=AT - grace)
    swept: list[int] = []
    assert sweep_pending(AT, enqueue=swept.append) == [] and swept == []
    assert sweep_pending(AT + SECOND, enqueue=swept.append) == [delivery.pk]
    assert swept == [delivery.pk]
    # A live lock keeps it from the sweep; a dead worker's does not.
    Delivery.objects.filter(pk=delivery.pk).update(locked_at=AT)
    assert sweep_pending(AT + SECOND, enqueue=swept.append) == []
    assert sweep_pending(AT + DELIVERY_STALE + SECOND, enqueue=swept.append) == [delivery.pk]
    Delivery.objects.filter(pk=delivery.pk).update(processed=AT, locked_at=None)
    assert sweep_pending(AT + DELIVERY_STALE + SECOND, enqueue=swept.append) == []


def test_the_sweep_without_a_time_uses_the_clock(team):
    delivery = _delivery(team)
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=59))
    assert sweep_pending(enqueue=lambda pk: None) == []
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=62))
    assert sweep_pending(enqueue=lambda pk: None) == [delivery.pk]


def test_the_sweep_hands_on_at_most_500_at_a_time(team):
    Channel.objects.bulk_create(
        Channel(team=team, name=f"hook {i}", kind=ChannelKind.WEBHOOK, config={"url": "http://127.0.0.1:9/"})
        for i in range(501)
    )
    deliveries = deliveries_for(open_alert(team).alert)
    assert len(deliveries) == 501
    Delivery.objects.update(next_attempt_at=AT - timedelta(hours=1))
    first = sweep_pending(AT, enqueue=lambda pk: None)
    assert len(first) == len(set(first)) == 500
    Delivery.objects.filter(pk__in=first).update(processed=AT)
    assert sweep_pending(AT, enqueue=lambda pk: None) == [d.pk for d in deliveries if d.pk not in set(first)]
