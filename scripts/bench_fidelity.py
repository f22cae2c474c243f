"""Time the fidelity pages and the team overview on 1,000,000 captured calls, and count their queries.

Seeds (once; `--reseed` to start over) a team with 20 agents (5 families x 4 versions) whose
1,000,000 ToolCalls are spread over the last 90 days, ~30 % of them with a BulkArgument (verdicts
in realistic proportions, sizes from 200 B to 300 KB), ~10 % reference calls and the rest plain
calls, written with PostgreSQL COPY. The FidelityDaily rollups are then built from those tables by
one INSERT ... SELECT ... GROUP BY that applies the engine's rules (ingest.fidelity.rollups: a call counts
once, on its bulk argument's row, else as by_reference / no_bulk; size buckets; billed tokens =
pasted tokens when no output tokens are known; money from the team's price book).

Then each page is requested `--repeat` times (default 25) through Django's test Client, logged
in, and p50/p95 and the SQL query count are printed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_fbench .venv/bin/python scripts/bench_fidelity.py
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import random
import re
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mcptax_fbench")
os.environ.setdefault("VAR_DIR", "/tmp/bench-fidelity-var")

import django  # noqa: E402

TEAM_SLUG = "fbench"
USER = "fbench"
PASSWORD = "fbench-pw-123"
FAMILIES = ["claude-code", "codex", "gemini-cli", "cursor", "goose"]
VERSIONS = ["1.0.0", "1.1.0", "1.2.0", "2.0.0"]
TOOLS = {"files": ["write", "read", "search", "list_dir"], "docs": ["publish", "fetch"]}
BULK_TOOLS = [("files", "write"), ("docs", "publish")]
VERDICT_WEIGHTS = [
    ("exact", 85),
    ("newline_only", 5),
    ("line_endings", 2),
    ("truncated", 2),
    ("elements_dropped", 1),
    ("mutated", 1),
    ("unverifiable", 4),
]


def _ensure_database() -> None:
    """Create the benchmark database when it does not exist yet (never touches another one)."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://.../mcptax_fbench")
    dsn = f"host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432} user={db['USER']} dbname=postgres"
    if db.get("PASSWORD"):
        dsn += f" password={db['PASSWORD']}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{db["NAME"]}"')
            print(f"created database {db['NAME']}")


def _copy(cursor, table: str, columns: list[str], rows) -> None:
    """COPY rows (tuples; None = NULL) into table, streamed in 64 MB chunks of text format."""
    sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    with cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def defaults_for(model, given: list[str]) -> tuple[list[str], tuple]:
    """The columns COPY must fill that `given` leaves out: every NOT NULL field with a default
    (Django's defaults live in Python, not in the table), with its default value as COPY takes it.
    Computed from the model, so a field added later cannot break the seeding again."""
    import json

    columns: list[str] = []
    values: list[object] = []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.null or field.column in given or not field.has_default():
            continue
        value = field.get_default()
        columns.append(field.column)
        values.append(json.dumps(value) if isinstance(value, list | dict) else value)
    return columns, tuple(values)


def seed(calls: int, seed_value: int) -> None:
    from django.contrib.auth import get_user_model

    from dashboard.teams.models import Membership, Team

    User = get_user_model()
    Team.objects.filter(slug=TEAM_SLUG).delete()
    user, _ = User.objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    team = Team.objects.create(name="Fidelity bench", slug=TEAM_SLUG)
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    seed_calls(team, calls, seed_value)


