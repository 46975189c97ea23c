#!/usr/bin/env bash
# The same Flink job against `fjord server` (release build) and the real Fluss
# server (0.9.1, scripts/fluss-java-server.sh), alternating, on this machine.
# Servers: `fjord` (its default: fsync before acknowledging a write),
# `fjord-no-fsync` (Fluss's default flush policy, see FJORD_INTERVAL_FLUSH) and
# `fluss-java`. The job:
#
#   datagen user_behavior rows (user_id, item_id, category_id BIGINT, behavior
#   STRING, ts TIMESTAMP(3)) -> a 4-bucket log table (write phase), then a
#   streaming read of all of them (read phase),
#
# through Flink 1.20.3 and the unmodified Fluss connector 0.9.1 (the job is
# dev.fjord.flink.FlinkBench in interop/flink, a local MiniCluster in its own
# JVM, parallelism 1; the read selects every column). Each run prints one JSON
# line: rows/s of each phase and the server's CPU per row (each process's
# CPU-time clock, in ns, over the phase, exited threads included; FlinkBench
# reads it with python3): for Fjord the one `fjord server` process; for Fluss
# the tablet server (which holds every bucket) plus the coordinator, each also
# shown alone; ZooKeeper is not counted. Before the measured rounds,
# one unrecorded warm-up run per server (WARMUP_ROWS) lets the JVMs compile
# their hot paths; before every run, `sync` writes back what the last left.
# At the end: the medians per server and, per phase, the median over rounds
# of the same-round ratio of server CPU per row, Fjord / Java.
#
# Usage: scripts/bench-flink.sh [RUNS (3)] [ROWS (5000000)]
# Environment: FJORD_RELEASE_BIN (default: cargo build --release -p fjord,
# then $CARGO_TARGET_DIR/release/fjord; either way copied to BENCH_DIR so a
# rebuild cannot replace it mid-run), CARGO_TARGET_DIR (/var/tmp/fjord-target),
# BENCH_DIR (a fresh temporary directory), WARMUP_ROWS (2000000; 0 skips it),
# FJORD_INTERVAL_FLUSH (1: also a fjord server without fsync per write, below),
# FJORD_PER_FILE_SYNC (1: also a fjord server syncing each bucket's file, with
# log.flush.sync-file-system=false), FJORD_BASELINE_BIN (another fjord binary,
# say an earlier build, run as a further server `fjord-baseline` with the
# default durability: two builds compared within one run),
# FLUSS_TABLET_SERVER_JAVA_OPTS (-Xmx2g -XX:+UseG1GC). Results also go to
# BENCH_DIR/results.jsonl; the servers' data directories are removed at exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=${1:-3}
ROWS=${2:-5000000}
WARMUP_ROWS=${WARMUP_ROWS:-2000000}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/fjord-target}"
BENCH_DIR=${BENCH_DIR:-$(mktemp -d /var/tmp/fjord-bench-flink.XXXXXX)}
mkdir -p "$BENCH_DIR"
log() { printf 'bench-flink: %s\n' "$*" >&2; }

if [[ -z ${FJORD_RELEASE_BIN:-} ]]; then
    # The same targets as the other bench scripts build, so that their
    # builds share one set of artifacts (a different set unifies the
    # dependencies' features differently and rebuilds most of them).
    log "cargo build --release -p fjord --bin fjord --example fluss_rs_kv_bench"
    (cd "$ROOT" && cargo build --release -q -p fjord --bin fjord --example fluss_rs_kv_bench)
    FJORD_RELEASE_BIN=$CARGO_TARGET_DIR/release/fjord
fi
[[ -x $FJORD_RELEASE_BIN ]] || { log "no fjord binary at $FJORD_RELEASE_BIN"; exit 1; }
cp "$FJORD_RELEASE_BIN" "$BENCH_DIR/fjord"
FJORD_RELEASE_BIN=$BENCH_DIR/fjord
if [[ -n ${FJORD_BASELINE_BIN:-} ]]; then
    [[ -x $FJORD_BASELINE_BIN ]] || { log "no fjord binary at $FJORD_BASELINE_BIN"; exit 1; }
    cp "$FJORD_BASELINE_BIN" "$BENCH_DIR/fjord-baseline"
    FJORD_BASELINE_BIN=$BENCH_DIR/fjord-baseline
fi

log "resolving interop/flink's test classpath"
mvn -q -B -o -f "$ROOT/interop/flink" test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile="$BENCH_DIR/flink.classpath" >"$BENCH_DIR/mvn.log" 2>&1 ||
    mvn -q -B -f "$ROOT/interop/flink" test-compile dependency:build-classpath \
        -Dmdep.includeScope=test -Dmdep.outputFile="$BENCH_DIR/flink.classpath" >"$BENCH_DIR/mvn.log" 2>&1
CP="$ROOT/interop/flink/target/test-classes:$(cat "$BENCH_DIR/flink.classpath")"

FJORD_PIDS=()
cleanup() {
    local pid
    for pid in "${FJORD_PIDS[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    bash "$ROOT/scripts/fluss-java-server.sh" stop "$BENCH_DIR/fluss" >/dev/null 2>&1 || true
    rm -rf "$BENCH_DIR"/fjord-data* "$BENCH_DIR/fluss/data" "$BENCH_DIR/fjord" "$BENCH_DIR/fjord-baseline"
}
trap cleanup EXIT

