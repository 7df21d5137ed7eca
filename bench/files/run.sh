#!/usr/bin/env bash
# bench/files: static files side by side under wrk (-t1 -c64, keep-alive): eddy-http-server
# --root (sendfile on epoll; eddy_uring: the same server on io_uring, which reads and sends)
# against nginx 1.22 serving the same directory with sendfile on, one worker each, on files of
# 1 KiB, 64 KiB and 1 MiB, over plain HTTP/1.1 and over TLS (no kTLS on either side: both read
# and encrypt), and a 100 KiB text file asked for with Accept-Encoding: gzip, answered from its
# precompressed .gz sibling (gz/100k: eddy's handler looks for siblings by default, nginx has
# gzip_static on) or compressed on the fly at gzip level 6 (gzfly/100k: eddy-http-server
# --gzip, nginx gzip on, gzip_comp_level 6; both stream it chunked). For each case and round, each server in turn (A B C A B C ...) is started
# pinned to one CPU, warmed up, measured by wrk pinned to another CPU, and stopped. Prints the
# rounds, medians (requests/s, MB/s, p99, the server's CPU time per request from
# /proc/PID/stat), the machine's costs beside them, eddy / nginx per server CPU-second paired
# per round (the issue's target: 1.0x), their median and range, and one {"bench":"files",...}
# JSON line per comparison.
#
#   bash bench/files/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S]
#                           [--connections N] [--cases LIST] [--servers LIST] [--cpu N]
#                           [--client-cpu N] [--no-pin] [--no-costs]
#
# Defaults: 3 rounds of 10 s, 1 s of warm-up, cases plain/1k,plain/64k,plain/1m,tls/1k,
# tls/64k,tls/1m,gz/100k,gzfly/100k, servers eddy,eddy_uring,nginx (those found), server on CPU 0, wrk on CPU 1.
# SMOKE=1 (the ctest bench.files_smoke): one round of 1 s of plain/64k and tls/64k, no machine
# costs, and eddy must answer.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh"

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=3 seconds=10 warmup=1 conns=64 cpu=0 client_cpu=1 pin=1 costs=1
cases=plain/1k,plain/64k,plain/1m,tls/1k,tls/64k,tls/1m,gz/100k,gzfly/100k
servers=eddy,eddy_uring,nginx
if [[ ${SMOKE:-0} == 1 ]]; then
    rounds=1 seconds=1 warmup=0 cases=plain/64k,tls/64k costs=0
fi
parse_options bench/files/run.sh "no-pin no-costs rounds seconds warmup connections=conns \
    cases servers cpu client-cpu" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage

eddy_server=$build_dir/examples/eddy-http-server
require_built bench/files/run.sh "$eddy_server"
for tool in wrk curl openssl; do
    command -v $tool >/dev/null || {
        echo "bench/files/run.sh: $tool is not installed (bash scripts/deps.sh --bench)" >&2
        exit 1
    }
done
# shellcheck source=bench/support/http.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/http.sh"
scratch_dir
: >"$tmp/rounds.txt"

