#!/usr/bin/env bash
# The whole test suite. Leg 1: SQLite + embedded broker (what `make run` uses). Leg 2: the real
# PostgreSQL and Redis with a real Celery worker process. Leg 2 runs when CI=true (and then a
# missing service is a failure) or when both services answer on their default ports.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/mcptax}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
CI="${CI:-false}"

# Browser tests drive Debian's Chromium; install it only when missing (needs root, as in CI).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Debian's chromium for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "== chromium not found and not root: browser tests will skip (they fail when CI=true)"
  fi
fi

# Everything the suite needs from a registry (axe-core, mitmproxy's virtualenv, the live corpus
# servers) is installed here, once, cached under var/: the tests never reach the network.
echo "== set-up: registry downloads cached under var/ (scripts/test_setup.py)"
$BIN/python scripts/test_setup.py

echo "== lint: ruff, djade (templates), mypy (django-stubs; strict on mcptax/)"
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

status=0
echo "== leg 1: SQLite + embedded broker"
env -u DATABASE_URL -u REDIS_URL VAR_DIR="$PWD/var/test-sqlite" \
  $BIN/python -m pytest -m "not services" "$@" || status=$?

if [ "$CI" = "true" ] || services_up; then
  echo "== leg 2: PostgreSQL ($PG_URL) + Redis ($REDIS) + real Celery worker"
  DATABASE_URL="$PG_URL" REDIS_URL="$REDIS" VAR_DIR="$PWD/var/test-pg" \
    $BIN/python -m pytest -m "not browser" --services-leg "$@" || status=$?
else
  echo "== leg 2 skipped: PostgreSQL/Redis not reachable (set CI=true to make this a failure)"
fi
# Offline after set-up: in CI, part of leg 1 again with the network cut (scripts/test_offline.sh).
if [ "$CI" = "true" ]; then
  bash scripts/test_offline.sh || status=$?
fi

# Every benchmark script at a tiny size, so none can rot (their targets are judged in full runs).
if [ "$CI" = "true" ] || services_up; then
  echo "== benchmarks at a tiny size (make bench-smoke)"
  BENCH_POSTGRES_URL="${PG_URL%/*}/mcptax_bench_smoke" BENCH_REDIS_URL="${REDIS%/*}/11" \
    bash scripts/bench_smoke.sh || status=$?
fi
exit $status
