#!/usr/bin/env bash
# CDC into a Fjord table, end to end (issue 21): `user_behavior` with a
# primary key pre-loaded with ROWS rows (default 5 000 000, deterministic) in
# a private MariaDB, then `fjord pipeline run --until-current` with
# `sink: type: fluss` into a primary-key table on a local release
# `fjord server`:
#   1. scan.startup.mode: earliest-offset (the whole binlog),
#   2. scan.startup.mode: initial (the snapshot; the binlog after it is empty),
# each on a fresh Fjord data dir and state dir. Prints the pipeline's summary
# line of each run (events/s, pipeline CPU, sink figures) with the server's
# CPU seconds during the run and the load average added, then one line per
# mode: rows/s end to end and CPU ns per row (pipeline + server).
#
#   ROWS=5000000 ROUNDS=1 scripts/bench-cdc-fluss.sh
#   FJORD=path/to/fjord scripts/bench-cdc-fluss.sh      (skips the build)
#   SERVER_ARGS='--set log.flush.interval-ms=1000' scripts/bench-cdc-fluss.sh
#                                   (server options, e.g. interval flushing)
#   MODES=initial scripts/bench-cdc-fluss.sh   (one startup mode only)
#
# DATA_DIR picks where MariaDB and Fjord keep their data (default: a temp
# dir under TMPDIR). Needs mariadbd / mariadb-install-db / mariadb
# (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-5000000}
ROUNDS=${ROUNDS:-1}
BUCKETS=${BUCKETS:-4}
MODES=${MODES:-earliest-offset initial}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/fjord-target}

if [[ -z ${FJORD:-} ]]; then
    cargo build --release -p fjord --bin fjord >&2
