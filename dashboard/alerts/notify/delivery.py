"""Events, fan-out to channels and exactly-once delivery, as plain functions.

Flow: `create_event` (called by dashboard.alerts.budgets inside the alert's transaction) freezes the
payload, creates one `Delivery` per eligible channel and, once that commits, sends each to the
`notify` queue (`DELIVER_TASK`, through `dashboard.system.broker`). `deliver` claims the delivery
with a conditional UPDATE, makes one attempt, records a `Notification` row and says whether and
when to retry. The Celery task (`dashboard.tasks.deliver_notification`) only turns that answer into
`self.retry(countdown=...)`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models import MEASURE_UNITS, Alert, Level, Measure, format_measure
from dashboard.alerts.notify.apprise_sender import AppriseSender
from dashboard.alerts.notify.base import Message, Sender, SendError
from dashboard.alerts.notify.email import EmailSender
from dashboard.alerts.notify.models import (
    AttemptStatus,
    Channel,
    Delivery,
    DeliveryStatus,
    EventKind,
    Notification,
    NotificationEvent,
)
from dashboard.alerts.notify.slack import SlackSender
from dashboard.alerts.notify.webhook import WebhookSender
from dashboard.origin import site_url
from dashboard.system import broker
from dashboard.teams.validators import one_line

log = logging.getLogger(__name__)

PAYLOAD_SCHEMA = "mcp-tax.alert/1"


SENDERS: dict[str, type[Sender]] = {
    cls.kind: cls for cls in (EmailSender, SlackSender, WebhookSender, AppriseSender)
}


def sender_for(kind: str, config: dict[str, Any]) -> Sender:
    if kind not in SENDERS:
        raise SendError(f"unknown channel kind {kind!r}", permanent=True)
    return SENDERS[kind](config)


def max_attempts() -> int:
    return int(settings.NOTIFY_MAX_ATTEMPTS)


def retry_base_seconds() -> float:
    return float(settings.NOTIFY_RETRY_BASE_SECONDS)


def backoff_seconds(attempts_made: int) -> float:
    """30 s, 60 s, 120 s ... capped at an hour (base configurable for tests and impatient teams)."""
    return min(3600.0, retry_base_seconds() * 2.0 ** max(0, attempts_made - 1))


def _absolute(path: str, origin: str = "") -> str:
    return site_url(origin) + path


def alert_payload(alert: Alert, kind: str) -> dict[str, Any]:
    """The documented webhook payload (docs/alerts.md, "Webhook payload"). Keys are stable; add, never rename."""
    resolved = kind == EventKind.RESOLVED
    snapshot = alert.resolved_snapshot if resolved and alert.resolved_snapshot else alert.snapshot
    return {
        "schema": PAYLOAD_SCHEMA,
        "event": kind,
        "team": {"slug": alert.team.slug, "name": alert.team.name},
        "alert": {
            "id": str(alert.code),
            "url": _absolute(reverse("alert_list", args=[alert.team.slug]), alert.origin)
            + f"?state=all#alert-{alert.code}",
            # The page that explains the subject (its tool, server, stack or agent).
            "subject_url": _absolute(alert.subject_path, alert.origin),
            "rule_key": alert.rule_key,
            "measure": alert.measure,
            "measure_label": Measure(alert.measure).label
            if alert.measure in Measure.values
            else alert.measure,
            "level": alert.level,
            "state": alert.state,
            "subject": alert.subject_label,
            "server": alert.server.name if alert.server is not None else None,
            "stack": alert.stack.name if alert.stack is not None else None,
            # For a resolved event, the value that resolved it (the breaching one is in the message).
            "value": alert.resolved_value if resolved and alert.resolved_value is not None else alert.value,
            "resolved_value": alert.resolved_value if resolved else None,
            "limit": alert.limit,
            "unit": MEASURE_UNITS.get(alert.measure, "tokens"),
            "message": alert.summary if resolved else alert.message,
            "opened_at": alert.opened_at.isoformat(),
            "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
            "snapshot": (
                {
                    "version": snapshot.server_version,
                    "sha256": snapshot.sha256,
                    "fixed_tax_tokens": snapshot.fixed_tax_tokens,
                    "tool_count": snapshot.tool_count,
                    "encoding": snapshot.encoding,
                }
                if snapshot
                else None
            ),
        },
    }


def render(payload: dict[str, Any]) -> Message:
    alert = payload.get("alert")
    if not alert:
        subject = one_line(f"[mcp-tax] Test notification for {payload['team']['name']}")
        return Message(payload, subject, subject + "\n\nThis channel is set up correctly.\n")
    verb = {
        EventKind.OPENED: "over budget",
        EventKind.ESCALATED: "escalated to error",
        EventKind.REOPENED: "still over budget (silence ended)",
        EventKind.RESOLVED: "resolved",
    }.get(payload["event"], payload["event"])
    # One line whatever the names hold: rows stored before names were validated may have a CR/LF,
    # which would make the mail library refuse the whole message (a header cannot span lines).
    subject = one_line(
        f"[mcp-tax] {alert['level'].upper()} {alert['subject']}: {alert['measure_label']} {verb}"
    )
    lines = [
        alert["message"],
        "",
        f"{'Now' if payload['event'] == EventKind.RESOLVED else 'Value'}: "
        f"{format_measure(alert['value'], alert['measure'])}  "
        f"Limit: {format_measure(alert['limit'], alert['measure'])}  Level: {alert['level']}",
        f"Rule: {alert['rule_key']}",
    ]
    if alert.get("snapshot"):
        snap = alert["snapshot"]
        lines.append(f"Snapshot: version {snap['version'] or '-'}, {snap['fixed_tax_tokens']} tokens")
    lines += ["", f"Alert: {alert['url']}"]
    if alert.get("subject_url"):
        lines.append(f"{alert['subject']}: {alert['subject_url']}")
    return Message(payload, subject, "\n".join(lines) + "\n")


DELIVER_TASK = "dashboard.tasks.deliver_notification"


def _send_after_commit(delivery_ids: list[int]) -> None:
    # After commit, so the worker never looks for a delivery this transaction has not written yet.
    transaction.on_commit(lambda: _send(delivery_ids))


def _send(delivery_ids: list[int]) -> None:
    """Hand each delivery to the `notify` queue. A broker outage is recorded and must not break
    the poll: the sweep sends it later."""
    for pk in delivery_ids:
        try:
            broker.send_task(DELIVER_TASK, pk, where=f"sending delivery {pk}", after_commit=False)
        except Exception:
            log.exception("could not enqueue delivery %s", pk)


def create_event(alert: Alert, kind: str) -> NotificationEvent:
    """Freeze the payload and fan it out to the team's enabled channels that want this level."""
    payload = alert_payload(alert, kind)
    event = NotificationEvent.objects.create(
        team=alert.team, alert=alert, kind=kind, level=alert.level, payload=payload
    )
    channels = Channel.objects.filter(team=alert.team, enabled=True)
    wanted = [
        c for c in channels if c.accepts(alert.level) and (kind != EventKind.RESOLVED or c.notify_on_resolve)
    ]
    deliveries = Delivery.objects.bulk_create(Delivery(event=event, channel=c) for c in wanted)
    # bulk_create returns primary keys on PostgreSQL and SQLite alike.
    _send_after_commit([d.pk for d in deliveries])
    return event


