import json
import shlex
from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import URLValidator

from dashboard import outbound
from dashboard.management.team_option import command_team
from dashboard.servers.models import McpServer, Transport


class Command(BaseCommand):
    help = "Register an MCP server for a team (stdio command or Streamable HTTP / SSE URL)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--name", required=True)
        how = parser.add_mutually_exclusive_group(required=True)
        how.add_argument("--stdio", help='The command line, e.g. "python -m examples.servers.lean"')
        how.add_argument(
            "--url",
            help="Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp (inward addresses need OUTBOUND_ALLOW_NETWORKS)",
        )
        how.add_argument("--sse", help="Legacy SSE endpoint")
        parser.add_argument(
            "--team", help="Team slug (default: the only team; with none, a new team named default)"
        )
        parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for a stdio server")
        parser.add_argument("--header", action="append", default=[], help="Name: value for an HTTP server")
        parser.add_argument("--cwd", default="")
        parser.add_argument("--interval", type=int, default=None, help="Poll interval in seconds")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        team = command_team(self, opts["team"], as_json=opts["json"])
        if McpServer.objects.filter(team=team, name=opts["name"]).exists():
            raise CommandError(f"team {team.slug} already has a server named {opts['name']!r}")
        fields = {"cwd": opts["cwd"]}
        if opts["stdio"]:
            parts = shlex.split(opts["stdio"])
            if not parts:
                raise CommandError("--stdio needs a command")
            fields.update(transport=Transport.STDIO, command=parts[0], args=parts[1:])
            fields["env"] = dict(_pair(e, "=", "--env") for e in opts["env"])
        else:
            fields.update(
                transport=Transport.HTTP if opts["url"] else Transport.SSE, url=opts["url"] or opts["sse"]
            )
            fields["headers"] = dict(_pair(h, ":", "--header") for h in opts["header"])
            flag = "--url" if opts["url"] else "--sse"
            try:
                URLValidator(schemes=["http", "https"])(str(fields["url"]))
            except ValidationError:
                raise CommandError(
                    f"{flag} wants an http(s) URL such as https://mcp.example.com/mcp, got {fields['url']!r}"
                ) from None
            problem = outbound.url_problem(str(fields["url"]))
            if problem:
                raise CommandError(problem)
        if opts["interval"]:
            fields["poll_interval_seconds"] = opts["interval"]
        server = McpServer.objects.create(team=team, name=opts["name"], **fields)
        out = {
            "name": server.name,
            "team": team.slug,
            "transport": server.transport,
            "endpoint": server.endpoint,
        }
        self.stdout.write(
            json.dumps(out) if opts["json"] else f"Registered {server.name} ({server.endpoint})"
        )


def _pair(text: str, sep: str, flag: str) -> tuple[str, str]:
    if sep not in text:
        raise CommandError(f"{flag} expects NAME{sep}VALUE, got {text!r}")
    key, value = text.split(sep, 1)
    return key.strip(), value.strip()
