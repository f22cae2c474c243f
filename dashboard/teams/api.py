"""Team-token authentication for the JSON API and the endpoint that says whose token it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.core.handlers.wsgi import WSGIRequest
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


def is_chunked(request: HttpRequest) -> bool:
    return "chunked" in request.headers.get("Transfer-Encoding", "").lower()


def body_reader(request: HttpRequest) -> Callable[[int], bytes]:
    """What reads the body: Django's request, or for a chunked body without Content-Length the
    server's own input (gunicorn de-chunks it; Django would see a body of length 0)."""
    if isinstance(request, WSGIRequest) and is_chunked(request) and not request.headers.get("Content-Length"):
        stream = request.environ["wsgi.input"]
        return cast(Callable[[int], bytes], stream.read)
    return request.read


def read_body(request: HttpRequest, limit: int, chunk: int = 256 * 1024) -> bytes | None:
    """The whole body (chunked or not), or None as soon as it is over ``limit`` bytes."""
    read = body_reader(request)
    parts: list[bytes] = []
    size = 0
    while part := read(chunk):
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
    return b"".join(parts)


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
