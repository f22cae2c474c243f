#!/usr/bin/env python
import os
import sys

# Commands that need no Django at all: the same function answers (mcptax/cli), without setting up
# Django, its apps and the Celery app first. `manage.py help tokens` and call_command("tokens")
# still go through Django's command (dashboard/management/commands/tokens.py).
NO_DJANGO = {"tokens"}
DJANGO_OPTIONS = (
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "-v",
    "--verbosity",
    "--skip-checks",
    "-h",
    "--help",
)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] and argv[0] in NO_DJANGO and not any(a.startswith(DJANGO_OPTIONS) for a in argv[1:]):
        from mcptax.cli.main import main as mcp_tax

        raise SystemExit(mcp_tax(argv))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
