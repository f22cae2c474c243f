"""`GET /api/v1/health`: the health report for monitoring.

Without a token the answer is only the overall status (`ok`, `degraded`, `down`), so a load
balancer or an uptime check may call it freely; with a team API token it is the whole report, with
the poll, delivery and ingest errors and leases of that token's team. `down` answers 503, the rest
200. A token that cannot be checked (the database is down) gets the status alone, and says why.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from ninja import Router

from dashboard.system import health, outages
from dashboard.teams.models import ApiToken, Team

router = Router(tags=["health"])


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@router.get(
    "/health",
    auth=None,
    summary="Health: database, broker, workers and queues, last errors, stale leases",
    description="Public: `{status, checked_at}` only (`ok`, `degraded` or `down`; `down` answers 503). "
    "With a team API token: the whole report (docs/operations.md lists the fields), the poll, "
    "delivery and ingest parts limited to the token's team.",
)
def health_view(request: HttpRequest) -> JsonResponse:
    token = _bearer(request)
    team: Team | None = None
    note = ""
    if token is not None:
        try:
            api_token = ApiToken.authenticate(token)
        except outages.DATABASE_ERRORS as exc:
            outages.record(outages.DATABASE, exc, "GET /api/v1/health")
            api_token, note = None, "the token could not be checked: the database does not answer"
        else:
            if api_token is None:
                return JsonResponse({"detail": "Unauthorized"}, status=401)
        team = api_token.team if api_token is not None else None
    teams = Team.objects.filter(pk=team.pk) if team is not None else Team.objects.none()
    report = health.build(teams)
    body: dict[str, Any] = (
        health.as_json(report)
        if team is not None
        else {"status": report.status, "checked_at": report.checked_at}
    )
    if note:
        body["detail"] = note
    return JsonResponse(body, status=503 if report.status == health.DOWN else 200)
