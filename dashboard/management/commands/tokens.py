"""Count the fixed tax of a tools/list JSON file (docs/definitions.md)."""

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcptax import tokens


class Command(BaseCommand):
    help = "Count the tokens a tools/list costs every request: total, overhead, per tool."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", help="tools/list result, bare array of tools, or {initialize, tools}")
        parser.add_argument("--encoding", default="cl100k_base")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args: Any, file: str, encoding: str, **options: Any) -> None:
        try:
            data = json.loads(Path(file).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CommandError(f"{file}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: not valid JSON ({exc})") from None
        try:
            tools, instructions, _ = tokens.load_tools_document(data)
            report = tokens.account(tools, instructions, encoding=encoding)
        except tokens.EncodingUnavailable as exc:
            raise CommandError(str(exc)) from None
        except ValueError as exc:
            raise CommandError(f"{file}: {exc}") from None
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
            return
        self.stdout.write(
            f"{report.tool_count} tools, fixed tax {report.fixed_tax_tokens:,} tokens ({report.encoding}); "
            f"instructions {report.instructions_tokens:,}; overhead {report.overhead_tokens:,}; "
            f"{report.bytes:,} bytes; sha256 {report.sha256}"
        )
        width = max((len(t.name) for t in report.tools), default=4)
        self.stdout.write(f"{'tool'.ljust(width)}  {'tokens':>7}  {'descr':>7}  {'schema':>7}")
        for t in sorted(report.tools, key=lambda t: -t.tokens):
            self.stdout.write(
                f"{t.name.ljust(width)}  {t.tokens:>7}  {t.description_tokens:>7}  {t.schema_tokens:>7}"
            )
