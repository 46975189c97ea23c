#!/usr/bin/env bash
# The primary-key workload of examples/fluss_rs_kv_bench.rs (fluss-rs 1.0.0:
# upserts, then lookups with many in flight) against the real Apache Fluss
# server: starts a fresh Java cluster (scripts/fluss-java-server.sh) in a
# temporary directory, runs the example with the tablet server's pid (so the
# JSON lines carry the server's CPU per record), stops the cluster and
# removes the directory. The JSON lines go to stdout; everything else to
# stderr. Arguments pass through to the example; its defaults are the
# reference run (--mode both --keys 1600000 --update-fraction 0.2
# --buckets 4 --batch-size 1048576 --in-flight 256).
#
#   scripts/bench-kv-java.sh
#   scripts/bench-kv-java.sh --keys 200000 --lookups 500000
#
# Environment: FLUSS_RS_KV_BENCH (a built example binary; default: build it
# with cargo, release), CARGO_TARGET_DIR (target), KEEP=1 (keep the cluster's
# directory, with its logs, after the run), and the FLUSS_* variables of
# scripts/fluss-java-server.sh (ports, JVM options, extra server.yaml lines).
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=$(mktemp -d -t fjord-bench-kv-java.XXXXXX)
if [[ -z ${FLUSS_RS_KV_BENCH:-} ]]; then
    cargo build --release -p fjord --example fluss_rs_kv_bench >&2
    FLUSS_RS_KV_BENCH=${CARGO_TARGET_DIR:-target}/release/examples/fluss_rs_kv_bench
fi
# A copy, so a rebuild by someone else mid-run cannot change what is measured.
cp "$FLUSS_RS_KV_BENCH" "$WORK/fluss_rs_kv_bench"

CLUSTER=$WORK/cluster
cleanup() {
    scripts/fluss-java-server.sh stop "$CLUSTER" || true
    if [[ ${KEEP:-0} == 1 ]]; then
        echo "kept $WORK (cluster logs in $CLUSTER/logs)" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/fluss-java-server.sh start "$CLUSTER" >"$WORK/cluster.env"
bootstrap=$(sed -n 's/^bootstrap=//p' "$WORK/cluster.env")
tablet_server_pid=$(sed -n 's/^tablet_server_pid=//p' "$WORK/cluster.env")
[[ -n $bootstrap && -n $tablet_server_pid ]] || {
    cat "$WORK/cluster.env" >&2
    echo "bench-kv-java: no bootstrap / tablet_server_pid from fluss-java-server.sh" >&2
    exit 1
}
echo "Fluss (Java) at $bootstrap, tablet server pid $tablet_server_pid;" \
    "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" >&2

"$WORK/fluss_rs_kv_bench" --bootstrap "$bootstrap" --server-pid "$tablet_server_pid" "$@"
