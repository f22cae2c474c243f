"""A worker killed outright (SIGKILL) in the middle of a poll, a delivery or an ingest: the work
finishes afterwards on another worker, exactly once.

What failed for real: a worker killed mid-poll left the server's lock behind and the dispatcher
never sent it again; a worker killed during a webhook POST left the delivery locked for good.

Each case runs real `celery worker` processes the way the embedded run does (SQLite and the
filesystem broker in a VAR_DIR of their own, so nothing is shared with the test database): worker
A takes the work, the test waits until A is in the middle of it (the stdio server was asked
`tools/list`, the webhook receiver holds the POST, the job has committed its first batches),
kills A with SIGKILL (no signal handler, no `finally`), then starts worker B and a stand-in for
beat that sends the periodic task that recovers such work. The broker message A had taken is
gone with it; only the leases and the sweeps bring the work back.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcptax.procgroup import signal_group
from tests.conftest import ROOT, make_envelope_log
from tests.helpers import django_script, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
GUARD = 120.0  # seconds; only against a hang, never a measured duration
CALLS = 3000  # an ingest long enough to be caught in the middle


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory) -> dict[str, str]:
    var = tmp_path_factory.mktemp("kill-var")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "VAR_DIR": str(var),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # Short leases, so a dead holder is recognised in seconds: a live poll could hold the lock
        # for 2 x 8 + 1 s (31 s with the 15 s this had; the poll of the recovery answers in well
        # under 8 s, the hang is the killed worker's), a live POST for 2 x 5 + 1 s, a live ingest
        # 5 s between heartbeats.
        "POLL_CONNECT_TIMEOUT": "8",
        "POLL_TOTAL_TIMEOUT": "8",
        "NOTIFY_HTTP_TIMEOUT": "5",
        "LEASE_GRACE_SECONDS": "1",
        "INGEST_JOB_LEASE_SECONDS": "5",
        "INGEST_BATCH_CALLS": "50",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=240
    )
    return env


def query(env: dict[str, str], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(Path(env["VAR_DIR"]) / "db.sqlite3", timeout=30) as conn:
        return conn.execute(sql, params).fetchall()


def start_worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads"]
            + ["--concurrency", "2", "-Q", "poll,ingest,notify,celery", "--loglevel", "INFO"]
            + ["--hostname", f"{name}-{os.getpid()}@%h", "--without-mingle", "--without-gossip"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_beat(env: dict[str, str], task: str, log: Path) -> subprocess.Popen[bytes]:
    """Beat's part, sped up: send the periodic task `task` every second (beat's own ticks are 15 s
    and 60 s; the task and the path it takes are the same)."""
    code = (
        "import time, django\ndjango.setup()\nfrom config.celery import app\n"
        f"while True:\n    app.send_task({task!r})\n    time.sleep(1)\n"
    )
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


class HoldingReceiver:
    """A webhook receiver that holds the first POST unanswered until released, answers the rest."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.first_arrived = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                if len(receiver.requests) == 1:
                    receiver.first_arrived.set()
                    receiver.release.wait(GUARD)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the sender died while we held it

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


# -- the three cases: start the work, know it is in the middle, know it finished -------------------


@dataclass
class Case:
    """`start` queues the work and returns a probe; `in_the_middle(probe)` and `finished(probe)`
    read the worker's database; `check(probe)` asserts it happened exactly once."""

    beat_task: str
    start: Callable[[dict[str, str], Path], Any]
    in_the_middle: Callable[[dict[str, str], Any], bool]
    finished: Callable[[dict[str, str], Any], bool]
    check: Callable[[dict[str, str], Any], None]


