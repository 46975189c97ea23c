#!/usr/bin/env bash
# The real Apache Fluss server (Java, 0.9.1-incubating) as a local cluster of
# three JVMs, for benchmarks and differential tests that compare Fjord with
# the reference implementation:
#
#   scripts/fluss-java-server.sh start  DIR   # start (or report) the cluster in DIR
#   scripts/fluss-java-server.sh status DIR   # what runs, where; exit 0 = all running
#   scripts/fluss-java-server.sh stop   DIR   # TERM, then KILL, the recorded pids
#
# `start` prints, on stdout and nothing else, one `key=value` per line:
#
#   bootstrap=127.0.0.1:PORT              the coordinator: give it to clients as
#                                         bootstrap servers (Fluss's convention)
#   coordinator_address=127.0.0.1:PORT
#   tablet_server_address=127.0.0.1:PORT  the one tablet server (id 0): it holds
#                                         every bucket, log and KV
#   zookeeper_address=127.0.0.1:PORT
#   tablet_server_pid=NNN                 e.g. for /proc/NNN/stat (server CPU)
#   coordinator_pid=NNN
#   zookeeper_pid=NNN
#   logs=DIR/logs
#
# Progress and errors go to stderr. Parse with e.g.
#   eval "$(scripts/fluss-java-server.sh start "$DIR" | grep -E '^[a-z_]+=[^ ]*$')"
#
# What it runs, as Fluss's own bin/local-cluster.sh does (zookeeper, then
# coordinator-server.sh, then tablet-server.sh), but each JVM started directly
# so its pid is exact, all on 127.0.0.1 only:
#
#   zookeeper       org.apache.fluss.shaded.zookeeper3.org.apache.zookeeper.server.quorum.QuorumPeerMain
#                   DIR/conf/zookeeper.properties (standalone, clientPortAddress
#                   127.0.0.1, admin server off, `ruok` allowed for the readiness check)
#   coordinator     org.apache.fluss.server.coordinator.CoordinatorServer
#                   --configDir DIR/conf/coordinator-server (its server.yaml)
#   tablet server   org.apache.fluss.server.tablet.TabletServer
#                   --configDir DIR/conf/tablet-server (its server.yaml, tablet-server.id 0)
#
# All three classes are in the one fluss-server jar from Maven Central (a fat
# jar: ZooKeeper, Curator, Netty, Arrow, Jackson shaded under
# org.apache.fluss.shaded; RocksDB's JNI library for linux64 inside). The jar
# has the SLF4J API but no binding, so log4j 2 (the version Fluss ships in its
# distribution's lib/) is added to write each process's log file. Maven
# resolves both, once, into the local repository through
# interop/fluss-server/pom.xml; the resolved classpaths are cached in
# DIR/classpath and reused while the pom is unchanged.
#
# JVM options: --add-opens=java.base/java.nio=ALL-UNNAMED on every JVM (Arrow
# needs it on Java 17 and later; Fluss's bin/fluss-daemon.sh adds the same),
# G1 on the tablet server (as bin/tablet-server.sh), and a heap cap per role so
# three JVMs stay polite on a shared machine (env vars below).
#
# Ready means: ZooKeeper answers `ruok` with `imok`; the coordinator's and the
# tablet server's ports accept connections; and a real request works: a
# probe with the official Java client (fluss-client 0.9.1-incubating, Java
# source inlined below, run with the JDK's source launcher), bootstrapped at
# the tablet server (which answers its metadata request), lists the cluster's
# server nodes through the coordinator until the coordinator sees the tablet
# server, then lists databases. Every wait is bounded; a process that exits or
# a wait that times out fails `start` with the log's tail, and what was started
# is stopped again (FLUSS_KEEP_ON_FAILURE=1 keeps it for a post-mortem).
#
# Layout of DIR: conf/ (generated configs), logs/<role>.log (log4j) and
# logs/<role>.out (stdout/stderr of the JVM), data/ (ZooKeeper, coordinator,
# tablet server, remote snapshots), pids/<role>.pid, ports.env (the ports in
# use), classpath/ (the cache above). `start` on a DIR whose cluster runs
# only reports it; on a DIR with stale pids (e.g. after a crash) it stops
# whatever of it still runs and starts all three again on the same data
# (after a tablet server was killed, the new one registers only once its old
# ZooKeeper session has expired, about a minute; the probe waits for that).
#
# `stop` only signals a recorded pid whose command line still carries this
# DIR and role (-Dfluss.harness.dir, -Dfluss.harness.role), so a recycled pid
# is never hit; it stops the tablet server, then the coordinator, then
# ZooKeeper, each with TERM and, after FLUSS_STOP_TIMEOUT seconds, KILL. It is
# idempotent: nothing recorded, nothing to do, exit 0. Data and logs stay.
#
# Environment (all optional):
#   FLUSS_ZK_PORT, FLUSS_COORDINATOR_PORT, FLUSS_TABLET_SERVER_PORT
#                          fixed ports (default: free ports picked at random
#                          in 20000-32767, below Linux's ephemeral range)
#   FLUSS_ZK_JAVA_OPTS     (-Xmx256m)  JVM options of each role
#   FLUSS_COORDINATOR_JAVA_OPTS  (-Xmx1g)
#   FLUSS_TABLET_SERVER_JAVA_OPTS (-Xmx4g -XX:+UseG1GC)
#   FLUSS_SERVER_CONF      extra server.yaml lines (`key: value`, newline
#                          separated) for both coordinator and tablet server
#   FLUSS_LOG_LEVEL        root log level (INFO)
#   FLUSS_START_TIMEOUT    seconds per readiness wait (120)
#   FLUSS_STOP_TIMEOUT     seconds between TERM and KILL per process (30)
#   FLUSS_KEEP_ON_FAILURE  1: leave a failed start's processes running
#   JAVA                   the java binary (default $JAVA_HOME/bin/java or
#                          java on PATH; a JDK, for the probe's source launcher)
#   MVN                    the mvn binary (mvn)
#
# Needs: java (17 or later, a JDK) and mvn (scripts/install-deps.sh installs
# both), bash, coreutils; Maven Central on the first run. Installs nothing but
# Maven artifacts into the local repository.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/interop/fluss-server/pom.xml"
ROLES=(zookeeper coordinator-server tablet-server)
ZK_CLASS=org.apache.fluss.shaded.zookeeper3.org.apache.zookeeper.server.quorum.QuorumPeerMain
COORDINATOR_CLASS=org.apache.fluss.server.coordinator.CoordinatorServer
TABLET_SERVER_CLASS=org.apache.fluss.server.tablet.TabletServer
START_TIMEOUT=${FLUSS_START_TIMEOUT:-120}
STOP_TIMEOUT=${FLUSS_STOP_TIMEOUT:-30}
if [[ -n ${JAVA:-} ]]; then
    :
