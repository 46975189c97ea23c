#!/usr/bin/env bash
# Instructions a record on the writer's caller thread (the thread that hands
# rows to `AppendWriter`), counted by valgrind's callgrind: deterministic,
# unlike time on this shared 2-core machine, so a change to the row path
# shows as a count. The figure is the main thread's instructions minus the
# workload generation (`workload::generate`, before the timed phase),
# divided by the rows. The encoder's thread (the busiest other thread) is
# printed apart, its whole count divided by the rows; every thread's file
# is kept in the output directory.
#
#   scripts/callgrind-caller.sh                       # rows one at a time, ZSTD, 1 M rows
#   ROWS=300000 INPUT=row-runs scripts/callgrind-caller.sh
#
# Environment: ROWS (1000000), INPUT (rows | typed-rows | row-runs | arrow), COMPRESSION
# (zstd | lz4 | none), CARGO_TARGET_DIR (target), OUT (directory for the
# callgrind files; default a temp dir), FJORD (a `fjord` binary to measure
# instead of building this checkout's, e.g. an older commit's). Builds
# release once; the server is
# `fjord server` on a tmpfs data directory, a separate process that is not
# instrumented. Needs valgrind (apt install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
INPUT=${INPUT:-rows}
COMPRESSION=${COMPRESSION:-zstd}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=${OUT:-$(mktemp -d -t fjord-callgrind.XXXXXX)}

command -v valgrind >/dev/null || { echo "valgrind not found: apt install valgrind" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "callgrind_annotate not found (valgrind package)" >&2; exit 1; }

if [[ -z ${FJORD:-} ]]; then
    cargo build --release -p fjord --bin fjord
    FJORD="$TARGET/release/fjord"
fi
DATA_DIR=$(mktemp -d -p /dev/shm fjord-callgrind-data.XXXXXX 2>/dev/null || mktemp -d)

# shellcheck source=lib/bench-server.sh
source scripts/lib/bench-server.sh
start_bench_server "$FJORD" "$DATA_DIR" "$OUT/server.log"

valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$OUT/callgrind.%p" \
    "$FJORD" bench write --bootstrap "$ADDR" --rows "$ROWS" \
    --compression "$COMPRESSION" --input "$INPUT" >"$OUT/bench.json" 2>"$OUT/valgrind.log"

MAIN=$(ls "$OUT"/callgrind.*-01)
# Read from files: a pipe closed early (head, grep -m1) would fail the script.
callgrind_annotate "$MAIN" >"$OUT/self.txt" 2>/dev/null
callgrind_annotate --inclusive=yes "$MAIN" >"$OUT/inclusive.txt" 2>/dev/null
total=$(sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' "$OUT/self.txt" | tr -d ,)
generate=$(awk '/workload::generate \[/ {gsub(",", "", $1); print $1; exit}' "$OUT/inclusive.txt")
[[ -n $total && -n $generate ]] || { echo "could not read $MAIN" >&2; exit 1; }
# The encoder's thread: the busiest of the others in user space (it
# encodes and compresses; the runtime's threads mostly hand bytes to the
# kernel, which callgrind does not count).
encoder=0
for file in "$OUT"/callgrind.*-*; do
    [[ $file == "$MAIN" ]] && continue
    callgrind_annotate "$file" >"$OUT/thread.txt" 2>/dev/null || continue
    n=$(sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' "$OUT/thread.txt" | tr -d ,)
    if (( ${n:-0} > encoder )); then encoder=$n; fi
done
echo "{\"input\":\"$INPUT\",\"compression\":\"$COMPRESSION\",\"rows\":$ROWS,\"caller_instructions_per_record\":$(( (total - generate) / ROWS )),\"encoder_instructions_per_record\":$(( encoder / ROWS )),\"callgrind_dir\":\"$OUT\"}"
