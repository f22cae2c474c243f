"""The walk a team lives through, in Debian's Chromium against the real example server.

A new team gets its default budgets; a grown release of files-sprawl, polled with "Poll now",
appears on the regressions page with the tools that grew it, raises an alert that the server
page's banner and the navigation count show without a reload, the overview's banner too, and is
resolved by hand on the alerts page, the count following without a reload.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.alerts.models import Alert, AlertState, Budget, Measure
from dashboard.demo import ensure_example_servers
from dashboard.servers.models import Snapshot
from dashboard.tasks import poll as poll_server
from dashboard.teams.services import create_team
from tests.browser import browser_login
from tests.dashboard.alerts.factories import SPRAWL_V14, SPRAWL_V15, set_grown

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_new_team_to_a_regression_resolved_by_hand(browser_page, live_server, alice, eager_celery):
    alice.set_password("pw-for-browser-123")
    alice.save()
    team = create_team("Walkers", alice)  # commits: the defaults arrive with team_created
    assert Budget.objects.filter(team=team, is_default=True).count() == 3
    sprawl = next(s for s in ensure_example_servers(team, owner=alice) if s.name == "files-sprawl")
    set_grown(sprawl, False)
    assert poll_server(sprawl.pk, trigger="test").outcome == "ok"  # 1.4.0, the baseline
    set_grown(sprawl, True)  # the next poll sees 1.5.0

    page = browser_page
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.goto(live_server.url + reverse("budgets", args=[team.slug]))
    error_budget = Budget.objects.get(team=team, measure=Measure.RELEASE_GROWTH_PCT, level="error")
    budget_row = page.locator(f"#budget-{error_budget.pk}")
    assert "Growth per release (%) default" in budget_row.inner_text()
    assert budget_row.locator("input[name=limit]").input_value() == "25"
    assert page.locator("table.data .badge:text-is('default')").count() == 3

    page.goto(live_server.url + reverse("server_detail", args=[team.slug, sprawl.code]))
    page.wait_for_selector("#alert-banner[role=status]", state="attached")  # the slot has loaded: empty
    assert page.locator("#alert-banner .banner").count() == 0
    assert page.locator("#nav-alert-count .badge").count() == 0
    page.evaluate("() => { window.notReloaded = true; }")
    page.click("#poll-now")  # eager Celery: the poll runs inside the request
    page.wait_for_selector("#alert-banner .banner.error")
    banner = page.inner_text("#alert-banner")
    assert "1 open alert on files-sprawl" in banner and "Growth per release (%)" in banner
    page.wait_for_selector("#nav-alert-count .badge")
    assert page.inner_text("#nav-alert-count .badge") == "1"
    assert page.evaluate("() => window.notReloaded === true"), "banner and count came without a reload"
    page.wait_for_selector(f"#current-tax:text('{SPRAWL_V15:,}')")

    grown = Snapshot.objects.get(server=sprawl, server_version="1.5.0")
    page.goto(live_server.url + reverse("team_overview", args=[team.slug]))
    page.wait_for_selector("#alert-banner .banner.error")
    assert "files-sprawl" in page.inner_text("#alert-banner")
    assert f"+{SPRAWL_V15 - SPRAWL_V14:,} tokens" in page.inner_text("#regressions-panel")

    page.goto(live_server.url + reverse("regressions", args=[team.slug]))
    row = page.locator(f"#regression-{grown.pk}")
    text = row.inner_text()
    assert f"+{SPRAWL_V15 - SPRAWL_V14:,} tokens" in text and "release 1.4.0 → 1.5.0" in text
    assert "added" in text or "grown" in text, "the tools that grew it are named"
    assert "error: Growth per release (%)" in text

    alert = Alert.objects.open().get(team=team, measure=Measure.RELEASE_GROWTH_PCT)
    page.goto(live_server.url + reverse("alert_list", args=[team.slug]))
    page.evaluate("() => { window.notReloaded = true; }")
    alert_row = f"#alert-{alert.code}"
    page.click(f"{alert_row} summary:has-text('Actions')")
    page.click(f"{alert_row} button:has-text('Resolve by hand')")
    page.wait_for_selector(f"{alert_row} :text('resolved by hand by alice')")
    page.wait_for_selector("#nav-alert-count:not(:has(.badge))", state="attached")
    assert page.evaluate("() => window.notReloaded === true")
    alert.refresh_from_db()
    assert alert.state == AlertState.RESOLVED and alert.resolved_by == alice
    assert page.js_errors == [] and page.foreign_requests == []
