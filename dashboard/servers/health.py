"""The servers' part of the health report: failed polls and poll locks left by dead workers."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min
from django.urls import reverse

from dashboard.servers.models import McpServer, PollOutcome, PollRun, poll_lock_stale_after
from dashboard.system.health import ErrorSummary, Source, StaleLease, Teams


def poll_errors(teams: Teams, since: datetime) -> ErrorSummary | None:
    failed = PollRun.objects.filter(server__team__in=teams, started__gte=since).exclude(
        outcome=PollOutcome.OK
    )
    totals = failed.aggregate(count=Count("pk"), since=Min("started"))
    last = failed.select_related("server", "server__team").order_by("-started", "-pk").first()
    if last is None:
        return None
    server = last.server
    return ErrorSummary(
        kind="poll",
        count=totals["count"],
        since=totals["since"],
        last_at=last.started,
        message=f"{last.get_outcome_display()}: {last.message}".strip(": "),
        where=f"{server.team.slug}/{server.name}",
        url=reverse("server_detail", args=[server.team.slug, server.code]),
    )


def stale_polls(teams: Teams, now: datetime) -> list[StaleLease]:
    servers = McpServer.objects.filter(
        team__in=teams, polling_since__lt=now - poll_lock_stale_after()
    ).select_related("team")
    return [
        StaleLease(
            kind="poll",
            label=f"{s.team.slug}/{s.name}",
            held_since=s.polling_since,
            holder=s.poll_lease,
            url=reverse("server_detail", args=[s.team.slug, s.code]),
        )
        for s in servers.order_by("polling_since")[:100]
    ]


SOURCE = Source("poll", poll_errors, stale_polls)
