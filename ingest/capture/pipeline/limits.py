"""Limits on input that can grow: decompressed bytes, and lines too long to keep in a row.

- ``Gunzip`` decompresses a stream of gzip members chunk by chunk and stops one byte past its
  limit, so a small compressed file never unpacks into memory or disk without bound.
  ``check_decompressed`` runs it over a file before anything of it is stored: a job over the
  limit fails with nothing stored (a ratio bomb costs at most the limit's worth of inflating).
- Long lines are kept as files in the shared ingest storage (``ingest.capture.storage``),
  content-addressed by sha256 (``ingest/lines/<sha256>``): ``spill_line`` streams a line that is too long to hold in memory,
  ``keep_bytes`` keeps one already in memory; the database row holds a bounded head only.
"""

from __future__ import annotations

import hashlib
import tempfile
import zlib
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.template.defaultfilters import filesizeformat

from ingest.capture import storage
from mcptax.formats.records import LongLine

READ_CHUNK = 1024 * 1024
LINES_DIR = "ingest/lines"


class InputTooLarge(ValueError):
    """The input decompresses past the limit; it is refused as a whole."""


class GzipError(ValueError):
    """The input is not valid gzip, or ends inside a member."""


def size_text(limit: int) -> str:
    return f"{filesizeformat(limit)} ({limit} bytes)".replace("\xa0", " ")


class Gunzip:
    """Streaming gunzip of one or more concatenated gzip members, bounded by ``limit`` output bytes.

    ``feed`` raises InputTooLarge as soon as the output would pass the limit: at most
    ``limit + 1`` bytes are ever inflated, whatever the compression ratio.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.written = 0
        self._d = zlib.decompressobj(wbits=31)

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        while data:
            if self._d.eof:
                # `cat a.gz b.gz` is valid gzip; each member needs a fresh decompressor.
                self._d = zlib.decompressobj(wbits=31)
            try:
                part = self._d.decompress(data, self.limit + 1 - self.written)
            except zlib.error as exc:
                raise GzipError(f"not valid gzip ({exc})") from None
            self.written += len(part)
            out += part
            if self.written > self.limit or self._d.unconsumed_tail:
                raise InputTooLarge(f"decompressed beyond {size_text(self.limit)}")
            data = self._d.unused_data
        return bytes(out)

    def close(self) -> None:
        if not self._d.eof:
            raise GzipError("the gzip data is truncated")


def check_decompressed(raw: IO[bytes], limit: int) -> int:
    """Decompressed size of the gzip file ``raw`` (read from its start, rewound after).

    Raises InputTooLarge past ``limit`` (INGEST_MAX_BYTES) before anything of the file is stored.
    A corrupt stream is left to the reader, which settles what it can read.
    """
    gunzip = Gunzip(limit)
    raw.seek(0)
    try:
        while chunk := raw.read(READ_CHUNK):
            gunzip.feed(chunk)
    except GzipError:
        pass
    except InputTooLarge:
        raise InputTooLarge(
            f"decompressed beyond {size_text(limit)} (INGEST_MAX_BYTES); refused, nothing stored"
        ) from None
    finally:
        raw.seek(0)
    return gunzip.written


def _name(sha256: str) -> str:
    return f"{LINES_DIR}/{sha256[:2]}/{sha256}"


def _save(sha256: str, content: File[bytes]) -> str:
    # Content-addressed: the same bytes are kept once, whichever job met them first.
    return storage.save_file(_name(sha256), content, sha256)


def keep_bytes(data: bytes) -> tuple[str, str]:
    """(sha256, storage name) of ``data``, kept as a file."""
    sha256 = hashlib.sha256(data).hexdigest()
    return sha256, _save(sha256, ContentFile(data))


def utf8_head(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of ``data``, not ending inside a UTF-8 character."""
    head = data[:limit]
    for cut in range(min(4, len(head) + 1)):
        try:
            (head[: len(head) - cut] if cut else head).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return head[: len(head) - cut] if cut else head
    return head


def spill_line(first: bytes, stream: IO[bytes], limit: int | None) -> tuple[LongLine, int]:
    """Read the rest of a line that began with ``first`` (already over the line limit) into a file.

    Reads at most ``limit`` more bytes (None: no limit). Returns the LongLine (head, sha256,
    storage name, sizes) and the bytes consumed after ``first``. Memory stays at one chunk.
    """
    digest = hashlib.sha256()
    consumed = size = 0
    with tempfile.TemporaryFile(dir=storage.spool_dir()) as spool:

        def keep(data: bytes) -> None:
            nonlocal size
            digest.update(data)
            spool.write(data)
            size += len(data)

        pending, piece = b"", first  # pending: a final "\r" that may open the "\r\n" terminator
        while True:
            data = pending + piece
            if data.endswith(b"\n"):
                keep(data[:-1].removesuffix(b"\r"))
                break
            pending = b"\r" if data.endswith(b"\r") else b""
            keep(data[: len(data) - len(pending)])
            remaining = READ_CHUNK if limit is None else min(READ_CHUNK, limit - consumed)
            piece = stream.readline(remaining) if remaining > 0 else b""
            if not piece:
                keep(pending)
                break
            consumed += len(piece)
        sha256 = digest.hexdigest()
        spool.seek(0)
        name = _save(sha256, File(spool))
    line = LongLine(
        utf8_head(first, settings.INGEST_MAX_RAW_BYTES),
        length=len(first) + consumed,
        size=size,
        sha256=sha256,
        ref=name,
    )
    return line, consumed
