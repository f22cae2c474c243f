"""The ingest pipeline: from a log file on disk to ToolCalls, BulkArguments and per-line outcomes.

Public entry points (stable; pages, the API, commands and tasks build on them):

- ``create_job(team, *, source, filename, path="", storage_name="", size=None, format="auto",
  user=None) -> IngestJob``: a queued job; the caller that wants a worker to run it sends its id
  (``ingest.tasks.enqueue_job``), otherwise it runs it with ``run_job``.
- ``run_job(job_id, *, fidelity=None, enqueue_range=None) -> IngestJob``: runs (or resumes) a job; never raises for a bad input or an
  unexpected error (the job is marked failed with the error, counts kept). Idempotent: a done job
  is returned as is, a killed job re-run finishes with the same counts as an uninterrupted run.
- ``ingest_path(team, path, *, format="auto", source="command") -> IngestJob`` (synchronous)
- ``ingest_bytes(team, data, *, source, filename, format="auto", user=None, run=True) -> IngestJob``
- ``ingest_watched_file(watched_file, *, final=False) -> IngestJob | None``: tails one file.
- ``stalled_jobs() -> list[int]``: jobs nobody works on (lost message, dead worker), to resume.
- ``range_progress(job) -> dict | None``: a file read in ranges, while they run: ranges done and
  the counters summed.

Uploads are written by ``ingest.capture.uploads``.

Modules: ``jobs`` (creating jobs), ``lease`` (one run per job), ``reading`` (lines, format,
parsing), ``values`` (database-safe values), ``calls`` (storing a batch of calls), ``batch`` (a run's
batches, line accounting, progress), ``readahead`` (the next batch read and parsed in a thread
while the current one is written), ``run`` (running a job: one pass or ranges), ``figures``
(hashing and tokenizing a call's bulk arguments), ``links`` (proxy capture and transcript of one
call), ``ranges`` (a large file read in line ranges by several workers, then
stitched), ``watched`` (tailing a watched file, read on from its offset with the saved pairing
state).

Ranges. A worker's ``run_job(..., enqueue_range=...)`` splits an envelope log larger than
INGEST_RANGE_BYTES into line ranges, each a job of its own (``parent`` = the file's job) with its
own lease, watermark and counters, resumed like any job; calls and line records belong to the
parent. The last range done runs the parent's stitch over the lines the ranges handed on (pairs
across a cut); the parent's counts are the sums, so the accounting below holds for it unchanged.

Loss-free accounting. Every input line (HAR: entry) ends as exactly one of stored, duplicate,
ignored(reason) or quarantined(reason, line number, raw kept), so on a finished job
``lines_read == stored + duplicate + ignored + quarantined``. A call line is *stored* when any call
it formed was stored by this job, *duplicate* when all of them already existed in the team
(dedupe by ``(team, dedupe_key)``), so re-ingesting a file stores nothing new.

Batches and resume. Outputs of ``mcptax.formats`` are persisted in batches, one transaction each:
the new calls with their bulk arguments and contents, the line outcomes, and the job's counters
and watermark (lines 1..watermark are settled). A killed run is resumed by re-reading the file
with ``skip_through_line=watermark``; lines above the watermark may have been settled already
(outcomes come out of line order), which is why every outcome above the watermark at commit
time leaves a LineRecord: on resume those lines are recognised and not counted twice. A call
re-yielded on resume exists already with ``job`` = this job, so it counts as stored, not
duplicate. A lease (``run_token`` + heartbeat, and the owner's host:pid) keeps two runs (e.g. a
redelivered task) from working on one job at once.

The fidelity step (``fidelity_step``, passed to ``run_job`` like ``enqueue_range``) is called
inside each batch's transaction with the rows about to be written (it judges them and rolls them up
there, so each row is written once: by ``COPY`` on PostgreSQL, see ``ingest.bulkwrite``), and after
the commit with the ids of the calls this job stored in it. After each call the extension points
``ingest.capture.signals.calls_storing`` and ``calls_ingested`` are sent with the same rows.
"""

from ingest.capture.pipeline.fidelity_step import FidelityStep
from ingest.capture.pipeline.jobs import (
    RUN_JOB_TASK,
    RUN_RANGE_TASK,
    create_job,
    enqueue_job,
    ingest_bytes,
    ingest_path,
    queued_for_sweep_message,
)
from ingest.capture.pipeline.lease import stalled_jobs
from ingest.capture.pipeline.ranges import progress as range_progress
from ingest.capture.pipeline.run import run_job
from ingest.capture.pipeline.values import server_reported_sha256
from ingest.capture.pipeline.watched import ingest_watched_file

__all__ = [
    "FidelityStep",
    "RUN_JOB_TASK",
    "RUN_RANGE_TASK",
    "enqueue_job",
    "queued_for_sweep_message",
    "create_job",
    "ingest_bytes",
    "ingest_path",
    "ingest_watched_file",
    "range_progress",
    "run_job",
    "server_reported_sha256",
    "stalled_jobs",
]
