#!/usr/bin/env bash
# bench/http_client: HTTP/1.1 load generators side by side (issue #19): eddy-http-client's load
# mode against wrk, both driving the same server with the same connections and pipelining
# depth. For each round, each server (nginx with one worker, eddy-http-server with one loop)
# is started pinned to one CPU; against it, for each depth, the two clients take turns (eddy
# first in even rounds, wrk first in odd ones), each pinned to the other CPU, warmed up, then
# measured. Reported per run and as medians: requests/s, latency percentiles, errors, and the
# client's CPU time per request: user + system time of the client process, all its threads,
# over its whole run (the kernel's accounting once it has exited, as getrusage reports it for
# a waited-for child: the utime + stime of /proc/PID/stat, read when nothing more can be
# added), divided by the requests it completed. Then eddy / wrk of requests per client
# CPU-second (wrk's CPU per request over eddy's), and one {"bench":"http_client",...} line per
# server and depth.
#
#   bash bench/http_client/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S]
#                                 [--connections N] [--depths LIST] [--cpu N] [--client-cpu N]
#                                 [--no-pin] [--servers nginx,eddy_http] [--client PATH]
#                                 [--port N]
#
# Defaults: 5 rounds of 5 s after 1 s of warm-up, 64 connections, depths 1,16, server on CPU 0,
# clients on CPU 1, every server installed or built, the client BUILD_DIR/examples/
# eddy-http-client: `eddy-http-client --load --connections N --depth D --duration S --threads 1
# URL` against `wrk -t1 -cN -dS -s bench/http_client/pipeline.lua URL` with WRK_DEPTH=D. wrk
# pipelines in batches (D requests written together, the next D once all are answered, its
# latency measured per batch), eddy-http-client keeps D in flight on each connection; at
# depth 1 both have one request in flight per connection. Without the client (not built, or
# --client missing), wrk's column alone is measured and no ratio or JSON line comes out.
# bench/run.sh calls this with its own arguments.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/support/proc.sh
source "$here/../support/proc.sh" # parse_options, run_port, field...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=5 seconds=5 warmup=1 conns=64 depths=1,16 cpu=0 client_cpu=1 port=18400 pin=1
servers=nginx,eddy_http
client=$build_dir/examples/eddy-http-client
parse_options bench/http_client/run.sh "no-pin rounds seconds warmup connections=conns depths cpu \
    client-cpu servers client port" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || usage # whole seconds: both clients take them
[[ $warmup =~ ^[0-9]+$ ]] || usage
[[ $conns =~ ^[0-9]+$ && $conns -ge 1 ]] || usage
[[ $depths =~ ^[0-9]+(,[0-9]+)*$ ]] || usage

eddy_server=$build_dir/examples/eddy-http-server
for tool in wrk curl; do
    if ! command -v $tool >/dev/null; then
        echo "bench/http_client/run.sh: $tool is not installed (bash scripts/deps.sh --bench)" >&2
        exit 1
    fi
done
# shellcheck source=bench/support/http.sh
source "$here/../support/http.sh" # nginx_bin, nginx_conf, start_http_server

scratch_dir
: >"$tmp/rounds.txt"

subjects=()
for s in ${servers//,/ }; do
    case $s in
    nginx)
        if [[ -x $nginx_bin ]]; then
            subjects+=(nginx)
        else
            echo "bench/http_client/run.sh: nginx is not installed (nginx-light); left out" >&2
        fi
        ;;
    eddy_http)
        if [[ -x $eddy_server ]]; then
            subjects+=(eddy_http)
        else
            echo "bench/http_client/run.sh: $eddy_server is not built; left out" >&2
        fi
        ;;
    *)
        echo "bench/http_client/run.sh: unknown server $s (nginx, eddy_http)" >&2
        exit 2
        ;;
    esac
done
((${#subjects[@]} > 0)) || { echo "bench/http_client/run.sh: no server to drive" >&2; exit 1; }
clients=(eddy wrk)
if [[ ! -x $client ]]; then
    echo "bench/http_client/run.sh: $client is not built: wrk alone, no ratio" >&2
    clients=(wrk)
fi

pin_setup clients

# Starts server $1 on port $2, pinned; sets server_pid once it answers GET /.
start_server() {
    case $1 in
    nginx)
        nginx_conf "$tmp/nginx" "$2"
        start_http_server nginx "$2" "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"
        ;;
    eddy_http) start_http_server eddy_http "$2" "$eddy_server" --threads 1 --port "$2" ;;
    esac
}

# Client $1 at depth $2 against URL $3 for $4 seconds, pinned. Its output goes to
# $tmp/client.out; cpu_s is its CPU time (user + system, every thread) from the kernel's
# accounting at its exit: bash's `times` in a subshell whose only child it was.
run_client() {
    local cmd
    case $1 in
    eddy)
        cmd=("$client" --load --connections "$conns" --depth "$2" --duration "$4" --threads 1 "$3")
        ;;
    wrk) cmd=(env WRK_DEPTH="$2" wrk -t1 -c"$conns" -d"$4s" -s "$here/pipeline.lua" "$3") ;;
    esac
    # Its exit status does not matter here: a run without figures fails below.
    (
        "${pin_client[@]}" "${cmd[@]}" >"$tmp/client.out" 2>"$tmp/client.err" || true
        times >"$tmp/times"
    )
    cpu_s=$(awk 'NR == 2 {
        t = 0
        for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
        printf "%.6f", t }' "$tmp/times")
}

