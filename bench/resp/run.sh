#!/usr/bin/env bash
# bench/resp: eddy-resp-server (one loop) against redis-server (Debian's, single-threaded,
# persistence off), both driven by redis-benchmark -c 50 -t ping,set,get, pipelining 1 and
# 16. For each pipelining depth and round, each server in turn (eddy, redis: A B A B ...) is
# started pinned to one CPU on a free port, redis-benchmark runs pinned to another, one test
# per invocation so that the server's CPU time (/proc/PID/stat) is counted per row, and the
# server is stopped. Prints medians, min-max and eddy / redis-server ratios per row
# (PING_INLINE, PING_MBULK, SET, GET) with each server's CPU per request, then one
# {"bench":"resp",...} JSON line per row.
#
#   bash bench/resp/run.sh BUILD_DIR [--rounds N] [--requests N] [--clients N]
#                          [--pipelines LIST] [--cpu N] [--client-cpu N] [--no-pin]
#
# Defaults: 3 rounds, 50 clients, pipelines 1,16, server on CPU 0, redis-benchmark on CPU 1;
# --requests per row: 300000 at -P 1 and 3000000 at -P 16, about 2 s a row on the EPYC of
# bench/RESULTS.md (a given --requests applies to every depth). --no-pin: no taskset. Other
# --options (bench/run.sh passes its arguments to every benchmark) are ignored with a word.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, run_port, field...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=3 requests= clients=50 pipelines=1,16 cpu=0 client_cpu=1 pin=1
parse_options bench/resp/run.sh "no-pin rounds requests clients pipelines cpu client-cpu \
    others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
[[ -z $requests || $requests =~ ^[0-9]+$ ]] || usage

eddy=$build_dir/examples/eddy-resp-server
if [[ ! -x $eddy ]]; then
    echo "bench/resp/run.sh: $eddy is not built" >&2
    exit 1
fi
for tool in redis-server redis-benchmark redis-cli; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/resp/run.sh: $tool is missing (scripts/deps.sh --bench installs it)" >&2
        exit 1
    fi
done


scratch_dir
: >"$tmp/rounds.txt"

pin_setup redis-benchmark

# Starts server $1 on a free port pinned; sets server_pid and port once it answers PING.
start_server() {
    port=$(free_port bench/resp/run.sh)
    local log=$tmp/server.log
    : >"$log" # here, not in the child: the wait below must not read the last server's log
    if [[ $1 == eddy || $1 == eddy_uring ]]; then
        local poller=epoll
        [[ $1 == eddy_uring ]] && poller=io_uring
        EDDY_POLLER=$poller "${pin_server[@]}" "$eddy" --port "$port" --threads 1 >"$log" 2>&1 &
    else
        "${pin_server[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" \
            --appendonly no --daemonize no --dir "$tmp" --loglevel warning >"$log" 2>&1 &
    fi
    server_pid=$!
    for _ in $(seq 200); do
        if [[ $(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null) == PONG ]]; then
            return 0
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    echo "bench/resp/run.sh: $1 did not start:" >&2
    cat "$log" >&2
    exit 1
}

echo "bench resp: redis-benchmark -c $clients -t ping,set,get against eddy-resp-server" \
    "(--threads 1) and $(redis-server --version | cut -d' ' -f1-3) (--save \"\" --appendonly no)"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
# eddy runs on epoll; eddy_uring, the same server on io_uring (#16), where this build and
# kernel have it.
subjects=(eddy redis_server)
if [[ -x $build_dir/bench/echo/echo_server_uring &&
    $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0) == 0 ]]; then
    subjects=(eddy eddy_uring redis_server)
fi
echo "$rounds rounds, servers alternating: ${subjects[*]}; ops: requests per second"

