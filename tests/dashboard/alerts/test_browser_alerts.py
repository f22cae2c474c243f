"""The alert list in real headless Chromium: acknowledge and silence in place."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.alerts.models import AlertState
from tests.conftest import browser_login
from tests.dashboard.alerts.factories import open_alert


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_acknowledge_and_silence_in_chromium(browser_page, live_server, team, alice):
    alice.set_password("pw-for-browser-123")
    alice.save()
    alert = open_alert(team, rule_key="server:1:fixed_tax_tokens").alert
    page = browser_page
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.goto(live_server.url + reverse("alert_list", args=[team.slug]))
    assert page.inner_text("#nav-alerts .badge") == "1"

    row = f"#alert-{alert.code}"
    page.click(f"{row} summary:has-text('Actions')")  # the row's actions sit in one menu
    page.fill(f"{row} input[name=note]", "shrinking it in 1.5.1")
    url_before = page.url
    page.click(f"{row} button:has-text('Acknowledge')")
    page.wait_for_selector(f"{row} :text('shrinking it in 1.5.1')")
    assert page.url == url_before, "acknowledged in place, without a page load"
    # The navigation count followed out of band: no active alert is left.
    page.wait_for_selector("#nav-alert-count:not(:has(.badge))", state="attached")
    page.click(f"{row} summary:has-text('Actions')")
    page.click(f"{row} button:has-text('Silence until the next release')")
    page.wait_for_selector(f"{row} :text('until the next release')")
    alert.refresh_from_db()
    assert alert.state == AlertState.SILENCED and alert.acknowledged_by == alice
    assert page.js_errors == []
