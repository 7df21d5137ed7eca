#!/usr/bin/env bash
# bench/rpc: calls per second of "echo" (64 B bodies, 64 calls in flight on one connection)
# against eddy-rpc-server on one loop, from two clients in turn: eddy-rpc-client (case
# eddy_client) and a Netty 4.1 client framing with LengthFieldPrepender(4) and
# LengthFieldBasedFrameDecoder (case netty_client, java/NettyRpcClient.java), which proves the
# wire compatibility while it measures. Rounds alternate A B A B; a fresh server each run,
# pinned to one CPU, the client to the other. The server's CPU time per call comes from
# /proc/PID/stat over the client's run (the Netty client's warm-up calls included).
#
#   bash bench/rpc/run.sh BUILD_DIR [--rounds N] [--calls N] [--java-warmup N] [--cpu N]
#                         [--client-cpu N] [--port N]
#
# Defaults: 3 rounds, 500000 calls per run, 200000 Netty warm-up calls (JIT) before the
# measured ones, server on CPU 0, client on CPU 1. Prints a table, medians and the ratio
# eddy_client / netty_client, and {"bench":"rpc",...} lines.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, run_port, field...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=3 calls=500000 java_warmup=200000 cpu=0 client_cpu=1 port=17900
parse_options bench/rpc/run.sh "rounds calls java-warmup cpu client-cpu port seconds=ignored \
    warmup=ignored" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $calls =~ ^[0-9]+$ && $calls -ge 1000 ]] || usage
port=$(run_port "$port")

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
server=$build_dir/examples/eddy-rpc-server
client=$build_dir/examples/eddy-rpc-client
require_built bench/rpc/run.sh "$server" "$client"

scratch_dir

subjects=(eddy_client)
netty_classpath "$root/bench/rpc/java/NettyRpcClient.java" netty-buffer netty-common \
    netty-transport netty-resolver netty-codec
if [[ -n $netty_cp ]]; then
    subjects+=(netty_client)
else
    echo "bench/rpc/run.sh: netty_client needs a JDK and libnetty-java" \
        "(bash scripts/deps.sh --bench); left out" >&2
fi

start_server() {
    : >"$tmp/server.log" # here, not in the child: the wait must not read the last server's log
    taskset -c "$cpu" "$server" --port "$1" --threads 1 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        if grep -q 'listening' "$tmp/server.log"; then
            return 0
        fi
        sleep 0.05
    done
    echo "bench/rpc/run.sh: eddy-rpc-server did not start:" >&2
    cat "$tmp/server.log" >&2
    exit 1
}

echo "bench rpc: \"echo\" calls, 64 B bodies, 64 in flight on one connection, against" \
    "eddy-rpc-server (one loop)"
echo "cpu: $(cpu_model); server on CPU $cpu, client on CPU $client_cpu; load average" \
    "$(load_average) at start"
echo "$rounds rounds x $calls calls, clients alternating: ${subjects[*]}" \
    "(netty_client after $java_warmup warm-up calls)"

: >"$tmp/rounds.txt"
n=0
for ((r = 0; r < rounds; r++)); do
    for s in "${subjects[@]}"; do
        p=$((port + n % 100))
        n=$((n + 1))
        start_server "$p"
        t0=$(cpu_ticks "$server_pid")
        if [[ $s == eddy_client ]]; then
            served=$calls
            out=$(taskset -c "$client_cpu" "$client" --port "$p" --calls "$calls" --inflight 64 \
                --size 64 --threads 1) || {
                echo "bench/rpc/run.sh: eddy-rpc-client failed: $out" >&2
                exit 1
            }
        else
            served=$((calls + java_warmup))
            out=$(taskset -c "$client_cpu" java -cp "$netty_cp" NettyRpcClient --port "$p" \
                --calls "$calls" --warmup "$java_warmup" --inflight 64 --size 64) || {
                echo "bench/rpc/run.sh: NettyRpcClient failed: $out" >&2
                exit 1
            }
        fi
        t1=$(cpu_ticks "$server_pid")
        stop_server
        # "  X calls/s; latency p50 A us, p99 B us..."
        read -r cps p50 p99 < <(sed -n 's/^ *\([0-9.]*\) calls\/s; latency p50 \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1 \2 \3/p' <<<"$out")
        cpu_ns=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v c="$served" 'BEGIN {printf "%.0f", d / hz * 1e9 / c}')
        echo "$s $r $cps $p50 $p99 $cpu_ns" >>"$tmp/rounds.txt"
    done
done

# Median, min and max of column $2 for subject $1.
stats() {
    awk -v s="$1" -v c="$2" '$1 == s {print $c}' "$tmp/rounds.txt" | sort -g |
        awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
            printf "%s %s %s\n", m, v[1], v[NR]}'
}

printf "\n  %-13s %-30s %9s %9s %s\n" client "calls/s median (min - max)" "p50 us" "p99 us" \
    "server CPU ns/call"
declare -A med lo hi p50m p99m cpum
for s in "${subjects[@]}"; do
    read -r med[$s] lo[$s] hi[$s] < <(stats "$s" 3)
    read -r p50m[$s] _ _ < <(stats "$s" 4)
    read -r p99m[$s] _ _ < <(stats "$s" 5)
    read -r cpum[$s] _ _ < <(stats "$s" 6)
    printf "  %-13s %-30s %9.1f %9.1f %.0f\n" "$s" \
        "$(awk -v a="${med[$s]}" -v b="${lo[$s]}" -v c="${hi[$s]}" 'BEGIN {printf "%.0f (%.0f - %.0f)", a, b, c}')" \
        "${p50m[$s]}" "${p99m[$s]}" "${cpum[$s]}"
done
ratio=
if [[ -n ${med[netty_client]:-} ]]; then
    ratio=$(awk -v a="${med[eddy_client]}" -v b="${med[netty_client]}" 'BEGIN {printf "%.4f", a / b}')
    echo "  eddy_client / netty_client calls/s: ${ratio}x; the Netty client's" \
        "LengthFieldPrepender frames were answered correctly: the wire is compatible"
fi
for s in "${subjects[@]}"; do
    line="{\"bench\":\"rpc\",\"case\":\"$s\",\"subject\":\"$s\",\"server\":\"eddy\""
    line+=",\"calls_per_s\":${med[$s]},\"calls_per_s_min\":${lo[$s]},\"calls_per_s_max\":${hi[$s]}"
    line+=",\"p50_us\":${p50m[$s]},\"p99_us\":${p99m[$s]},\"server_cpu_ns_per_call\":${cpum[$s]}"
    line+=",\"rounds\":$rounds,\"calls\":$calls,\"inflight\":64,\"size\":64"
    if [[ $s == eddy_client && -n $ratio ]]; then
        line+=",\"baseline\":\"netty_client\",\"ratio\":$ratio"
    elif [[ $s == netty_client ]]; then
        line+=",\"warmup_calls\":$java_warmup,\"wire_compatible\":true"
    fi
    echo "$line}"
done
echo "load average $(load_average) at the end"
