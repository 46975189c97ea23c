#!/usr/bin/env bash
# Runs the project's fuzz targets for a while each and fails on any crash.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
#   SECONDS  time per target (default 60)
#   TARGET   targets to run (default: every [[bin]] of fuzz/Cargo.toml)
#
# Installs what it needs when missing: the nightly toolchain and cargo-fuzz.
# Builds in its own target dir (FUZZ_TARGET_DIR, default
# /var/tmp/fjord-fuzz-target), outside the clone and apart from the normal
# build. Each target starts from fuzz/corpus/<target>/ when it exists (read
# only: new inputs go to a scratch corpus, so a run leaves the clone
# unchanged) plus fuzz/regressions/<target>/.
#
# On a crash, libFuzzer writes the input to fuzz/artifacts/<target>/; the
# script prints the target, that file and the panic (the run's whole log is
# kept as fuzz/artifacts/<target>/last-run.log), goes on with the other
# targets, and exits non-zero at the end. To keep a fixed crash covered by
# `cargo test`, copy the file into fuzz/regressions/<target>/ (replayed by
# crates/fjord-format/tests/fuzz_regressions.rs for fjord-format's targets).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

seconds=60
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
    seconds="$1"
    shift
fi
if [ "$seconds" -lt 1 ]; then
    echo "fuzz.sh: SECONDS must be at least 1" >&2
    exit 2
fi

# Every [[bin]] name of fuzz/Cargo.toml, in file order.
all_targets() {
    awk '
        /^\[/ { in_bin = ($0 == "[[bin]]") }
        in_bin && /^name *=/ { gsub(/^name *= *"|".*$/, ""); print }
    ' fuzz/Cargo.toml
}

mapfile -t known < <(all_targets)
if [ ${#known[@]} -eq 0 ]; then
    echo "fuzz.sh: no [[bin]] found in fuzz/Cargo.toml" >&2
    exit 2
fi
if [ $# -gt 0 ]; then
    targets=("$@")
    for t in "${targets[@]}"; do
        if ! printf '%s\n' "${known[@]}" | grep -qx -- "$t"; then
            echo "fuzz.sh: unknown target '$t' (known: ${known[*]})" >&2
            exit 2
        fi
    done
else
    targets=("${known[@]}")
fi

# Tools: the nightly toolchain (libFuzzer's sanitizer flags need it) and cargo-fuzz.
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "=== fuzz.sh: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal || exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "=== fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked || exit 2
fi

export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-/var/tmp/fjord-fuzz-target}"

echo "=== fuzz.sh: building ${#targets[@]} target(s) in $CARGO_TARGET_DIR"
for t in "${targets[@]}"; do
    cargo +nightly fuzz build "$t" || {
        echo "=== fuzz.sh: building $t failed" >&2
        exit 2
    }
done

scratch="$(mktemp -d "${TMPDIR:-/tmp}/fjord-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

passed=()
crashed=()
for t in "${targets[@]}"; do
    corpus=("$scratch/$t")
    mkdir -p "$scratch/$t"
    [ -d "fuzz/corpus/$t" ] && corpus+=("fuzz/corpus/$t")
    [ -d "fuzz/regressions/$t" ] && corpus+=("fuzz/regressions/$t")
    artifacts="fuzz/artifacts/$t"
    mkdir -p "$artifacts"
    log="$scratch/$t.log"
    printf '\n=== fuzz.sh: %s for %ss (corpus: %s)\n' "$t" "$seconds" "${corpus[*]:1}"
    started="$(date +%s)"
    cargo +nightly fuzz run "$t" "${corpus[@]}" -- \
        -max_total_time="$seconds" \
        -artifact_prefix="$artifacts/" \
        -print_final_stats=1 >"$log" 2>&1
    rc=$?
    grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::number_of_executed_units)' "$log" | tail -2
    if [ "$rc" -eq 0 ]; then
        passed+=("$t")
    else
        # The input libFuzzer saved for this failure: written since the run started.
        crash="$(find "$artifacts" -type f ! -name last-run.log -newermt "@$started" 2>/dev/null | head -1)"
        cp "$log" "$artifacts/last-run.log"
        grep -E -A3 'panicked at|==ERROR|^ERROR: libFuzzer|^SUMMARY' "$log" | head -30
        echo "(whole log: $artifacts/last-run.log)"
        printf '=== fuzz.sh: CRASH in target %s (exit %d): %s\n' "$t" "$rc" "${crash:-no artifact written, see the log above}"
        crashed+=("$t:${crash:-?}")
    fi
done

printf '\n=== fuzz.sh summary (%ss each): passed: [%s] crashed: [%s]\n' \
    "$seconds" "${passed[*]:-}" "${crashed[*]:-}"
[ ${#crashed[@]} -eq 0 ]
