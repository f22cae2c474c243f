"""`bench_pages.py --browser`: every page's time to DOMContentLoaded in Chromium, cold and warm.

Loads the pages' data (by default the demo, `manage.py demo`: the example servers' history,
budgets, captured agent traffic, in the throwaway test database; `bench_pages.py --browser
--at-scale` passes the seeded PostgreSQL teams instead), collects the static files (hashed, gzip,
immutable), serves the real WSGI application as the full stack does (gunicorn, three workers,
`DEBUG` off, WhiteNoise included; in processes of its own, so the browser's driver in this process
never shares an interpreter with the pages it times) on a loopback port and logs in with Debian's
Chromium. Each page is loaded `COLD_LOADS` times in a fresh context (empty cache:
the cold figure is their median, with the bytes over the wire), then once to warm the cache and
`repeat` more times, reading the Navigation Timing entry (`domContentLoadedEventEnd`, from the
navigation's start; `loadEventEnd` beside it, which includes the charts' plotly.js, loaded async).
The target: every page's DOMContentLoaded under `target_ms`, cold (median) and warm (median).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync"]


ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    """The URL of the database this process uses now (a test database once one is set up)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    credentials = db.get("USER") or ""
    if db.get("PASSWORD"):
        credentials += f":{db['PASSWORD']}"
    host = f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}"
    return f"postgres://{credentials}{'@' if credentials else ''}{host}/{db['NAME']}"


@contextlib.contextmanager
def _served(static_root: str) -> Iterator[str]:
    """gunicorn serving the application, as docker-compose runs it but on plain HTTP; its origin."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "STATIC_ROOT": static_root,
        "DEBUG": "false",
        "SECRET_KEY": settings.SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        # No TLS on loopback: what a TLS proxy in front would take care of is left out.
        "SECURE_SSL_REDIRECT": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "SECURE_HSTS_SECONDS": "0",
    }
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [*command, "--workers", "3", "--log-level", "warning"], cwd=ROOT, env=env, stdout=log, stderr=log
        )
        yield from _until_stopped(server, port, log)


def _until_stopped(server: subprocess.Popen, port: int, log: Any) -> Iterator[str]:
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise SystemExit(f"gunicorn did not start:\n{log.read().decode(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


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
        ("budgets", reverse("budgets", args=[slug])),
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


COLD_CHART_TARGET_KB = 500.0
COLD_LOADS = 3

# What a run measures: (label, path) per page, and the (username, password) to log in with.
Pages = tuple[list[tuple[str, str]], tuple[str, str]]


def demo_pages() -> Pages:
    """The demo team's pages, after loading the demo into the (test) database."""
    from dashboard.management.commands.demo import DEMO_PASSWORD, DEMO_USERNAME
    from dashboard.teams.models import Team

    call_command("demo", verbosity=0)
    return _pages(Team.objects.get(slug="demo")), (DEMO_USERNAME, DEMO_PASSWORD)


def _cold_load(browser: Any, warm_context: Any, url: str) -> dict[str, Any]:
    """The page in a fresh context (empty cache, the warm context's login): its time to
    DOMContentLoaded and every byte over the wire (document and subresources, as transferred,
    compressed), its chart drawn where it has one."""
    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, storage_state=warm_context.storage_state()
    )
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        chart = page.locator("[data-plotly]").count() > 0
        if chart:
            page.wait_for_selector("[data-plotly][data-rendered]", timeout=30_000)
        dcl, transferred, first = page.evaluate(
            "() => { const n = performance.getEntriesByType('navigation')[0];"
            " const r = performance.getEntriesByType('resource').reduce((t, e) => t + e.transferSize, 0);"
            " return [n.domContentLoadedEventEnd - n.startTime, n.transferSize + r, n.responseStart - n.startTime]; }"
        )
    finally:
        context.close()
    return {"dcl": dcl, "bytes": transferred, "chart": chart, "first": first}


def _reset_static_storage() -> None:
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.core.files.storage import storages
    from django.utils.functional import empty

    storages._storages.pop("staticfiles", None)
    staticfiles_storage._wrapped = empty


