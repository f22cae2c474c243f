"""The Content-Security-Policy in real headless Chromium: every main page, on demo-like data (the
example servers' release history, captured and ingested agent traffic, a channel, a watched
folder, a quarantined line), loads without a single CSP violation, the charts still draw, the
behaviour moved out of inline handlers still works, and a release version carrying markup is drawn
as text, never as a link."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.notify.models import Channel, ChannelKind
from ingest.capture.models import WatchedFolder
from tests.browser import browser_login
from tests.dashboard.factories import http_server, record, tool
from tests.ingest.fidelity.conftest import captured_log, fidelity_team  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
pytestmark.append(pytest.mark.timeout(400))

EVIL = '<a href="https://evil.example">x</a>'
# Recorded before any page script runs, on every document the page opens.
LISTEN = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || ""));
});
"""


def _visit(page, url: str, violations: list[str]) -> None:
    page.goto(url)
    page.wait_for_load_state("load")
    # htmx fragments load after the page ("load" triggers): let them arrive before reading.
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    violations += [f"{url}: {v}" for v in page.evaluate("window.__csp")]


@pytest.mark.usefixtures("fidelity_team")
def test_every_main_page_runs_under_the_policy_without_violations(
    browser_page, live_server, team, alice, polled_example_servers, team_factory, tmp_path
):
    page = browser_page
    console: list[str] = []
    page.on(
        "console",
        lambda m: (
            console.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None
        ),
    )
    page.add_init_script(LISTEN)
    alice.set_password("pw-for-browser-123")
    alice.save()
    second = team_factory("Second", alice)
    evil = http_server(team, "evil-release")
    record(evil, [tool("read", "Read a file.")], "1.0.0", when=timezone.now() - timedelta(days=1))
    record(evil, [tool("read", "Read a file."), tool("write", "Write a file.")], EVIL)
    channel = Channel.objects.create(
        team=team, name="ops", kind=ChannelKind.WEBHOOK, config={"url": "https://hooks.example.com/in/x"}
    )
    WatchedFolder.objects.create(team=team, path=str(tmp_path))
    sprawl = polled_example_servers["files-sprawl"]
    violations: list[str] = []

    _visit(page, live_server.url + "/login/", violations)
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    slug = team.slug
    pages = [
        reverse("team_overview", args=[slug]),
        reverse("stacks", args=[slug]),
        reverse("server_add", args=[slug]),
        reverse("server_detail", args=[slug, sprawl.code]),
        reverse("server_detail", args=[slug, sprawl.code]) + "?axis=release",
        reverse("server_detail", args=[slug, evil.code]),
        reverse("snapshot_diff", args=[slug, sprawl.code]),
        reverse("alert_list", args=[slug]),
        reverse("budgets", args=[slug]),
        reverse("channels", args=[slug]),
        reverse("channel_detail", args=[slug, channel.code]),
        reverse("ingest_home", args=[slug]),
        reverse("ingest_quarantine", args=[slug]),
        reverse("ingest_watch", args=[slug]),
        reverse("fidelity_agents", args=[slug]),
        reverse("fidelity_agent", args=[slug, "claude-code"]),
        reverse("fidelity_references", args=[slug]),
        reverse("fidelity_prices", args=[slug]),
        reverse("team_settings", args=[slug]),
        "/api/v1/docs",
    ]
    for path in pages:
        _visit(page, live_server.url + path, violations)
        if path.startswith(reverse("fidelity_agent", args=[slug, "claude-code"])):
            page.wait_for_selector("#rate-chart[data-rendered] svg.main-svg")
        elif "/servers/" in path and "/diff/" not in path and "/add/" not in path:
            page.wait_for_selector("#tax-chart[data-rendered] svg.main-svg")
    assert violations == [], violations
    assert console == [], console
    assert page.js_errors == [], page.js_errors

    # The markup in a release version is drawn as its literal text: no link in the chart.
    page.goto(live_server.url + reverse("server_detail", args=[slug, evil.code]) + "?axis=release")
    page.wait_for_selector("#tax-chart[data-rendered] svg.main-svg")
    assert page.locator("#tax-chart a").count() == 0
    assert EVIL in page.locator("#tax-chart").text_content()

    # The share bars get their length from the CSSOM (data-w), not from a style attribute.
    page.goto(live_server.url + reverse("server_detail", args=[slug, sprawl.code]))
    width = page.evaluate("parseFloat(getComputedStyle(document.querySelector('.bar[data-w]')).width)")
    assert width > 0

    # data-confirm: dismissing keeps the channel, accepting deletes it.
    page.goto(live_server.url + reverse("channel_detail", args=[slug, channel.code]))
    page.once("dialog", lambda d: d.dismiss())
    page.click("form[data-confirm] button")
    assert Channel.objects.filter(pk=channel.pk).exists()
    page.once("dialog", lambda d: d.accept())
    page.click("form[data-confirm] button")
    page.wait_for_url(re.compile(r"/channels/$"))
    assert not Channel.objects.filter(pk=channel.pk).exists()

    # The team switcher (data-navigate) opens the chosen team.
    page.select_option("select[data-navigate]", label=second.name)
    page.wait_for_url(re.compile(rf"/t/{second.slug}/$"))
    assert page.evaluate("window.__csp") == []
