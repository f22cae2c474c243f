"""The discovery pages in headless Chromium: the team view, the tool page's panel and the agent
page's sessions arrive (htmx fragments on load) with the figures of an ingested transcript."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from ingest.capture.pipeline import ingest_path
from tests.browser import browser_login
from tests.dashboard.factories import http_server, record
from tests.ingest.discovery.test_views_discovery import LOGS, SERVERS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_discovery_pages_render(browser_page, live_server, team, alice, tmp_path, settings):
    settings.DISCOVERY_MIN_SESSIONS = 1  # the fixture is one session: history advice shows
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    servers = {}
    for name, tools in SERVERS.items():
        servers[name] = http_server(team, name)
        record(servers[name], tools, "1.0")
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    log = tmp_path / "session.jsonl"
    log.write_text((LOGS / "claude_code_tool_search.jsonl").read_text().replace("2026-05-04", yesterday))
    assert ingest_path(team, log).status == "done"
    shots = Path(os.environ.get("VAR_DIR", tmp_path)) / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)

    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    page.get_by_role("link", name="Tool definitions").click()
    expect(page.locator("#team-deferring")).to_have_text("1")
    expect(page.locator("#discovery-servers tr[data-server]")).to_have_count(3)
    page.screenshot(path=str(shots / "discovery_team.png"), full_page=True)

    page.goto(f"{live_server.url}/t/{team.slug}/servers/{servers['calc'].code}/tools/multiply/")
    expect(page.locator("#tool-wasted")).to_have_text("2")
    expect(page.locator("#tool-loaded-pct")).to_have_text("100.0%")
    expect(page.locator("#tool-searches")).to_contain_text("calculator add numbers")
    expect(page.locator("#tool-advice")).to_contain_text("Rename or re-describe calc's tools")
    page.locator("#tool-discovery").screenshot(path=str(shots / "discovery_tool.png"))

    page.goto(f"{live_server.url}/t/{team.slug}/agents/claude-code/")
    expect(page.locator("#agent-discovery tr[data-session]")).to_have_count(1)
    page.locator("#agent-discovery").screenshot(path=str(shots / "discovery_agent.png"))

    page.goto(f"{live_server.url}/t/{team.slug}/servers/{servers['calc'].code}/")
    expect(page.locator("#server-discovery")).to_be_visible()
    expect(page.locator("#server-advice li[data-kind=keep_eager][data-tool=add]")).to_be_visible()
    expect(page.locator("#server-advice li[data-kind=rename_missed]")).to_contain_text("slack post message")
    assert not page.js_errors and not page.foreign_requests
