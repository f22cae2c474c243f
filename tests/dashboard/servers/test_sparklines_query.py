"""The overview's sparkline series: each server's last N fixed taxes, oldest first, in one query
whatever the number of servers (a LATERAL walk of each server's index on PostgreSQL, a window on
SQLite); the same figures as reading each server's snapshots newest first."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.servers.models import Snapshot
from dashboard.servers.sparklines import last_taxes
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def test_last_taxes_are_each_servers_newest_oldest_first(team):
    start = timezone.now() - timedelta(days=10)
    servers = []
    for n, count in enumerate((1, 4, 9)):
        server = http_server(team, f"s{n}")
        for k in range(count):
            record(
                server,
                [tool(f"t{j}", "x " * (k + n)) for j in range(1 + k)],
                f"1.{k}",
                when=start + timedelta(hours=k),
            )
        servers.append(server)
    empty = http_server(team, "never-polled")
    with CaptureQueriesContext(connection) as queries:
        got = last_taxes([s.pk for s in [*servers, empty]], 5)
    assert len(queries) == 1
    for server in servers:
        newest = list(
            Snapshot.objects.filter(server=server)
            .order_by("-first_seen", "-pk")
            .values_list("fixed_tax_tokens", flat=True)[:5]
        )
        assert got[server.pk] == newest[::-1]
    assert [len(got[s.pk]) for s in servers] == [1, 4, 5]
    assert empty.pk not in got