elif [[ -n ${JAVA_HOME:-} && -x ${JAVA_HOME}/bin/java ]]; then
    JAVA=$JAVA_HOME/bin/java
else
    JAVA=java
fi
MVN=${MVN:-mvn}
JAVA_COMMON_OPTS=(--add-opens=java.base/java.nio=ALL-UNNAMED)

log() { printf 'fluss-java-server: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}

usage() {
    cat <<'EOF'
usage: scripts/fluss-java-server.sh start|stop|status DIR
       scripts/fluss-java-server.sh --help

Runs the real Apache Fluss server (0.9.1-incubating: ZooKeeper, one
coordinator, one tablet server, each its own JVM on 127.0.0.1) with its
configs, logs, data and pids under DIR. `start` prints bootstrap=HOST:PORT,
tablet_server_pid=PID and the other addresses and pids, one key=value a line.
The comment at the top of this script documents the details and the
environment variables.
EOF
}

# --- state in DIR -----------------------------------------------------------

pid_file() { printf '%s/pids/%s.pid' "$DIR" "$1"; }

recorded_pid() {
    local f
    f=$(pid_file "$1")
    [[ -f $f ]] || return 1
    local pid
    pid=$(head -n 1 "$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    printf '%s' "$pid"
}

# True when PID is alive and is this DIR's ROLE (not a recycled pid).
is_ours() {
    local pid=$1 role=$2 cmdline
    [[ -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    grep -qxF -- "-Dfluss.harness.dir=$DIR" <<<"$cmdline" &&
        grep -qxF -- "-Dfluss.harness.role=$role" <<<"$cmdline"
}

# Prints the pid when ROLE's recorded process runs.
running_pid() {
    local pid
    pid=$(recorded_pid "$1") || return 1
    is_ours "$pid" "$1" || return 1
    printf '%s' "$pid"
}

load_ports() {
    ZK_PORT= COORDINATOR_PORT= TABLET_SERVER_PORT=
    if [[ -f $DIR/ports.env ]]; then
        local key value
        while IFS='=' read -r key value; do
            case $key in
            zookeeper_port) ZK_PORT=$value ;;
            coordinator_port) COORDINATOR_PORT=$value ;;
            tablet_server_port) TABLET_SERVER_PORT=$value ;;
            esac
        done <"$DIR/ports.env"
    fi
}

print_addresses() {
    printf 'bootstrap=127.0.0.1:%s\n' "$COORDINATOR_PORT"
    printf 'coordinator_address=127.0.0.1:%s\n' "$COORDINATOR_PORT"
    printf 'tablet_server_address=127.0.0.1:%s\n' "$TABLET_SERVER_PORT"
    printf 'zookeeper_address=127.0.0.1:%s\n' "$ZK_PORT"
}

# --- network checks (bash's /dev/tcp; nothing to install) --------------------

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

zk_ok() {
    local answer
    answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null) || true
    [[ $answer == imok ]]
}

