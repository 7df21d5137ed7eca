#!/usr/bin/env bash
# bench/grpc: gRPC servers side by side (#31): eddy-grpc-server (--threads 1) and a gRPC C++
# 1.51 callback server (bench/grpc/cpp_server.cc, gRPC's "unconstrained" channel arguments),
# the same TestService, under the same load clients: gRPC C++'s (cpp_load) and eddy's
# (eddy-grpc-client --load), one per round, alternating (round 1 cpp_load, round 2 eddy's...).
# For each case and round each server in turn is started fresh, pinned to one CPU, the load
# client pinned to another; the client counts after its warm-up and reads the server's CPU
# time (utime + stime, /proc) over the counted window itself (--server_pid), and the server's
# resident memory is read at the window's end.
#
# Cases (1 KiB messages):
#   unary      UnaryCall, 16 connections x 100 calls at a time
#   unary1     UnaryCall, 1 x 1
#   stream     StreamingOutputCall of 10 responses, 16 x 100 (messages are counted)
#   pingpong   FullDuplexCall round trips on 16 x 100 streams kept open
#   pingpong1  ... on 1 x 1
#   client     the clients compared instead: eddy's and gRPC C++'s load clients against the C++
#              server, unary 16 x 100, calls per client CPU-second
#
# Prints each run, then per case a table of medians (rate, calls per server CPU-second, p50,
# p99, RSS) and eddy / gRPC C++ per round of calls per server CPU-second (for "client": per
# client CPU-second), their median and range; a {"bench":"grpc",...} JSON line per
# comparison; the machine's costs beside the tables.
#
#   bash bench/grpc/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S] [--cases LIST]
#                          [--cpu N] [--client-cpu N] [--no-pin] [--no-costs]
#
# Defaults (also ROUNDS, DURATION, WARMUP, CASES from the environment): 6 rounds, 4 s windows
# after 1 s of warm-up, every case (about 8 minutes). SMOKE=1 (the ctest bench.grpc_smoke):
# one round of 1 s of unary with each load client there is, no costs; every call must
# succeed. Needs the C++ baselines (built with the C++ gRPC peers: g++, libgrpc++-dev,
# libprotobuf-dev, protobuf-compiler-grpc, grpc-proto); without them it says so and exits 0.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh"

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=${ROUNDS:-6} seconds=${DURATION:-4} warmup=${WARMUP:-1}
cases=${CASES:-unary,unary1,stream,pingpong,pingpong1,client}
cpu=0 client_cpu=1 pin=1 costs=1
if [[ ${SMOKE:-0} == 1 ]]; then
    rounds=2 seconds=1 warmup=0.3 cases=unary costs=0
fi
parse_options bench/grpc/run.sh "no-pin no-costs rounds seconds warmup cases cpu client-cpu \
    others" "$@"

dir=$build_dir/bench/grpc
eddy_server=$build_dir/examples/eddy-grpc-server
eddy_load=$build_dir/examples/eddy-grpc-client
if [[ ! -x $dir/cpp_server || ! -x $dir/cpp_load ]]; then
    echo "bench/grpc: skipped: cpp_server and cpp_load are not built in $build_dir (they need" \
        "g++, libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc, grpc-proto)"
    exit 0
fi
require_built bench/grpc/run.sh "$eddy_server"
loaders=(cpp)
[[ -x $eddy_load ]] && loaders+=(eddy)

scratch_dir
trap 'exit 130' INT TERM
pin_setup "the load client"
raise_nofile 4096

# The load client of round $1 (alternating), and its command for mode $2, connections $3,
# streams $4 against port $5 and server pid $6.
loader_of() {
    echo "${loaders[$(($1 % ${#loaders[@]}))]}"
}
load_cmd() {
    local who=$1 mode=$2 conns=$3 streams=$4 port=$5 pid=$6
    local args=(--server_port "$port" --mode "$mode" --size 1024 --connections "$conns"
        --streams "$streams" --duration "$seconds" --warmup "$warmup" --messages 10
        --server_pid "$pid")
    if [[ $who == eddy ]]; then
        cmd=("$eddy_load" --load "${args[@]}")
    else
        cmd=("$dir/cpp_load" "${args[@]}")
    fi
}

# Start server $1 pinned; sets server_pid and port.
start_server() {
    local s=$1
    : >"$tmp/server.log"
    if [[ $s == eddy ]]; then
        "${pin_server[@]}" "$eddy_server" --port 0 --threads 1 >"$tmp/server.log" 2>&1 &
    else
        "${pin_server[@]}" "$dir/cpp_server" --port 0 >"$tmp/server.log" 2>&1 &
    fi
    server_pid=$!
    if ! wait_for_log "$tmp/server.log" '^PORT ' 200; then
        echo "bench/grpc: the $s server did not start:" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
    port=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$tmp/server.log")
}

rss_kib() {
    awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# The shape of case $1: mode, connections, streams.
shape() {
    case $1 in
    unary | client) echo "unary 16 100" ;;
    unary1) echo "unary 1 1" ;;
    stream) echo "server_streaming 16 100" ;;
    pingpong) echo "ping_pong 16 100" ;;
    pingpong1) echo "ping_pong 1 1" ;;
    *)
        echo "bench/grpc/run.sh: unknown case $1" >&2
        exit 2
        ;;
    esac
}