# The directory both serve, and a certificate for both.
mkdir -p "$tmp/www"
echo 'files' >"$tmp/www/index.html"
head -c 1024 /dev/urandom >"$tmp/www/1k.bin"
head -c 65536 /dev/urandom >"$tmp/www/64k.bin"
head -c 1048576 /dev/urandom >"$tmp/www/1m.bin"
# Prose for gz/100k: the project's own documentation, 100 KiB of it, and its gzip -6 sibling.
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cat "$src_dir"/README.md "$src_dir"/docs/*.md >"$tmp/prose.txt"
head -c 102400 "$tmp/prose.txt" >"$tmp/www/100k.txt"
gzip -6 -k "$tmp/www/100k.txt"
cp "$tmp/www/100k.txt" "$tmp/www/fly100k.txt" # no sibling: compressed on the fly
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

subjects=()
for s in ${servers//,/ }; do
    case $s in
    eddy) subjects+=(eddy) ;;
    eddy_uring)
        if [[ $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0) == 0 ]] &&
            EDDY_POLLER=io_uring "$eddy_server" --help >/dev/null 2>&1; then
            subjects+=(eddy_uring)
        fi
        ;;
    nginx)
        if [[ -x $nginx_bin ]]; then
            subjects+=(nginx)
        else
            echo "bench/files/run.sh: nginx is not installed; left out" >&2
        fi
        ;;
    *)
        echo "bench/files/run.sh: unknown server $s (eddy, eddy_uring, nginx)" >&2
        exit 2
        ;;
    esac
done
pin_setup wrk

# Starts server $1 over transport $2 on a free port (port), pinned; returns once it answers.
start_server() {
    local s=$1 transport=$2 cmd lines flags=''
    port=$(free_port bench/files/run.sh)
    case $s in
    eddy | eddy_uring)
        local poller=epoll
        [[ $s == eddy_uring ]] && poller=io_uring
        cmd=(env EDDY_POLLER=$poller "$eddy_server" --threads 1 --port "$port" --root "$tmp/www")
        [[ $transport == tls ]] && cmd+=(--tls "$tmp/cert.pem" "$tmp/key.pem")
        [[ $transport == gzfly ]] && cmd+=(--gzip)
        ;;
    nginx)
        lines="location / { root $tmp/www; gzip_static on; }"
        [[ $transport == gzfly ]] && lines+="
        gzip on; gzip_comp_level 6; gzip_types text/plain; gzip_min_length 1024;"
        if [[ $transport == tls ]]; then
            lines+="
        ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;"
            flags=ssl
        fi
        nginx_conf "$tmp/nginx" "$port" "$lines" "sendfile on; tcp_nopush on;" "$flags"
        cmd=("$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf")
        ;;
    esac
    http_scheme=http http_probe=()
    [[ $transport == tls ]] && http_scheme=https http_probe=(-k)
    start_http_server "$s" "$port" setsid "${cmd[@]}"
}

# wrk's latency figure in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000
        printf "%.3f", n }'
}

# One measured run of server $1 on case $2 (transport/size, transport plain, tls, gz: plain
# asking for gzip, or gzfly: the same of a file with no sibling); appends to rounds.txt.
measure() {
    local s=$1 c=$2 transport=${2%/*} size=${2#*/} url rps p99 cpu0 cpu1 cpu_ns mbs file
    local hdr=()
    file=$tmp/www/$size.bin
    if [[ $transport == gz ]]; then
        transport=plain file=$tmp/www/$size.txt.gz hdr=(-H 'Accept-Encoding: gzip')
    elif [[ $transport == gzfly ]]; then
        file=$tmp/www/fly$size.txt hdr=(-H 'Accept-Encoding: gzip')
    fi
    start_server "$s" "$transport"
    [[ $transport == gzfly ]] && transport=plain
    url=$http_scheme://127.0.0.1:$port/$(basename "${file%.gz}")
    if [[ $file == */fly* ]]; then # coded on the fly: its bytes decode to the file's
        curl -sk --max-time 5 "${hdr[@]}" -D "$tmp/h" -o "$tmp/got" "$url"
        if ! grep -qi '^content-encoding: gzip' "$tmp/h" || ! gzip -dc <"$tmp/got" | cmp -s - "$file"; then
            echo "bench/files/run.sh: $s does not code $url on the fly" >&2
            exit 1
        fi
    elif [[ $(curl -sk --max-time 5 "${hdr[@]}" -o /dev/null -w '%{size_download}' "$url") != \
        $(stat -c %s "$file") ]]; then
        echo "bench/files/run.sh: $s does not serve $url whole" >&2
        exit 1
    fi
    if ((warmup > 0)); then
        "${pin_client[@]}" wrk -t1 -c"$conns" -d"${warmup}s" "${hdr[@]}" "$url" >/dev/null
    fi
    cpu0=$(cpu_ticks "$server_pid")
    "${pin_client[@]}" wrk -t1 -c"$conns" -d"${seconds}s" --latency "${hdr[@]}" "$url" \
        >"$tmp/wrk.txt"
    cpu1=$(cpu_ticks "$server_pid")
    stop_server
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk.txt")
    [[ -n $rps && -n $p99 ]] || { echo "no figures from wrk against $s:" >&2; cat "$tmp/wrk.txt" >&2; exit 1; }
    p99=$(to_ms "$p99")
    cpu_ns=$(awk -v t=$((cpu1 - cpu0)) -v hz="$hz" -v rps="$rps" -v s="$seconds" \
        'BEGIN { printf "%.0f", (rps > 0 ? t * 1e9 / hz / (rps * s) : 0) }')
    mbs=$(awk -v rps="$rps" -v b="$(stat -c %s "$file")" \
        'BEGIN { printf "%.1f", rps * b / 1e6 }')
    printf 'round %d %-9s %-10s %10.0f req/s %9s MB/s  p99 %8.3f ms  server CPU %8d ns/req\n' \
        "$r" "$c" "$s" "$rps" "$mbs" "$p99" "$cpu_ns"
    echo "$c $s $rps $p99 $cpu_ns $mbs $r" >>"$tmp/rounds.txt"
}

