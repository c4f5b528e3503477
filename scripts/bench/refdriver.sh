#!/usr/bin/env bash
# packbot's vsagent channel under the reference's webhook load driver (../shared/bench/refdriver,
# run unchanged), as BENCHMARKS.md reports it. From the repository root:
#
#   scripts/bench/refdriver.sh                 # 3 runs, results under /tmp/packbot-refdriver
#   RUNS=1 OUT=/tmp/rd scripts/bench/refdriver.sh
#   BUILD=0 PACKBOT_BIN=/tmp/other-packbot scripts/bench/refdriver.sh   # measure a given binary
#   TRACING=1 scripts/bench/refdriver.sh       # traces on: every span exported over OTLP/HTTP to
#                                              # scripts/bench/otlpsink (counts and drops them)
#
# Per run: a fresh PostgreSQL database, the driver (fake VS Agent :3100, fake LLM :3200/v1, fake
# MCP :3300/mcp with get_sum), then `packbot serve` (PACKBOT_CHANNEL=vsagent, webhooks on
# 127.0.0.1:3010, the pack in scripts/bench/refdriver-pack) with nothing of this shell's
# environment, then the plan below; a sampler records the machine's CPU (/proc/stat) so that the
# summary can tell what else ran meanwhile. The summary (medians over the runs) is printed and
# written to $OUT/summary.md; every run keeps its driver table, JSON results and packbot log.
#
# Needs: Go, the local PostgreSQL 15 cluster (started here when it is down) with the role
# packbot_test (bash .ci/run creates it), python3, root or sudo for createdb.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

RUNS=${RUNS:-3}
OUT=${OUT:-/tmp/packbot-refdriver}
PACKBOT_BIN=${PACKBOT_BIN:-/tmp/packbot}
REFDRIVER_SRC=${REFDRIVER_SRC:-$ROOT/../shared/bench/refdriver}
PACK=${PACK:-$ROOT/scripts/bench/refdriver-pack/agent-pack.yaml}
DB_NAME=${DB_NAME:-packbot_bench}
DB_ROLE=packbot_test
DB_PASS=packbot_test
LOG_LEVEL=${PACKBOT_LOG_LEVEL:-info}
TRACING=${TRACING:-0}             # 1: OTEL_EXPORTER_OTLP_ENDPOINT set, spans to the local sink
DB_PARAMS=${DB_PARAMS:-}          # extra DSN parameters, e.g. "&pool_max_conns=16"
DB_PORT=${DB_PORT:-5432}          # another cluster (its postgres role must be trusted on 127.0.0.1)
if [ "$DB_PORT" != 5432 ]; then export PGHOST=127.0.0.1 PGPORT=$DB_PORT; fi
QUIET_WAIT=${QUIET_WAIT:-600}     # seconds to wait for an idle machine before each run
# warm-up, the reference's connection counts (more messages per connection than the driver's
# default plan, so that CPU time is well above the 10 ms tick), the MCP step, then 1000 new
# users for the memory figure.
PLAN=${PLAN:-idle:5,warm:20x20,run:1x300,run:10x100,run:50x40,run:200x20,mcp:10x100,mem:1000x1/200,settle:5}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -n -u postgres -- "$@"; fi
}

pids=()
cleanup() {
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

mkdir -p "$OUT"
echo "== build"
if [ "${BUILD:-1}" = 1 ]; then go build -o "$PACKBOT_BIN" ./cmd/packbot; fi
(cd "$REFDRIVER_SRC" && go build -o "$OUT/refdriver" .)
if [ "$TRACING" = 1 ]; then go build -o "$OUT/otlpsink" ./scripts/bench/otlpsink; fi
"$PACKBOT_BIN" pack validate --channel vsagent "$PACK"

echo "== PostgreSQL"
if ! pg_isready -q -h 127.0.0.1 -p "$DB_PORT"; then
  if [ "$(id -u)" = 0 ]; then pg_ctlcluster 15 main start; else sudo -n pg_ctlcluster 15 main start; fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p "$DB_PORT" && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p "$DB_PORT"
DATABASE_URL="postgres://$DB_ROLE:$DB_PASS@127.0.0.1:$DB_PORT/$DB_NAME?sslmode=disable$DB_PARAMS"

# busy_cores SECS: how many cores the machine kept busy over SECS seconds (/proc/stat).
busy_cores() {
  local a b
  a=$(head -1 /proc/stat); sleep "$1"; b=$(head -1 /proc/stat)
  python3 - "$a" "$b" "$1" <<'PY'
import sys
def busy(line):
    v = [int(x) for x in line.split()[1:9]]
    return sum(v) - v[3] - v[4]
print(f"{(busy(sys.argv[2]) - busy(sys.argv[1])) / 100 / float(sys.argv[3]):.2f}")
PY
}

# wait_quiet: the machine is shared; start a run only once other work (under 0.2 cores over
# 3 s) has stopped, or after QUIET_WAIT seconds anyway (the summary shows what ran meanwhile).
wait_quiet() {
  local start=$SECONDS b
  while :; do
    b=$(busy_cores 3)
    if python3 -c "import sys; sys.exit(0 if float('$b') < 0.2 else 1)"; then
      echo "machine quiet ($b cores busy)"; return
    fi
    if (( SECONDS - start > QUIET_WAIT )); then
      echo "machine still busy ($b cores) after ${QUIET_WAIT}s; running anyway"; return
    fi
    sleep 5
  done
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo " + local changes (diff sha256 $(git diff HEAD | sha256sum | cut -c1-12), $(git status --short | wc -l) files)")"
  echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory: $(grep MemTotal /proc/meminfo | awk '{print $2/1024/1024 " GiB"}')"
  echo "kernel: $(uname -r)"
  echo "go: $(go version | awk '{print $3}')"
  echo "postgres: $(as_postgres psql -Atc 'show server_version') synchronous_commit=$(as_postgres psql -Atc 'show synchronous_commit') shared_buffers=$(as_postgres psql -Atc 'show shared_buffers')"
  echo "plan: $PLAN"
  echo "log level: $LOG_LEVEL"
  echo "database: ${DATABASE_URL//$DB_PASS/***}"
} | tee "$OUT/machine.txt"

