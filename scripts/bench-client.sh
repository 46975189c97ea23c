#!/usr/bin/env bash
# The issue-4 client benchmark: the native writer (`fjord bench write`), the
# fluss-rs writer (examples/fluss_rs_bench.rs) and the compression floor
# (`fjord bench compress-floor`, twice: on the Arrow input's batches and on
# batches of the row writer's size) on the same workload against ONE server,
# the native writer handed rows one at a time (`append`, as datums and as a
# row type with typed fields), in runs of 256 (`append_rows`) and as Arrow
# batches,
# alternating run by run, then medians and the ratios measured in this run.
#
#   scripts/bench-client.sh                 # 5 rounds, 5 M user_behavior rows
#   ROUNDS=3 ROWS=2000000 scripts/bench-client.sh
#
# Environment: ROUNDS (5), ROWS (5000000, user_behavior), LONG_ROWS
# (50000000, the one-BIGINT schema), SCAN (1: also time the scanners),
# PARTS (1: also the issue-5 pair, `--partitioned` against `--day-column`,
# rows, NONE and ZSTD), DATA_DIR (the directory in which the server's
# fresh data directory is made, and removed at exit; default the run's temp
# dir on the disk — /dev/shm takes the disk out of the end-to-end figures),
# CARGO_TARGET_DIR (target), OUT (the JSON lines; default a temp file).
# Builds release once; the server is `fjord server` on a temp data dir, a
# separate process, so no client figure includes its CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
ROWS=${ROWS:-5000000}
LONG_ROWS=${LONG_ROWS:-50000000}
SCAN=${SCAN:-1}
PARTS=${PARTS:-1}
TARGET=${CARGO_TARGET_DIR:-target}
WORK=$(mktemp -d -t fjord-bench-client.XXXXXX)
OUT=${OUT:-$WORK/results.jsonl}
DATA_DIR=$(mktemp -d "${DATA_DIR:-$WORK}/fjord-bench-data.XXXXXX")

cargo build --release -p fjord --bin fjord --example fluss_rs_bench
# Copies, so a rebuild by someone else mid-run cannot change what is measured.
cp "$TARGET/release/fjord" "$WORK/fjord"
cp "$TARGET/release/examples/fluss_rs_bench" "$WORK/fluss_rs_bench"
FJORD=$WORK/fjord
FLUSS_RS=$WORK/fluss_rs_bench

# shellcheck source=lib/bench-server.sh
source scripts/lib/bench-server.sh
start_bench_server "$FJORD" "$DATA_DIR" "$WORK/server.log" "$FJORD" "$FLUSS_RS"
echo "server $ADDR (pid $SERVER_PID, data in $DATA_DIR); results in $OUT" >&2
echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" >&2

run() {
    echo "+ $*" >&2
    "$@" | tee -a "$OUT"
}
native() { run "$FJORD" bench write --bootstrap "$ADDR" "$@"; }
# Tags a run's JSON line (runs of one key, e.g. partitioned vs day-column).
tagged() {
    local tag=$1
    shift
    echo "+ $* [$tag]" >&2
    "$@" | sed "s/^{/{\"tag\":\"$tag\",/" | tee -a "$OUT"
}
fluss_rs() { run "$FLUSS_RS" --bootstrap "$ADDR" "$@"; }
floor() { run "$FJORD" bench compress-floor "$@"; }

for round in $(seq "$ROUNDS"); do
    echo "--- round $round of $ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    for compression in none zstd; do
        # Alternate who goes first so neither always meets a warmer or busier machine.
        if (( round % 2 )); then
            native --rows "$ROWS" --compression "$compression"
            fluss_rs --rows "$ROWS" --compression "$compression"
        else
            fluss_rs --rows "$ROWS" --compression "$compression"
            native --rows "$ROWS" --compression "$compression"
        fi
        native --rows "$ROWS" --compression "$compression" --input typed-rows
        native --rows "$ROWS" --compression "$compression" --input row-runs
        native --rows "$ROWS" --compression "$compression" --input arrow
        # Two floors, each on the batches its writers compress: the Arrow
        # input's (the generated batches, handed over whole) and the row
        # inputs' (sealed at the batch size with the learned compression
        # ratio: rows per batch of this round's rows run).
        floor --rows "$ROWS" --compression "$compression"
        batch_rows=$(grep '"client":"fjord"' "$OUT" | grep '"input":"rows"' \
            | grep "\"compression\":\"$compression\"" \
            | grep '"schema":"user_behavior"' | grep -v '"tag"' | tail -1 \
            | python3 -c 'import json, sys; r = json.load(sys.stdin); print(round(r["records"] / max(r["batches"], 1)))')
        tagged writer-batches "$FJORD" bench compress-floor --rows "$ROWS" \
            --compression "$compression" --batch-rows "$batch_rows"
    done
    if [[ $PARTS == 1 ]]; then
        for compression in none zstd; do
            for tag in $( (( round % 2 )) && echo "partitioned day-column" || echo "day-column partitioned"); do
                tagged "$tag" "$FJORD" bench write --bootstrap "$ADDR" --rows "$ROWS" \
                    --compression "$compression" "--$tag"
            done
        done
    fi
    native --rows "$LONG_ROWS" --schema long --compression none --input arrow
    native --rows "$LONG_ROWS" --schema long --compression none --input rows
    if [[ $SCAN == 1 ]]; then
        run "$FJORD" bench scan --bootstrap "$ADDR" --rows "$ROWS" --compression zstd
        fluss_rs --rows "$ROWS" --compression zstd --op scan
    fi
