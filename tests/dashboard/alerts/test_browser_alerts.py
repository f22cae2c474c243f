"""The alert list in real headless Chromium: acknowledge and silence in place."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dashboard.alerts.models import Alert, AlertState
from tests.browser import browser_login
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
    # The state cell, not the menu's button of the same words (visible before the answer came).
    page.wait_for_selector(f"{row} div.muted.small:has-text('until the next release')")
    alert.refresh_from_db()
    assert alert.state == AlertState.SILENCED and alert.acknowledged_by == alice
    assert page.js_errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_bulk_acknowledge_swaps_the_list_and_the_count_without_a_reload(
    browser_page, live_server, team, alice
):
    alice.set_password("pw-for-browser-123")
    alice.save()
    alerts = [open_alert(team, rule_key=f"server:{n}:fixed_tax_tokens").alert for n in (1, 2, 3)]
    page = browser_page
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.goto(live_server.url + reverse("alert_list", args=[team.slug]))
    assert page.inner_text("#nav-alerts .badge") == "3"
    page.evaluate("window.notReloaded = true")
    for alert in alerts[:2]:
        page.check(f"#alert-{alert.code} input[type=checkbox]")
    page.click("#bulk-form button:has-text('Acknowledge')")
    page.wait_for_selector("#bulk-note:has-text('2 alerts acknowledged.')")
    page.wait_for_function("() => document.querySelector('#nav-alerts .badge').textContent.trim() === '1'")
    assert page.evaluate("window.notReloaded === true"), "the list was swapped, not the page reloaded"
    assert page.inner_text(f"#alert-{alerts[0].code} .badge.state-acknowledged") == "Acknowledged"
    assert page.is_visible(f"#alert-{alerts[2].code} input[type=checkbox]")
    assert [a.state for a in (Alert.objects.get(pk=a.pk) for a in alerts)] == [
        AlertState.ACKNOWLEDGED,
        AlertState.ACKNOWLEDGED,
        AlertState.ACTIVE,
    ]
    assert page.js_errors == []
