"""The fidelity pages in real headless Chromium, on traffic captured in this test session by the real
logging proxy between a real SDK client and the lean example server, ingested through the real
pipeline: the agents list, the agent page with its verdicts and its Plotly chart, the call list
filtered in place (htmx), and the drill-down's diff context. Every request stays on the app's origin.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument
from ingest.fidelity import references
from tests.helpers import sha
from tests.ingest.fidelity.traffic import DOC, PASTES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_agent_page_shows_verdicts_chart_and_diff_context(
    browser_page, live_server, team, alice, captured_log
):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    references.register_upload(team, DOC.encode(), name="runbook.md")
    job = pipeline.ingest_path(team, captured_log)
    assert job.status == "done", job.error

    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-for-browser-123")
    page.click("form button")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))

    # The overview's fidelity panel (which may arrive as a fragment after the page) lists both
    # versions; the main navigation leads to the agents list.
    expect(page.locator("#fidelity-panel tr[data-agent]")).to_have_count(2)
    page.click("nav.mainnav a:text('Agents')")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/agents/$"))
    rows = page.eval_on_selector_all("#agents tbody tr[data-agent]", "rs => rs.map(r => r.dataset.agent)")
    assert sorted(rows) == ["claude-code 2.0.14", "claude-code 2.0.15"]
    assert "50.0%" in page.locator("#agents").inner_text()

    # The agent page: verdict badges, the Plotly chart (one line per version) from our own plotly.js.
    page.click("#agents a.strong >> nth=0")
    page.wait_for_url(re.compile(r"/agents/claude-code/$"))
    page.wait_for_load_state("load")
    assert page.js_errors == [], page.js_errors
    page.wait_for_selector("#rate-chart[data-rendered]")
    assert page.evaluate("typeof Plotly") == "object"
    assert page.locator("#rate-chart .scatterlayer .trace").count() == 2
    legend = page.locator("#rate-chart .legend").text_content()
    assert "2.0.14" in legend and "2.0.15" in legend
    badges = page.eval_on_selector_all(
        "#verdict-breakdown [data-verdict]",
        "bs => bs.map(b => b.dataset.verdict + ':' + b.textContent.trim())",
    )
    expected = {
        "exact",
        "newline_only",
        "line_endings",
        "truncated",
        "mutated",
        "unverifiable",
        "by_reference",
    }
    assert {b.split(":")[0] for b in badges} == expected
    assert all(b.endswith(": 1") for b in badges), badges
    assert page.locator("#agent-rate").inner_text() == "20.0%"

    # Filter the call list to the truncated paste in place (htmx), then open its drill-down.
    page.evaluate("window.__sameDocument = true")
    page.select_option("#verdict-filter", "truncated")
    page.wait_for_function("() => document.querySelectorAll('#calls tbody tr[data-call]').length === 1")
    assert page.evaluate("window.__sameDocument") is True
    assert "verdict=truncated" in page.url
    page.click("#calls a:text('details')")
    page.wait_for_url(re.compile(r"/calls/\d+/$"))
    card = page.locator(".argcard[data-verdict=truncated]")
    assert card.locator(".verdict").inner_text() == "truncated"
    # The point of truncation: the arrived copy ends where the expected text goes on.
    assert "end of text" in card.locator("pre.arrived").inner_text()
    assert "end of text" not in card.locator("pre.expected").inner_text()
    kept = len(PASTES["truncated"].encode())
    assert f"{kept:,} of {len(DOC.encode()):,} bytes" in card.inner_text()

    # The dropped final newline: the expected side shows the ↵ the copy lacks.
    newline_call = BulkArgument.objects.get(team=team, sha256=sha(PASTES["newline_only"])).call_id
    page.goto(f"{live_server.url}/t/{team.slug}/calls/{newline_call}/")
    card = page.locator(".argcard[data-verdict=newline_only]")
    assert card.locator("pre.expected .after").inner_text().startswith("↵")
    assert "end of text" in card.locator("pre.arrived").inner_text()

    # The refused edit: the server's isError answer is beside the verdict.
    mutated_call = BulkArgument.objects.get(team=team, sha256=sha(PASTES["mutated"])).call_id
    page.goto(f"{live_server.url}/t/{team.slug}/calls/{mutated_call}/")
    assert "isError" in page.locator("#server-answer").inner_text()
    assert page.locator(".argcard[data-verdict=mutated] pre.arrived").inner_text().count("seven") >= 1

    assert page.foreign_requests == []
    assert page.js_errors == []
