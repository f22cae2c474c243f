"""Ingest endpoints of the JSON API: push a batch of log lines, follow a job, list agents.

``POST /api/v1/ingest`` is what the logging proxy's ``--push`` calls. The body (JSONL, or gzip of
it) is spooled to a local file as it arrives, never held whole in memory, saved into the shared
ingest storage (so a queued body runs on any worker's host), and then ingested like any other
log by a worker: the request stores and queues the batch, then answers (202), optionally after a
short bounded wait for the counts (``?wait=true``), so one token's large pushes never hold the web
workers.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime

from django.conf import settings
from django.db.models import Count, QuerySet
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.defaultfilters import filesizeformat
from ninja import Query, Router, Schema, Status
from ninja.pagination import LimitOffsetPagination, paginate

from dashboard.teams import ratelimit
from dashboard.teams.api import body_reader, declared_length, is_chunked
from dashboard.teams.models import ApiToken, Team
from ingest.capture import pipeline
from ingest.capture.models import Agent, IngestJob
from ingest.capture.pipeline.limits import Gunzip, GzipError, InputTooLarge
from ingest.capture.uploads import SPOOL_RETRY_AFTER, SpoolFull, UploadTooLarge, UploadWriter
from mcptax.formats import FORMATS

router = Router(tags=["ingest"])
logger = logging.getLogger(__name__)


class TokenRequest(HttpRequest):
    """A request that passed config.api.TeamTokenAuth: the token and its team are on it."""

    team: Team
    api_token: ApiToken


READ_CHUNK = 256 * 1024
# Seconds a client is told to wait when the ingest storage cannot take a body (503).
STORAGE_RETRY_AFTER = 30
GZIP_MAGIC = b"\x1f\x8b"
WAIT_POLL_SECONDS = 0.2


class IngestJobOut(Schema):
    code: uuid.UUID
    status: str
    source: str
    filename: str
    format: str
    total_bytes: int
    bytes_done: int
    lines_read: int
    stored: int
    duplicate: int
    ignored: int
    quarantined: int
    calls_stored: int
    reconciles: bool
    ignored_reasons: dict[str, int]
    error: str
    attempts: int
    retry_at: datetime | None
    # Set when the job is saved but no worker could be told (the broker is down): when it will run.
    note: str = ""
    created: datetime
    finished: datetime | None
    url: str

    @staticmethod
    def resolve_url(job: IngestJob) -> str:
        return f"/api/v1/ingest/{job.code}"


class ErrorOut(Schema):
    detail: str


class IngestParams(Schema):
    format: str = "auto"
    filename: str = ""
    # The batch is always stored and queued before the answer; ``wait`` only waits (at most
    # INGEST_API_WAIT_SECONDS) for a worker to finish it, so a web worker is never held for long.
    wait: bool = False


class AgentOut(Schema):
    id: int
    family: str
    name: str
    version: str
    title: str
    first_seen: datetime
    last_seen: datetime
    calls: int

    @staticmethod
    def resolve_calls(agent: Agent) -> int:
        calls: int = getattr(agent, "call_count")  # noqa: B009 - annotated by the agents() query
        return calls


def _error(status: int, detail: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


class BadBody(Exception):
    pass


def _is_gzip(request: HttpRequest) -> bool:
    encoding = request.headers.get("Content-Encoding", "").lower()
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    return "gzip" in encoding or content_type in ("application/gzip", "application/x-gzip")


def spool_body(request: HttpRequest, upload: UploadWriter, limit: int) -> None:
    """Stream the request body (gunzipped when it is gzip) into ``upload``.

    The limit applies to the body as sent and, for gzip, to the decompressed data too (the
    writer's own limit), so a small compressed body cannot unpack into an unbounded file.
    """
    gunzip: Gunzip | None = None
    received = 0
    read = body_reader(request)
    while chunk := read(READ_CHUNK):
        received += len(chunk)
        if received > limit:
            raise UploadTooLarge(f"body over {limit} bytes")
        if received == len(chunk) and (_is_gzip(request) or chunk.startswith(GZIP_MAGIC)):
            # A JSON line never starts with the gzip magic, so sniffing is safe and saves a
            # client that forgot the header.
            gunzip = Gunzip(limit)
        try:
            upload.write(gunzip.feed(chunk) if gunzip is not None else chunk)
        except InputTooLarge:
            raise UploadTooLarge(f"body over {limit} bytes") from None
        except GzipError as exc:
            raise BadBody(f"the body is {exc}") from None
    if gunzip is not None:
        try:
            gunzip.close()
        except GzipError:
            raise BadBody("the gzip body is truncated") from None


def _too_large(limit: int) -> JsonResponse:
    return _error(
        413,
        f"The body is larger than the ingest limit of {filesizeformat(limit)} ({limit} bytes, "
        "INGEST_API_MAX_BYTES; for gzip the limit applies to the decompressed data too). "
        "Send smaller batches.",
    )


@router.post(
    "/ingest",
    response={
        200: IngestJobOut,
        202: IngestJobOut,
        400: ErrorOut,
        411: ErrorOut,
        413: ErrorOut,
        429: ErrorOut,
        503: ErrorOut,
        507: ErrorOut,
    },
    summary="Ingest a batch of log lines (JSONL, or gzip of it)",
    description="The body is the log itself: envelope JSONL (the logging proxy's `--push`), a HAR, a "
    "Claude Code session or a Codex rollout, with a Content-Length or chunked (`Transfer-Encoding: "
    "chunked`, read up to the limit). Send it gzip-compressed with `Content-Encoding: gzip` or "
    "`Content-Type: application/gzip`. Limits: INGEST_API_MAX_BYTES per body (413) and "
    "INGEST_API_RATE_PER_MINUTE requests per token (429 with Retry-After). The batch is stored and "
    "queued for a worker, and the answer is 202 with the job; its counts come from "
    "`GET /api/v1/ingest/{code}` (`url`). `?wait=true` waits up to INGEST_API_WAIT_SECONDS for the "
    "worker to finish it: 200 with the counts if it did, else 202 as without. With the broker down "
    "the job is still saved (202, and `note` says when the sweep starts it). With the cache "
    "(Redis) or the database down the answer is 503 with Retry-After; with the server's upload "
    "spool full, 507 with Retry-After and nothing kept.",
)
def ingest(request: TokenRequest, params: Query[IngestParams]) -> JsonResponse | Status[IngestJob]:
    rate = settings.INGEST_API_RATE_PER_MINUTE
    wait = ratelimit.retry_after("ingest", request.api_token.key_id, rate)
    if wait is not None:
        return ratelimit.too_many_requests("ingest", rate, wait, "INGEST_API_RATE_PER_MINUTE")
    if params.format != "auto" and params.format not in FORMATS:
        return _error(400, f"Unknown format {params.format!r}; use auto or one of {', '.join(FORMATS)}.")
    limit = settings.INGEST_API_MAX_BYTES
    if declared_length(request) > limit:
        return _too_large(limit)

    try:
        with UploadWriter(request.team, "api.jsonl", max_bytes=limit) as upload:
            spool_body(request, upload, limit)
    except UploadTooLarge:
        return _too_large(limit)
    except BadBody as exc:
        return _error(400, str(exc))
    except SpoolFull as exc:  # the writer removed what it had written
        return _error(exc.status, exc.reason, Retry_After=str(SPOOL_RETRY_AFTER))
    if upload.written == 0:
        upload.discard()
        if is_chunked(request):
            return _error(
                411,
                "No body arrived with this chunked request: it was empty, or this web server does not "
                "pass chunked bodies on (Django's development server); send a Content-Length, or run "
                "the web process under gunicorn.",
            )
        return _error(400, "The body is empty; send JSONL lines (or gzip of them).")

    filename = params.filename.strip()[:200] or f"api {request.api_token.name}"
    try:
        stored = upload.store()
    except SpoolFull as exc:
        return _error(exc.status, exc.reason, Retry_After=str(SPOOL_RETRY_AFTER))
    except OSError:
        logger.exception("ingest API: the body could not be saved into the ingest storage")
        return _error(
            503,
            "The body could not be kept: the ingest storage is unavailable. Nothing was stored; "
            "send it again later.",
            Retry_After=str(STORAGE_RETRY_AFTER),
        )
    try:
        job = pipeline.create_job(
            request.team,
            source=IngestJob.Source.API,
            filename=filename,
            storage_name=stored,
            size=upload.written,
            format=params.format,
        )
    except BaseException:
        upload.discard()  # no job owns the file: it must not outlive the request
        raise
    return _queue_and_answer(job, params.wait)


def _queue_and_answer(job: IngestJob, wait: bool) -> Status[IngestJob]:
    # Saved either way: with the broker down the answer still says 202, and when it runs. The
    # ingest itself is a worker's: run here, a large batch would hold this web worker for a minute.
    if pipeline.enqueue_job(job).ok is False:
        job.note = pipeline.queued_for_sweep_message()  # type: ignore[attr-defined]  # read by IngestJobOut
        return Status(202, job)
    if wait and _wait_for(job, settings.INGEST_API_WAIT_SECONDS):
        return Status(200, job)
    return Status(202, job)


def _wait_for(job: IngestJob, seconds: float) -> bool:
    """Wait up to ``seconds`` for a worker to end ``job`` (reloaded in place); True if it ended."""
    deadline = time.monotonic() + seconds
    while True:
        job.refresh_from_db()
        if job.status in (IngestJob.Status.DONE, IngestJob.Status.FAILED):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))


@router.get(
    "/ingest/{code}",
    response={200: IngestJobOut, 404: ErrorOut},
    summary="Status and counts of an ingest job",
)
def ingest_status(request: TokenRequest, code: uuid.UUID) -> IngestJob:
    return get_object_or_404(IngestJob, team=request.team, code=code)


@router.get("/agents", response=list[AgentOut], summary="Agents (MCP clients) seen in the team's traffic")
@paginate(LimitOffsetPagination)
def agents(request: TokenRequest) -> QuerySet[Agent]:
    return (
        Agent.objects.filter(team=request.team)
        .annotate(call_count=Count("calls"))
        .order_by("family", "name", "version")
    )
