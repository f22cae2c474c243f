"""Watched folders (ingest.capture.watch): tail by offset, rotation, restart, truncation, allowed
roots, admin-only."""

from __future__ import annotations

import os

import pytest
from django.urls import reverse

from dashboard.teams.models import Membership
from ingest.capture import pipeline
from ingest.capture.models import (
    IngestJob,
    ToolCall,
    WatchedFile,
    WatchedFolder,
)
from ingest.capture.watch import WatchPathError, scan_all, validate_watch_path
from tests.conftest import make_envelope_log
from tests.ingest.capture.logs import (
    content_sha,
)


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def test_tail_reads_only_complete_lines_and_continues_from_its_offset(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    lines = lines_of(make_envelope_log(3))  # 8 lines
    with open(log, "wb") as f:
        f.writelines(lines[:4])  # initialize + the first call
        f.write(lines[4][:50])  # half of the second call's request
    (scan,) = scan_all()
    assert (scan.files_new, scan.files_read, scan.errors) == (1, 1, [])
    wf = WatchedFile.objects.get()
    assert wf.offset == sum(map(len, lines[:4])) and wf.line_no == 4
    assert (wf.device, wf.inode) == (os.stat(log).st_dev, os.stat(log).st_ino)
    job = wf.job
    assert job.source == "watch" and job.status == "running" and job.calls_stored == 1

    scan_all()  # nothing new: nothing changes
    assert WatchedFile.objects.get().offset == wf.offset

    with open(log, "ab") as f:
        f.write(lines[4][50:])
        f.writelines(lines[5:])
    scan_all()
    wf.refresh_from_db()
    job.refresh_from_db()
    assert wf.offset == os.path.getsize(log) and wf.line_no == 8
    assert job.calls_stored == 3 and job.lines_read == 8 and job.reconciles
    hashes = set(ToolCall.objects.filter(team=team).values_list("bulk_arguments__sha256", flat=True))
    assert hashes == {content_sha(i) for i in (1, 2, 3)}


def test_a_request_waits_for_its_response_across_scans(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    lines = lines_of(make_envelope_log(1))
    with open(log, "wb") as f:
        f.writelines(lines[:3])  # the request, not yet its response
    scan_all()
    assert not ToolCall.objects.exists()  # an open call is not stored half-done
    with open(log, "ab") as f:
        f.write(lines[3])
    scan_all()
    call = ToolCall.objects.get()
    assert call.unanswered is False and call.is_error is False


def test_rotation_finishes_the_old_file_and_starts_the_new_one(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    old = lines_of(make_envelope_log(3, session="old"))
    with open(log, "wb") as f:
        f.writelines(old[:4])
    scan_all()
    first = WatchedFile.objects.get()

    # logrotate: rename, the writer finishes its last lines into the renamed file, a new file appears.
    os.rename(log, log + ".1")
    with open(log + ".1", "ab") as f:
        f.writelines(old[4:7])  # the third call's response never comes
    new = lines_of(make_envelope_log(2, session="new"))
    with open(log, "wb") as f:
        f.writelines(new)

    (scan,) = scan_all()
    assert scan.errors == [] and scan.files_new == 1
    first.refresh_from_db()
    assert first.path == log + ".1" and first.offset == sum(map(len, old[:7]))
    second = WatchedFile.objects.exclude(pk=first.pk).get()
    assert (
        second.path == log and second.inode == os.stat(log).st_ino and second.offset == os.path.getsize(log)
    )
    assert first.job_id != second.job_id
    assert first.job.status == "running"  # maybe the writer is not done with it yet

    (scan,) = scan_all()  # quiet since the last scan: finished
    assert scan.files_finished == 1
    first.refresh_from_db()
    old_job = first.job
    assert old_job.status == "done" and old_job.reconciles and old_job.lines_read == 7
    old_calls = ToolCall.objects.filter(job=old_job)
    assert old_calls.count() == 3 and old_calls.filter(unanswered=True).count() == 1
    assert ToolCall.objects.filter(job=second.job).count() == 2

    scan_all()  # a finished file is left alone
    assert IngestJob.objects.get(pk=old_job.pk).finished == old_job.finished


def test_restart_continues_from_the_database_with_the_same_result_as_one_pass(
    watched, team, team_factory, alice, tmp_path
):
    data = make_envelope_log(6, bad_lines=1)
    lines = lines_of(data)
    log = os.path.join(watched.path, "proxy.jsonl")
    with open(log, "wb") as f:
        f.writelines(lines[:5])
    scan_all()
    # A "restart": nothing survives but the database; a new scan picks up the rows.
    for start, cut in ((5, 9), (9, len(lines))):
        with open(log, "ab") as f:
            f.writelines(lines[start:cut])
        scan_all()
    wf = WatchedFile.objects.get()
    assert wf.offset == len(data) and wf.line_no == len(lines)
    tailed = wf.job

    reference_team = team_factory("Reference", alice)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(data)
    once = pipeline.ingest_path(reference_team, whole)
    counts = ("lines_read", "stored", "duplicate", "ignored", "quarantined", "calls_stored")
    assert [getattr(tailed, c) for c in counts] == [getattr(once, c) for c in counts]
    assert sorted(ToolCall.objects.filter(team=team).values_list("dedupe_key", flat=True)) == sorted(
        ToolCall.objects.filter(team=reference_team).values_list("dedupe_key", flat=True)
    )


def test_truncated_file_starts_over_without_storing_twice(watched, team):
    log = os.path.join(watched.path, "proxy.jsonl")
    with open(log, "wb") as f:
        f.write(make_envelope_log(3))
    scan_all()
    with open(log, "wb") as f:  # copytruncate-style rotation: same inode, back to zero
        f.write(make_envelope_log(1))
    scan_all()
    wf = WatchedFile.objects.get()
    assert wf.offset == os.path.getsize(log)
    assert ToolCall.objects.filter(team=team).count() == 3  # the re-seen first call is a duplicate
    assert wf.job.duplicate == 2


def test_only_matching_files_are_tailed_and_a_missing_folder_is_reported(watched, team):
    with open(os.path.join(watched.path, "notes.txt"), "wb") as f:
        f.write(make_envelope_log(1))
    os.mkdir(os.path.join(watched.path, "sub.jsonl"))
    (scan,) = scan_all()
    assert scan.files_seen == 0 and not WatchedFile.objects.exists()
    os.rmdir(os.path.join(watched.path, "sub.jsonl"))
    os.remove(os.path.join(watched.path, "notes.txt"))
    os.rmdir(watched.path)
    (scan,) = scan_all()
    watched.refresh_from_db()
    assert "does not exist" in watched.last_error and watched.last_scan_at is not None


def test_watch_roots_restrict_where_folders_may_be(settings, team, tmp_path):
    allowed = tmp_path / "allowed"
    (allowed / "proxy").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    settings.INGEST_WATCH_DIRS = [str(allowed)]
    assert validate_watch_path(str(allowed / "proxy")) == (allowed / "proxy").resolve()
    for bad, why in [
        (str(tmp_path / "elsewhere"), "outside the allowed folders"),
        (str(allowed / "proxy" / ".." / ".." / "elsewhere"), "outside the allowed folders"),
        ("relative/path", "not an absolute path"),
        (str(allowed / "missing"), "does not exist"),
        (__file__, "not a directory"),
    ]:
        with pytest.raises(WatchPathError, match=why):
            validate_watch_path(bad)
    # A folder stored before the roots were narrowed is refused at the scan too.
    (tmp_path / "elsewhere" / "a.jsonl").write_bytes(make_envelope_log(1))
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path / "elsewhere"), pattern="*.jsonl")
    (scan,) = scan_all()
    folder.refresh_from_db()
    assert scan.files_seen == 0 and not WatchedFile.objects.exists()
    assert "outside the allowed folders" in folder.last_error


def test_a_symlink_out_of_the_allowed_roots_is_not_read(settings, team, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_bytes(make_envelope_log(1))
    (allowed / "link.jsonl").symlink_to(secret)
    settings.INGEST_WATCH_DIRS = [str(allowed)]
    WatchedFolder.objects.create(team=team, path=str(allowed), pattern="*.jsonl")
    scan_all()
    assert not WatchedFile.objects.exists() and not ToolCall.objects.exists()


def test_only_admins_add_watched_folders(client, team, user_factory, tmp_path, settings):
    member = user_factory("mo")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    client.force_login(member)
    url = reverse("ingest_watch", args=[team.slug])
    page = client.get(url)
    assert page.status_code == 200 and b"Only team admins can add" in page.content
    assert (
        client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"}).status_code == 404
    )
    assert not WatchedFolder.objects.exists()

    admin = team.memberships.get(role=Membership.Role.OWNER).user
    client.force_login(admin)
    settings.INGEST_WATCH_DIRS = [str(tmp_path / "only-here")]
    refused = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"})
    assert refused.status_code == 400 and b"outside the allowed folders" in refused.content
    settings.INGEST_WATCH_DIRS = [str(tmp_path)]
    ok = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "envelope"})
    assert ok.status_code == 302
    folder = WatchedFolder.objects.get()
    assert (folder.team, folder.path, folder.format) == (team, str(tmp_path.resolve()), "envelope")
    again = client.post(url, {"path": str(tmp_path), "pattern": "*.jsonl", "format": "auto"})
    assert again.status_code == 400 and b"already watched" in again.content
