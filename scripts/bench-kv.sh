#!/usr/bin/env bash
# The primary-key workload through fluss-rs 1.0.0 (examples/fluss_rs_kv_bench:
# user_behavior rows keyed by (user_id, item_id), 20 % updates, 4 buckets,
# acks=all, 1 MiB writer batches; lookups of random existing keys with
# --in-flight outstanding) against a release `fjord server` and the real
# Apache Fluss 0.9.1 server (scripts/fluss-java-server.sh), alternating, each
# round on a fresh data directory. Server CPU per operation comes from the
# server process's /proc stat (Fjord's process, Fluss's tablet server).
#
#   ROUNDS=3 KEYS=1600000 IN_FLIGHT=256 scripts/bench-kv.sh
#   FJORD=path/to/fjord FLUSS_RS_KV_BENCH=path/to/bench scripts/bench-kv.sh
#
# Prints the JSON lines of every run with a "server" field added, then the
# medians per server and the Fjord / Fluss ratios. DATA_DIR picks where both
# servers keep their data (default: a temp dir on the same disk for both).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-1600000}
IN_FLIGHT=${IN_FLIGHT:-256}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/fjord-target}

# FJORD and FLUSS_RS_KV_BENCH may name prebuilt binaries (skips the build).
if [[ -z ${FJORD:-} || -z ${FLUSS_RS_KV_BENCH:-} ]]; then
    cargo build --release -p fjord --bin fjord --example fluss_rs_kv_bench >&2
fi
WORK=$(mktemp -d "${DATA_DIR:-${TMPDIR:-/tmp}}/fjord-bench-kv.XXXXXX")
cp "${FJORD:-$CARGO_TARGET_DIR/release/fjord}" "$WORK/fjord"
cp "${FLUSS_RS_KV_BENCH:-$CARGO_TARGET_DIR/release/examples/fluss_rs_kv_bench}" "$WORK/bench"
OUT="$WORK/runs.jsonl"
fjord_pid=""
cleanup() {
    [[ -n $fjord_pid ]] && kill "$fjord_pid" 2>/dev/null && wait "$fjord_pid" 2>/dev/null
    scripts/fluss-java-server.sh stop "$WORK/fluss" >/dev/null 2>&1 || true
    rm -rf "$WORK/data" "$WORK/fluss/data" 2>/dev/null || true
    echo "runs kept in $OUT" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_bench SERVER BOOTSTRAP PID: one run, JSON lines tagged with SERVER.
run_bench() {
    "$WORK/bench" --bootstrap "$2" --server-pid "$3" --mode both --keys "$KEYS" \
        --in-flight "$IN_FLIGHT" 2>/dev/null |
        grep '^{' | sed "s/^{/{\"server\":\"$1\",/" | tee -a "$OUT"
}

for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round: fjord (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    rm -rf "$WORK/data"
    "$WORK/fjord" server --data-dir "$WORK/data" --listen 127.0.0.1:0 2>"$WORK/fjord.log" &
    fjord_pid=$!
    for _ in $(seq 1 100); do
        grep -q "listening on" "$WORK/fjord.log" && break
        sleep 0.1
    done
    addr=$(grep -o "listening on [0-9.:]*" "$WORK/fjord.log" | head -1 | cut -d' ' -f3)
    run_bench fjord "$addr" "$fjord_pid"
    kill "$fjord_pid"
    wait "$fjord_pid" 2>/dev/null || true
    fjord_pid=""

    echo "== round $round: fluss (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    rm -rf "$WORK/fluss"
    scripts/fluss-java-server.sh start "$WORK/fluss" >"$WORK/fluss.env"
    bootstrap=$(sed -n 's/^bootstrap=//p' "$WORK/fluss.env")
    pid=$(sed -n 's/^tablet_server_pid=//p' "$WORK/fluss.env")
    run_bench fluss "$bootstrap" "$pid"
    scripts/fluss-java-server.sh stop "$WORK/fluss" >/dev/null
done

python3 - "$OUT" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
fields = {
    "upsert": ["records_per_s", "server_cpu_ns_per_record", "client_cpu_ns_per_record"],
    "lookup": ["lookups_per_s", "server_cpu_ns_per_lookup", "p50_us", "p99_us"],
}
med = {}
for bench, keys in fields.items():
    for server in ("fjord", "fluss"):
        rows = [r for r in runs if r["bench"] == bench and r["server"] == server]
        if rows:
            med[(bench, server)] = {k: statistics.median(r[k] for r in rows) for k in keys}
            print(json.dumps({"median": bench, "server": server, "runs": len(rows), **med[(bench, server)]}))
for bench, keys in fields.items():
    if (bench, "fjord") in med and (bench, "fluss") in med:
        ratio = {k: round(med[(bench, "fjord")][k] / med[(bench, "fluss")][k], 3) for k in keys}
        print(json.dumps({"ratio_fjord_over_fluss": bench, **ratio}))
EOF
