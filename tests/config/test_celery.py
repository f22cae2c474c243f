"""config/celery.py: a worker that is stopped in the middle of a stdio poll leaves no server behind.

Each test runs a real `celery worker` process the way the embedded run does (SQLite and the
filesystem broker, in a VAR_DIR of its own, so it needs no service and shares nothing with the
test database), polling a real stdio server that answers the handshake, never answers
`tools/list` and has a helper child in its process group. The poll timeouts are set far beyond the
test's guard, so only the shutdown can end the poll.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mcptax.procgroup import signal_group
from tests.conftest import ROOT
from tests.helpers import django_script, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
GUARD = 60.0  # seconds; only against a hang, never a measured duration


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory) -> dict[str, str]:
    var = tmp_path_factory.mktemp("worker-var")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "VAR_DIR": str(var),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "POLL_CONNECT_TIMEOUT": "900",
        "POLL_TOTAL_TIMEOUT": "900",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=240
    )
    return env


def enqueue_slow_poll(env: dict[str, str], tmp_path: Path, name: str, mode: str) -> tuple[Path, Path]:
    """Register the slow stdio server `name` and queue one poll of it; returns (pid file, asked file).

    `hang_tools` answers the handshake and creates the asked file when `tools/list` arrives; `hang`
    answers nothing and does not even exit when its stdin closes (a stuck server)."""
    pids, asked = tmp_path / "pids", tmp_path / "asked"
    args = ["-m", "examples.servers.misbehaving", "--mode", mode, "--spawn-child"]
    args += ["--pid-file", str(pids), "--tools-list-file", str(asked)]
    django_script(
        env,
        f"""
from dashboard.servers.models import McpServer
from dashboard.tasks import poll_server as poll_server_task
from dashboard.teams.models import Team
team, _ = Team.objects.get_or_create(name="Ops")
server = McpServer.objects.create(
    team=team, name={name!r}, transport="stdio", command={sys.executable!r}, args={args!r},
    cwd={str(ROOT)!r}, poll_interval_seconds=86400,
)
poll_server_task.delay(server.pk)
""",
    )
    return pids, asked


def last_poll(env: dict[str, str], name: str) -> str:
    return django_script(
        env,
        f"""
from dashboard.servers.models import PollRun
run = PollRun.objects.filter(server__name={name!r}).first()
print(run.outcome if run else "", run.message if run else "", sep="|")
""",
    ).strip()


def start_worker(env: dict[str, str], pool: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", pool, "--concurrency", "1"]
            + ["-Q", "poll", "--loglevel", "INFO", "--hostname", f"stop-{pool}-{os.getpid()}@%h"]
            + ["--without-mingle", "--without-gossip", "--without-heartbeat"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def server_groups(pids: Path) -> tuple[int, int]:
    """(the server's pid, which is its group id, and its helper's pid), once the server is up."""
    server, helper = (int(line) for line in pids.read_text().split())
    assert set(group_members(server)) >= {server, helper}, "the server and its helper share a group"
    return server, helper


def cleanup(worker: subprocess.Popen[bytes], pgids: set[int]) -> None:
    # On the old code the server outlives the worker; leave nothing running whatever happened.
    for pgid in pgids:
        signal_group(pgid, signal.SIGKILL)
    signal_group(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


def test_sigterm_to_the_worker_mid_poll_kills_the_servers_whole_process_group(worker_env, tmp_path):
    # The thread pool: the poll runs in the worker's main process (the embedded run, make run).
    pids, asked = enqueue_slow_poll(worker_env, tmp_path, "slow-threads", "hang_tools")
    worker = start_worker(worker_env, "threads", tmp_path / "worker.log")
    pgids: set[int] = set()
    try:
        wait_until(asked.exists, timeout=GUARD * 2, message="the poll to send tools/list")
        server, helper = server_groups(pids)
        pgids.add(server)
        worker.send_signal(signal.SIGTERM)
        wait_until(lambda: not group_members(server), timeout=GUARD, message="the server's group to be gone")
        assert worker.wait(timeout=GUARD) == 0  # a warm shutdown that did not wait out the poll
        outcome, message = last_poll(worker_env, "slow-threads").split("|", 1)
        assert outcome == "internal_error" and "worker shut down" in message  # not blamed on the server
    finally:
        cleanup(worker, pgids)


def test_sigterm_to_a_prefork_child_mid_poll_kills_the_servers_whole_process_group(worker_env, tmp_path):
    # billiard turns the child's SIGTERM into SystemExit, so the poll's own shielded stop runs on the
    # way out; config/celery.py relies on that rather than a handler of its own, and this pins it.
    # A stuck server: the pool child's death closes its stdin, which it ignores.
    pids, _ = enqueue_slow_poll(worker_env, tmp_path, "slow-prefork", "hang")
    worker = start_worker(worker_env, "prefork", tmp_path / "worker.log")
    pgids: set[int] = set()
    try:
        wait_until(
            lambda: pids.exists() and len(pids.read_text().split()) == 2,
            timeout=GUARD * 2,
            message="the poll to start the server",
        )
        server, helper = server_groups(pids)
        pgids.add(server)
        child = parent_of(server)
        assert child != worker.pid and parent_of(child) == worker.pid  # the pool's child runs the poll
        os.kill(child, signal.SIGTERM)
        wait_until(lambda: not group_members(server), timeout=GUARD, message="the server's group to be gone")
        # The pool may hand the lost poll to a new child; a cold shutdown stops that one too.
        worker.send_signal(signal.SIGQUIT)
        worker.wait(timeout=GUARD)
        restarted = int(pids.read_text().split()[0])
        pgids.add(restarted)
        assert group_members(server) == [] and group_members(restarted) == []
    finally:
        cleanup(worker, pgids)
