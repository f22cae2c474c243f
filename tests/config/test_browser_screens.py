"""Every page on any screen, in Debian's Chromium with the demo data loaded: axe-core finds no
WCAG 2.1 A/AA violation (contrast included) at 1440 and 390 px, light and dark; at 390 px nothing
is wider than the screen and the navigation folds behind its button; the favicon is served.

One browser session walks all the combinations (pages x widths x colour schemes): starting
Chromium per combination would cost more than the checks. axe-core comes from npm, cached under
var/axe (tests.browser.axe_core_script), and is injected with `add_script_tag(path=...)`, which
adds it as an inline script: the context bypasses the Content-Security-Policy for that, which
tests/config/test_browser_csp.py checks on its own.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from dashboard.teams.models import Team
from ingest.capture.models import Agent, ToolCall
from tests.browser import CHROMIUM_ARGS, axe_core_script, browser_login, chromium_executable

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTHS = (1440, 390)
SCHEMES = ("light", "dark")
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
RUN_AXE = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return result.violations.map(v => v.id + ": " + v.nodes.slice(0, 3).map(
    n => n.target.join(" ") + " (" + (n.any[0] ? n.any[0].message : n.failureSummary) + ")").join("; "));
}"""


# What sticks out past a 390 px screen (the outermost such elements), or [] when nothing does.
WIDEST = """() => {
  if (document.documentElement.scrollWidth <= window.innerWidth) return [];
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right > window.innerWidth + 1 && !(el.parentElement && out.includes(el.parentElement))) {
      if (!out.some(o => o.contains(el))) out.push(el);
    }
  }
  return out.slice(0, 5).map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : "") +
    " right=" + Math.round(el.getBoundingClientRect().right));
}"""


def _pages(team: Team) -> list[str]:
    slug = team.slug
    server = team.servers.order_by("-current_snapshot__fixed_tax_tokens").first()
    family = Agent.objects.filter(team=team).values_list("family", flat=True).first()
    # A tool agents pasted into, so its page has every part (history, chart, calls, agents).
    called = ToolCall.objects.filter(team=team, server=server).values_list("tool", flat=True).first()
    assert called, f"the demo has no captured call of a tool of {server.name}"
    return [
        reverse("team_overview", args=[slug]),
        reverse("server_detail", args=[slug, server.code]),
        reverse("snapshot_diff", args=[slug, server.code]),
        reverse("fidelity_tool", args=[slug, server.code, called]) + "?days=0",
        reverse("server_add", args=[slug]),
        reverse("stacks", args=[slug]),
        reverse("regressions", args=[slug]) + "?period=all",
        reverse("alert_list", args=[slug]) + "?state=all",
        reverse("budgets", args=[slug]),
        reverse("channels", args=[slug]),
        reverse("fidelity_agents", args=[slug]),
        reverse("fidelity_agent", args=[slug, family]),
        reverse("ingest_home", args=[slug]),
        reverse("fidelity_references", args=[slug]),
        reverse("fidelity_prices", args=[slug]),
        reverse("team_settings", args=[slug]),
    ]


def test_every_page_passes_axe_at_1440_and_390_px_light_and_dark(live_server, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    call_command("demo", stdout=StringIO())
    team = Team.objects.get(slug="demo")
    pages = _pages(team)
    axe = str(axe_core_script())
    violations: dict[str, list[str]] = {}
    overflow: dict[str, int] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        context = browser.new_context(bypass_csp=True, viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        browser_login(page, live_server, "demo", "demo-tax-2026")
        page.wait_for_url(lambda url: "/login/" not in url)

        favicon = page.request.get(live_server.url + page.get_attribute("link[rel=icon]", "href"))
        assert favicon.status == 200 and "svg" in favicon.headers["content-type"]

        for scheme in SCHEMES:
            page.emulate_media(color_scheme=scheme)
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                for path in pages:
                    page.goto(live_server.url + path, wait_until="networkidle")
                    page.add_script_tag(path=axe)
                    found = page.evaluate(RUN_AXE, AXE_TAGS)
                    if found:
                        violations[f"{path} @{width}px {scheme}"] = found
                    if width == 390:
                        wide = page.evaluate(WIDEST)
                        if wide:
                            overflow[f"{path} {scheme}"] = wide

        # At 390 px the navigation is folded behind its button and opens with it.
        page.goto(live_server.url + pages[0])
        assert not page.is_visible("#mainnav")
        page.click("[data-navtoggle]")
        assert (
            page.is_visible("#mainnav") and page.get_attribute("[data-navtoggle]", "aria-expanded") == "true"
        )
        browser.close()

    assert violations == {}, "\n".join(f"{k}: {v}" for k, v in violations.items())
    assert overflow == {}, f"pages wider than a 390 px screen: {overflow}"
