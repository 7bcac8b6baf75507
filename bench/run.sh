#!/usr/bin/env bash
# `make bench`: for SQLite and then embedded PostgreSQL, migrate a fresh database, load the
# deterministic corpus, serve it with gunicorn on a free 127.0.0.1 port and measure the API.
# Prints one markdown table per backend and writes var/bench/core-<backend>.json; then the
# transfer benchmark (agor kb export / import) per backend, written to var/bench/transfer-<backend>.json,
# rendering times (var/bench/render.json) and the MCP bridge's start-up and tool-call latency
# (var/bench/mcp-<backend>.json).
# On PostgreSQL the semantic benchmark runs on the same corpus (var/bench/semantic-postgres.json).
# Usage: bench/run.sh [--quick] [sqlite|postgres ...]   (BENCH_KEEP_DB=1 keeps the SQLite file)
# Text search is measured on the same server right after the core operations (var/bench/search-<backend>.json).
# BENCH_PARTS picks what runs (default: "core search semantic transfer render mcp"; search needs core).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=var/bench
SCALE=full
SUFFIX=""
BACKENDS=()
for arg in "$@"; do
  case "$arg" in
    --quick) SCALE=quick; SUFFIX="-quick" ;;
    sqlite|postgres) BACKENDS+=("$arg") ;;
    *) echo "usage: bench/run.sh [--quick] [sqlite|postgres ...]" >&2; exit 2 ;;
  esac
