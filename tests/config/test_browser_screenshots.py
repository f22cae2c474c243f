"""The README's two pictures, from the demo data in Debian's Chromium: the overview (every
server's fixed tax and its sparkline) and an agent's page (its verdicts and exact-match chart).

The test checks what the pictures must show; with ``SCREENSHOTS_DIR`` set (the
``scripts/screenshots.py`` run) it also saves them there, at 1440 px in the light scheme.
"""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from dashboard.system.models import WORK_QUEUES, WorkerHeartbeat
from dashboard.teams.models import Team
from ingest.capture.models import Agent
from tests.browser import CHROMIUM_ARGS, browser_login, chromium_executable

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _shoot(page, name: str) -> None:
    folder = os.environ.get("SCREENSHOTS_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=False)


def test_the_overview_and_an_agent_page_show_their_figures_and_charts(live_server, monkeypatch):
    from playwright.sync_api import sync_playwright

    # The demo polls its servers (anyio) before Playwright's own event loop starts in this thread.
    call_command("demo", stdout=StringIO())
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # What `make run`'s worker reports about itself, so the pictures show a running install.
    WorkerHeartbeat.beat("screenshots", list(WORK_QUEUES))
    team = Team.objects.get(slug="demo")
    family = Agent.objects.filter(team=team).order_by("family").values_list("family", flat=True).first()
    servers = list(team.servers.values_list("name", flat=True))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(30_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.emulate_media(color_scheme="light")
        browser_login(page, live_server, "demo", "demo-tax-2026")
        page.wait_for_url(lambda url: "/login/" not in url)

        page.goto(live_server.url + reverse("team_overview", args=[team.slug]), wait_until="networkidle")
        assert page.locator("h1").first.inner_text().startswith(team.name)
        assert page.get_by_text("No worker is running").count() == 0
        body = page.locator("main").inner_text()
        assert [name for name in servers if name not in body] == []
        # Each server row draws its fixed tax over the last snapshots.
        assert page.locator("svg.spark").count() >= 1
        _shoot(page, "overview.png")

        agent_url = reverse("fidelity_agent", args=[team.slug, family])
        page.goto(live_server.url + agent_url, wait_until="networkidle")
        assert page.locator("h1").first.inner_text().startswith(family)
        assert page.get_by_role("heading", name="Verdicts").count() == 1
        page.wait_for_selector("#rate-chart .main-svg")
        _shoot(page, "agent.png")
        browser.close()
    assert errors == []
