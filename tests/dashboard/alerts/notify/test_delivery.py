"""Channels and delivery: real local HTTP receivers, retries, permanent failures, exactly-once."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models import Alert, AlertState, Level
from dashboard.alerts.notify.delivery import deliver, sweep_pending
from dashboard.alerts.notify.models import (
    AttemptStatus,
    Channel,
    ChannelKind,
    Delivery,
    DeliveryStatus,
    EventKind,
    Notification,
)
from dashboard.alerts.notify.webhook import TIMESTAMP_HEADER
from dashboard.tasks import sweep_notifications
from tests.dashboard.alerts.factories import (
    Receiver,
    deliveries_for,
    open_alert,
)
from tests.dashboard.factories import send_sentinels_through_every_queue
from tests.helpers import wait_until, webhook_signature


def test_transient_failures_are_retried_and_the_alert_arrives_once(team, eager_celery, settings):
    from dashboard.tasks import deliver_notification

    settings.NOTIFY_RETRY_BASE_SECONDS = 0.01
    with Receiver([500, 500, 200]) as hook:
        channel = Channel.objects.create(
            team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        alert = open_alert(team).alert
        (delivery,) = deliveries_for(alert)
        deliver_notification.apply(args=[delivery.pk])  # the task, with its retries, in-process

        assert [r["status"] for r in hook.requests] == [500, 500, 200]
        assert len(hook.delivered) == 1
        assert hook.json()["alert"]["id"] == str(alert.code)
        attempts = list(Notification.objects.filter(delivery=delivery).order_by("attempt"))
        assert [(n.attempt, n.status, n.http_status) for n in attempts] == [
            (1, AttemptStatus.TRANSIENT, 500),
            (2, AttemptStatus.TRANSIENT, 500),
            (3, AttemptStatus.SENT, 200),
        ]
        assert "HTTP 500" in attempts[0].error
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.SENT and delivery.processed is not None

        # The broker delivering the task again (or a retry racing a success) sends nothing more.
        deliver_notification.apply(args=[delivery.pk])
        assert len(hook.requests) == 3
        channel.refresh_from_db()
        assert channel.enabled and channel.last_status == AttemptStatus.SENT


def test_a_404_disables_the_channel_and_its_page_says_why(team, alice_client, eager_celery, caplog):
    from dashboard.alerts.notify.delivery import deliver

    with Receiver([404]) as hook:
        channel = Channel.objects.create(
            team=team, name="gone", kind=ChannelKind.SLACK, config={"url": hook.url}
        )
        alert = open_alert(team).alert
        (delivery,) = deliveries_for(alert)
        outcome = deliver(delivery.pk)
        assert outcome.status == "failed" and outcome.http_status == 404
        assert len(hook.requests) == 1  # permanent: no retry

    channel.refresh_from_db()
    assert not channel.enabled
    assert "HTTP 404 from the Slack webhook" in channel.disabled_reason
    page = alice_client.get(reverse("channel_detail", args=[team.slug, channel.code]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="disabled-reason"' in html and "HTTP 404 from the Slack webhook" in html
    # The receiver's own words ("no_service") are for the operator's log, not the page.
    assert "no_service" not in channel.disabled_reason and "no_service" not in html
    assert "no_service" in caplog.text

    # A disabled channel gets no deliveries for later alerts.
    later = open_alert(team, rule_key="server:y:fixed_tax_tokens").alert
    assert deliveries_for(later) == []


def test_giving_up_after_max_attempts_keeps_the_channel(team, settings):
    from dashboard.alerts.notify.delivery import deliver

    settings.NOTIFY_MAX_ATTEMPTS = 2
    with Receiver([503, 503, 503]) as hook:
        channel = Channel.objects.create(
            team=team, name="flaky", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        (delivery,) = deliveries_for(open_alert(team).alert)
        first = deliver(delivery.pk)
        assert first.status == "retry" and first.retry_in > 0
        assert deliver(delivery.pk).status == "gave_up"
        assert deliver(delivery.pk).status == "not_claimed"
        assert len(hook.requests) == 2
    channel.refresh_from_db()
    assert channel.enabled
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.GAVE_UP


def test_timeouts_and_429_are_transient(team, settings):
    from dashboard.alerts.notify.delivery import deliver

    settings.NOTIFY_HTTP_TIMEOUT = 0.3
    with Receiver([429]) as limited, Receiver(delay=1.0) as slow:
        Channel.objects.create(
            team=team, name="limited", kind=ChannelKind.WEBHOOK, config={"url": limited.url}
        )
        Channel.objects.create(team=team, name="slow", kind=ChannelKind.WEBHOOK, config={"url": slow.url})
        outcomes = {d.channel.name: deliver(d.pk) for d in deliveries_for(open_alert(team).alert)}
    assert outcomes["limited"].status == "retry" and outcomes["limited"].http_status == 429
    assert outcomes["slow"].status == "retry" and "timed out" in outcomes["slow"].error
    assert Channel.objects.filter(team=team, enabled=True).count() == 2


def test_webhook_is_signed_with_the_channel_secret(team):
    from dashboard.alerts.notify.delivery import deliver

    with Receiver() as hook:
        channel = Channel.objects.create(
            team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        secret = channel.config["secret"]
        assert len(secret) == 64
        (delivery,) = deliveries_for(open_alert(team).alert)
        assert deliver(delivery.pk).status == "sent"
        request = hook.requests[0]
    header = request["headers"]["X-MCP-Tax-Signature"]
    assert header == webhook_signature(request["body"], secret)
    assert header != webhook_signature(request["body"] + b" ", secret)
    assert header != webhook_signature(request["body"], "another-secret")
    assert abs(int(request["headers"][TIMESTAMP_HEADER]) - time.time()) < 60
    payload = json.loads(request["body"])
    assert payload["schema"] == "mcp-tax.alert/1" and payload["event"] == EventKind.OPENED
    assert payload["alert"]["value"] == 4125.0 and payload["alert"]["limit"] == 3500.0
    assert payload["team"]["slug"] == team.slug


def test_slack_email_and_apprise_channels_deliver(team, settings):
    from dashboard.alerts.notify.delivery import deliver

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with Receiver() as slack, Receiver() as apprise_target:
        Channel.objects.create(team=team, name="slack", kind=ChannelKind.SLACK, config={"url": slack.url})
        Channel.objects.create(
            team=team, name="mail", kind=ChannelKind.EMAIL, config={"to": ["ops@example.com"]}
        )
        port = apprise_target.server.server_address[1]
        Channel.objects.create(
            team=team, name="apprise", kind=ChannelKind.APPRISE, config={"url": f"json://127.0.0.1:{port}/"}
        )
        for delivery in deliveries_for(open_alert(team).alert):
            assert deliver(delivery.pk).status == "sent", delivery.channel.name

        slack_body = slack.json()
        assert "files-sprawl" in slack_body["text"] and slack_body["blocks"][0]["type"] == "section"
        apprise_body = apprise_target.json()
        assert "files-sprawl" in apprise_body["title"] and "4125" in apprise_body["message"]
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["ops@example.com"] and "files-sprawl" in mail.outbox[0].subject


def test_channel_min_level_and_resolution_preferences(team):
    from dashboard.alerts.budgets import resolve_alert

    errors_only = Channel.objects.create(
        team=team,
        name="pager",
        kind=ChannelKind.WEBHOOK,
        config={"url": "http://127.0.0.1:9/"},
        min_level=Level.ERROR,
    )
    no_resolve = Channel.objects.create(
        team=team,
        name="quiet",
        kind=ChannelKind.WEBHOOK,
        config={"url": "http://127.0.0.1:9/"},
        notify_on_resolve=False,
    )
    warning = open_alert(team, level=Level.WARNING).alert
    assert [d.channel for d in deliveries_for(warning)] == [no_resolve]
    resolve_alert(team, warning.rule_key)
    resolution = Delivery.objects.filter(event__alert=warning, event__kind=EventKind.RESOLVED)
    assert list(resolution.values_list("channel", flat=True)) == []
    error = open_alert(team, rule_key="server:z:fixed_tax_tokens").alert
    assert {d.channel for d in deliveries_for(error)} == {errors_only, no_resolve}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_worker_delivers_once_even_when_the_task_is_sent_twice(
    postgres_and_redis, celery_worker_process, team
):
    from dashboard.tasks import deliver_notification

    with Receiver() as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        alert = open_alert(team).alert  # committed: the delivery task goes to Redis on commit
        (delivery,) = deliveries_for(alert)
        deliver_notification.delay(delivery.pk)  # a duplicate, as a broker redelivery would be
        wait_until(
            lambda: Delivery.objects.get(pk=delivery.pk).processed is not None,
            timeout=30,
            message="the delivery",
        )
        # The duplicate was queued before these sentinels, so it has been taken when they are back.
        send_sentinels_through_every_queue("duplicate-delivery")
        assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SENT
        assert len(hook.requests) == 1
        assert hook.json()["alert"]["id"] == str(alert.code)
        assert Notification.objects.filter(delivery=delivery).count() == 1


def test_sweep_hands_overdue_retries_to_the_enqueue_it_is_given(team, settings):
    settings.NOTIFY_RETRY_BASE_SECONDS = 60
    with Receiver([500]) as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        (delivery,) = deliveries_for(open_alert(team).alert)
        assert deliver(delivery.pk).status == "retry"
    delivery.refresh_from_db()
    due = delivery.next_attempt_at
    assert due is not None and delivery.processed is None and delivery.locked_at is None

    sent: list[int] = []
    # Not yet overdue (the sweep leaves LEASE_GRACE_SECONDS for the queued retry): nothing is sent.
    settings.LEASE_GRACE_SECONDS = 60
    assert sweep_pending(now=due + timedelta(seconds=59), enqueue=sent.append) == []
    later = due + timedelta(minutes=3)
    assert sweep_pending(now=later, enqueue=sent.append) == [delivery.pk]
    assert sent == [delivery.pk]
    # Finished deliveries and ones a worker holds are never swept.
    Delivery.objects.filter(pk=delivery.pk).update(locked_at=later - timedelta(seconds=5))
    assert sweep_pending(now=later, enqueue=sent.append) == []
    Delivery.objects.filter(pk=delivery.pk).update(locked_at=None, processed=timezone.now())
    assert sweep_pending(now=later, enqueue=sent.append) == []
    assert sent == [delivery.pk]


def test_sweep_task_redelivers_a_lost_retry_and_wakes_expired_silences(
    team, eager_celery, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_RETRY_BASE_SECONDS = 0.01
    with Receiver([500, 200, 200]) as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        (lost,) = deliveries_for(open_alert(team).alert)
        assert deliver(lost.pk).status == "retry"  # its retry message is then lost
        Delivery.objects.filter(pk=lost.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=5))
        silenced = open_alert(team, rule_key="server:quiet:fixed_tax_tokens").alert
        Delivery.objects.filter(event__alert=silenced).update(processed=timezone.now())
        assert silenced.silence(until=timezone.now() + timedelta(days=1), until_release=False)
        Alert.objects.filter(pk=silenced.pk).update(silenced_until=timezone.now() - timedelta(seconds=1))

        # The beat task, run in-process; the woken alert's delivery is enqueued on commit.
        with django_capture_on_commit_callbacks(execute=True):
            assert sweep_notifications.delay().get() == 2
        lost.refresh_from_db()
        assert lost.status == DeliveryStatus.SENT
        silenced.refresh_from_db()
        assert silenced.state == AlertState.ACTIVE
        reopened = Delivery.objects.get(event__alert=silenced, event__kind=EventKind.REOPENED)
        assert reopened.status == DeliveryStatus.SENT
        assert [r["status"] for r in hook.requests] == [500, 200, 200]
        assert {hook.json(i)["event"] for i in (1, 2)} == {"alert.opened", "alert.reopened"}


def test_every_attempt_of_a_delivery_carries_the_same_delivery_header(team, settings):
    settings.NOTIFY_RETRY_BASE_SECONDS = 0
    with Receiver([503]) as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        (delivery,) = deliveries_for(open_alert(team).alert)
        assert deliver(delivery.pk).status == "retry"
        assert deliver(delivery.pk).status == "sent"
    ids = [r["headers"].get("X-MCP-Tax-Delivery") for r in hook.requests]
    # What a receiver drops a repeat by: the delivery's own id, on the failed and the good attempt.
    assert ids == [str(delivery.pk), str(delivery.pk)]