done
[[ ${#BACKENDS[@]} -gt 0 ]] || BACKENDS=(sqlite postgres)
PARTS=" ${BENCH_PARTS:-core search semantic transfer render mcp} "
part() { [[ "$PARTS" == *" $1 "* ]]; }

export DJANGO_SETTINGS_MODULE=config.settings.local DEBUG=false LOG_LEVEL=WARNING
# In-process steps (corpus build, semantic bench) run Celery tasks eagerly.
export ALLOWED_HOSTS=127.0.0.1,localhost CELERY_TASK_ALWAYS_EAGER=true
unset KNOWLEDGE_PUBLIC_URL
# The Procfile's web process: sync workers, WEB_CONCURRENCY of them (2 by default). On this
# 2-core machine 2 workers x 4 threads (gthread) measured worse at 4 clients (get p95 28 ms
# against 18 ms, list 50 72 ms against 44 ms): threads of one process queue on its GIL.
WORKERS="${WEB_CONCURRENCY:-2}"
SERVER="gunicorn config.wsgi, $WORKERS sync workers (as the Procfile runs it), 127.0.0.1"
# PostgreSQL's API is measured as the Procfile runs it: after-commit upkeep (graph links, chunks)
# goes to a Celery worker over Redis. SQLite runs as the embedded default does, with that upkeep
# inside each save (eager); so does PostgreSQL when no Redis answers. The report says which.
REDIS_FOR_BENCH="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/12}"
BROKER="" SERVER_ENV=() SERVER_NOTE=""
choose_topology() {
  BROKER="" SERVER_ENV=(CELERY_TASK_ALWAYS_EAGER=true)
  SERVER_NOTE="Celery eager (after-commit upkeep inside each save)"
  [[ "$1" == postgres ]] || return 0
  if "$BIN/python" -c 'import redis, sys; redis.Redis.from_url(sys.argv[1]).ping()' "$REDIS_FOR_BENCH" 2>/dev/null; then
    BROKER="$REDIS_FOR_BENCH" SERVER_ENV=(CELERY_TASK_ALWAYS_EAGER=false "REDIS_URL=$REDIS_FOR_BENCH")
    SERVER_NOTE="one Celery worker (solo pool) on Redis for after-commit upkeep"
  else
    echo "warning: no Redis at $REDIS_FOR_BENCH; saves run their after-commit upkeep in-request (eager)" >&2
  fi
}

mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/kb-bench.XXXXXX)"
SQLITE_DB="$PWD/$OUT/bench.sqlite3"
GUNICORN_PID=""
WORKER_PID=""
CHILD_PID=""
PG_DIR=""

# Long steps run in the background and are waited for, so that a signal reaches the traps at once.
run_child() {
  "$@" &
  CHILD_PID=$!
  local rc=0
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  return "$rc"
}

stop_gunicorn() {
  if [[ -n "$GUNICORN_PID" ]]; then
    kill -TERM "$GUNICORN_PID" 2>/dev/null || true
    wait "$GUNICORN_PID" 2>/dev/null || true
    GUNICORN_PID=""
  fi
}

stop_worker() {
  if [[ -n "$WORKER_PID" ]]; then
    kill -TERM "$WORKER_PID" 2>/dev/null || true
    wait "$WORKER_PID" 2>/dev/null || true
    WORKER_PID=""
  fi
}

start_worker() {
  [[ -n "$BROKER" ]] || return 0
  "$BIN/python" -c 'import redis, sys; redis.Redis.from_url(sys.argv[1]).flushdb()' "$BROKER" || return 1
  # Niced as the Procfile runs it: on a shared machine, requests get the CPU before upkeep does.
  env "${SERVER_ENV[@]}" nice -n 10 "$BIN/celery" -A config.celery_app worker --pool=solo --loglevel=WARNING \
    --without-gossip --without-mingle --without-heartbeat >>"$1" 2>&1 &
  WORKER_PID=$!
}

stop_postgres() {
  if [[ -n "$PG_DIR" ]]; then
    "$BIN/python" tests/embedded_pg.py stop "$PG_DIR" || true
    PG_DIR=""
  fi
}

cleanup() {
  if [[ -n "$CHILD_PID" ]]; then
    kill -TERM "$CHILD_PID" 2>/dev/null || true
    wait "$CHILD_PID" 2>/dev/null || true
  fi
  stop_gunicorn
  stop_worker
  stop_postgres
  [[ "${BENCH_KEEP_DB:-0}" == 1 ]] || rm -f "$SQLITE_DB" "$SQLITE_DB-wal" "$SQLITE_DB-shm"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! DATABASE_URL="sqlite:///$WORK/check.sqlite3" "$BIN/python" manage.py makemigrations --check --dry-run \
  >/dev/null 2>&1; then
  echo "warning: some model changes have no migration yet; the numbers may not mean much" >&2
fi

elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

# Every step ends in `|| return 1`: `set -e` does not apply inside a function called from `if`.
run_backend() {
  local backend="$1" state="$WORK/state-$1.json" log="$WORK/gunicorn-$1.log" started port
  echo "== $backend ($SCALE corpus) ==" >&2
  case "$backend" in
    sqlite)
      rm -f "$SQLITE_DB" "$SQLITE_DB-wal" "$SQLITE_DB-shm"
      export DATABASE_URL="sqlite:///$SQLITE_DB"
      ;;
    postgres)
      PG_DIR="$WORK/pg"
      # Server settings as name=value (e.g. BENCH_PG_SETTINGS="shared_buffers=2GB", as the
      # reference figures were measured); none by default, so runs compare with earlier ones.
      # shellcheck disable=SC2086
      DATABASE_URL="$("$BIN/python" tests/embedded_pg.py start "$PG_DIR" ${BENCH_PG_SETTINGS:-})" || return 1
      export DATABASE_URL
      ;;
  esac

  started="$EPOCHREALTIME"
  run_child "$BIN/python" manage.py migrate --noinput >"$WORK/migrate-$backend.log" 2>&1 \
    || { tail -n 20 "$WORK/migrate-$backend.log" >&2; return 1; }
  run_child "$BIN/python" -m bench.knowledge_bench build --backend "$backend" --scale "$SCALE" --state "$state" \
    --migrate-seconds "$(elapsed_since "$started")" || return 1

  port="$("$BIN/python" -m bench.knowledge_bench free-port)" || return 1
  choose_topology "$backend"
  start_worker "$WORK/worker-$backend.log" || return 1
  env "${SERVER_ENV[@]}" "$BIN/gunicorn" config.wsgi --bind "127.0.0.1:$port" --workers "$WORKERS" \
    --timeout 300 --graceful-timeout 10 --error-logfile "$log" --capture-output >>"$log" 2>&1 &
  GUNICORN_PID=$!

  if ! run_child "$BIN/python" -m bench.knowledge_bench measure --scale "$SCALE" --state "$state" \
    --base-url "http://127.0.0.1:$port" --out "$OUT/core-$backend$SUFFIX.json" --server "$SERVER, $SERVER_NOTE" \
    --server-pid "$GUNICORN_PID" --server-log "$log" ${BROKER:+--broker-url "$BROKER"}; then
    cp "$log" "$OUT/gunicorn-$backend$SUFFIX.log"
    echo "-- last lines of the gunicorn log (all of it: $OUT/gunicorn-$backend$SUFFIX.log) --" >&2
    tail -n 15 "$log" >&2
    return 1
  fi
  if part search; then
    run_child "$BIN/python" -m bench.search_bench --url "http://127.0.0.1:$port" --state "$state" \
      --out "$OUT/search-$backend$SUFFIX.json" >"$WORK/search-report-$backend.md" || return 1
  fi
  cp "$log" "$OUT/gunicorn-$backend$SUFFIX.log"
  [[ ! -f "$WORK/worker-$backend.log" ]] || cp "$WORK/worker-$backend.log" "$OUT/worker-$backend$SUFFIX.log"
  stop_gunicorn
  stop_worker
  if [[ "$backend" == postgres ]] && part semantic; then
    # Semantic search on the same corpus: embeds it, then measures latency, recall and freshness.
    run_child "$BIN/python" -m bench.semantic_bench --state "$state" --scale "$SCALE" \
      --out "$OUT/semantic-postgres$SUFFIX.json" >"$WORK/semantic-report.md" || return 1
  fi
  stop_postgres
}

status=0
files=()
for backend in "${BACKENDS[@]}"; do
  part core || break
  if run_backend "$backend"; then
    files+=("$OUT/core-$backend$SUFFIX.json")
  else
    status=1
    stop_gunicorn
    stop_worker
    stop_postgres
  fi
done

echo
[[ ${#files[@]} -eq 0 ]] || "$BIN/python" -m bench.knowledge_bench report "${files[@]}"
for report in "$WORK"/search-report-*.md; do
  [[ ! -s "$report" ]] || cat "$report"
done
[[ ! -s "$WORK/semantic-report.md" ]] || { echo; cat "$WORK/semantic-report.md"; }
echo "Raw numbers: ${files[*]:-none}" >&2

# Namespace export / import through the agor CLI (bench/transfer_bench.py starts its own
# database and gunicorn); its table follows the API tables.
part transfer && for backend in "${BACKENDS[@]}"; do
  echo "== transfer: $backend ($SCALE corpus) ==" >&2
  run_child "$BIN/python" -m bench.transfer_bench --scale "$SCALE" --backend "$backend" \
    --out "$OUT/transfer-$backend$SUFFIX.json" || status=1
done

# Rendering of large and adversarial markdown, in-process (no database needed).
if part render; then
  echo "== rendering ==" >&2
  run_child env -u DATABASE_URL "$BIN/python" -m bench.render_bench --out "$OUT/render$SUFFIX.json" || status=1
fi

# The MCP bridge over stdio against gunicorn (bench/mcp_bench.py starts its own small corpus).
part mcp && for backend in "${BACKENDS[@]}"; do
  echo "== MCP bridge: $backend ==" >&2
  run_child "$BIN/python" -m bench.mcp_bench --backend "$backend" --out "$OUT/mcp-$backend$SUFFIX.json" || status=1
done
exit "$status"