# A port nobody listens on, below the ephemeral range so no outgoing
# connection takes it meanwhile. Not reserved: a race with another program
# picking the same port shows up as a bind error in the role's log.
free_port() {
    local port taken
    for _ in $(seq 200); do
        port=$((20000 + RANDOM % 12768))
        taken=0
        for p in "$@"; do [[ $p == "$port" ]] && taken=1; done
        ((taken)) && continue
        port_open "$port" && continue
        printf '%s' "$port"
        return 0
    done
    die "no free port found in 20000-32767"
}

# --- Maven ---------------------------------------------------------------------

# Sets SERVER_CP and PROBE_CP, resolving through Maven unless DIR's cache is
# current (same pom, every jar still in the local repository).
resolve_classpaths() {
    local cache=$DIR/classpath stamp
    stamp=$(sha256sum "$POM" | cut -d' ' -f1)
    if [[ -f $cache/stamp && $(cat "$cache/stamp") == "$stamp" ]] &&
        classpath_complete "$cache/server.classpath" && classpath_complete "$cache/probe.classpath"; then
        SERVER_CP=$(cat "$cache/server.classpath")
        PROBE_CP=$(cat "$cache/probe.classpath")
        return 0
    fi
    command -v "$MVN" >/dev/null 2>&1 || die "mvn not found (scripts/install-deps.sh installs it)"
    mkdir -p "$cache"
    rm -f "$cache/stamp"
    local goals=(-q -f "$POM" -Dclasspath.dir="$cache" dependency:build-classpath@server dependency:build-classpath@probe)
    # Offline first: quick and quiet when everything is in the local repository.
    if ! "$MVN" -o "${goals[@]}" >"$cache/mvn.log" 2>&1; then
        log "resolving org.apache.fluss:fluss-server and the client from Maven Central"
        "$MVN" "${goals[@]}" >"$cache/mvn.log" 2>&1 || {
            tail -n 30 "$cache/mvn.log" >&2
            die "Maven could not resolve $POM (log: $cache/mvn.log)"
        }
    fi
    classpath_complete "$cache/server.classpath" || die "Maven wrote no usable server classpath ($cache/mvn.log)"
    classpath_complete "$cache/probe.classpath" || die "Maven wrote no usable probe classpath ($cache/mvn.log)"
    printf '%s\n' "$stamp" >"$cache/stamp"
    SERVER_CP=$(cat "$cache/server.classpath")
    PROBE_CP=$(cat "$cache/probe.classpath")
}

classpath_complete() {
    [[ -s $1 ]] || return 1
    local jar
    local IFS=:
    for jar in $(cat "$1"); do
        [[ -f $jar ]] || return 1
    done
}

# --- configuration -------------------------------------------------------------

