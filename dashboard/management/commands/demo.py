"""Load demo data: a demo user and team (other parts of the product add their demo data here)."""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from dashboard.teams.models import Membership, Team

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-tax-2026"
DEMO_TEAM = "Demo team"


def ensure_demo_user_and_team() -> tuple[object, Team]:
    User = get_user_model()
    user, created = User.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": "demo@localhost"})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": DEMO_TEAM})
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": Membership.Role.OWNER})
    return user, team


class Command(BaseCommand):
    help = "Create the demo user and team and load demo data. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
        parser.add_argument("--skip-servers", action="store_true", help="Only the user and team.")

    def handle(self, *args, **options):
        from dashboard.demo import build_history, ensure_demo_budgets, ensure_example_servers

        user, team = ensure_demo_user_and_team()
        summary = {"username": DEMO_USERNAME, "password": DEMO_PASSWORD, "team": team.slug, "snapshots": 0}
        # Budgets first, so every historical snapshot gets its limits (the chart's band) and alerts.
        ensure_demo_budgets(team)
        if not options["skip_servers"]:
            for server in ensure_example_servers(team, owner=user):
                summary["snapshots"] += build_history(server)
            from ingest.demo import build_capture_demo

            capture = build_capture_demo(team)  # real agents through the logging proxy, ingested
            summary["captured_calls"] = capture.calls_stored if capture else 0
        if options["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(f"Demo user: {DEMO_USERNAME} / {DEMO_PASSWORD} (team {team.name!r})")