done

python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
groups = {}
for r in runs:
    tag = r.get("tag")
    key = (r["op"], r["schema"], r["compression"], r["client"],
           r["input"] + ("/" + tag if tag else ""))
    groups.setdefault(key, []).append(r)
med = {}
print(f"{'op':6} {'schema':13} {'comp':5} {'client':13} {'input':16} {'n':>2} "
      f"{'records/s':>12} {'MB/s':>8} {'cpu ns/rec':>10}  (min..max cpu)  "
      f"[caller/encoder/runtime ns/rec, page faults]")
def split(rs):
    if "caller_cpu_ns_per_record" not in rs[0]:
        return ""
    m = lambda f: statistics.median(r[f] for r in rs)
    return (f"  [{m('caller_cpu_ns_per_record'):.1f}/{m('encoder_cpu_ns_per_record'):.1f}/"
            f"{m('runtime_cpu_ns_per_record'):.1f}, {m('page_faults'):.0f}]")
for key in sorted(groups):
    rs = groups[key]
    cpu = [r["client_cpu_ns_per_record"] for r in rs]
    rate = statistics.median(r["records_per_s"] for r in rs)
    mbs = statistics.median(r["mb_per_s"] for r in rs)
    med[key] = (statistics.median(cpu), rate)
    print(f"{key[0]:6} {key[1]:13} {key[2]:5} {key[3]:13} {key[4]:16} {len(rs):2} "
          f"{rate:12.0f} {mbs:8.1f} {med[key][0]:10.1f}  ({min(cpu):.1f}..{max(cpu):.1f})"
          f"{split(rs)}")
def cpu(*key):
    return med.get(key, (None, None))[0]
def ratio(name, a, b, target):
    if a is None or b is None or b == 0:
        return
    print(f"{name}: {a / b:.3f} (target {target})")
print()
for comp in ("none", "zstd"):
    f = cpu("write", "user_behavior", comp, "fjord", "rows")
    ft = cpu("write", "user_behavior", comp, "fjord", "typed_rows")
    fr = cpu("write", "user_behavior", comp, "fjord", "row_runs")
    fa = cpu("write", "user_behavior", comp, "fjord", "arrow")
    rs = cpu("write", "user_behavior", comp, "fluss-rs", "rows")
    fl = cpu("compress-floor", "user_behavior", comp, "compress-only", "arrow")
    ratio(f"{comp}: fjord rows / fluss-rs rows, CPU per record", f, rs,
          "<= 0.333" if comp == "none" else "< 1")
    ratio(f"{comp}: fjord typed rows / fluss-rs rows, CPU per record", ft, rs,
          "<= 0.333" if comp == "none" else "< 1")
    ratio(f"{comp}: fjord row runs / fluss-rs rows, CPU per record", fr, rs,
          "<= 0.333" if comp == "none" else "< 1")
    ratio(f"{comp}: fjord arrow / fluss-rs rows, CPU per record", fa, rs, "-")
    if comp == "zstd":
        # Each input over the floor of the batches it compresses (row
        # inputs: the writer's own batch size; Arrow: the generated
        # batches); the row inputs over the Arrow batches' floor too.
        for name, inp, floor_input, target in (
            ("rows", "rows", "arrow/writer-batches", "<= 1.25"),
            ("typed rows", "typed_rows", "arrow/writer-batches", "<= 1.25"),
            ("row runs", "row_runs", "arrow/writer-batches", "<= 1.25"),
            ("arrow", "arrow", "arrow", "<= 1.25"),
            ("rows", "rows", "arrow", "-"),
            ("typed rows", "typed_rows", "arrow", "-"),
            ("row runs", "row_runs", "arrow", "-"),
        ):
            a = groups.get(("write", "user_behavior", comp, "fjord", inp), [])
            b = groups.get(("compress-floor", "user_behavior", comp, "compress-only", floor_input), [])
            if not a or not b:
                continue
            per_round = [x["client_cpu_ns_per_record"] / y["client_cpu_ns_per_record"]
                         for x, y in zip(a, b)]
            which = "its batches' floor" if floor_input != "arrow" else "the Arrow batches' floor"
            print(f"zstd: fjord {name} / {which}, CPU per record: "
                  f"{cpu('write', 'user_behavior', comp, 'fjord', inp) / cpu('compress-floor', 'user_behavior', comp, 'compress-only', floor_input):.3f}"
                  f" by medians, {statistics.median(per_round):.3f} by rounds "
                  f"({', '.join(f'{r:.3f}' for r in per_round)}) (target {target})")
for comp in ("none", "zstd"):
    ratio(f"{comp}: partitioned / day-column (unpartitioned, same rows), CPU per record",
          cpu("write", "user_behavior", comp, "fjord", "rows/partitioned"),
          cpu("write", "user_behavior", comp, "fjord", "rows/day-column"), "<= 1.15")
for inp in ("arrow", "rows"):
    m = med.get(("write", "long", "none", "fjord", inp))
    if m:
        print(f"long/none {inp}: {m[1] / 1000:.0f} records/ms end to end (target >= 100000)")
PY
