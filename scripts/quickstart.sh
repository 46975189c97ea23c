#!/usr/bin/env bash
# Fjord's quickstart: build the release binary, then `fjord quickstart`, which
# starts `fjord server` on a temporary data dir and a free loopback port,
# creates a log table, writes and reads back 1 million rows through Fjord's
# native client, and prints what it did and how fast. Needs only a Rust
# toolchain (present on every machine of this project); safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "quickstart: cargo not found; install Rust (https://rustup.rs) and re-run" >&2
    exit 1
fi

# Persistent, outside the clone, so repeated runs rebuild incrementally.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/fjord-target}"
cargo build --release -p fjord
exec "$CARGO_TARGET_DIR/release/fjord" quickstart "$@"
