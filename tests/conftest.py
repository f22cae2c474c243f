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
from typing import Any

import pytest

from tests.clock import RateClock
from tests.helpers import IN_CI, LOOPBACK_NETWORKS, need, worker_environment

ROOT = Path(__file__).resolve().parent.parent
need_service = need  # the one skip rule: skip locally, fail when CI=true
__all__ = ["IN_CI", "need_service"]
# Headless Chromium: the browser_page fixture and its helpers (browser_login, axe-core).
pytest_plugins = ["tests.browser"]

# Processes the tests start (a Celery worker, manage.py) read the environment.
os.environ.setdefault("OUTBOUND_ALLOW_NETWORKS", ",".join(LOOPBACK_NETWORKS))


@pytest.fixture(scope="session", autouse=True)
def shared_ingest_storage(tmp_path_factory):
    """The PostgreSQL leg keeps every ingest file in a real S3-compatible server (moto's server
    mode, see tests/s3server.py), as the full stack keeps them in MinIO: this process and every
    worker a test starts (through ``worker_environment``) use the same bucket. Yields the server,
    or None on the SQLite leg (files under MEDIA_ROOT). With CI=true a server that cannot start
    fails the run."""
    from tests import s3server

    if not s3server.wanted():
        yield None
        return
    try:
        server = s3server.S3Server(tmp_path_factory.mktemp("s3") / "moto.log")
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"CI=true and the S3-compatible test server did not start: {exc}")
        yield None  # locally: the leg runs on local files; tests that need S3 skip
        return
    from django.conf import settings
    from django.test import override_settings

    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    with override_settings(STORAGES={**settings.STORAGES, "ingest": server.storage_setting()}):
        yield server
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    server.stop()


@pytest.fixture
def s3_server(shared_ingest_storage):
    """The S3-compatible server the ingest storage runs on (only the PostgreSQL leg has one)."""
    if shared_ingest_storage is None:
        need_service("the ingest storage runs on S3 in the PostgreSQL leg (or with TEST_S3=1)")
    return shared_ingest_storage


@pytest.fixture(scope="session", autouse=True)
def fast_password_hasher():
    """Users made by the tests hash their passwords with MD5, not the production PBKDF2 at a million
    rounds (a quarter second of CPU per user, in hundreds of tests). The PBKDF2 hasher stays second,
    so a hash made the production way still verifies; tests/dashboard/teams/test_views.py checks
    that production hashes with PBKDF2."""
    from django.test import override_settings

    override = override_settings(
        PASSWORD_HASHERS=[
            "django.contrib.auth.hashers.MD5PasswordHasher",
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        ]
    )
    override.enable()
    yield
    override.disable()


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    """Every test may reach loopback (its own servers); a test of the policy sets this to []."""
    settings.OUTBOUND_ALLOW_NETWORKS = list(LOOPBACK_NETWORKS)


@pytest.fixture
def user_factory(db, django_user_model):
    def make(username: str, password: str = "pw-for-tests-123"):
        return django_user_model.objects.create_user(username=username, password=password)

    return make


@pytest.fixture
def team_factory(db):
    from dashboard.teams.models import Membership, Team

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
    env = worker_environment()
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


# The example servers' answers, one per (command, args, env): each release is polled for real once
# per session, over stdio, and every later history gets that same answer.
_EXAMPLE_ANSWERS: dict[str, Any] = {}


def _answer_once_per_session(real: Any) -> Any:
    import copy
    import json as _json

    def fetch(target: Any, **options: Any) -> Any:
        # Per protocol era too: a poll asks a modern server in both, counting listings in one only.
        key = _json.dumps(
            [target.transport, target.command, target.args, sorted(target.env.items()), options.get("mode")]
        )
        if key not in _EXAMPLE_ANSWERS:
            _EXAMPLE_ANSWERS[key] = real(target, **options)
        return copy.deepcopy(_EXAMPLE_ANSWERS[key])

    return fetch


@pytest.fixture
def polled_example_servers(team, alice):
    """The demo's two example servers in `team`, polled through their release history by the
    product's own poll (claim, record, figures, findings, budgets). The example servers are
    deterministic, so each release's stdio exchange runs once per session (7 real polls per test
    before); the answer is reused only while the history is built, never for a test's own polls."""
    from dashboard.demo import build_history, ensure_example_servers
    from mcptax.client import fetch as fetch_module

    servers = {s.name: s for s in ensure_example_servers(team, owner=alice)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            fetch_module, "fetch_tools_sync", _answer_once_per_session(fetch_module.fetch_tools_sync)
        )
        for server in servers.values():
            build_history(server)
            server.refresh_from_db()
    return servers


