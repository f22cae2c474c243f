import json
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from dashboard.teams.services import TeamError, create_team


class Command(BaseCommand):
    help = "Create a team with USER as its owner (names and slugs are unique)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="The team's name, e.g. Platform")
        parser.add_argument("--owner", required=True, help="Username of the owner (an existing user)")
        parser.add_argument("--slug", default="", help="The team's slug in URLs (default: from the name)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, name: str, owner: str, slug: str, **opts: Any) -> None:
        user = User.objects.filter(username=owner).first()
        if user is None:
            raise CommandError(
                f"no user {owner!r}: create one first (manage.py createsuperuser, or an invite's sign-up page)"
            )
        try:
            team = create_team(name, user, slug=slug)
        except TeamError as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps({"name": team.name, "slug": team.slug, "owner": user.username}))
        else:
            self.stdout.write(
                f"Created team {team.name} (slug {team.slug}) with {user.username} as its owner."
            )
