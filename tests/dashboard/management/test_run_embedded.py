"""`make run`'s embedded runner."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.helpers import wait_until


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_embedded_serves_and_one_signal_stops_everything(tmp_path, signum):
    """`make run`'s last step: web, worker and beat come up; Ctrl-C (or kill) leaves nothing behind."""
    import urllib.request

    proc = _start_embedded(tmp_path, subprocess.PIPE)
    port = proc.port
    try:

        def login_status() -> int | None:
            try:
                return int(urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2).status)
            except OSError:
                return None

        assert wait_until(login_status, timeout=60, interval=0.5, message="the web server") == 200

        # The worker announces itself when ready, so the overview knows one is running.
        def heartbeats() -> int:
            with sqlite3.connect(tmp_path / "db.sqlite3") as db:
                return int(db.execute("SELECT count(*) FROM dashboard_workerheartbeat").fetchone()[0])

        assert wait_until(heartbeats, timeout=60, interval=0.5, message="the worker's heartbeat") == 1
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 2, "a web server and a worker"
        proc.send_signal(signum)
        proc.wait(timeout=30)

        def alive() -> list[str]:
            return [pid for pid in children if os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid)]

        # The deadline only guards against a hang: the children must go, however long that takes.
        wait_until(lambda: not alive(), timeout=30, message=f"children {alive()} to exit after run_embedded")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _state(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.slow
def test_a_worker_that_dies_is_flagged_at_once_and_started_again(tmp_path):
    """A worker can exit on a broker fault; the embedded run starts it again (as the compose
    stack's restart policy does) instead of stopping everything, and while it is gone the health
    page's source, the heartbeat, says no worker consumes its queues."""
    proc = _start_embedded(tmp_path, subprocess.DEVNULL)

    def heartbeats() -> list[tuple[str, str]]:
        with sqlite3.connect(tmp_path / "db.sqlite3") as db:
            return db.execute("SELECT hostname, last_seen FROM dashboard_workerheartbeat").fetchall()

    def worker_pid() -> int | None:
        for pid in subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
        ).stdout.split():
            if b"celery" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
        return None

    try:
        wait_until(heartbeats, timeout=90, interval=0.5, message="the worker's heartbeat")
        first = worker_pid()
        assert first is not None
        os.killpg(first, signal.SIGTERM)  # the worker ends (as on "Unrecoverable error")
        # Its heartbeat goes with it: the health page flags its queues now, not two minutes later.
        wait_until(lambda: heartbeats() == [], timeout=60, interval=0.1, message="the heartbeat to go")
        # ... and the runner starts a new one, which announces itself again.
        wait_until(heartbeats, timeout=90, interval=0.5, message="a new worker's heartbeat")
        second = worker_pid()
        assert second is not None and second != first
        assert proc.poll() is None  # the run goes on; the web server was never stopped
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _start_embedded(tmp_path, output: int) -> Any:
    """`manage.py run_embedded` in an environment of its own (SQLite and the filesystem broker
    under tmp_path, migrated) on a free port, which the returned process carries as ``port``."""
    import socket

    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY"}
    }
    env.update(VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc: Any = subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT if output == subprocess.PIPE else output,
        start_new_session=True,
    )
    proc.port = port
    return proc


NOISE = ("No hostname was supplied", "AXES: BEGIN", "superuser privileges", "SecurityWarning")


def test_make_run_and_make_serve_are_the_runner_with_their_steps():
    makefile = (ROOT / "Makefile").read_text()
    assert "\t@$(BIN)/python manage.py run_embedded --migrate --demo --allow-loopback\n" in makefile
    assert "serve: $(STAMP)\n\t@$(BIN)/python manage.py run_embedded --migrate\n" in makefile


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_make_run_shows_each_step_keeps_mail_off_the_console_and_ends_with_the_address(tmp_path):
    """What `make run` runs, as a first-time user meets it: a step line before each step (the demo's
    own steps too), no warnings they can do nothing about, loopback allowed and said so, the demo's
    alert e-mails in var/mail/ instead of the console, and the login and the address last. A command
    run beside it builds its links on the same address."""
    from tests.helpers import EmbeddedRun, Receiver, embedded_env, free_port

    env = embedded_env(tmp_path)
    port = free_port()
    command = ["manage.py", "run_embedded", "--migrate", "--demo", "--allow-loopback", "--port", str(port)]
    with EmbeddedRun([sys.executable, *command], env, ROOT) as run:
        run.wait_for_address(timeout=500)
        lines = run.lines
        # The demo opened alerts whose e-mails the worker now sends: to files, not to this console.
        mail = tmp_path / "mail"
        wait_until(
            lambda: mail.exists() and any(mail.iterdir()), timeout=120, message="the demo's alert e-mails"
        )
        time.sleep(3)
        output = "".join(lines)
        assert run.last_line() == f"Dashboard: http://127.0.0.1:{port}/   (Ctrl-C stops everything)", output
        steps = [line.strip() for line in lines if line.startswith("==> ")]
        assert steps == [
            "==> 1. Migrating the database",
            "==> 2. Collecting static files (hashed, gzip-compressed)",
            "==> 3. Loading the demo (the first time: real polls and agents, a minute or two)",
            "==> 4. Starting the web server, the worker and beat",
        ], output
        assert "demo: polling the example server files-sprawl" in output
        assert "demo: recording two agents" in output
        assert "Log in as demo / demo-tax-2026" in output
        assert "Outbound: loopback allowed (127.0.0.0/8,::1/128)" in output
        assert f"E-mail: written to {mail}/" in output
        assert "Subject:" not in output and "Content-Type: text/plain" not in output
        worker_log = (tmp_path / "log" / "worker.log").read_text()
        for noise in NOISE:
            assert noise not in output and noise not in worker_log, noise

        # A command run beside the app (no SITE_URL of its own) links to the running app.
        with Receiver() as hook:
            script = (
                "from dashboard.teams.models import Team\n"
                "from dashboard.alerts.notify.models import Channel, ChannelKind\n"
                "from dashboard.alerts.notify.delivery import deliver\n"
                "from dashboard.alerts.notify.models import Delivery\n"
                "from dashboard.alerts.budgets import open_or_update_alert\n"
                "team = Team.objects.get(slug='demo')\n"
                f"Channel.objects.create(team=team, name='local', kind=ChannelKind.WEBHOOK, config={{'url': '{hook.url}'}})\n"
                "Channel.objects.exclude(name='local').update(enabled=False)\n"
                "open_or_update_alert(team, 'cmd:x', 'fixed_tax_tokens', 'error', 9.0, 1.0, 'm', 'x')\n"
                "for d in Delivery.objects.filter(channel__name='local'): deliver(d.pk)\n"
            )
            shell = {**env, "OUTBOUND_ALLOW_NETWORKS": "127.0.0.0/8"}
            done = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", script],
                cwd=ROOT,
                env=shell,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            wait_until(lambda: hook.delivered, timeout=30, message="the command's webhook")
            assert hook.json(0)["alert"]["url"].startswith(f"http://127.0.0.1:{port}/t/demo/alerts/")
    assert not (tmp_path / "run" / "site_url").exists()  # a stopped run leaves no address behind
