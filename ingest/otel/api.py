"""The OTLP/HTTP logs receiver: ``POST /api/v1/otel/v1/logs``.

A client sets ``OTEL_EXPORTER_OTLP_ENDPOINT=<site>/api/v1/otel`` (its exporter appends
``/v1/logs``) and ``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <team token>``. The body
(``application/x-protobuf`` or ``application/json``, ``Content-Encoding: gzip`` or not) is
spooled and kept in the ingest storage first; a job on the ``ingest`` queue then maps its
records (``ingest.otel.run``). The answer is OTLP's own: an empty ``ExportLogsServiceResponse``
(success), or one with ``partial_success`` naming the records that cannot be read as log records
(they are kept, quarantined); 400 for a body that is no OTLP logs request at all (kept and
quarantined too), 413 over OTEL_MAX_BYTES, 429 over OTEL_RATE_PER_MINUTE and 503 when the
storage or the database cannot take it, both with ``Retry-After`` so that exporters back off.
With the task queue down the body is kept and answered as success: the stalled-job sweep runs it.
"""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.http import HttpResponse
from google.protobuf import json_format
from ninja import Router
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from dashboard.teams import ratelimit
from dashboard.teams.api import declared_length
from ingest.capture import pipeline
from ingest.capture.api import STORAGE_RETRY_AFTER, BadBody, TokenRequest, spool_body
from ingest.capture.models import IngestJob
from ingest.capture.uploads import UploadTooLarge, UploadWriter
from ingest.otel.run import FORMAT
from mcptax.otel.decode import check_body

router = Router(tags=["telemetry"])
logger = logging.getLogger(__name__)
PROTOBUF_TYPE = "application/x-protobuf"


def _wants_json(request: TokenRequest) -> bool:
    return "json" in request.headers.get("Content-Type", "").lower()


def _answer(
    request: TokenRequest, status: int, rejected: int = 0, message: str = "", **headers: str
) -> HttpResponse:
    """OTLP's reply in the request's own encoding: an ExportLogsServiceResponse for success (with
    ``partial_success`` when records were rejected), else a JSON or text error with the reason."""
    if status == 200:
        reply = ExportLogsServiceResponse()
        if rejected:
            reply.partial_success.rejected_log_records = rejected
            reply.partial_success.error_message = message
        if _wants_json(request):
            body = json.dumps(json_format.MessageToDict(reply)).encode()
            response = HttpResponse(body, status=200, content_type="application/json")
        else:
            response = HttpResponse(reply.SerializeToString(), status=200, content_type=PROTOBUF_TYPE)
    else:
        response = HttpResponse(
            json.dumps({"detail": message}).encode(), status=status, content_type="application/json"
        )
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


@router.post(
    "/otel/v1/logs",
    response={200: None, 400: None, 401: None, 413: None, 429: None, 503: None},
    summary="OpenTelemetry logs (OTLP/HTTP, protobuf or JSON, gzip or not) from Claude Code and Codex",
    description="Set `OTEL_EXPORTER_OTLP_ENDPOINT` to `<site>/api/v1/otel` and `OTEL_EXPORTER_OTLP_HEADERS` "
    "to `Authorization=Bearer <team token>`. The body is kept and processed on the ingest queue; the "
    "answer is OTLP's (partial success names records that are no log records). Limits: OTEL_MAX_BYTES "
    "(413) and OTEL_RATE_PER_MINUTE per token (429 with Retry-After).",
)
def otel_logs(request: TokenRequest) -> HttpResponse:
    rate = settings.OTEL_RATE_PER_MINUTE
    wait = ratelimit.retry_after("otel", request.api_token.key_id, rate)
    if wait is not None:
        message = f"Rate limit of {rate} requests per minute for this token reached (OTEL_RATE_PER_MINUTE)."
        return _answer(request, 429, message=message, Retry_After=str(wait))
    limit = settings.OTEL_MAX_BYTES
    too_large = f"The body is over the telemetry limit of {limit} bytes (OTEL_MAX_BYTES, after gunzip too)."
    if declared_length(request) > limit:
        return _answer(request, 413, message=too_large)
    try:
        with UploadWriter(request.team, "otlp-logs", max_bytes=limit) as upload:
            spool_body(request, upload, limit)
    except UploadTooLarge:
        return _answer(request, 413, message=too_large)
    except BadBody as exc:
        return _answer(request, 400, message=str(exc))
    if upload.written == 0:
        upload.discard()
        return _answer(request, 400, message="The body is empty.")
    with open(upload.path, "rb") as spooled:
        records, unreadable, why = check_body(spooled.read())
    try:
        stored = upload.store()
    except OSError:
        logger.exception("otel: the body could not be saved into the ingest storage")
        message = "The body could not be kept (the ingest storage is unavailable); send it again later."
        return _answer(request, 503, message=message, Retry_After=str(STORAGE_RETRY_AFTER))
    try:
        job = pipeline.create_job(
            request.team,
            source=IngestJob.Source.OTEL,
            filename=f"otlp {request.api_token.name}"[:200],
            storage_name=stored,
            size=upload.written,
            format=FORMAT,
        )
    except BaseException:
        upload.discard()
        raise
    pipeline.enqueue_job(job)  # with the broker down the job stays queued for the stalled-job sweep
    if unreadable and unreadable == records:
        return _answer(
            request, 400, message=f"The body is no OTLP logs request ({why}); it is kept, quarantined."
        )
    if unreadable:
        message = f"{unreadable} of {records} records are no log records ({why}); they are kept, quarantined."
        return _answer(request, 200, rejected=unreadable, message=message)
    return _answer(request, 200)
