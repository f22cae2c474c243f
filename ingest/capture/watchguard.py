"""Where a watched folder may read, and which file it is reading: the checks that every scan and
every file open repeat.

Watched folders are an operator feature: they make the worker read its own disk, so they are off
until ``settings.INGEST_WATCH_DIRS`` names the roots team admins may pick folders under. A path is
judged by its real path (symbolic links resolved), at the form, at every scan and at every open
(through the open file descriptor, so a link swapped after the check cannot redirect the read).
The dashboard's own state is never a log folder, even under a root: nothing inside ``VAR_DIR``
(database, secret key, broker) or ``MEDIA_ROOT`` (every team's uploads) is read.

A followed file is identified by ``(device, inode)``, but an inode number is reused once its file
is deleted, so identity alone proves nothing. A file continues the one that was followed only when
its name is the followed name or a rotation of it (``proxy.jsonl.1``, ``proxy.jsonl-20261201``),
it is not smaller than at the last read, and the sha256 of its first bytes (up to ``HEAD_BYTES``)
is unchanged. A name that neither matches the folder's pattern nor is such a rotation is never
opened.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

HEAD_BYTES = 4096
# logrotate and Python's handlers append ".1", "-20261201", ".2026-12-01" and the like.
ROTATION_SEPARATORS = ".-_"
ROTATION_SUFFIX_MAX = 64
OFF_MESSAGE = (
    "Watched folders are off: INGEST_WATCH_DIRS names no folders. An operator turns them on by "
    "setting INGEST_WATCH_DIRS to the log folders (on the worker's host) that may be watched and "
    "restarting the web and worker processes."
)


class WatchPathError(ValueError):
    """The folder cannot be watched (off, not absolute, missing, not a directory, not allowed)."""


class WatchRefused(WatchPathError):
    """This file must not be read now (outside the roots, the dashboard's own files, not regular)."""


class NotOurFile(WatchPathError):
    """The followed file's (device, inode) now holds another file; nothing of it was read."""


def allowed_roots() -> list[Path]:
    return [Path(root.strip()).resolve() for root in settings.INGEST_WATCH_DIRS if root.strip()]


def watch_enabled() -> bool:
    return bool(allowed_roots())


def forbidden_dirs() -> list[Path]:
    """The dashboard's own state: never watched, whatever the roots say."""
    return [Path(settings.VAR_DIR).resolve(), Path(settings.MEDIA_ROOT).resolve()]


def _inside(path: Path, dirs: list[Path]) -> bool:
    return any(path.is_relative_to(d) for d in dirs)


def check_real_path(real: Path) -> None:
    """WatchRefused unless ``real`` (already resolved) is inside a root and outside our own state."""
    roots = allowed_roots()
    if not roots:
        raise WatchRefused(OFF_MESSAGE)
    if not _inside(real, roots):
        raise WatchRefused(
            f"{real} is outside the allowed folders ({', '.join(map(str, roots))}); see INGEST_WATCH_DIRS."
        )
    if _inside(real, forbidden_dirs()):
        raise WatchRefused(
            f"{real} holds the dashboard's own data (VAR_DIR, MEDIA_ROOT) and is never watched."
        )


def resolve_dir(raw: str) -> Path:
    """The real directory for ``raw`` if it may be watched, else WatchPathError saying why."""
    raw = (raw or "").strip()
    if not watch_enabled():
        raise WatchPathError(OFF_MESSAGE)
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
    check_real_path(resolved)
    return resolved


def is_rotation_name(name: str, original: str) -> bool:
    """Whether ``name`` is what rotation makes of ``original``: the same name plus a short suffix."""
    if not original or len(name) <= len(original) + 1 or not name.startswith(original):
        return False
    suffix = name[len(original) :]
    return suffix[0] in ROTATION_SEPARATORS and len(suffix) <= ROTATION_SUFFIX_MAX and os.sep not in suffix


def may_open(name: str, original: str, pattern: str) -> bool:
    """A name the folder may open: one matching its pattern, or a rotation of a followed one."""
    if fnmatch.fnmatch(name, pattern):
        return True
    return bool(original) and fnmatch.fnmatch(original, pattern) and is_rotation_name(name, original)


def _real_path_of(fd: int, path: str) -> Path:
    try:
        # The file actually opened, whatever links were on the way or were swapped since.
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # no /proc: the best a path can tell
        return Path(os.path.realpath(path))


def open_checked(path: str) -> BinaryIO:
    """Open ``path`` for reading, or WatchRefused if what was opened may not be read.

    OSError (the file is gone, unreadable) passes through: the scanner re-lists the folder.
    """
    # O_NONBLOCK: a FIFO put in the folder would otherwise block the open forever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WatchRefused(f"{path} is not a regular file; not read.")
        check_real_path(_real_path_of(fd, path))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def head_digest(raw: BinaryIO, length: int) -> str:
    """sha256 of the first ``length`` bytes of ``raw`` (fewer if the file is shorter)."""
    raw.seek(0)
    return hashlib.sha256(raw.read(length)).hexdigest()
