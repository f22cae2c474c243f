"""The CI gate endpoint of the JSON API: `POST check` judges a candidate tools/list.

Scoped to the token's team (`request.team`, set by dashboard.teams.api.TeamTokenAuth). The body is
read here, not by ninja, so the rate limit and the size limit are applied before a byte of it is
parsed: a CI job cannot tie up a web worker with a huge list.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import pydantic
from django.conf import settings
from django.http import JsonResponse
from django.template.defaultfilters import filesizeformat
from ninja import Field, Router, Schema
from ninja.errors import ValidationError

from dashboard.alerts import gate
from dashboard.servers.models import McpServer
from dashboard.teams import ratelimit
from dashboard.teams.api import TeamApiRequest, declared_length, read_body
from dashboard.teams.validators import check_name

router = Router(tags=["CI gate"])


class CheckIn(Schema):
    server: Annotated[str, pydantic.AfterValidator(check_name)] = Field(
        ..., description="Name of a server registered in the token's team."
    )
    tools_list: dict[str, Any] | list[Any] = Field(
        ...,
        description="A tools/list result ({'tools': [...]}), a bare array of tools, or {initialize, tools}.",
    )
    instructions: str | None = Field(None, description="The initialize instructions, if the server has any.")
    version: str | None = Field(None, description="The candidate's serverInfo.version.")
    git_ref: str | None = Field(None, description="Branch, tag or commit, shown in the report.")


class CheckOut(Schema):
    server: str
    verdict: str = Field(
        ..., description="pass | warn | fail; error when the budgets themselves could not be judged"
    )
    status: str = Field(
        ..., description="ok, or error when part of the analysis failed (a bug of ours): see errors"
    )
    errors: list[str] = Field(..., description="Each failed analysis as 'part: reason'.")
    encoding: str
    version: str | None
    git_ref: str | None
    totals: dict[str, Any]
    rules: list[gate.RuleOutcome]
    tools: list[gate.ToolDelta]
    findings: list[dict[str, Any]]
    loading: dict[str, Any] = Field(
        ...,
        description="Under the team's client: the candidate's and baseline's upfront per request in each "
        "loading mode, and each stack of the server with the candidate in it (mode, upfront, the auto "
        "rule's verdict before and after).",
    )
    report: str = Field(..., description="Markdown for one sticky PR comment; starts with a marker line.")


class ErrorOut(Schema):
    detail: str


def _too_large(detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=413)


def _read_payload(request: TeamApiRequest) -> CheckIn | JsonResponse:
    """The body parsed as CheckIn, or the 413 that refuses it unread (ninja's 422 when invalid)."""
    limit = settings.GATE_MAX_BYTES
    over = (
        f"The body is larger than the gate's limit of {filesizeformat(limit)} ({limit:,} bytes, "
        "GATE_MAX_BYTES); a tools/list that large is refused, not judged in part."
    )
    if declared_length(request) > limit:
        return _too_large(over)
    body = read_body(request, limit)  # chunked too, as the ingest API reads it
    if body is None:
        return _too_large(over)
    try:
        return CheckIn.model_validate_json(body or b"{}")
    except pydantic.ValidationError as exc:
        raise ValidationError(
            [
                {**e, "loc": ("body", "payload", *e["loc"])}
                for e in exc.errors(include_url=False, include_context=False, include_input=False)
            ]
        ) from None


@router.post(
    "/check",
    response={200: CheckOut, 404: ErrorOut, 413: ErrorOut, 422: ErrorOut, 429: ErrorOut},
    summary="CI gate: judge a candidate tools/list against the server's latest snapshot and budgets",
    description="Limits: GATE_MAX_BYTES per body (with a Content-Length or chunked) and GATE_MAX_TOOLS "
    "tools (413), GATE_RATE_PER_MINUTE requests and GATE_WORK_SECONDS_PER_MINUTE seconds of checking "
    "per token (429 with Retry-After). Findings that take longer than "
    "GATE_TIME_BUDGET_SECONDS are given up: the answer keeps the figures and verdict, with status "
    "`error` and the reason in `errors`.",
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": CheckIn.model_json_schema()}},
            "required": True,
        }
    },
)
def check(request: TeamApiRequest) -> tuple[int, dict[str, Any]] | JsonResponse:
    rate = settings.GATE_RATE_PER_MINUTE
    wait = ratelimit.retry_after("check", request.api_token.key_id, rate)
    if wait is not None:
        return ratelimit.too_many_requests("check", rate, wait, "GATE_RATE_PER_MINUTE")
    budget = settings.GATE_WORK_SECONDS_PER_MINUTE
    wait = ratelimit.work_retry_after("check", request.api_token.key_id, budget)
    if wait is not None:
        return _work_spent(budget, wait)
    started = time.monotonic()
    try:
        return _check(request)
    finally:
        # Every check counts, refused or not: reading and parsing the body is work too.
        ratelimit.charge_work("check", request.api_token.key_id, time.monotonic() - started)


def _work_spent(budget: float, wait: int) -> JsonResponse:
    detail = (
        f"This token used its {budget:g} s of gate work for this minute (GATE_WORK_SECONDS_PER_MINUTE); "
        f"retry in {wait} s. Large tool lists cost more."
    )
    return ratelimit.too_many_requests("check", 0, wait, "GATE_WORK_SECONDS_PER_MINUTE", detail)


def _check(request: TeamApiRequest) -> tuple[int, dict[str, Any]] | JsonResponse:
    payload = _read_payload(request)
    if isinstance(payload, JsonResponse):
        return payload
    server = (
        McpServer.objects.filter(team=request.team, name=payload.server)
        .select_related("current_snapshot")
        .first()
    )
    if server is None:  # a 404 with this message, not get_object_or_404's generic one: CI logs show it
        return 404, {"detail": f"no server named {payload.server!r} in team {request.team.slug!r}"}
    try:
        result = gate.run_check(
            server,
            payload.tools_list,
            instructions=payload.instructions,
            version=payload.version,
            git_ref=payload.git_ref,
            max_tools=settings.GATE_MAX_TOOLS,
            time_budget=settings.GATE_TIME_BUDGET_SECONDS,
        )
    except gate.TooManyTools as exc:
        return _too_large(f"tools_list: {exc}.")
    except ValueError as exc:
        return 422, {"detail": f"tools_list: {exc}"}
    return 200, result.to_dict()
