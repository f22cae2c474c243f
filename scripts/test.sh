#!/usr/bin/env bash
# The whole test suite. Leg 1: SQLite + embedded broker (what `make run` uses). Leg 2: the real
# PostgreSQL and Redis with a real Celery worker process. Leg 2 runs when CI=true (and then a
# missing service is a failure) or when both services answer on their default ports.
#
# The two legs run side by side (each in its own VAR_DIR, database and broker); leg 2's output
# is kept in var/test-logs/leg2.log and printed when leg 1 ends. With CI=true leg 1 runs with the
# network cut (scripts/test_offline.sh: its own network namespace, loopback only), which proves
# that nothing in the suite reaches a registry or any other host after set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/mcptax}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
CI="${CI:-false}"
LOGS="$PWD/var/test-logs"
mkdir -p "$LOGS"
started=$SECONDS
phase() { echo "== [$(( (SECONDS - started) / 60 ))m$(( (SECONDS - started) % 60 ))s] $*"; }

# Browser tests drive Debian's Chromium; install it only when missing (needs root, as in CI).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    phase "installing Debian's chromium for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    phase "chromium not found and not root: browser tests will skip (they fail when CI=true)"
  fi
fi

# Everything the suite needs from a registry (axe-core, mitmproxy's virtualenv, the live corpus
# servers) is installed here, once, cached under var/: the tests never reach the network.
phase "set-up: registry downloads cached under var/ (scripts/test_setup.py)"
$BIN/python scripts/test_setup.py

phase "lint: ruff, djade (templates), mypy (django-stubs; strict on mcptax/)"
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/djade --target-version 5.2 --check $(find templates -name '*.html')
$BIN/mypy

services_up() {
  $BIN/python - "$PG_URL" "$REDIS" <<'PY'
import sys, psycopg, redis
try:
    dsn = sys.argv[1].rsplit("/", 1)[0] + "/postgres"
    psycopg.connect(dsn, connect_timeout=3).close()
    redis.Redis.from_url(sys.argv[2], socket_connect_timeout=3).ping()
except Exception as exc:
    print(f"services unavailable: {exc}", file=sys.stderr)
    sys.exit(1)
PY
}

# Leg 2, then the benchmarks at a tiny size (so none can rot; their targets are judged in full
# runs), in the background while leg 1 runs.
services_part() {
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="$PWD/var/test-pg" \
    $BIN/python -m pytest -m "not browser" --services-leg "$@" > "$LOGS/leg2.log" 2>&1 \
    || echo "leg2" >> "$LOGS/failed"
  BENCH_POSTGRES_URL="${PG_URL%/*}/mcptax_bench_smoke" BENCH_REDIS_URL="${REDIS%/*}/11" \
    bash scripts/bench_smoke.sh > "$LOGS/bench-smoke.log" 2>&1 || echo "bench-smoke" >> "$LOGS/failed"
}

rm -f "$LOGS/failed"
services_pid=""
if [ "$CI" = "true" ] || services_up; then
  phase "leg 2: PostgreSQL ($PG_URL) + Redis ($REDIS) + real Celery worker, then make bench-smoke (in the background: var/test-logs/)"
  services_part "$@" &
  services_pid=$!
else
  phase "leg 2 and bench-smoke skipped: PostgreSQL/Redis not reachable (set CI=true to make this a failure)"
fi

status=0
# Leg 1 on TEST_WORKERS processes (pytest-xdist; 0 runs it in this one): many of its tests wait on
# servers, workers and browsers they start, so two share the machine's cores with leg 2.
leg1=(env -u DATABASE_URL -u REDIS_URL VAR_DIR="$PWD/var/test-sqlite"
      $BIN/python -m pytest -m "not services" -n "${TEST_WORKERS:-2}" --dist worksteal "$@")
if [ "$CI" = "true" ]; then
  phase "leg 1: SQLite + embedded broker, with the network cut (scripts/test_offline.sh)"
  bash scripts/test_offline.sh "${leg1[@]}" || status=$?
else
  phase "leg 1: SQLite + embedded broker"
  "${leg1[@]}" || status=$?
fi

if [ -n "$services_pid" ]; then
  phase "leg 1 done; waiting for leg 2 and bench-smoke"
  wait "$services_pid" || true
  phase "leg 2: PostgreSQL + Redis + real Celery worker (var/test-logs/leg2.log)"
  cat "$LOGS/leg2.log"
  phase "benchmarks at a tiny size (var/test-logs/bench-smoke.log)"
  cat "$LOGS/bench-smoke.log"
  [ -f "$LOGS/failed" ] && { phase "failed: $(tr '\n' ' ' < "$LOGS/failed")"; status=1; }
fi
phase "done (exit $status)"
exit $status
