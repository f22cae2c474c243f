"""The tool page at scale: its report summed in SQL per day and per agent gives the figures the
rollup rows add up to, and its query count does not grow with agents, days, snapshots or calls
(sorted by date or by size)."""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from ingest.capture.models import Agent, ToolCall
from ingest.fidelity.models import FidelityDaily
from ingest.fidelity.selectors.common import grouped
from ingest.fidelity.selectors.tools import tool_report
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db

VERDICTS = ("exact", "truncated", "by_reference", "no_bulk")


def _seed(team, server, *, agents: int, days: int, releases: int) -> None:
    """Rollups and calls of `write` on `server` from `agents` agents over `days` days; its
    snapshots: `releases` releases, `write` changing in each."""
    start = timezone.now() - timedelta(days=releases)
    for k in range(releases):
        record(server, [tool("write", "Write. " * (k + 1)), tool("read", "Read.")], f"1.{k}", when=start)
        start += timedelta(hours=12)
    today = timezone.now().date()
    for n in range(agents):
        agent = Agent.objects.create(team=team, family="fam", name="fam", version=f"1.{n}")
        FidelityDaily.objects.bulk_create(
            FidelityDaily(
                team=team,
                day=today - timedelta(days=d),
                agent=agent,
                server_label=server.name,
                tool="write",
                verdict=verdict,
                size_bucket="1-10k" if verdict in ("exact", "truncated") else "",
                calls=1 + n + d,
                arguments=(1 + n + d) if verdict in ("exact", "truncated") else 0,
                bytes=1000 * (n + 1),
                billed_tokens=10 * (d + 1),
                cost_usd=d,
            )
            for d in range(days)
            for verdict in VERDICTS
        )
        ToolCall.objects.bulk_create(
            ToolCall(
                team=team,
                dedupe_key=f"{n}-{i}",
                source_format="envelope",
                agent=agent,
                server_label=server.name,
                tool="write",
                argument_sha256="0" * 64,
                argument_bytes=100 * i,
                request_ts=timezone.now() - timedelta(minutes=i * 7 + n),
            )
            for i in range(30)
        )


def test_report_per_day_and_per_agent_adds_up_the_rollup_rows(team):
    server = http_server(team, "files")
    _seed(team, server, agents=3, days=4, releases=1)
    report = tool_report(team, "files", "write", since=None)
    rows = list(FidelityDaily.objects.filter(team=team).values())
    calls_by_day = Counter()
    calls_by_agent = Counter()
    cost_by_agent = Counter()
    exact_by_day = Counter()
    for row in rows:
        calls_by_day[row["day"]] += row["calls"]
        calls_by_agent[row["agent_id"]] += row["calls"]
        cost_by_agent[row["agent_id"]] += row["cost_usd"]
        exact_by_day[row["day"]] += row["arguments"] if row["verdict"] == "exact" else 0
    assert [d.day for d in report.days] == sorted(calls_by_day)
    assert {d.day: d.tally.calls for d in report.days} == calls_by_day
    assert {d.day: d.tally.exact for d in report.days} == exact_by_day
    assert {a.agent.pk: a.tally.calls for a in report.agents} == calls_by_agent
    # The agents table's columns: calls, exact rate, damaged arrivals, cost.
    assert {a.agent.pk: a.tally.cost_usd for a in report.agents} == cost_by_agent
    for agent in report.agents:
        rows_of = [r for r in rows if r["agent_id"] == agent.agent.pk]
        exact = sum(r["arguments"] for r in rows_of if r["verdict"] == "exact")
        judged = sum(r["arguments"] for r in rows_of if r["verdict"] in ("exact", "truncated"))
        truncated = sum(r["arguments"] for r in rows_of if r["verdict"] == "truncated")
        assert (agent.tally.exact, agent.tally.judged, agent.damaged_arrivals) == (exact, judged, truncated)
    assert report.total.calls == sum(calls_by_day.values())
    assert report.total.cost_usd == sum(row["cost_usd"] for row in rows)
    # Agents with the most calls first; the per-day table's columns are the verdicts seen.
    assert [a.tally.calls for a in report.agents] == sorted(calls_by_agent.values(), reverse=True)
    assert report.verdicts_seen == ["exact", "truncated", "by_reference", "no_bulk"]
    newest = report.days[-1]
    assert newest.verdict_counts == [newest.tally.by_verdict[v] for v in report.verdicts_seen]
    assert newest.verdict_counts[2] == newest.tally.reference_calls


def _queries(client, url: str, **extra) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, **extra).status_code == 200
    return len(ctx.captured_queries)


