"""Figures read straight from the rollup table: a server's unused tools, and the reads the pages
make staying a constant number of queries as traffic grows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.servers.models import McpServer, Transport
from dashboard.servers.polling import record_snapshot
from ingest.capture import pipeline
from ingest.capture.models import ToolCall
from ingest.fidelity import costs
from ingest.fidelity.models import FidelityDaily
from ingest.fidelity.selectors import totals
from ingest.fidelity.selectors.agents import exact_rate_series
from ingest.fidelity.selectors.common import days_ago
from tests.dashboard.alerts.factories import fetch_example
from tests.ingest.fidelity.agent_table import agent_table
from tests.ingest.fidelity.traffic import paste_log

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(240)]


def test_unused_tools_come_from_rollups_with_their_share_of_the_fixed_tax(team, tmp_path):
    server = McpServer.objects.create(
        team=team, name="files-lean", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    snapshot, _ = record_snapshot(server, fetch_example("lean", False))
    server.refresh_from_db()
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    # The sample log is dated 2026-01-05; make it this week's traffic.
    FidelityDaily.objects.filter(team=team).update(day=days_ago(3))
    unused = totals.unused_tools(server)
    names = [t.name for t in snapshot.tools.order_by("position")]
    assert "write" in names and "search" in names
    assert [u["name"] for u in unused] == [n for n in names if n not in ("write", "search")]
    for entry in unused:
        tool = snapshot.tools.get(name=entry["name"])
        assert entry["tokens"] == tool.tokens and entry["share"] == tool.tokens / snapshot.fixed_tax_tokens
    # Traffic older than the window does not count as use.
    FidelityDaily.objects.filter(team=team).update(day="2020-01-01")
    assert [u["name"] for u in totals.unused_tools(server)] == names


def test_page_reads_are_a_constant_number_of_queries(team, tmp_path):
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    agent = ToolCall.objects.filter(team=team).values_list("agent_id", flat=True).first()

    def reads() -> int:
        with CaptureQueriesContext(connection) as queries:
            agent_table(team)
            exact_rate_series(team)
            for by in ("verdict", "tool", "size"):
                totals.breakdown(team, by, agent=agent)
            totals.reference_adoption(team, agent=agent)
            costs.summary(team, agent=agent)
        return len(queries)

    small = reads()
    for n in range(2, 6):
        pipeline.ingest_path(
            team, paste_log(session=f"s{n}", client=f"agent-{n}").write(tmp_path / f"{n}.jsonl")
        )
    assert reads() == small == 7