log "starting the real Fluss server"
export FLUSS_TABLET_SERVER_JAVA_OPTS=${FLUSS_TABLET_SERVER_JAVA_OPTS:--Xmx2g -XX:+UseG1GC}
eval "$(bash "$ROOT/scripts/fluss-java-server.sh" start "$BENCH_DIR/fluss" | grep -E '^[a-z_]+=[^ ]*$')"
# The tablet server first: FlinkBench reports the processes in this order.
declare -A ADDR PIDS
ADDR[fluss-java]=$bootstrap
PIDS[fluss-java]=$tablet_server_pid,$coordinator_pid

start_fjord() { # LABEL [fjord server args...]: starts one (FJORD_BIN, or the
    # release binary), records its address and pid
    local label=$1 addr= bin=${FJORD_BIN:-$FJORD_RELEASE_BIN}
    shift
    log "starting $label: $bin server $*"
    mkdir -p "$BENCH_DIR/fjord-data-$label"
    RUST_LOG=${RUST_LOG:-info} "$bin" server --listen 127.0.0.1:0 \
        --data-dir "$BENCH_DIR/fjord-data-$label" "$@" 2>"$BENCH_DIR/$label.log" >/dev/null </dev/null &
    FJORD_PIDS+=($!)
    PIDS[$label]=$!
    for _ in $(seq 300); do
        addr=$(grep -o 'listening on [0-9.:]*' "$BENCH_DIR/$label.log" | head -1 | cut -d' ' -f3 || true)
        [[ -n $addr ]] && break
        sleep 0.1
    done
    [[ -n $addr ]] || { log "$label did not start"; cat "$BENCH_DIR/$label.log" >&2; exit 1; }
    ADDR[$label]=$addr
}

# Fjord's default: fsync before acknowledging a produce.
start_fjord fjord
SERVERS=(fjord fluss-java)
# FJORD_INTERVAL_FLUSH=1 (the default) adds a second fjord server with Fluss's
# own default flush policy (log.flush.interval-messages = Long.MAX_VALUE: no
# fsync per write, the page cache flushes), so the write phase is compared
# like for like too.
if [[ ${FJORD_INTERVAL_FLUSH:-1} == 1 ]]; then
    start_fjord fjord-no-fsync --set log.flush.interval-messages=9223372036854775807
    SERVERS=(fjord fjord-no-fsync fluss-java)
fi
if [[ ${FJORD_PER_FILE_SYNC:-0} == 1 ]]; then
    start_fjord fjord-fdatasync --set log.flush.sync-file-system=false
    SERVERS+=(fjord-fdatasync)
fi
if [[ -n ${FJORD_BASELINE_BIN:-} ]]; then
    FJORD_BIN=$FJORD_BASELINE_BIN start_fjord fjord-baseline
    SERVERS+=(fjord-baseline)
fi

bench() { # LABEL ROWS ROUND: one FlinkBench run, its JSON line on stdout
    local load
    # The previous run's dirty pages written back now, not during this
    # run's phases (where a server's own syncs would wait for them).
    sync
    load=$(cut -d' ' -f1 /proc/loadavg)
    java -Xmx1g --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
        --add-opens=java.base/java.util=ALL-UNNAMED -Dlog4j2.configurationFile=/dev/null -cp "$CP" \
        dev.fjord.flink.FlinkBench "${ADDR[$1]}" "${PIDS[$1]}" "$2" "$1" 2>"$BENCH_DIR/$1-$3.err" |
        grep '^{' | sed "s/}\$/,\"round\":\"$3\",\"load1\":$load}/" ||
        { log "$1 run $3 failed; see $BENCH_DIR/$1-$3.err"; tail -20 "$BENCH_DIR/$1-$3.err" >&2; return 1; }
}

if ((WARMUP_ROWS > 0)); then
    log "warm-up: $WARMUP_ROWS rows per server (not recorded)"
    for server in "${SERVERS[@]}"; do
        bench "$server" "$WARMUP_ROWS" warmup >&2
    done
fi
: >"$BENCH_DIR/results.jsonl"
n=${#SERVERS[@]}
for i in $(seq "$RUNS"); do
    # Rotate which server goes first, so none always runs on a machine the
    # others have just heated (page cache, compactions, background threads).
    for k in $(seq 0 $((n - 1))); do
        bench "${SERVERS[$(((i + k) % n))]}" "$ROWS" "$i" | tee -a "$BENCH_DIR/results.jsonl"
    done
done

python3 - "$BENCH_DIR/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = ["write_rows_per_s", "write_server_cpu_ns_per_row", "read_rows_per_s", "read_server_cpu_ns_per_row", "load1"]
servers = sorted({r["server"] for r in rows})
med = {}
for server in servers:
    rs = [r for r in rows if r["server"] == server]
    med[server] = {k: statistics.median(r[k] for r in rs) for k in keys}
    print(json.dumps({"server": server, "runs": len(rs), "median": med[server]}))
for phase in ("write", "read"):
    k = phase + "_server_cpu_ns_per_row"
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["server"]] = r[k]
    tablet = statistics.median(r[phase + "_cpu_ns_per_row_by_pid"][0] for r in rows if r["server"] == "fluss-java")
    for fjord in (s for s in servers if s != "fluss-java"):
        ratios = [v[fjord] / v["fluss-java"] for v in by_round.values() if fjord in v and "fluss-java" in v]
        print(f"{phase}: server CPU per row, {fjord} / java: median of same-round ratios {statistics.median(ratios):.3f}"
              f" (rounds: {', '.join(f'{x:.3f}' for x in ratios)}); medians {med[fjord][k]:.0f} ns vs"
              f" {med['fluss-java'][k]:.0f} ns (Java tablet server alone {tablet:.0f} ns)")
PY
