"""Read-side queries of the alert pages: the alert list, budget rules, channels and their attempts."""

from __future__ import annotations

from django.db.models import QuerySet

from dashboard.alerts.models import OPEN_STATES, Alert, AlertState, Threshold
from dashboard.alerts.notify.models import Channel, Notification
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
    return Alert.objects.filter(team=team).select_related("server", "stack", "acknowledged_by")


def alert_list(team: Team, state: str, sort: str) -> QuerySet[Alert]:
    """The team's alerts in `state` (a key of STATE_FILTERS) ordered by `sort` (a key of SORTS)."""
    rows = alerts(team)
    states = STATE_FILTERS[state]
    if states is not None:
        rows = rows.filter(state__in=states)
    return rows.order_by(*SORTS[sort])


def thresholds(team: Team) -> QuerySet[Threshold]:
    return team.thresholds.select_related("server", "stack")


def threshold_rows(team: Team) -> QuerySet[Threshold]:
    return thresholds(team).order_by("server__name", "stack__name", "measure", "level")


def channels(team: Team) -> QuerySet[Channel]:
    return team.channels.all()


def channel_attempts(channel: Channel) -> QuerySet[Notification]:
    return channel.notifications.select_related("delivery__event").order_by("-created", "-pk")
