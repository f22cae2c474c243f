"""Tailing a watched file: its complete lines are ingested from its byte offset on."""

from __future__ import annotations

import os

from django.utils import timezone

from ingest.capture.models import IngestJob, WatchedFile
from ingest.capture.pipeline.jobs import create_job
from ingest.capture.pipeline.lease import LeaseLost, claim, fail
from ingest.capture.pipeline.reading import Lines, detect, last_line_end, outputs
from ingest.capture.pipeline.run import Run

Status = IngestJob.Status


def ingest_watched_file(watched: WatchedFile, *, final: bool = False) -> IngestJob | None:
    """Ingest ``watched``'s complete lines from its byte offset on; the watched-folder tail.

    Contract with the folder scanner (``ingest.capture.watch.scan_all``):

    - The scanner finds files, identifies each by ``(device, inode)`` (a rotated file keeps its
      inode under a new name: update ``path`` and keep tailing it; a new file at the old name is a
      new WatchedFile) and calls this for every file that grew (``size > offset``).
    - Only complete lines (up to the last ``\\n``) are read; ``offset`` ends at a line end and
      ``line_no`` counts the lines up to it. A file that shrank below ``offset`` (truncated in
      place) starts over with a new job; dedupe keys keep anything seen before from being stored
      twice.
    - One IngestJob per file (``watched.job``, source ``watch``) accumulates the counts; it stays
      ``running`` (without a lease) while the file is tailed. A request whose response has not
      been written yet keeps its lines pending, so each call is stored once, complete. The file
      is re-read from its start on each call (that is how pending requests and the session's
      client identity are rebuilt) but lines up to the job's watermark are not settled again.
    - ``final=True`` (the file was rotated away and is quiet, or deleted) ends the input: requests
      still unanswered are stored as such and the job is marked done.

    Returns the job, or None when the path no longer holds this file (the scanner re-identifies
    it) or another run holds the job's lease.
    """
    try:
        raw = open(watched.path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return None
    with raw:
        st = os.fstat(raw.fileno())
        if (st.st_dev, st.st_ino) != (watched.device, watched.inode):
            return None
        size = st.st_size
        folder = watched.folder
        if watched.job_id is not None and size < watched.offset:
            # Truncated in place: the old content is gone, so its job ends here.
            IngestJob.objects.filter(pk=watched.job_id, status=Status.RUNNING, run_token="").update(
                status=Status.DONE, finished=timezone.now()
            )
            watched.job = None
            watched.offset = watched.line_no = 0
        if watched.job is None:
            watched.job = create_job(
                folder.team,
                source=IngestJob.Source.WATCH,
                filename=os.path.basename(watched.path),
                path=watched.path,
                format=folder.format,
            )
            watched.save(update_fields=["job", "offset", "line_no"])
        # The final read takes the whole file: a last line without its newline is still a line.
        end = size if final else last_line_end(raw, watched.offset, size)
        if end <= watched.offset and not final:
            WatchedFile.objects.filter(pk=watched.pk).update(size_seen=size, last_read_at=timezone.now())
            return watched.job
        job, token = claim(watched.job.pk)
        if job is None:
            return None
        try:
            raw.seek(0)
            format, problem = (job.format, "") if job.format else detect(raw)
            if not job.format:
                job.format = format
                IngestJob.objects.filter(pk=job.pk).update(format=format)
            raw.seek(0)
            lines = Lines(raw, limit=end)
            run = Run(job, token)
            run.consume(outputs(lines, format, skip_through_line=job.watermark, finish=final), lines)
            units = run.watermark if format == "har" else lines.count
            run.finish(bytes_done=end, total_bytes=end, lines_in_input=units if final else None, final=final)
            if not final:
                IngestJob.objects.filter(pk=job.pk).update(status=Status.RUNNING)
            if problem:
                IngestJob.objects.filter(pk=job.pk).update(error=problem[:4000])
        except LeaseLost:
            return None
        except Exception as exc:
            fail(job.pk, token, exc)
            return IngestJob.objects.get(pk=job.pk)
        WatchedFile.objects.filter(pk=watched.pk).update(
            offset=end, line_no=lines.count, size_seen=size, last_read_at=timezone.now()
        )
        watched.offset, watched.line_no, watched.size_seen = end, lines.count, size
        return IngestJob.objects.get(pk=job.pk)
