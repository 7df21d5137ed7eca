#!/usr/bin/env bash
# bench/ws (#18): WebSocket servers side by side. eddy (bench/ws/server_eddy.c: the HTTP
# request decoder, aggregator and server handshaker of websocket.h, then echo or a channel
# group; eddy-ws-server from examples/ joins as eddy_example when it is built) against Netty
# 4.1's WebSocketServerProtocolHandler (bench/ws/java/NettyWsServer.java, compiled here
# against Debian's libnetty-java), each on one event-loop thread. For each case and round,
# each server in turn (eddy netty eddy netty ...) is started pinned to one CPU, a client of
# ours (no eddy code) runs pinned to another, reads the server's CPU time from /proc over its
# measured window and its memory at the end, and the server is stopped. ws_report then prints
# medians, min-max, ratios, one {"bench":"ws",...} line per comparison, and the machine's costs.
#
#   bash bench/ws/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S] [--java-warmup S]
#                        [--cpu N] [--client-cpu N] [--no-pin] [--no-costs] [--cases LIST]
#                        [--servers LIST] [--conns N] [--bcast-conns N] [--bcast-count N]
#                        [--port N]
#
# Cases: 64 and 16384 (echo: --conns 64 connections, each keeping a window of 16 (64 B) or
# 4 (16 KiB) masked binary messages in flight, bench_ws_loadgen; judged by messages per server
# CPU-second, target >= 1.5x Netty's, and peak RSS, target <= 1/20 of Netty's), bcast64 and
# bcast16384 (--bcast-conns 1,000 connections; --bcast-count 100 broadcasts a round, each one
# message from one connection to all, timed until every connection had it, ws_broadcast;
# eddy: a group write of the frame message, eddy_encoded: of a buffer encoded once, netty: a
# DefaultChannelGroup). eddy's server counts the bytes copied per member (ws_server_eddy's
# tap); Netty's are not counted (RESULTS.md derives them from its encoder).
# Defaults: 5 rounds, 2 s measured after 0.5 s of warm-up (Netty: --java-warmup 3 s, and 300
# warm-up broadcasts instead of 20), server on CPU 0, load on CPU 1, every case, servers
# eddy,eddy_encoded,eddy_example,netty (those not built or installed left out with a word).
# --no-costs: the machine's costs are not measured. --port 0 (the default): a base port of this
# run's own. Other --options (bench/run.sh passes its arguments to every benchmark) are
# ignored with a word.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, run_port, field...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=5 seconds=2 warmup=0.5 java_warmup=3 cpu=0 client_cpu=1 pin=1 costs=1 port=0
cases=64,16384,bcast64,bcast16384 servers=eddy,eddy_encoded,eddy_example,netty
conns=64 bcast_conns=1000 bcast_count=100
parse_options bench/ws/run.sh "no-pin no-costs rounds seconds warmup java-warmup cpu \
    client-cpu cases servers conns bcast-conns bcast-count port \
    others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
port=$(run_port "$port")

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$build_dir/bench/ws
require_built bench/ws/run.sh "$bin/bench_ws_loadgen" "$bin/ws_broadcast" "$bin/ws_report" \
    "$bin/ws_server_eddy"

scratch_dir

# Netty's jars (Debian libnetty-java: websocketx is in netty-codec-http) and the JDK; compiled
# once into $tmp/java.
netty_cp=
if [[ ,$servers, == *,netty,* ]]; then
    netty_classpath "$root/bench/ws/java/NettyWsServer.java" netty-buffer netty-common \
        netty-transport netty-resolver netty-codec netty-codec-http netty-handler
fi

# Each server: its command (the port and mode follow) and whether it runs a case.
example=$build_dir/examples/eddy-ws-server
subjects=()
for s in ${servers//,/ }; do
    case $s in
    eddy | eddy_encoded) subjects+=("$s") ;;
    eddy_example)
        if [[ -x $example ]]; then
            subjects+=("$s")
        else
            echo "bench/ws/run.sh: eddy_example not built ($example); left out" >&2
        fi
        ;;
    netty)
        if [[ -n $netty_cp ]]; then
            subjects+=("$s")
        else
            echo "bench/ws/run.sh: netty needs a JDK and libnetty-java" \
                "(bash scripts/deps.sh --bench); left out" >&2
        fi
        ;;
    *)
        echo "bench/ws/run.sh: unknown server $s (eddy, eddy_encoded, eddy_example, netty)" >&2
        exit 2
        ;;
    esac
done
# The servers of case $1 (echo: eddy_encoded is eddy's echo again, so it sits out).
runs_case() {
    [[ $2 != eddy_encoded || $1 == bcast* ]]
}
# The command of server $1 in case $2, without the port.
server_cmd() {
    local mode=echo
    [[ $2 != bcast* ]] || mode=broadcast
    case $1 in
    eddy) cmd=("$bin/ws_server_eddy") ;;
    eddy_encoded) cmd=("$bin/ws_server_eddy" --broadcast-encoded) ;;
    eddy_example) cmd=("$example" --threads 1) ;;
    netty) cmd=(java -cp "$netty_cp" NettyWsServer) ;;
    esac
    if [[ $mode == broadcast && $1 != eddy_encoded && $1 != eddy_example ]]; then
        cmd+=(--broadcast)
    elif [[ $mode == echo && $1 == eddy_example ]]; then
        cmd+=(--echo)
    fi
}

