#!/usr/bin/env bash
# Fjord's whole test suite — the README's test command:
#   1. scripts/install-deps.sh (idempotent; quick when everything is present)
#   2. cargo test --workspace --no-fail-fast (unit, integration and fluss-rs interop tests;
#      also builds the `fjord` binary)
#   3. pytest interop/python (the pyfluss client against that binary)
#   4. mvn -f interop/java test (the Fluss Java client against that binary)
#   4b. mvn -f interop/diff test (that binary against the real Fluss 0.9.1
#      server, response by response) and mvn -f interop/flink test (Flink SQL
#      with the Fluss connector against the binary)
#   5. scripts/fuzz.sh FUZZ_SECONDS (default 5): every fuzz target briefly, on
#      top of its corpus and recorded crashes, so a crash found once stays
#      found and a new decoder's target at least runs
# Every part runs even when an earlier one failed, so one run shows all
# failures; the script exits non-zero if any part failed (including pytest
# collecting no tests) and ends with a one-line summary.
#
# CARGO_TARGET_DIR defaults to a persistent directory outside the clone so
# repeated runs (and CI in a fresh clone) reuse the build.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/fjord-target}"
PYTHON="${PYTHON:-python3}"

passed=()
failed=()
# run_part NAME CMD...: runs one part, records PASS/FAIL by its exit code.
run_part() {
    local name="$1"
    shift
    printf '\n=== test.sh: %s: %s\n' "$name" "$*"
    "$@"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        passed+=("$name")
    else
        printf '=== test.sh: %s FAILED (exit %d)\n' "$name" "$rc"
        failed+=("$name")
    fi
    return 0
}

summary() {
    printf '\n=== test.sh summary: passed: [%s] failed: [%s]\n' "${passed[*]:-}" "${failed[*]:-}"
    printf 'suites: %d passed, %d failed\n' "${#passed[@]}" "${#failed[@]}"
}

if ! bash "$ROOT/scripts/install-deps.sh"; then
    failed+=("install-deps")
    summary
    exit 1
fi

run_part cargo cargo test --workspace --no-fail-fast

export FJORD_BIN="$CARGO_TARGET_DIR/debug/fjord"
if [ ! -x "$FJORD_BIN" ]; then
    printf '=== test.sh: %s was not built; the client interop suites cannot run\n' "$FJORD_BIN"
    failed+=("pytest" "maven" "diff" "flink")
    summary
    exit 1
fi

# pytest exits 5 when it collected no tests: that is a failure here, since the
# interop suite must never silently vanish. run_part counts any non-zero exit.
run_part pytest "$PYTHON" -m pytest -q -p no:cacheprovider "$ROOT/interop/python"

run_part maven mvn -B -f "$ROOT/interop/java" test

# The real Fluss 0.9.1 server (scripts/fluss-java-server.sh, three JVMs) and
# the fjord binary answer the same request sequences the same, field by field.
run_part diff mvn -B -f "$ROOT/interop/diff" test

# Flink 1.20 SQL through the unmodified Fluss connector against the binary.
run_part flink mvn -B -f "$ROOT/interop/flink" test

run_part fuzz bash "$ROOT/scripts/fuzz.sh" "${FUZZ_SECONDS:-5}"

summary
[ "${#failed[@]}" -eq 0 ]
