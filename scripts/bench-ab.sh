#!/usr/bin/env bash
# Two builds of `fjord` against each other on the native writer, measured in
# the same run: one server (from the second build), then ROUNDS rounds of
# `bench write` with build A, `bench write` with build B and the
# compression floor (`bench compress-floor`, build B), alternating, and the
# medians of client CPU per record with the split by thread, and each
# build's CPU over the floor (the ratio of the medians, and the median of
# the per-round ratios). For a change to the writer where instruction
# counts (scripts/callgrind-caller.sh) are not enough: time on this shared
# machine swings from run to run, so only a same-run comparison counts.
#
#   scripts/bench-ab.sh OLD_FJORD NEW_FJORD
#   ROUNDS=8 INPUT=row-runs COMPRESSION=none scripts/bench-ab.sh a/fjord b/fjord
#
# Build the two binaries first (e.g. a `git worktree` of the old commit,
# `cargo build --release -p fjord`) and pass copies of them. Environment:
# ROUNDS (5), ROWS (5000000), INPUT (rows | typed-rows | row-runs | arrow), COMPRESSION
# (zstd | lz4 | none), OUT (the JSON lines; default a temp file).
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 OLD_FJORD NEW_FJORD" >&2; exit 2; }
A=$1
B=$2
ROUNDS=${ROUNDS:-5}
ROWS=${ROWS:-5000000}
INPUT=${INPUT:-rows}
COMPRESSION=${COMPRESSION:-zstd}
WORK=$(mktemp -d -t fjord-bench-ab.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
DATA_DIR=$(mktemp -d -p /dev/shm fjord-bench-ab-data.XXXXXX 2>/dev/null || mktemp -d)

# shellcheck source=lib/bench-server.sh
source "$(dirname "$0")/lib/bench-server.sh"
start_bench_server "$B" "$DATA_DIR" "$WORK/server.log"
echo "server $ADDR; A=$A B=$B; $ROUNDS rounds of $ROWS rows, $INPUT, $COMPRESSION; results in $OUT" >&2

for round in $(seq "$ROUNDS"); do
    echo "--- round $round of $ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    for side in A B; do
        bin=$A
        [[ $side == B ]] && bin=$B
        "$bin" bench write --bootstrap "$ADDR" --rows "$ROWS" --compression "$COMPRESSION" \
            --input "$INPUT" | sed "s/^{/{\"side\":\"$side\",/" >>"$OUT"
    done
    "$B" bench compress-floor --rows "$ROWS" --compression "$COMPRESSION" \
        | sed 's/^{/{"side":"floor",/' >>"$OUT"
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = {"A": [], "B": [], "floor": []}
for line in open(sys.argv[1]):
    record = json.loads(line)
    runs[record["side"]].append(record)
med = lambda xs: statistics.median(xs)
floor = [r["client_cpu_ns_per_record"] for r in runs["floor"]]
print(f"floor: {med(floor):.1f} ns/record (min {min(floor):.1f}, max {max(floor):.1f})")
for side in ("A", "B"):
    cpu = [r["client_cpu_ns_per_record"] for r in runs[side]]
    split = "/".join(
        f"{med([r[k] for r in runs[side]]):.1f}"
        for k in ("caller_cpu_ns_per_record", "encoder_cpu_ns_per_record", "runtime_cpu_ns_per_record")
    )
    per_round = [c / f for c, f in zip(cpu, floor)]
    print(
        f"{side}: {med(cpu):.1f} ns/record (caller/encoder/runtime {split}); "
        f"over the floor: {med(cpu) / med(floor):.3f} (medians), {med(per_round):.3f} (per round: "
        + ", ".join(f"{x:.3f}" for x in per_round) + ")"
    )
PY
