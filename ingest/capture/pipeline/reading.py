"""Reading the input: lines of a (possibly gzipped) file, its format, and what the parsers make of it."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, cast

from django.conf import settings

from ingest.capture.pipeline.limits import READ_CHUNK, check_decompressed, spill_line
from mcptax.formats import DETECT_BYTES, UnknownFormatError, detect_format, parse
from mcptax.formats.assemble import assemble
from mcptax.formats.records import (
    Discovered,
    LineEvent,
    LineOutcome,
    ObservedCall,
    numbered_lines,
    quarantine,
)

_GZIP_MAGIC = b"\x1f\x8b"
UNKNOWN_FORMAT = "unknown"
# Detection looks at up to this many non-blank lines (as mcptax.formats.detect_format does).
DETECT_LINES = 50


class Lines:
    """Lines of a binary stream up to ``limit`` bytes, counting what was consumed.

    A line longer than ``max_line_bytes`` (default INGEST_MAX_LINE_BYTES) is never held whole:
    the rest of it is streamed into a file (``limits.spill_line``) and a LongLine (its head and
    that file's sha256 and name) stands for it. ``chunks`` reads the same stream in blocks
    instead, for a format whose unit is not a line (HAR).
    """

    def __init__(
        self,
        stream: IO[bytes],
        limit: int | None = None,
        position: Callable[[], int] | None = None,
        max_line_bytes: int | None = None,
        spill: bool = True,
    ):
        self.stream = stream
        self.limit = limit
        self.consumed = 0
        self.count = 0
        self._position = position
        self.max_line_bytes = settings.INGEST_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
        # False: a too-long line is read past and not yielded (format detection needs no copy).
        self.spill = spill

    def _remaining(self) -> int | None:
        return None if self.limit is None else self.limit - self.consumed

    def __iter__(self) -> Iterator[bytes]:
        # +2: a line of exactly max_line_bytes still fits with its "\r\n".
        most = self.max_line_bytes + 2
        while True:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                return
            line = self.stream.readline(most if remaining is None else min(most, remaining))
            if not line:
                return
            self.consumed += len(line)
            self.count += 1
            if len(line) == most and not line.endswith(b"\n"):
                if not self.spill:
                    self._skip_rest()
                    continue
                long_line, more = spill_line(line, self.stream, self._remaining())
                self.consumed += more
                yield long_line
                continue
            yield line

    def _skip_rest(self) -> None:
        while True:
            remaining = self._remaining()
            size = READ_CHUNK if remaining is None else min(READ_CHUNK, remaining)
            piece = self.stream.readline(size) if size > 0 else b""
            self.consumed += len(piece)
            if not piece or piece.endswith(b"\n"):
                return

    def chunks(self) -> Iterator[bytes]:
        """The stream in blocks (up to ``limit``), counted as consumed; ``count`` stays 0."""
        while True:
            remaining = self._remaining()
            size = READ_CHUNK if remaining is None else min(READ_CHUNK, remaining)
            block = self.stream.read(size) if size > 0 else b""
            if not block:
                return
            self.consumed += len(block)
            yield block

    def position(self) -> int:
        """Bytes of the file on disk behind what was read (compressed bytes for gzip)."""
        return self._position() if self._position is not None else self.consumed


def open_input(raw: IO[bytes], max_bytes: int | None = None) -> IO[bytes]:
    """The stream to read from the binary input ``raw`` (at its start): gzip is decompressed
    transparently.

    A gzip input that decompresses past ``max_bytes`` (default INGEST_MAX_BYTES) raises
    InputTooLarge here, before a byte of it is parsed or stored.
    """
    if raw.read(2) == _GZIP_MAGIC:
        check_decompressed(raw, settings.INGEST_MAX_BYTES if max_bytes is None else max_bytes)
        # GzipFile reads like any binary file; typeshed just does not declare it an IO[bytes].
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    raw.seek(0)
    return raw


def detect(stream: IO[bytes], max_line_bytes: int | None = None) -> tuple[str, str]:
    """(format, error): the format of the stream's start, rewinding it; UNKNOWN_FORMAT and why.

    Whole first records are looked at, not a fixed window: a first line longer than
    DETECT_BYTES is read to its end (up to ``max_line_bytes``; a longer one is skipped, as the
    parser will quarantine it) before the next lines are looked at.
    """
    max_line = settings.INGEST_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    try:
        head = stream.read(DETECT_BYTES)
        try:
            return detect_format(head), ""
        except UnknownFormatError as exc:
            problem = str(exc)
        if len(head) < DETECT_BYTES:
            return UNKNOWN_FORMAT, problem  # the whole input was seen
        stream.seek(0)
        records: list[bytes] = []
        for line in Lines(stream, max_line_bytes=max_line, spill=False):
            if line.strip():
                records.append(line)
            if len(records) >= DETECT_LINES or sum(map(len, records)) > max_line:
                break
        return detect_format(b"".join(records)), ""
    except UnknownFormatError as exc:
        return UNKNOWN_FORMAT, str(exc)
    except (OSError, EOFError, zlib.error) as exc:  # a corrupt gzip stream
        return UNKNOWN_FORMAT, f"cannot read the file: {exc}"
    finally:
        stream.seek(0)


def _unknown_format_events(lines: Iterable[bytes]) -> Iterator[LineEvent]:
    # Nothing can be understood, but every line is still accounted for and kept for inspection.
    for line in numbered_lines(lines):
        if not line.body.strip():
            yield LineEvent(line.line_no, "ignored", "blank", offset=line.offset, length=line.length)
        else:
            yield quarantine(line, "unknown_format")


def outputs(
    lines: Iterable[bytes], format: str, *, skip_through_line: int, finish: bool
) -> Iterator[ObservedCall | LineOutcome | Discovered]:
    """Parse and assemble the input (a tailed file is not finished yet); unknown formats are
    quarantined line by line."""
    max_line_bytes = settings.INGEST_MAX_LINE_BYTES
    if format == UNKNOWN_FORMAT:
        # Every line quarantined; any assembler settles them, envelope's will do.
        events: Iterable[LineEvent] = _unknown_format_events(lines)
        format = "envelope"
    else:
        # A HAR is one JSON document, read as a stream of blocks whatever its line breaks.
        source = lines.chunks() if format == "har" and isinstance(lines, Lines) else lines
        events = parse(source, format, max_line_bytes=max_line_bytes)
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
