# Shared by ws.sh and ws_browser.sh: source "$(dirname "$0")/ws_lib.sh" after lib.sh.

# Install the node packages of tests/examples/ws/ (package-lock.json: the versions) into $1,
# once: later runs find them there. npm ci takes them from npm's cache when it has them. The
# lock file serializes the two tests when ctest runs them at once. Exits 77 (skipped) without
# node or npm: scripts/deps.sh installs them.
ws_node_modules() {
    local dir=$1 src
    src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ws"
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "SKIP: node and npm are not installed (scripts/deps.sh installs them)"
        exit 77
    fi
    mkdir -p "$dir"
    (
        flock 9
        if ! cmp -s "$src/package-lock.json" "$dir/package-lock.json" ||
            [[ ! -f $dir/node_modules/ws/package.json ]]; then
            cp "$src/package.json" "$src/package-lock.json" "$dir/"
            (cd "$dir" && timeout 120 npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
        fi
    ) 9>"$dir.lock"
    export NODE_PATH=$dir/node_modules
}

# Start an example server with arguments; sets pid and port (the log is $1).
ws_start() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 &
    pid=$!
    port=$(port_of "$log")
    [[ -n "$port" ]] || { echo "FAIL: no port in: $(cat "$log")"; exit 1; }
}

# Stop the server started last with SIGTERM: it must exit 0 by itself within 10 s.
ws_stop() {
    local log=$1
    kill -TERM "$pid"
    for _ in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "FAIL: the server did not stop on SIGTERM: $(cat "$log")"
        exit 1
    fi
    wait "$pid" || { echo "FAIL: the server exited with $?: $(cat "$log")"; exit 1; }
    pid=
    grep -q "stopped by SIGTERM" "$log" || { echo "FAIL: no stop line: $(cat "$log")"; exit 1; }
}
