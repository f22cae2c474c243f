"""Run the whole product on one machine: web server, Celery worker and beat, embedded broker.

`make run` calls this after migrating and loading the demo. Ctrl-C stops everything: children
are started in their own process groups so a stuck worker cannot outlive us. A worker that exits
(a broker fault, a crash) is started again, as the compose stack's restart policy does; the web
server exiting stops the run.
"""

import os
import signal
import subprocess
import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import BaseCommand

from mcptax.procgroup import stop_process_groups

# How long the web server and the worker get to finish in-flight work before SIGKILL.
STOP_GRACE_SECONDS = 10.0


def static_files_current() -> bool:
    """True when collectstatic has run since every static source file last changed."""
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    if not manifest.exists():
        return False
    built = manifest.stat().st_mtime
    for finder in finders.get_finders():
        for path, storage in finder.list([]):
            if os.path.getmtime(storage.path(path)) > built:
                return False
    return True


class WorkerRestarts:
    """Delays before starting a dead worker again: at once, then doubling up to a minute while it
    keeps dying within a minute of its start (a broken set-up must not spin)."""

    def __init__(self) -> None:
        self.last = 0.0
        self.delay = 0.0

    def next_delay(self) -> float:
        now = time.monotonic()
        quick = now - self.last < 60
        self.delay = min(60.0, max(1.0, self.delay * 2)) if quick else 0.0
        self.last = now + self.delay
        return self.delay


class Command(BaseCommand):
    help = "Start the web server, a Celery worker with beat, and stop them all on Ctrl-C."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--addr", default=os.environ.get("ADDR", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="Only the web server.")

    def handle(self, *args: Any, addr: str, port: int, no_worker: bool, **options: Any) -> None:
        # Ctrl-C, a closed terminal or a plain `kill` all end in the same clean shutdown below,
        # even when a parent shell started us with SIGINT ignored.
        def stop(signum: int, frame: FrameType | None) -> NoReturn:
            raise KeyboardInterrupt

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        # Hashed, compressed assets (dashboard.staticstorage): plotly.js is 4.8 MB uncompressed.
        if not static_files_current():
            self.stdout.write("Collecting static files (hashed, gzip-compressed)…")
            call_command("collectstatic", interactive=False, verbosity=0)
        python = sys.executable
        manage = str(settings.BASE_DIR / "manage.py")
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []

        # Links in notifications point at the address this run serves on, unless SITE_URL says otherwise.
        env = {**os.environ, "SITE_URL": settings.SITE_URL or f"http://{addr}:{port}"}

        commands: dict[str, list[str]] = {}

        popen_options: dict[str, Any] = {"cwd": settings.BASE_DIR, "env": env, "start_new_session": True}

        def start(name: str, cmd: list[str]) -> None:
            commands[name] = cmd
            procs.append((name, subprocess.Popen(cmd, **popen_options)))

        if not no_worker:
            start(
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--beat",
                    "--loglevel",
                    "INFO",
                    "-Q",
                    "poll,ingest,notify,celery",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "4",
                    "--schedule",
                    settings.CELERY_BEAT_SCHEDULE_FILENAME,
                ],
            )
        start("web", [python, manage, "runserver", f"{addr}:{port}", "--noreload"])
        broker = "Redis" if settings.REDIS_URL else f"embedded filesystem broker ({settings.BROKER_DIR})"
        self.stdout.write(
            self.style.SUCCESS(f"\n  Dashboard: http://{addr}:{port}/   (Ctrl-C stops everything)")
        )
        self.stdout.write(
            f"  Database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, broker: {broker}\n"
        )

        try:
            self._supervise(procs, commands, popen_options)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping…")
        finally:
            stop_process_groups([proc for _, proc in procs], term_grace=STOP_GRACE_SECONDS)

    def _supervise(
        self,
        procs: list[tuple[str, subprocess.Popen[bytes]]],
        commands: dict[str, list[str]],
        popen_options: dict[str, Any],
    ) -> None:
        """Watch the children until one that cannot be replaced exits: a worker is started again
        (it can die of a broker fault; its queues must not stay unserved), the web server is not."""
        restarts = WorkerRestarts()
        while True:
            for index, (name, proc) in enumerate(procs):
                if proc.poll() is None:
                    continue
                if name != "worker":
                    self.stderr.write(f"{name} exited with status {proc.returncode}; stopping the rest.")
                    return
                stop_process_groups([proc], term_grace=1.0)  # whatever it left running
                delay = restarts.next_delay()
                self.stderr.write(
                    f"worker exited with status {proc.returncode}; starting it again in {delay:.0f} s."
                )
                time.sleep(delay)
                procs[index] = (name, subprocess.Popen(commands[name], **popen_options))
            time.sleep(0.5)
