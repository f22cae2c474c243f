"""What the pages read of telemetry: the methodology page's measured findings, the Ingest page's
telemetry source (last report per agent), and an agent's measured tokens per session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Min, QuerySet, Sum
from django.urls import reverse

from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
from ingest.capture.models import Agent
from ingest.otel.models import MeasuredRequest, SentTools, TelemetryAgent

# Rows a page lists at most (newest first).
FINDINGS_LIMIT = 50
SESSIONS_LIMIT = 50


def methodology_findings(user: Any) -> list[dict[str, Any]]:
    """Differences over 2% between what a client sent and the profile's prediction, newest
    request first, one row per (team, server, encoding)."""
    rows = (
        SentTools.objects.filter(team__in=Team.objects.for_user(user))
        .exclude(predicted={})
        .select_related("team", "agent")
        .order_by("-at", "-pk")[:500]
    )
    servers = {
        s.pk: s for s in McpServer.objects.filter(team__in=Team.objects.for_user(user)).select_related("team")
    }
    seen: set[tuple[int, str, str]] = set()
    out: list[dict[str, Any]] = []
    for row in rows:
        for label, comparison in (row.predicted or {}).items():
            for encoding, diff in comparison.get("differences", {}).items():
                key = (row.team_id, label, encoding)
                if key in seen or abs(diff) <= 0.02:
                    seen.add(key)
                    continue
                seen.add(key)
                server = servers.get(comparison.get("server"))
                out.append(
                    {
                        "team": row.team.name,
                        "server": label,
                        "server_url": reverse("server_detail", args=[row.team.slug, server.code])
                        if server
                        else "",
                        "version": comparison.get("version", ""),
                        "agent": str(row.agent) if row.agent else "",
                        "encoding": encoding,
                        "measured": comparison["measured"][encoding],
                        "predicted": comparison["predicted"][encoding],
                        "difference_pct": round(diff * 100, 1),
                        "at": row.at,
                    }
                )
    return out[:FINDINGS_LIMIT]


def telemetry_agents(team: Team) -> QuerySet[TelemetryAgent]:
    return TelemetryAgent.objects.filter(team=team).select_related("agent").order_by("-last_received")


@dataclass
class SessionTokens:
    session_key: str
    requests: int
    first: datetime | None
    last: datetime | None
    input_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    output_tokens: int
    # Tokens (cl100k_base) of the tool definitions the session's requests sent, when their bodies
    # were received: all tools and the MCP ones sent in full; None without a body.
    tool_tokens: int | None = None
    mcp_tokens: int | None = None
    bodies: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens

    @property
    def tools_per_request(self) -> int:
        return round((self.tool_tokens or 0) / self.bodies) if self.bodies else 0

    @property
    def tool_share_pct(self) -> float | None:
        """The tool definitions' share of the prompt tokens, over the requests whose body came."""
        if self.tool_tokens is None or not self.prompt_tokens or not self.requests:
            return None
        per_request_prompt = self.prompt_tokens / self.requests
        per_request_tools = self.tool_tokens / self.bodies
        return round(100 * per_request_tools / per_request_prompt, 1)


def agent_sessions(team: Team, agents: list[Agent], encoding: str = "cl100k_base") -> list[SessionTokens]:
    """Measured tokens per session of ``agents`` (newest first), with the tool-definition share."""
    sums = (
        MeasuredRequest.objects.filter(team=team, agent__in=agents)
        .values("session_id", "session__session_key")
        .annotate(
            requests=Count("pk"),
            first=Min("at"),
            last=Max("at"),
            input=Sum("input_tokens"),
            cache_read=Sum("cache_read_tokens"),
            cache_creation=Sum("cache_creation_tokens"),
            output=Sum("output_tokens"),
        )
        .order_by("-last")[:SESSIONS_LIMIT]
    )
    rows = {
        r["session_id"]: SessionTokens(
            r["session__session_key"],
            r["requests"],
            r["first"],
            r["last"],
            r["input"] or 0,
            r["cache_read"] or 0,
            r["cache_creation"] or 0,
            r["output"] or 0,
        )
        for r in sums
    }
    for sent in SentTools.objects.filter(team=team, session_id__in=list(rows)).only(
        "session_id", "totals", "mcp_loaded"
    ):
        row = rows[sent.session_id]
        row.tool_tokens = (row.tool_tokens or 0) + int(sent.totals.get(encoding, 0))
        row.mcp_tokens = (row.mcp_tokens or 0) + int(sent.mcp_loaded.get(encoding, 0))
        row.bodies += 1
    return list(rows.values())
