"""`bench_pages.py --browser`: every page's time to DOMContentLoaded in Chromium, warm, demo data.

Loads the demo (`manage.py demo`: the example servers' history, budgets, captured agent traffic)
into the throwaway test database, collects the static files (hashed, gzip, immutable), serves the
real WSGI application (WhiteNoise included) on a loopback port, logs in with Debian's Chromium and
opens each page once to warm the browser cache, then `repeat` more times, reading the Navigation
Timing entry (`domContentLoadedEventEnd`, from the navigation's start; `loadEventEnd` beside it,
which includes the charts' plotly.js, loaded async). The target: every page's median
DOMContentLoaded under `target_ms`.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler, get_internal_wsgi_application
from django.urls import reverse

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync"]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def _pages(team: Any) -> list[tuple[str, str]]:
    from ingest.capture.models import Agent

    slug = team.slug
    server = team.servers.order_by("-current_snapshot__fixed_tax_tokens").first()
    family = Agent.objects.filter(team=team).values_list("family", flat=True).first()
    pages = [
        ("overview", reverse("team_overview", args=[slug])),
        ("server page", reverse("server_detail", args=[slug, server.code])),
        ("release diff", reverse("snapshot_diff", args=[slug, server.code])),
        ("stacks", reverse("stacks", args=[slug])),
        ("regressions", reverse("regressions", args=[slug]) + "?period=all"),
        ("alerts", reverse("alert_list", args=[slug])),
        ("budgets", reverse("thresholds", args=[slug])),
        ("channels", reverse("channels", args=[slug])),
        ("agents", reverse("fidelity_agents", args=[slug])),
        ("ingest", reverse("ingest_home", args=[slug])),
        ("references", reverse("fidelity_references", args=[slug])),
        ("prices", reverse("fidelity_prices", args=[slug])),
        ("team settings", reverse("team_settings", args=[slug])),
    ]
    if family:
        pages.insert(9, ("agent page", reverse("fidelity_agent", args=[slug, family])))
    tool = server.current_snapshot.tools.order_by("name").first() if server.current_snapshot else None
    if tool is not None:
        pages.insert(2, ("tool page", reverse("fidelity_tool", args=[slug, server.code, tool.name])))
    return pages


def run(repeat: int, target_ms: float) -> tuple[list[dict[str, Any]], bool]:
    """(one row per page, whether every page met the target). Needs a test database already set up."""
    from playwright.sync_api import sync_playwright

    from dashboard.management.commands.demo import DEMO_PASSWORD, DEMO_USERNAME
    from dashboard.teams.models import Team

    call_command("demo", verbosity=0)
    team = Team.objects.get(slug="demo")
    static_root = tempfile.mkdtemp(prefix="bench-static-")
    settings.STATIC_ROOT = static_root
    call_command("collectstatic", interactive=False, verbosity=0)
    pages = _pages(team)
    server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
    server.set_app(get_internal_wsgi_application())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    rows: list[dict[str, Any]] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(origin + "/login/")
            page.fill("input[name=username]", DEMO_USERNAME)
            page.fill("input[name=password]", DEMO_PASSWORD)
            page.click("form button")
            page.wait_for_url(lambda url: "/login/" not in url)
            for label, path in pages:
                page.goto(origin + path, wait_until="load")  # cold: fills the browser cache
                times, loads, firsts = [], [], []
                for _ in range(repeat):
                    page.goto(origin + path, wait_until="load")
                    dcl, load, first = page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return [n.domContentLoadedEventEnd - n.startTime, n.loadEventEnd - n.startTime,"
                        " n.responseStart - n.startTime]; }"
                    )
                    times.append(dcl)
                    loads.append(load)
                    firsts.append(first)
                rows.append(
                    {
                        "page": label,
                        "p50_ms": statistics.median(times),
                        "max_ms": max(times),
                        "load_p50_ms": statistics.median(loads),
                        "first_byte_p50_ms": statistics.median(firsts),
                        "path": path,
                    }
                )
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(static_root, ignore_errors=True)
    return rows, all(r["p50_ms"] < target_ms for r in rows)


def report(rows: list[dict[str, Any]], met: bool, target_ms: float, repeat: int) -> None:
    print(f"\nChromium, demo data, warm cache, {repeat} loads per page: time to DOMContentLoaded\n")
    header = f"{'page':20} {'p50 ms':>8} {'max ms':>8} {'1st byte':>9} {'load p50':>9}  path"
    print(header)
    print("-" * (len(header) + 30))
    for r in rows:
        flag = "" if r["p50_ms"] < target_ms else "  over target"
        print(
            f"{r['page']:20} {r['p50_ms']:8.1f} {r['max_ms']:8.1f} {r['first_byte_p50_ms']:9.1f} {r['load_p50_ms']:9.1f}  {r['path']}{flag}"
        )
    print(f"\n{'PASS' if met else 'FAIL'}: target {target_ms:.0f} ms per page (median)")
