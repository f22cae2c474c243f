"""Poll and delivery leases recover from a dead worker, and polls start on time.

What failed for real: a worker killed mid-poll left its lock, the dispatcher skipped locked
servers, and the server was never polled again; a delivery locked by a dead worker was never
swept; polls drifted by up to one beat tick every interval.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import DatabaseError, connection
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.notify.delivery import deliver, sweep_pending
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery, DeliveryStatus
from dashboard.servers.health import stale_polls
from dashboard.servers.models import McpServer, PollRun, Transport
from dashboard.servers.polling import claim, dispatch_due
from dashboard.tasks import poll as poll_server
from examples.servers.launch import stdio_command
from tests.dashboard.alerts.factories import Receiver, deliveries_for, open_alert
from tests.helpers import CONNECT_BUDGET

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def patient_polls(settings):
    # Spawning a stdio server on a loaded 2-core machine can take seconds: these tests are about
    # leases, not timeouts, so a slow start must not turn a poll into a timeout.
    settings.POLL_CONNECT_TIMEOUT = 2 * CONNECT_BUDGET
    settings.POLL_TOTAL_TIMEOUT = 4 * CONNECT_BUDGET


def _lean(team, name: str = "lean", **fields) -> McpServer:
    command, argv, env = stdio_command("lean")
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=argv, env=env, **fields
    )


def _lock(server: McpServer, age: timedelta, lease: str = "") -> None:
    McpServer.objects.filter(pk=server.pk).update(polling_since=timezone.now() - age, poll_lease=lease)


def _stale_age(settings) -> timedelta:
    # Just past the rule (twice the longest poll plus a minute), written out here, not imported.
    return timedelta(seconds=settings.POLL_TOTAL_TIMEOUT * 2 + 61)


def test_a_server_whose_worker_died_mid_poll_is_dispatched_again(team, settings):
    dead = _lean(team, "dead")
    live = _lean(team, "live")
    _lock(dead, _stale_age(settings))
    _lock(live, timedelta(seconds=5))
    sent: list[int] = []
    assert dispatch_due(enqueue=lambda pk, eta: sent.append(pk)) == [dead.pk]
    assert sent == [dead.pk]
    summary = poll_server(dead.pk)
    assert summary.outcome == "ok", summary.message
    dead.refresh_from_db()
    assert dead.polling_since is None and dead.poll_lease == ""


def test_the_same_task_redelivered_takes_back_its_own_lease(team):
    server = _lean(team)
    assert claim(server.pk, "task-1")
    # Another task finds the lock live and held by someone else.
    assert not claim(server.pk, "task-2")
    assert poll_server(server.pk, lease="task-2").skipped
    # The first task's message, redelivered after its worker was killed, resumes the poll at once.
    summary = poll_server(server.pk, lease="task-1")
    assert summary.outcome == "ok" and not summary.skipped, summary.message
    assert PollRun.objects.filter(server=server, outcome="ok").count() == 1
    server.refresh_from_db()
    assert server.polling_since is None and server.poll_lease == ""


def _make_pollrun_inserts_fail() -> str:
    """A real database failure on the PollRun insert (what a dropped connection looks like to us)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION test_fail_pollrun() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'the database went away'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER test_fail_pollrun BEFORE INSERT ON dashboard_pollrun "
                "FOR EACH ROW EXECUTE FUNCTION test_fail_pollrun()"
            )
        return "DROP TRIGGER test_fail_pollrun ON dashboard_pollrun"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TRIGGER test_fail_pollrun BEFORE INSERT ON dashboard_pollrun "
            "BEGIN SELECT RAISE(ABORT, 'the database went away'); END"
        )
    return "DROP TRIGGER test_fail_pollrun"


@pytest.mark.django_db(transaction=True)
def test_the_lock_is_released_when_the_poll_run_cannot_be_written(team):
    server = _lean(team)
    undo = _make_pollrun_inserts_fail()
    try:
        with pytest.raises(DatabaseError, match="went away"):
            poll_server(server.pk)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(undo)
    server.refresh_from_db()
    assert server.polling_since is None, "a failed bookkeeping write must not keep the server locked"
    assert server.next_poll_at > timezone.now(), "retried after a backoff, not at once in a loop"
    assert not PollRun.objects.filter(server=server).exists()
    sent: list[int] = []
    assert dispatch_due(timezone.now() + timedelta(hours=2), enqueue=lambda pk, eta: sent.append(pk))
    assert sent == [server.pk]


def test_the_next_poll_is_counted_from_the_start_of_this_one(team):
    server = _lean(team, poll_interval_seconds=600)
    summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    run = PollRun.objects.get(server=server)
    server.refresh_from_db()
    # Spawning the server and the bookkeeping take time; none of it is added to the interval.
    assert run.duration_ms > 0
    assert server.next_poll_at == run.started + timedelta(seconds=600)