def start_poll(env: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    asked = tmp_path / "asked"
    args = ["-m", "examples.servers.misbehaving", "--mode", "hang_first", "--tools-list-file", str(asked)]
    server_id = django_script(
        env,
        f"""
from django.utils import timezone
from dashboard.servers.models import McpServer
from dashboard.teams.models import Team
team, _ = Team.objects.get_or_create(name="Ops")
server = McpServer.objects.create(
    team=team, name="hangs-once", transport="stdio", command={sys.executable!r}, args={args!r},
    cwd={str(ROOT)!r}, poll_interval_seconds=86400, next_poll_at=timezone.now(),
)
from config.celery import app
app.send_task("dashboard.tasks.dispatch_due_polls")
print(server.pk)
""",
    )
    return {"server": int(server_id), "asked": asked}


def poll_runs(env: dict[str, str], probe: dict[str, Any]) -> list[tuple[Any, ...]]:
    return query(env, "SELECT outcome FROM dashboard_pollrun WHERE server_id = ?", probe["server"])


def check_poll(env: dict[str, str], probe: dict[str, Any]) -> None:
    # One poll recorded, the good one: the killed attempt left nothing but its lock.
    assert poll_runs(env, probe) == [("ok",)]
    (snapshots,) = query(env, "SELECT count(*) FROM dashboard_snapshot WHERE server_id = ?", probe["server"])
    assert snapshots == (1,)
    ((since, lease, outcome),) = query(
        env,
        "SELECT polling_since, poll_lease, last_outcome FROM dashboard_mcpserver WHERE id = ?",
        probe["server"],
    )
    assert (since, lease, outcome) == (None, "", "ok")
    tools = query(
        env,
        "SELECT t.name FROM dashboard_snapshottool t JOIN dashboard_snapshot s ON s.id = t.snapshot_id "
        "WHERE s.server_id = ? ORDER BY t.name",
        probe["server"],
    )
    assert [name for (name,) in tools] == ["alpha", "mid", "zeta"]  # both pages of the quirky list


def start_delivery(env: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    receiver = HoldingReceiver()
    delivery_id = django_script(
        env,
        f"""
from dashboard.alerts.notify.delivery import create_test_delivery
from dashboard.alerts.notify.models import Channel
from dashboard.teams.models import Team
team, _ = Team.objects.get_or_create(name="Ops")
channel = Channel.objects.create(team=team, name="hook", kind="webhook", config={{"url": {receiver.url!r}}})
delivery = create_test_delivery(channel)
from config.celery import app
app.send_task("dashboard.tasks.deliver_notification", args=[delivery.pk])
print(delivery.pk)
""",
    )
    return {"delivery": int(delivery_id), "receiver": receiver}


def delivery_row(env: dict[str, str], probe: dict[str, Any]) -> tuple[Any, ...]:
    ((row),) = query(
        env,
        "SELECT status, processed, locked_at, attempts FROM dashboard_delivery WHERE id = ?",
        probe["delivery"],
    )
    return row


def check_delivery(env: dict[str, str], probe: dict[str, Any]) -> None:
    receiver: HoldingReceiver = probe["receiver"]
    status, processed, locked_at, attempts = delivery_row(env, probe)
    assert (status, locked_at, attempts) == ("sent", None, 2) and processed is not None
    # One attempt recorded, the good one; the killed one left only its lock and its count.
    sent = query(env, "SELECT status FROM dashboard_notification WHERE delivery_id = ?", probe["delivery"])
    assert sent == [("sent",)]
    # The receiver saw the POST twice (the first arrived before the kill) under one delivery id,
    # which is what it drops the repeat by: once, after that.
    assert len(receiver.requests) == 2
    ids = {r["headers"].get("X-MCP-Tax-Delivery") for r in receiver.requests}
    assert ids == {str(probe["delivery"])}
    assert receiver.requests[0]["body"] == receiver.requests[1]["body"]
    receiver.close()


def start_ingest(env: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "big.jsonl"
    path.write_bytes(make_envelope_log(CALLS, bad_lines=7, content_bytes=3000, seed="kill"))
    job_id = django_script(
        env,
        f"""
from pathlib import Path
from dashboard.teams.models import Team
from ingest.capture.pipeline import ingest_bytes
team, _ = Team.objects.get_or_create(name="Ops")
job = ingest_bytes(team, Path({str(path)!r}).read_bytes(), source="upload", filename="big.jsonl", run=False)
from config.celery import app
app.send_task("ingest.tasks.run_ingest_job", args=[job.pk])
print(job.pk)
""",
    )
    return {"job": int(job_id)}


def job_calls(env: dict[str, str], probe: dict[str, Any]) -> int:
    ((count,),) = query(env, "SELECT count(*) FROM ingest_toolcall WHERE job_id = ?", probe["job"])
    return int(count)


def job_status(env: dict[str, str], probe: dict[str, Any]) -> str:
    ((status,),) = query(env, "SELECT status FROM ingest_ingestjob WHERE id = ?", probe["job"])
    return str(status)


def check_ingest(env: dict[str, str], probe: dict[str, Any]) -> None:
    ((status, lines, stored, quarantined, ignored, duplicate, calls),) = query(
        env,
        "SELECT status, lines_read, stored, quarantined, ignored, duplicate, calls_stored "
        "FROM ingest_ingestjob WHERE id = ?",
        probe["job"],
    )
    # The log's own make-up: 2 session lines, 2 per call, 7 broken ones; none counted twice.
    assert (status, lines, stored, quarantined, ignored, duplicate, calls) == (
        "done",
        2 + 2 * CALLS + 7,
        2 * CALLS,
        7,
        2,
        0,
        CALLS,
    )
    assert job_calls(env, probe) == CALLS
    (distinct,) = query(
        env, "SELECT count(DISTINCT dedupe_key) FROM ingest_toolcall WHERE job_id = ?", probe["job"]
    )
    assert distinct == (CALLS,)


CASES = {
    "poll": Case(
        beat_task="dashboard.tasks.dispatch_due_polls",
        start=start_poll,
        in_the_middle=lambda env, probe: probe["asked"].exists(),
        finished=lambda env, probe: bool(poll_runs(env, probe)),
        check=check_poll,
    ),
    "delivery": Case(
        beat_task="dashboard.tasks.sweep_notifications",
        start=start_delivery,
        in_the_middle=lambda env, probe: probe["receiver"].first_arrived.is_set(),
        finished=lambda env, probe: delivery_row(env, probe)[1] is not None,
        check=check_delivery,
    ),
    "ingest": Case(
        beat_task="ingest.tasks.resume_stalled_jobs",
        start=start_ingest,
        in_the_middle=lambda env, probe: job_calls(env, probe) > 0,
        finished=lambda env, probe: job_status(env, probe) in ("done", "failed"),
        check=check_ingest,
    ),
}


@contextmanager
def running(*procs: Callable[[], subprocess.Popen[bytes]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    started = [start() for start in procs]
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                kill(proc)


@pytest.mark.parametrize("name", list(CASES))
def test_work_a_killed_worker_was_doing_finishes_on_another_exactly_once(name, worker_env, tmp_path):
    case = CASES[name]
    logs = tmp_path / "logs"
    logs.mkdir()
    probe = case.start(worker_env, tmp_path)
    worker_a = start_worker(worker_env, f"a-{name}", logs / "a.log")
    try:

        def in_the_middle() -> bool:
            assert worker_a.poll() is None, f"worker A exited; see {logs / 'a.log'}"
            assert not case.finished(worker_env, probe), "the work ended before worker A could be killed"
            return case.in_the_middle(worker_env, probe)

        wait_until(
            in_the_middle, timeout=GUARD, interval=0.02, message=f"worker A in the middle of the {name}"
        )
    finally:
        kill(worker_a)
    if name == "ingest":
        # Killed between batches: some calls committed, the rest of the file never read.
        assert 0 < job_calls(worker_env, probe) < CALLS
        assert job_status(worker_env, probe) == "running"
    assert not case.finished(worker_env, probe)

    with running(
        lambda: start_worker(worker_env, f"b-{name}", logs / "b.log"),
        lambda: start_beat(worker_env, case.beat_task, logs / "beat.log"),
    ):
        wait_until(
            lambda: case.finished(worker_env, probe),
            timeout=GUARD,
            message=f"the {name} to finish on worker B",
        )
    case.check(worker_env, probe)
    log_b = (logs / "b.log").read_text(errors="replace")
    assert "Traceback" not in log_b, log_b[-3000:]


def test_each_case_names_its_recovery_task():
    # The beat stand-in sends only the task beat itself sends; a typo would pass silently otherwise.
    from config.celery import app

    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {case.beat_task for case in CASES.values()} <= scheduled
