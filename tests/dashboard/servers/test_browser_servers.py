"""The fixed-tax pages in real headless Chromium: log in, overview, sort, server page, chart axis,
release diff, poll now. Every request the pages make must stay on the app's own origin."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tests.browser import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _row_names(page) -> list[str]:
    return page.eval_on_selector_all(
        "#servers tbody tr[data-server]", "rows => rows.map(r => r.dataset.server)"
    )


def test_fixed_tax_pages_in_chromium(
    browser_page, live_server, team, alice, polled_example_servers, eager_celery
):
    page = browser_page
    alice.set_password("pw-for-browser-123")
    alice.save()
    sprawl, lean = polled_example_servers["files-sprawl"], polled_example_servers["files-lean"]
    # The demo history was polled seconds ago; age it so a fresh poll is visible as such.
    from django.utils import timezone

    from dashboard.servers.models import McpServer

    McpServer.objects.filter(team=team).update(last_poll_at=timezone.now() - timedelta(hours=1))

    browser_login(page, live_server, "alice", "pw-for-browser-123")
    page.wait_for_url(re.compile(rf"/t/{team.slug}/$"))
    assert _row_names(page) == ["files-sprawl", "files-lean"]  # largest fixed tax first
    sprawl_row = page.locator(f"#server-row-{sprawl.pk}")
    assert f"{sprawl.current_snapshot.fixed_tax_tokens:,}" in sprawl_row.inner_text()

    # Sort by name in place (htmx), then reverse it.
    page.evaluate("window.__sameDocument = true")
    page.click("th a[data-sort=name]")
    page.wait_for_function("() => document.querySelector('th a[data-sort=name] .arrow')")
    assert _row_names(page) == ["files-lean", "files-sprawl"]
    page.click("th a[data-sort=name]")
    page.wait_for_function(
        "() => document.querySelector('th a[data-sort=name] .arrow').textContent.includes('▼')"
    )
    assert _row_names(page) == ["files-sprawl", "files-lean"]
    assert "sort=-name" in page.url  # pushed, so the sorted view can be shared and reloaded
    assert page.evaluate("window.__sameDocument") is True

    # Poll now on the lean server: the row updates without a page reload.
    runs_before = lean.poll_runs.count()
    lean_row = page.locator(f"#server-row-{lean.pk}")
    assert "min ago" in lean_row.inner_text() or "h ago" in lean_row.inner_text()
    lean_row.locator("button", has_text="Poll now").click()
    page.wait_for_function(
        f"() => /\\d+ s ago/.test(document.querySelector('#server-row-{lean.pk} .poll-cell').textContent)"
    )
    assert page.evaluate("window.__sameDocument") is True
    assert lean.poll_runs.count() == runs_before + 1
    assert lean.poll_runs.order_by("-pk").first().trigger == "manual"
    assert "OK" in page.locator(f"#server-row-{lean.pk} .poll-cell").inner_text()

    # Server page: the chart is drawn by our own plotly.js, with its release markers.
    page.click(f"#server-row-{sprawl.pk} a.strong")
    page.wait_for_selector("#tax-chart[data-rendered]")
    assert page.locator("#tax-chart .scatterlayer .trace").count() >= 2
    assert "1.5.0" in page.locator("#tax-chart").inner_text()
    assert page.evaluate("typeof Plotly") == "object"
    assert page.locator("#findings").is_visible()
    assert "write_file takes bulk content" in page.content()

    # Switch the x axis to releases: the chart region is swapped in place and redrawn.
    page.evaluate("window.__sameDocument = true")
    page.click("#axis-release")
    page.wait_for_selector("#tax-chart[data-rendered][data-axis=release]")
    ticks = page.eval_on_selector_all("#tax-chart .xtick text", "ts => ts.map(t => t.textContent)")
    assert ticks == ["1.4.0", "1.5.0"]
    assert page.evaluate("window.__sameDocument") is True
    page.click("#axis-date")
    page.wait_for_selector("#tax-chart[data-rendered][data-axis=date]")

    # Sort the per-tool breakdown by name in place.
    page.click("th a[data-tsort=name]")
    page.wait_for_function("() => document.querySelector('th a[data-tsort=name]').textContent.includes('▼')")
    names = page.eval_on_selector_all("#tools tbody tr[data-tool]", "rows => rows.map(r => r.dataset.tool)")
    assert names == sorted(names, reverse=True)

    # Open the grown release's diff from its row in the snapshot history.
    page.click("#snapshots a:text('diff')")
    page.wait_for_url(re.compile(r"/diff/\?a=\d+&b=\d+"))
    summary = page.locator("#diff-summary").inner_text()
    old = sprawl.snapshots.get(server_version="1.4.0")
    growth = sprawl.current_snapshot.fixed_tax_tokens - old.fixed_tax_tokens
    assert f"+{growth:,}" in summary and "4 added" in summary
    assert page.locator("#added-removed tr.added").count() == 4

    # A release marker on the chart links to the same diff: click the 1.5.0 diamond itself.
    page.go_back()
    page.wait_for_selector("#tax-chart[data-rendered]")
    marker_urls = page.evaluate(
        "() => document.getElementById('tax-chart').data.find(t => t.name === 'Release').customdata.map(c => c[0])"
    )
    assert marker_urls[1].endswith(f"?a={old.pk}&b={sprawl.current_snapshot.pk}")
    page.locator("#tax-chart").scroll_into_view_if_needed()  # back restores the scroll position
    box = page.locator("#tax-chart .scatterlayer .trace:last-child .points path").nth(1).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    # Plotly finds the point from the hover, so move onto it first, as a hand would. Its hover
    # is throttled: wait for the label of this release, not for any label (one left from the
    # way in would make the click land on another point).
    page.mouse.move(x - 30, y)
    page.mouse.move(x, y, steps=5)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#tax-chart .hoverlayer .hovertext')]"
        ".some(h => h.textContent.includes('release 1.5.0'))"
    )
    # The last move's hover can still be pending (plotly runs it 50 ms after the one before). Run
    # during the press, it finds the chart "dragging" and clears the hover; a release within 50 ms
    # of that (Playwright's press lasts a few ms, a hand's about 100) then finds no point to click.
    # A 100 ms timer set now fires after that pending one, so the hover is settled when we press.
    page.evaluate("() => new Promise(done => setTimeout(done, 100))")
    page.mouse.down()
    page.mouse.up()
    page.wait_for_url(re.compile(rf"/diff/\?a={old.pk}&b={sprawl.current_snapshot.pk}$"))
    page.go_back()
    page.wait_for_selector("#tax-chart[data-rendered]")

    # Poll now from the server page: the status region reports the finished poll in place.
    page.evaluate("window.__sameDocument = true")
    page.click("#poll-now")
    page.wait_for_function("() => /\\d+ s ago/.test(document.querySelector('#poll-state').textContent)")
    assert page.evaluate("window.__sameDocument") is True
    # The page's other regions refresh themselves once the poll is done.
    page.wait_for_selector("#polls tbody tr td:text-is('manual')")
    page.wait_for_selector("#tax-chart[data-rendered]")
    assert page.locator("#status-region a", has_text="Edit").count() == 1
    assert page.evaluate("window.__sameDocument") is True

    page.screenshot(path="/tmp/shots/browser-server.png", full_page=True)
    assert page.foreign_requests == [], f"requests outside the app's origin: {page.foreign_requests}"
    assert page.js_errors == []
