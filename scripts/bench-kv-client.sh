#!/usr/bin/env bash
# The issue-20 client benchmark: the native upsert writer and lookuper
# (`fjord bench upsert`, `fjord bench lookup`) against fluss-rs 1.0.0
# (examples/fluss_rs_kv_bench.rs) on the same primary-key workload
# (user_behavior keyed by (user_id, item_id), 20 % updates, 4 buckets,
# acks=all, 1 MiB writer batches, the changelog uncompressed) against ONE
# `fjord server`, alternating who goes first round by round; then the
# medians and the ratios measured in this run.
#
#   scripts/bench-kv-client.sh                  # 5 rounds, 1.6 M keys
#   ROUNDS=3 KEYS=800000 IN_FLIGHT=256 scripts/bench-kv-client.sh
#
# Environment: ROUNDS (5), KEYS (1600000; 2 M writes at 20 % updates),
# IN_FLIGHT (256 lookups outstanding, both clients), COMPRESSION (none; the
# changelog's Arrow compression: none, lz4, zstd), DATA_DIR (the directory
# in which the server's fresh data directory is made, and removed at exit;
# default the run's temp dir), CARGO_TARGET_DIR,
# RUNTIME_THREADS (both clients' tokio workers; 0: one per core),
# DRIVE (tasks: a task per lookup in flight, the default; stream: one task
# keeps them all in a FuturesUnordered; both clients' `--drive`),
# FLUSS_RS_LOOKUP_BATCH (fluss-rs's keys per lookup request, its
# `lookup_max_batch_size`; default fluss-rs's 128: fluss-rs sends one lookup
# request at a time and waits up to 100 ms for a full one, so below 128 in
# flight give it IN_FLIGHT/2 for a comparison of batching, not of that wait),
# OUT (the JSON lines; default a temp file), FJORD and FLUSS_RS_KV_BENCH
# (prebuilt binaries: both given, the build is skipped), SERVER_CPUS and
# CLIENT_CPUS (taskset CPU lists pinning the server and the clients, e.g.
# SERVER_CPUS=0 CLIENT_CPUS=1: each client then has a core of its own and
# does not compete with the server for it; tokio's default runtime sizes
# itself to the CPUs a process may use, so RUNTIME_THREADS=0 gives one
# worker per pinned CPU).
#
# The fluss-rs example times its upserts, then looks up in the table it
# wrote (`--mode both`); `fjord bench lookup` writes its table (untimed)
# before timing its lookups. Both check every write's result and every
# lookup's row. CPU per record is each client process's getrusage over
# its timed phase; the server's is read from /proc/PID/stat.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-1600000}
IN_FLIGHT=${IN_FLIGHT:-256}
RUNTIME_THREADS=${RUNTIME_THREADS:-0}
DRIVE=${DRIVE:-tasks}
COMPRESSION=${COMPRESSION:-none}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/fjord-target}
WORK=$(mktemp -d -t fjord-bench-kv-client.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
DATA_DIR=$(mktemp -d "${DATA_DIR:-$WORK}/fjord-bench-data.XXXXXX")

case $COMPRESSION in
    none) FLUSS_COMPRESSION=NONE ;;
    lz4) FLUSS_COMPRESSION=LZ4_FRAME ;;
    zstd) FLUSS_COMPRESSION=ZSTD ;;
    *) echo "COMPRESSION must be none, lz4 or zstd" >&2; exit 2 ;;
esac

if [[ -z ${FJORD:-} || -z ${FLUSS_RS_KV_BENCH:-} ]]; then
    cargo build --release -p fjord --bin fjord --example fluss_rs_kv_bench >&2
fi
# Copies, so a rebuild by someone else mid-run cannot change what is measured.
cp "${FJORD:-$CARGO_TARGET_DIR/release/fjord}" "$WORK/fjord"
cp "${FLUSS_RS_KV_BENCH:-$CARGO_TARGET_DIR/release/examples/fluss_rs_kv_bench}" \
    "$WORK/fluss_rs_kv_bench"
FJORD=$WORK/fjord
FLUSS_RS=$WORK/fluss_rs_kv_bench

# shellcheck source=lib/bench-server.sh
source scripts/lib/bench-server.sh
start_bench_server "$FJORD" "$DATA_DIR" "$WORK/server.log" "$FJORD" "$FLUSS_RS"
echo "server $ADDR (pid $SERVER_PID, data in $DATA_DIR); results in $OUT" >&2
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" >&2

CLIENT_PIN=()
[[ -n ${CLIENT_CPUS:-} ]] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
run() {
    echo "+ ${CLIENT_PIN[*]} $* (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "${CLIENT_PIN[@]}" "$@" | grep '^{' | tee -a "$OUT"
}
common=(--bootstrap "$ADDR" --server-pid "$SERVER_PID" --keys "$KEYS"
    --runtime-threads "$RUNTIME_THREADS")
native() {
    run "$FJORD" bench upsert "${common[@]}" --compression "$COMPRESSION"
    run "$FJORD" bench lookup "${common[@]}" --compression "$COMPRESSION" \
        --in-flight "$IN_FLIGHT" --drive "$DRIVE"
}
fluss_rs() {
    run "$FLUSS_RS" "${common[@]}" --compression "$FLUSS_COMPRESSION" --mode both \
        --in-flight "$IN_FLIGHT" --drive "$DRIVE" \
        ${FLUSS_RS_LOOKUP_BATCH:+--lookup-batch-size "$FLUSS_RS_LOOKUP_BATCH"}
}

for round in $(seq "$ROUNDS"); do
    echo "--- round $round of $ROUNDS" >&2
    # Alternate who goes first so neither always meets a warmer or busier machine.
    if (( round % 2 )); then
        native
        fluss_rs
    else
        fluss_rs
        native
    fi
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
fields = {
    "upsert": ["records_per_s", "client_cpu_ns_per_record", "server_cpu_ns_per_record"],
    "lookup": ["lookups_per_s", "client_cpu_ns_per_lookup", "server_cpu_ns_per_lookup",
               "p50_us", "p99_us"],
}
med, spread = {}, {}
for bench, keys in fields.items():
    for client in ("fjord", "fluss-rs"):
        rows = [r for r in runs if r["bench"] == bench and r["client"] == client]
        if not rows:
            continue
        med[(bench, client)] = {k: statistics.median(r[k] for r in rows) for k in keys}
        first = keys[0]
        spread[(bench, client)] = (min(r[first] for r in rows), max(r[first] for r in rows))
        print(json.dumps({"median": bench, "client": client, "runs": len(rows),
                          **med[(bench, client)],
                          f"{first}_min_max": spread[(bench, client)]}))
print()
# Per-round ratios (the runs of round i against each other), then their median.
def per_round(bench, key):
    a = [r[key] for r in runs if r["bench"] == bench and r["client"] == "fjord"]
    b = [r[key] for r in runs if r["bench"] == bench and r["client"] == "fluss-rs"]
    return [x / y for x, y in zip(a, b) if y]
for name, bench, key, target in (
    ("upsert client CPU per record, fjord / fluss-rs", "upsert", "client_cpu_ns_per_record", "<= 0.333"),
    ("lookups/s, fjord / fluss-rs", "lookup", "lookups_per_s", ">= 2"),
):
    rs = per_round(bench, key)
    if rs:
        print(f"{name}: {statistics.median(rs):.3f} by rounds "
              f"({', '.join(f'{r:.3f}' for r in rs)}) (target {target})")
up = med.get(("upsert", "fjord"))
if up:
    print(f"fjord upserts/s end to end: {up['records_per_s']:.0f} (target >= 1000000)")
PY
