#!/usr/bin/env bash
# bench/udp: UDP echo servers side by side: eddy's datagram channel on one loop
# (udp_server_eddy) and the raw limit (udp_server_raw: epoll, recvmmsg/sendmmsg batches of 64),
# each sending its replies one datagram each (raw, eddy_nogso) and as UDP_SEGMENT runs (raw_gso,
# and eddy: its default), both reading up to 1024 datagrams per readiness event (eddy's
# EDDY_MAX_MESSAGES_PER_READ; its default, 16, is set for streams). For each case and round,
# each server in turn (raw raw_gso eddy eddy_nogso raw ...) is started pinned to one CPU, the
# load generator runs pinned to another and reads the server's CPU time (utime + stime from
# /proc/PID/stat) over its measured window, perf (when it can count tracepoints here) counts
# the server's system calls over the same window, and the server is stopped. udp_report then
# prints medians, min-max, each eddy server / each raw one: the ratios of packets per second
# and of packets per server CPU-second (the one judged: target >= 0.9x), one
# {"bench":"udp",...} line per comparison, and the machine's costs.
#
#   bash bench/udp/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S] [--cpu N]
#                         [--client-cpu N] [--no-pin] [--no-costs] [--cases LIST]
#                         [--servers LIST] [--sockets N] [--window W] [--idle-channels N]
#                         [--port N]
#
# Cases: 64 and 1200 (datagram bytes; --sockets 8 connected client sockets each keeping
# --window 32 datagrams in flight, sent as UDP_SEGMENT batches), idle (the server opens
# --idle-channels 10000 more sockets bound to port 0 beside its echo socket and reports its
# resident bytes per socket: eddy's datagram channels against raw sockets in an epoll set).
# Defaults: 5 rounds, 2 s measured after 0.5 s of warm-up, server on CPU 0, load on CPU 1,
# cases 64,1200,idle, servers raw,raw_gso,eddy,eddy_nogso (eddy's left out with a word when
# not built). --no-costs: the machine's costs are not measured (a few seconds; the smoke test
# skips them). --port 0 (the default): a base port of this run's own. Other --options
# (bench/run.sh passes its arguments to every benchmark) are ignored with a word.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, run_port, field...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=5 seconds=2 warmup=0.5 cpu=0 client_cpu=1 pin=1 port=0 costs=1
cases=64,1200,idle servers=raw,raw_gso,eddy,eddy_nogso sockets=8 window=32 idle_channels=10000
parse_options bench/udp/run.sh "no-pin no-costs rounds seconds warmup cpu client-cpu cases \
    servers sockets window idle-channels port others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
port=$(run_port "$port")

bin=$build_dir/bench/udp
loadgen=$bin/bench_udp_loadgen
require_built bench/udp/run.sh "$loadgen" "$bin/udp_report" "$bin/udp_server_raw"

scratch_dir

# raw_gso is the raw server with UDP_SEGMENT replies, as eddy sends them by default;
# eddy_nogso is eddy with EDDY_UDP_GSO off, one datagram per reply as the raw server sends.
declare -A exe_of=([raw]=udp_server_raw [raw_gso]=udp_server_raw [eddy]=udp_server_eddy
    [eddy_nogso]=udp_server_eddy)
