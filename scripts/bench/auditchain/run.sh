#!/usr/bin/env bash
# PostgreSQL's own CPU per audit record: the chain statement as built, a plain insert, and the
# two parts of a chain sealed after commit (an insert with a MAC; a sealer's batch of 100).
# Needs a PostgreSQL this user can create a database in (PGHOST, PGUSER, PGPASSWORD), pgbench,
# and the cluster's processes readable in /proc (run it on the database's machine, as root or as
# postgres). Prints µs of the cluster's CPU per record for each, ROUNDS times, interleaved.
#
#   PGHOST=127.0.0.1 PGUSER=packbot_test PGPASSWORD=packbot_test scripts/bench/auditchain/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
db=${DB:-packbot_auditchain}
rounds=${ROUNDS:-3}
n=${N:-4000}
pgbin=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
pm_pid=$(head -1 "$(ls -d /var/lib/postgresql/*/main | tail -1)/postmaster.pid")

cpu() { # the cluster's CPU ticks: live processes, and the backends the postmaster reaped
  local t=0 a p
  for p in $(pgrep -u postgres); do
    a=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    set -- ${a#*) }
    t=$((t + ${12} + ${13}))
    [ "$p" = "$pm_pid" ] && t=$((t + ${14} + ${15}))
  done
  echo "$t"
}

dropdb --if-exists "$db" && createdb "$db"
(cd "$here/../../.." && go run ./cmd/packbot audit --limit 1 --database-url "postgres://$PGUSER:$PGPASSWORD@$PGHOST:5432/$db?sslmode=disable" >/dev/null 2>&1)
psql -q "$db" -c "ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT ''" \
  -c "CREATE TABLE audit_seals (id BIGINT PRIMARY KEY, lane BIGINT NOT NULL, seq BIGINT NOT NULL, prev_id BIGINT NOT NULL, prev TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (lane, seq))"
rows=$(python3 -c 'import json; print(json.dumps([{"i":i+1,"id":i+1,"seq":i+1,"prev_id":i,"prev":"a"*64,"hash":"b"*64} for i in range(100)],separators=(",",":")))')
bench() { "$pgbin/pgbench" -n -M prepared -D "src=$(sed 's/ /\\ /g' "$here/src.json")" -D "rows=$rows" "$@" "$db" 2>&1 | grep -E 'error' || true; }
reset() { psql -q "$db" -c "TRUNCATE audit, audit_seals" -c "UPDATE audit_lanes SET seq = 0, id = 0, hash = ''" -c "VACUUM audit_lanes" -c "VACUUM audit" >/dev/null 2>&1; }
tick_us=$((1000000 / $(getconf CLK_TCK)))
for r in $(seq "$rounds"); do
  for f in plain chain macplain; do
    reset; a=$(cpu); bench -f "$here/$f.sql" -t "$n" -c 1; b=$(cpu)
    echo "round $r $f: $(( (b - a) * tick_us / n )) µs per record"
  done
  a=$(cpu); bench -f "$here/seal.sql" -t $((n / 100)) -c 1; b=$(cpu)
  echo "round $r seal (batches of 100, after macplain's $n records): $(( (b - a) * tick_us / n )) µs per record"
done
dropdb "$db"
