import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.management.team_option import command_team
from dashboard.servers.config_import import SHELL, ConfigError, import_config_text


class Command(BaseCommand):
    help = (
        "Import the servers of an MCP client config (Claude, Cursor, VS Code, Windsurf, Cline, Roo, "
        "Kiro, Gemini CLI, Zed, Codex) as stacks. Exit 1 when the file is not a config it reads."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--team", help="Team slug (default: the only team; with none, a new team named default)"
        )
        parser.add_argument("--stack", help="Name of the file's main stack (default: the file name)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, file: str, team: str | None, stack: str | None, **opts: Any) -> None:
        path = Path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        try:
            # Shell access to the deployment is more than any role: the command imports as an owner.
            imported = import_config_text(
                command_team(self, team, as_json=opts["json"]),
                text,
                filename=path.name,
                stack_name=stack or "",
                importer=SHELL,
            )
        except ConfigError as exc:
            raise CommandError(f"{file}: {exc}") from None
        out = {"stacks": [result.to_dict() for result in imported]}
        self.stdout.write(json.dumps(out) if opts["json"] else json.dumps(out, indent=2))
