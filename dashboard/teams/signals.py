"""Signals the teams sub-package sends; receivers are connected in `DashboardConfig.ready`.

``team_created(sender=Team, team=Team)`` is sent once a new team (and its first membership) is
committed, by `dashboard.teams.services.create_team` and by the admin. The alerts sub-package
listens and gives the team its default budgets; teams sits below alerts and never imports it.
"""

from django.dispatch import Signal

team_created = Signal()