def seed_calls(
    team,
    calls: int,
    seed_value: int,
    tools: dict[str, list[str]] | None = None,
    bulk_tools: list[tuple[str, str]] | None = None,
) -> None:
    """20 agents and `calls` ToolCalls (with their bulk arguments) of `team`, written with COPY, and
    their FidelityDaily rollups. `tools` maps a server label to its tool names (the first is a bulk
    tool, called only with a bulk argument or a reference); `bulk_tools` names the (label, tool)
    pairs that take bulk arguments. Also used by bench_pages.py, on its own team and servers."""
    from django.db import connection, transaction

    from ingest.capture.models import Agent, BulkArgument, ToolCall
    from ingest.fidelity.models import FidelityDaily

    tools = tools or TOOLS
    bulk_tools = bulk_tools or BULK_TOOLS
    rng = random.Random(seed_value)
    now = datetime.now(UTC)
    agents = []
    for family in FAMILIES:
        for index, version in enumerate(VERSIONS):
            agents.append(
                Agent.objects.create(
                    team=team,
                    family=family,
                    name=family,
                    version=version,
                    first_seen=now - timedelta(days=90 - 20 * index),
                    last_seen=now - timedelta(hours=index),
                )
            )
    verdicts = [v for v, w in VERDICT_WEIGHTS for _ in range(w)]
    start_ts = now - timedelta(days=90)
    span = 90 * 86400
    with connection.cursor() as c:
        c.execute("SELECT nextval(pg_get_serial_sequence('ingest_toolcall', 'id'))")
        first_call_id = c.fetchone()[0] + 1
        c.execute("SELECT nextval(pg_get_serial_sequence('ingest_bulkargument', 'id'))")
        first_arg_id = c.fetchone()[0] + 1

    call_columns = [
        "id", "team_id", "dedupe_key", "source_format", "agent_id", "server_label", "tool", "jsonrpc_id",
        "client_call_id", "claudecode_tool_use_id", "counts_in_rollups", "request_ts", "argument_bytes",
        "argument_sha256", "is_reference_call", "reference_key", "reference_value", "bulk_count",
        "server_reported_sha256", "capture_truncated", "ingest_notes", "redacted", "unanswered",
        "in_rollups", "created", "is_error",
    ]  # fmt: skip
    arg_columns = [
        "id", "call_id", "team_id", "pointer", "kind", "bytes", "lines", "sha256", "tokens",
        "ends_with_newline", "crlf_count", "capture_truncated", "verdict", "expected_sha256",
        "expected_source", "evidence", "verdict_at",
    ]  # fmt: skip
    call_extra, call_defaults = defaults_for(ToolCall, call_columns)
    arg_extra, arg_defaults = defaults_for(BulkArgument, arg_columns)
    call_columns += call_extra
    arg_columns += arg_extra
    args: list[tuple] = []
    fake_sha = hashlib.sha256(b"bench").hexdigest()

    def call_rows():
        arg_id = first_arg_id
        for n in range(calls):
            call_id = first_call_id + n
            agent = agents[n % len(agents)]
            # Newer versions appear later: map the agent's version index onto the last part of the span.
            lower = 20 * VERSIONS.index(agent.version) * 86400
            ts = start_ts + timedelta(seconds=lower + rng.random() * (span - lower))
            roll = rng.random()
            kind = "bulk" if roll < 0.30 else ("ref" if roll < 0.40 else "plain")
            if kind == "plain":
                label = rng.choice(list(tools))
                tool = rng.choice(tools[label][1:])
            else:
                label, tool = rng.choice(bulk_tools)
            size = int(min(300_000, max(200, rng.lognormvariate(8.5, 1.2))))
            if kind == "bulk":
                verdict = rng.choice(verdicts)
                args.append(
                    (
                        arg_id,
                        call_id,
                        team.pk,
                        "/content",
                        "string",
                        size,
                        size // 60,
                        fake_sha,
                        size // 4,
                        True,
                        0,
                        False,
                        verdict,
                        "" if verdict == "unverifiable" else fake_sha,
                        "" if verdict == "unverifiable" else "caller",
                        '{"first_diff_offset": 10}',
                        ts,
                    )  # fmt: skip
                    + arg_defaults
                )
                arg_id += 1
            yield (
                call_id, team.pk, f"b{call_id}", "envelope", agent.pk, label, tool, str(n), "", "", True, ts,
                size if kind == "bulk" else 80, fake_sha, kind == "ref", "path" if kind == "ref" else "",
                "docs/runbook.md" if kind == "ref" else "", 1 if kind == "bulk" else 0, "", False, "[]",
                False, False, True, ts, rng.random() < 0.02,
            ) + call_defaults  # fmt: skip

    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as c:
        raw = c.cursor if hasattr(c, "cursor") else c
        _copy(raw, "ingest_toolcall", call_columns, call_rows())
        print(f"COPY {calls:,} calls: {time.perf_counter() - started:.1f} s")
        t = time.perf_counter()
        _copy(raw, "ingest_bulkargument", arg_columns, iter(args))
        print(f"COPY {len(args):,} bulk arguments: {time.perf_counter() - t:.1f} s")
        c.execute(
            "SELECT setval(pg_get_serial_sequence('ingest_toolcall', 'id'), %s)", [first_call_id + calls]
        )
        c.execute(
            "SELECT setval(pg_get_serial_sequence('ingest_bulkargument', 'id'), %s)",
            [first_arg_id + len(args)],
        )
    t = time.perf_counter()
    build_rollups(team)
    print(
        f"rollups: {FidelityDaily.objects.filter(team=team).count():,} rows in {time.perf_counter() - t:.1f} s"
    )
    with connection.cursor() as c:
        c.execute("ANALYZE ingest_toolcall; ANALYZE ingest_bulkargument; ANALYZE ingest_fidelitydaily;")
    assert ToolCall.objects.filter(team=team).count() == calls
    assert BulkArgument.objects.filter(team=team).count() == len(args)


