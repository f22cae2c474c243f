"""The full stack as docker-compose.yml declares it, started for real without Docker.

No Docker engine runs here, so the test reads docker-compose.yml and the Dockerfile as data and
starts exactly the processes they declare (every app service's own command and environment:
gunicorn, one Celery worker per queue, beat), with only the addresses localized: the machine's
PostgreSQL (a fresh database of its own), Redis (a database number of its own), the test setup's
S3-compatible server (moto's server mode; MinIO's binary comes from no registry) holding the
bucket the compose file names, and loopback ports in place of the compose hosts. The keys come from `scripts/make_env.py`, as the README says, and
the static files from the Dockerfile's own `collectstatic` line. Then one poll, one upload and
one alert go through those processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcptax.procgroup import signal_group
from scripts.make_env import ensure_env
from tests.conftest import ROOT, make_envelope_log
from tests.helpers import LOOPBACK_NETWORKS, Receiver, free_port, manage_shell, wait_for_port, wait_until

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(600)]
GUARD = 180.0  # seconds; only against a hang
# The stack's own Redis database (flushed): another number for a second checkout on one machine.
SMOKE_REDIS_DB = int(os.environ.get("TEST_SMOKE_REDIS_DB", "12"))


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def app_services() -> dict[str, dict[str, Any]]:
    """The services built from this repository (the rest are images: database, cache, store)."""
    return {name: spec for name, spec in compose()["services"].items() if "build" in spec}


def substitute(value: str, env_file: dict[str, str]) -> str:
    """Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?error}`, from the .env file."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if name in env_file:
            return env_file[name]
        if op == ":?":
            raise AssertionError(f"compose would refuse to start: {name}: {arg}")
        return arg or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, str(value))


def dockerfile_env() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text()
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.+)$", text, re.M):
        env.update(pair.split("=", 1) for pair in shlex.split(line))
    return env


def collectstatic_command() -> list[str]:
    (line,) = [ln for ln in (ROOT / "Dockerfile").read_text().splitlines() if "collectstatic" in ln]
    return shlex.split(line.removeprefix("RUN "))


@pytest.fixture
def stack_env(postgres_and_redis, s3_server, settings, tmp_path) -> Iterator[dict[str, str]]:
    """Every app service's environment, localized; a fresh database, dropped afterwards."""
    import psycopg
    import redis

    db = settings.DATABASES["default"]
    name = f"mcptax_smoke_{os.getpid()}"
    admin = f"host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432} user={db['USER'] or 'postgres'}"
    with psycopg.connect(admin + " dbname=postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_url = re.sub(r"/\d+$", "", settings.REDIS_URL) + f"/{SMOKE_REDIS_DB}"
    redis.Redis.from_url(redis_url).flushdb()

    env_file = tmp_path / ".env"
    ensure_env(env_file)  # what the README's first full-stack command does
    keys = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    services = app_services()
    declared = [spec.get("environment", {}) for spec in services.values()]
    assert all(d == declared[0] for d in declared), "every app service shares one environment"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {key: substitute(value, keys) for key, value in declared[0].items()}
    env |= dockerfile_env()
    env |= {
        # The compose hosts `db` and `redis`, here.
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}",
        "REDIS_URL": redis_url,
        # The compose host `minio`, here: the same bucket name, created as `minio-bucket` does.
        "INGEST_S3_ENDPOINT_URL": s3_server.endpoint,
        # /app/var and /app/staticfiles, here.
        "VAR_DIR": str(tmp_path / "var"),
        "STATIC_ROOT": str(tmp_path / "staticfiles"),
        # The test's webhook receiver listens on loopback, which the outbound policy refuses.
        "OUTBOUND_ALLOW_NETWORKS": ",".join(LOOPBACK_NETWORKS),
        # The image's commands (`celery`, `gunicorn`, `python`) from this virtualenv.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    (tmp_path / "var").mkdir()
    assert env["INGEST_S3_BUCKET"], "compose keeps the ingest files in a bucket"
    with contextlib.suppress(s3_server.client().exceptions.BucketAlreadyOwnedByYou):
        s3_server.client().create_bucket(Bucket=env["INGEST_S3_BUCKET"])
    built = subprocess.run(
        ["env", *collectstatic_command()],
        cwd=ROOT,
        env={**env, "DEBUG": "false"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        yield env
    finally:
        with psycopg.connect(admin + " dbname=postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sql(env: dict[str, str], query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as conn:
        return conn.execute(query, params).fetchall()


def test_one_poll_one_upload_and_one_alert_through_the_compose_processes(stack_env, s3_server, tmp_path):
    env = stack_env
    services = app_services()
    assert {"migrate", "web", "beat"} <= set(services)
    workers = {
        name: spec
        for name, spec in services.items()
        if spec["command"][:4] == ["celery", "-A", "config", "worker"]
    }
    queues = {
        q for spec in workers.values() for q in spec["command"][spec["command"].index("-Q") + 1].split(",")
    }
    assert len(workers) >= 3 and queues == {"poll", "ingest", "notify", "celery"}

    migrate = subprocess.run(
        services["migrate"]["command"], cwd=ROOT, env=env, capture_output=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]

    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    with Receiver() as hook:
        setup = manage_shell(
            env,
            f"""
import json, sys
from django.contrib.auth import get_user_model
from dashboard.alerts.models import Budget
from dashboard.alerts.notify.models import Channel
from dashboard.servers.models import McpServer
from dashboard.teams.models import ApiToken, Membership, Team
from django.utils import timezone
user = get_user_model().objects.create_user("ops", password="smoke-pass-2026")
team = Team.objects.create(name="Smoke")
Membership.objects.create(team=team, user=user, role="owner")
server = McpServer.objects.create(
    team=team, name="lean", transport="stdio", command=sys.executable, args=["-m", "examples.servers.lean"],
    cwd={str(ROOT)!r}, poll_interval_seconds=3600, next_poll_at=timezone.now(),
)
Budget.objects.create(team=team, server=server, measure="fixed_tax_tokens", level="warning", limit=1)
Channel.objects.create(team=team, name="hook", kind="webhook", config={{"url": {hook.url!r}}})
print(json.dumps({{"token": ApiToken.issue(team, "smoke")[1], "server": server.pk}}))
""",
        )
        made = json.loads(setup.strip().splitlines()[-1])
        try:
            for name, spec in services.items():
                if name == "migrate":
                    continue
                # The data volume's mount point (/app/var) is this run's VAR_DIR; port 8000 a free one.
                (mount,) = [v.split(":")[1] for v in spec.get("volumes", []) if v.startswith("appdata:")]
                command = [
                    part.replace("0.0.0.0:8000", f"127.0.0.1:{port}").replace(mount, env["VAR_DIR"])
                    for part in spec["command"]
                ]
                with open(logs / f"{name}.log", "wb") as out:
                    procs[name] = subprocess.Popen(
                        command,
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            wait_for_port(port, procs["web"], timeout=GUARD)

            # The web tier serves its pages and the image's static files (DEBUG=false, manifest).
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=30).read().decode()
            (css,) = re.findall(r'href="(/static/[^"]+\.css)"', page)[:1]
            assert urllib.request.urlopen(f"http://127.0.0.1:{port}{css}", timeout=30).status == 200

            # One upload: pushed to the API, run by the ingest worker.
            body = make_envelope_log(3, bad_lines=1)
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/ingest?wait=false&filename=smoke.jsonl",
                data=body,
                headers={"Authorization": f"Bearer {made['token']}", "Content-Type": "application/x-ndjson"},
            )
            answer = urllib.request.urlopen(request, timeout=60)
            assert answer.status == 202
            job_code = json.loads(answer.read())["code"]

            def job_done() -> tuple[Any, ...] | None:
                running(procs)
                rows = sql(
                    env,
                    "SELECT status, stored, quarantined, calls_stored FROM ingest_ingestjob WHERE code = %s",
                    job_code,
                )
                return rows[0] if rows and rows[0][0] in ("done", "failed") else None

            # The log's make-up: 2 session lines ignored, 2 per call stored, the broken line quarantined.
            assert wait_until(job_done, timeout=GUARD, interval=0.5, message="the pushed job") == (
                "done",
                6,
                1,
                3,
            )
            # The web process put the body in the bucket; the ingest worker read it from there.
            ((name,),) = sql(env, "SELECT storage_name FROM ingest_ingestjob WHERE code = %s", job_code)
            kept = s3_server.client().get_object(Bucket=env["INGEST_S3_BUCKET"], Key=name)["Body"].read()
            assert kept == body
            assert not list(Path(env["VAR_DIR"]).rglob(Path(name).name))

            # One poll: due now, sent by beat, run by the poll worker.
            def polled() -> list[tuple[Any, ...]]:
                running(procs)
                return sql(
                    env, "SELECT outcome, trigger FROM dashboard_pollrun WHERE server_id = %s", made["server"]
                )

            assert wait_until(polled, timeout=GUARD, interval=0.5, message="beat's poll") == [
                ("ok", "schedule")
            ]

            # One alert: the budget is exceeded, and the notify worker delivers it.
            arrived = wait_until(
                lambda: (
                    running(procs)
                    and [r for r in hook.delivered if json.loads(r["body"])["event"] == "alert.opened"]
                ),
                timeout=GUARD,
                interval=0.5,
                message="the alert's webhook",
            )
            payload = json.loads(arrived[0]["body"])
            assert payload["alert"]["server"] == "lean" and payload["alert"]["limit"] == 1
        finally:
            # As `docker compose stop` does: SIGTERM to each service's main process (its PID 1)
            # only, so a Celery worker finishes the job in hand (warm shutdown). Sent to the whole
            # group, it also killed the pool's children mid-job (WorkerLostError, 1 run in 6).
            for proc in procs.values():
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGTERM)
            for proc in procs.values():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
    for name in procs:
        text = (logs / f"{name}.log").read_text(errors="replace")
        assert "Traceback" not in text, f"{name}: {text[-3000:]}"


def running(procs: dict[str, subprocess.Popen[bytes]]) -> list[str]:
    """The names of the processes still running; fails the test if one of them has exited."""
    gone = {name: proc.returncode for name, proc in procs.items() if proc.poll() is not None}
    assert not gone, f"exited early: {gone}"
    return list(procs)
