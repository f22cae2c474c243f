#!/usr/bin/env bash
# Offline after set-up: part of leg 1 run again in a network namespace of its own (`unshare -n`),
# where only loopback exists, so a test that still reaches a registry or any other host fails here.
# The part: the tests that used to download (the accessibility test's axe-core, mitmproxy for the
# HAR test, the live corpus servers) and the corpus of captured servers; arguments, when given,
# name other tests instead. Needs root (or CAP_SYS_ADMIN) for the namespace: without it the step
# fails with CI=true and is skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OFFLINE_TESTS=(
  tests/corpus
  tests/ingest/capture/test_e2e.py
  tests/config/test_browser_screens.py
)
if [ "$#" -gt 0 ]; then
  OFFLINE_TESTS=("$@")
fi
if ! unshare -n true 2>/dev/null; then
  echo "== offline step: cannot create a network namespace here (needs root and unshare)"
  [ "${CI:-false}" = "true" ] && exit 1
  exit 0
fi
echo "== offline step: leg 1, part of the suite, with the network cut (unshare -n, loopback only)"
exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' offline \
  env -u DATABASE_URL -u REDIS_URL VAR_DIR="$PWD/var/test-offline" \
  $BIN/python -m pytest -m "not services" -p no:cacheprovider "${OFFLINE_TESTS[@]}"
