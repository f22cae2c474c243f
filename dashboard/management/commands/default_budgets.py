"""Give an existing team the default budgets new teams start with (docs/operations.md)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.alerts.defaults import create_default_budgets
from dashboard.alerts.models import Measure
from dashboard.teams.models import Team


class Command(BaseCommand):
    help = "Add the default budgets (growth per release 10%/25%, stack fixed tax 10% of the window) a team lacks."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("team", help="the team's slug")

    def handle(self, *args: Any, team: str, **options: Any) -> None:
        found = Team.objects.filter(slug=team).first()
        if found is None:
            known = ", ".join(Team.objects.order_by("slug").values_list("slug", flat=True)[:20]) or "none yet"
            raise CommandError(f"No team with the slug {team!r} (teams: {known}).")
        made = create_default_budgets(found)
        if not made:
            self.stdout.write(f"{found.name} already has every default budget; nothing added.")
        for rule in made:
            self.stdout.write(
                f"Added {Measure(rule.measure).label} {rule.level} {rule.limit:g} to {found.name}."
            )
