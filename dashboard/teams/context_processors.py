from django.http import HttpRequest

from dashboard.teams.models import Team


def navigation(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    teams = list(Team.objects.for_user(user).order_by("name"))
    match = getattr(request, "resolver_match", None)
    slug = match.kwargs.get("team_slug") if match else None
    current = next((t for t in teams if t.slug == slug), teams[0] if teams else None)
    active_alerts = 0
    if current is not None:
        from dashboard.alerts.models import Alert, AlertState

        active_alerts = Alert.objects.filter(team=current, state=AlertState.ACTIVE).count()
    return {"nav_teams": teams, "nav_team": current, "nav_active_alerts": active_alerts}
