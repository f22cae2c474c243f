"""A poll's answer reaches every region of the server page, in real headless Chromium.

- "Poll now" that brings a different release: the header, the "Current snapshot" card, its
  findings, the per-tool table and the snapshot history all show the new release at once, without
  a reload (before, the card below the header kept the old release until a reload).
- A server registered through the form: its page says the first poll is due (and nothing about
  waiting for the schedule), polls its status while the poll is due, swaps in the figures when the
  poll lands, and then stops asking.
"""

from __future__ import annotations

import re
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.demo import GROWN_ENV
from dashboard.servers.models import McpServer
from dashboard.tasks import poll as poll_server
from tests.browser import browser_login
from tests.conftest import ROOT
from tests.helpers import thread_on_test_database

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _text(page, selector: str) -> str:
    return re.sub(r"\s+", " ", page.locator(selector).inner_text())


def test_poll_now_refreshes_every_region_it_changes(
    browser_page, live_server, team, alice, polled_example_servers, eager_celery
):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    sprawl = polled_example_servers["files-sprawl"]
    grown = sprawl.current_snapshot
    assert grown.server_version == "1.5.0"
    # The scripted history was polled seconds ago; age it so the new poll is visible as such. Before
    # the browser asks for anything: SQLite's shared in-memory test database refuses a write ("table
    # is locked") while the live server reads the same table for a page.
    McpServer.objects.filter(pk=sprawl.pk).update(last_poll_at=timezone.now() - timedelta(hours=1))
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    page.goto(f"{live_server.url}/t/{team.slug}/servers/{sprawl.code}/")
    page.wait_for_selector("#tax-chart[data-rendered]")
    assert "1.5.0" in _text(page, "#snapshot-figures .pagehead h2")
    assert page.locator("#tools tbody tr[data-tool]").count() == grown.tool_count

    # The server goes back to its lean release; Poll now fetches it (in-process worker). Written
    # once the page's own region loads have ended, for the reason above.
    page.wait_for_load_state("networkidle")
    sprawl.env = {**sprawl.env, GROWN_ENV: "0"}
    sprawl.save(update_fields=["env"])
    page.evaluate("window.__sameDocument = true")
    page.click("#poll-now")
    page.wait_for_function("() => /\\d+ s ago/.test(document.querySelector('#poll-state').textContent)")
    sprawl.refresh_from_db()
    lean = sprawl.current_snapshot
    assert lean.server_version == "1.4.0" and lean.fixed_tax_tokens < grown.fixed_tax_tokens
    tax = f"{lean.fixed_tax_tokens:,}"
    # Every region says 1.4.0 now, in the same document.
    assert _text(page, "#current-tax") == tax
    assert "1.4.0" in _text(page, "#status-region")
    assert "1.4.0" in _text(page, "#snapshot-figures .pagehead h2")
    assert _text(page, "#snapshot-tax") == tax
    assert page.locator("#tools tbody tr[data-tool]").count() == lean.tool_count
    findings = page.locator("#findings .muted.small").inner_text()
    assert findings == str(len(lean.findings))
    assert page.locator("#polls tbody tr").count() == sprawl.poll_runs.count()
    assert page.locator("#polls tbody tr").first.locator("td").nth(2).inner_text() == "manual"
    page.wait_for_selector("#tax-chart[data-rendered]")
    assert page.evaluate("window.__sameDocument") is True
    page.screenshot(path="/tmp/shots/poll-now-refresh.png", full_page=True)
    assert page.js_errors == []


def _lean_command() -> str:
    return f"{sys.executable} -m examples.servers.lean --transport stdio --root {ROOT / 'examples'}"


def test_a_new_servers_page_waits_for_its_first_poll_and_then_stops(
    browser_page, live_server, team, alice, settings
):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    page.goto(f"{live_server.url}/t/{team.slug}/servers/add/")
    page.fill("input[name=name]", "docs")
    page.select_option("select[name=transport]", "stdio")
    page.fill("input[name=command_line]", _lean_command())
    page.fill("input[name=cwd]", str(ROOT))
    page.click("form button.primary")
    page.wait_for_selector("#no-snapshot")
    body = _text(page, "main")
    assert "first poll is due now" in body and "This page updates when it lands" in body
    assert "wait for" not in body and "runs shortly" not in body  # no contradiction
    assert _text(page, "#poll-state") == "first poll due…"

    status_requests: list[float] = []
    page.on("request", lambda r: "/status/" in r.url and status_requests.append(time.monotonic()))
    page.wait_for_timeout(2500)  # (playwright delivers events while the test waits through it)
    assert status_requests, "the page must ask for the poll's status while the first poll is due"

    # The schedule's first poll, run by the real poll code against the real example server (the
    # dispatcher's worker, here a thread), a few seconds later.
    server = McpServer.objects.get(team=team, name="docs")
    worker = thread_on_test_database(poll_server, server.pk, trigger="schedule")
    worker.start()
    worker.join(timeout=120)
    server.refresh_from_db()
    assert server.last_outcome == "ok", server.last_error
    tax = f"{server.current_snapshot.fixed_tax_tokens:,}"
    page.wait_for_function(
        f"() => (document.querySelector('#current-tax') || {{}}).textContent === '{tax}'", timeout=30_000
    )
    assert _text(page, "#snapshot-tax") == tax
    assert page.locator("#no-snapshot").count() == 0
    assert page.locator("#tools tbody tr[data-tool]").count() == server.current_snapshot.tool_count
    page.wait_for_selector("#tax-chart[data-rendered]")
    assert "OK" in _text(page, "#poll-state")
    # Landed: the page stops asking.
    landed = len(status_requests)
    page.wait_for_timeout(5000)
    assert len(status_requests) == landed
    page.screenshot(path="/tmp/shots/first-poll-landed.png", full_page=True)
    assert page.js_errors == []
