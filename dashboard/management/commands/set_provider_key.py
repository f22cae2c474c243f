"""Store (encrypted), replace or remove a team's Anthropic API key for provider-exact counts."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.teams.models import Team
from mcptax import tokens


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
        if options["encodings"]:
            names = [n.strip() for n in options["encodings"].split(",") if n.strip()]
            unknown = [n for n in names if n not in tokens.OFFLINE_ENCODINGS]
            if not names or unknown:
                raise CommandError(
                    f"encodings must be among {', '.join(tokens.OFFLINE_ENCODINGS)}; got {options['encodings']!r}"
                )
            team.token_encodings = list(dict.fromkeys(names))
        if options["model"]:
            team.anthropic_model = options["model"]
        if options["remove"]:
            team.provider_keys = {}
        elif not options["keep_key"]:
            key = sys.stdin.readline().strip()
            if not key:
                raise CommandError('give the API key on stdin (echo "$KEY" | manage.py set_provider_key ...)')
            team.provider_keys = {**team.provider_keys, "anthropic": key}
        team.save()
        state = "a key stored" if team.provider_keys.get("anthropic") else "no key"
        self.stdout.write(
            f"{team.slug}: {state}, model {team.anthropic_model}, encodings {team.tracked_encodings()}"
        )
