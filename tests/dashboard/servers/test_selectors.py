"""Read-side helpers of the fixed-tax pages: figures, and query counts that do not grow with the data."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.servers import selectors
from dashboard.servers.models import PollRun, Stack
from tests.dashboard.factories import http_server, record, tool


def test_budget_status_derivation():
    assert selectors.budget_status({}) == "no budget"
    assert selectors.budget_status({"m": {"level": "error", "breached": False}}) == "ok"
    assert selectors.budget_status({"m": {"level": "warning", "breached": True}}) == "warning"
    both = {"a": {"level": "warning", "breached": True}, "b": {"level": "error", "breached": True}}
    assert selectors.budget_status(both) == "over budget"


def _seed(team, count: int, snapshots_each: int = 3) -> None:
    start = timezone.now() - timedelta(days=30)
    for n in range(count):
        server = http_server(team, f"srv-{team.slug}-{n}")
        for k in range(snapshots_each):
            tools = [tool(f"tool_{j}", f"Tool {j} of release {k}.") for j in range(2 + k)]
            record(server, tools, f"1.{k}", when=start + timedelta(days=k))
        PollRun.objects.create(server=server, outcome="ok", snapshot=server.current_snapshot)


@pytest.mark.django_db
def test_page_query_counts_do_not_grow_with_servers(alice_client, alice, team, team_factory):
    big_team = team_factory("Big", alice)
    _seed(team, 2)
    _seed(big_team, 8)
    for t in (team, big_team):
        Stack.objects.create(team=t, name="all").servers.set(t.servers.all())

    def count(url: str, **extra) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url, **extra).status_code == 200
        return len(queries)

    for name in ("team_overview", "stacks"):
        assert count(reverse(name, args=[team.slug])) == count(reverse(name, args=[big_team.slug])), name
    region = {"HTTP_HX_REQUEST": "true"}
    assert count(reverse("team_overview", args=[team.slug]), **region) == count(
        reverse("team_overview", args=[big_team.slug]), **region
    )
    few = team.servers.first()
    many = big_team.servers.first()
    record(many, [tool(f"extra_{j}", "More.") for j in range(30)], "2.0")
    for name in ("server_detail", "snapshot_diff"):
        assert count(reverse(name, args=[team.slug, few.code])) == count(
            reverse(name, args=[big_team.slug, many.code])
        )
