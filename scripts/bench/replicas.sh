#!/usr/bin/env bash
# packbot with N replicas on one PostgreSQL behind a round-robin proxy, under the reference's
# webhook load driver (../shared/bench/refdriver, run unchanged), as BENCHMARKS.md reports it:
#
#   scripts/bench/replicas.sh                  # 3 replicas, 3 runs, results under /tmp/packbot-replicas
#   REPLICAS=2 RUNS=1 scripts/bench/replicas.sh
#
# Per run: a fresh database, the driver (fake VS Agent :3100, fake LLM :3200, fake MCP :3300),
# N `packbot serve` replicas (vsagent channel, webhooks on 127.0.0.1:3011…), the proxy
# (scripts/bench/rrproxy) on 127.0.0.1:3010 spreading the driver's webhooks over them in turn;
# every replica posts its replies to the one fake VS Agent. The driver's own "bot CPU" column is
# the proxy's; each replica's CPU is sampled from /proc and summed per step by
# replicas_summary.py. Needs what refdriver.sh needs.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

REPLICAS=${REPLICAS:-3}
RUNS=${RUNS:-3}
OUT=${OUT:-/tmp/packbot-replicas}
PACKBOT_BIN=${PACKBOT_BIN:-/tmp/packbot}
REFDRIVER_SRC=${REFDRIVER_SRC:-$ROOT/../shared/bench/refdriver}
PACK=${PACK:-$ROOT/scripts/bench/refdriver-pack/agent-pack.yaml}
DB_NAME=${DB_NAME:-packbot_bench}
DB_ROLE=packbot_test
DB_PASS=packbot_test
PLAN=${PLAN:-idle:3,warm:20x20,run:10x100,run:50x40,run:200x20,settle:3}

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
go build -o "$OUT/rrproxy" ./scripts/bench/rrproxy
(cd "$REFDRIVER_SRC" && go build -o "$OUT/refdriver" .)
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if [ "$(id -u)" = 0 ]; then pg_ctlcluster 15 main start; else sudo -n pg_ctlcluster 15 main start; fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
DATABASE_URL="postgres://$DB_ROLE:$DB_PASS@127.0.0.1:5432/$DB_NAME?sslmode=disable"
echo "replicas: $REPLICAS, plan: $PLAN, commit: $(git rev-parse --short HEAD)" | tee "$OUT/machine.txt"

for run in $(seq 1 "$RUNS"); do
  dir="$OUT/run$run"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== run $run of $RUNS ($dir)"
  as_postgres dropdb --if-exists "$DB_NAME"
  as_postgres createdb -O "$DB_ROLE" "$DB_NAME"

  "$OUT/refdriver" -pid-file "$dir/proxy.pid" -out "$dir/results.jsonl" -label "packbot x$REPLICAS run $run" \
    -plan "$PLAN" > "$dir/driver.txt" 2> "$dir/driver.log" &
  driver=$!
  pids+=("$driver")
  for _ in $(seq 1 100); do grep -q "fake MCP listening" "$dir/driver.log" 2>/dev/null && break; sleep 0.1; done

  targets=""
  bots=()
  for i in $(seq 1 "$REPLICAS"); do
    port=$((3010 + i))
    # The same key on every replica (they share the database); nothing else of this shell's
    # environment.
    env -i PATH=/usr/bin:/bin PACKBOT_CHANNEL=vsagent VS_AGENT_ADMIN_URL=http://127.0.0.1:3100 \
      PACKBOT_HTTP_ADDR=127.0.0.1:$port AGENT_PACK_PATH="$PACK" DATABASE_URL="$DATABASE_URL" \
      PACKBOT_DATA_DIR="$dir/data$i" PACKBOT_DIDCOMM_KEY=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f \
      PACKBOT_LOG_LEVEL=info "$PACKBOT_BIN" serve > "$dir/packbot$i.out" 2> "$dir/packbot$i.log" &
    bots+=("$!")
    pids+=("$!")
    targets="$targets${targets:+,}http://127.0.0.1:$port"
  done
  for i in $(seq 1 "$REPLICAS"); do
    for _ in $(seq 1 100); do grep -q "packbot serving" "$dir/packbot$i.log" 2>/dev/null && break; sleep 0.1; done
  done
  "$OUT/rrproxy" -listen 127.0.0.1:3010 -targets "$targets" 2> "$dir/proxy.log" &
  proxy=$!
  pids+=("$proxy")
  echo "$proxy" > "$dir/proxy.pid"

  # Each replica's CPU (utime+stime ticks) every 0.25 s.
  (while :; do
     line="$(date +%s.%N)"
     for p in "${bots[@]}"; do line="$line $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null || echo 0)"; done
     echo "$line"; sleep 0.25
   done) > "$dir/replicas_cpu.log" &
  sampler=$!
  pids+=("$sampler")

  status=0
  wait "$driver" || status=$?
  kill "$sampler" "$proxy" 2>/dev/null || true
  for p in "${bots[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${bots[@]}"; do wait "$p" || true; done
  cat "$dir/driver.txt"
  if [ "$status" != 0 ]; then echo "the driver failed: see $dir/driver.log" >&2; exit 1; fi
done

python3 "$ROOT/scripts/bench/replicas_summary.py" "$OUT" | tee "$OUT/summary.md"