def build_rollups(team) -> None:
    """The engine's rollup rules as one bulk INSERT ... SELECT (ingest.fidelity.rollups.contributions)."""
    from django.db import connection

    from ingest.capture.models import Agent
    from ingest.fidelity.costs import MILLION, PriceBook
    from ingest.fidelity.models import FidelityDaily

    book = PriceBook(team)
    rates = {a.pk: book.output_rate(a.family) for a in Agent.objects.filter(team=team)}
    rate_sql = " ".join(f"WHEN {pk} THEN {rate * MILLION}" for pk, rate in rates.items())
    reference_tokens = (
        21  # what '"path":"docs/runbook.md"' style references cost, as in ingest.fidelity.costs
    )
    sql = f"""
        INSERT INTO ingest_fidelitydaily (team_id, day, agent_id, server_label, tool, verdict, size_bucket,
            calls, arguments, bytes, pasted_tokens, output_tokens, billed_tokens, reference_tokens, cost_usd,
            reference_cost_usd, server_errors)
        SELECT c.team_id, (c.request_ts AT TIME ZONE 'UTC')::date, c.agent_id, c.server_label, c.tool,
            COALESCE(NULLIF(b.verdict, ''), CASE WHEN b.id IS NOT NULL THEN 'pending'
                     WHEN c.is_reference_call THEN 'by_reference' ELSE 'no_bulk' END),
            CASE WHEN b.id IS NULL THEN '' WHEN b.bytes < 1024 THEN 'lt1k' WHEN b.bytes < 10240 THEN '1-10k'
                 WHEN b.bytes < 51200 THEN '10-50k' WHEN b.bytes < 102400 THEN '50-100k' ELSE 'gt100k' END,
            COUNT(*), COUNT(b.id), COALESCE(SUM(b.bytes), 0), COALESCE(SUM(b.tokens), 0), 0,
            COALESCE(SUM(b.tokens), 0), {reference_tokens} * COUNT(b.id),
            COALESCE(SUM(b.tokens), 0) * (CASE c.agent_id {rate_sql} ELSE 0 END) / 1000000.0,
            {reference_tokens} * COUNT(b.id) * (CASE c.agent_id {rate_sql} ELSE 0 END) / 1000000.0,
            SUM(CASE WHEN c.is_error THEN 1 ELSE 0 END)
        FROM ingest_toolcall c LEFT JOIN ingest_bulkargument b ON b.call_id = c.id
        WHERE c.team_id = %s AND c.counts_in_rollups
        GROUP BY 1, 2, 3, 4, 5, 6, 7
    """
    # Rollup columns this query does not compute (added to the model later) take their defaults.
    given = re.search(r"INSERT INTO ingest_fidelitydaily \(([^)]*)\)", sql)
    extra, values = defaults_for(FidelityDaily, [c.strip() for c in given.group(1).split(",")])
    if extra:
        sql = sql.replace("server_errors)", "server_errors, " + ", ".join(extra) + ")", 1)
        sql = sql.replace(
            "SUM(CASE WHEN c.is_error THEN 1 ELSE 0 END)\n",
            "SUM(CASE WHEN c.is_error THEN 1 ELSE 0 END), " + ", ".join(["%s"] * len(extra)) + "\n",
            1,
        )
    with connection.cursor() as c:
        c.execute("DELETE FROM ingest_fidelitydaily WHERE team_id = %s", [team.pk])
        c.execute(sql, [*values, team.pk])


