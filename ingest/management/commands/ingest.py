"""`manage.py ingest PATH [--format F] [--team SLUG] [--json]`: ingest a capture log synchronously."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.teams.models import Team
from ingest.capture.pipeline import ingest_path
from mcptax.formats import FORMATS


class Command(BaseCommand):
    help = (
        "Ingest a capture log (envelope JSONL, HAR, Claude Code or Codex transcript; gzip too) into a "
        "team and print what became of its lines."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument("--team", help="team slug (default: the only team)")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path} is not a file")
        team = self._team(options["team"])
        job = ingest_path(team, path, format=options["format"])
        summary = {
            "job": str(job.code),
            "team": team.slug,
            "status": job.status,
            "format": job.format,
            "read": job.lines_read,
            "stored": job.stored,
            "duplicate": job.duplicate,
            "ignored": job.ignored,
            "quarantined": job.quarantined,
            "calls_stored": job.calls_stored,
            "ignored_reasons": job.ignored_reasons,
            "quarantined_reasons": job.quarantined_reasons,
            "verdict_counts": job.verdict_counts,
            "reconciles": job.reconciles,
            "error": job.error,
        }
        if options["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(
                f"{path.name}: {job.status} ({job.format}) read {job.lines_read}: stored {job.stored}, "
                f"duplicate {job.duplicate}, ignored {job.ignored}, quarantined {job.quarantined}; "
                f"{job.calls_stored} calls stored"
            )
            if job.quarantined_reasons:
                self.stdout.write(f"quarantined: {job.quarantined_reasons}")
            self.stdout.write(f"verdicts: {job.verdict_counts or '{}'}")
            if job.error:
                self.stderr.write(job.error)
        if job.status == job.Status.FAILED:
            raise CommandError(f"ingest failed: {job.error}")

    def _team(self, slug: str | None) -> Team:
        if slug:
            try:
                team: Team = Team.objects.get(slug=slug)
                return team
            except Team.DoesNotExist:
                raise CommandError(f"no team {slug!r}") from None
        teams: list[Team] = list(Team.objects.all()[:2])
        if len(teams) != 1:
            raise CommandError("give --team SLUG (there is not exactly one team)")
        return teams[0]
