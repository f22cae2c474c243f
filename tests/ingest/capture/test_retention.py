"""Bulk content retention: texts go after the team's window, hashes and figures stay."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, BulkContent, TeamCaptureSettings, ToolCall
from ingest.capture.retention import purge_expired_content
from tests.ingest.capture.logs import EnvelopeLog, text_of

pytestmark = pytest.mark.django_db


def test_texts_older_than_the_window_are_dropped_unless_a_recent_call_uses_them(team, tmp_path):
    TeamCaptureSettings.objects.create(team=team, content_retention_days=7)
    log = EnvelopeLog().initialize()
    old_text, shared_text = text_of(3000, 1), text_of(3000, 2)
    log.call("write", {"content": old_text}).call("write", {"content": shared_text})
    pipeline.ingest_path(team, log.write(tmp_path / "old.jsonl"))
    ten_days_ago = timezone.now() - timedelta(days=10)
    ToolCall.objects.update(created=ten_days_ago)
    BulkContent.objects.update(created=ten_days_ago)
    # The shared text is pasted again today.
    again = EnvelopeLog(session="s2").initialize()
    again.call("write", {"content": shared_text})
    pipeline.ingest_path(team, again.write(tmp_path / "new.jsonl"))
    figures_before = sorted(BulkArgument.objects.values_list("sha256", "bytes", "lines"))

    assert purge_expired_content() == 1
    assert list(BulkContent.objects.values_list("text", flat=True)) == [shared_text]
    old_arg = BulkArgument.objects.get(content__isnull=True)
    assert old_arg.bytes == len(old_text.encode()) and old_arg.sha256
    assert sorted(BulkArgument.objects.values_list("sha256", "bytes", "lines")) == figures_before
    assert purge_expired_content() == 0  # idempotent


def test_the_default_window_applies_to_teams_without_settings(team, tmp_path):
    log = EnvelopeLog().initialize()
    log.call("write", {"content": text_of(3000, 3)})
    pipeline.ingest_path(team, log.write(tmp_path / "a.jsonl"))
    assert purge_expired_content() == 0
    long_ago = timezone.now() - timedelta(days=31)
    ToolCall.objects.update(created=long_ago)
    BulkContent.objects.update(created=long_ago)
    assert purge_expired_content() == 1


def _finished_job(team, source, path, days_ago, *, stored=""):
    from ingest.capture.models import IngestJob

    return IngestJob.objects.create(
        team=team,
        source=source,
        path=str(path),
        storage_name=stored,
        status=IngestJob.Status.DONE,
        finished=timezone.now() - timedelta(days=days_ago),
    )


def test_raw_upload_files_are_deleted_once_the_team_window_has_passed(team, settings, tmp_path):
    from ingest.capture.models import IngestJob
    from ingest.capture.retention import purge_expired_uploads
    from ingest.capture.storage import exists
    from ingest.capture.uploads import store_upload, upload_dir

    TeamCaptureSettings.objects.create(team=team, content_retention_days=7)
    old_upload = store_upload(team, [b"{}\n"], "old.jsonl")
    old_push = store_upload(team, [b"{}\n"], "api.jsonl")
    recent = store_upload(team, [b"{}\n"], "recent.jsonl")
    watched_log = tmp_path / "watched.jsonl"  # a team's own log: never ours to delete
    watched_log.write_bytes(b"{}\n")
    # A job from before the shared storage: an absolute path in the team's local upload folder.
    legacy = settings.MEDIA_ROOT / upload_dir(team) / "legacy.jsonl"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(b"{}\n")
    jobs = [
        _finished_job(team, IngestJob.Source.UPLOAD, "", 10, stored=old_upload),
        _finished_job(team, IngestJob.Source.API, "", 8, stored=old_push),
        _finished_job(team, IngestJob.Source.UPLOAD, "", 2, stored=recent),
        _finished_job(team, IngestJob.Source.WATCH, watched_log, 30),
        _finished_job(team, IngestJob.Source.UPLOAD, legacy, 9),
    ]
    assert purge_expired_uploads() == 3
    assert not exists(old_upload) and not exists(old_push) and not legacy.exists()
    assert exists(recent) and watched_log.exists()
    kept = [
        (j.storage_name, j.path) for j in IngestJob.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk")
    ]
    assert kept == [("", ""), ("", ""), (recent, ""), ("", str(watched_log)), ("", "")]
    assert purge_expired_uploads() == 0  # idempotent


def test_a_team_that_keeps_no_texts_keeps_no_raw_upload_after_its_job(team, settings, tmp_path):
    from ingest.capture.models import IngestJob
    from ingest.capture.storage import exists
    from ingest.capture.uploads import store_upload
    from ingest.tasks import purge_expired_content as purge_task

    TeamCaptureSettings.objects.create(team=team, keep_bulk_content=False)
    done = store_upload(team, [b"{}\n"], "a.jsonl")
    _finished_job(team, IngestJob.Source.UPLOAD, "", 0, stored=done)
    running = store_upload(team, [b"{}\n"], "b.jsonl")
    IngestJob.objects.create(team=team, source=IngestJob.Source.UPLOAD, storage_name=running)
    purge_task()  # the hourly beat task purges files too
    assert not exists(done) and exists(running)
