"""What an unchanged poll costs the database: counted statement by statement, so the bookkeeping
around a poll whose server answered as last time cannot grow back unnoticed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.servers.models import McpServer, PollRun, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from examples.servers.launch import serve_http

pytestmark = pytest.mark.django_db

# Claim the lock, read the server (its team and current snapshot with it); then extend the
# snapshot, release the lock with the run's outcome and the next due time, record the run.
CLAIM = ("UPDATE", ["dashboard_mcpserver"])
READ = ("SELECT", ["dashboard_mcpserver", "dashboard_team", "dashboard_snapshot"])
EXTEND, RELEASE = ("UPDATE", ["dashboard_snapshot"]), ("UPDATE", ["dashboard_mcpserver"])
RECORD = ("INSERT", ["dashboard_pollrun"])
# On PostgreSQL each group is one statement (a data-modifying WITH): two in all; elsewhere five.
UNCHANGED_POLL = {
    "postgresql": [("WITH", [CLAIM, READ]), ("WITH", [EXTEND, RELEASE, RECORD])],
    "sqlite": [CLAIM, READ, EXTEND, RECORD, RELEASE],
}
# The statements' own WITH names, not tables.
CTES = ("claimed", "no_flush_wait")
_PART = re.compile(r'\b(UPDATE|INSERT INTO|SELECT|FROM|JOIN)\s+"?(\w+)"?', re.IGNORECASE)


def _parts(sql: str) -> list[tuple[str, list[str]]]:
    """Each part of a statement: its verb and the tables it names, in order."""
    parts: list[tuple[str, list[str]]] = []
    for word, name in _PART.findall(sql):
        verb = word.split()[0].upper()
        if verb in ("UPDATE", "INSERT", "SELECT"):
            parts.append((verb, [name] if verb != "SELECT" else []))
        elif name not in CTES and parts:  # FROM and JOIN: the tables the part before reads
            parts[-1][1].append(name)
    return [(verb, tables) for verb, tables in parts if tables]


def _statement(sql: str) -> tuple[str, list]:
    parts = _parts(sql)
    return ("WITH", parts) if sql.split(None, 1)[0].upper() == "WITH" else parts[0]


@pytest.mark.parametrize("module", ["lean", "misbehaving"])
def test_an_unchanged_poll_costs_two_statements_on_postgresql(team, module):
    args = ("--mode", "quirky") if module == "misbehaving" else ()
    with serve_http(module, *args) as url:
        server = McpServer.objects.create(team=team, name=module, transport=Transport.HTTP, url=url)
        first = poll_server(server.pk)
        assert first.changed, first.message
        before = Snapshot.objects.get(pk=first.snapshot_id)
        # As if earlier polls had failed: the release must reset the count.
        McpServer.objects.filter(pk=server.pk).update(consecutive_failures=2)
        with CaptureQueriesContext(connection) as queries:
            second = poll_server(server.pk)
    assert second.outcome == "ok" and not second.changed and second.snapshot_id == first.snapshot_id
    statements = [_statement(q["sql"]) for q in queries.captured_queries]
    assert statements == UNCHANGED_POLL[connection.vendor]
    # ... and each did its work: the snapshot extended, the run recorded, the lock released.
    after = Snapshot.objects.get(pk=first.snapshot_id)
    assert after.last_seen > before.last_seen and after.eras == before.eras
    run = PollRun.objects.filter(server=server).latest("pk")
    assert (run.outcome, run.changed, run.snapshot_id) == ("ok", False, first.snapshot_id)
    assert (run.duration_ms, run.trigger, run.message) == (second.duration_ms, "schedule", "")
    assert run.started <= after.last_seen
    server.refresh_from_db()
    assert server.polling_since is None and server.poll_lease == ""
    assert (server.last_poll_at, server.last_outcome, server.last_error) == (run.started, "ok", "")
    assert server.consecutive_failures == 0
    assert server.next_poll_at == run.started + timedelta(seconds=server.poll_interval_seconds)
    assert server.current_snapshot_id == first.snapshot_id
