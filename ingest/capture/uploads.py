"""The one writer of uploaded logs: every way in (the web form, the API body, bytes handed over by
code) streams its chunks through :class:`UploadWriter`, then into the shared ingest storage.

A log can be gigabytes, so it is never held in memory: it is spooled to a local file as it
arrives (``VAR_DIR/spool``), then saved once under ``ingest/<team>/`` in the ingest storage
(``ingest.capture.storage``: moved in place on a local disk, uploaded in parts to S3), where the
job that processes it reads it from any host. Past the size limit the partial file is removed and
nothing is kept.
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest

from dashboard.teams.models import Team
from ingest.capture import storage


class UploadTooLarge(ValueError):
    """The upload went over the allowed size; nothing was kept."""


# Seconds a client is told to wait when the spool or the ingest storage cannot take a body.
SPOOL_RETRY_AFTER = 60


class SpoolFull(OSError):
    """The local spool could not take the upload (the disk is full, a quota, an I/O error); what was
    written is removed. ``status`` is the HTTP answer: 507 for a full disk or quota, else 503."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.full = cause.errno in (errno.ENOSPC, errno.EDQUOT)
        self.status = 507 if self.full else 503

    @property
    def reason(self) -> str:
        what = "the server's upload spool is full" if self.full else "the server's upload spool failed"
        return (
            f"The upload could not be received: {what} ({self.strerror}). Nothing was kept; "
            f"send it again in {SPOOL_RETRY_AFTER} seconds or more, or ask the operator to free "
            "space under VAR_DIR/spool."
        )


def upload_dir(team: Team) -> str:
    """The team's folder in the ingest storage."""
    return f"ingest/{team.pk}"


def disk_name(filename: str | None) -> str:
    """A harmless file name on disk for a user-supplied one (the original is kept on the job)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(filename or ""))[-120:].lstrip(".")
    return name or "upload.log"


class UploadWriter:
    """A new upload of ``team``, spooled chunk by chunk up to ``max_bytes``, then ``store``d.

    ``write`` raises UploadTooLarge past the limit, after removing what was written; leaving the
    ``with`` block on an exception removes the file too, so a failed upload never leaves a part.
    ``store`` puts the spooled file into the ingest storage and returns its storage name;
    ``discard`` removes whatever exists of it, spooled or stored.
    """

    def __init__(self, team: Team, filename: str | None, *, max_bytes: int | None = None) -> None:
        self.disk_name = f"{uuid.uuid4().hex}-{disk_name(filename)}"
        self.path = storage.spool_dir() / self.disk_name
        self.name = f"{upload_dir(team)}/{self.disk_name}"
        self.stored = ""
        self.max_bytes = max_bytes
        self.written = 0
        self._file: IO[bytes] | None = None
        try:
            self._file = open(self.path, "xb")  # noqa: SIM115 - closed by close/discard
        except OSError as exc:
            raise SpoolFull(exc) from exc

    def write(self, chunk: bytes) -> None:
        self.written += len(chunk)
        if self.max_bytes is not None and self.written > self.max_bytes:
            self.discard()
            raise UploadTooLarge(f"upload is larger than {self.max_bytes} bytes")
        if self._file is None:
            raise ValueError("write to a closed upload")
        try:
            self._file.write(chunk)
        except OSError as exc:  # a full disk: keep nothing of it, and say so (not a 500)
            self.discard()
            raise SpoolFull(exc) from exc

    def close(self) -> Path:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()  # flushes the buffer: a full disk may show only here
            except OSError as exc:
                self.path.unlink(missing_ok=True)
                raise SpoolFull(exc) from exc
        return self.path

    def store(self) -> str:
        """Save the upload into the ingest storage (once) and return its storage name.

        Raises OSError (``storage.StorageUnavailable``) when the store cannot take it; the spooled
        file is gone either way, so a refused upload leaves nothing behind.
        """
        self.close()
        if not self.stored:
            self.stored = storage.save_spooled(self.path, self.name)
        return self.stored

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        if self.stored:
            storage.delete(self.stored)
            self.stored = ""

    def __enter__(self) -> UploadWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()


def store_upload(team: Team, chunks: Iterable[bytes], filename: str, *, max_bytes: int | None = None) -> str:
    """Stream ``chunks`` into a new upload of the team; returns its name in the ingest storage.

    Raises UploadTooLarge (and removes the partial file) past ``max_bytes``.
    """
    with UploadWriter(team, filename, max_bytes=max_bytes) as writer:
        for chunk in chunks:
            writer.write(chunk)
        return writer.store()


if TYPE_CHECKING:
    _BytesUpload = UploadedFile[bytes]
else:  # Django's File is not subscriptable at runtime
    _BytesUpload = UploadedFile


class SpooledUpload(_BytesUpload):
    """An uploaded file spooled by its UploadWriter (like TemporaryUploadedFile); ``store`` keeps it."""

    def __init__(self, writer: UploadWriter, name: str, content_type: str | None, size: int) -> None:
        super().__init__(open(writer.path, "rb"), name, content_type, size, None)  # noqa: SIM115 - closed by Django
        self.writer = writer

    def temporary_file_path(self) -> str:
        return str(self.writer.path)

    def store(self) -> str:
        self.close()
        return self.writer.store()

    def discard(self) -> None:
        self.close()
        self.writer.discard()


class IngestUploadHandler(FileUploadHandler):
    """Django's upload handler for the web form: the file part goes through an UploadWriter.

    Refusing a file over the limit means: the partial file is deleted and the rest of the request
    is read and thrown away (``StopUpload(connection_reset=False)``), so the browser still gets
    our page with a clear message instead of a reset connection. ``too_large`` tells the view
    what happened.
    """

    def __init__(
        self, request: HttpRequest | None = None, *, team: Team, max_bytes: int | None = None
    ) -> None:
        super().__init__(request)
        self.team = team
        self.max_bytes: int = settings.INGEST_MAX_UPLOAD_BYTES if max_bytes is None else max_bytes
        self.too_large = False
        self.writer: UploadWriter | None = None
        self.kept = False
        # Set when the spool could not take the file (a full disk): the view answers 507/503.
        self.spool_full: SpoolFull | None = None

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        if self.writer is not None or self.spool_full is not None:
            # One log per upload: a second file part is not ours to keep.
            raise StopUpload(connection_reset=False)
        try:
            self.writer = UploadWriter(self.team, file_name, max_bytes=self.max_bytes)
        except SpoolFull as exc:
            self.spool_full = exc
            raise StopUpload(connection_reset=False) from None

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        if self.writer is None:
            return raw_data
        try:
            self.writer.write(raw_data)
        except UploadTooLarge:
            self.too_large = True
            raise StopUpload(connection_reset=False) from None
        except SpoolFull as exc:
            self.spool_full = exc
            raise StopUpload(connection_reset=False) from None
        return None

    def file_complete(self, file_size: int) -> UploadedFile[bytes] | None:
        if self.writer is None:
            return None
        try:
            self.writer.close()
        except SpoolFull as exc:
            self.spool_full = exc
            return None
        return SpooledUpload(self.writer, self.file_name or "upload.log", self.content_type, file_size)

    def upload_interrupted(self) -> None:
        if self.writer is not None:
            self.writer.discard()

    def discard_unless_kept(self) -> None:
        """Remove the file unless the view handed it to a job (``kept``).

        The file is written while the body is parsed, which for the web form happens in the CSRF
        check: a refused request (bad token, invalid form, an error) must not leave it behind.
        """
        if self.writer is not None and not self.kept:
            self.writer.discard()
