#!/usr/bin/env bash
# Every benchmark at a tiny size, so none can rot: each must run to its end and exit 0 (its
# targets are not judged at this size). The ones that need PostgreSQL (and Redis) use
# BENCH_POSTGRES_URL / BENCH_REDIS_URL; without them they are skipped, unless CI=true.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PG_URL="${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/mcptax_bench_smoke}"
REDIS="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/11}"
OUT="${VAR_DIR:-$PWD/var}/bench-smoke"
mkdir -p "$OUT"
export VAR_DIR="$OUT"
status=0

services_up() {
  $BIN/python - "$PG_URL" "$REDIS" <<'PY'
import sys, psycopg, redis
try:
    psycopg.connect(sys.argv[1].rsplit("/", 1)[0] + "/postgres", connect_timeout=3).close()
    redis.Redis.from_url(sys.argv[2], socket_connect_timeout=3).ping()
except Exception as exc:
    print(f"services unavailable: {exc}", file=sys.stderr)
    sys.exit(1)
PY
}

run() {  # run NAME ENV... -- ARGS...
  local name=$1; shift
  local started=$SECONDS
  if env "$@" > "$OUT/$name.log" 2>&1; then
    echo "ok    $name ($((SECONDS - started)) s)"
  else
    echo "FAIL  $name ($((SECONDS - started)) s): last lines of $OUT/$name.log"
    tail -n 25 "$OUT/$name.log" | sed 's/^/      /'
    status=1
  fi
}

SQLITE=(-u DATABASE_URL -u REDIS_URL)
run tokens "${SQLITE[@]}" $BIN/python scripts/bench_tokens.py --smoke
run gate "${SQLITE[@]}" $BIN/python scripts/bench_gate.py --tools 50
run proxy "${SQLITE[@]}" $BIN/python scripts/bench_proxy.py --calls 100 --request-mb 1
run measure "${SQLITE[@]}" $BIN/python scripts/bench_measure.py --smoke
if services_up; then
  PG=(DATABASE_URL="$PG_URL" REDIS_URL="$REDIS")
  run poll "${PG[@]}" $BIN/python scripts/bench_poll.py --smoke
  run fidelity "${PG[@]}" $BIN/python scripts/bench_fidelity.py --smoke --reseed
  run ingest "${PG[@]}" $BIN/python scripts/bench_ingest.py --smoke
  run pages "${PG[@]}" $BIN/python scripts/bench_pages.py --smoke --reseed
  # The same tiny teams in Chromium, served by gunicorn as the full stack serves them.
  run pages-browser "${PG[@]}" $BIN/python scripts/bench_pages.py --browser --at-scale --smoke --repeat 1
elif [ "${CI:-false}" = "true" ]; then
  echo "FAIL  poll, fidelity, ingest, pages: CI=true and PostgreSQL/Redis are not reachable"
  status=1
else
  echo "skip  poll, fidelity, ingest, pages: PostgreSQL/Redis not reachable"
fi
exit $status
