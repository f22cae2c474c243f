"""Run the whole product on one machine: web server, Celery worker and beat, embedded broker.

`make run` calls this after migrating and loading the demo. Ctrl-C stops everything: children
are started in their own process groups so a stuck worker cannot outlive us.
"""

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Start the web server, a Celery worker with beat, and stop them all on Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default=os.environ.get("ADDR", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="Only the web server.")

    def handle(self, *args, addr: str, port: int, no_worker: bool, **options):
        # Ctrl-C, a closed terminal or a plain `kill` all end in the same clean shutdown below,
        # even when a parent shell started us with SIGINT ignored.
        def stop(signum, frame):
            raise KeyboardInterrupt

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        python = sys.executable
        manage = str(settings.BASE_DIR / "manage.py")
        procs: list[tuple[str, subprocess.Popen]] = []

        def start(name: str, cmd: list[str]) -> None:
            procs.append((name, subprocess.Popen(cmd, cwd=settings.BASE_DIR, start_new_session=True)))

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
            while True:
                for name, proc in procs:
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with status {proc.returncode}; stopping the rest.")
                        return
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping…")
        finally:
            for _, proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            for _, proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
