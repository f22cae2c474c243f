"""Where the files of ingest jobs live: Django's ``ingest`` storage, shared by every host.

Uploads, queued API bodies and the whole text of over-long lines are written to
``storages["ingest"]``: a FileSystemStorage under MEDIA_ROOT in the embedded run, an S3 bucket
(MinIO in the compose stack) when ``INGEST_S3_BUCKET`` is set, so a worker on any host opens the
file the web host received. A job names its input by its storage name (``IngestJob.storage_name``);
a job that names a local ``path`` instead (``manage.py ingest``, watched folders, rows from before
shared storage) reads that file on its own host.

Reading streams: a local file is opened as is; an S3 object is read through :class:`S3Reader`,
a seekable stream of ranged GETs (django-storages' own S3File would download the object whole
before the first byte is read). Failures to reach the store are raised as
:class:`StorageUnavailable`, an OSError, so a job treats them as transient and retries.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import uuid
from pathlib import Path
from typing import IO, Any

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

logger = logging.getLogger(__name__)
ALIAS = "ingest"
READ_BUFFER = 1024 * 1024


class StorageUnavailable(OSError):
    """The object store could not be reached or answered with an error (transient)."""


def ingest_storage() -> Storage:
    return storages[ALIAS]


def spool_dir() -> Path:
    """A local folder for files on their way into the storage (VAR_DIR/spool, created on use)."""
    path = Path(settings.VAR_DIR) / "spool"
    path.mkdir(parents=True, exist_ok=True)
    return path


def describe() -> str:
    """Where the ingest storage keeps files, for messages (``s3://bucket/prefix`` or a folder)."""
    storage = ingest_storage()
    if isinstance(storage, S3Storage):
        return f"s3://{storage.bucket_name}/{storage.location}".rstrip("/")
    if isinstance(storage, FileSystemStorage):
        return str(storage.location)
    return type(storage).__name__


class _SpoolFile(File[bytes]):
    """A spooled local file handed to ``Storage.save``: FileSystemStorage moves it (no copy)."""

    def __init__(self, path: Path) -> None:
        super().__init__(open(path, "rb"), path.name)  # noqa: SIM115 - closed by save_spooled
        self._path = path

    def temporary_file_path(self) -> str:
        return str(self._path)


def save_spooled(spool: Path, name: str) -> str:
    """Put the local file ``spool`` into the storage as ``name`` (streamed; an S3 upload goes in
    parts); the spool is gone afterwards. Returns the storage name."""
    content = _SpoolFile(spool)
    try:
        stored = _call(lambda: ingest_storage().save(name, content))
    finally:
        content.close()
        spool.unlink(missing_ok=True)
    return str(stored)


def save_file(name: str, content: File[bytes], sha256: str) -> str:
    """Keep ``content`` (whose sha256 is ``sha256``) as ``name``, a content-addressed name.

    A file already under that name is kept only when its bytes hash to ``sha256``: a write cut by
    a full disk or a crash must not pass for the line. On a local disk the file is written under a
    temporary name, fsynced, then renamed, so the name never shows a partial file; an S3 object
    appears whole or not at all.
    """
    storage = ingest_storage()
    if _call(lambda: storage.exists(name)):
        if _stored_sha256(name) == sha256:
            return name
        logger.warning("ingest storage: %s does not hash to its name; writing it again", name)
        delete(name)
    if isinstance(storage, FileSystemStorage):
        _write_atomically(Path(storage.path(name)), content, storage.file_permissions_mode)
        return name
    return str(_call(lambda: storage.save(name, content)))


def _stored_sha256(name: str) -> str:
    digest = hashlib.sha256()
    kept, _ = open_stored(name)
    with kept:
        while chunk := _call(lambda: kept.read(READ_BUFFER)):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(path: Path, content: File[bytes], mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as out:
            content.seek(0)
            for chunk in content.chunks():
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def delete(name: str) -> None:
    _call(lambda: ingest_storage().delete(name))


def exists(name: str) -> bool:
    return bool(_call(lambda: ingest_storage().exists(name)))


def new_name(directory: str, filename: str) -> str:
    """A fresh storage name in ``directory`` keeping a readable tail of ``filename``."""
    return f"{directory}/{uuid.uuid4().hex}-{filename}"


def open_stored(name: str) -> tuple[IO[bytes], int]:
    """(binary stream, size) of the stored file ``name``: seekable, read as it is consumed.

    Raises FileNotFoundError when there is no such file, StorageUnavailable when the store
    cannot be reached.
    """
    storage = ingest_storage()
    if isinstance(storage, FileSystemStorage):
        local = open(storage.path(name), "rb")  # noqa: SIM115 - the caller closes it
        return local, os.fstat(local.fileno()).st_size
    if isinstance(storage, S3Storage):
        reader = S3Reader(storage, name)
        return io.BufferedReader(reader, buffer_size=READ_BUFFER), reader.size
    kept = storage.open(name, "rb")
    return kept, int(kept.size or 0)


def open_job_input(storage_name: str, path: str) -> tuple[IO[bytes], int]:
    """The input of a job: its stored file, else the local file at ``path`` (see the module doc)."""
    if storage_name:
        return open_stored(storage_name)
    local = open(path, "rb")  # noqa: SIM115 - the caller closes it
    return local, os.fstat(local.fileno()).st_size


def _call(action: Any) -> Any:
    try:
        return action()
    except ClientError as exc:
        if _status(exc) == 404:
            raise FileNotFoundError(f"not in the ingest storage ({describe()})") from None
        raise StorageUnavailable(f"the ingest storage answered {_status(exc)}: {exc}") from exc
    except (BotoCoreError, Boto3Error) as exc:  # Boto3Error: an upload refused part-way
        raise StorageUnavailable(f"cannot reach the ingest storage: {exc}") from exc


def _status(exc: ClientError) -> int:
    status: int = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return status


class S3Reader(io.RawIOBase):
    """A seekable read-only stream over one S3 object.

    Sequential reads come from one streaming GET (``Range: bytes=N-``); a seek elsewhere closes it
    and the next read opens another from the new position. Memory stays at what a read asks for.
    """

    def __init__(self, storage: S3Storage, name: str) -> None:
        super().__init__()
        self._client = storage.connection.meta.client
        self._bucket = storage.bucket_name
        self._key = storage._normalize_name(clean_name(name))
        self.name = name
        head = _call(lambda: self._client.head_object(Bucket=self._bucket, Key=self._key))
        self.size = int(head["ContentLength"])
        self._pos = 0
        self._body: Any = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        position = max(0, base + offset)
        if position != self._pos:
            self._drop_body()
            self._pos = position
        return position

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self.size - self._pos)
        if wanted <= 0:
            return 0
        if self._body is None:
            self._body = _call(
                lambda: self._client.get_object(
                    Bucket=self._bucket, Key=self._key, Range=f"bytes={self._pos}-"
                )["Body"]
            )
        data = _call(lambda: self._body.read(wanted))
        if not data:
            raise StorageUnavailable(f"{self.name}: the object ended at {self._pos} of {self.size} bytes")
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def _drop_body(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop_body()
        super().close()
