"""The alerts' part of the health report: failed delivery attempts and deliveries left locked."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min
from django.urls import reverse

from dashboard.alerts.notify.delivery import lock_stale_after
from dashboard.alerts.notify.models import AttemptStatus, Delivery, Notification
from dashboard.system.health import ErrorSummary, Source, StaleLease, Teams


def delivery_errors(teams: Teams, since: datetime) -> ErrorSummary | None:
    failed = Notification.objects.filter(channel__team__in=teams, created__gte=since).exclude(
        status=AttemptStatus.SENT
    )
    totals = failed.aggregate(count=Count("pk"), since=Min("created"))
    last = failed.select_related("channel", "channel__team").order_by("-created", "-pk").first()
    if last is None:
        return None
    channel = last.channel
    status = f"HTTP {last.http_status}: " if last.http_status else ""
    return ErrorSummary(
        kind="delivery",
        count=totals["count"],
        since=totals["since"],
        last_at=last.created,
        message=f"{status}{last.error}",
        where=f"{channel.team.slug}/{channel.name}",
        url=reverse("channel_detail", args=[channel.team.slug, channel.code]),
    )


def stale_deliveries(teams: Teams, now: datetime) -> list[StaleLease]:
    locked = Delivery.objects.filter(
        channel__team__in=teams, processed=None, locked_at__lt=now - lock_stale_after()
    ).select_related("channel", "channel__team")
    return [
        StaleLease(
            kind="delivery",
            label=f"{d.channel.team.slug}/{d.channel.name} delivery {d.pk}",
            held_since=d.locked_at,
            url=reverse("channel_detail", args=[d.channel.team.slug, d.channel.code]),
        )
        for d in locked.order_by("locked_at")[:100]
    ]


SOURCE = Source("delivery", delivery_errors, stale_deliveries)
