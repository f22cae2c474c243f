"""Shared fixtures: users and teams, and the real services (PostgreSQL, Redis, a Celery worker).

Service tests carry the `services` marker. Locally they skip when a service is missing; with
CI=true a missing service is a failure, so CI can never pass without exercising them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"


def need_service(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true and a required service is missing: {reason}")
    pytest.skip(reason)


@pytest.fixture
def user_factory(db, django_user_model):
    def make(username: str, password: str = "pw-for-tests-123"):
        return django_user_model.objects.create_user(username=username, password=password)

    return make


@pytest.fixture
def team_factory(db):
    from dashboard.models import Membership, Team

    def make(name: str, *members, role: str = Membership.Role.OWNER) -> Team:
        team = Team.objects.create(name=name)
        for user in members:
            Membership.objects.create(team=team, user=user, role=role)
        return team

    return make


@pytest.fixture
def alice(user_factory):
    return user_factory("alice")


@pytest.fixture
def team(team_factory, alice):
    return team_factory("Platform", alice)


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def postgres_and_redis(settings):
    """Assert the PostgreSQL + Redis leg is what runs, or skip/fail."""
    from django.db import connection

    if connection.vendor != "postgresql":
        need_service(f"needs PostgreSQL as DATABASE_URL (this run uses {connection.vendor})")
    if not settings.REDIS_URL:
        need_service("needs REDIS_URL (this run uses the embedded broker)")
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        need_service(f"Redis at {settings.REDIS_URL} not reachable: {exc}")


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real `celery worker` process consuming every queue, pointed at the test database."""
    from django.conf import settings
    from django.db import connection

    if not settings.REDIS_URL or connection.vendor != "postgresql":
        need_service("a real Celery worker runs in the PostgreSQL + Redis leg")
    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER'] or ''}{':' + db['PASSWORD'] if db['PASSWORD'] else ''}"
        f"@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    log = open(ROOT / "var" / "test-celery-worker.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--loglevel",
            "INFO",
            "-Q",
            "poll,ingest,notify,celery",
            "--pool",
            "threads",
            "--concurrency",
            "4",
            "--hostname",
            f"pytest-{os.getpid()}@%h",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    from config.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"Celery worker exited with {proc.returncode}; see var/test-celery-worker.log")
        replies = app.control.ping(timeout=1.0)
        if any(f"pytest-{os.getpid()}@" in name for reply in replies for name in reply):
            break
    else:
        proc.terminate()
        pytest.fail("Celery worker did not answer a ping within 60 s")
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
