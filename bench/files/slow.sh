#!/usr/bin/env bash
# bench/files/slow.sh: what a slow reader of a large file costs a server in memory (#33: "a
# 1 GiB download to a reader at 1 MiB/s: eddy's RSS grows by at most 1 MiB"). eddy-http-server
# --root and nginx 1.22 (one worker, sendfile on) serve a 1 GiB text file to curl
# --limit-rate 1M, over plain HTTP/1.1 (plain), HTTP/1.1 over TLS (tls: both read and
# encrypt), gzip'd on the fly at level 6 (gzfly: eddy --gzip, nginx gzip on), HTTP/2 over TLS
# (h2), and h2c by prior knowledge for eddy alone (h2c: nginx 1.22 cannot serve h2c and
# HTTP/1.1 on one port). The server's
# RSS (VmRSS, /proc/PID/status) is read before the download and every second of it for S
# seconds; a case's growth is the largest reading less the one before. Rounds alternate the
# servers (A B A B ...), pinned (server CPU 0, curl CPU 1). Prints each run (growth, bytes
# read, the server's CPU time), the median growth per case and server, and one
# {"bench":"files_slow",...} JSON line per case.
#
#   bash bench/files/slow.sh BUILD_DIR [--rounds N] [--seconds S] [--rate R] [--cases LIST]
#                            [--servers LIST] [--cpu N] [--client-cpu N] [--no-pin]
#
# Defaults: 3 rounds of 30 s at 1M (curl's --limit-rate), cases plain,tls,gzfly,h2,h2c, servers
# eddy,nginx. The target: eddy's growth at most 1 MiB (1024 KiB) in every case.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh"

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=3 seconds=30 rate=1M cpu=0 client_cpu=1 pin=1
cases=plain,tls,gzfly,h2,h2c
servers=eddy,nginx
parse_options bench/files/slow.sh "no-pin rounds seconds rate cases servers cpu client-cpu" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $seconds =~ ^[0-9]+$ && $seconds -ge 1 ]] || usage

eddy_server=$build_dir/examples/eddy-http-server
require_built bench/files/slow.sh "$eddy_server"
# shellcheck source=bench/support/http.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/http.sh"
scratch_dir
pin_setup curl
: >"$tmp/runs.txt"

mkdir -p "$tmp/www"
echo 'files' >"$tmp/www/index.html"
head -c $((768 << 20)) /dev/urandom | base64 -w 76 >"$tmp/www/1g.txt" # 1 GiB of text
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# start SERVER CASE: the server for the case on a free port (port), answering.
start() {
    local s=$1 c=$2 cmd lines flags=''
    port=$(free_port bench/files/slow.sh)
    http_scheme=http http_probe=()
    if [[ $s == eddy ]]; then
        cmd=("$eddy_server" --threads 1 --port "$port" --root "$tmp/www")
        [[ $c == tls || $c == h2 ]] && cmd+=(--tls "$tmp/cert.pem" "$tmp/key.pem")
        [[ $c == gzfly ]] && cmd+=(--gzip)
    else
        lines="location / { root $tmp/www; }"
        [[ $c == gzfly ]] && lines+=" gzip on; gzip_comp_level 6; gzip_types text/plain;"
        if [[ $c == tls || $c == h2 ]]; then
            lines+=" ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;"
            flags=ssl
            [[ $c == h2 ]] && flags="ssl http2"
        fi
        nginx_conf "$tmp/nginx" "$port" "$lines" "sendfile on; tcp_nopush on;" "$flags"
        cmd=("$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf")
    fi
    [[ $c == tls || $c == h2 ]] && http_scheme=https http_probe=(-k)
    start_http_server "$s" "$port" setsid "${cmd[@]}"
}

rss_kib() {
    awk '/^VmRSS/ {print $2}' "/proc/$1/status"
}