@pytest.fixture
def rate_clock(monkeypatch):
    """Pins the rate limiter's clock 10 s into a minute (2026-01-01 00:00:10 UTC), so requests a
    test sends within one window stay in it whatever the real clock does; `advance` moves it."""
    from dashboard.teams import ratelimit

    clock = RateClock(1_767_225_610.0)
    monkeypatch.setattr(ratelimit, "clock", clock)
    return clock


@pytest.fixture
def eager_celery():
    """Run Celery tasks in-process (the app reads its config once, so settings alone would not do)."""
    from config.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = before


def make_envelope_log(
    calls: int = 2, *, session: str = "s-1", bad_lines: int = 0, content_bytes: int = 2000, seed: str = "x"
) -> bytes:
    """Envelope JSONL of one stdio session: initialize, then `calls` tools/call round trips carrying a
    bulk `content` argument, then `bad_lines` lines of broken JSON.

    Line outcomes: 2 ignored (session context), 2 * calls stored, bad_lines quarantined.
    """
    import json as _json

    def line(seq: int, direction: str, raw: dict) -> bytes:
        envelope = {
            "session_id": session,
            "server_label": "files",
            "seq": seq,
            "ts": f"2026-01-02T03:04:{seq % 60:02d}.000Z",
            "direction": direction,
            "transport": "stdio",
            "raw": raw,
        }
        return _json.dumps(envelope, separators=(",", ":")).encode() + b"\n"

    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2.0.14"},
    }
    out = [
        line(0, "c2s", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
        line(
            1, "s2c", {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "files", "version": "1"}}}
        ),
    ]
    for i in range(1, calls + 1):
        body = (f"{seed}:{session}:{i}:" * (content_bytes // 8 + 1))[:content_bytes]
        arguments = {"path": f"f{i}.txt", "content": body}
        request = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "write_file", "arguments": arguments},
        }
        response = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "ok"}]}}
        out += [line(2 * i, "c2s", request), line(2 * i + 1, "s2c", response)]
    out += [b'{"session_id": "broken' + str(n).encode() + b"\n" for n in range(bad_lines)]
    return b"".join(out)


@pytest.fixture
def envelope_log():
    return make_envelope_log


@pytest.fixture
def team_token(team):
    """A live API token of `team`: (row, plaintext)."""
    from dashboard.teams.models import ApiToken

    return ApiToken.issue(team, "tests")


# -- the services leg runs only what the services can change ------------------------------------

DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


def pytest_addoption(parser):
    parser.addoption(
        "--services-leg",
        action="store_true",
        help="keep only tests that touch the database, the cache or the broker (the second leg's "
        "PostgreSQL + Redis run); tests of plain code gave their answer in the first leg",
    )


def uses_services(item) -> bool:
    """A test whose outcome can depend on the database, the cache or the broker."""
    if item.get_closest_marker("services") or item.get_closest_marker("django_db"):
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--services-leg"):
        return
    kept, dropped = [], []
    for item in items:
        (kept if uses_services(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def gunicorn_url(transactional_db):
    """The project's WSGI app behind gunicorn's own HTTP parser and WSGI environ (what the web
    process runs in production), served from a thread on 127.0.0.1; yields the base URL.

    gunicorn de-chunks a ``Transfer-Encoding: chunked`` body and passes no CONTENT_LENGTH, which
    Django's test client and development server cannot reproduce.
    """
    import socket
    import threading

    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connections
    from gunicorn import http as gunicorn_http
    from gunicorn.config import Config
    from gunicorn.http import wsgi as gunicorn_wsgi

    app, cfg = WSGIHandler(), Config()
    listener = socket.create_server(("127.0.0.1", 0))
    connection = connections["default"]
    shared = connection.vendor == "sqlite" and connection.is_in_memory_db()
    if shared:  # the thread must see the test's in-memory database, as live_server does
        connection.inc_thread_sharing()

    stop = threading.Event()
    listener.settimeout(0.2)  # so the loop sees `stop`; a closed socket does not wake accept()

    def serve() -> None:
        if shared:
            connections["default"] = connection
        while not stop.is_set():
            try:
                client, addr = listener.accept()
            except TimeoutError:
                continue
            client.settimeout(60)
            with client:
                req = next(gunicorn_http.get_parser(cfg, client, addr))
                resp, environ = gunicorn_wsgi.create(req, client, addr, listener.getsockname(), cfg)
                resp.force_close()
                result = app(environ, resp.start_response)
                for item in result:
                    resp.write(item)
                resp.close()
                result.close()
        if not shared:  # this thread's own connection, or the test database stays in use
            connections.close_all()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield "127.0.0.1", listener.getsockname()[1]
    stop.set()
    thread.join(timeout=10)
    listener.close()
    if shared:
        connection.dec_thread_sharing()
