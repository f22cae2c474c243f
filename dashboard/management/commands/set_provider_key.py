"""Store (encrypted), replace or remove a team's Anthropic API key for provider-exact counts."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.servers.counting import recount_current
from dashboard.teams.models import Team
from dashboard.teams.services import TeamError, set_counting


class Command(BaseCommand):
    help = (
        "Set a team's Anthropic API key (read from stdin, never from the command line), its model, "
        "and the encodings it tracks."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--remove", action="store_true", help="forget the stored key")
        parser.add_argument("--model", help="the model Anthropic counts for (e.g. claude-sonnet-4-5)")
        parser.add_argument(
            "--encodings", help="comma-separated tracked encodings, main first: cl100k_base,o200k_base"
        )
        parser.add_argument("--keep-key", action="store_true", help="change only --model/--encodings")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(slug=options["team"]).first()
        if team is None:
            raise CommandError(f"no team with slug {options['team']!r}")
        encodings = None
        if options["encodings"]:
            encodings = [n.strip() for n in options["encodings"].split(",") if n.strip()]
        key = None
        if not options["remove"] and not options["keep_key"]:
            key = sys.stdin.readline().strip()
            if not key:
                raise CommandError('give the API key on stdin (echo "$KEY" | manage.py set_provider_key ...)')
        try:
            set_counting(
                team, encodings=encodings, model=options["model"], key=key, remove_key=options["remove"]
            )
        except TeamError as exc:
            raise CommandError(str(exc)) from None
        recount_current(team)
        state = "a key stored" if team.provider_keys.get("anthropic") else "no key"
        self.stdout.write(
            f"{team.slug}: {state}, model {team.anthropic_model}, encodings {team.tracked_encodings()}"
        )
