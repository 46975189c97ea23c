# Sourced by the bench scripts: one `fjord server` for a benchmark run, on
# a loopback port, stopped (and its data directory removed) when the script
# exits.
#
#   start_bench_server FJORD DATA_DIR LOG [EXTRA_CLEANUP_PATH...]
#
# Sets ADDR (host:port) and SERVER_PID; fails the script, with the server's
# log, when the server exits or is not ready within a minute. DATA_DIR must
# not exist yet or be empty: it is deleted at exit, so a directory holding
# anything (a user's DATA_DIR=/var/tmp once took the build cache with it)
# is refused. SERVER_CPUS (a taskset CPU list, e.g. 0) pins the server to
# those CPUs; unset, it runs wherever the kernel puts it.

SERVER_PID=
BENCH_SERVER_CLEANUP=()

stop_bench_server() {
    if [[ -n $SERVER_PID ]]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "${BENCH_SERVER_CLEANUP[@]}"
}

start_bench_server() {
    local fjord=$1 data_dir=$2 log=$3
    shift 3
    if [[ -e $data_dir ]] && [[ ! -d $data_dir || -n $(ls -A "$data_dir") ]]; then
        echo "refusing $data_dir as the server's data directory: it exists and is" \
            "not empty, and the benchmark deletes its data directory at exit" >&2
        exit 2
    fi
    BENCH_SERVER_CLEANUP=("$data_dir" "$@")
    trap stop_bench_server EXIT
    local pin=()
    [[ -n ${SERVER_CPUS:-} ]] && pin=(taskset -c "$SERVER_CPUS")
    RUST_LOG=${RUST_LOG:-warn,fjord=info} "${pin[@]}" "$fjord" server --listen 127.0.0.1:0 \
        --data-dir "$data_dir" 2>"$log" &
    SERVER_PID=$!
    ADDR=
    for _ in $(seq 600); do
        ADDR=$(sed -n 's/.*fjord server ready: listening on \([^, ]*\).*/\1/p' "$log" | head -1)
        [[ -n $ADDR ]] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    echo "server not ready; log in $log" >&2
    exit 1
}
