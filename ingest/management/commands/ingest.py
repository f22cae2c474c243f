"""`manage.py ingest PATH [--format F] [--team SLUG] [--json]`: ingest a capture log synchronously."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.management.team_option import command_team
from ingest.capture.models import IngestJob
from ingest.capture.pipeline import ingest_path
from ingest.capture.pipeline.reading import UNKNOWN_FORMAT
from mcptax.formats import FORMATS


class Command(BaseCommand):
    help = (
        "Ingest a capture log (envelope JSONL, HAR, Claude Code or Codex transcript; gzip too) into a "
        "team and print what became of its lines."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
        parser.add_argument(
            "--team", help="team slug (default: the only team; with none, a new team named default)"
        )
        parser.add_argument("--json", action="store_true", help="print a JSON summary")
        parser.add_argument(
            "--max-bytes",
            type=int,
            help="most bytes a gzip file may decompress to (default: INGEST_MAX_BYTES)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path} is not a file")
        team = command_team(self, options["team"], as_json=options["json"])
        job = ingest_path(team, path, format=options["format"], max_bytes=options["max_bytes"])
        failure = _failure(job)
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
            "discovery": discovery_summary(job),
            "ignored_reasons": job.ignored_reasons,
            "quarantined_reasons": job.quarantined_reasons,
            "verdict_counts": job.verdict_counts,
            "reconciles": job.reconciles,
            "error": job.error,
            "ok": not failure,
            "failure": failure,
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
            if job.error and not failure:
                self.stderr.write(job.error)
        if failure:
            raise CommandError(failure)


def discovery_summary(job: IngestJob) -> dict[str, int]:
    """What the file added to tool discovery (new records only: a re-ingest adds nothing)."""
    counts = job.discovery_counts or {}
    keys = ("searches", "misses", "loads", "loads_never_called", "calls", "requests", "compactions")
    return {key: int(counts.get(key, 0)) for key in keys}


def _failure(job: IngestJob) -> str:
    """Why nothing of the file could be read ("" when something could): the command then exits 1."""
    if job.status == IngestJob.Status.FAILED:
        return f"ingest failed: {job.error}"
    if job.format == UNKNOWN_FORMAT:
        return job.error or "cannot tell the log format (no data)"
    if job.lines_read and job.quarantined == job.lines_read:
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(job.quarantined_reasons.items()))
        return f"every line was quarantined ({reasons})"
    return ""