write_configs() {
    mkdir -p "$DIR/conf/coordinator-server" "$DIR/conf/tablet-server" "$DIR/logs" "$DIR/pids" \
        "$DIR/plugins" "$DIR/data/zookeeper" "$DIR/data/coordinator-server" "$DIR/data/tablet-server" "$DIR/data/remote"

    cat >"$DIR/conf/zookeeper.properties" <<EOF
# Generated by scripts/fluss-java-server.sh: standalone ZooKeeper on loopback.
dataDir=$DIR/data/zookeeper
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
EOF

    local role port
    for role in coordinator-server tablet-server; do
        port=$COORDINATOR_PORT
        [[ $role == tablet-server ]] && port=$TABLET_SERVER_PORT
        {
            echo "# Generated by scripts/fluss-java-server.sh for the $role."
            echo "zookeeper.address: 127.0.0.1:$ZK_PORT"
            echo "bind.listeners: FLUSS://127.0.0.1:$port"
            echo "data.dir: $DIR/data/$role"
            echo "remote.data.dir: $DIR/data/remote"
            echo "default.bucket.number: 1"
            echo "default.replication.factor: 1"
            [[ $role == tablet-server ]] && echo "tablet-server.id: 0"
            if [[ -n ${FLUSS_SERVER_CONF:-} ]]; then
                echo "# FLUSS_SERVER_CONF"
                printf '%s\n' "$FLUSS_SERVER_CONF"
            fi
        } >"$DIR/conf/$role/server.yaml"
    done

    # log4j 2: one file per process (-Dlog.file), as Fluss's distribution does.
    cat >"$DIR/conf/log4j2.properties" <<'EOF'
# Generated by scripts/fluss-java-server.sh.
rootLogger.level = ${sys:fluss.harness.log.level:-INFO}
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:log.file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5level [%t] %logger{1.} - %msg%n
EOF

    {
        echo "zookeeper_port=$ZK_PORT"
        echo "coordinator_port=$COORDINATOR_PORT"
        echo "tablet_server_port=$TABLET_SERVER_PORT"
    } >"$DIR/ports.env"
}

write_probe() {
    mkdir -p "$DIR/probe"
    cat >"$DIR/probe/FlussReadinessProbe.java" <<'EOF'
// Generated by scripts/fluss-java-server.sh: waits until the cluster serves
// real client requests. Args: BOOTSTRAP TABLET_SERVER_PORT TIMEOUT_MS.
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.cluster.ServerNode;
import org.apache.fluss.cluster.ServerType;
import org.apache.fluss.config.Configuration;

public class FlussReadinessProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int tabletServerPort = Integer.parseInt(args[1]);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args[2]));
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", bootstrap);
        String last = "no answer";
        while (System.nanoTime() < deadline) {
            try (Connection connection = ConnectionFactory.createConnection(conf);
                    Admin admin = connection.getAdmin()) {
                List<ServerNode> nodes = admin.getServerNodes().get(10, TimeUnit.SECONDS);
                boolean coordinator = false;
                boolean tabletServer = false;
                for (ServerNode node : nodes) {
                    coordinator |= node.serverType() == ServerType.COORDINATOR;
                    tabletServer |= node.serverType() == ServerType.TABLET_SERVER
                            && node.port() == tabletServerPort;
                }
                if (coordinator && tabletServer) {
                    List<String> databases = admin.listDatabases().get(10, TimeUnit.SECONDS);
                    System.out.println("ready: server nodes " + nodes + ", databases " + databases);
                    return;
                }
                last = "server nodes so far: " + nodes;
            } catch (Exception e) {
                last = e.toString();
            }
            Thread.sleep(500);
        }
        System.err.println("cluster not ready: " + last);
        System.exit(1);
    }
}
EOF
}

# --- processes -----------------------------------------------------------------

# launch ROLE HEAP_OPTS CLASS ARGS...: one JVM in the background, its pid recorded.
launch() {
    local role=$1 opts=$2 class=$3
    shift 3
    local -a jvm_opts
    read -r -a jvm_opts <<<"$opts"
    printf '\n===== %s start %s =====\n' "$role" "$(date -u +%FT%TZ)" >>"$DIR/logs/$role.out"
    # nohup: a hang-up of the starting terminal must not take the cluster down;
    # 9>&-: the JVM must not hold the lock on DIR.
    # Working directory DIR and an (empty) plugins dir there: nothing lands
    # in the caller's directory.
    cd "$DIR"
    FLUSS_PLUGINS_DIR="$DIR/plugins" nohup "$JAVA" "${JAVA_COMMON_OPTS[@]}" "${jvm_opts[@]}" \
        "-Dfluss.harness.dir=$DIR" "-Dfluss.harness.role=$role" \
        "-Dfluss.harness.log.level=${FLUSS_LOG_LEVEL:-INFO}" \
        "-Dlog.file=$DIR/logs/$role.log" \
        "-Dlog4j.configurationFile=file:$DIR/conf/log4j2.properties" \
        -classpath "$SERVER_CP" "$class" "$@" \
        >>"$DIR/logs/$role.out" 2>&1 </dev/null 9>&- &
    local pid=$!
    echo "$pid" >"$(pid_file "$role")"
    # Until the forked shell has exec'd java, the pid's command line lacks the
    # markers that is_ours looks for: wait for the exec (or the exit).
    local deadline=$((SECONDS + 30))
    until is_ours "$pid" "$role"; do
        kill -0 "$pid" 2>/dev/null || return 0
        ((SECONDS < deadline)) || start_failed "$role" "$role (pid $pid) did not exec java within 30s"
        sleep 0.05
    done
}

