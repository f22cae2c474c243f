"""Where the time of one CI-gate request goes, for a large candidate tools/list.

Builds a candidate of `--tools` tools (default 12,000) from the real-server captures in
tests/data/servers/ (each copy renamed, so names stay unique), then times, in this process:
parsing the JSON body, the exact token accounting, and the findings (with their own accounting
reused), each alone; then one `POST /api/v1/check` through Django's test Client on a throwaway
test database, under the settings in force (GATE_MAX_BYTES, GATE_MAX_TOOLS,
GATE_TIME_BUDGET_SECONDS) and, with `--no-limits`, with those lifted. Prints figures, never a
verdict on them: this is not a timed test.

    .venv/bin/python scripts/bench_gate.py                   # 12,000 tools
    .venv/bin/python scripts/bench_gate.py --tools 2000      # about the GATE_MAX_TOOLS default
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="bench-gate-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings, setup_test_environment  # noqa: E402

from mcptax import findings, tokens  # noqa: E402


def candidate(count: int) -> list[dict]:
    pool: list[dict] = []
    for capture in sorted((ROOT / "tests" / "data" / "servers").glob("*.json")):
        pool.extend(json.loads(capture.read_text())["tools"])
    return [{**pool[i % len(pool)], "name": f"{pool[i % len(pool)]['name']}_{i}"} for i in range(count)]


def timed(label: str, fn, results: dict):
    start = time.perf_counter()
    value = fn()
    results[label] = round(time.perf_counter() - start, 3)
    print(f"{label:<44} {results[label]:>9.3f} s", flush=True)
    return value


def post(client: Client, token: str, body: bytes, results: dict, label: str) -> None:
    response = timed(
        label,
        lambda: client.post(
            "/api/v1/check", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        ),
        results,
    )
    answer = response.json()
    summary = answer.get("detail") or f"status {answer['status']} {answer['errors']}"
    print(f"    HTTP {response.status_code}: {str(summary)[:160]}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tools", type=int, default=12_000)
    parser.add_argument(
        "--no-limits", action="store_true", help="also post once with the gate's limits lifted"
    )
    parser.add_argument("--skip-phases", action="store_true", help="only the HTTP requests")
    args = parser.parse_args()

    tools = candidate(args.tools)
    body = json.dumps({"server": "big", "tools_list": {"tools": tools}}).encode()
    results: dict[str, float] = {}
    print(f"{args.tools:,} tools, body {len(body):,} bytes")
    if not args.skip_phases:
        doc = timed("parse the JSON body", lambda: json.loads(body), results)
        raw, _, _ = tokens.load_tools_document(doc["tools_list"])
        report = timed("token accounting (tokens.account)", lambda: tokens.account(raw), results)
        timed("findings (report reused)", lambda: findings.analyze(raw, report=report), results)

    setup_test_environment(debug=False)
    if connection.vendor == "sqlite":
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = str(
            Path(settings.VAR_DIR) / "bench.db"
        )
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        from dashboard.servers.models import McpServer, Transport
        from dashboard.teams.models import ApiToken, Team

        team = Team.objects.create(name="Bench")
        McpServer.objects.create(
            team=team, name="big", transport=Transport.HTTP, url="http://127.0.0.1:9/mcp"
        )
        _, token = ApiToken.issue(team, "bench")
        client = Client(HTTP_HOST="localhost")
        client.get("/api/v1/team", HTTP_AUTHORIZATION=f"Bearer {token}")  # warm up: imports, URLconf
        post(client, token, body, results, "POST /api/v1/check (settings in force)")
        if args.no_limits:
            lifted = {
                "GATE_MAX_BYTES": 1 << 40,
                "GATE_MAX_TOOLS": 1 << 40,
                "GATE_TIME_BUDGET_SECONDS": 3600.0,
                "DATA_UPLOAD_MAX_MEMORY_SIZE": None,
            }
            with override_settings(**lifted):
                post(client, token, body, results, "POST /api/v1/check (limits lifted)")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