def test_tool_page_query_count_does_not_grow(alice_client, team, team_factory, alice):
    small_server = http_server(team, "files")
    large_team = team_factory("Large", alice)
    large_server = http_server(large_team, "files")
    _seed(team, small_server, agents=1, days=2, releases=2)
    _seed(large_team, large_server, agents=8, days=40, releases=12)
    region = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "calls-region"}
    for params, extra in (
        ("?days=90", {}),
        ("", {}),
        ("?sort=-bytes", region),
        ("?sort=bytes&page=2", region),
    ):
        small = _queries(
            alice_client,
            reverse("fidelity_tool", args=[team.slug, small_server.code, "write"]) + params,
            **extra,
        )
        large = _queries(
            alice_client,
            reverse("fidelity_tool", args=[large_team.slug, large_server.code, "write"]) + params,
            **extra,
        )
        assert small == large, (params, small, large)


def test_calls_sorted_by_size_page_through_every_call_once(alice_client, team):
    server = http_server(team, "files")
    _seed(team, server, agents=2, days=1, releases=1)
    url = reverse("fidelity_tool", args=[team.slug, server.code, "write"])
    region = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "calls-region"}
    seen = []
    for number in (1, 2, 3):
        page = alice_client.get(url, {"sort": "-bytes", "page": number}, **region).context["calls_page"]
        seen += [(r.call.argument_bytes, r.call.pk) for r in page]
    assert len(seen) == 60 == len(set(seen))
    assert seen == sorted(seen, reverse=True)


def test_grouped_sums_only_the_columns_asked(team):
    server = http_server(team, "files")
    _seed(team, server, agents=2, days=3, releases=1)
    full = {r["verdict"]: r for r in grouped(team, None, ["verdict"])}
    calls_only = list(grouped(team, None, ["verdict"], sums=["calls"]))
    assert all(set(r) == {"verdict", "calls"} for r in calls_only)
    assert {r["verdict"]: r["calls"] for r in calls_only} == {v: r["calls"] for v, r in full.items()}
    assert set(full["exact"]) > {"verdict", "calls", "cost_usd", "arguments"}


def _plan(sql: str, params: tuple) -> str:
    table = FidelityDaily._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")
        if connection.vendor == "postgresql":
            # A tiny test table makes a sequential scan cheapest; forbidding it shows which index
            # the planner finds for the query.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def test_the_reports_grouped_queries_read_one_tools_rows_through_its_index(team):
    server = http_server(team, "files")
    _seed(team, server, agents=2, days=3, releases=1)
    # Another tool of the same server, with many more rows: none of them should be read.
    FidelityDaily.objects.bulk_create(
        FidelityDaily(
            team=team,
            day=timezone.now().date() - timedelta(days=d),
            server_label="files",
            tool=f"t{d}",
            verdict="no_bulk",
            calls=1,
        )
        for d in range(300)
    )
    with CaptureQueriesContext(connection) as queries:
        tool_report(team, "files", "write", since=timezone.now().date() - timedelta(days=30))
    grouped_sql = [q["sql"] for q in queries.captured_queries if "GROUP BY" in q["sql"]]
    assert len(grouped_sql) == 2, grouped_sql
    for sql in grouped_sql:
        # The captured SQL has its parameters filled in: explain it as it ran.
        assert "daily_tool_day" in _plan(sql, ()), sql


def test_the_per_day_table_shows_30_days_at_a_time_and_pages_through_the_period(alice_client, team):
    server = http_server(team, "files")
    _seed(team, server, agents=1, days=40, releases=1)
    url = reverse("fidelity_tool", args=[team.slug, server.code, "write"])
    today = timezone.now().date()

    def days_shown(html: str) -> list[str]:
        start = html.index('id="tool-days"')
        return re.findall(r'<tr data-day="([\d-]+)">', html[start:])

    first = alice_client.get(url, {"days": 90}).content.decode()
    newest = [str(today - timedelta(days=d)) for d in range(40)]
    assert days_shown(first) == newest[:30]
    assert "1–30 of 40 days, newest first" in first
    # The pager keeps the period; the chart above still has all 40 days.
    assert '?days=90&amp;days_page=2"' in first and "days_page=1" not in first
    figure = alice_client.get(url, {"days": 90}).context["figure"]
    assert len(figure["data"][0]["x"]) == 40
    # Through htmx only the table's region comes back: the 10 oldest days and a way back.
    region = alice_client.get(
        url, {"days": 90, "days_page": 2}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="tool-days"
    ).content.decode()
    assert region.lstrip().startswith('<section class="card flush" id="tool-days">')
    assert days_shown(region) == newest[30:] and "tool-chart" not in region
    assert '?days=90&amp;days_page=1"' in region and "31–40 of 40 days" in region
    # A period that fits one page has no pager; the same link without htmx is the whole page.
    assert "days_page" not in alice_client.get(url, {"days": 7}).content.decode()
    whole = alice_client.get(url, {"days": 90, "days_page": 2}).content.decode()
    assert days_shown(whole) == newest[30:] and "tool-chart" in whole
