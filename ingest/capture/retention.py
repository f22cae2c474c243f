"""Retention of captured bulk content.

Hashes and figures of every bulk argument are kept for good; the text itself (BulkContent) is
kept for `TeamCaptureSettings.content_retention_days` after the last call that carried it, then
dropped. Without the text, a later damaged copy of it can still be judged by hash (`mismatch`, or
a hash hypothesis), just no longer explained byte by byte.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from dashboard.teams.models import Team
from ingest.capture.models import BulkArgument, BulkContent, TeamCaptureSettings

DEFAULT_RETENTION_DAYS = TeamCaptureSettings._meta.get_field("content_retention_days").default
CHUNK = 1000


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
