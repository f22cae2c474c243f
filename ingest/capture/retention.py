"""Retention of captured bulk content and of the raw logs it came from.

Hashes and figures of every bulk argument are kept for good; the text itself (BulkContent) is
kept for `TeamCaptureSettings.content_retention_days` after the last call that carried it, then
dropped. Without the text, a later damaged copy of it can still be judged by hash (`mismatch`, or
a hash hypothesis), just no longer explained byte by byte.

The raw files of uploads and API pushes hold every text too, so they follow the same window,
counted from the end of their job (at once when the team keeps no texts); watched-folder files are
the team's own logs and are never touched.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.teams.models import Team
from ingest.capture import storage
from ingest.capture.models import BulkArgument, BulkContent, IngestJob, LineRecord, TeamCaptureSettings
from ingest.capture.uploads import upload_dir

DEFAULT_RETENTION_DAYS = TeamCaptureSettings._meta.get_field("content_retention_days").default
CHUNK = 1000
OWN_FILES = (IngestJob.Source.UPLOAD, IngestJob.Source.API)
log = logging.getLogger(__name__)


def purge_expired_content(now: datetime | None = None) -> int:
    """Delete bulk texts no call within each team's retention window still uses. Returns rows deleted."""
    now = now or timezone.now()
    retention = dict(TeamCaptureSettings.objects.values_list("team_id", "content_retention_days"))
    deleted = 0
    for team_id in Team.objects.values_list("pk", flat=True):
        cutoff = now - timedelta(days=retention.get(team_id, DEFAULT_RETENTION_DAYS))
        recent = BulkArgument.objects.filter(
            team_id=team_id, call__created__gte=cutoff, content__isnull=False
        ).values("content_id")
        expired = BulkContent.objects.filter(team_id=team_id, created__lt=cutoff).exclude(pk__in=recent)
        while True:
            ids = list(expired.values_list("pk", flat=True)[:CHUNK])
            if not ids:
                break
            # The FK is SET_NULL: arguments keep their figures and hash, only the text goes.
            deleted += BulkContent.objects.filter(pk__in=ids).delete()[0]
    return deleted


def purge_expired_uploads(now: datetime | None = None) -> int:
    """Delete the raw files of finished upload and API jobs past their team's window. Returns files deleted.

    The job keeps its counts and outcomes; its ``storage_name`` (or, for a job from before the
    shared storage, its ``path``) is emptied to record that the file is gone.
    """
    now = now or timezone.now()
    rules = {
        team_id: (keep, days)
        for team_id, keep, days in TeamCaptureSettings.objects.values_list(
            "team_id", "keep_bulk_content", "content_retention_days"
        )
    }
    deleted = 0
    for team in Team.objects.all():
        keep, days = rules.get(team.pk, (True, DEFAULT_RETENTION_DAYS))
        cutoff = now - timedelta(days=days) if keep else now
        jobs = IngestJob.objects.filter(
            team=team,
            source__in=OWN_FILES,
            status__in=(IngestJob.Status.DONE, IngestJob.Status.FAILED),
            finished__lte=cutoff,
        ).exclude(path="", storage_name="")
        for job in jobs.iterator(chunk_size=CHUNK):
            if job.storage_name:
                deleted += _delete_stored(team, job)
            else:
                deleted += _delete_local(team, job)
    return deleted


def _delete_stored(team: Team, job: IngestJob) -> int:
    if not job.storage_name.startswith(upload_dir(team) + "/"):  # only ever the team's own uploads
        log.warning("job %s: %s is not one of the team's uploads; not deleted", job.code, job.storage_name)
        return 0
    found = storage.exists(job.storage_name)
    if found:
        storage.delete(job.storage_name)
    IngestJob.objects.filter(pk=job.pk).update(storage_name="")
    return int(found)


def _delete_local(team: Team, job: IngestJob) -> int:
    """A job from before the shared storage: its file is under MEDIA_ROOT on this host."""
    root = (Path(settings.MEDIA_ROOT) / upload_dir(team)).resolve()
    path = Path(job.path).resolve()
    if not path.is_relative_to(root):  # only ever our own upload folder
        log.warning("job %s: %s is outside %s; not deleted", job.code, path, root)
        return 0
    found = path.exists()
    if found:
        path.unlink()
    IngestJob.objects.filter(pk=job.pk).update(path="")
    return int(found)


# -- the quarantine ---------------------------------------------------------------------------------

FINISHED = (IngestJob.Status.DONE, IngestJob.Status.FAILED)


def delete_quarantined(lines: QuerySet[LineRecord]) -> int:
    """Delete these quarantined lines, only of finished jobs (a running job's rows count its lines
    exactly once), and each kept long-line file no remaining line names. Returns lines deleted.

    The jobs keep their counts: "840 quarantined" stays true of the run; the lines are gone."""
    lines = lines.filter(status=LineRecord.Status.QUARANTINED, job__status__in=FINISHED)
    files = set(lines.exclude(raw_file="").values_list("raw_file", flat=True))
    deleted = 0
    while ids := list(lines.values_list("pk", flat=True)[:CHUNK]):
        deleted += LineRecord.objects.filter(pk__in=ids).delete()[0]
    # Kept files are named by their sha256: another line (of any job) may hold the same bytes.
    for name in files - set(LineRecord.objects.filter(raw_file__in=files).values_list("raw_file", flat=True)):
        if storage.exists(name):
            storage.delete(name)
    return deleted


def purge_expired_quarantine(now: datetime | None = None) -> int:
    """Quarantined lines of jobs finished more than QUARANTINE_RETENTION_DAYS ago (0 keeps them)."""
    days = int(settings.QUARANTINE_RETENTION_DAYS)
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return delete_quarantined(LineRecord.objects.filter(job__finished__lte=cutoff))
