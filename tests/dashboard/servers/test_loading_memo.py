"""The server page's per-client figures are remembered by content: a second view does not count
the tools again and shows the same figures; another setting or tool list is counted afresh; the
query count stays the same whether the figures were remembered or not."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.servers import loading
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def test_server_figures_are_remembered_by_content(team, monkeypatch):
    server = http_server(team, "files")
    snapshot = record(server, [tool(f"t{j}", "Does things. " * 20) for j in range(12)], "1.0")
    counted = []
    real = loading.loading.stack_figures

    def counting(*args, **kwargs):
        counted.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(loading.loading, "stack_figures", counting)
    loading._SERVER_FIGURES.clear()
    with CaptureQueriesContext(connection) as cold:
        first = loading.for_server(server, snapshot, team, team.main_encoding)
    assert len(counted) == len(first) > 1
    with CaptureQueriesContext(connection) as warm:
        second = loading.for_server(server, snapshot, team, team.main_encoding)
    assert len(counted) == len(first)
    assert [(p.client, f) for p, f in second] == [(p.client, f) for p, f in first]
    assert len(warm) == len(cold)
    team.tool_search = "false"
    loading.for_server(server, snapshot, team, team.main_encoding)
    assert len(counted) == len(first) + 1  # only Claude Code reads the setting
    grown = record(server, [tool(f"t{j}", "Does things. " * 20) for j in range(13)], "1.1")
    loading.for_server(server, grown, team, team.main_encoding)
    assert len(counted) == 2 * len(first) + 1
