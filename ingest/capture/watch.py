"""Watched folders: find the log files in a folder and tail each one by byte offset.

The periodic task ``ingest.tasks.scan_watched_folders`` (in ``ingest/capture/tasks.py``) calls
``scan_all``. Files are identified by ``(device, inode)``, never by name, so:

- a file renamed by log rotation keeps its state (offset, job) under its new name, is read to
  its end while it is still in the folder, and is finished (pending requests stored as
  unanswered, job done) once it has been quiet for one scan;
- a new file created at the old name is a new file, read from byte 0;
- a file truncated in place starts over (dedupe keys keep anything already stored from being
  stored twice).

All state is in the database (``WatchedFile.offset`` always at a line end), so a restarted worker
continues where the last one stopped. Only complete lines are read (``ingest.capture.pipeline``).

Security: a watched folder makes the worker read its own disk, so only team admins add one, and
``settings.INGEST_WATCH_DIRS`` (comma-separated, environment) may restrict the allowed roots;
empty means any directory an admin names. The roots are checked again at every scan, so
narrowing the setting takes effect without touching the folders.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from ingest.capture.models import IngestJob, WatchedFile, WatchedFolder
from ingest.capture.pipeline import ingest_watched_file

logger = logging.getLogger(__name__)


class WatchPathError(ValueError):
    """The folder cannot be watched (not absolute, missing, not a directory, not allowed)."""


def allowed_roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.INGEST_WATCH_DIRS if root.strip()]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def validate_watch_path(raw: str) -> Path:
    """The resolved directory for ``raw``, or WatchPathError saying why it cannot be watched."""
    raw = (raw or "").strip()
    if not raw:
        raise WatchPathError("Give the folder's absolute path on the worker's disk.")
    path = Path(raw)
    if not path.is_absolute():
        raise WatchPathError(f"{raw} is not an absolute path.")
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise WatchPathError(f"{raw} does not exist (on this host).") from None
    if not resolved.is_dir():
        raise WatchPathError(f"{raw} is not a directory.")
    roots = allowed_roots()
    if roots and not _inside(resolved, roots):
        raise WatchPathError(
            f"{resolved} is outside the allowed folders ({', '.join(map(str, roots))}); "
            "see INGEST_WATCH_DIRS."
        )
    return resolved


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


def _list_folder(root: Path, roots: list[Path]) -> dict[tuple[int, int], _Entry]:
    """Every regular file directly in ``root``, by (device, inode)."""
    found: dict[tuple[int, int], _Entry] = {}
    with os.scandir(root) as entries:
        for entry in entries:
            try:
                if not entry.is_file():
                    continue
                if roots and entry.is_symlink() and not _inside(Path(os.path.realpath(entry.path)), roots):
                    continue  # a link out of the allowed folders would defeat INGEST_WATCH_DIRS
                st = entry.stat()
            except OSError:
                continue  # vanished between listing and stat: the next scan sees the truth
            found[(st.st_dev, st.st_ino)] = _Entry(entry.path, entry.name, st.st_size)
    return found


def _track(folder: WatchedFolder, identity: tuple[int, int], entry: _Entry) -> WatchedFile:
    try:
        watched, _ = WatchedFile.objects.get_or_create(
            folder=folder, device=identity[0], inode=identity[1], defaults={"path": entry.path}
        )
    except IntegrityError:  # a concurrent scan created it first
        watched = WatchedFile.objects.get(folder=folder, device=identity[0], inode=identity[1])
    return watched


def scan_folder(folder: WatchedFolder) -> FolderScan:
    """One pass over ``folder``: start new files, read what grew, finish rotated-away files."""
    scan = FolderScan(folder.pk)
    roots = allowed_roots()
    root = Path(folder.path)
    if roots and not _inside(root.resolve(), roots):
        scan.errors.append(f"{root} is outside INGEST_WATCH_DIRS; not scanned")
        _finish_scan(folder, scan)
        return scan
    try:
        listing = _list_folder(root, roots)
    except OSError as exc:
        scan.errors.append(f"cannot read {root}: {exc.strerror or exc}")
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
        except Exception as exc:
            logger.exception("watched file %s", entry.path)
            scan.errors.append(f"{entry.path}: {exc}")
    _finish_scan(folder, scan)
    return scan


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
