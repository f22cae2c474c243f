"""Watched folders: find the log files in a folder and tail each one by byte offset.

The periodic task ``ingest.tasks.scan_watched_folders`` (in ``ingest/tasks.py``) calls
``scan_all``. Files are found by ``(device, inode)`` and confirmed by name, size and head
fingerprint (an inode number is reused once its file is deleted), so:

- a file renamed by log rotation (its name plus a suffix, same first bytes, not smaller) keeps
  its state (offset, job) under its new name, is read to its end while it is still in the
  folder, and is finished (pending requests stored as unanswered, job done) once it has been
  quiet for one scan;
- a new file created at the old name is a new file, read from byte 0;
- a file truncated or rewritten in place starts over (dedupe keys keep anything already stored
  from being stored twice);
- an inode that now holds a file under a name that neither matches the pattern nor is a
  rotation, or a rotation name with other content, is never read.

All state is in the database (``WatchedFile.offset`` always at a line end), so a restarted worker
continues where the last one stopped. Only complete lines are read (``ingest.capture.pipeline``).

Security (``ingest.capture.watchguard``): watched folders are off unless
``settings.INGEST_WATCH_DIRS`` names roots; only team admins add one; the folder's real path is
checked against the roots at every scan and every file's real path at every open, so narrowing the
setting (or emptying it) takes effect without touching the folders. An inode that now holds
another file ends the followed file's job and is dropped from the folder (``watchguard``).
"""

from __future__ import annotations

import fnmatch
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.db import IntegrityError
from django.utils import timezone

from ingest.capture.models import IngestJob, WatchedFile, WatchedFolder
from ingest.capture.pipeline import ingest_watched_file
from ingest.capture.watchguard import (
    OFF_MESSAGE,
    NotOurFile,
    WatchPathError,
    WatchRefused,
    allowed_roots,
    check_real_path,
    watch_enabled,
)
from ingest.capture.watchguard import resolve_dir as validate_watch_path

logger = logging.getLogger(__name__)
__all__ = [
    "OFF_MESSAGE",
    "WatchPathError",
    "allowed_roots",
    "scan_all",
    "scan_folder",
    "validate_watch_path",
    "watch_enabled",
]

# The Celery task that scans watched folders (ingest.tasks), sent by name.
SCAN_TASK = "ingest.tasks.scan_watched_folders"


@dataclass
class FolderScan:
    folder_id: int
    files_seen: int = 0
    files_read: int = 0
    files_new: int = 0
    files_finished: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    path: str
    name: str
    size: int


def _list_folder(root: str) -> dict[tuple[int, int], _Entry]:
    """Every regular file directly in ``root``, by (device, inode)."""
    found: dict[tuple[int, int], _Entry] = {}
    with os.scandir(root) as entries:
        for entry in entries:
            try:
                if not entry.is_file():
                    continue
                if entry.is_symlink():
                    # A link out of the roots would defeat INGEST_WATCH_DIRS (the open checks again).
                    check_real_path(Path(os.path.realpath(entry.path)))
                st = entry.stat()
            except (OSError, WatchRefused):
                continue  # vanished between listing and stat (the next scan sees the truth), or refused
            found[(st.st_dev, st.st_ino)] = _Entry(entry.path, entry.name, st.st_size)
    return found


def _track(folder: WatchedFolder, identity: tuple[int, int], entry: _Entry) -> WatchedFile:
    try:
        watched, _ = WatchedFile.objects.get_or_create(
            folder=folder,
            device=identity[0],
            inode=identity[1],
            defaults={"path": entry.path, "name": entry.name},
        )
    except IntegrityError:  # a concurrent scan created it first
        watched = WatchedFile.objects.get(folder=folder, device=identity[0], inode=identity[1])
    return watched


