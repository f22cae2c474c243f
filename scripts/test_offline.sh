#!/usr/bin/env bash
# Runs a command with the network cut: in a network namespace of its own (`unshare -n`) where only
# loopback exists, so a test that still reaches a registry or any other host fails. scripts/test.sh
# runs leg 1 this way when CI=true. Needs root (or CAP_SYS_ADMIN) for the namespace: without it
# this fails with CI=true, and runs the command with the network as it is otherwise.
#   bash scripts/test_offline.sh COMMAND [ARG ...]
# With no command: leg 1 of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  set -- env -u DATABASE_URL -u REDIS_URL VAR_DIR="$PWD/var/test-offline" \
    .venv/bin/python -m pytest -m "not services" -p no:cacheprovider
fi
if ! unshare -n true 2>/dev/null; then
  echo "== offline: cannot create a network namespace here (needs root and unshare)"
  [ "${CI:-false}" = "true" ] && exit 1
  exec "$@"
fi
exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' offline "$@"
