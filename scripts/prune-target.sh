#!/usr/bin/env bash
# Keeps the persistent CARGO_TARGET_DIR from filling the disk.
#
# Every rebuild of a test leaves its previous executable behind under a new
# hash, and every session leaves an incremental cache; over weeks of CI runs
# on one machine they reached 60 GB and a run failed with "No space left on
# device". This removes, under $CARGO_TARGET_DIR/{debug,release}:
#   - executables in deps/ superseded by a newer build of the same target
#     (same name before the hash), keeping the newest of each;
#   - the workspace's own libraries and incremental caches not touched for PRUNE_INCREMENTAL_DAYS (default 2).
# Cargo rebuilds anything it still needs, so nothing removed here can make a
# build wrong, only slower.
set -euo pipefail

TARGET="${CARGO_TARGET_DIR:-/var/tmp/fjord-target}"
DAYS="${PRUNE_INCREMENTAL_DAYS:-2}"
[ -d "$TARGET" ] || exit 0

for profile in debug release; do
    deps="$TARGET/$profile/deps"
    if [ -d "$deps" ]; then
        # Executables have no extension; group by the name before "-<hash>".
        find "$deps" -maxdepth 1 -type f -perm -u+x ! -name '*.*' -printf '%T@ %f\n' |
            sort -rn |
            awk '{ name = $2; sub(/-[0-9a-f]+$/, "", name); if (seen[name]++) print $2 }' |
            while read -r stale; do rm -f "$deps/$stale"; done
    fi
    if [ -d "$deps" ]; then
        # The workspace's own libraries are rebuilt on nearly every change;
        # their old copies are never used again.
        find "$deps" -maxdepth 1 -type f \( -name 'libfjord*' -o -name 'fjord*' \) \
            -mtime +"$DAYS" -delete
    fi
    inc="$TARGET/$profile/incremental"
    if [ -d "$inc" ]; then
        find "$inc" -mindepth 1 -maxdepth 1 -type d -mtime +"$DAYS" -exec rm -rf {} +
    fi
done