costs_line=
if ((costs)); then
    for p in udp/udp_report ws/ws_report echo/echo_report; do
        if [[ -x $build_dir/bench/$p ]]; then
            "$build_dir/bench/$p" --costs files "$cpu" "$client_cpu" | tee "$tmp/costs.txt"
            mc=$(grep '^{"bench":"machine"' "$tmp/costs.txt" || true)
            [[ -n $mc ]] && costs_line="machine: a system call $(field "$mc" syscall_ns) ns,\
 epoll_wait(0) $(field "$mc" epoll_wait0_ns) ns, clock_gettime $(field "$mc" clock_ns) ns"
            break
        fi
    done
fi

echo "bench files: GET of a file, keep-alive, wrk -t1 -c$conns -d${seconds}s, one server thread" \
    "each (eddy --threads 1, nginx one worker, sendfile on)"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds, servers alternating: ${subjects[*]}; cases: $cases"
for c in ${cases//,/ }; do
    for ((r = 0; r < rounds; r++)); do
        for s in "${subjects[@]}"; do
            measure "$s" "$c"
        done
    done
done

awk -v seconds="$seconds" -v rounds="$rounds" -v conns="$conns" -v costs="$costs_line" '
function median(list,    a, i, j, t, m) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) {
        t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
{
    k = $1 " " $2
    ops[k] = ops[k] " " $3; p99[k] = p99[k] " " $4; cpu[k] = cpu[k] " " $5; mbs[k] = mbs[k] " " $6
    if (!($1 in seenc)) { seenc[$1] = 1; corder[++nc] = $1 }
    if (!($2 in seens)) { seens[$2] = 1; sorder[++ns] = $2 }
    round_cpu[k, $7] = $5; nround[$1] = $7 + 1
}
END {
    printf "\n%-10s %-11s %12s %10s %10s %14s %14s\n", "case", "server", "req/s (med)", "MB/s",
        "p99 ms", "CPU ns/req", "eddy/x (CPU)"
    for (i = 1; i <= nc; i++) for (j = 1; j <= ns; j++) {
        k = corder[i] " " sorder[j]
        if (!(k in ops)) continue
        mo[k] = median(ops[k]); mp[k] = median(p99[k]); mc[k] = median(cpu[k]); mm[k] = median(mbs[k])
    }
    for (i = 1; i <= nc; i++) for (j = 1; j <= ns; j++) {
        c = corder[i]; s = sorder[j]; k = c " " s; e = c " eddy"
        if (!(k in mo)) continue
        ratio = (e in mc) && mc[e] > 0 && s != "eddy" ? sprintf("%.2fx", mc[k] / mc[e]) : ""
        printf "%-10s %-11s %12.0f %10.1f %10.3f %14.0f %14s\n", c, s, mo[k], mm[k], mp[k], mc[k], ratio
    }
    if (costs != "") print "(" costs ")"
    for (i = 1; i <= nc; i++) {
        c = corder[i]; e = c " eddy"; n = c " nginx"
        if (!(e in mo) || !(n in mo) || mc[e] <= 0) continue
        # Requests per server CPU-second, eddy over nginx, paired per round.
        list = ""; lo = 0; hi = 0
        for (q = 0; q < nround[c]; q++) {
            if (round_cpu[e, q] <= 0 || round_cpu[n, q] <= 0) continue
            x = round_cpu[n, q] / round_cpu[e, q]; list = list " " x
            if (lo == 0 || x < lo) lo = x
            if (x > hi) hi = x
        }
        r = list != "" ? median(list) : mc[n] / mc[e]
        printf "%s: eddy / nginx per server CPU-s, paired per round: median %.2fx (%.2f-%.2f)\n",
            c, r, lo, hi
        printf "{\"bench\":\"files\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"nginx\",", c
        printf "\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f,", mo[e], mo[n]
        printf "\"cpu_ns_per_req\":%.0f,\"baseline_cpu_ns_per_req\":%.0f,", mc[e], mc[n]
        printf "\"p99_ms\":%.3f,\"baseline_p99_ms\":%.3f,\"ratio_per_cpu\":%.3f,", mp[e], mp[n], r
        printf "\"ratio_min\":%.3f,\"ratio_max\":%.3f,", lo, hi
        printf "\"target_ratio\":1.0,\"target_met\":%s,\"connections\":%d,\"seconds\":%d,",
            (r >= 1.0 ? "true" : "false"), conns, seconds
        printf "\"rounds\":%d}\n", rounds
    }
}' "$tmp/rounds.txt"
if [[ ${SMOKE:-0} == 1 ]] && ! grep -q ' eddy ' "$tmp/rounds.txt"; then
    echo "bench/files/run.sh: eddy did not answer" >&2
    exit 1
fi
echo "load average $(load_average) at the end"