def scan_folder(folder: WatchedFolder) -> FolderScan:
    """One pass over ``folder``: start new files, read what grew, finish rotated-away files."""
    scan = FolderScan(folder.pk)
    if not watch_enabled():
        # Off: nothing is read, and nothing is lost (offsets and jobs wait for the feature to return).
        scan.errors.append(f"Not scanned. {OFF_MESSAGE}")
        _finish_scan(folder, scan)
        return scan
    try:
        validate_watch_path(folder.path)  # again at every scan: the folder may have become a link elsewhere
        listing = _list_folder(folder.path)
    except WatchPathError as exc:
        scan.errors.append(f"{folder.path}: {exc} Not scanned.")
        _finish_scan(folder, scan)
        return scan
    except OSError as exc:
        scan.errors.append(f"cannot read {folder.path}: {exc.strerror or exc}")
        _finish_scan(folder, scan)
        return scan

    tracked = {(f.device, f.inode): f for f in folder.files.select_related("job", "folder__team")}
    matching = {i: e for i, e in listing.items() if fnmatch.fnmatch(e.name, folder.pattern)}
    # Tracked files first: a rotated file must take its new name before a new file claims the old one.
    for identity, rotated in tracked.items():
        if identity in matching:
            continue
        entry = listing.get(identity)
        if entry is None or (rotated.job is not None and rotated.job.status == IngestJob.Status.DONE):
            continue  # deleted or moved away (nothing left to read), or already finished
        scan.files_seen += 1
        try:
            _read_rotated(rotated, entry, scan)
        except NotOurFile as exc:
            _drop(rotated, exc, scan)
        except Exception as exc:  # one bad file must not stop the folder
            logger.exception("watched file %s", entry.path)
            scan.errors.append(f"{entry.path}: {exc}")
    for identity, entry in sorted(matching.items(), key=lambda item: item[1].path):
        scan.files_seen += 1
        watched = tracked.get(identity)
        try:
            if watched is None:
                watched = _track(folder, identity, entry)
                scan.files_new += 1
            elif watched.path != entry.path:
                watched.path = entry.path
                WatchedFile.objects.filter(pk=watched.pk).update(path=entry.path)
            if entry.size != watched.offset or watched.job_id is None:
                job = ingest_watched_file(watched)
                scan.files_read += job is not None
                _note_failure(job, entry, scan)
            else:
                WatchedFile.objects.filter(pk=watched.pk).update(last_read_at=timezone.now())
        except NotOurFile as exc:
            if watched is not None:
                _drop(watched, exc, scan)
        except Exception as exc:
            logger.exception("watched file %s", entry.path)
            scan.errors.append(f"{entry.path}: {exc}")
    _finish_scan(folder, scan)
    return scan


def _drop(watched: WatchedFile, why: NotOurFile, scan: FolderScan) -> None:
    """The identity holds another file now: forget it (its job and calls stay), say why."""
    WatchedFile.objects.filter(pk=watched.pk).delete()
    scan.errors.append(f"{watched.path}: {why}")


def _read_rotated(watched: WatchedFile, entry: _Entry, scan: FolderScan) -> None:
    """A tracked file now under a name outside the pattern: read its rest, finish it once quiet."""
    if watched.path != entry.path:
        watched.path = entry.path
        WatchedFile.objects.filter(pk=watched.pk).update(path=entry.path)
    # Quiet = same size as at the previous scan: the writer has moved on to the new file.
    quiet = entry.size == watched.size_seen and entry.size >= watched.offset
    if not quiet:
        job = ingest_watched_file(watched)
        scan.files_read += job is not None
        _note_failure(job, entry, scan)
        return
    job = ingest_watched_file(watched, final=True)
    if job is not None and job.status == IngestJob.Status.DONE:
        scan.files_finished += 1
    _note_failure(job, entry, scan)


def _note_failure(job: IngestJob | None, entry: _Entry, scan: FolderScan) -> None:
    if job is not None and job.status == IngestJob.Status.FAILED:
        scan.errors.append(f"{entry.path}: {job.error.splitlines()[-1] if job.error else 'failed'}")


def _finish_scan(folder: WatchedFolder, scan: FolderScan) -> None:
    folder.last_scan_at = timezone.now()
    folder.last_error = "\n".join(scan.errors)[:4000]
    WatchedFolder.objects.filter(pk=folder.pk).update(
        last_scan_at=folder.last_scan_at, last_error=folder.last_error
    )


def scan_all(folder_id: int | None = None) -> list[FolderScan]:
    """Scan every enabled watched folder (or just ``folder_id``)."""
    folders = WatchedFolder.objects.filter(enabled=True).select_related("team")
    if folder_id is not None:
        folders = folders.filter(pk=folder_id)
    return [scan_folder(folder) for folder in folders]
