"""Channels and delivery: real local HTTP receivers, retries, permanent failures, exactly-once."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.urls import reverse

from dashboard.alerts.models import Alert, Level, Measure
from dashboard.alerts.notify.models import (
    AttemptStatus,
    Channel,
    ChannelKind,
    Delivery,
    DeliveryStatus,
    EventKind,
    Notification,
)
from dashboard.alerts.notify.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify


class Receiver:
    """A real HTTP server on 127.0.0.1 that records requests and answers from a script of statuses."""

    def __init__(self, statuses: list[int] | None = None, delay: float = 0.0) -> None:
        self.requests: list[dict] = []
        self.statuses = list(statuses or [])
        self.delay = delay
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body, "status": status}
                )
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 400 else b"no_service")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def delivered(self) -> list[dict]:
        """Requests that were answered 2xx, i.e. notifications that actually arrived."""
        return [r for r in self.requests if 200 <= r["status"] < 300]

    def json(self, index: int = -1) -> dict:
        return json.loads(self.requests[index]["body"])


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


@pytest.fixture
def eager_celery():
    """Run tasks in-process (the real task code, retries included) instead of through a broker."""
    from config.celery import app

    # Not propagating: an eager retry re-raises Retry after running the retry in-process.
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = saved


def open_alert(team, rule_key="server:x:fixed_tax_tokens", level=Level.ERROR, value=4125.0):
    from dashboard.alerts.budgets import open_or_update_alert

    return open_or_update_alert(
        team,
        rule_key,
        Measure.FIXED_TAX_TOKENS,
        level,
        value,
        3500.0,
        f"fixed tax is {value:g}",
        "files-sprawl",
    )


def deliveries_for(alert: Alert) -> list[Delivery]:
    return list(Delivery.objects.filter(event__alert=alert).order_by("pk"))


def test_transient_failures_are_retried_and_the_alert_arrives_once(team, eager_celery, settings):
    from dashboard.alerts.tasks import deliver_notification

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


def test_a_404_disables_the_channel_and_its_page_says_why(team, alice_client, eager_celery):
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
    assert "HTTP 404" in channel.disabled_reason and "no_service" in channel.disabled_reason
    page = alice_client.get(reverse("channel_detail", args=[team.slug, channel.code]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="disabled-reason"' in html and "HTTP 404: no_service" in html

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
    assert verify(request["body"], secret, request["headers"][SIGNATURE_HEADER])
    assert not verify(request["body"] + b" ", secret, request["headers"][SIGNATURE_HEADER])
    assert not verify(request["body"], "another-secret", request["headers"][SIGNATURE_HEADER])
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


def test_send_test_button(team, alice_client):
    with Receiver() as hook:
        channel = Channel.objects.create(
            team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url}
        )
        url = reverse("channel_action", args=[team.slug, channel.code])
        response = alice_client.post(url, {"action": "test"}, HTTP_HX_REQUEST="true")
        assert response.status_code == 200
        assert 'id="test-result"' in response.content.decode() and "Test sent" in response.content.decode()
        assert len(hook.requests) == 1 and hook.json()["event"] == "test"
    with Receiver([410]) as gone:
        channel.config = {**channel.config, "url": gone.url}
        channel.save()
        response = alice_client.post(url, {"action": "test"}, HTTP_HX_REQUEST="true")
        assert "Test failed: HTTP 410" in response.content.decode()
    channel.refresh_from_db()
    assert channel.enabled, "a failed test shows the error but does not disable the channel"


def test_channel_pages_are_team_scoped_and_admin_only_for_changes(
    alice_client, team, client, user_factory, team_factory
):
    from dashboard.teams.models import Membership

    bob = user_factory("bob")
    other = team_factory("Other", bob)
    theirs = Channel.objects.create(
        team=other, name="theirs", kind=ChannelKind.EMAIL, config={"to": ["b@x.io"]}
    )
    assert alice_client.get(reverse("channel_detail", args=[other.slug, theirs.code])).status_code == 404
    assert alice_client.get(reverse("channel_detail", args=[team.slug, theirs.code])).status_code == 404
    response = alice_client.post(
        reverse("channel_action", args=[team.slug, theirs.code]), {"action": "delete"}
    )
    assert response.status_code == 404 and Channel.objects.filter(pk=theirs.pk).exists()

    response = alice_client.post(
        reverse("channels", args=[team.slug]),
        {"name": "ops", "kind": "email", "target": "ops@example.com, not-an-address", "min_level": "warning"},
    )
    assert response.status_code == 200 and "Not an email address: not-an-address" in response.content.decode()
    response = alice_client.post(
        reverse("channels", args=[team.slug]),
        {"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/x", "min_level": "error"},
    )
    created = Channel.objects.get(team=team, name="ops")
    assert response.status_code == 302 and created.min_level == "error" and created.config["secret"]

    carol = user_factory("carol")
    Membership.objects.create(team=team, user=carol, role=Membership.Role.MEMBER)
    client.force_login(carol)
    assert client.get(reverse("channel_detail", args=[team.slug, created.code])).status_code == 200
    assert (
        created.config["secret"]
        not in client.get(reverse("channel_detail", args=[team.slug, created.code])).content.decode()
    )
    assert (
        client.post(reverse("channel_action", args=[team.slug, created.code]), {"action": "test"}).status_code
        == 404
    )


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_worker_delivers_once_even_when_the_task_is_sent_twice(
    postgres_and_redis, celery_worker_process, team
):
    from dashboard.alerts.tasks import deliver_notification

    with Receiver() as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        alert = open_alert(team).alert  # committed: the delivery task goes to Redis on commit
        (delivery,) = deliveries_for(alert)
        deliver_notification.delay(delivery.pk)  # a duplicate, as a broker redelivery would be
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Delivery.objects.get(pk=delivery.pk).processed is None:
            time.sleep(0.2)
        time.sleep(1.0)  # let the duplicate run too
        assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SENT
        assert len(hook.requests) == 1
        assert hook.json()["alert"]["id"] == str(alert.code)
        assert Notification.objects.filter(delivery=delivery).count() == 1
