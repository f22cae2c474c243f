"""Reading the input: lines of a (possibly gzipped) file, its format, and what the parsers make of it."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Iterator
from typing import IO, cast

from django.conf import settings

from mcptax.formats import DETECT_BYTES, UnknownFormatError, detect_format, parse
from mcptax.formats.assemble import assemble
from mcptax.formats.records import LineEvent, LineOutcome, ObservedCall, numbered_lines, quarantine

_GZIP_MAGIC = b"\x1f\x8b"
UNKNOWN_FORMAT = "unknown"


class Lines:
    """Lines of a binary stream up to ``limit`` bytes, counting what was consumed."""

    def __init__(
        self, stream: IO[bytes], limit: int | None = None, position: Callable[[], int] | None = None
    ):
        self.stream = stream
        self.limit = limit
        self.consumed = 0
        self.count = 0
        self._position = position

    def __iter__(self) -> Iterator[bytes]:
        while True:
            if self.limit is not None:
                remaining = self.limit - self.consumed
                if remaining <= 0:
                    return
                line = self.stream.readline(remaining)
            else:
                line = self.stream.readline()
            if not line:
                return
            self.consumed += len(line)
            self.count += 1
            yield line

    def position(self) -> int:
        """Bytes of the file on disk behind what was read (compressed bytes for gzip)."""
        return self._position() if self._position is not None else self.consumed


def open_input(path: str) -> tuple[IO[bytes], IO[bytes]]:
    """(raw file, stream to read): gzip is decompressed transparently."""
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    if raw.read(2) == _GZIP_MAGIC:
        raw.seek(0)
        # GzipFile reads like any binary file; typeshed just does not declare it an IO[bytes].
        return raw, cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    raw.seek(0)
    return raw, raw


def detect(stream: IO[bytes]) -> tuple[str, str]:
    """(format, error): the format of the stream's start, rewinding it; UNKNOWN_FORMAT and why."""
    head = stream.read(DETECT_BYTES)
    stream.seek(0)
    try:
        return detect_format(head), ""
    except UnknownFormatError as exc:
        return UNKNOWN_FORMAT, str(exc)
    except (OSError, EOFError) as exc:  # a corrupt gzip stream
        return UNKNOWN_FORMAT, f"cannot read the file: {exc}"


def _unknown_format_events(lines: Iterable[bytes]) -> Iterator[LineEvent]:
    # Nothing can be understood, but every line is still accounted for and kept for inspection.
    for line in numbered_lines(lines):
        if not line.body.strip():
            yield LineEvent(line.line_no, "ignored", "blank", offset=line.offset, length=line.length)
        else:
            yield quarantine(line, "unknown_format")


def outputs(
    lines: Iterable[bytes], format: str, *, skip_through_line: int, finish: bool
) -> Iterator[ObservedCall | LineOutcome]:
    """Parse and assemble the input (a tailed file is not finished yet); unknown formats are
    quarantined line by line."""
    max_line_bytes = settings.INGEST_MAX_LINE_BYTES
    if format == UNKNOWN_FORMAT:
        # Every line quarantined; any assembler settles them, envelope's will do.
        events: Iterable[LineEvent] = _unknown_format_events(lines)
        format = "envelope"
    else:
        events = parse(lines, format, max_line_bytes=max_line_bytes)
    return assemble(events, format, skip_through_line=skip_through_line, finish=finish)


def last_line_end(raw: IO[bytes], offset: int, size: int) -> int:
    """Offset just after the last ``\\n`` in the file at or after ``offset`` (``offset`` if none)."""
    position = size
    chunk = 64 * 1024
    while position > offset:
        start = max(offset, position - chunk)
        raw.seek(start)
        data = raw.read(position - start)
        index = data.rfind(b"\n")
        if index >= 0:
            return start + index + 1
        position = start
    return offset