def create_test_delivery(channel: Channel) -> Delivery:
    payload = {
        "schema": PAYLOAD_SCHEMA,
        "event": EventKind.TEST.value,
        "team": {"slug": channel.team.slug, "name": channel.team.name},
        "alert": None,
    }
    event = NotificationEvent.objects.create(
        team=channel.team, kind=EventKind.TEST, level=Level.WARNING, payload=payload
    )
    return Delivery.objects.create(event=event, channel=channel)


@dataclass
class DeliveryOutcome:
    status: str  # sent | retry | failed | gave_up | skipped | not_claimed
    retry_in: float | None = None
    error: str = ""
    http_status: int | None = None


def lock_stale_after() -> timedelta:
    """A delivery lock older than this was left by a worker that died mid-attempt: a live attempt
    ends within its send timeout (HTTP and SMTP alike), counted twice, plus LEASE_GRACE_SECONDS."""
    return timedelta(seconds=settings.NOTIFY_HTTP_TIMEOUT * 2 + settings.LEASE_GRACE_SECONDS)


def unlocked(now: datetime) -> Q:
    """Nobody holds the delivery: no lock, or a lock left by a worker that died mid-attempt.

    The one staleness rule, shared by the claim and the sweep.
    """
    return Q(locked_at__isnull=True) | Q(locked_at__lt=now - lock_stale_after())


