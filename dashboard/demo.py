"""Demo data: the two example servers with a real release history, budgets, and (through
ingest.demo) captured agent traffic. An aggregator, so it may import every part of the product.

Every snapshot comes from a real poll of a real example server process; only the timestamps are
moved into the past, so the charts show a history instead of a single afternoon.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from dashboard.alerts.budgets import evaluate_team
from dashboard.alerts.models import Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind
from dashboard.servers.models import McpServer, PollRun, Snapshot, Stack, Transport
from dashboard.tasks import poll
from dashboard.teams.models import Team
from ingest.capture.models import IngestJob
from ingest.demo import DEMO_LOG_NAME, build_capture_demo

GROWN_ENV = "MCP_EXAMPLE_GROWN"

# (days ago, grown?) per server: each change of the switch is a release.
HISTORY = {
    "files-sprawl": [(28, False), (21, False), (14, True), (7, True)],
    "files-lean": [(27, False), (12, True), (3, False)],
}
MODULES = {"files-sprawl": "examples.servers.sprawling", "files-lean": "examples.servers.lean"}


def ensure_example_servers(team: Team, owner: User | None = None) -> list[McpServer]:
    root = settings.VAR_DIR / "demo-root"
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# Demo workspace\n\nFiles the example servers may read and write.\n")
    servers = []
    for name, module in MODULES.items():
        server, _ = McpServer.objects.get_or_create(
            team=team,
            name=name,
            defaults={
                "transport": Transport.STDIO,
                "command": sys.executable,
                "args": ["-m", module, "--transport", "stdio", "--root", str(root)],
                "cwd": str(settings.BASE_DIR),
                "owner": owner,
                "poll_interval_seconds": 900,
            },
        )
        servers.append(server)
    stack, _ = Stack.objects.get_or_create(team=team, name="coding-agent", defaults={"source": "demo"})
    stack.servers.set(servers)
    return servers


def build_history(server: McpServer) -> int:
    """Poll the server through its scripted releases, back-dating each poll. Returns snapshots made."""
    if server.snapshots.exists():
        return 0
    now = timezone.now()
    made = 0
    for days_ago, grown in HISTORY.get(server.name, [(0, False)]):
        env = dict(server.env or {})
        env[GROWN_ENV] = "1" if grown else "0"
        server.env = env
        server.save(update_fields=["env"])
        summary = poll(server.pk, trigger="demo")
        if summary.outcome != "ok" or summary.snapshot_id is None:
            raise RuntimeError(f"demo poll of {server.name} failed: {summary.outcome}: {summary.message}")
        when = now - timedelta(days=days_ago)
        PollRun.objects.filter(server=server, started__gte=now - timedelta(minutes=5)).update(started=when)
        if summary.changed:
            Snapshot.objects.filter(pk=summary.snapshot_id).update(first_seen=when, last_seen=when)
            made += 1
        else:
            Snapshot.objects.filter(pk=summary.snapshot_id).update(last_seen=when)
    # Leave the server as the last scripted release says, and let the schedule take over.
    server.refresh_from_db()
    McpServer.objects.filter(pk=server.pk).update(next_poll_at=now)
    return made


def ensure_demo_budgets(team: Team) -> None:
    """A team-default budget the sprawling server's grown release breaks, and an email channel.

    The email channel goes through Django's mail settings (the console in the embedded run), so
    the demo notifies without any webhook or outside service.
    """
    defaults = [
        (Measure.FIXED_TAX_TOKENS, Level.WARNING, 3500),
        (Measure.FIXED_TAX_TOKENS, Level.ERROR, 6000),
        (Measure.RELEASE_GROWTH_PCT, Level.WARNING, 20),
        (Measure.STACK_FIXED_TAX_TOKENS, Level.WARNING, 20000),
        # Fidelity: the demo's captured traffic (ingest.demo) breaks these on purpose.
        (Measure.AGENT_EXACT_RATE, Level.WARNING, 90),
        (Measure.DAMAGED_ARRIVALS, Level.ERROR, 0),
    ]
    for measure, level, limit in defaults:
        Budget.objects.get_or_create(
            team=team, server=None, stack=None, measure=measure, level=level, defaults={"limit": limit}
        )
    if not team.channels.exists():
        Channel.objects.create(
            team=team, name="demo inbox", kind=ChannelKind.EMAIL, config={"to": ["demo@localhost"]}
        )
    evaluate_team(team)


def load_demo(
    team: Team, owner: User | None, *, servers: bool = True, progress: Callable[[str], object] = print
) -> dict[str, int]:
    """Budgets, the example servers' history and captured traffic; returns what was made.

    A first load polls real servers and drives real agents (a minute or two): `progress` hears of
    each step as it starts, so the terminal never sits silent."""
    # Budgets first, so every historical snapshot gets its budget checks (the chart's band) and alerts.
    ensure_demo_budgets(team)
    made = {"snapshots": 0}
    if servers:
        for server in ensure_example_servers(team, owner=owner):
            if not server.snapshots.exists():
                releases = len(HISTORY.get(server.name, [(0, False)]))
                progress(f"polling the example server {server.name} through {releases} scripted polls")
            made["snapshots"] += build_history(server)
        if not IngestJob.objects.filter(
            team=team, filename=DEMO_LOG_NAME, status=IngestJob.Status.DONE
        ).exists():
            progress("recording two agents through the logging proxy and ingesting their traffic")
        capture = build_capture_demo(team)  # real agents through the logging proxy, ingested
        made["captured_calls"] = capture.calls_stored if capture else 0
    return made
