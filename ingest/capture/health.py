"""Capture's part of the health report: failed ingest jobs and jobs whose lease expired."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min
from django.urls import reverse

from dashboard.system.health import ErrorSummary, Source, StaleLease, Teams
from ingest.capture.models import IngestJob
from ingest.capture.pipeline import stalled_jobs


def ingest_errors(teams: Teams, since: datetime) -> ErrorSummary | None:
    failed = IngestJob.objects.filter(
        team__in=teams, parent=None, status=IngestJob.Status.FAILED, finished__gte=since
    )
    totals = failed.aggregate(count=Count("pk"), since=Min("finished"))
    last = failed.select_related("team").order_by("-finished", "-pk").first()
    if last is None or last.finished is None:
        return None
    return ErrorSummary(
        kind="ingest",
        count=totals["count"],
        since=totals["since"],
        last_at=last.finished,
        message=last.error,
        where=f"{last.team.slug}/{last.filename}",
        url=reverse("ingest_job", args=[last.team.slug, last.code]),
    )


def stale_jobs(teams: Teams, now: datetime) -> list[StaleLease]:
    jobs = IngestJob.objects.filter(pk__in=stalled_jobs(now), team__in=teams).select_related("team")
    return [
        StaleLease(
            kind="ingest",
            label=f"{job.team.slug}/{job.filename} ({job.status})",
            held_since=job.heartbeat_at or job.created,
            holder=job.worker,
            url=reverse("ingest_job", args=[job.team.slug, job.code]),
        )
        for job in jobs.order_by("created")
    ]


SOURCE = Source("ingest", ingest_errors, stale_jobs)
