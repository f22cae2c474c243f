"""The budgets a new team starts with, so the gate and the alerts guard it from its first poll.

- growth per release: warning above 10 %, error above 25 % (team default, every server);
- fixed tax per stack: warning above 10 % of the team's context window (team default, every stack).

They are ordinary budgets marked `is_default`: the budgets page shows them as defaults, and they can
be edited, disabled or deleted like any other. Teams that existed before defaults were introduced
are left as they are (no data migration): their owners chose their budgets, and adding budgets on
upgrade would open alerts nobody asked for. `manage.py default_budgets TEAM` adds them by hand.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from dashboard.alerts import budgets
from dashboard.alerts.models import Budget, Level, Measure
from dashboard.teams.models import Team

STACK_SHARE_OF_WINDOW = 0.10
DEFAULT_RULES: list[tuple[str, str, float | None]] = [
    (Measure.RELEASE_GROWTH_PCT, Level.WARNING, 10.0),
    (Measure.RELEASE_GROWTH_PCT, Level.ERROR, 25.0),
    # None: computed from the team's context window.
    (Measure.STACK_FIXED_TAX_TOKENS, Level.WARNING, None),
]


def default_limit(team: Team, measure: str, limit: float | None) -> float:
    if limit is not None:
        return limit
    return float(round(team.context_window * STACK_SHARE_OF_WINDOW))


def create_default_budgets(team: Team) -> list[Budget]:
    """Add each default the team lacks (a team-wide budget for that measure and level); idempotent."""
    made = []
    with transaction.atomic():
        for measure, level, limit in DEFAULT_RULES:
            exists = Budget.objects.filter(
                team=team, server=None, stack=None, measure=measure, level=level
            ).exists()
            if not exists:
                made.append(
                    Budget.objects.create(
                        team=team,
                        measure=measure,
                        level=level,
                        limit=default_limit(team, measure, limit),
                        is_default=True,
                    )
                )
    if made:
        budgets.evaluate_team(team)
    return made


def on_team_created(sender: object, team: Team, **kwargs: Any) -> None:
    """Receiver of `team_created` (connected in DashboardConfig.ready)."""
    create_default_budgets(team)
