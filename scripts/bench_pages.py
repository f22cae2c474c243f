"""Time the fixed-tax pages on a seeded database and count their SQL queries.

Seeds two teams in a throwaway test database (created and dropped by Django's test machinery, so
your data is never touched): one with 10 servers, one with `--servers` (default 50), each server
with `--snapshots` (default 500) snapshots, ~15 SnapshotTool rows per snapshot, a poll run per
snapshot, a few alerts, budgets checked in every snapshot, and a stack holding every server.
Then requests each page `--repeat` times through Django's test Client and prints p50/p95 and the
query count at 10 and at N servers (these must be equal: queries may not grow with servers).

    .venv/bin/python scripts/bench_pages.py                      # SQLite (a temporary file)
    .venv/bin/python scripts/bench_pages.py --browser --repeat 5 # Chromium, demo data, < 300 ms each
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax .venv/bin/python scripts/bench_pages.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="bench-pages-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

TOOLS_PER_SNAPSHOT = 15


def _tools(variant: int) -> list[dict]:
    tools = []
    for j in range(TOOLS_PER_SNAPSHOT + variant % 3):
        tools.append(
            {
                "name": f"tool_{j}",
                "description": f"Tool {j}, release variant {variant}. "
                + "Explains at length. " * (5 + j % 4),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "A path inside the root."},
                        "limit": {"type": "integer"},
                    },
                    "required": ["path"],
                },
            }
        )
    return tools


FINDINGS = [
    {
        "kind": "near_duplicate_tools",
        "severity": "warning",
        "tools": ["tool_1", "tool_2", "tool_3"],
        "title": "tool_1, tool_2 and tool_3 could be one tool",
        "detail": "They share the stem 'tool' and the parameters path, limit.",
        "estimated_savings_tokens": 420,
    },
    {
        "kind": "bulk_without_reference",
        "severity": "warning",
        "tools": ["tool_4"],
        "title": "tool_4 takes bulk content with no reference alternative",
        "detail": "Accept a path or URL next to the content.",
        "estimated_savings_tokens": None,
    },
]


def seed(team, servers: int, snapshots: int, owner) -> None:
    from dashboard.alerts.models import Alert
    from dashboard.servers.models import (
        McpServer,
        PollRun,
        Snapshot,
        SnapshotTool,
        Stack,
        ToolsDocument,
        Transport,
    )

    documents = []
    for variant in range(10):
        tools = _tools(variant)
        sha = hashlib.sha256(json.dumps(tools).encode()).hexdigest()
        documents.append(ToolsDocument.store(sha, tools))
    start = timezone.now() - timedelta(hours=snapshots * 6)
    created = []
    for n in range(servers):
        server = McpServer.objects.create(
            team=team,
            name=f"{team.slug}-server-{n:03d}",
            transport=Transport.HTTP,
            url="http://127.0.0.1:9/mcp",
        )
        created.append(server)
        rows = []
        for k in range(snapshots):
            variant = (k // 25) % 10
            doc = documents[variant]
            tax = 2000 + 40 * (k // 25) + (n * 7) % 300
            when = start + timedelta(hours=6 * k)
            rows.append(
                Snapshot(
                    server=server,
                    document=doc,
                    sha256=doc.sha256,
                    first_seen=when,
                    last_seen=when + timedelta(hours=5),
                    server_version=f"1.{k // 25}.0",
                    is_release=k % 25 == 0,
                    tool_count=len(doc.raw),
                    fixed_tax_tokens=tax,
                    overhead_tokens=-1 if k % 2 else 2,
                    instructions_tokens=40,
                    findings=FINDINGS,
                    budget_checks={
                        "fixed_tax_tokens": {
                            "limit": 2600,
                            "level": "error",
                            "value": tax,
                            "breached": tax > 2600,
                        }
                    },
                )
            )
        snaps = Snapshot.objects.bulk_create(rows)
        for prev, snap in zip(snaps, snaps[1:], strict=False):
            snap.previous = prev
        Snapshot.objects.bulk_update(snaps[1:], ["previous"], batch_size=500)
        SnapshotTool.objects.bulk_create(
            [
                SnapshotTool(
                    snapshot=snap,
                    position=j,
                    name=tool["name"],
                    tokens=120 + j,
                    description_tokens=70 + j,
                    schema_tokens=40,
                    sha256=hashlib.sha256(f"{snap.sha256}{j}".encode()).hexdigest(),
                )
                for snap in snaps
                for j, tool in enumerate(snap.document.raw)
            ],
            batch_size=2000,
        )
        PollRun.objects.bulk_create(
            [
                PollRun(
                    server=server,
                    started=snap.first_seen,
                    duration_ms=400,
                    outcome="ok" if k % 50 else "timeout",
                    message="" if k % 50 else "timed out after 60 s",
                    snapshot=snap,
                    changed=True,
                    trigger="schedule",
                )
                for k, snap in enumerate(snaps)
            ],
            batch_size=2000,
        )
        Alert.objects.bulk_create(
            [
                Alert(
                    team=team,
                    rule_key=f"server:{server.pk}:fixed_tax_tokens:{i}",
                    measure="fixed_tax_tokens",
                    level="error",
                    server=server,
                    subject_label=server.name,
                    snapshot=snaps[-1 - (i * 40) % len(snaps)],
                    value=3000,
                    limit=2600,
                    message=f"{server.name} above budget",
                    state="resolved",
                    opened_at=snaps[-1 - (i * 40) % len(snaps)].first_seen,
                )
                for i in range(3)
            ]
        )
        McpServer.objects.filter(pk=server.pk).update(
            current_snapshot=snaps[-1], last_poll_at=snaps[-1].last_seen, last_outcome="ok", owner=owner
        )
    Stack.objects.create(team=team, name="everything").servers.set(created)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--snapshots", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument(
        "--browser",
        action="store_true",
        help="instead: every page's time to DOMContentLoaded in Chromium, warm, on the demo data",
    )
    parser.add_argument("--target-ms", type=float, default=300.0, help="with --browser: the per-page target")
    args = parser.parse_args()
    if args.browser:
        return browser_main(args)

    setup_test_environment(debug=False)
    vendor = connection.vendor
    if vendor == "sqlite":
        # A file, not the in-memory default: the embedded run uses a file too.
        test_file = Path(settings.VAR_DIR) / "bench-pages.sqlite3"
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = str(test_file)
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        from dashboard.teams.models import Membership, Team

        user = get_user_model().objects.create_user("bench", password="bench-password-123")
        small = Team.objects.create(name="Ten")
        large = Team.objects.create(name=f"Large {args.servers}")
        for team in (small, large):
            Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
        t0 = time.monotonic()
        seed(small, 10, args.snapshots, user)
        seed(large, args.servers, args.snapshots, user)
        seed_seconds = time.monotonic() - t0

        client = Client(HTTP_HOST="localhost")
        client.force_login(user)

        def pages_for(team) -> list[tuple[str, str, dict]]:
            server = team.servers.order_by("name").first()
            current = server.current_snapshot
            first_release = server.snapshots.order_by("first_seen").first()
            ov = reverse("team_overview", args=[team.slug])
            detail = reverse("server_detail", args=[team.slug, server.code])
            diff = reverse("snapshot_diff", args=[team.slug, server.code])
            htmx = {"HTTP_HX_REQUEST": "true"}
            return [
                ("overview", ov, {}),
                ("overview sorted by name (htmx region)", ov + "?sort=name", htmx),
                ("overview filtered over budget", ov + "?status=over_budget", {}),
                ("server page", detail, {}),
                (
                    "server chart by release (htmx)",
                    detail + "?axis=release",
                    {**htmx, "HTTP_HX_TARGET": "chart-region"},
                ),
                (
                    "server tools sorted (htmx)",
                    detail + "?tsort=name",
                    {**htmx, "HTTP_HX_TARGET": "tools-region"},
                ),
                ("release diff (previous)", diff, {}),
                ("release diff (first vs current)", diff + f"?a={first_release.pk}&b={current.pk}", {}),
                ("stacks", reverse("stacks", args=[team.slug]), {}),
            ]

        def measure(url: str, extra: dict) -> tuple[int, int]:
            # Counted warm, as a page is served most of the time: figures of an unchanged snapshot
            # are remembered per process (tests/dashboard/servers/test_selectors.py counts cold).
            client.get(url, **extra)
            with CaptureQueriesContext(connection) as queries:
                response = client.get(url, **extra)
            if response.status_code != 200:
                raise SystemExit(f"{url}: HTTP {response.status_code}")
            if os.environ.get("BENCH_SHOW_QUERIES"):
                print(url, *[q["sql"][:160] for q in queries.captured_queries], sep="\n  ")
            return len(queries), len(response.content)

        results = []
        for (label, url, extra), (_, small_url, small_extra) in zip(
            pages_for(large), pages_for(small), strict=True
        ):
            measure(url, extra)  # warm caches (templates, plans)
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                client.get(url, **extra)
                times.append((time.perf_counter() - start) * 1000)
            queries_large, size = measure(url, extra)
            queries_small, _ = measure(small_url, small_extra)
            results.append(
                {
                    "page": label,
                    "p50_ms": statistics.median(times),
                    "p95_ms": percentile(times, 0.95),
                    "queries_10": queries_small,
                    f"queries_{args.servers}": queries_large,
                    "kb": size / 1024,
                }
            )

        print(
            f"\n{vendor}: {args.servers} servers x {args.snapshots} snapshots "
            f"(+10 x {args.snapshots}), ~{TOOLS_PER_SNAPSHOT} tools per snapshot; seeded in {seed_seconds:.0f} s; "
            f"{args.repeat} requests per page\n"
        )
        header = f"{'page':44} {'p50 ms':>8} {'p95 ms':>8} {'queries@10':>11} {f'queries@{args.servers}':>11} {'KB':>7}"
        print(header)
        print("-" * len(header))
        grew = False
        for r in results:
            q_large = r[f"queries_{args.servers}"]
            grew |= q_large != r["queries_10"]
            print(
                f"{r['page']:44} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['queries_10']:11d} {q_large:11d} {r['kb']:7.0f}"
            )
        if args.json:
            print(json.dumps({"vendor": vendor, "results": results}, indent=2))
        if grew:
            print("\nFAIL: a page's query count grew with the number of servers")
            return 1
        return 0
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


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
