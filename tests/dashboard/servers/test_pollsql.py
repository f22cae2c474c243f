"""The poll's bookkeeping on PostgreSQL (`pollsql`): its two statements must take the lock by the
same rule, read the same server and leave the same rows as the ORM's five.

The lock boundaries are written out (as in test_lease_rules.py), not computed from the code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import close_old_connections, connection, connections, transaction

from dashboard.servers import polling, pollsql
from dashboard.servers.models import McpServer, PollRun, Transport
from tests.dashboard.factories import record, tool

pytestmark = [pytest.mark.services, pytest.mark.django_db]

AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
SECOND = timedelta(seconds=1)
T = timedelta(seconds=100)  # POLL_TOTAL_TIMEOUT
STALE = 2 * T + timedelta(seconds=60)  # twice the longest poll, plus the grace


@pytest.fixture(autouse=True)
def rules(settings, postgres_and_redis):
    settings.POLL_TOTAL_TIMEOUT, settings.LEASE_GRACE_SECONDS = 100.0, 60


def _held(team, since: datetime | None, lease: str = "a-worker") -> McpServer:
    server = McpServer.objects.create(
        team=team, name="held", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    McpServer.objects.filter(pk=server.pk).update(polling_since=since, poll_lease=lease)
    return server


@pytest.mark.parametrize(
    ("age", "free"),
    [
        (T - SECOND, False),
        (T + SECOND, False),
        (2 * T - SECOND, False),
        (2 * T + SECOND, False),
        (STALE, False),
        (STALE + SECOND, True),
    ],
)
def test_the_one_statement_claim_takes_a_lock_only_once_it_is_stale(team, age, free):
    server = _held(team, AT)
    claimed, read = pollsql.claim_and_read(server.pk, "b-worker", AT + age)
    assert claimed is free and read is not None and read.pk == server.pk
    server.refresh_from_db()
    expected = (AT + age, "b-worker") if free else (AT, "a-worker")
    assert (server.polling_since, server.poll_lease) == expected
    if free:
        assert (read.polling_since, read.poll_lease) == expected


def test_the_same_lease_takes_its_own_lock_back_and_an_empty_one_does_not(team):
    server = _held(team, AT, lease="task-1")
    assert pollsql.claim_and_read(server.pk, "task-1", AT + SECOND)[0] is True
    assert pollsql.claim_and_read(server.pk, "task-2", AT + 2 * SECOND)[0] is False
    unnamed = McpServer.objects.create(
        team=team, name="unnamed", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    McpServer.objects.filter(pk=unnamed.pk).update(polling_since=AT, poll_lease="")
    assert pollsql.claim_and_read(unnamed.pk, "", AT + SECOND)[0] is False
    free = McpServer.objects.create(
        team=team, name="free", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    assert pollsql.claim_and_read(free.pk, "", AT)[0] is True


def test_a_missing_server_is_neither_claimed_nor_read(team):
    assert pollsql.claim_and_read(10**9, "task", AT) == (False, None)


def _fields(instance, deferred: frozenset[str] | set[str] = frozenset()) -> dict:
    return {
        f.attname: getattr(instance, f.attname)
        for f in instance._meta.concrete_fields
        if f.name not in deferred
    }


def test_the_server_read_with_the_claim_is_the_one_the_orm_reads(team):
    server = McpServer.objects.create(
        team=team,
        name="secret",
        transport=Transport.HTTP,
        url="http://127.0.0.1:9/",
        headers={"Authorization": "Bearer s3cret"},
        env={"TOKEN": "x"},
    )
    record(server, [tool("read", "Read a file."), tool("write", "Write a file.")], "1.0")
    current = record(server, [tool("read", "Read a file, faster.")], "1.1")
    orm = polling.read_server(server.pk)
    claimed, read = pollsql.claim_and_read(server.pk, "task", AT)
    assert claimed and read is not None and orm is not None
    assert _fields(read, {"polling_since", "poll_lease"}) == _fields(orm, {"polling_since", "poll_lease"})
    assert read.headers == {"Authorization": "Bearer s3cret"} and read.env == {"TOKEN": "x"}
    assert _fields(read.team) == _fields(orm.team)
    unused = set(pollsql.UNUSED_CURRENT)
    assert read.current_snapshot.pk == current.pk
    assert _fields(read.current_snapshot, unused) == _fields(orm.current_snapshot, unused)
    assert read.current_snapshot.get_deferred_fields() == orm.current_snapshot.get_deferred_fields() == unused
    # Nothing more is asked of the database to use what a poll uses.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        used = (read.team.protocol_era, read.current_snapshot.sha256, read.current_snapshot.eras)
    assert queries.captured_queries == [] and used == (orm.team.protocol_era, current.sha256, current.eras)


def test_a_server_without_a_snapshot_reads_none_as_current(team):
    server = McpServer.objects.create(
        team=team, name="new", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    claimed, read = pollsql.claim_and_read(server.pk, "", AT)
    assert claimed and read is not None and read.current_snapshot is None


def _a_task_starts() -> None:
    """What Celery's Django fixup does before each task: Django would now check the connection
    (``CONN_HEALTH_CHECKS``) before the task's first query."""
    connection.ensure_connection()
    close_old_connections()
    assert connection.health_check_enabled and not connection.health_check_done


@pytest.mark.django_db(transaction=True)
def test_the_claim_stands_in_for_the_connections_health_check(team, monkeypatch):
    server = _held(team, None, "")
    checks: list[bool] = []
    backend = type(connections["default"])
    is_usable = backend.is_usable
    monkeypatch.setattr(backend, "is_usable", lambda self: checks.append(is_usable(self)) or True)
    _a_task_starts()
    claimed, read = pollsql.claim_and_read(server.pk, "lease-1", AT)
    assert claimed and read is not None and read.pk == server.pk
    assert checks == [], "a SELECT 1 before the claim: one more round trip per poll"


@pytest.mark.django_db(transaction=True)
def test_a_claim_on_a_dead_connection_reconnects_and_claims(team):
    server = _held(team, None, "")
    _a_task_starts()
    dead = connection.connection.info.backend_pid
    params = connection.settings_dict
    with psycopg.connect(
        dbname=params["NAME"], user=params["USER"], host=params["HOST"], port=params["PORT"], autocommit=True
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [dead])
    claimed, read = pollsql.claim_and_read(server.pk, "lease-1", AT)
    assert claimed and read is not None and read.pk == server.pk
    assert connection.connection.info.backend_pid != dead
    assert McpServer.objects.get(pk=server.pk).poll_lease == "lease-1"


@pytest.mark.django_db(transaction=True)
def test_the_two_statements_commit_without_waiting_for_the_disk_and_only_they(team):
    server = _held(team, None, "")
    with transaction.atomic():  # so the setting can be read inside the statement's transaction
        claimed, read = pollsql.claim_and_read(server.pk, "lease-1", AT)
        assert claimed and read is not None
        assert _synchronous_commit() == "off"
    assert _synchronous_commit() == "on", "only the poll's own transaction, never the connection's"
    # The finish: an unchanged poll's run, the lock's release and the snapshot's last_seen.
    snapshot = record(read, [tool("read", "Read a file.")], "1.0")
    run = PollRun(server=read, started=AT, duration_ms=5, outcome="ok", trigger="test")
    with transaction.atomic():
        pollsql.finish_unchanged(read, run, snapshot, polling._released(read, run))
        assert _synchronous_commit() == "off"
    assert _synchronous_commit() == "on"
    assert PollRun.objects.filter(pk=run.pk).exists()


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]
