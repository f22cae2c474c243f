"""Notification channels and the rows that make delivery exactly-once.

An alert change creates one `NotificationEvent` (its payload frozen at that moment) and, in the
same transaction, one `Delivery` per eligible channel. A delivery is the claim row: a worker takes
it with a conditional UPDATE, so a task that is retried or delivered twice by the broker never
sends twice. Every attempt leaves a `Notification` row with its status, error and HTTP status.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db import models
from django.utils import timezone

from dashboard.alerts.models import Alert, Level
from dashboard.crypto import EncryptedJSONField, mask
from dashboard.teams.models import Team
from dashboard.teams.validators import NameField


class ChannelKind(models.TextChoices):
    EMAIL = "email", "Email"
    SLACK = "slack", "Slack incoming webhook"
    WEBHOOK = "webhook", "Generic JSON webhook (signed)"
    APPRISE = "apprise", "Apprise URL (Discord, Teams, ntfy, Telegram, ...)"


def _mask_url_path(url: str) -> str:
    """Scheme and host of a webhook URL, its path and query masked: receivers commonly put their
    credential there (/hooks/<token>, ?key=...); userinfo is dropped altogether."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return mask(url)
    if not parts.scheme or not host:
        return mask(url)
    if ":" in host:
        host = f"[{host}]"
    rest = urlunsplit(("", "", parts.path, parts.query, parts.fragment)).lstrip("/")
    return f"{parts.scheme}://{host}{port}/{mask(rest) if rest else ''}"


class Channel(models.Model):
    """Where a team's alerts go. `config` is encrypted: webhook URLs and secrets are credentials."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="channels")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = NameField(max_length=100)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    # email: {"to": [addresses]}; slack: {"url"}; webhook: {"url", "secret"}; apprise: {"url"}.
    config = EncryptedJSONField(blank=True, default=dict)
    min_level = models.CharField(
        max_length=10,
        choices=Level.choices,
        default=Level.WARNING,
        help_text="Only alerts at this level or worse are sent.",
    )
    notify_on_resolve = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.TextField(blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=20, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.kind == ChannelKind.WEBHOOK and not (self.config or {}).get("secret"):
            self.config = {**(self.config or {}), "secret": secrets.token_hex(32)}
        super().save(*args, **kwargs)

    @property
    def target_display(self) -> str:
        """What the channel points at, with credentials masked, for pages and logs."""
        config = self.config or {}
        if self.kind == ChannelKind.EMAIL:
            return ", ".join(str(address) for address in config.get("to", []))
        url = str(config.get("url", ""))
        if self.kind == ChannelKind.SLACK:
            # The path of a Slack webhook URL is the credential.
            return url.split("/services/")[0] + "/services/…" if "/services/" in url else mask(url)
        if self.kind == ChannelKind.APPRISE:
            scheme, sep, rest = url.partition("://")
            return f"{scheme}://{mask(rest)}" if sep else mask(url)
        return _mask_url_path(url)

    def accepts(self, level: str) -> bool:
        return level == Level.ERROR or self.min_level == Level.WARNING

    def disable(self, reason: str) -> None:
        self.enabled = False
        self.disabled_reason = reason[:2000]
        self.disabled_at = timezone.now()
        Channel.objects.filter(pk=self.pk).update(
            enabled=False, disabled_reason=self.disabled_reason, disabled_at=self.disabled_at
        )

    def enable(self) -> None:
        self.enabled, self.disabled_reason, self.disabled_at = True, "", None
        Channel.objects.filter(pk=self.pk).update(enabled=True, disabled_reason="", disabled_at=None)


class EventKind(models.TextChoices):
    OPENED = "alert.opened", "Opened"
    ESCALATED = "alert.escalated", "Escalated to error"
    REOPENED = "alert.reopened", "Active again after silence"
    RESOLVED = "alert.resolved", "Resolved"
    TEST = "test", "Test"


class NotificationEvent(models.Model):
    """Something worth telling people, with the payload every channel renders from."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="notification_events")
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    alert = models.ForeignKey(Alert, models.CASCADE, null=True, blank=True, related_name="events")
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    level = models.CharField(max_length=10, choices=Level.choices)
    payload = models.JSONField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.payload.get('alert', {}).get('subject', '')}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed (permanent)"
    GAVE_UP = "gave_up", "Gave up after retries"
    SKIPPED = "skipped", "Skipped (channel disabled)"


class Delivery(models.Model):
    """One event for one channel: the claim row. `processed` stays empty until a final outcome."""

    event = models.ForeignKey(NotificationEvent, models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(Channel, models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)
    # Set while a worker holds the delivery; a stale lock (worker died mid-attempt) can be retaken.
    locked_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    processed = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [models.UniqueConstraint(fields=["event", "channel"], name="one_delivery_per_channel")]

    def __str__(self) -> str:
        return f"{self.event} -> {self.channel} ({self.status})"


class AttemptStatus(models.TextChoices):
    SENT = "sent", "Sent"
    TRANSIENT = "transient", "Failed, will retry"
    PERMANENT = "permanent", "Failed permanently"


class Notification(models.Model):
    """One delivery attempt: what happened when we tried to reach the channel."""

    delivery = models.ForeignKey(Delivery, models.CASCADE, related_name="attempts_log")
    channel = models.ForeignKey(Channel, models.CASCADE, related_name="notifications")
    attempt = models.PositiveIntegerField()
    created = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=10, choices=AttemptStatus.choices)
    error = models.TextField(blank=True)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [models.Index(fields=["channel", "-created"], name="notification_channel_recent")]

    def __str__(self) -> str:
        return f"{self.channel} #{self.attempt} {self.status}"
