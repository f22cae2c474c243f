"""A webhook to a receiver on this machine, the obvious first test, in real headless Chromium: the
channel form says, next to the field, how an operator lets it through (OUTBOUND_ALLOW_NETWORKS);
refused under the default policy with that hint, accepted once loopback is allowed, and the test
notification reaches the real local receiver."""

from __future__ import annotations

import re

import pytest

from tests.browser import browser_login
from tests.helpers import Receiver, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _add_webhook(page, url: str) -> None:
    page.fill("input[name=name]", "local")
    page.select_option("select[name=kind]", "webhook")
    page.fill("input[name=target]", url)
    page.click("form button.primary")


def test_a_local_webhook_is_refused_with_the_setting_named_then_allowed(
    browser_page, live_server, team, alice, settings, eager_celery
):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    settings.OUTBOUND_ALLOW_NETWORKS = []  # the default policy
    with Receiver() as hook:
        page.goto(f"{live_server.url}/t/{team.slug}/channels/")
        hint = page.locator("#outbound-hint").inner_text()
        assert "OUTBOUND_ALLOW_NETWORKS=127.0.0.1/32" in hint and "None is allowed here now." in hint
        _add_webhook(page, hook.url)
        error = page.locator("form .error").first.inner_text()
        assert "loopback address" in error and "OUTBOUND_ALLOW_NETWORKS" in error
        page.screenshot(path="/tmp/shots/channel-local-refused.png", full_page=True)

        settings.OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8"]
        page.goto(f"{live_server.url}/t/{team.slug}/channels/")
        assert "Allowed here now: 127.0.0.0/8." in page.locator("#outbound-hint").inner_text()
        _add_webhook(page, hook.url)
        page.wait_for_selector("text=Channel local added.")
        page.click("button:text('Send test')")
        wait_until(lambda: hook.delivered, timeout=30, message="the test notification")
    assert page.js_errors == []
