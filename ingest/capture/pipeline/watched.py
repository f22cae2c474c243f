"""Tailing a watched file: its complete lines are ingested from its byte offset on."""

from __future__ import annotations

import fnmatch
import os
from typing import Any, BinaryIO

from django.conf import settings
from django.utils import timezone

from ingest.capture.models import IngestJob, WatchedFile
from ingest.capture.pipeline.batch import Run
from ingest.capture.pipeline.jobs import create_job
from ingest.capture.pipeline.lease import LeaseLost, claim, fail
from ingest.capture.pipeline.reading import Lines, detect, last_line_end, outputs
from ingest.capture.watchguard import (
    HEAD_BYTES,
    NotOurFile,
    WatchRefused,
    head_digest,
    is_rotation_name,
    may_open,
    open_checked,
)
from mcptax.formats import DOCUMENT_FORMATS, LINE_FORMATS, parse
from mcptax.formats.assemble import CallAssembler, assemble
from mcptax.formats.ranges import shifted
from mcptax.formats.state import StateError, dump, load

Status = IngestJob.Status


def _continues(watched: WatchedFile, raw: BinaryIO, name: str, size: int) -> bool:
    """Whether the open file is the one ``watched`` followed (see ``ingest.capture.watchguard``)."""
    if watched.job_id is None and watched.offset == 0 and not watched.head_sha256:
        return True  # nothing read yet, nothing to continue
    if not watched.head_sha256:
        return False  # followed before fingerprints were kept: it cannot prove it is the same file
    if name != watched.name and not is_rotation_name(name, watched.name):
        return False
    if size < watched.size_seen or size < watched.head_len:
        return False  # logs grow; a smaller file was rewritten (or is another file)
    return head_digest(raw, watched.head_len) == watched.head_sha256


def _end_job(watched: WatchedFile) -> None:
    """The followed content is gone (rewritten, or its inode reused): its job ends here."""
    if watched.job_id is not None:
        IngestJob.objects.filter(pk=watched.job_id, status=Status.RUNNING, run_token="").update(
            status=Status.DONE, finished=timezone.now()
        )
    watched.job = None
    watched.offset = watched.line_no = watched.size_seen = 0
    watched.pairing_state = None  # a new file starts with nothing pending


def _resume_point(watched: WatchedFile, format: str) -> tuple[int, int, CallAssembler, dict[str, Any]]:
    """(byte offset, lines before it, assembler, parser state) to read on from: the saved state
    at the offset when there is one, else the file's start with nothing known."""
    if watched.pairing_state and watched.offset and format in LINE_FORMATS:
        try:
            assembler, parser_state = load(watched.pairing_state)
            if assembler.format == format:
                return watched.offset, watched.line_no, assembler, parser_state
        except StateError:
            pass  # written by another version: rebuild it from the start, as before
    return 0, 0, CallAssembler(format), {}


def _remember(watched: WatchedFile, raw: BinaryIO, size: int, **fields: Any) -> None:
    """Store what the next read checks continuity against, with ``fields``."""
    head_len = min(HEAD_BYTES, size)
    fields |= {
        "size_seen": size,
        "name": watched.name,
        "head_len": head_len,
        "head_sha256": head_digest(raw, head_len),
        "last_read_at": timezone.now(),
    }
    WatchedFile.objects.filter(pk=watched.pk).update(**fields)
    for key, value in fields.items():
        setattr(watched, key, value)


def _follow(watched: WatchedFile, raw: Any, name: str, size: int) -> IngestJob:
    """Start over when the file is no longer the one followed (NotOurFile when its new name does
    not match), and give the file its job when it has none."""
    folder = watched.folder
    if not _continues(watched, raw, name, size):
        was = watched.name or name
        _end_job(watched)
        if not fnmatch.fnmatch(name, folder.pattern):
            raise NotOurFile(f"{name} now holds other content than the followed {was}; not read.")
        watched.name, watched.head_sha256, watched.head_len = name, "", 0
    watched.name = watched.name or name
    if watched.job is None:
        watched.job = create_job(
            folder.team,
            source=IngestJob.Source.WATCH,
            filename=os.path.basename(watched.path),
            path=watched.path,
            format=folder.format,
        )
        watched.save(
            update_fields=[
                "job",
                "offset",
                "line_no",
                "size_seen",
                "name",
                "head_sha256",
                "head_len",
                "pairing_state",
            ]
        )
    return watched.job