def claim(delivery_id: int, now: datetime | None = None) -> bool:
    """Take the delivery for one attempt. False when it is finished or another worker holds it."""
    now = now or timezone.now()
    free = unlocked(now)
    return (
        Delivery.objects.filter(free, pk=delivery_id, processed=None).update(
            locked_at=now, attempts=F("attempts") + 1
        )
        == 1
    )


def _finish(delivery: Delivery, status: str, now: datetime) -> None:
    Delivery.objects.filter(pk=delivery.pk).update(status=status, processed=now, locked_at=None)


def deliver(delivery_id: int, *, allow_retry: bool = True) -> DeliveryOutcome:
    """One attempt at one delivery. Safe to call any number of times: it never sends twice."""
    if not claim(delivery_id):
        return DeliveryOutcome("not_claimed")
    delivery = Delivery.objects.select_related("event", "channel", "channel__team").get(pk=delivery_id)
    channel = delivery.channel
    now = timezone.now()
    if not channel.enabled and delivery.event.kind != EventKind.TEST:
        _finish(delivery, DeliveryStatus.SKIPPED, now)
        return DeliveryOutcome("skipped", error=channel.disabled_reason)

    started = time.monotonic()
    attempt = delivery.attempts
    try:
        message = replace(render(delivery.event.payload), delivery_id=str(delivery.pk))
        result = sender_for(channel.kind, channel.config or {}).send(message)
    except SendError as exc:
        error, permanent, http_status = exc.message, exc.permanent, exc.http_status
    except Exception as exc:  # a sender bug must leave a trace, not a stuck delivery
        log.exception("sender %s crashed", channel.kind)
        error, permanent, http_status = f"{type(exc).__name__}: {exc}", False, None
    else:
        error, permanent, http_status = "", False, result.http_status
    duration_ms = int((time.monotonic() - started) * 1000)
    done = timezone.now()

    if not error:
        status = AttemptStatus.SENT
    elif permanent:
        status = AttemptStatus.PERMANENT
    else:
        status = AttemptStatus.TRANSIENT
    Notification.objects.create(
        delivery=delivery,
        channel=channel,
        attempt=attempt,
        status=status,
        error=error[:5000],
        http_status=http_status,
        duration_ms=duration_ms,
    )
    Channel.objects.filter(pk=channel.pk).update(last_attempt_at=done, last_status=status)

    if status == AttemptStatus.SENT:
        _finish(delivery, DeliveryStatus.SENT, done)
        return DeliveryOutcome("sent", http_status=http_status)
    if status == AttemptStatus.PERMANENT:
        _finish(delivery, DeliveryStatus.FAILED, done)
        # A test is someone checking the setup: show the error, but leave the channel alone.
        if delivery.event.kind != EventKind.TEST:
            channel.disable(f"Disabled {done:%Y-%m-%d %H:%M} UTC after a permanent failure: {error}")
        return DeliveryOutcome("failed", error=error, http_status=http_status)
    if not allow_retry or attempt >= max_attempts():
        _finish(delivery, DeliveryStatus.GAVE_UP, done)
        return DeliveryOutcome("gave_up", error=error, http_status=http_status)
    delay = backoff_seconds(attempt)
    Delivery.objects.filter(pk=delivery.pk).update(
        locked_at=None, next_attempt_at=done + timedelta(seconds=delay)
    )
    return DeliveryOutcome("retry", retry_in=delay, error=error, http_status=http_status)


def send_test(channel: Channel) -> Notification:
    """The "send test" button: one attempt, now, through the same path as real alerts."""
    delivery = create_test_delivery(channel)
    deliver(delivery.pk, allow_retry=False)
    # A fresh test delivery is claimed by this call alone, so exactly one attempt exists.
    return delivery.attempts_log.order_by("-pk")[0]


def sweep_pending(now: datetime | None = None, *, enqueue: broker.Enqueue) -> list[int]:
    """Hand deliveries whose retry is overdue (a lost broker message, a failed enqueue, a worker that
    died mid-attempt and left its lock) to `enqueue` (the sweep task's sends the delivery task).

    Running one early is harmless: the claim keeps it to one attempt at a time and to one success.
    """
    now = now or timezone.now()
    overdue = Delivery.objects.filter(
        unlocked(now),
        processed=None,
        next_attempt_at__lt=now - timedelta(seconds=settings.LEASE_GRACE_SECONDS),
    ).values_list("pk", flat=True)[:500]
    ids = list(overdue)
    for pk in ids:
        enqueue(pk)
    return ids
