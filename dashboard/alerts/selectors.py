"""Read-side queries of the alert pages: the alert list, budgets, channels and their attempts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.db.models import Case, Q, QuerySet, Value, When

from dashboard.alerts.models import (
    FIDELITY_MEASURES,
    OPEN_STATES,
    Alert,
    AlertState,
    Budget,
    Level,
    about_tool,
)
from dashboard.alerts.notify.models import Channel, Notification
from dashboard.servers.models import McpServer
from dashboard.teams.models import Team

STATE_FILTERS: dict[str, list[str] | None] = {
    "open": list(OPEN_STATES),
    "active": [AlertState.ACTIVE],
    "acknowledged": [AlertState.ACKNOWLEDGED],
    "silenced": [AlertState.SILENCED],
    "resolved": [AlertState.RESOLVED],
    "all": None,
}
SORTS = {
    "opened": ("opened_at", "pk"),
    "-opened": ("-opened_at", "-pk"),
    "level": ("level", "-opened_at", "-pk"),  # "error" sorts before "warning"
    "subject": ("subject_label", "-opened_at"),
    "value": ("-value", "-pk"),
}


def alerts(team: Team) -> QuerySet[Alert]:
    return Alert.objects.filter(team=team).select_related(
        "team", "server", "stack", "acknowledged_by", "resolved_by", "resolved_snapshot", "budget"
    )


def alert_list(team: Team, state: str, sort: str) -> QuerySet[Alert]:
    """The team's alerts in `state` (a key of STATE_FILTERS) ordered by `sort` (a key of SORTS)."""
    rows = alerts(team)
    states = STATE_FILTERS[state]
    if states is not None:
        rows = rows.filter(state__in=states)
    return rows.order_by(*SORTS[sort])


def budgets(team: Team) -> QuerySet[Budget]:
    return team.budgets.select_related("server", "stack")


def budget_rows(team: Team) -> QuerySet[Budget]:
    return budgets(team).order_by("server__name", "stack__name", "measure", "level")


def channels(team: Team) -> QuerySet[Channel]:
    return team.channels.all()


def channel_attempts(channel: Channel) -> QuerySet[Notification]:
    return channel.notifications.select_related("delivery__event").order_by("-created", "-pk")


BANNER_SHOWN = 5


@dataclass
class BannerScope:
    """Whose open alerts a banner shows: the whole team, one server, one tool of a server, or one
    agent family."""

    server: McpServer | None = None
    family: str = ""
    tool: str = ""

    @property
    def query(self) -> str:
        if self.server is not None:
            tool = f"&{urlencode({'tool': self.tool})}" if self.tool else ""
            return f"server={self.server.code}{tool}"
        return f"agent={self.family}" if self.family else ""


@dataclass
class Banner:
    alerts: list[Alert] = field(default_factory=list)
    total: int = 0
    errors: int = 0

    @property
    def more(self) -> int:
        return max(0, self.total - len(self.alerts))


def banner_scope(team: Team, params: Mapping[str, Any]) -> BannerScope:
    code = params.get("server") or ""
    if code:
        server = team.servers.filter(code=code).first() if _is_uuid(code) else None
        if server is None:
            return BannerScope()
        return BannerScope(server=server, tool=str(params.get("tool") or "")[:200])
    return BannerScope(family=str(params.get("agent") or "")[:200])


def _is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True


def banner(team: Team, scope: BannerScope) -> Banner:
    """The scope's open alerts, errors first then newest, and how many there are."""
    rows = alerts(team).filter(state__in=OPEN_STATES)
    if scope.server is not None and scope.tool:
        rows = rows.filter(about_tool(scope.server, scope.tool))
    elif scope.server is not None:
        rows = rows.filter(server=scope.server)
    elif scope.family:
        # Agent alerts name the agent as "<family> <version>" (ingest.fidelity.alerts).
        rows = rows.filter(rule_key__startswith="agent:").filter(
            Q(subject_label=scope.family) | Q(subject_label__startswith=scope.family + " ")
        )
    # Budget breaches (the fixed tax every request pays) before fidelity alerts, then errors before
    # warnings ("error" sorts first), then newest.
    fidelity_last = Case(When(measure__in=list(FIDELITY_MEASURES), then=Value(1)), default=Value(0))
    ordered = rows.order_by(fidelity_last, "level", "-opened_at", "-pk")
    shown = list(ordered[:BANNER_SHOWN])
    return Banner(alerts=shown, total=rows.count(), errors=rows.filter(level=Level.ERROR).count())
