"""Time every page of a team on PostgreSQL at scale, count its SQL queries, and judge the target.

Seeds (once, into the database of DATABASE_URL, default `mcptax_bench_pages`; `--reseed` to start
over) two teams: one with 10 servers and one with `--servers` (default 50), each server with
`--snapshots` (default 500) snapshots (scripts/bench_pages_seed.py), and captured agent traffic:
`--calls` (default 1,000,000) ToolCalls from 20 agents over 90 days in the large team, a
tenth of that in the small one, written with COPY by bench_fidelity.seed_calls, rollups
included. Then requests each page `--repeat` times through Django's test Client, logged in, and
prints p50/p95 (server side: the view, its queries and its template) and the query count at 10 and
at N servers. Fails when a page's p95 is over `--p95-ms` (default 150) or its query count grows
with the number of servers. `--smoke`: a tiny size, the target not judged.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench_pages .venv/bin/python scripts/bench_pages.py
    .venv/bin/python scripts/bench_pages.py --calls 100000 --repeat 10   # smaller
    .venv/bin/python scripts/bench_pages.py --browser --repeat 5 # Chromium, demo data, < 300 ms each
    .venv/bin/python scripts/bench_pages.py --browser --at-scale   # Chromium, the seeded teams above
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
BROWSER = "--browser" in sys.argv and "--at-scale" not in sys.argv  # on the demo data, in a test database
if not BROWSER:
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mcptax_bench_pages")
os.environ.setdefault("VAR_DIR", "/tmp/bench-pages-var")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

SMALL_SLUG, LARGE_SLUG, USER = "pbench-ten", "pbench-large", "pbench"
# The bench user's password, set for the browser run's login (a throwaway benchmark database).
BROWSER_PASSWORD = "pbench-browser-login"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _seeded(servers: int, snapshots: int, calls: int) -> bool:
    """Whether the database holds exactly what these options would seed."""
    from dashboard.servers.models import Snapshot
    from ingest.capture.models import ToolCall

    large = LARGE_SLUG
    return (
        Snapshot.objects.filter(server__team__slug=large).count() == servers * snapshots
        and Snapshot.objects.filter(server__team__slug=SMALL_SLUG).count() == 10 * snapshots
        and ToolCall.objects.filter(team__slug=large).count() == calls
        and ToolCall.objects.filter(team__slug=SMALL_SLUG).count() == _small_calls(calls)
    )


def _small_calls(calls: int) -> int:
    return max(200, calls // 10)


def seed_all(servers: int, snapshots: int, calls: int) -> None:
    import bench_fidelity
    import bench_pages_seed as schema
    from django.contrib.auth import get_user_model

    from dashboard.teams.models import Membership, Team

    Team.objects.filter(slug__in=[SMALL_SLUG, LARGE_SLUG]).delete()
    user, _ = get_user_model().objects.get_or_create(username=USER)
    for slug, name, count, team_calls in (
        (SMALL_SLUG, "Ten", 10, _small_calls(calls)),
        (LARGE_SLUG, f"Large {servers}", servers, calls),
    ):
        started = time.monotonic()
        team = Team.objects.create(name=name, slug=slug)
        Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
        schema.seed(team, count, snapshots, user)
        print(f"{slug}: {count} servers x {snapshots} snapshots in {time.monotonic() - started:.0f} s")
        bench_fidelity.seed_calls(
            team, team_calls, 7, tools=schema.FIDELITY_TOOLS, bulk_tools=schema.FIDELITY_BULK_TOOLS
        )
    # A reseed deletes the old rows and bulk_update rewrites every snapshot: without VACUUM the pages
    # would be timed on tables with millions of dead rows (autovacuum gets there, in its own time).
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def pages_for(team) -> list[tuple[str, str, dict]]:
    from django.urls import reverse

    from ingest.capture.models import ToolCall

    slug = team.slug
    server = team.servers.get(name="files")
    current = server.current_snapshot
    first_release = server.snapshots.order_by("first_seen").first()
    ov = reverse("team_overview", args=[slug])
    detail = reverse("server_detail", args=[slug, server.code])
    diff = reverse("snapshot_diff", args=[slug, server.code])
    tool = reverse("fidelity_tool", args=[slug, server.code, "tool_0"])
    agents = reverse("fidelity_agents", args=[slug])
    agent = reverse("fidelity_agent", args=[slug, "claude-code"])
    # The same kind of call in both teams (an exact paste), so their drill-downs are comparable.
    call = (
        ToolCall.objects.filter(team=team, bulk_count=1, bulk_arguments__verdict="exact")
        .order_by("-request_ts")
        .first()
    )
    htmx = {"HTTP_HX_REQUEST": "true"}

    def region(name: str) -> dict:
        return {**htmx, "HTTP_HX_TARGET": name}

    return [
        ("overview", ov, {}),
        ("overview sorted by name (htmx region)", ov + "?sort=name", htmx),
        ("overview filtered over budget", ov + "?status=over_budget", {}),
        ("server page", detail, {}),
        ("server chart by release (htmx)", detail + "?axis=release", region("chart-region")),
        ("server tools sorted (htmx)", detail + "?tsort=name", region("tools-region")),
        ("tool page, 30 days", tool, {}),
        ("tool page, 90 days", tool + "?days=90", {}),
        ("tool calls region (htmx)", tool + "?sort=bytes", region("calls-region")),
        ("release diff (previous)", diff, {}),
        ("release diff (first vs current)", diff + f"?a={first_release.pk}&b={current.pk}", {}),
        ("stacks", reverse("stacks", args=[slug]), {}),
        ("regressions, all", reverse("regressions", args=[slug]) + "?period=all", {}),
        ("alerts", reverse("alert_list", args=[slug]), {}),
        ("budgets", reverse("budgets", args=[slug]), {}),
        ("channels", reverse("channels", args=[slug]), {}),
        ("agents list, 30 days", agents, {}),
        ("agents list, 90 days", agents + "?days=90", {}),
        ("agent page, 30 days", agent, {}),
        ("agent page, 90 days", agent + "?days=90", {}),
        ("agent calls, verdict=truncated (htmx)", agent + "?verdict=truncated", region("calls-region")),
        ("agent calls, page 200 (htmx)", agent + "?page=200", region("calls-region")),
        ("call drill-down", reverse("fidelity_call", args=[slug, call.pk]), {}),
        ("ingest", reverse("ingest_home", args=[slug]), {}),
        ("references", reverse("fidelity_references", args=[slug]), {}),
        ("prices", reverse("fidelity_prices", args=[slug]), {}),
        ("discovery", reverse("discovery_team", args=[slug]), {}),
        ("discovery, an agent", reverse("discovery_agent", args=[slug, "claude-code"]), {}),
        ("discovery, a server", reverse("discovery_server", args=[slug, server.code]), {}),
        ("discovery, a tool", reverse("discovery_tool", args=[slug, server.code, "tool_0"]), {}),
        ("team settings", reverse("team_settings", args=[slug]), {}),
        ("health", reverse("team_health", args=[slug]), {}),
    ]


def measure(client, url: str, extra: dict) -> tuple[int, int]:
    """The query count and size of one warm request (figures of an unchanged snapshot are
    remembered per process, as when a page is served most of the time)."""
    from django.test.utils import CaptureQueriesContext

    client.get(url, **extra)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **extra)
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    if os.environ.get("BENCH_SHOW_QUERIES"):
        print(url, *[q["sql"][:160] for q in queries.captured_queries], sep="\n  ")
    return len(queries), len(response.content)


def time_pages(client, large, small, repeat: int) -> list[dict]:
    results = []
    for (label, url, extra), (_, small_url, small_extra) in zip(
        pages_for(large), pages_for(small), strict=True
    ):
        queries_large, size = measure(client, url, extra)  # also warms templates and plans
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            client.get(url, **extra)
            times.append((time.perf_counter() - start) * 1000)
        queries_small, _ = measure(client, small_url, small_extra)
        results.append(
            {
                "page": label,
                "p50_ms": statistics.median(times),
                "p95_ms": percentile(times, 0.95),
                "queries_10": queries_small,
                "queries_n": queries_large,
                "kb": size / 1024,
            }
        )
    return results


def report(results: list[dict], args: argparse.Namespace, judge: bool) -> bool:
    load = os.getloadavg()
    print(
        f"\n{connection.vendor}: {args.servers} servers x {args.snapshots} snapshots (+10 x {args.snapshots}), "
        f"{args.calls:,} calls; {args.repeat} requests per page; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)\n"
    )
    header = f"{'page':40} {'p50 ms':>8} {'p95 ms':>8} {'queries@10':>11} {f'queries@{args.servers}':>11} {'KB':>6}"
    print(header)
    print("-" * len(header))
    ok = True
    for r in results:
        over = judge and r["p95_ms"] > args.p95_ms
        grew = r["queries_n"] != r["queries_10"]
        ok &= not over and not grew
        flag = ("  OVER" if over else "") + ("  GREW" if grew else "")
        print(
            f"{r['page']:40} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['queries_10']:11d} "
            f"{r['queries_n']:11d} {r['kb']:6.0f}{flag}"
        )
    if not ok:
        print(f"\nFAIL: a page's p95 is over {args.p95_ms:.0f} ms or its query count grew with servers")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--snapshots", type=int, default=500)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--p95-ms", type=float, default=150.0, help="the per-page server-side target")
    parser.add_argument("--reseed", action="store_true", help="drop the bench teams and seed again")
    parser.add_argument("--smoke", action="store_true", help="3 servers x 5 snapshots, 2,000 calls, unjudged")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument(
        "--browser",
        action="store_true",
        help="instead: every page's time to DOMContentLoaded in Chromium, warm, on the demo data",
    )
    parser.add_argument("--target-ms", type=float, default=300.0, help="with --browser: the per-page target")
    parser.add_argument(
        "--at-scale",
        action="store_true",
        help="with --browser: the seeded teams on PostgreSQL (the large team's whole pages), not the demo",
    )
    args = parser.parse_args()
    if args.smoke:
        args.servers, args.snapshots, args.calls, args.repeat = 3, 5, 2000, 2
    if args.browser and not args.at_scale:
        return browser_main(args)

    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from dashboard.teams.models import Team

    ensure_seeded(args)
    if args.browser:
        return browser_at_scale(args)
    setup_test_environment(debug=False)
    settings.ALLOWED_HOSTS = ["testserver", "localhost"]
    client = Client(HTTP_HOST="localhost")
    client.force_login(get_user_model().objects.get(username=USER))
    results = time_pages(
        client, Team.objects.get(slug=LARGE_SLUG), Team.objects.get(slug=SMALL_SLUG), args.repeat
    )
    ok = report(results, args, judge=not args.smoke)
    if args.json:
        print(json.dumps({"vendor": connection.vendor, "results": results}, indent=2))
    return 0 if ok else 1


def ensure_seeded(args: argparse.Namespace) -> None:
    import bench_fidelity
    from django.core.management import call_command

    bench_fidelity._ensure_database()
    call_command("migrate", verbosity=0)
    if args.reseed or not _seeded(args.servers, args.snapshots, args.calls):
        started = time.monotonic()
        seed_all(args.servers, args.snapshots, args.calls)
        print(f"seeded in {time.monotonic() - started:.0f} s")
    else:
        print(f"reusing the seeded teams in {settings.DATABASES['default']['NAME']} (--reseed to start over)")


# Sections the agent, server and tool pages load with htmx once they are shown (after
# DOMContentLoaded): timed server-side above, not navigated to.
SECTIONS = {"discovery, an agent", "discovery, a server", "discovery, a tool"}


def browser_at_scale(args: argparse.Namespace) -> int:
    """Chromium on the large seeded team: every whole page (the htmx regions are parts of them)."""
    import bench_browser
    from django.contrib.auth import get_user_model

    from dashboard.teams.models import Team

    def prepare() -> bench_browser.Pages:
        user = get_user_model().objects.get(username=USER)
        user.set_password(BROWSER_PASSWORD)
        user.save(update_fields=["password"])
        pages = [
            (label, url)
            for label, url, extra in pages_for(Team.objects.get(slug=LARGE_SLUG))
            if not extra and label not in SECTIONS
        ]
        return pages, (USER, BROWSER_PASSWORD)

    # At the smoke size: one cold load and one warm-up pass per page, enough to show it still runs.
    rows, met = bench_browser.run(args.repeat, args.target_ms, prepare, smoke=args.smoke)
    data = f"PostgreSQL, {args.servers} servers x {args.snapshots} snapshots, {args.calls:,} calls"
    bench_browser.report(rows, met, args.target_ms, args.repeat, data)
    if args.json:
        print(json.dumps({"target_ms": args.target_ms, "results": rows}, indent=2))
    if args.smoke:
        print(
            "(--smoke: one cold load and one warm-up pass per page, not the 3 and 2 above; the target is not judged)"
        )
        return 0
    return 0 if met else 1


def browser_main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_browser

    if connection.vendor == "sqlite":
        test_file = Path(settings.VAR_DIR) / "bench-browser.sqlite3"
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = str(test_file)
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        rows, met = bench_browser.run(args.repeat, args.target_ms)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    bench_browser.report(rows, met, args.target_ms, args.repeat)
    if args.json:
        print(json.dumps({"target_ms": args.target_ms, "results": rows}, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
