"""The CI gate endpoint of the JSON API: `POST check` judges a candidate tools/list.

Scoped to the token's team (`request.team`, set by dashboard.teams.api.TeamTokenAuth).
"""

from __future__ import annotations

from typing import Any

from ninja import Field, Router, Schema

from dashboard.alerts import gate
from dashboard.servers.models import McpServer
from dashboard.teams.api import TeamApiRequest

router = Router(tags=["CI gate"])


class CheckIn(Schema):
    server: str = Field(..., description="Name of a server registered in the token's team.")
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
    report: str = Field(..., description="Markdown for one sticky PR comment; starts with a marker line.")


class ErrorOut(Schema):
    detail: str


@router.post(
    "/check",
    response={200: CheckOut, 404: ErrorOut, 422: ErrorOut},
    summary="CI gate: judge a candidate tools/list against the server's latest snapshot and budgets",
)
def check(request: TeamApiRequest, payload: CheckIn) -> tuple[int, dict[str, Any]]:
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
        )
    except ValueError as exc:
        return 422, {"detail": f"tools_list: {exc}"}
    return 200, result.to_dict()
