from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from dashboard.teams.access import capabilities_for
from dashboard.teams.models import Team

# Alert.state's value for an alert nobody has handled; spelled here because teams sits below
# alerts in the dependency order and reaches alerts only through the reverse relation.
ACTIVE_ALERT_STATE = "active"


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    teams = list(Team.objects.for_user(user).order_by("name"))
    match = getattr(request, "resolver_match", None)
    slug = match.kwargs.get("team_slug") if match else None
    current = next((t for t in teams if t.slug == slug), teams[0] if teams else None)
    active_alerts = current.alerts.filter(state=ACTIVE_ALERT_STATE).count() if current is not None else 0
    return {
        "nav_teams": teams,
        "nav_team": current,
        "nav_active_alerts": active_alerts,
        # The team switcher marks "Create a team" instead of a team on the page that does it.
        "nav_creating": bool(match and match.url_name == "team_create"),
        # What the user's role in the page's team permits (dashboard.teams.permissions), so a page
        # hides the controls the server would refuse: `{% if can.manage_budgets %}`.
        "can": capabilities_for(request, current),
    }