declare -A args_of=([raw]=--no-gso [raw_gso]=--gso [eddy]=--gso [eddy_nogso]=--no-gso)
subjects=()
for s in ${servers//,/ }; do
    if [[ -z ${exe_of[$s]:-} ]]; then
        echo "bench/udp/run.sh: unknown server $s (raw, raw_gso, eddy, eddy_nogso)" >&2
        exit 2
    elif [[ -x $bin/${exe_of[$s]} ]]; then
        subjects+=("$s")
    else
        echo "bench/udp/run.sh: $s not built ($bin/${exe_of[$s]}: eddy's datagram channel" \
            "is not in this tree yet?); left out" >&2
    fi
done
# --idle-channels sockets need as many descriptors in the server.
if [[ ,$cases, == *,idle,* ]]; then
    raise_nofile $((idle_channels + 100))
fi
: >"$tmp/rounds.txt"

# Starts server $1 on port $2 (extra arguments after), pinned; sets server_pid once it
# echoes. Returns 1 when the port is taken (the caller tries another), exits on other failures.
start_server() {
    local name=$1 p=$2
    shift 2
    local log=$tmp/server.log
    : >"$log" # here, not in the child: the wait below must not read the last server's log
    "${pin_server[@]}" "$bin/${exe_of[$name]}" --port "$p" "${server_cpu_args[@]}" \
        "${args_of[$name]}" "$@" >"$log" 2>&1 &
    server_pid=$!
    if wait_for_log "$log" 'listening on' 400; then
        return 0
    fi
    stop_server
    if grep -qi 'in use' "$log"; then
        return 1
    fi
    echo "bench/udp/run.sh: $name did not start:" >&2
    cat "$log" >&2
    exit 1
}

# Starts server $1 (more arguments after) on the next free port of the run; sets p.
n=0
start_next() {
    local name=$1
    shift
    for _ in 1 2 3 4 5 6 7 8; do
        p=$((port + n % 500))
        n=$((n + 1))
        if start_server "$name" "$p" "$@"; then
            return 0
        fi
    done
    echo "bench/udp/run.sh: no free UDP port from $port on" >&2
    exit 1
}

# Pinned, the servers and the load generator are told their CPU too (--cpu N).
pin_setup "load generator"
# System calls per packet, when perf can count them here.
syscalls_probe

echo "bench udp: UDP echo servers on one thread each (eddy: one loop, one datagram channel;" \
    "raw: epoll, recvmmsg and sendmmsg of up to 64)"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds x $seconds s (after $warmup s warm-up), servers alternating:" \
    "${subjects[*]}; $sockets client sockets x window $window"
echo "judged by packets per server CPU-second; loadgen CPU: the load generator's share of its" \
    "CPU (near 1.00, it set the rate)"
if ((costs)); then
    "$bin/udp_report" --costs udp "$cpu" "$client_cpu"
fi

# One round of server $3 in case $1 (round $2), appended to $tmp/rounds.txt.
run_round() {
    local c=$1 r=$2 s=$3 line sys
    if [[ $c == idle && $s == *_* ]]; then
        return 0 # a variant's idle sockets are its server's
    elif [[ $c == idle ]]; then
        start_next "$s" --idle "$idle_channels"
        line=
        for _ in $(seq 1200); do # up to 60 s: 10,000 binds on a loaded machine
            line=$(grep -m1 '"idle_channels"' "$tmp/server.log" || true)
            [[ -z $line ]] || break
            if ! kill -0 "$server_pid" 2>/dev/null; then
                break
            fi
            sleep 0.05
        done
        stop_server
        if [[ -z $line ]]; then
            echo "bench/udp/run.sh: $s did not report its idle memory:" >&2
            cat "$tmp/server.log" >&2
            exit 1
        fi
        echo "idle $s $r $(field "$line" bytes_per_channel)" \
            "$(field "$line" rss_before_kb) $(field "$line" rss_after_kb)" \
            "$(field "$line" idle_channels)" >>"$tmp/rounds.txt"
        return 0
    fi
    start_next "$s"
    syscalls_start "$warmup" "$seconds"
    client_line "bench/udp/run.sh: the load generator failed against $s ($c B)" "$loadgen" \
        --port "$p" "${client_cpu_args[@]}" --pid "$server_pid" --seconds "$seconds" \
        --warmup "$warmup" --sockets "$sockets" --window "$window" --size "$c"
    syscalls_wait
    sys=$(syscalls_per_op "$(field "$line" pkts_per_s)" "$seconds")
    stop_server
    echo "$c $s $r $(field "$line" pkts_per_s) $(field "$line" cpu_ns_per_pkt)" \
        "$(field "$line" p50_us) $(field "$line" p99_us) $(field "$line" lost)" \
        "$(field "$line" late) $(field "$line" client_cpu_util)" \
        "$(field "$line" server_hwm_kb) $sockets $window $c $sys" >>"$tmp/rounds.txt"
}

for c in ${cases//,/ }; do
    if [[ $c != idle && ! $c =~ ^[0-9]+$ ]]; then
        echo "bench/udp/run.sh: unknown case $c (64, 1200, any size from 16 to 2048, idle)" >&2
        exit 2
    fi
done
rounds_loop "$cases" run_round
"$bin/udp_report" "$tmp/rounds.txt" --seconds "$seconds"
echo "load average $(load_average) at the end"