def test_each_due_poll_is_sent_with_its_exact_due_time(team, settings):
    settings.POLL_DISPATCH_EVERY = 15.0
    now = timezone.now()
    overdue = _lean(team, "overdue", next_poll_at=now - timedelta(seconds=40))
    soon = _lean(team, "soon", next_poll_at=now + timedelta(seconds=9))
    after_the_tick = _lean(team, "after", next_poll_at=now + timedelta(seconds=16))
    sent: dict[int, object] = {}
    dispatched = dispatch_due(now, enqueue=lambda pk, eta: sent.__setitem__(pk, eta))
    assert sorted(dispatched) == sorted([overdue.pk, soon.pk])
    # Due before the next tick: sent now with its own due time, not a tick late.
    assert sent[soon.pk] == now + timedelta(seconds=9)
    # Already late: as soon as possible.
    assert sent[overdue.pk] == now
    assert after_the_tick.pk not in sent
    # The next tick does not send them again, and picks up the one that has come into range.
    again: list[int] = []
    assert dispatch_due(now + timedelta(seconds=15), enqueue=lambda pk, eta: again.append(pk)) == [
        after_the_tick.pk
    ]


def test_poll_now_tells_an_abandoned_lock_from_a_live_one(
    team, alice_client, settings, eager_celery, django_capture_on_commit_callbacks
):
    server = _lean(team)
    url = reverse("poll_now", args=[team.slug, server.code])
    _lock(server, timedelta(seconds=5))
    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code]))
    assert b"polling\xe2\x80\xa6" in page.content and b"poll abandoned" not in page.content
    with django_capture_on_commit_callbacks(execute=True) as sent:
        alice_client.post(url)
    assert sent == [], "a live poll is not started twice"
    assert not PollRun.objects.filter(server=server).exists()

    _lock(server, _stale_age(settings))
    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code]))
    assert b"poll abandoned" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(url)
    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("never finished" in t for t in texts), texts
    (run,) = PollRun.objects.filter(server=server)
    assert run.outcome == "ok" and run.trigger == "manual"


def test_a_delivery_whose_worker_died_mid_attempt_is_swept_and_sent_once(team, settings):
    with Receiver([]) as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        (delivery,) = deliveries_for(open_alert(team).alert)
        # A worker claimed it (one attempt counted) and was killed during the POST.
        # Just past the rule (twice the send timeout plus the grace), written out, not imported.
        died_at = timezone.now() - timedelta(
            seconds=settings.NOTIFY_HTTP_TIMEOUT * 2 + settings.LEASE_GRACE_SECONDS + 1
        )
        Delivery.objects.filter(pk=delivery.pk).update(
            locked_at=died_at, attempts=1, next_attempt_at=died_at - timedelta(minutes=3)
        )
        swept: list[int] = []
        assert sweep_pending(enqueue=swept.append) == [delivery.pk]
        assert deliver(delivery.pk).status == "sent"
        assert deliver(delivery.pk).status == "not_claimed"
        assert len(hook.delivered) == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SENT and delivery.locked_at is None
    assert sweep_pending(enqueue=swept.append) == []


# T is the longest a live poll can hold the lock (POLL_TOTAL_TIMEOUT); the documented rule
# (docs/operations.md) takes a lock as a dead worker's past 2T plus the grace. Ages around T and 2T
# (plus the grace), a second either side, with the lock written as a raw timestamp.
LOCKED_AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
T, GRACE, EPS = 100, 60, timedelta(seconds=1)
LOCK_AGES = {
    "T-e": (timedelta(seconds=T + GRACE) - EPS, False),
    "T+e": (timedelta(seconds=T + GRACE) + EPS, False),
    "2T-e": (timedelta(seconds=2 * T + GRACE) - EPS, False),
    "2T+e": (timedelta(seconds=2 * T + GRACE) + EPS, True),
}


@pytest.mark.parametrize("age_name", list(LOCK_AGES))
def test_a_lock_goes_stale_only_past_twice_the_longest_poll(team, settings, age_name):
    settings.POLL_TOTAL_TIMEOUT, settings.LEASE_GRACE_SECONDS = float(T), GRACE
    age, stale = LOCK_AGES[age_name]
    server = _lean(team)
    McpServer.objects.filter(pk=server.pk).update(polling_since=LOCKED_AT, poll_lease="dead-worker")
    now = LOCKED_AT + age
    server.refresh_from_db()
    assert server.lock_is_stale(now) is stale
    assert McpServer.objects.lock_free(now).filter(pk=server.pk).exists() is stale
    assert [lease.label for lease in stale_polls([team], now)] == ([f"{team.slug}/lean"] if stale else [])
