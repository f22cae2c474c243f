"""Load demo data: a demo user and team (other parts of the product add their demo data here)."""

import json
import time
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from dashboard.demo import load_demo
from dashboard.teams.models import Membership, Team

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-tax-2026"
DEMO_TEAM = "Demo team"


def ensure_demo_user_and_team() -> tuple[User, Team]:
    user, created = User.objects.get_or_create(username=DEMO_USERNAME, defaults={"email": "demo@localhost"})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save()
    team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": DEMO_TEAM})
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": Membership.Role.OWNER})
    return user, team


class Command(BaseCommand):
    help = "Create the demo user and team and load demo data. Safe to run again."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
        parser.add_argument("--skip-servers", action="store_true", help="Only the user and team.")

    def handle(self, *args: Any, **options: Any) -> None:
        user, team = ensure_demo_user_and_team()
        summary: dict[str, Any] = {"username": DEMO_USERNAME, "password": DEMO_PASSWORD, "team": team.slug}
        started = time.monotonic()

        def progress(step: str) -> None:
            # On stderr under --json, so stdout stays one JSON document.
            out = self.stderr if options["json"] else self.stdout
            out.write(f"  demo: {step} ({time.monotonic() - started:.0f} s so far)…")

        summary |= {"snapshots": 0} | load_demo(
            team, user, servers=not options["skip_servers"], progress=progress
        )
        if options["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(f"Demo user: {DEMO_USERNAME} / {DEMO_PASSWORD} (team {team.name!r})")