fi
WORK=$(mktemp -d "${DATA_DIR:-${TMPDIR:-/tmp}}/fjord-bench-cdc.XXXXXX")
cp "${FJORD:-$CARGO_TARGET_DIR/release/fjord}" "$WORK/fjord"
OUT="$WORK/runs.jsonl"
maria_pid=""
fjord_pid=""
cleanup() {
    [[ -n $fjord_pid ]] && kill "$fjord_pid" 2>/dev/null && wait "$fjord_pid" 2>/dev/null
    [[ -n $maria_pid ]] && kill "$maria_pid" 2>/dev/null && wait "$maria_pid" 2>/dev/null
    rm -rf "$WORK/maria" "$WORK/fjord-data" "$WORK/state" 2>/dev/null || true
    echo "runs kept in $OUT" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tool() {
    for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
        [[ -x $d/$1 ]] && { echo "$d/$1"; return; }
    done
    echo "$1 not found: run scripts/install-deps.sh" >&2
    exit 1
}
as_root=()
[[ $(id -u) == 0 ]] && as_root=(--user=root)

# MariaDB on a free port, binlog in ROW format, as the tests' harness starts it.
mkdir -p "$WORK/maria"
"$(tool mariadb-install-db)" --no-defaults --datadir="$WORK/maria/data" \
    --auth-root-authentication-method=normal --tmpdir="$WORK/maria" --skip-test-db \
    "${as_root[@]}" >/dev/null 2>&1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$(tool mariadbd)" --no-defaults --datadir="$WORK/maria/data" --port="$port" \
    --bind-address=127.0.0.1 --socket="$WORK/maria/sock" --pid-file="$WORK/maria/pid" \
    --tmpdir="$WORK/maria" --log-error="$WORK/maria/error.log" \
    --log-bin="$WORK/maria/data/binlog" --binlog-format=ROW --server-id=1 \
    --skip-name-resolve --character-set-server=utf8mb4 --innodb-buffer-pool-size=1G \
    --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 --max-allowed-packet=256M \
    "${as_root[@]}" >/dev/null 2>&1 &
maria_pid=$!
sql() { "$(tool mariadb)" --no-defaults -uroot --socket="$WORK/maria/sock" --batch --skip-column-names "$@"; }
for _ in $(seq 1 300); do
    sql -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
done
sql -e "CREATE USER 'fjord'@'127.0.0.1' IDENTIFIED BY 'fjord';
        GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR,
              LOCK TABLES, SHOW DATABASES ON *.* TO 'fjord'@'127.0.0.1';
        CREATE DATABASE bench;
        CREATE TABLE bench.user_behavior (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT,
          item_id BIGINT, category_id BIGINT, behavior VARCHAR(16), ts TIMESTAMP NULL)
          ENGINE=InnoDB;"

# The load: 100 000-row statements from the Sequence engine. Skewed,
# deterministic values: users and items by a multiplicative hash of the row
# number (a few hot ones), behaviors pv:cart:fav:buy ≈ 89:6:3:2, ts over 9
# days from 2017-11-25 (the public data set's range).
echo "loading $ROWS rows (load $(cut -d' ' -f1 /proc/loadavg))" >&2
load_start=$(date +%s.%N)
chunk=100000
for ((from = 1; from <= ROWS; from += chunk)); do
    to=$((from + chunk - 1 < ROWS ? from + chunk - 1 : ROWS))
    sql -D bench -e "INSERT INTO bench.user_behavior
      SELECT seq,
             IF(seq % 10 < 3, seq % 1000, (seq * 2654435761) % 1000000),
             IF(seq % 10 < 2, seq % 500, (seq * 40503) % 4000000),
             (seq * 7919) % 9000,
             ELT(1 + IF(seq % 100 < 89, 0, IF(seq % 100 < 95, 1, IF(seq % 100 < 98, 2, 3))),
                 'pv', 'cart', 'fav', 'buy'),
             FROM_UNIXTIME(1511539200 + (seq * 7) % 777600)
      FROM seq_${from}_to_${to}"
done
echo "loaded in $(echo "$(date +%s.%N) - $load_start" | bc) s" >&2

# proc_cpu PID: user + system seconds of a process so far.
proc_cpu() {
    awk '{ print ($14 + $15) / 100 }' "/proc/$1/stat"
}

run_mode() { # MODE
    rm -rf "$WORK/fjord-data" "$WORK/state"
    "$WORK/fjord" server --data-dir "$WORK/fjord-data" --listen 127.0.0.1:0 ${SERVER_ARGS:-} 2>"$WORK/fjord.log" &
    fjord_pid=$!
    for _ in $(seq 1 100); do
        grep -q "listening on" "$WORK/fjord.log" && break
        sleep 0.1
    done
    addr=$(grep -o "listening on [0-9.:]*" "$WORK/fjord.log" | head -1 | cut -d' ' -f3)
    cat >"$WORK/pipeline.yaml" <<EOF
source:
  type: mysql
  hostname: 127.0.0.1
  port: $port
  username: fjord
  password: fjord
  tables: bench.user_behavior
  server-id: 5400
  scan.startup.mode: $1
sink:
  type: fluss
  bootstrap.servers: $addr
  bucket.num: bench.user_behavior:$BUCKETS
pipeline:
  name: bench $1
  state-dir: $WORK/state
  state.commit-interval-ms: 1000
EOF
    local load server_before server_after line
    load=$(cut -d' ' -f1 /proc/loadavg)
    server_before=$(proc_cpu "$fjord_pid")
    line=$("$WORK/fjord" pipeline run "$WORK/pipeline.yaml" --until-current 2>"$WORK/pipeline-$1.log" | tail -1)
    server_after=$(proc_cpu "$fjord_pid")
    echo "$line" | python3 -c "
import json, sys
r = json.loads(sys.stdin.read())
r['mode'] = '$1'
r['load'] = float('$load')
r['server_cpu_s'] = round($server_after - $server_before, 3)
rows = r['sink']['rows'] or 1
r['rows_per_s'] = round(rows / r['elapsed_s'])
r['cpu_ns_per_row_total'] = round((r['cpu_s'] + r['server_cpu_s']) * 1e9 / rows, 1)
print(json.dumps(r))" | tee -a "$OUT"
    kill "$fjord_pid"
    wait "$fjord_pid" 2>/dev/null || true
    fjord_pid=""
}

for round in $(seq 1 "$ROUNDS"); do
    for mode in $MODES; do
        echo "== round $round: $mode" >&2
        run_mode "$mode"
    done
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for mode in ("earliest-offset", "initial"):
    rs = [r for r in runs if r["mode"] == mode]
    if not rs:
        continue
    print(json.dumps({
        "mode": mode,
        "runs": len(rs),
        "rows": rs[0]["sink"]["rows"],
        "rows_per_s_median": statistics.median(r["rows_per_s"] for r in rs),
        "pipeline_cpu_ns_per_row": statistics.median(r["cpu_s"] * 1e9 / max(r["sink"]["rows"], 1) for r in rs),
        "server_cpu_ns_per_row": statistics.median(r["server_cpu_s"] * 1e9 / max(r["sink"]["rows"], 1) for r in rs),
        "cpu_ns_per_row_total": statistics.median(r["cpu_ns_per_row_total"] for r in rs),
    }))
EOF
