"""Where a watched folder may read and which file it is reading (ingest.capture.watchguard): off
without roots, never the dashboard's own data, real paths checked at every open, and a reused
inode never taken for the followed log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse

from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall, WatchedFile, WatchedFolder
from ingest.capture.uploads import store_upload
from ingest.capture.watch import scan_all
from ingest.capture.watchguard import WatchRefused
from tests.conftest import make_envelope_log
from tests.helpers import sha

# Not a log: if any of it is ever read, it shows up as quarantined lines.
SECRET = b'{"password": "hunter2 is not a log line"}\n' * 300


def reuse_inode(directory: Path, followed: WatchedFile, name: str, data: bytes) -> Path:
    """Create ``name`` under the (device, inode) the deleted ``followed`` file had: what the
    scanner meets when the filesystem hands a freed inode out again.

    ext4 hands the lowest free inode out again at once, so the first try is the usual case. tmpfs
    (a CI runner's /tmp) numbers inodes from a counter and never does: there the followed row is
    moved onto the new file's (device, inode), which is the same condition seen from the scanner,
    the only place the reuse is observed."""
    for attempt in range(20):
        path = directory / name
        path.write_bytes(data)
        if path.stat().st_ino == followed.inode:
            return path
        path.rename(directory / f".held-{attempt}")  # hold this inode so the next try gets another
    path = directory / name
    path.write_bytes(data)
    stat = path.stat()
    WatchedFile.objects.filter(pk=followed.pk).update(device=stat.st_dev, inode=stat.st_ino)
    followed.device, followed.inode = stat.st_dev, stat.st_ino
    return path


def read_secret() -> bool:
    return LineRecord.objects.filter(raw__contains="hunter2").exists()


def test_off_without_roots_the_page_says_so_etc_is_refused_and_the_scan_reads_nothing(
    settings, alice_client, team, tmp_path
):
    settings.INGEST_WATCH_DIRS = []
    url = reverse("ingest_watch", args=[team.slug])
    page = alice_client.get(url).content.decode()
    assert "Watched folders are off" in page and "INGEST_WATCH_DIRS" in page
    assert 'id="watch-form"' not in page
    refused = alice_client.post(url, {"path": "/etc", "pattern": "*", "format": "auto"})
    assert refused.status_code == 400 and b"Watched folders are off" in refused.content
    assert not WatchedFolder.objects.exists()

    # A folder followed while the feature was on, and /etc stored by hand: nothing is read.
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "proxy.jsonl"
    log.write_bytes(make_envelope_log(1))
    folder = WatchedFolder.objects.create(team=team, path=str(logs), pattern="*.jsonl")
    settings.INGEST_WATCH_DIRS = [str(tmp_path)]
    scan_all()
    followed = WatchedFile.objects.get()
    with open(log, "ab") as f:
        f.write(make_envelope_log(2, session="later"))
    settings.INGEST_WATCH_DIRS = []
    etc = WatchedFolder.objects.create(team=team, path="/etc", pattern="*")
    assert [scan.files_seen for scan in scan_all()] == [0, 0]
    assert list(WatchedFile.objects.values_list("pk", "offset")) == [(followed.pk, followed.offset)]
    for stored in (folder, etc):
        stored.refresh_from_db()
        assert "Watched folders are off" in stored.last_error

    # Turned on again, the folder carries on from its offset: nothing was lost.
    settings.INGEST_WATCH_DIRS = [str(tmp_path)]
    scan_all(folder.pk)
    followed.refresh_from_db()
    assert followed.offset == log.stat().st_size and ToolCall.objects.filter(team=team).count() == 3


def test_upload_folders_and_the_dashboards_data_are_never_watched_even_under_a_root(
    settings, alice_client, team, team_factory, user_factory, tmp_path
):
    settings.INGEST_WATCH_DIRS = [str(tmp_path)]  # MEDIA_ROOT is tmp_path/media, under the root
    settings.VAR_DIR = tmp_path / "var"
    # Uploads on this host's disk (the local ingest storage, as in the embedded run).
    settings.STORAGES = {
        **settings.STORAGES,
        "ingest": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_bytes(SECRET)
    other = team_factory("Other", user_factory("bob"))
    mine = settings.MEDIA_ROOT / store_upload(team, [make_envelope_log(1, session="mine")], "mine.jsonl")
    theirs = settings.MEDIA_ROOT / store_upload(other, [SECRET], "theirs.jsonl")
    mine_dir, their_dir = mine.parent, theirs.parent
    url = reverse("ingest_watch", args=[team.slug])
    for target in (mine_dir, their_dir, settings.MEDIA_ROOT, tmp_path / "var"):
        refused = alice_client.post(url, {"path": str(target), "pattern": "*", "format": "auto"})
        assert refused.status_code == 400 and b"never watched" in refused.content, target
    assert not WatchedFolder.objects.exists()

    # Stored anyway, or reached through links from an allowed folder: not read.
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "theirs.jsonl").symlink_to(theirs)
    (logs / "mine.jsonl").symlink_to(mine)
    (logs / "key.jsonl").symlink_to(tmp_path / "var" / "secret_key")
    for path in (their_dir, mine_dir, logs):
        WatchedFolder.objects.create(team=team, path=str(path), pattern="*")
    scan_all()
    assert not WatchedFile.objects.exists() and not read_secret()
    assert not ToolCall.objects.filter(team=team).exists()
    assert "never watched" in WatchedFolder.objects.get(path=str(their_dir)).last_error


def test_a_link_swapped_to_point_outside_the_roots_is_refused_when_the_file_is_opened(
    settings, team, tmp_path
):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "logs").mkdir(parents=True)
    (root / "real").mkdir()
    outside.mkdir()
    settings.INGEST_WATCH_DIRS = [str(root)]
    target = root / "real" / "proxy.jsonl"
    target.write_bytes(make_envelope_log(1))
    link = root / "logs" / "proxy.jsonl"
    link.symlink_to(target)
    WatchedFolder.objects.create(team=team, path=str(root / "logs"), pattern="*.jsonl")
    scan_all()
    followed = WatchedFile.objects.get()
    assert followed.job.calls_stored == 1  # a link that stays inside the roots is followed

    # After the listing, the file leaves the roots (same inode) and the link follows it.
    moved = outside / "proxy.jsonl"
    os.rename(target, moved)
    with open(moved, "ab") as f:
        f.write(SECRET)
    link.unlink()
    link.symlink_to(moved)
    with pytest.raises(WatchRefused, match="outside the allowed folders"):
        pipeline.ingest_watched_file(WatchedFile.objects.get())
    scan_all()
    assert not read_secret() and WatchedFile.objects.get().offset == followed.offset


def test_a_deleted_logs_inode_reused_by_an_unrelated_file_is_never_read(watched, team):
    folder = Path(watched.path)
    log = folder / "proxy.jsonl"
    log.write_bytes(make_envelope_log(2))
    scan_all()
    followed = WatchedFile.objects.get()
    log.unlink()
    reuse_inode(folder, followed, "notes.txt", SECRET)  # larger than the old offset
    (scan,) = scan_all()
    assert not read_secret()
    job = IngestJob.objects.get(pk=followed.job_id)
    assert job.status == "done" and job.lines_read == 6
    assert not WatchedFile.objects.exists()  # the inode is not followed any more
    watched.refresh_from_db()
    assert "notes.txt" in watched.last_error
    scan_all()
    assert not read_secret() and not WatchedFile.objects.exists()


def test_an_inode_reused_by_a_new_log_is_a_new_file_read_from_its_first_byte(watched, team):
    folder = Path(watched.path)
    (folder / "a.jsonl").write_bytes(make_envelope_log(1, session="a"))
    scan_all()
    first = WatchedFile.objects.get()
    (folder / "a.jsonl").unlink()
    b = reuse_inode(folder, first, "b.jsonl", make_envelope_log(3, session="b"))
    scan_all()
    now = WatchedFile.objects.get()
    assert now.job_id != first.job_id and IngestJob.objects.get(pk=first.job_id).status == "done"
    assert now.job.lines_read == 8 and ToolCall.objects.filter(job=now.job).count() == 3
    assert (now.name, now.path, now.offset) == ("b.jsonl", str(b), b.stat().st_size)


def test_a_log_rewritten_in_place_with_another_head_starts_over(watched, team):
    # The inode stays, the content does not: what an inode reuse looks like from the scanner.
    log = Path(watched.path) / "proxy.jsonl"
    log.write_bytes(make_envelope_log(1, session="first"))
    scan_all()
    first = WatchedFile.objects.get()
    with open(log, "r+b") as f:
        f.truncate(0)
        f.write(make_envelope_log(3, session="second"))  # larger than before
    scan_all()
    now = WatchedFile.objects.get()
    assert now.inode == first.inode and now.job_id != first.job_id
    assert now.job.lines_read == 8 and now.job.calls_stored == 3
    assert IngestJob.objects.get(pk=first.job_id).status == "done"


@pytest.mark.parametrize(
    "new_name, rewrite",
    [("proxy.jsonl.1", True), ("notes.txt", False)],
    ids=["rotation-name-other-content", "non-matching-name"],
)
def test_a_followed_inode_under_a_name_or_head_that_does_not_continue_it_is_not_read(
    watched, team, new_name, rewrite
):
    log = Path(watched.path) / "proxy.jsonl"
    log.write_bytes(make_envelope_log(2))
    scan_all()
    followed = WatchedFile.objects.get()
    moved = log.rename(log.with_name(new_name))
    if rewrite:
        with open(moved, "r+b") as f:
            f.truncate(0)
            f.write(SECRET)
    else:
        with open(moved, "ab") as f:
            f.write(SECRET)
    scan_all()
    assert not read_secret()
    assert IngestJob.objects.get(pk=followed.job_id).lines_read == 6
    assert not WatchedFile.objects.exists()


def test_the_head_fingerprint_grows_with_a_short_file_up_to_4_kib(watched):
    log = Path(watched.path) / "proxy.jsonl"
    data = make_envelope_log(3)
    short = data[: data.index(b"\n") + 1]
    assert len(short) < 4096 < len(data)
    log.write_bytes(short)
    scan_all()
    followed = WatchedFile.objects.get()
    assert (followed.name, followed.head_len, followed.head_sha256) == ("proxy.jsonl", len(short), sha(short))
    log.write_bytes(data)  # the rest appended (same first bytes)
    scan_all()
    followed.refresh_from_db()
    assert (followed.head_len, followed.head_sha256) == (4096, sha(data[:4096]))
    assert followed.offset == len(data) and followed.job.lines_read == 8
