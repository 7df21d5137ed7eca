#!/usr/bin/env bash
# bench/http_gzip: a ~100 KiB text body compressed on the fly with gzip at level 6 (#33), eddy
# against nginx 1.22 serving the same bytes from a file (gzip on; gzip_comp_level 6;
# gzip_types text/plain), under wrk -t1 -c64 with "Accept-Encoding: gzip", keep-alive. For
# each round each server in turn (A B A B ...) is started pinned to one CPU, warmed up,
# measured by wrk pinned to another CPU, and stopped. Prints the machine's costs, the rounds,
# medians (requests/s, p99, the server's CPU time per request from /proc/PID/stat, the
# compressed size), eddy / nginx against the issue's target (1.0x in requests per server
# CPU-second), and one {"bench":"http_gzip",...} JSON line.
#
#   bash bench/http_gzip/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S]
#                               [--connections N] [--cpu N] [--client-cpu N] [--no-pin]
#                               [--no-costs] [--port N]
#
# Defaults: 3 rounds of 10 s, 1 s of warm-up, server on CPU 0, wrk on CPU 1. The body:
# GET /bytes/102400, its a-z pattern, which nginx serves from a file of the same bytes: both
# compress the same bytes, but the pattern compresses far faster than prose, so the figures
# say less of real text. The compressor passes a file's body (--root) as it is for now, so
# the first 100 KiB of docs/*.md served by --root waits until it compresses file regions.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, cpu_ticks...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=3 seconds=10 warmup=1 conns=64 cpu=0 client_cpu=1 port=18700 pin=1 costs=1
parse_options bench/http_gzip/run.sh "no-pin no-costs rounds seconds warmup \
    connections=conns cpu client-cpu port others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || usage

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
eddy_server=$build_dir/examples/eddy-http-server
for tool in wrk curl; do
    if ! command -v $tool >/dev/null; then
        echo "bench/http_gzip/run.sh: $tool is not installed (bash scripts/deps.sh --bench)" >&2
        exit 1
    fi
done
if [[ ! -x $eddy_server ]] || ! "$eddy_server" --help | grep -q -- --gzip; then
    echo "bench/http_gzip/run.sh: $eddy_server is not built, or has no --gzip" >&2
    exit 1
fi

# shellcheck source=bench/support/http.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/http.sh" # nginx_conf, start_http_server

