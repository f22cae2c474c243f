"""A poll's bookkeeping on PostgreSQL in two statements instead of five.

Most polls find the server as last time. What such a poll writes around its fetch is small, but
through the ORM it is five statements, each compiled in Python and each committed on its own:
claim the lock, read the server, extend the snapshot, record the run, release the lock. Here the
first two are one statement and the last three another, each a data-modifying ``WITH``, with the
SQL built once per process from the models' own metadata. Other databases (SQLite has no
data-modifying ``WITH``) take the ORM path in ``polling``; both paths run the same tests.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from typing import Any, cast

from django.db import InterfaceError, OperationalError, connection
from django.db.models import Field, Model

from dashboard.servers.models import McpServer, PollRun, Snapshot, poll_lock_stale_after
from dashboard.teams.models import Team

log = logging.getLogger(__name__)

# Both statements commit without waiting for the WAL to reach the disk (synchronous_commit off, for
# their own transaction only; the part of the statement that reads it makes PostgreSQL run it). A
# crash of the database may lose the last fraction of a second of them: the next poll writes the
# run and last_seen again, and a lock whose release was lost goes stale and is taken back, as
# after a worker's crash. New snapshots, and everything else, commit as usual.
_NO_FLUSH_WAIT = "no_flush_wait AS (SELECT set_config('synchronous_commit', 'off', true))"

# The current snapshot's columns an unchanged poll never reads (large JSON): not loaded with it.
UNUSED_CURRENT = ("counts", "tokens_by_encoding", "findings", "analysis_errors")


def available() -> bool:
    return connection.vendor == "postgresql"


def _quote(name: str | None) -> str:
    assert name is not None  # every concrete field has a column
    return connection.ops.quote_name(name)


def _column(model: type[Model], name: str) -> str:
    return _quote(cast(Field, model._meta.get_field(name)).column)


def _prepared(model: type[Model], values: dict[str, Any]) -> list[Any]:
    return [
        cast(Field, model._meta.get_field(name)).get_db_prep_save(v, connection) for name, v in values.items()
    ]


class _Reader:
    """One model's columns in the SELECT, and the instance made of them (as the ORM makes it)."""

    def __init__(self, model: type[Model], alias: str, leave_out: tuple[str, ...] = ()) -> None:
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if f.name not in leave_out]
        self.columns = [f"{alias}.{_quote(f.column)}" for f in self.fields]
        self.cols = [f.get_col(alias) for f in self.fields]
        self.names = [f.attname for f in self.fields]
        self.converters = [
            connection.ops.get_db_converters(col) + f.get_db_converters(connection)
            for f, col in zip(self.fields, self.cols, strict=True)
        ]

    def instance(self, row: tuple[Any, ...]) -> Model:
        values = []
        for col, converters, value in zip(self.cols, self.converters, row, strict=True):
            for convert in converters:
                value = convert(value, col, connection)
            values.append(value)
        return self.model.from_db(connection.alias, self.names, values)


@functools.cache
def _claim_and_read_sql() -> tuple[str, _Reader, _Reader, _Reader]:
    server, team, current = (
        _Reader(McpServer, "s"),
        _Reader(Team, "t"),
        _Reader(Snapshot, "c", UNUSED_CURRENT),
    )
    table = _quote(McpServer._meta.db_table)
    pk, since, lease = (
        _column(McpServer, "id"),
        _column(McpServer, "polling_since"),
        _column(McpServer, "poll_lease"),
    )
    # The lock is free when nobody holds it or its holder stopped answering (McpServer.objects.lock_free),
    # or held under this same lease (the same task, redelivered).
    sql = (
        f"WITH {_NO_FLUSH_WAIT}, claimed AS (UPDATE {table} SET {since} = %s, {lease} = %s "
        f"FROM no_flush_wait WHERE {pk} = %s "
        f"AND ({since} IS NULL OR {since} < %s OR ({lease} <> '' AND {lease} = %s)) RETURNING {pk}) "
        f"SELECT EXISTS (SELECT 1 FROM claimed), {', '.join(server.columns + team.columns + current.columns)} "
        f"FROM {table} s JOIN {_quote(Team._meta.db_table)} t ON t.{_column(Team, 'id')} = s.{_column(McpServer, 'team')} "
        f"LEFT JOIN {_quote(Snapshot._meta.db_table)} c ON c.{_column(Snapshot, 'id')} = s.{_column(McpServer, 'current_snapshot')} "
        f"WHERE s.{pk} = %s"
    )
    return sql, server, team, current


