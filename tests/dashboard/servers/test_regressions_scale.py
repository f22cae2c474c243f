"""The regressions page at scale: each snapshot stores its change in fixed tax when recorded (and
the migration fills it for stored history), the page finds the changes through it, and its query
count does not grow with servers or snapshots."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.servers import regressions
from dashboard.servers.models import Snapshot
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db

migration = importlib.import_module("dashboard.migrations.0014_snapshot_tax_delta")


def _history(team, name: str, sizes: list[int]) -> list[Snapshot]:
    server = http_server(team, name)
    start = timezone.now() - timedelta(days=len(sizes))
    return [
        record(
            server,
            [tool(f"t{j}", "Reads. " * size) for j in range(2)],
            f"1.{k}",
            when=start + timedelta(days=k),
        )
        for k, size in enumerate(sizes)
    ]


def test_each_snapshot_stores_its_change_and_the_migration_fills_old_rows(team):
    snaps = _history(team, "files", [3, 9, 9, 4])
    # Same tax, another tool list: a snapshot with no change in tax.
    snaps.append(record(snaps[0].server, [tool("t0", "Reads. " * 4), tool("t2", "Reads. " * 4)], "1.9"))
    expected = [None] + [
        b.fixed_tax_tokens - a.fixed_tax_tokens for a, b in zip(snaps, snaps[1:], strict=False)
    ]
    assert [s.tax_delta for s in Snapshot.objects.order_by("pk")] == expected
    assert expected[1] > 0 and expected[2] == 0 and expected[3] < 0 and expected[4] == 0
    Snapshot.objects.update(tax_delta=None)
    migration.fill_tax_delta(apps, None)
    assert [s.tax_delta for s in Snapshot.objects.order_by("pk")] == expected
    changed = list(regressions.changes(team))
    assert [s.pk for s in changed] == [s.pk for s, d in zip(snaps, expected, strict=True) if d][::-1]
    assert [s.pk for s in regressions.changes(team, direction="grew")] == [snaps[1].pk]
    assert [s.pk for s in regressions.changes(team, direction="shrank")] == [snaps[3].pk]
    assert [r.delta for r in regressions.explain(changed)] == [d for d in expected if d][::-1]


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_regressions_page_query_count_does_not_grow(alice_client, alice, team, team_factory):
    large = team_factory("Large", alice)
    _history(team, "a", [2, 5])
    for n in range(4):
        _history(large, f"s{n}", [2, 5, 3, 8, 8, 1][: 3 + n])
    for params in ("", "?period=all", "?period=all&direction=grew", "?period=all&page=2"):
        small_count = _queries(alice_client, reverse("regressions", args=[team.slug]) + params)
        large_count = _queries(alice_client, reverse("regressions", args=[large.slug]) + params)
        assert small_count == large_count, params