scratch_dir
: >"$tmp/rounds.txt"
mkdir -p "$tmp/files"
size=102400
if false; then # --root, once the compressor compresses file regions
    body=text
    cat "$root"/docs/*.md | head -c $size >"$tmp/files/body.txt"
    path=/body.txt
    eddy_args=(--root "$tmp/files")
else
    body=pattern
    python3 -c "import sys; a=b'abcdefghijklmnopqrstuvwxyz'; \
sys.stdout.buffer.write((a*($size//26+1))[:$size])" >"$tmp/files/body.txt"
    path=/bytes/$size
    eddy_args=()
fi

subjects=(eddy)
if command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]]; then
    subjects+=(nginx)
else
    echo "bench/http_gzip/run.sh: nginx is not installed (nginx-light); left out" >&2
fi

pin_setup wrk

# Starts server $1 on port $2, pinned; sets server_pid once it answers GET /.
start_server() {
    local cmd
    case $1 in
    eddy) cmd=(env EDDY_POLLER=epoll "$eddy_server" --threads 1 --port "$2" --gzip
        "${eddy_args[@]}") ;;
    nginx)
        # Every path answers the body file, as text/plain, gzip'd at level 6 like eddy.
        nginx_conf "$tmp/nginx" "$2" "location $path { default_type text/plain; \
            alias $tmp/files/body.txt; }" "gzip on; gzip_comp_level 6; gzip_types text/plain; \
            gzip_vary on; gzip_min_length 1024;"
        cmd=("$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf")
        ;;
    esac
    start_http_server "$1" "$2" "${cmd[@]}"
}

# The compressed size server $1 on port $2 answers with, after checking it is gzip and that
# it decodes to the body file.
probe() {
    curl -s --max-time 5 -H 'Accept-Encoding: gzip' -D "$tmp/h" -o "$tmp/gz" \
        "http://127.0.0.1:$2$path"
    if ! grep -qi '^content-encoding: gzip' "$tmp/h" ||
        ! gzip -dc <"$tmp/gz" | cmp -s - "$tmp/files/body.txt"; then
        echo "bench/http_gzip/run.sh: $1 did not answer the body gzip'd:" >&2
        cat "$tmp/h" >&2
        exit 1
    fi
    stat -c %s "$tmp/gz"
}

# wrk's latency figure ("1.23ms", "456.00us", "1.01s") in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000
        printf "%.3f", n }'
}

# The machine's costs, from one of the report programs (bench/support/report.c) when built.
costs_line=
if ((costs)); then
    for p in udp/udp_report ws/ws_report echo/echo_report; do
        if [[ -x $build_dir/bench/$p ]]; then
            "$build_dir/bench/$p" --costs http_gzip "$cpu" "$client_cpu" | tee "$tmp/costs.txt"
            mc=$(grep '^{"bench":"machine"' "$tmp/costs.txt" || true)
            [[ -n $mc ]] && costs_line="machine: a system call $(field "$mc" syscall_ns) ns,\
 epoll_wait(0) $(field "$mc" epoll_wait0_ns) ns, clock_gettime $(field "$mc" clock_ns) ns"
            break
        fi
    done
    [[ -n $costs_line ]] || echo "machine costs: not measured (no report program built)"
fi

echo "bench http_gzip: GET $path, $size bytes of $body as text/plain, gzip level 6 on the fly," \
    "wrk -t1 -c$conns -d${seconds}s -H 'Accept-Encoding: gzip', one server thread each"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds, servers alternating: ${subjects[*]} (warm-up ${warmup} s)"

n=0
for ((r = 0; r < rounds; r++)); do
    for s in "${subjects[@]}"; do
        p=$((port + n % 500)) # a fresh port each time: nothing lingers from the last server
        n=$((n + 1))
        start_server "$s" "$p"
        gz=$(probe "$s" "$p")
        "${pin_client[@]}" wrk -t1 -c"$conns" -d"${warmup}s" -H 'Accept-Encoding: gzip' \
            "http://127.0.0.1:$p$path" >/dev/null
        cpu0=$(cpu_ticks "$server_pid")
        "${pin_client[@]}" wrk -t1 -c"$conns" -d"${seconds}s" --latency \
            -H 'Accept-Encoding: gzip' "http://127.0.0.1:$p$path" >"$tmp/wrk.txt"
        cpu1=$(cpu_ticks "$server_pid")
        stop_server
        rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.txt")
        p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk.txt")
        errors=$(grep -E 'Socket errors|Non-2xx' "$tmp/wrk.txt" | tr -s ' ' | tr '\n' ' ' || true)
        if [[ -z $rps || -z $p99 ]]; then
            echo "bench/http_gzip/run.sh: no figures from wrk against $s:" >&2
            cat "$tmp/wrk.txt" >&2
            exit 1
        fi
        p99=$(to_ms "$p99")
        cpu_ns=$(awk -v t=$((cpu1 - cpu0)) -v hz="$hz" -v rps="$rps" -v s="$seconds" \
            'BEGIN { printf "%.0f", t * 1e9 / hz / (rps * s) }')
        printf 'round %d %-6s %10.0f req/s  p99 %8.3f ms  server CPU %8d ns/req  %6d B  %s\n' \
            "$r" "$s" "$rps" "$p99" "$cpu_ns" "$gz" "$errors"
        echo "$s $rps $p99 $cpu_ns $gz" >>"$tmp/rounds.txt"
    done
done

# Medians; eddy / nginx in requests per server CPU-second (the issue's measure); JSON.
awk -v seconds="$seconds" -v rounds="$rounds" -v conns="$conns" -v body="$body" \
    -v size="$size" -v costs="$costs_line" '
function median(list,    a, i, j, t, m) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) {
        t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
{
    ops[$1] = ops[$1] " " $2; p99[$1] = p99[$1] " " $3; cpu[$1] = cpu[$1] " " $4; gz[$1] = $5
    if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
}
END {
    printf "\n%-8s %12s %10s %14s %14s %10s\n", "server", "req/s (med)", "p99 ms",
        "CPU ns/req", "req/CPU-s", "gzip B"
    for (i = 1; i <= ns; i++) {
        s = order[i]; mo[s] = median(ops[s]); mp[s] = median(p99[s]); mc[s] = median(cpu[s])
        per[s] = mc[s] > 0 ? 1e9 / mc[s] : 0
        printf "%-8s %12.0f %10.3f %14.0f %14.0f %10d\n", s, mo[s], mp[s], mc[s], per[s], gz[s]
    }
    if (costs != "") print "(" costs ")"
    if (!("eddy" in mo) || !("nginx" in mo) || per["nginx"] <= 0) exit
    r = per["eddy"] / per["nginx"]
    printf "\neddy / nginx: %.2fx requests per server CPU-second (target 1.0x), %.2fx req/s\n",
        r, mo["eddy"] / mo["nginx"]
    printf "{\"bench\":\"http_gzip\",\"case\":\"gzip6_%s_%d\",\"subject\":\"eddy\",", body, size
    printf "\"baseline\":\"nginx\",\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f,",
        mo["eddy"], mo["nginx"]
    printf "\"cpu_ns_per_req\":%.0f,\"baseline_cpu_ns_per_req\":%.0f,", mc["eddy"], mc["nginx"]
    printf "\"ratio\":%.3f,\"target_ratio\":1.0,\"target_met\":%s,", r,
        (r >= 1.0 ? "true" : "false")
    printf "\"p99_ms\":%.3f,\"baseline_p99_ms\":%.3f,", mp["eddy"], mp["nginx"]
    printf "\"gzip_bytes\":%d,\"baseline_gzip_bytes\":%d,", gz["eddy"], gz["nginx"]
    printf "\"connections\":%d,\"seconds\":%d,\"rounds\":%d}\n", conns, seconds, rounds
}' "$tmp/rounds.txt"
echo "load average $(load_average) at the end"
