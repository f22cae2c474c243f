"""The `--team` option of the commands that put things into a team (`add_server`, `import_servers`,
`ingest`): the slug given, else the only team, else a new team named `default`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from dashboard.teams.models import Team
from dashboard.teams.services import TeamError, team_for_command


def command_team(command: BaseCommand, slug: str | None, *, as_json: bool = False) -> Team:
    """The team to act on. Creating `default` is announced on stdout, or on stderr under `--json`,
    so that stdout stays one JSON document."""
    stream = command.stderr if as_json else command.stdout
    try:
        return team_for_command(slug, stream.write)
    except TeamError as exc:
        raise CommandError(str(exc)) from None