for pl in ${pipelines//,/ }; do
    n=$requests
    if [[ -z $n ]]; then
        n=$((pl > 1 ? 3000000 : 300000))
    fi
    for ((r = 0; r < rounds; r++)); do
        for s in "${subjects[@]}"; do
            start_server "$s"
            for t in ping_inline ping_mbulk set get; do
                t0=$(cpu_ticks "$server_pid")
                if ! out=$("${pin_client[@]}" redis-benchmark -h 127.0.0.1 -p "$port" \
                    -c "$clients" -P "$pl" -t "$t" -n "$n" --csv -q 2>&1); then
                    echo "bench/resp/run.sh: redis-benchmark failed against $s (-P $pl): $out" >&2
                    exit 1
                fi
                t1=$(cpu_ticks "$server_pid")
                # "PING_INLINE","123456.79",... the test's line after the header; then the
                # server's CPU nanoseconds per request.
                tr -d '\r"' <<<"$out" | awk -F, -v pl="$pl" -v s="$s" -v r="$r" \
                    -v ticks=$((t1 - t0)) -v hz="$hz" -v n="$n" \
                    '$1 ~ /^(PING_INLINE|PING_MBULK|SET|GET)$/ {
                        print pl, s, r, $1, $2, ticks * 1e9 / hz / n }' >>"$tmp/rounds.txt"
            done
            stop_server
        done
    done
done

# Medians (middle value; mean of the two middle ones when even), min-max, ratios, JSON.
awk -v rounds="$rounds" '
function median(list,    a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] > t; j--)
            a[j + 1] = a[j]
        a[j + 1] = t
    }
    lo = a[1]
    hi = a[k]
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{
    key = $1 SUBSEP $4
    if (!(key in seen)) {
        seen[key] = 1
        order[++nk] = key
    }
    v[key, $2] = v[key, $2] " " $5
    c[key, $2] = c[key, $2] " " $6
}
END {
    printf "\n%-16s %12s %21s %12s %21s %7s %11s %11s\n", "case", "eddy ops/s", "(min-max)",
        "redis ops/s", "(min-max)", "ratio", "eddy ns/req", "redis ns/req"
    for (i = 1; i <= nk; i++) {
        split(order[i], kk, SUBSEP)
        name = tolower(kk[2]) "_p" kk[1]
        e = median(v[order[i], "eddy"]); erange = sprintf("(%.0f-%.0f)", lo, hi)
        b = median(v[order[i], "redis_server"]); brange = sprintf("(%.0f-%.0f)", lo, hi)
        ratio = b > 0 ? e / b : 0
        ec = median(c[order[i], "eddy"]); bc = median(c[order[i], "redis_server"])
        printf "%-16s %12.0f %21s %12.0f %21s %6.2fx %11.0f %11.0f\n", name, e, erange, b,
            brange, ratio, ec, bc
        json[i] = sprintf("{\"bench\":\"resp\",\"case\":\"%s\",\"subject\":\"eddy\"," \
            "\"baseline\":\"redis_server\",\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f," \
            "\"ratio\":%.3f,\"cpu_ns_per_req\":%.0f,\"baseline_cpu_ns_per_req\":%.0f," \
            "\"target_ratio\":1.0,\"target_met\":%s,\"rounds\":%d}",
            name, e, b, ratio, ec, bc, ratio >= 1.0 ? "true" : "false", rounds)
    }
    if ((order[1] SUBSEP "eddy_uring") in v) {
        printf "\n%-16s %12s %12s %7s %11s %11s %9s\n", "case", "uring ops/s", "epoll ops/s",
            "ratio", "uring ns/req", "epoll ns/req", "CPU ratio"
        for (i = 1; i <= nk; i++) {
            split(order[i], kk, SUBSEP)
            name = tolower(kk[2]) "_p" kk[1]
            u = median(v[order[i], "eddy_uring"]); e = median(v[order[i], "eddy"])
            uc = median(c[order[i], "eddy_uring"]); ec = median(c[order[i], "eddy"])
            ur = e > 0 ? u / e : 0; cr = ec > 0 ? uc / ec : 0
            printf "%-16s %12.0f %12.0f %6.2fx %11.0f %11.0f %8.3fx\n", name, u, e, ur, uc, ec,
                cr
            json[nk + i] = sprintf("{\"bench\":\"resp\",\"case\":\"%s\"," \
                "\"subject\":\"eddy_uring\",\"baseline\":\"eddy\",\"ops_per_s\":%.0f," \
                "\"baseline_ops_per_s\":%.0f,\"ratio\":%.3f,\"cpu_ns_per_req\":%.0f," \
                "\"baseline_cpu_ns_per_req\":%.0f,\"cpu_ratio\":%.3f,\"rounds\":%d}",
                name, u, e, ur, uc, ec, cr, rounds)
        }
    }
    printf "\n"
    for (i = 1; i <= 2 * nk; i++)
        if (i in json)
            print json[i]
}' "$tmp/rounds.txt"
echo "load average $(load_average) at the end"