tail_logs() {
    local role=$1 f
    for f in "$DIR/logs/$role.log" "$DIR/logs/$role.out"; do
        [[ -s $f ]] || continue
        printf -- '--- last lines of %s\n' "$f" >&2
        tail -n 40 "$f" >&2
    done
}

start_failed() {
    local role=$1
    shift
    log "$*"
    tail_logs "$role"
    if [[ ${FLUSS_KEEP_ON_FAILURE:-0} == 1 ]]; then
        log "FLUSS_KEEP_ON_FAILURE=1: leaving the started processes running"
    else
        log "stopping what was started"
        stop_all >&2
    fi
    exit 1
}

# wait_for ROLE WHAT CHECK ARGS...: polls CHECK until it passes, the process
# dies, or START_TIMEOUT passes.
wait_for() {
    local role=$1 what=$2
    shift 2
    local deadline=$((SECONDS + START_TIMEOUT)) pid
    pid=$(recorded_pid "$role")
    until "$@"; do
        is_ours "$pid" "$role" || start_failed "$role" "$role (pid $pid) exited while waiting for $what"
        ((SECONDS < deadline)) || start_failed "$role" "$role (pid $pid): no $what within ${START_TIMEOUT}s"
        sleep 0.2
    done
}

stop_role() {
    local role=$1 pid
    pid=$(recorded_pid "$role") || {
        rm -f "$(pid_file "$role")"
        return 0
    }
    if ! is_ours "$pid" "$role"; then
        echo "$role: pid $pid no longer runs" >&2
        rm -f "$(pid_file "$role")"
        return 0
    fi
    echo "$role: stopping pid $pid (TERM)" >&2
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while is_ours "$pid" "$role" && ((SECONDS < deadline)); do
        sleep 0.2
    done
    if is_ours "$pid" "$role"; then
        echo "$role: pid $pid still runs after ${STOP_TIMEOUT}s, KILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        while is_ours "$pid" "$role"; do sleep 0.1; done
    fi
    rm -f "$(pid_file "$role")"
}

stop_all() {
    local role
    for role in tablet-server coordinator-server zookeeper; do
        stop_role "$role"
    done
}

# --- commands -------------------------------------------------------------------