# One download of server $1 in case $2 for $seconds s; appends to runs.txt.
measure() {
    local s=$1 c=$2 before peak now cpu0 cpu1 got flags=(-sk --limit-rate "$rate")
    start "$s" "$c"
    [[ $c == gzfly ]] && flags+=(-H 'Accept-Encoding: gzip')
    case $c in
    h2) flags+=(--http2) ;;
    h2c) flags+=(--http2-prior-knowledge) ;;
    *) flags+=(--http1.1) ;;
    esac
    before=$(rss_kib "$server_pid")
    peak=$before
    cpu0=$(cpu_ticks "$server_pid")
    "${pin_client[@]}" curl "${flags[@]}" --max-time "$seconds" -o "$tmp/got" \
        "$http_scheme://127.0.0.1:$port/1g.txt" 2>/dev/null &
    local cpid=$!
    for ((i = 0; i < seconds; i++)); do
        sleep 1
        now=$(rss_kib "$server_pid")
        ((now > peak)) && peak=$now
    done
    wait $cpid 2>/dev/null || true # curl stops at --max-time, mid-download
    cpu1=$(cpu_ticks "$server_pid")
    got=$(stat -c %s "$tmp/got")
    stop_server
    printf 'round %d %-6s %-6s RSS %6d KiB before, grew %6d KiB; %5.1f MiB read in %d s; server CPU %.2f s\n' \
        "$r" "$c" "$s" "$before" $((peak - before)) "$(awk -v b="$got" 'BEGIN{print b / 1048576}')" \
        "$seconds" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$hz" 'BEGIN{print t / hz}')"
    echo "$c $s $((peak - before)) $got $before" >>"$tmp/runs.txt"
}

echo "bench files_slow: GET of a 1 GiB text file by curl --limit-rate $rate for ${seconds}s," \
    "one server thread each (eddy --threads 1, nginx one worker, sendfile on)"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
for c in ${cases//,/ }; do
    for ((r = 0; r < rounds; r++)); do
        for s in ${servers//,/ }; do
            [[ $s == nginx && $c == h2c ]] && continue
            [[ $s == nginx && ! -x $nginx_bin ]] && continue
            measure "$s" "$c"
        done
    done
done

summary='
{
    k = $1 " " $2
    grew[k] = grew[k] " " $3; got[k] = got[k] " " $4; base[k] = base[k] " " $5
    if (!($3 + 0 <= max[k] + 0)) max[k] = $3
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
}
END {
    printf "\n%-6s %-6s %14s %14s %14s %12s\n", "case", "server", "RSS before", "grew (med)",
        "grew (max)", "MiB read"
    for (i = 1; i <= n; i++) {
        c = order[i]
        for (j = 1; j <= 2; j++) {
            s = (j == 1 ? "eddy" : "nginx"); k = c " " s
            if (!(k in grew)) continue
            printf "%-6s %-6s %10d KiB %10d KiB %10d KiB %12.1f\n", c, s, median(base[k]),
                median(grew[k]), max[k], median(got[k]) / 1048576
        }
        k = c " eddy"; b = c " nginx"
        printf "{\"bench\":\"files_slow\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"%s\",", c,
            ((b in grew) ? "nginx" : "none")
        printf "\"rss_growth_kib\":%d,\"rss_growth_max_kib\":%d,", median(grew[k]), max[k]
        printf "\"baseline_rss_growth_kib\":%s,", ((b in grew) ? median(grew[b]) : "null")
        printf "\"bytes_read\":%d,\"seconds\":%d,\"rate\":\"%s\",\"rounds\":%d,", median(got[k]),
            seconds, rate, rounds
        printf "\"target_kib\":1024,\"target_met\":%s}\n", (max[k] <= 1024 ? "true" : "false")
    }
}'
awk -v seconds="$seconds" -v rounds="$rounds" -v rate="$rate" \
    -f "$(dirname "${BASH_SOURCE[0]}")/../support/median.awk" -f <(echo "$summary") "$tmp/runs.txt"
echo "load average $(load_average) at the end"
