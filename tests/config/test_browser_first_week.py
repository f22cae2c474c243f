"""The smaller things a new team met on the pages (issue "The first week of a real team"), in real
headless Chromium where the page's look is the point, and through the test client otherwise."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from dashboard.alerts.budgets import open_or_update_alert, resolve_alert
from dashboard.alerts.models import Budget, Level, Measure
from tests.browser import browser_login
from tests.dashboard.factories import http_server, record, tool


def _first_snapshot_server(team):
    server = http_server(team, "kg")
    tools = [
        tool("create_entities", "Create entities in the knowledge graph."),
        tool("read_graph", "Read the whole knowledge graph."),
    ]
    record(server, tools, "1.0.0")
    server.refresh_from_db()
    return server


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_first_snapshot_in_dark_mode_and_on_a_phone(browser_page, live_server, team, alice):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    server = _first_snapshot_server(team)
    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    url = f"{live_server.url}/t/{team.slug}/servers/{server.code}/"

    page.emulate_media(color_scheme="dark")
    page.goto(url)
    page.wait_for_selector("#tax-chart[data-rendered]")
    # The chart takes the page's colours, not a white box.
    background = page.evaluate(
        "getComputedStyle(document.querySelector('#tax-chart .main-svg')).backgroundColor"
    )
    assert background == "rgba(0, 0, 0, 0)"
    ink = page.evaluate("getComputedStyle(document.body).color")
    assert page.evaluate("document.querySelector('#tax-chart .xtick text').style.fill") == ink
    # One snapshot: the date axis reads as dates and hours, never "15:31:19.9665".
    ticks = page.eval_on_selector_all("#tax-chart .xtick text", "ts => ts.map(t => t.textContent)")
    assert ticks and not any(re.search(r"\d:\d\d\.\d", t) for t in ticks), ticks
    # Tool names: the link's underline is drawn below the underscores.
    offset = page.evaluate("getComputedStyle(document.querySelector('#tools td.mono a')).textUnderlineOffset")
    assert float(offset.removesuffix("px")) >= 4.0
    page.screenshot(path="/tmp/shots/first-snapshot-dark.png", full_page=True)

    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    page.wait_for_selector("#tax-chart[data-rendered]")
    # The legend sits under the plot, not over it.
    legend = page.locator("#tax-chart .legend").bounding_box()
    plot = page.locator("#tax-chart .nsewdrag").first.bounding_box()
    assert legend["y"] >= plot["y"] + plot["height"]
    # The open menu takes a row of its own, under the brand.
    page.click("[data-navtoggle]")
    page.wait_for_selector(".topbar.open #mainnav a")
    rows = page.evaluate(
        "() => ['.topbar .brand', '#mainnav'].map(s => document.querySelector(s).getBoundingClientRect())"
        ".map(r => [r.top, r.bottom])"
    )
    (brand_top, brand_bottom), (nav_top, _) = rows
    assert nav_top >= brand_bottom, rows
    page.screenshot(path="/tmp/shots/first-snapshot-390.png", full_page=True)
    assert page.js_errors == []


@pytest.mark.django_db
def test_banner_ranks_budget_breaches_first_and_resolved_alerts_say_so(alice_client, team):
    server = _first_snapshot_server(team)
    open_or_update_alert(
        team,
        "agent:1:agent_exact_rate",
        Measure.AGENT_EXACT_RATE,
        Level.ERROR,
        25.0,
        50.0,
        "exact 25%",
        "claude-code",
    )
    open_or_update_alert(
        team,
        f"server:{server.pk}:fixed_tax_tokens",
        Measure.FIXED_TAX_TOKENS,
        Level.WARNING,
        900.0,
        500.0,
        "fixed tax 900",
        server.name,
        server=server,
    )
    html = alice_client.get(reverse("alert_banner", args=[team.slug])).content.decode()
    items = re.findall(r"<li>(.*?)</li>", html, re.S)
    assert "Fixed tax" in items[0] and "exact" in items[1].lower()

    # A grown release whose alert was resolved: the overview's regression chip says resolved.
    grown = record(server, [tool("create_entities", "Create entities. " * 40)], "1.1.0")
    open_or_update_alert(
        team,
        f"server:{server.pk}:release_growth_pct",
        Measure.RELEASE_GROWTH_PCT,
        Level.WARNING,
        80.0,
        10.0,
        "grew",
        server.name,
        server=server,
        snapshot=grown,
    )
    resolve_alert(team, f"server:{server.pk}:release_growth_pct", value=0.0)
    overview = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    panel = overview[overview.index('id="regressions-panel"') :]
    panel = panel[: panel.index("</section>")]
    assert "warning</span>" not in panel and "warning</a>" not in panel
    assert re.search(r'class="badge muted"[^>]*>[^<]*: resolved</a>', panel)


@pytest.mark.django_db
def test_the_budgets_footer_describes_only_defaults_the_team_has(alice_client, team):
    url = reverse("budgets", args=[team.slug])
    Budget.objects.filter(team=team).delete()
    Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.WARNING, limit=5000)
    page = alice_client.get(url).content.decode()
    assert 'id="defaults-note"' not in page and "warns above 10%" not in page
    Budget.objects.create(
        team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.ERROR, limit=40, is_default=True
    )
    page = alice_client.get(url).content.decode()
    assert 'id="defaults-note"' in page and "errs above 25%" not in page