cmd_start() {
    local running=0 role
    for role in "${ROLES[@]}"; do
        running_pid "$role" >/dev/null && running=$((running + 1))
    done
    load_ports
    if ((running == ${#ROLES[@]})) && port_open "$TABLET_SERVER_PORT" && port_open "$COORDINATOR_PORT"; then
        log "already running in $DIR"
        print_addresses
        print_pids
        printf 'logs=%s/logs\n' "$DIR"
        return 0
    fi
    if ((running > 0)); then
        log "only $running of ${#ROLES[@]} processes run in $DIR: stopping them, then starting all"
        stop_all
    fi

    command -v "$JAVA" >/dev/null 2>&1 || die "java not found (scripts/install-deps.sh installs a JDK)"
    resolve_classpaths

    # Ports: the environment's, else the ones this DIR used before (its data
    # may name them), else free ones.
    ZK_PORT=${FLUSS_ZK_PORT:-$ZK_PORT}
    COORDINATOR_PORT=${FLUSS_COORDINATOR_PORT:-$COORDINATOR_PORT}
    TABLET_SERVER_PORT=${FLUSS_TABLET_SERVER_PORT:-$TABLET_SERVER_PORT}
    local port
    for port in "$ZK_PORT" "$COORDINATOR_PORT" "$TABLET_SERVER_PORT"; do
        if [[ -n $port ]] && port_open "$port"; then
            die "port $port is already in use on 127.0.0.1 (set FLUSS_*_PORT, or stop what holds it)"
        fi
    done
    [[ -n $ZK_PORT ]] || ZK_PORT=$(free_port "$COORDINATOR_PORT" "$TABLET_SERVER_PORT")
    [[ -n $COORDINATOR_PORT ]] || COORDINATOR_PORT=$(free_port "$ZK_PORT" "$TABLET_SERVER_PORT")
    [[ -n $TABLET_SERVER_PORT ]] || TABLET_SERVER_PORT=$(free_port "$ZK_PORT" "$COORDINATOR_PORT")

    write_configs
    write_probe
    # Interrupted half way: leave nothing running.
    trap 'log "interrupted: stopping what was started"; stop_all; exit 130' INT TERM

    log "starting ZooKeeper on 127.0.0.1:$ZK_PORT"
    launch zookeeper "${FLUSS_ZK_JAVA_OPTS:--Xmx256m}" "$ZK_CLASS" "$DIR/conf/zookeeper.properties"
    wait_for zookeeper "imok from ZooKeeper on port $ZK_PORT" zk_ok "$ZK_PORT"

    log "starting the coordinator server on 127.0.0.1:$COORDINATOR_PORT"
    launch coordinator-server "${FLUSS_COORDINATOR_JAVA_OPTS:--Xmx1g}" "$COORDINATOR_CLASS" \
        --configDir "$DIR/conf/coordinator-server"
    wait_for coordinator-server "listener on port $COORDINATOR_PORT" port_open "$COORDINATOR_PORT"

    log "starting the tablet server on 127.0.0.1:$TABLET_SERVER_PORT"
    launch tablet-server "${FLUSS_TABLET_SERVER_JAVA_OPTS:--Xmx4g -XX:+UseG1GC}" "$TABLET_SERVER_CLASS" \
        --configDir "$DIR/conf/tablet-server"
    wait_for tablet-server "listener on port $TABLET_SERVER_PORT" port_open "$TABLET_SERVER_PORT"

    log "probing with the Fluss Java client"
    local probe_log=$DIR/logs/probe.out
    if ! timeout $((START_TIMEOUT + 30)) "$JAVA" "${JAVA_COMMON_OPTS[@]}" -Xmx256m -classpath "$PROBE_CP" \
        "$DIR/probe/FlussReadinessProbe.java" "127.0.0.1:$TABLET_SERVER_PORT" "$TABLET_SERVER_PORT" \
        $((START_TIMEOUT * 1000)) >"$probe_log" 2>&1; then
        cat "$probe_log" >&2
        tail_logs coordinator-server
        start_failed tablet-server "the cluster did not answer the Java client within ${START_TIMEOUT}s"
    fi
    log "$(tail -n 1 "$probe_log")"
    for role in "${ROLES[@]}"; do
        running_pid "$role" >/dev/null || start_failed "$role" "$role exited during start"
    done
    trap - INT TERM
    print_addresses
    print_pids
    printf 'logs=%s/logs\n' "$DIR"
}

print_pids() {
    printf 'tablet_server_pid=%s\n' "$(running_pid tablet-server)"
    printf 'coordinator_pid=%s\n' "$(running_pid coordinator-server)"
    printf 'zookeeper_pid=%s\n' "$(running_pid zookeeper)"
}

cmd_status() {
    local running=0 recorded=0 role pid key
    load_ports
    [[ -n $COORDINATOR_PORT ]] && print_addresses
    for role in "${ROLES[@]}"; do
        key=${role//-/_}
        key=${key/coordinator_server/coordinator}
        if pid=$(recorded_pid "$role"); then
            recorded=$((recorded + 1))
            if is_ours "$pid" "$role"; then
                running=$((running + 1))
                printf '%s_pid=%s\n%s_state=running\n' "$key" "$pid" "$key"
            else
                printf '%s_pid=%s\n%s_state=dead\n' "$key" "$pid" "$key"
            fi
        else
            printf '%s_state=stopped\n' "$key"
        fi
    done
    printf 'logs=%s/logs\n' "$DIR"
    ((running == ${#ROLES[@]})) && return 0
    ((recorded == 0)) && return 3
    return 1
}

main() {
    case ${1:-} in
    -h | --help | help)
        usage
        return 0
        ;;
    start | stop | status) ;;
    *)
        usage >&2
        return 2
        ;;
    esac
    [[ $# -eq 2 && -n $2 ]] || {
        usage >&2
        return 2
    }
    local command=$1
    if [[ $command == start ]]; then
        mkdir -p "$2"
    elif [[ ! -d $2 ]]; then
        [[ $command == stop ]] && return 0
        printf 'zookeeper_state=stopped\ncoordinator_state=stopped\ntablet_server_state=stopped\n'
        return 3
    fi
    DIR=$(cd "$2" && pwd -P)
    # One command at a time per DIR.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$DIR/.lock"
        flock 9
    fi
    case $command in
    start) cmd_start ;;
    stop) stop_all ;;
    status) cmd_status ;;
    esac
}

main "$@"
