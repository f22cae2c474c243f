"""Read-side queries of the capture pages (every one scoped to a team)."""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import Count, Prefetch, Q, QuerySet
from django.db.models.functions import Substr

from dashboard.teams.models import Team
from ingest.capture.models import IngestJob, LineRecord, ToolCall, WatchedFile, WatchedFolder

# A quarantined line can be megabytes: lists show this much of it, the download every byte.
RAW_PREVIEW_CHARS = 200

JOB_SORTS = {
    "created": "created",
    "-created": "-created",
    "file": "filename",
    "-file": "-filename",
    "lines": "lines_read",
    "-lines": "-lines_read",
    "quarantined": "quarantined",
    "-quarantined": "-quarantined",
    "status": "status",
    "-status": "-status",
}
DEFAULT_JOB_SORT = "-created"
# A retrying job is still in progress: its page follows it until the retry ends.
ACTIVE = (IngestJob.Status.QUEUED, IngestJob.Status.RUNNING, IngestJob.Status.RETRYING)


def is_in_progress(job: IngestJob) -> bool:
    """Whether a page should keep polling this job (a watched file's job stays open while tailed)."""
    return job.status in ACTIVE and job.source != IngestJob.Source.WATCH


def jobs(team: Team, sort: str) -> QuerySet[IngestJob]:
    """The team's jobs in the order ``sort`` names (a key of JOB_SORTS)."""
    return (
        IngestJob.objects.filter(team=team, parent=None)  # a large file's ranges are parts of its job
        .select_related("created_by")
        .order_by(JOB_SORTS.get(sort, JOB_SORTS[DEFAULT_JOB_SORT]), "-pk")
    )


def quarantined_lines(team: Team) -> QuerySet[LineRecord]:
    return LineRecord.objects.filter(team=team, status=LineRecord.Status.QUARANTINED)


def folders_with_file_counts(team: Team) -> QuerySet[WatchedFolder]:
    return WatchedFolder.objects.filter(team=team).annotate(file_count=Count("files"))


def folders_with_files(team: Team) -> QuerySet[WatchedFolder]:
    files = WatchedFile.objects.select_related("job").order_by("path", "pk")
    return WatchedFolder.objects.filter(team=team).prefetch_related(Prefetch("files", queryset=files))


def job_calls(job: IngestJob) -> QuerySet[ToolCall]:
    """The job's calls in time order, with only the columns the job page lists."""
    return (
        ToolCall.objects.filter(team=job.team, job=job)
        .select_related("agent", "server")
        .order_by("request_ts", "pk")
        .only(
            "pk",
            "tool",
            "server_label",
            "request_ts",
            "argument_bytes",
            "bulk_count",
            "is_error",
            "unanswered",
            "jsonrpc_error",
            "agent__family",
            "agent__version",
            "agent__name",
            "server__code",
            "server__name",
        )
    )


def _with_preview(lines: QuerySet[LineRecord]) -> QuerySet[LineRecord]:
    return lines.defer("raw", "raw_data").annotate(preview=Substr("raw", 1, RAW_PREVIEW_CHARS))


def job_quarantined_lines(job: IngestJob, limit: int = 20) -> QuerySet[LineRecord]:
    return _with_preview(LineRecord.objects.filter(job=job, status=LineRecord.Status.QUARANTINED)).order_by(
        "line_no"
    )[:limit]


def watched_file_of(job: IngestJob) -> WatchedFile | None:
    return WatchedFile.objects.filter(job=job, folder__team=job.team).select_related("folder").first()


def quarantine_reasons(team: Team) -> list[Mapping[str, object]]:
    """``[{"reason": ..., "n": ...}]``, the most frequent first."""
    return list(quarantined_lines(team).values("reason").annotate(n=Count("pk")).order_by("-n", "reason"))


def quarantine_listing(team: Team, *, reason: str, job: IngestJob | None) -> QuerySet[LineRecord]:
    """Quarantined lines with a preview, newest job first, optionally of one reason or one job."""
    lines = quarantined_lines(team)
    if reason:
        lines = lines.filter(reason=reason)
    if job is not None:
        lines = lines.filter(job=job)
    return _with_preview(lines.select_related("job")).order_by("-job__created", "job_id", "line_no")


def jobs_with_quarantine(team: Team, selected: IngestJob | None) -> QuerySet[IngestJob]:
    """Jobs to offer in the quarantine filter: those with quarantined lines, and the selected one."""
    return (
        IngestJob.objects.filter(team=team, parent=None)
        .filter(Q(quarantined__gt=0) | Q(pk=selected.pk if selected else None))
        .only("code", "filename", "created", "quarantined")
        .order_by("-created")[:200]
    )