for run in $(seq 1 "$RUNS"); do
  dir="$OUT/run$run"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== run $run of $RUNS ($dir)"

  as_postgres dropdb --if-exists "$DB_NAME"
  as_postgres createdb -O "$DB_ROLE" "$DB_NAME"
  wait_quiet | tee "$dir/quiet.txt"

  # Machine CPU, to see what shares the 2 cores during each step.
  (while :; do echo "$(date +%s.%N) $(head -1 /proc/stat)"; sleep 0.25; done) > "$dir/cpu.log" &
  sampler=$!
  pids+=("$sampler")

  "$OUT/refdriver" -pid-file "$dir/bot.pid" -out "$dir/results.jsonl" -label "packbot run $run" \
    -plan "$PLAN" > "$dir/driver.txt" 2> "$dir/driver.log" &
  driver=$!
  pids+=("$driver")
  for _ in $(seq 1 100); do grep -q "fake MCP listening" "$dir/driver.log" 2>/dev/null && break; sleep 0.1; done

  tracing_env=()
  sink=""
  if [ "$TRACING" = 1 ]; then
    "$OUT/otlpsink" -listen 127.0.0.1:4318 2> "$dir/otlpsink.log" &
    sink=$!
    pids+=("$sink")
    tracing_env=(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318)
  fi
  # Only what packbot needs: nothing of this shell's environment.
  env -i PATH=/usr/bin:/bin \
    "${tracing_env[@]}" \
    PACKBOT_CHANNEL=vsagent \
    VS_AGENT_ADMIN_URL=http://127.0.0.1:3100 \
    PACKBOT_HTTP_ADDR=127.0.0.1:3010 \
    AGENT_PACK_PATH="$PACK" \
    DATABASE_URL="$DATABASE_URL" \
    PACKBOT_DATA_DIR="$dir/data" \
    PACKBOT_DIDCOMM_KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f \
    PACKBOT_LOG_LEVEL="$LOG_LEVEL" \
    "$PACKBOT_BIN" serve > "$dir/packbot.out" 2> "$dir/packbot.log" &
  bot=$!
  pids+=("$bot")
  echo "$bot" > "$dir/bot.pid.tmp" && mv "$dir/bot.pid.tmp" "$dir/bot.pid"

  driver_status=0
  wait "$driver" || driver_status=$?
  kill "$sampler" 2>/dev/null || true
  kill -TERM "$bot" 2>/dev/null || true
  bot_status=0
  wait "$bot" || bot_status=$?
  wait "$sampler" 2>/dev/null || true
  if [ -n "$sink" ]; then kill -TERM "$sink" 2>/dev/null || true; wait "$sink" 2>/dev/null || true; fi
  cat "$dir/driver.txt"
  echo "driver exit $driver_status, packbot exit $bot_status" | tee "$dir/status.txt"
  grep -c 'level=WARN' "$dir/packbot.log" | sed 's/^/packbot WARN lines: /' | tee -a "$dir/status.txt" || true
  grep -c 'level=ERROR' "$dir/packbot.log" | sed 's/^/packbot ERROR lines: /' | tee -a "$dir/status.txt" || true
  if [ "$driver_status" != 0 ]; then
    echo "the driver failed: see $dir/driver.log" >&2
    exit 1
  fi
done

python3 "$ROOT/scripts/bench/refdriver_summary.py" "$OUT" | tee "$OUT/summary.md"
