"""The CI gate offline: judge a saved tools/list against a registered server's budgets.

Exit status: 0 for pass (and warn, which is printed), 1 for fail, 2 for a usage error or when the
analysis itself failed (a bug of ours, reported on stderr: CI must not read it as a verdict).
"""

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.alerts import gate
from dashboard.servers.models import McpServer
from dashboard.teams.models import Team


class Command(BaseCommand):
    help = "Check a tools/list JSON file against a server's latest snapshot and budgets (exit 1 on fail)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "file", help="tools/list result, bare array of tools, or {initialize, tools}; - for stdin"
        )
        parser.add_argument("--server", required=True, help="Name of the registered server.")
        parser.add_argument("--team", help="Team slug, needed when several teams have a server of that name.")
        parser.add_argument("--candidate-version", help="The candidate's serverInfo.version, if not in FILE.")
        parser.add_argument("--git-ref", help="Branch, tag or commit, shown in the report.")
        parser.add_argument("--json", action="store_true", help="Print the whole result as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["file"]
        try:
            text = Path(source).read_text() if source != "-" else self.stdin_text()
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc}", returncode=2) from exc
        servers = McpServer.objects.filter(name=options["server"]).select_related("team", "current_snapshot")
        if options["team"]:
            if not Team.objects.filter(slug=options["team"]).exists():
                raise CommandError(f"no team {options['team']!r}", returncode=2)
            servers = servers.filter(team__slug=options["team"])
        found = list(servers[:2])
        if not found:
            raise CommandError(f"no server named {options['server']!r}", returncode=2)
        if len(found) > 1:
            raise CommandError("several teams have a server of that name: pass --team SLUG", returncode=2)
        document, extra = _unwrap_api_body(text)
        try:
            result = gate.run_check(
                found[0],
                document,
                instructions=extra.get("instructions"),
                version=options["candidate_version"] or extra.get("version"),
                git_ref=options["git_ref"] or extra.get("git_ref"),
            )
        except ValueError as exc:
            raise CommandError(f"{source}: {exc}", returncode=2) from exc
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False))
        else:
            self.stdout.write(result.report)
        if result.status == gate.STATUS_ERROR:
            for error in result.errors:
                self.stderr.write(f"analysis failed: {error}")
            raise SystemExit(2)
        if result.verdict == gate.FAIL:
            raise SystemExit(1)

    @staticmethod
    def stdin_text() -> str:
        return sys.stdin.read()


def _unwrap_api_body(text: str) -> tuple[object, dict[str, Any]]:
    """Accept the body CI sends to POST /api/v1/check too, so one file serves both."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text, {}  # run_check reports the JSON error
    if isinstance(data, dict) and "tools_list" in data:
        extra = {k: data.get(k) for k in ("instructions", "version", "git_ref") if data.get(k) is not None}
        return data["tools_list"], extra
    return data, {}
