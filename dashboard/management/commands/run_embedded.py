"""Run the whole product on one machine: web server, Celery worker and beat, embedded broker.

`make run` calls it with --migrate --demo --allow-loopback, `make serve` with --migrate (an existing
database, no demo). Each step says when it starts; the address and the login come last, once the
web server answers. The worker's log goes to VAR_DIR/log/worker.log and e-mail to VAR_DIR/mail/
(unless EMAIL_HOST or EMAIL_BACKEND is set), so neither pushes that answer off the screen. Ctrl-C
stops everything: children are started in their own process groups so a stuck worker cannot
outlive us. A worker that exits (a broker fault, a crash) is started again, as the compose stack's
restart policy does; the web server exiting stops the run.
"""

import os
import signal
import socket
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

from dashboard.origin import record_embedded_site_url
from mcptax.procgroup import stop_process_groups

# How long the web server and the worker get to finish in-flight work before SIGKILL.
STOP_GRACE_SECONDS = 10.0
# A one-person run on a laptop: a webhook to a receiver on this machine is the obvious first test.
LOOPBACK_NETWORKS = "127.0.0.0/8,::1/128"
FILE_EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"


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
        parser.add_argument("--migrate", action="store_true", help="Apply migrations first.")
        parser.add_argument("--demo", action="store_true", help="Load the demo data first (make run).")
        parser.add_argument(
            "--allow-loopback",
            action="store_true",
            help="Let webhooks and servers reach this machine (127.0.0.0/8, ::1) unless "
            "OUTBOUND_ALLOW_NETWORKS is set: a one-person run (make run).",
        )

    def handle(self, *args: Any, addr: str, port: int, no_worker: bool, **options: Any) -> None:
        # Ctrl-C, a closed terminal or a plain `kill` all end in the same clean shutdown below,
        # even when a parent shell started us with SIGINT ignored.
        def stop(signum: int, frame: FrameType | None) -> NoReturn:
            raise KeyboardInterrupt

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        url = settings.SITE_URL or f"http://{addr}:{port}"
        steps = self._prepare(migrate=options["migrate"], demo=options["demo"])
        env, notes = self._child_environment(url, allow_loopback=options["allow_loopback"])
        self.step(f"{steps}. Starting the web server{'' if no_worker else ', the worker and beat'}")
        procs = self._start(env, addr, port, no_worker)
        record_embedded_site_url(url)
        try:
            self._wait_for_web(procs, addr, port)
            self._announce(url, notes, demo=options["demo"])
            self._watch(procs, env)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping…")
        finally:
            # One stop is enough: a second signal (a supervisor's, a second Ctrl-C) must not cut
            # the clean-up short; stop_process_groups ends with SIGKILL anyway.
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            record_embedded_site_url(None)
            stop_process_groups([proc for _, proc in procs], term_grace=STOP_GRACE_SECONDS)

    def step(self, text: str) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING(f"==> {text}"))

    def _prepare(self, *, migrate: bool, demo: bool) -> int:
        """The steps before the processes start; returns the number of the next step."""
        n = 1
        if migrate:
            self.step(f"{n}. Migrating the database")
            call_command("migrate", interactive=False, verbosity=0)
            n += 1
        # Hashed, compressed assets (dashboard.staticstorage): plotly.js is 4.8 MB uncompressed.
        if not static_files_current():
            self.step(f"{n}. Collecting static files (hashed, gzip-compressed)")
            call_command("collectstatic", interactive=False, verbosity=0)
            n += 1
        if demo:
            self.step(f"{n}. Loading the demo (the first time: real polls and agents, a minute or two)")
            call_command("demo", stdout=self.stdout)
            n += 1
        return n

    def _child_environment(self, url: str, *, allow_loopback: bool) -> tuple[dict[str, str], list[str]]:
        """The children's environment, and the lines that say what it decided."""
        # Links in notifications point at the address this run serves on, unless SITE_URL says otherwise.
        env = {**os.environ, "SITE_URL": url, "MCPTAX_EMBEDDED": "1"}
        notes = []
        if os.environ.get("OUTBOUND_ALLOW_NETWORKS"):
            notes.append(
                f"Outbound: also allowed: {os.environ['OUTBOUND_ALLOW_NETWORKS']} (OUTBOUND_ALLOW_NETWORKS)"
            )
        elif allow_loopback:
            env["OUTBOUND_ALLOW_NETWORKS"] = LOOPBACK_NETWORKS
            notes.append(
                f"Outbound: loopback allowed ({LOOPBACK_NETWORKS}): webhooks to a receiver on this machine "
                "work. Set OUTBOUND_ALLOW_NETWORKS to choose."
            )
        else:
            notes.append(
                "Outbound: loopback and private addresses refused; allow a local receiver with "
                "OUTBOUND_ALLOW_NETWORKS=127.0.0.1/32"
            )
        if not os.environ.get("EMAIL_HOST") and not os.environ.get("EMAIL_BACKEND"):
            env["EMAIL_BACKEND"] = FILE_EMAIL_BACKEND
            notes.append(f"E-mail: written to {settings.EMAIL_FILE_PATH}/, not sent (set EMAIL_HOST to send)")
        return env, notes

    def _start(
        self, env: dict[str, str], addr: str, port: int, no_worker: bool
    ) -> list[tuple[str, subprocess.Popen[bytes]]]:
        python = sys.executable
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        if not no_worker:
            procs.append(("worker", self._start_worker(env)))
        manage = str(settings.BASE_DIR / "manage.py")
        procs.append(("web", self._popen([python, manage, "runserver", f"{addr}:{port}", "--noreload"], env)))
        return procs

    def _start_worker(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log_dir = Path(settings.VAR_DIR) / "log"
        log_dir.mkdir(parents=True, exist_ok=True)
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--beat", "--loglevel", "INFO"]
        worker += ["-Q", "poll,ingest,notify,celery", "--pool", "threads", "--concurrency", "4"]
        worker += ["--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME]
        # Its banner and every task line go to the log, not over the address printed last.
        with open(log_dir / "worker.log", "ab") as log:
            return self._popen(worker, env, log)

    def _popen(self, cmd: list[str], env: dict[str, str], log: Any = None) -> subprocess.Popen[bytes]:
        output = {"stdout": log, "stderr": subprocess.STDOUT} if log is not None else {}
        return subprocess.Popen(cmd, cwd=settings.BASE_DIR, env=env, start_new_session=True, **output)

    def _wait_for_web(self, procs: list[tuple[str, subprocess.Popen[bytes]]], addr: str, port: int) -> None:
        # A TCP connect, not a request: runserver listens only once it can answer, and a request
        # would be logged by the web process, possibly after the address this command prints last.
        host = "127.0.0.1" if addr in ("0.0.0.0", "") else addr.strip("[]")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self._exited(procs):
            try:
                socket.create_connection((host, port), timeout=2).close()
                return
            except OSError:
                time.sleep(0.3)

    def _announce(self, url: str, notes: list[str], *, demo: bool) -> None:
        broker = "Redis" if settings.REDIS_URL else f"embedded filesystem broker ({settings.BROKER_DIR})"
        self.stdout.write(
            f"\n  Database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, broker: {broker}"
        )
        self.stdout.write(f"  Worker log: {Path(settings.VAR_DIR) / 'log' / 'worker.log'}")
        for note in notes:
            self.stdout.write(f"  {note}")
        if demo:
            from dashboard.management.commands.demo import DEMO_PASSWORD, DEMO_USERNAME

            self.stdout.write(self.style.SUCCESS(f"\n  Log in as {DEMO_USERNAME} / {DEMO_PASSWORD}"))
        self.stdout.write(
            self.style.SUCCESS(f"{'' if demo else chr(10)}  Dashboard: {url}/   (Ctrl-C stops everything)\n")
        )

    def _exited(self, procs: list[tuple[str, subprocess.Popen[bytes]]]) -> bool:
        for name, proc in procs:
            if proc.poll() is not None:
                self.stderr.write(f"{name} exited with status {proc.returncode}; stopping the rest.")
                return True
        return False

    def _watch(self, procs: list[tuple[str, subprocess.Popen[bytes]]], env: dict[str, str]) -> None:
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
                procs[index] = (name, self._start_worker(env))
            time.sleep(0.5)
