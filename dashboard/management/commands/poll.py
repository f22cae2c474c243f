import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.servers.models import McpServer
from dashboard.tasks import poll


class Command(BaseCommand):
    help = "Poll one registered server now (synchronously) and print the snapshot figures."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--team", help="Team slug, when several teams have a server of that name")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, name: str, team: str | None, **opts: Any) -> None:
        servers = McpServer.objects.filter(name=name)
        if team:
            servers = servers.filter(team__slug=team)
        found = list(servers[:2])
        if not found:
            raise CommandError(f"no server named {name!r}")
        if len(found) > 1:
            raise CommandError(f"several teams have a server named {name!r}; pass --team")
        summary = poll(found[0].pk, trigger="command")
        server = McpServer.objects.select_related("current_snapshot").get(pk=found[0].pk)
        snap = server.current_snapshot if summary.snapshot_id else None
        out = summary.to_dict()
        if snap is not None:
            out.update(
                server_version=snap.server_version,
                protocol_version=snap.protocol_version,
                tool_count=snap.tool_count,
                encoding=snap.encoding,
                fixed_tax_tokens=snap.fixed_tax_tokens,
                instructions_tokens=snap.instructions_tokens,
                overhead_tokens=snap.overhead_tokens,
                bytes=snap.bytes,
                sha256=snap.sha256,
                tokens_by_encoding=snap.tokens_by_encoding,
                analysis_errors=snap.analysis_errors,
            )
        if opts["json"]:
            self.stdout.write(json.dumps(out))
        elif snap is not None:
            change = "new snapshot" if summary.changed else "unchanged"
            self.stdout.write(
                f"{name}: {summary.outcome} in {summary.duration_ms} ms, {change}; v{snap.server_version} "
                f"{snap.tool_count} tools, fixed tax {snap.fixed_tax_tokens:,} tokens ({snap.encoding})"
            )
        else:
            self.stdout.write(f"{name}: {summary.outcome}: {summary.message}")
        if snap is not None:
            # The counts above are exact; say which analysis of them is missing.
            for error in snap.analysis_errors:
                self.stderr.write(f"{name}: {error['stage']} failed: {error['error']}")
        if summary.outcome not in ("ok", "skipped"):
            raise SystemExit(1)