# 1,000 connections need as many descriptors on each side (and the servers inherit this).
if [[ ,$cases, == *,bcast* ]]; then
    raise_nofile $((bcast_conns + 100))
fi

# Starts server $1 for case $2 on port $3, pinned; sets server_pid once it listens.
start_server() {
    local log=$tmp/server.log
    : >"$log" # here, not in the child: the wait below must not read the last server's log
    server_cmd "$1" "$2"
    "${pin_server[@]}" "${cmd[@]}" --port "$3" >"$log" 2>&1 &
    server_pid=$!
    # up to 30 s: a JVM on a loaded machine starts slowly
    if wait_for_log "$log" 'listening on' 600; then
        return 0
    fi
    echo "bench/ws/run.sh: $1 did not start:" >&2
    cat "$log" >&2
    exit 1
}

pin_setup clients

echo "bench ws: WebSocket servers on one event-loop thread each (eddy: one loop for accept" \
    "and I/O; netty: one NioEventLoop, JVM pinned with the server)"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds, servers alternating: ${subjects[*]}; echo: $conns connections," \
    "$seconds s measured after $warmup s (netty: $java_warmup s); broadcast: $bcast_conns" \
    "connections, $bcast_count broadcasts a round"
echo "server CPU: the sum of /proc/PID/task/*/schedstat over the window (all threads);" \
    "judged by CPU per message; loadgen CPU near 1.00 would mean the client set the rate"
if ((costs)); then
    "$bin/ws_report" --costs ws "$cpu" "$client_cpu"
fi

: >"$tmp/rounds.txt"
# The echo window of case $1 (bcast cases: none).
window_of() {
    case $1 in
    64) window=16 ;;
    16384) window=4 ;;
    bcast64 | bcast16384) ;;
    *)
        echo "bench/ws/run.sh: unknown case $1 (64, 16384, bcast64, bcast16384)" >&2
        exit 2
        ;;
    esac
}
# One round of server $3 in case $1 (round $2), appended to $tmp/rounds.txt.
run_round() {
    local c=$1 r=$2 s=$3 w size bw copied counts
    runs_case "$c" "$s" || return 0
    window_of "$c"
    p=$((port + n % 500)) # a fresh port each time: nothing lingers from the last server
    n=$((n + 1))
    start_server "$s" "$c" "$p"
    if [[ $c != bcast* ]]; then
        w=$warmup
        [[ $s != netty ]] || w=$java_warmup
        client_line "bench/ws/run.sh: the load generator failed against $s ($c B)" \
            "$bin/bench_ws_loadgen" --port "$p" --pid "$server_pid" --seconds "$seconds" \
            --warmup "$w" --conns "$conns" --window "$window" --size "$c"
        stop_server
        echo "echo $c $s $r $(field "$line" msgs_per_s) $(field "$line" cpu_ns_per_msg)" \
            "$(field "$line" server_rss_kb) $(field "$line" server_hwm_kb)" \
            "$(field "$line" client_cpu_util) $conns $window" >>"$tmp/rounds.txt"
        return 0
    fi
    size=${c#bcast} bw=20
    [[ $s != netty ]] || bw=300
    client_line "bench/ws/run.sh: the broadcast client failed against $s ($size B)" \
        "$bin/ws_broadcast" --port "$p" --pid "$server_pid" --conns "$bcast_conns" \
        --size "$size" --count "$bcast_count" --warmup "$bw"
    stop_server
    # eddy's server prints its counts as it ends: bytes copied on the way to members.
    copied=-1
    counts=$(grep -m1 '^{"ws_server"' "$tmp/server.log" || true)
    if [[ -n $counts && $(field "$counts" member_writes) -gt 0 ]]; then
        copied=$(awk -v b="$(field "$counts" bytes_copied)" \
            -v m="$(field "$counts" member_writes)" 'BEGIN { printf "%.1f", b / m }')
    fi
    echo "bcast $size $s $r $(field "$line" p50_us) $(field "$line" p99_us)" \
        "$(field "$line" first_p50_us) $(field "$line" cpu_us_per_bcast)" \
        "$(field "$line" server_hwm_kb) $copied $bcast_conns $bcast_count" \
        "$(field "$line" rss_growth_per_bcast_b)" >>"$tmp/rounds.txt"
}

for c in ${cases//,/ }; do
    window_of "$c"
done
n=0
rounds_loop "$cases" run_round
"$bin/ws_report" "$tmp/rounds.txt"
echo "load average $(load_average) at the end"