# A field of the client's JSON line ({"bench":"http_client",...} from eddy-http-client,
# {"wrk":1,...} from pipeline.lua's done), or empty.
field() {
    grep -E '^\{"(bench":"http_client|wrk":1)' "$tmp/client.out" | tail -1 |
        grep -o "\"$1\":[0-9.eE+-]*" | cut -d: -f2 || true
}

echo "bench http_client: GET / \"Hello, World!\" keep-alive, $conns connections, depths $depths," \
    "${seconds} s a run after ${warmup} s of warm-up; one client thread, one server thread"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds; servers: ${subjects[*]}; clients: ${clients[*]}" \
    "(eddy-http-client: $client)"

n=0
for ((r = 0; r < rounds; r++)); do
    order=("${clients[@]}")
    if ((r % 2 == 1 && ${#clients[@]} == 2)); then
        order=(wrk eddy)
    fi
    for s in "${subjects[@]}"; do
        p=$((port + n % 500)) # a fresh port each time: nothing lingers from the last server
        n=$((n + 1))
        start_server "$s" "$p"
        url=http://127.0.0.1:$p/
        for d in ${depths//,/ }; do
            for c in "${order[@]}"; do
                if ((warmup > 0)); then
                    run_client "$c" "$d" "$url" "$warmup"
                fi
                run_client "$c" "$d" "$url" "$seconds"
                if [[ $c == eddy ]]; then
                    rps=$(field rps)
                    reqs=$(field requests)
                    [[ -n $reqs ]] || reqs=$(awk -v r="$rps" -v s="$seconds" 'BEGIN { printf "%.0f", r * s }')
                else
                    reqs=$(field requests)
                    rps=$(awk -v q="$reqs" -v us="$(field duration_us)" 'BEGIN { printf "%.1f", q * 1e6 / us }')
                fi
                p50=$(field p50_us) p99=$(field p99_us) p999=$(field p999_us) errors=$(field errors)
                if [[ -z $rps || -z $reqs || -z $p99 || $reqs == 0 ]]; then
                    echo "bench/http_client/run.sh: no figures from $c against $s:" >&2
                    cat "$tmp/client.out" "$tmp/client.err" >&2
                    exit 1
                fi
                cpu_ns=$(awk -v c="$cpu_s" -v q="$reqs" 'BEGIN { printf "%.0f", c * 1e9 / q }')
                printf 'round %d %-9s depth %-3s %-4s %11.0f req/s  p50 %6s us  p99 %7s us' \
                    "$r" "$s" "$d" "$c" "$rps" "$p50" "$p99"
                printf '  p99.9 %7s us  client CPU %6d ns/req  errors %s\n' "$p999" "$cpu_ns" "$errors"
                echo "$s $d $c $rps $p50 $p99 $p999 $cpu_ns $errors" >>"$tmp/rounds.txt"
            done
        done
        stop_server
    done
done

# Medians per server, depth and client; eddy / wrk; JSON lines.
awk -v seconds="$seconds" -v rounds="$rounds" -v conns="$conns" '
function median(list,    a, i, j, t, m) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) {
        t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
{
    k = $1 " " $2 " " $3
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
    if (!(($1 " " $2) in seen2)) { seen2[$1 " " $2] = 1; cases[++nc] = $1 " " $2 }
    rps[k] = rps[k] " " $4; p50[k] = p50[k] " " $5; p99[k] = p99[k] " " $6
    p999[k] = p999[k] " " $7; cpu[k] = cpu[k] " " $8; err[k] = err[k] " " $9
}
END {
    printf "\n%-10s %5s %-6s %12s %9s %9s %9s %14s %8s\n", "server", "depth", "client",
        "req/s (med)", "p50 us", "p99 us", "p99.9 us", "CPU ns/req", "errors"
    for (i = 1; i <= nk; i++) {
        k = order[i]; split(k, f, " ")
        mr[k] = median(rps[k]); mc[k] = median(cpu[k]); m99[k] = median(p99[k])
        printf "%-10s %5s %-6s %12.0f %9.0f %9.0f %9.0f %14.0f %8.0f\n", f[1], f[2], f[3], mr[k],
            median(p50[k]), m99[k], median(p999[k]), mc[k], median(err[k])
    }
    printf "\n"
    for (i = 1; i <= nc; i++) {
        split(cases[i], f, " "); e = cases[i] " eddy"; w = cases[i] " wrk"
        if (!(e in mr) || !(w in mr) || mc[e] <= 0) continue
        r = mc[w] / mc[e]
        printf "%s depth %s: eddy / wrk: requests per client CPU-second %.2fx, requests/s %.2fx\n",
            f[1], f[2], r, mr[e] / mr[w]
        printf "{\"bench\":\"http_client\",\"case\":\"%s_d%s\",\"server\":\"%s\",", f[1], f[2], f[1]
        printf "\"subject\":\"eddy\",\"baseline\":\"wrk\",\"connections\":%d,\"depth\":%d,", conns, f[2]
        printf "\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f,", mr[e], mr[w]
        printf "\"p99_us\":%.0f,\"baseline_p99_us\":%.0f,", m99[e], m99[w]
        printf "\"cpu_ns_per_req\":%.0f,\"baseline_cpu_ns_per_req\":%.0f,", mc[e], mc[w]
        printf "\"req_per_cpu_s_ratio\":%.3f,\"seconds\":%d,\"rounds\":%d}\n", r, seconds, rounds
    }
}' "$tmp/rounds.txt"
echo "load average $(load_average) at the end"