def claim_and_read(server_id: int, lease: str, now: datetime) -> tuple[bool, McpServer | None]:
    """``polling.claim`` and ``polling.read_server`` as one statement: (claimed, the server or None).

    The SELECT sees the row as it was before the claim (one snapshot for the whole statement), so
    a claimed server's lock columns are set on the object here.

    The statement is the task's first, and it stands in for the connection's health check:
    Django's (``CONN_HEALTH_CHECKS``: a ``SELECT 1`` before a task's first query, a round trip
    per poll) is skipped, and a connection the claim finds dead is replaced and the claim sent
    once more (under the same lease a claim that did reach the server is taken again).
    """
    sql, server_reader, team_reader, current_reader = _claim_and_read_sql()
    params = [*_prepared(McpServer, {"polling_since": now, "poll_lease": lease}), server_id]
    params += [*_prepared(McpServer, {"polling_since": now - poll_lock_stale_after()}), lease, server_id]
    row = _first_statement(sql, params)
    if row is None:
        return False, None
    claimed, row = bool(row[0]), row[1:]
    split = (len(server_reader.fields), len(server_reader.fields) + len(team_reader.fields))
    server = cast(McpServer, server_reader.instance(row[: split[0]]))
    team = cast(Team, team_reader.instance(row[split[0] : split[1]]))
    current_row = row[split[1] :]
    current = None if current_row[0] is None else cast(Snapshot, current_reader.instance(current_row))
    McpServer._meta.get_field("team").set_cached_value(server, team)
    McpServer._meta.get_field("current_snapshot").set_cached_value(server, current)
    if claimed:
        server.polling_since, server.poll_lease = now, lease
    return claimed, server


def _first_statement(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """Run a task's first statement and fetch its row, as its connection's health check."""
    checked = connection.connection is not None and not connection.in_atomic_block
    if checked:
        connection.health_check_done = True  # type: ignore[attr-defined]  # Django's own flag: this statement is the check
    try:
        return _fetch_one(sql, params)
    except (OperationalError, InterfaceError):
        if not checked:
            raise
        log.info("the database connection was dead at a poll's claim; reconnecting")
        connection.close()
        return _fetch_one(sql, params)


def _fetch_one(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _update_sql(model: type[Model], names: tuple[str, ...], joined: str = "") -> str:
    assigned = ", ".join(f"{_column(model, name)} = %s" for name in names)
    source = f" FROM {joined}" if joined else ""
    return f"UPDATE {_quote(model._meta.db_table)} SET {assigned}{source} WHERE {_column(model, 'id')} = %s"


@functools.cache
def _finish_sql(released: tuple[str, ...]) -> str:
    columns = [f.column for f in PollRun._meta.concrete_fields if not f.primary_key]
    insert = (
        f"INSERT INTO {_quote(PollRun._meta.db_table)} ({', '.join(_quote(c) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))}) RETURNING {_column(PollRun, 'id')}"
    )
    extend = _update_sql(Snapshot, ("last_seen",), "no_flush_wait")
    return f"WITH {_NO_FLUSH_WAIT}, extended AS ({extend}), released AS ({_update_sql(McpServer, released)}) {insert}"


def finish_unchanged(server: McpServer, run: PollRun, extended: Snapshot, released: dict[str, Any]) -> None:
    """Extend the snapshot, release the lock with ``released`` and insert ``run``, in one statement."""
    params = [*_prepared(Snapshot, {"last_seen": extended.last_seen}), extended.pk]
    params += [*_prepared(McpServer, released), server.pk]
    params += [
        f.get_db_prep_save(getattr(run, f.attname), connection)
        for f in PollRun._meta.concrete_fields
        if not f.primary_key
    ]
    with connection.cursor() as cursor:
        cursor.execute(_finish_sql(tuple(released)), params)
        (run.pk,) = cursor.fetchone()
    run._state.adding, run._state.db = False, connection.alias