def measure(client, url: str, repeat: int, htmx_target: str | None = None) -> tuple[float, float, int, int]:
    from django.db import connection

    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": htmx_target} if htmx_target else {}
    executed: list[str] = []

    def count(execute, sql, params, many, context):
        executed.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        response = client.get(url, **headers)
    assert response.status_code == 200, (url, response.status_code)
    # Sessions and the logged-in user are part of every page; counted like any other query.
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url, **headers)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    times.sort()
    p95 = times[max(0, int(round(0.95 * len(times))) - 1)]
    return statistics.median(times), p95, len(executed), len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--reseed", action="store_true", help="drop the bench team and seed again")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--smoke", action="store_true", help="2,000 calls, 2 requests a page: proves the script works"
    )
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.repeat = 2_000, 2

    django.setup()
    _ensure_database()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from dashboard.teams.models import Team
    from ingest.capture.models import ToolCall
    from ingest.fidelity.models import FidelityDaily

    call_command("migrate", verbosity=0)
    team = Team.objects.filter(slug=TEAM_SLUG).first()
    if options.reseed or team is None or ToolCall.objects.filter(team=team).count() != options.calls:
        seed(options.calls, options.seed)
        team = Team.objects.get(slug=TEAM_SLUG)
    else:
        print("reusing the seeded team (pass --reseed to start over)")
    calls = ToolCall.objects.filter(team=team).count()
    rollup_rows = FidelityDaily.objects.filter(team=team).count()
    print(
        f"team {team.slug}: {calls:,} calls, {rollup_rows:,} rollup rows, database {settings.DATABASES['default']['NAME']}"
    )

    setup_test_environment()
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.DEBUG = False
    client = Client()
    # django-axes' backend needs a request to authenticate; the page timings do not include login.
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username=USER))
    call = ToolCall.objects.filter(team=team, bulk_count=1).order_by("-request_ts").first()
    family = FAMILIES[0]
    pages = [
        ("team overview (schema + fidelity panel)", reverse("team_overview", args=[team.slug]), None),
        ("agents list, 30 days", reverse("fidelity_agents", args=[team.slug]), None),
        ("agents list, 90 days", reverse("fidelity_agents", args=[team.slug]) + "?days=90", None),
        ("agent page, 30 days", reverse("fidelity_agent", args=[team.slug, family]), None),
        ("agent page, 90 days", reverse("fidelity_agent", args=[team.slug, family]) + "?days=90", None),
        (
            "agent call list, verdict=truncated (htmx)",
            reverse("fidelity_agent", args=[team.slug, family]) + "?verdict=truncated",
            "calls-region",
        ),
        (
            "agent call list, verdict=exact (htmx)",
            reverse("fidelity_agent", args=[team.slug, family]) + "?verdict=exact",
            "calls-region",
        ),
        (
            "agent call list, page 200 (htmx)",
            reverse("fidelity_agent", args=[team.slug, family]) + "?page=200",
            "calls-region",
        ),
        ("call drill-down", reverse("fidelity_call", args=[team.slug, call.pk]), None),
        ("GET /api/v1/fidelity (session-less: via reports)", None, None),
    ]
    print(f"\n{'page':48} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8} {'KB':>6}")
    for name, url, target in pages:
        if url is None:
            from ingest.fidelity.selectors import agents as reports

            times = []
            for _ in range(options.repeat):
                started = time.perf_counter()
                reports.api_summary(team, days=30)
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            p95 = times[max(0, int(round(0.95 * len(times))) - 1)]
            print(f"{name:48} {statistics.median(times):8.1f} {p95:8.1f} {'':>8} {'':>6}")
            continue
        p50, p95, queries, size = measure(client, url, options.repeat, target)
        print(f"{name:48} {p50:8.1f} {p95:8.1f} {queries:8d} {size / 1024:6.0f}")


if __name__ == "__main__":
    io.DEFAULT_BUFFER_SIZE = 1 << 20
    main()
