"""The JSON API under /api/v1/, authenticated by team API tokens (Authorization: Bearer ...).

Each sub-package contributes a router; this module only assembles them.
"""

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from dashboard.alerts.api import router as gate_router
from dashboard.servers.api import router as servers_router
from dashboard.system import outages
from dashboard.system.api import router as health_router
from dashboard.system.middleware import unavailable
from dashboard.teams.api import TeamTokenAuth
from dashboard.teams.api import router as team_router
from ingest.capture.api import router as ingest_router
from ingest.fidelity.api import router as fidelity_router
from ingest.otel.api import router as otel_router

api = NinjaAPI(
    title="mcp-tax API",
    version="1",
    description="Fixed-tax history, the CI budget gate and traffic ingest. Authenticate with a team "
    "API token: `Authorization: Bearer mcpt_...`.",
    auth=TeamTokenAuth(),
    urls_namespace="api",
)

for _router in (
    team_router,
    servers_router,
    gate_router,
    ingest_router,
    otel_router,
    fidelity_router,
    health_router,
):
    api.add_router("", _router)


def _unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    """A route (or its token check, or the rate limiter's cache) ran into a broker or database
    outage: 503 with Retry-After and the reason, recorded for the health page; never a 500."""
    response = unavailable(request, exc)
    assert response is not None  # every class below is an outage
    return response


for _exc in (*outages.BROKER_ERRORS, *outages.DATABASE_ERRORS, outages.ServiceUnavailable):
    api.add_exception_handler(_exc, _unavailable)  # type: ignore[arg-type]
