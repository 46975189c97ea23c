#!/usr/bin/env bash
# Installs what Fjord's test suite needs on a Debian machine, as root, from
# nothing: MariaDB (the CDC tests start their own `mariadbd`; it is installed,
# never started here), psql (postgresql-client, for the SQL endpoint), a JDK
# and Maven for the Java client interop tests, the pinned Python packages of
# interop/python/requirements.txt, and the Maven dependencies of interop/java,
# interop/diff and interop/flink (and the real Fluss server's jars that
# interop/diff starts).
#
# Idempotent and quick when everything is present: each step checks first and
# does nothing if its check passes; `apt-get update` runs only when a package
# must be installed. The Rust toolchain (cargo) is expected on the machine.
#
# Usage: scripts/install-deps.sh        (from anywhere; paths are repo-relative)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive

log() { printf 'install-deps: %s\n' "$*" >&2; }

# --- Debian packages ----------------------------------------------------------
apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        apt-get update -qq
        apt_updated=1
    fi
    log "apt-get install -y $*"
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# `mariadbd` lives in /usr/sbin, which a non-login PATH may lack.
have_mariadbd() { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; }

missing=()
have_mariadbd || missing+=(mariadb-server)
command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v "$PYTHON" >/dev/null 2>&1 || missing+=(python3)
# psql for the Postgres endpoint's tests; it brings libpq5, which psycopg uses.
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
fi
have_mariadbd || { log "mariadbd still missing after installing mariadb-server"; exit 1; }
command -v cargo >/dev/null 2>&1 || { log "cargo not found: install the Rust toolchain first"; exit 1; }

# --- Python packages (pinned) -------------------------------------------------
REQUIREMENTS="$ROOT/interop/python/requirements.txt"
# Exit 0 when every `name==version` pin of the requirements file is installed.
pins_satisfied() {
    "$PYTHON" - "$REQUIREMENTS" <<'EOF'
import sys
from importlib import metadata

for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        if metadata.version(name.strip()) != version.strip():
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
EOF
}
if ! pins_satisfied; then
    if ! "$PYTHON" -c 'import pip' >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    pip_flags=(-q --disable-pip-version-check)
    # Debian's own python3 refuses pip installs (PEP 668) unless told otherwise;
    # this machine is a dedicated test host, so installing system-wide is intended.
    if "$PYTHON" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
        pip_flags+=(--break-system-packages)
    fi
    log "pip install -r interop/python/requirements.txt"
    "$PYTHON" -m pip install "${pip_flags[@]}" -r "$REQUIREMENTS"
    pins_satisfied || { log "pinned Python packages still not satisfied after pip install"; exit 1; }
fi

# --- Maven dependencies of interop/java, interop/diff, interop/flink -----------
# A stamp named after each pom's hash records a successful resolution into the
# local repository, so an unchanged pom costs no Maven start-up (~20 s here).
M2_REPO="${M2_REPO:-$HOME/.m2/repository}"
for module in java diff flink; do
    POM_HASH="$(sha256sum "$ROOT/interop/$module/pom.xml" | cut -c1-16)"
    STAMP="$M2_REPO/.fjord-interop-$module-$POM_HASH"
    if [ ! -e "$STAMP" ]; then
        log "mvn dependency:go-offline test-compile (interop/$module)"
        mvn -q -B -f "$ROOT/interop/$module" dependency:go-offline test-compile
        mkdir -p "$M2_REPO" && touch "$STAMP"
    fi
done

# --- the real Fluss server (scripts/fluss-java-server.sh; interop/diff) --------
# Resolving its two classpaths once here keeps the first test run offline.
POM_HASH="$(sha256sum "$ROOT/interop/fluss-server/pom.xml" | cut -c1-16)"
STAMP="$M2_REPO/.fjord-interop-fluss-server-$POM_HASH"
if [ ! -e "$STAMP" ]; then
    log "mvn dependency:build-classpath (interop/fluss-server)"
    cp_dir="$(mktemp -d)"
    mvn -q -B -f "$ROOT/interop/fluss-server/pom.xml" -Dclasspath.dir="$cp_dir" \
        dependency:build-classpath@server dependency:build-classpath@probe
    rm -rf "$cp_dir"
    mkdir -p "$M2_REPO" && touch "$STAMP"
fi

log "all dependencies present"
