import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.management.team_option import command_team
from dashboard.servers.config_import import SHELL, ConfigError, StackImport, import_specs
from mcptax.clientconfig import read_config_path


class Command(BaseCommand):
    help = (
        "Import the servers of an MCP client config (Claude, Cursor, VS Code, Windsurf, Cline, Roo, "
        "Kiro, Gemini CLI, Zed, Codex, Goose, LibreChat, Continue, opencode, Amazon Q) as stacks; "
        "a folder (.continue/mcpServers/) is one stack of every file in it. Each entry is imported, "
        "imported disabled or skipped, with its reason. Exit 0 when anything was imported, 1 when "
        "nothing was, 2 when the file cannot be read as a client config."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", help="a client config file, or a folder of block files")
        parser.add_argument(
            "--team", help="Team slug (default: the only team; with none, a new team named default)"
        )
        parser.add_argument("--stack", help="Name of the file's main stack (default: the file name)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, file: str, team: str | None, stack: str | None, **opts: Any) -> None:
        path = Path(file)
        try:
            specs = read_config_path(path)
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            raise CommandError(f"{file}: {exc}", returncode=2) from None
        try:
            # Shell access to the deployment is more than any role: the command imports as an owner.
            imported = import_specs(
                command_team(self, team, as_json=opts["json"]),
                specs,
                base_name=stack or path.name,
                source=path.name,
                importer=SHELL,
            )
        except ConfigError as exc:
            raise CommandError(f"{file}: {exc}", returncode=2) from None
        out = {"stacks": [result.to_dict() for result in imported]}
        self.stdout.write(json.dumps(out) if opts["json"] else _text(imported))
        if not any(result.imported for result in imported):
            raise CommandError(
                f"{file}: nothing was imported (every entry skipped, reasons above)", returncode=1
            )


def _text(imported: list[StackImport]) -> str:
    lines = []
    for result in imported:
        if result.refused:
            lines.append(f"stack {result.name}: left as it is: {result.refused}")
            continue
        lines.append(f"stack {result.name}:")
        for entry in result.entries:
            line = f"  {entry.name}: {entry.label()}"
            if entry.outcome != "skipped" and entry.disabled:
                line += f", imported disabled ({entry.reason})"
            elif entry.reason:
                line += f" ({entry.reason})"
            lines.append(line)
        for name, found in result.placeholders.items():
            lines.append(f"  {name}: unresolved placeholders kept as written: {', '.join(found)}")
    return "\n".join(lines)
