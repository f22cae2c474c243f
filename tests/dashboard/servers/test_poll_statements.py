"""What an unchanged poll costs the database: counted statement by statement, so the bookkeeping
around a poll whose server answered as last time cannot grow back unnoticed."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.servers.models import McpServer, PollRun, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from examples.servers.launch import serve_http

pytestmark = pytest.mark.django_db

# Claim the lock, read the server (its team and current snapshot with it), extend the snapshot,
# record the run, release the lock with the run's outcome and the next due time.
UNCHANGED_POLL = [
    ("UPDATE", "dashboard_mcpserver"),
    ("SELECT", "dashboard_mcpserver"),
    ("UPDATE", "dashboard_snapshot"),
    ("INSERT", "dashboard_pollrun"),
    ("UPDATE", "dashboard_mcpserver"),
]


def _statement(sql: str) -> tuple[str, str]:
    verb = sql.split(None, 1)[0].upper()
    table = re.search(r'(?:UPDATE|FROM|INTO)\s+"?(\w+)"?', sql, re.IGNORECASE)
    return verb, table.group(1) if table else ""


@pytest.mark.parametrize("module", ["lean", "misbehaving"])
def test_an_unchanged_poll_costs_five_statements(team, module):
    args = ("--mode", "quirky") if module == "misbehaving" else ()
    with serve_http(module, *args) as url:
        server = McpServer.objects.create(team=team, name=module, transport=Transport.HTTP, url=url)
        first = poll_server(server.pk)
        assert first.changed, first.message
        before = Snapshot.objects.get(pk=first.snapshot_id)
        with CaptureQueriesContext(connection) as queries:
            second = poll_server(server.pk)
    assert second.outcome == "ok" and not second.changed and second.snapshot_id == first.snapshot_id
    assert [_statement(q["sql"]) for q in queries.captured_queries] == UNCHANGED_POLL
    # ... and each did its work: the snapshot extended, the run recorded, the lock released.
    after = Snapshot.objects.get(pk=first.snapshot_id)
    assert after.last_seen > before.last_seen and after.eras == before.eras
    run = PollRun.objects.filter(server=server).latest("pk")
    assert (run.outcome, run.changed, run.snapshot_id) == ("ok", False, first.snapshot_id)
    server.refresh_from_db()
    assert server.polling_since is None and server.last_poll_at == run.started
    assert server.current_snapshot_id == first.snapshot_id
