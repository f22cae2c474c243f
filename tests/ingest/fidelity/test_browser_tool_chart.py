"""The tool page's chart in real headless Chromium: stacked verdict bars and the exact-rate line,
drawn by the partial plotly.js bundle the app ships (static/vendor/plotly.min.js, scatter and bar)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.dashboard.factories import http_server, record, tool
from tests.helpers import sha
from tests.ingest.capture.logs import EnvelopeLog
from tests.ingest.fidelity.traffic import ingest, numbered_doc

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

DOC = numbered_doc(1)


def test_the_tool_chart_draws_bars_and_a_line_with_the_shipped_bundle(
    browser_page, live_server, team, alice, tmp_path
):
    server = http_server(team, "files-lean")
    record(server, [tool("write", "Write a file.", {"content": {"type": "string"}})], "1.0")
    log = EnvelopeLog(session="s1", label="files-lean", client="claude-code").initialize()
    log.call("write", {"content": DOC, "expected_sha256": sha(DOC)})  # exact
    log.call("write", {"content": DOC[:700], "expected_sha256": sha(DOC)})  # truncated
    ingest(team, log, tmp_path, "claude.jsonl")
    alice.set_password("pw-for-browser-123")
    alice.save()

    page = browser_page
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-for-browser-123")
    page.click("form button")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    page.goto(live_server.url + reverse("fidelity_tool", args=[team.slug, server.code, "write"]) + "?days=0")
    page.wait_for_selector("#tool-chart[data-rendered]")
    assert page.js_errors == [], page.js_errors
    # Two verdicts, two bar traces stacked on one day; the exact-rate line on the right axis.
    assert page.locator("#tool-chart .barlayer .trace").count() == 2
    assert page.locator("#tool-chart .scatterlayer .trace").count() == 1
    legend = page.locator("#tool-chart .legend").text_content()
    assert "exact" in legend and "truncated" in legend
    assert page.foreign_requests == []
