#!/usr/bin/env bash
# Runs the suite on SQLite, then on PostgreSQL. Starts embedded PostgreSQL unless DATABASE_URL
# points at one already, and stops what it started. Usage: tests/run.sh [sqlite|postgres]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
WHICH="${1:-all}"
PYTEST=("$BIN/pytest" -n 2 -q)
status=0

"$BIN/ruff" check .

# Browser tests drive Debian's Chromium (never a downloaded browser); CI runs as root.
if [[ ! -x /usr/bin/chromium ]]; then
  echo "== installing chromium for the browser tests =="
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "could not install chromium: the browser tests under tests/ui will fail" >&2
fi

"$BIN/python" manage.py makemigrations --check --dry-run --settings=config.settings.test >/dev/null

if [[ "$WHICH" == all || "$WHICH" == sqlite ]]; then
  echo "== SQLite =="
  env -u DATABASE_URL "${PYTEST[@]}" || status=$?
fi

if [[ "$WHICH" == all || "$WHICH" == postgres ]]; then
  echo "== PostgreSQL =="
  started=""
  if [[ -z "${TEST_DATABASE_URL:-}" ]]; then
    datadir="$(mktemp -d /tmp/kb-pg.XXXXXX)"
    TEST_DATABASE_URL="$("$BIN/python" tests/embedded_pg.py start "$datadir")"
    started="$datadir"
    trap '"$BIN/python" tests/embedded_pg.py stop "$started"; rm -rf "$started"' EXIT
  fi
  DATABASE_URL="$TEST_DATABASE_URL" "${PYTEST[@]}" || status=$?
fi
exit "$status"
