"""`make run`'s embedded runner."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
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
