"""`make run`'s embedded runner."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers import wait_until


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_run_embedded_serves_and_one_signal_stops_everything(tmp_path, signum):
    """`make run`'s last step: web, worker and beat come up; Ctrl-C (or kill) leaves nothing behind."""
    import socket
    import urllib.request

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
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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