def _read_on(
    watched: WatchedFile, job: IngestJob, token: str, raw: Any, end: int, final: bool
) -> tuple[int, bytes | None, int]:
    """Read the file on from its saved point up to ``end`` under the job's lease; returns the line
    count up to ``end``, the pairing state to save and the bytes read."""
    raw.seek(0)
    format, problem = (job.format, "") if job.format else detect(raw)
    if not job.format:
        job.format = format
        IngestJob.objects.filter(pk=job.pk).update(format=format)
    start, before, assembler, parser_state = _resume_point(watched, format)
    raw.seek(start)
    lines = Lines(raw, limit=end - start, position=raw.tell)
    run = Run(job, token)
    if format in LINE_FORMATS:
        # Only the bytes after the offset are read: what the lines before left pending is
        # in the saved state.
        max_line = settings.INGEST_MAX_LINE_BYTES
        events = shifted(parse(lines, format, max_line_bytes=max_line, state=parser_state), before, start)
        items = assemble(events, format, skip_through_line=job.watermark, finish=final, assembler=assembler)
    else:  # one document (HAR, a Cline history) or an unknown format: the whole file again
        items = outputs(lines, format, skip_through_line=job.watermark, finish=final)
    run.consume(items, lines)
    units = run.watermark if format in DOCUMENT_FORMATS else before + lines.count
    state = dump(assembler, parser_state) if format in LINE_FORMATS and not final else None
    run.finish(bytes_done=end, total_bytes=end, lines_in_input=units if final else None, final=final)
    if not final:
        IngestJob.objects.filter(pk=job.pk).update(status=Status.RUNNING)
    if problem:
        IngestJob.objects.filter(pk=job.pk).update(error=problem[:4000])
    return units, state, lines.consumed


def ingest_watched_file(watched: WatchedFile, *, final: bool = False) -> IngestJob | None:
    """Ingest ``watched``'s complete lines from its byte offset on; the watched-folder tail.

    Contract with the folder scanner (``ingest.capture.watch.scan_all``):

    - The scanner finds files, identifies each by ``(device, inode)`` (a rotated file keeps its
      inode under a new name: update ``path`` and keep tailing it; a new file at the old name is a
      new WatchedFile) and calls this for every file that grew (``size > offset``).
    - Only complete lines (up to the last ``\\n``) are read; ``offset`` ends at a line end and
      ``line_no`` counts the lines up to it. A file that shrank or whose head changed (truncated
      or rewritten in place) starts over with a new job; dedupe keys keep anything seen before
      from being stored twice.
    - One IngestJob per file (``watched.job``, source ``watch``) accumulates the counts; it stays
      ``running`` (without a lease) while the file is tailed. A request whose response has not
      been written yet keeps its lines pending, so each call is stored once, complete. A line
      format (envelope, Claude Code, Codex) is read on from ``offset`` only: what the parser and
      the assembler knew there (pending requests, the session's client) is saved with the offset
      after each read (``pairing_state``, ``mcptax.formats.state``), so a read costs what was
      appended; ``last_scan_bytes`` says how much it read. A HAR, or a file followed before
      states were kept, is re-read from its start; lines up to the job's watermark are never
      settled twice (a read killed before its state was saved is read again from the old offset).
    - ``final=True`` (the file was rotated away and is quiet, or deleted) ends the input: requests
      still unanswered are stored as such and the job is marked done.
    - Every call re-checks, before reading a byte: the name must match the folder's pattern or be
      a rotation of the followed name (else NotOurFile, and the file is never opened); the opened
      file's real path must be inside ``INGEST_WATCH_DIRS`` and outside the dashboard's own data
      (else WatchRefused); and name, size and head fingerprint must agree with what was followed,
      else the followed job ends and the file is new (read from byte 0 if its name matches the
      pattern, NotOurFile if not).

    Returns the job, or None when the path no longer holds this file (the scanner re-identifies
    it) or another run holds the job's lease.
    """
    folder = watched.folder
    name = os.path.basename(watched.path)
    if os.path.dirname(watched.path) != folder.path:
        raise WatchRefused(f"{watched.path} is not in the watched folder {folder.path}; not read.")
    if not may_open(name, watched.name, folder.pattern):
        _end_job(watched)
        raise NotOurFile(
            f"{name} does not match {folder.pattern} and is not a rotation of {watched.name or name}; not read."
        )
    try:
        raw = open_checked(watched.path)
    except OSError:
        return None
    with raw:
        st = os.fstat(raw.fileno())
        if (st.st_dev, st.st_ino) != (watched.device, watched.inode):
            return None
        size = st.st_size
        followed = _follow(watched, raw, name, size)
        # The final read takes the whole file: a last line without its newline is still a line.
        end = size if final else last_line_end(raw, watched.offset, size)
        if end <= watched.offset and not final:
            _remember(watched, raw, size)
            return followed
        job, token = claim(followed.pk)
        if job is None:
            return None
        try:
            units, state, consumed = _read_on(watched, job, token, raw, end, final)
        except LeaseLost:
            return None
        except Exception as exc:
            fail(job.pk, token, exc)
            return IngestJob.objects.get(pk=job.pk)
        _remember(
            watched, raw, size, offset=end, line_no=units, pairing_state=state, last_scan_bytes=consumed
        )
        return IngestJob.objects.get(pk=job.pk)