# One run: case $1, round $2, subject $3 (a server, or for "client" a load client). Appends
# "case round subject loader rate per_cpu p50 p99 rss_kib" to $tmp/results.
run_one() {
    local c=$1 r=$2 subject=$3 mode conns streams server loader line rate cpu_s per_cpu rss
    read -r mode conns streams <<<"$(shape "$c")"
    server=$subject loader=$(loader_of "$r")
    if [[ $c == client ]]; then
        server=cpp loader=$subject
    fi
    start_server "$server"
    load_cmd "$loader" "$mode" "$conns" "$streams" "$port" "$server_pid"
    client_line "bench/grpc: $loader's load against $server failed ($c):" \
        timeout -k 5 $((${seconds%.*} + ${warmup%.*} + 60)) "${cmd[@]}"
    rss=$(rss_kib "$server_pid")
    stop_server
    rate=$(field "$line" calls_per_s)
    [[ $mode == server_streaming ]] && rate=$(field "$line" messages_per_s)
    if [[ $c == client ]]; then
        cpu_s=$(field "$line" client_cpu_s)
    else
        cpu_s=$(field "$line" server_cpu_s)
    fi
    per_cpu=$(awk -v r="$rate" -v s="$seconds" -v c="$cpu_s" \
        'BEGIN { printf "%.0f", (c > 0 ? r * s / c : 0) }')
    if [[ $(field "$line" errors) != 0 ]]; then
        echo "bench/grpc: $loader's load against $server had failed calls: $line" >&2
        exit 1
    fi
    printf '%s %s %s %s %s %s %s %s %s\n' "$c" "$r" "$subject" "$loader" "$rate" "$per_cpu" \
        "$(field "$line" p50_us)" "$(field "$line" p99_us)" "$rss" >>"$tmp/results"
    printf '  %-9s round %d %-4s (load: %-4s) %10.0f/s  %9s per CPU-s  p50 %8s us  p99 %8s us' \
        "$c" "$((r + 1))" "$subject" "$loader" "$rate" "$per_cpu" "$(field "$line" p50_us)" \
        "$(field "$line" p99_us)"
    printf '  RSS %6s KiB\n' "$rss"
}

echo "bench/grpc: eddy-grpc-server vs gRPC C++ 1.51 (callback API); load: ${loaders[*]}" \
    "alternating by round; $rounds rounds, ${seconds}s after ${warmup}s; $where"
echo "cpu: $(cpu_model); load average $(load_average)"
if ((costs)); then
    machine_costs grpc "$build_dir" "$cpu" "$client_cpu"
fi
: >"$tmp/results"
for c in ${cases//,/ }; do
    for ((r = 0; r < rounds; r++)); do
        if [[ $c == client ]]; then
            for l in "${loaders[@]}"; do run_one "$c" "$r" "$l"; done
        else
            for s in eddy cpp; do run_one "$c" "$r" "$s"; done
        fi
    done
done

# Per case: medians per subject, and eddy / cpp per round of per_cpu.
echo
awk -v costs="$costs_line" '
function median(a, n,    i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ key = $1 SUBSEP $3; n[key]++; k = n[key]
  rate[key, k] = $5; per[key, k] = $6; p50[key, k] = $7; p99[key, k] = $8; rss[key, k] = $9
  pr[$1, $3, $2] = $6; cases[$1] = 1; subj[$1, $3] = 1; rounds[$1, $2] = 1 }
END {
    for (c in cases) {
        unit = c == "client" ? "client CPU-s" : "server CPU-s"
        printf "%s (calls per %s)\n", c, unit
        printf "  %-5s %12s %12s %10s %10s %9s\n", "who", "rate/s", "per CPU-s", "p50 us", "p99 us", "RSS KiB"
        for (s in subj) {
            split(s, parts, SUBSEP); if (parts[1] != c) continue
            who = parts[2]; key = c SUBSEP who; m = n[key]
            for (i = 1; i <= m; i++) { a1[i] = rate[key, i]; a2[i] = per[key, i]; a3[i] = p50[key, i]; a4[i] = p99[key, i]; a5[i] = rss[key, i] }
            printf "  %-5s %12.0f %12.0f %10.0f %10.0f %9.0f\n", who, median(a1, m), median(a2, m), median(a3, m), median(a4, m), median(a5, m)
            med_p99[who] = median(a4, m); med_rss[who] = median(a5, m)
        }
        nr = 0; line = ""; lo = 1e9; hi = 0
        for (rr = 0; rr < 1000; rr++) {
            if (!((c, rr) in rounds)) continue
            e = pr[c, "eddy", rr]; b = pr[c, "cpp", rr]
            if (b > 0) { q = e / b; ratios[++nr] = q; line = line sprintf(" %.2f", q); if (q < lo) lo = q; if (q > hi) hi = q }
        }
        if (nr > 0) {
            med = median(ratios, nr)
            printf "  eddy / gRPC C++ per round:%s; median %.2fx (%.2f-%.2f)\n", line, med, lo, hi
            printf "{\"bench\":\"grpc\",\"case\":\"%s\",\"per\":\"%s\",\"ratio_median\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,\"rounds\":%d,\"p99_us_eddy\":%.0f,\"p99_us_cpp\":%.0f,\"rss_kib_eddy\":%.0f,\"rss_kib_cpp\":%.0f}\n", c, unit, med, lo, hi, nr, med_p99["eddy"], med_p99["cpp"], med_rss["eddy"], med_rss["cpp"]
        }
        if (costs != "") print "  " costs
        print ""
    }
}' "$tmp/results"