def run(
    repeat: int, target_ms: float, prepare: Callable[[], Pages] = demo_pages, *, smoke: bool = False
) -> tuple[list[dict[str, Any]], bool]:
    """(one row per page, whether every page met the target). Needs its database set up."""
    from playwright.sync_api import sync_playwright

    pages, (username, password) = prepare()
    static_root = tempfile.mkdtemp(prefix="bench-static-")
    settings.STATIC_ROOT = static_root
    _reset_static_storage()  # built before STATIC_ROOT moved: it would collect and serve elsewhere
    call_command("collectstatic", interactive=False, verbosity=0)
    _reset_static_storage()  # and again, so it reads the new manifest: hashed, gzipped names as in production
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    rows: list[dict[str, Any]] = []
    try:
        with _served(static_root) as origin, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(origin + "/login/")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", password)
            page.click("form button")
            page.wait_for_url(lambda url: "/login/" not in url)
            # Every page once before any is timed, so no row pays for a gunicorn worker's first
            # requests (imports, compiled templates, connections): cold is the browser's cache only.
            for _ in range(1 if smoke else 2):
                for _, path in pages:
                    page.goto(origin + path, wait_until="load")
            for label, path in pages:
                colds = [
                    _cold_load(browser, page.context, origin + path)
                    for _ in range(1 if smoke else COLD_LOADS)
                ]
                cold = {
                    **colds[-1],
                    "dcl": statistics.median(c["dcl"] for c in colds),
                    "first": statistics.median(c["first"] for c in colds),
                }
                page.goto(origin + path, wait_until="load")  # fills this context's cache
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
                        "cold_dcl_ms": cold["dcl"],
                        "cold_first_byte_ms": cold["first"],
                        "cold_kb": cold["bytes"] / 1024,
                        "chart": cold["chart"],
                        "path": path,
                    }
                )
            browser.close()
    finally:
        shutil.rmtree(static_root, ignore_errors=True)
    charts_light = all(r["cold_kb"] <= COLD_CHART_TARGET_KB for r in rows if r["chart"])
    fast = all(r["p50_ms"] <= target_ms and r["cold_dcl_ms"] <= target_ms for r in rows)
    return rows, fast and charts_light


def report(
    rows: list[dict[str, Any]], met: bool, target_ms: float, repeat: int, data: str = "demo data"
) -> None:
    load = os.getloadavg()
    print(
        f"\nChromium, {data}: {COLD_LOADS} cold loads per page (fresh cache, median; every page loaded twice before, so the server is warm), then {repeat} warm; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    header = (
        f"{'page':20} {'p50 ms':>8} {'max ms':>8} {'1st byte':>9} {'load p50':>9} "
        f"{'cold 1st':>9} {'cold DCL':>9} {'cold kB':>8}  path"
    )
    print(header)
    print("-" * (len(header) + 30))
    for r in rows:
        flag = "" if r["p50_ms"] <= target_ms else "  over target warm"
        flag += "" if r["cold_dcl_ms"] <= target_ms else "  over target cold"
        if r["chart"] and r["cold_kb"] > COLD_CHART_TARGET_KB:
            flag += "  chart page over its weight"
        print(
            f"{r['page']:20} {r['p50_ms']:8.1f} {r['max_ms']:8.1f} {r['first_byte_p50_ms']:9.1f} "
            f"{r['load_p50_ms']:9.1f} {r['cold_first_byte_ms']:9.1f} {r['cold_dcl_ms']:9.1f} "
            f"{r['cold_kb']:8.0f}  {r['path']}{flag}"
        )
    heaviest = max((r["cold_kb"] for r in rows if r["chart"]), default=0.0)
    print(
        f"\nchart pages, cold, over the wire: at most {heaviest:.0f} kB (target {COLD_CHART_TARGET_KB:.0f} kB)"
    )
    print(
        f"{'PASS' if met else 'FAIL'}: DOMContentLoaded <= {target_ms:.0f} ms per page, cold and warm (medians), "
        f"chart pages <= {COLD_CHART_TARGET_KB:.0f} kB cold"
    )
