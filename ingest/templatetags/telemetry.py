"""The Ingest page's telemetry card (``{% telemetry_source team %}``): the endpoint, who last
reported and what waits in quarantine, linking to the set-up page."""

from __future__ import annotations

from typing import Any

from django import template

from ingest.capture.models import IngestJob, LineRecord
from ingest.otel import selectors
from ingest.otel.setup import setup_lines

register = template.Library()


@register.inclusion_tag("otel/_source.html", takes_context=True)
def telemetry_source(context: dict[str, Any], team: Any) -> dict[str, Any]:
    request = context["request"]
    return {
        "team": team,
        "setup": setup_lines(request.build_absolute_uri("/").rstrip("/")),
        "agents": selectors.telemetry_agents(team)[:5],
        "quarantined_count": LineRecord.objects.filter(
            team=team, status=LineRecord.Status.QUARANTINED, job__source=IngestJob.Source.OTEL
        ).count(),
    }


@register.inclusion_tag("otel/_agent_sessions.html")
def measured_sessions(team: Any, agents: Any) -> dict[str, Any]:
    """An agent page's measured tokens per session and the tool definitions' share."""
    return {"sessions": selectors.agent_sessions(team, list(agents)), "encoding": "cl100k_base"}
