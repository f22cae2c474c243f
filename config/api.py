"""The JSON API under /api/v1/, authenticated by team API tokens (Authorization: Bearer ...).

Each app contributes a router; this module only assembles them.
"""

from django.http import HttpRequest
from ninja import NinjaAPI, Schema
from ninja.security import HttpBearer

from dashboard.servers.api import router as dashboard_router
from dashboard.teams.models import ApiToken
from ingest.capture.api import router as ingest_router
from ingest.fidelity.api import router as fidelity_router


class TeamTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        api_token = ApiToken.authenticate(token)
        if api_token is None:
            return None
        request.team = api_token.team
        request.api_token = api_token
        return api_token


api = NinjaAPI(
    title="MCP tool-tax API",
    version="1",
    description="Schema-tax history, the CI budget gate and traffic ingest. Authenticate with a team "
    "API token: `Authorization: Bearer mcpt_...`.",
    auth=TeamTokenAuth(),
    urls_namespace="api",
)


class TeamOut(Schema):
    name: str
    slug: str
    token_name: str


@api.get("/team", response=TeamOut, summary="The team this token belongs to")
def whoami(request: HttpRequest) -> dict:
    return {"name": request.team.name, "slug": request.team.slug, "token_name": request.api_token.name}


for _router in (dashboard_router, ingest_router, fidelity_router):
    api.add_router("", _router)
