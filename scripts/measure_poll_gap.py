"""Measure the gap between consecutive scheduled polls of a server against its interval.

Runs the embedded stack's worker with beat (the command `make run` starts), in a VAR_DIR of its
own (SQLite, filesystem broker), with a few stdio example servers due at once, waits until each
has been polled --polls times on schedule, and prints every gap between consecutive poll starts,
its deviation from the interval, and whether all of them are within the tolerance:

    .venv/bin/python scripts/measure_poll_gap.py [--interval 20] [--polls 6] [--servers 3]

It takes about interval x (polls - 1) seconds. Exit code 1 when a gap is off by more than
--tolerance seconds (2).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=int, default=20, help="each server's poll interval (s)")
    parser.add_argument("--polls", type=int, default=6, help="scheduled polls to wait for per server")
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=2.0)
    options = parser.parse_args()

    var = ROOT / "var" / "poll-gap"
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "config.settings"}
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    setup = f"""
import django
django.setup()
from django.utils import timezone
from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
team = Team.objects.create(name="Gap")
now = timezone.now()
for i in range({options.servers}):
    McpServer.objects.create(
        team=team, name=f"lean-{{i}}", transport="stdio", command={python!r},
        args=["-m", "examples.servers.lean"], cwd={str(ROOT)!r},
        poll_interval_seconds={options.interval}, next_poll_at=now,
    )
"""
    subprocess.run([python, "-c", setup], cwd=ROOT, env=env, check=True)
    worker = subprocess.Popen(
        [python, "-m", "celery", "-A", "config", "worker", "--beat", "--loglevel", "WARNING"]
        + ["-Q", "poll,ingest,notify,celery", "--pool", "threads", "--concurrency", "4"]
        + ["--schedule", str(var / "celerybeat-schedule")],
        cwd=ROOT,
        env=env,
        stdout=open(var / "worker.log", "wb"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    db = var / "db.sqlite3"
    query = (
        "SELECT s.name, r.started FROM dashboard_pollrun r JOIN dashboard_mcpserver s ON s.id = r.server_id "
        "WHERE r.trigger = 'schedule' AND r.outcome = 'ok' ORDER BY s.name, r.started"
    )
    deadline = time.monotonic() + options.interval * (options.polls + 2) + 120
    runs: dict[str, list[datetime]] = {}
    try:
        while time.monotonic() < deadline:
            time.sleep(2)
            runs = {}
            with sqlite3.connect(db, timeout=30) as conn:
                for name, started in conn.execute(query):
                    runs.setdefault(name, []).append(datetime.fromisoformat(started))
            if len(runs) == options.servers and all(len(r) >= options.polls for r in runs.values()):
                break
        else:
            print(f"timed out; polls so far: { {k: len(v) for k, v in runs.items()} }", file=sys.stderr)
            return 2
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)

    print(f"interval {options.interval} s, {options.servers} servers, {options.polls} scheduled polls each")
    worst = 0.0
    for name, starts in sorted(runs.items()):
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        gaps = gaps[: options.polls - 1]
        deviations = [gap - options.interval for gap in gaps]
        worst = max(worst, *(abs(d) for d in deviations))
        shown = ", ".join(f"{gap:.2f}" for gap in gaps)
        print(f"  {name}: gaps {shown} s; deviation {min(deviations):+.2f} .. {max(deviations):+.2f} s")
    within = worst <= options.tolerance
    print(f"worst deviation {worst:.2f} s: {'within' if within else 'OUTSIDE'} ±{options.tolerance:g} s")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
