#!/usr/bin/env bash
# Two builds of `fjord` against each other on the native lookuper, measured
# in the same run: one server (from the first build), then ROUNDS rounds of
# `fjord bench lookup` with build A and build B, the order swapped each
# round, and the medians of lookups/s and client CPU per lookup with the
# rounds B won. For a change to the lookuper: time on this shared machine
# swings from run to run, so only a same-run comparison counts.
#
#   scripts/bench-lookup-ab.sh OLD_FJORD NEW_FJORD
#   ROUNDS=8 RUNTIME_THREADS=1 scripts/bench-lookup-ab.sh a/fjord b/fjord
#
# Build the two binaries first (e.g. a `git worktree` of the old commit,
# `cargo build --release -p fjord`) and pass copies of them. Environment:
# ROUNDS (6), KEYS (400000), LOOKUPS (2000000), IN_FLIGHT (256),
# RUNTIME_THREADS (0: tokio's default, one worker per core), OUT (the JSON
# lines; default a temp file), SERVER_CPUS and CLIENT_CPUS (taskset CPU
# lists, e.g. SERVER_CPUS=0 CLIENT_CPUS=1 RUNTIME_THREADS=1: the client
# then competes with nothing but itself, and rounds swing far less).
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 OLD_FJORD NEW_FJORD" >&2; exit 2; }
A=$1
B=$2
ROUNDS=${ROUNDS:-6}
KEYS=${KEYS:-400000}
LOOKUPS=${LOOKUPS:-2000000}
IN_FLIGHT=${IN_FLIGHT:-256}
RUNTIME_THREADS=${RUNTIME_THREADS:-0}
WORK=$(mktemp -d -t fjord-bench-lookup-ab.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
DATA_DIR=$(mktemp -d "$WORK/data.XXXXXX")

# shellcheck source=lib/bench-server.sh
source "$(dirname "$0")/lib/bench-server.sh"
start_bench_server "$A" "$DATA_DIR" "$WORK/server.log"
echo "server $ADDR; A=$A B=$B; $ROUNDS rounds, $LOOKUPS lookups of $KEYS keys," \
    "$IN_FLIGHT in flight, runtime $RUNTIME_THREADS; results in $OUT" >&2

CLIENT_PIN=()
[[ -n ${CLIENT_CPUS:-} ]] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")

for round in $(seq "$ROUNDS"); do
    echo "--- round $round of $ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if ((round % 2)); then sides="A B"; else sides="B A"; fi
    for side in $sides; do
        bin=$A
        [[ $side == B ]] && bin=$B
        "${CLIENT_PIN[@]}" "$bin" bench lookup --bootstrap "$ADDR" --server-pid "$SERVER_PID" \
            --keys "$KEYS" --lookups "$LOOKUPS" --in-flight "$IN_FLIGHT" \
            --runtime-threads "$RUNTIME_THREADS" 2>/dev/null | grep '^{' |
            python3 -c "import json, sys; r = json.load(sys.stdin); r['side'] = '$side'; r['round'] = $round; print(json.dumps(r))" |
            tee -a "$OUT"
    done
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {s: {r["round"]: r for r in runs if r["side"] == s} for s in "AB"}
for s in "AB":
    rs = by[s].values()
    print(f"{s}: lookups/s {statistics.median(r['lookups_per_s'] for r in rs):.0f}, "
          f"client CPU {statistics.median(r['client_cpu_ns_per_lookup'] for r in rs):.0f} ns/lookup, "
          f"server CPU {statistics.median(r['server_cpu_ns_per_lookup'] for r in rs):.0f} ns/lookup")
wins = sum(by["B"][k]["lookups_per_s"] > by["A"][k]["lookups_per_s"] for k in by["A"] if k in by["B"])
print(f"B faster in {wins} of {len(by['A'])} rounds")
PY
