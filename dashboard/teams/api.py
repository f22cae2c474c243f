"""Team-token authentication for the JSON API and the endpoint that says whose token it is."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.security import HttpBearer

from dashboard.teams.models import ApiToken, Team


class TeamApiRequest(HttpRequest):
    """A request `TeamTokenAuth` let in: API views type their request with this."""

    team: Team
    api_token: ApiToken


def declared_length(request: HttpRequest) -> int:
    """The body size the client announced (0 when absent or garbled), so an over-size body can be
    refused before a byte of it is read."""
    try:
        return int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return 0


class TeamTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        api_token = ApiToken.authenticate(token)
        if api_token is None:
            return None
        request.team = api_token.team  # type: ignore[attr-defined]  # what makes it a TeamApiRequest
        request.api_token = api_token  # type: ignore[attr-defined]  # (ditto)
        return api_token


router = Router(tags=["team"])


class TeamOut(Schema):
    name: str
    slug: str
    token_name: str


@router.get("/team", response=TeamOut, summary="The team this token belongs to")
def whoami(request: TeamApiRequest) -> dict[str, Any]:
    return {"name": request.team.name, "slug": request.team.slug, "token_name": request.api_token.name}
