"""Count the fixed tax of a tools/list JSON file (docs/definitions.md); `mcp-tax tokens` is the same."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcptax.cli.tokens_file import TokensFileError, render_json, render_text, report_for_file


class Command(BaseCommand):
    help = "Count the tokens a tools/list costs every request: total, overhead, per tool."
    # Counting a file needs neither the URLconf nor the database: no system checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", help="tools/list result, bare array of tools, or {initialize, tools}")
        parser.add_argument("--encoding", default="cl100k_base")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, file: str, encoding: str, **options: Any) -> None:
        try:
            report = report_for_file(file, encoding)
        except TokensFileError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(render_json(report))
            return
        for line in render_text(report):
            self.stdout.write(line)
