import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.management.commands.add_server import _team
from dashboard.servers.config_import import ConfigImportError, import_client_config


class Command(BaseCommand):
    help = "Import servers from an MCP client config (mcpServers / VS Code servers) as a stack."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--team")
        parser.add_argument("--stack", help="Stack name (default: the file name)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, file: str, team: str | None, stack: str | None, **opts: Any) -> None:
        path = Path(file)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        try:
            result = import_client_config(_team(team), data, stack_name=stack or path.name, source=path.name)
        except ConfigImportError as exc:
            raise CommandError(f"{file}: {exc}") from None
        out = {
            "stack": result.stack.name,
            "created": result.created,
            "updated": result.updated,
            "unresolved_placeholders": result.placeholders,
        }
        self.stdout.write(json.dumps(out) if opts["json"] else json.dumps(out, indent=2))
