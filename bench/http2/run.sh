#!/usr/bin/env bash
# bench/http2: HTTP/2 servers side by side under h2load: eddy-http-server (--threads 1), h2o
# 2.2.5 (num-threads 1) and nginx 1.22 (one worker, no master), over h2c (prior knowledge) and
# over TLS (h2 by ALPN; one self-signed EC P-256 certificate, made at the start, for all
# three). For each case and round, each server in turn (eddy h2o nginx eddy h2o nginx ...) is
# started fresh on a free port, pinned to one CPU, in a process group of its own; h2load -t 1
# runs pinned to another CPU twice, then the server is stopped (a server that exits meanwhile
# ends the run with exit status 1 and its output):
#
#   rate     h2load -D SECONDS --warm-up-time WARMUP: requests per second of the measured
#            window, and the server's CPU time per request (utime + stime of every process
#            of its group, from /proc, read when the warm-up ends and when the window ends)
#   latency  h2load -D LATENCY_SECONDS --log-file: p99 from each request's duration (h2load
#            prints min, max, mean and sd only; and h2load 1.52 writes its log with one
#            write(2) per request, which halved its rate on a 2-vCPU VM: a pass of its own)
#
# Cases, each over h2c and tls ("hello" runs h2c/hello and tls/hello; "tls/hello" only that):
#   hello    GET / ("Hello, World!", 13 bytes), h2load -c 16 -m 100
#   latency  GET /, -c 1 -m 1
#   4k, 64k  GET /bytes/4096 and /bytes/65536 (eddy makes the bytes; h2o and nginx serve files
#            of those sizes from a scratch docroot at the same paths), -c 16 -m 100 -w 16
#            -W 16: 64 KiB windows (h2load's default is 1 GiB), so flow control is at work
#   c500     GET /, -c 500 -m 1
#   rss      resident memory per idle connection (--idle-conns, each after one GET /) and
#            per open stream (--streams on each of --stream-conns connections: POST /echo
#            whose body never ends; h2o reads a body whole before its handlers run, nginx
#            here proxies /echo with request buffering, so all three keep them open), by
#            bench/http2/h2_rss.py, read --idle-wait seconds after the last connection (5:
#            eddy gives back pages of an HTTP/2 connection that read nothing for 2 s); and
#            eddy over HTTP/1.1 (eddy_h1) beside it, for the target "an idle HTTP/2
#            connection costs at most 2x an idle HTTP/1.1 connection"
#
# Prints each round, then per case a table of medians and min-max (requests/s, server CPU
# per request, requests per server CPU-second, the server's CPU use: CPU-seconds per second,
# near 1.00 when it set the rate; p50, p99), eddy / baseline per round of requests per server
# CPU-second with their median and range, one {"bench":"http2",...} JSON line per
# comparison, and the machine's costs (a system call, epoll_wait...) beside every table.
#
#   bash bench/http2/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S]
#                           [--latency-seconds S] [--rss-rounds N] [--cases LIST]
#                           [--servers LIST] [--idle-conns N] [--stream-conns N] [--streams N]
#                           [--idle-wait S]
#                           [--cpu N] [--client-cpu N] [--no-pin] [--no-costs]
#
# Defaults, also taken from the environment (ROUNDS, DURATION, WARMUP, CASES, SERVERS; the
# options win): 5 rounds, 2 s windows after 1 s of warm-up, 0.5 s latency passes, every case
# (hello,latency,4k,64k,c500,rss: about 14 minutes in all), servers eddy,h2o,nginx; rss in the
# first 3 rounds (--rss-rounds: its figures hardly move), with 1000 idle connections read 5 s
# after the last and 100 streams on each of 10 of them; servers on CPU 0, h2load on CPU 1
# (--no-pin: no taskset). A server whose program is missing is left out with a word; eddy,
# when it does not answer GET /, /bytes/4096 and /bytes/65536 in HTTP/2, is marked "not
# available" and the ratios are h2o / nginx. SMOKE=1 (the ctest bench.http2_smoke): one round
# of tls/hello (1 s) and h2c/rss (100 connections), no machine costs, and eddy must answer
# (exit 1 if not). Needs h2load (nghttp2-client), curl, openssl, python3-h2 for rss; h2o and
# nginx (scripts/deps.sh --bench). Other --options (bench/run.sh passes its arguments to every
# benchmark) are ignored with a word.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, stop_server...
# shellcheck source=bench/support/http.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/http.sh" # nginx_conf, start_http_server

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rounds=${ROUNDS:-5} seconds=${DURATION:-2} warmup=${WARMUP:-1} lat_seconds=0.5 rss_rounds=3
cases=${CASES:-hello,latency,4k,64k,c500,rss} servers=${SERVERS:-eddy,h2o,nginx}
idle_conns=1000 stream_conns=10 streams=100 idle_wait=5 cpu=0 client_cpu=1 pin=1 costs=1 require_eddy=0
lat_warmup=0.2 # the latency pass's warm-up: connecting, the server already warm
if [[ ${SMOKE:-0} == 1 ]]; then
    rounds=1 seconds=1 warmup=0.2 lat_seconds=0.5 lat_warmup=0.1
    cases=tls/hello,h2c/rss idle_conns=100 stream_conns=2 idle_wait=0.5 costs=0 require_eddy=1
fi
parse_options bench/http2/run.sh "no-pin no-costs rounds seconds warmup \
    latency-seconds=lat_seconds rss-rounds cases servers idle-conns stream-conns streams \
    idle-wait cpu client-cpu others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage
[[ $rss_rounds =~ ^[0-9]+$ && $rss_rounds -ge 1 ]] || usage
((rss_rounds > rounds)) && rss_rounds=$rounds
for v in "$seconds" "$warmup" "$lat_seconds" "$idle_wait"; do
    [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage
done

for tool in h2load curl openssl; do
    if ! command -v "$tool" >/dev/null; then
        echo "bench/http2/run.sh: $tool is missing (bash scripts/deps.sh --bench)" >&2
        exit 1
    fi
done
PATH=$PATH:/usr/sbin # nginx lives there; a user's PATH may not have it

# The cases asked, each as TRANSPORT/NAME.
case_list=()
for c in ${cases//,/ }; do
    case $c in
    hello | latency | 4k | 64k | c500 | rss) case_list+=("h2c/$c" "tls/$c") ;;
    h2c/hello | h2c/latency | h2c/4k | h2c/64k | h2c/c500 | h2c/rss) case_list+=("$c") ;;
    tls/hello | tls/latency | tls/4k | tls/64k | tls/c500 | tls/rss) case_list+=("$c") ;;
    *)
        echo "bench/http2/run.sh: unknown case $c (hello, latency, 4k, 64k, c500, rss, each" \
            "alone or as h2c/CASE or tls/CASE)" >&2
        exit 2
        ;;
    esac
done

# h2_rss.py needs python3-h2: the first python3 that has it (a pyenv's may not).
python=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import h2.connection' 2>/dev/null; then
        python=$p
        break
    fi
done
if [[ -z $python && " ${case_list[*]}" == *"/rss"* ]]; then
    echo "bench/http2/run.sh: no python3 with h2 (python3-h2); the rss cases left out" >&2
    mapfile -t case_list < <(printf '%s\n' "${case_list[@]}" | grep -v '/rss$')
fi

scratch_dir
trap 'exit 130' INT TERM
# Each server leads a process group of its own (setsid), which stop_server stops whole.
server_group=1
pin_setup h2load

# Everything lives in $tmp: the certificate, the docroot of the baselines, their configs.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
mkdir -p "$tmp/www/bytes"
printf 'Hello, World!' >"$tmp/www/hello.txt"
for n in 4096 65536; do
    head -c "$n" /dev/zero | tr '\0' x >"$tmp/www/bytes/$n"
done
raise_nofile $((idle_conns + 1200))
nginx_connections=$((idle_conns > 900 ? idle_conns + 200 : 1100))

eddy_server=$build_dir/examples/eddy-http-server
h2o_bin=$(command -v h2o || true)

# The configuration of server $1 over transport $2 ($3: its port), and the command that runs
# it (cmd).
configure() {
    local s=$1 transport=$2 p=$3 tls_listen='' user=''
    case $s in
    eddy | eddy_h1)
        cmd=(env EDDY_POLLER=epoll "$eddy_server" --threads 1 --port "$p")
        if [[ $transport == tls ]]; then
            cmd+=(--tls "$tmp/cert.pem" "$tmp/key.pem")
        fi
        ;;
    h2o)
        # As root h2o would switch to nobody, who cannot read $tmp; OCSP stapling off (its
        # fetcher is a process of its own); file.etag off: fewer response headers.
        [[ $(id -u) == 0 ]] && user="user: root"
        if [[ $transport == tls ]]; then
            tls_listen="
  ssl:
    certificate-file: $tmp/cert.pem
    key-file: $tmp/key.pem
    ocsp-update-interval: 0"
        fi
        mkdir -p "$tmp/h2o"
        cat >"$tmp/h2o/h2o.conf" <<EOF
$user
num-threads: 1
max-connections: $nginx_connections
pid-file: $tmp/h2o/h2o.pid
error-log: $tmp/h2o/error.log
file.etag: OFF
listen:
  host: 127.0.0.1
  port: $p$tls_listen
hosts:
  default:
    paths:
      /:
        file.file: $tmp/www/hello.txt
      /bytes:
        file.dir: $tmp/www/bytes
EOF
        cmd=("$h2o_bin" -c "$tmp/h2o/h2o.conf")
        ;;
    nginx)
        # /echo is proxied with request buffering (nginx's default): nginx reads the body
        # whole before it connects, so a stream whose body never ends stays open.
        local lines="location /bytes/ { root $tmp/www; }
        location = /echo { proxy_pass http://127.0.0.1:9; }" flags=http2
        if [[ $transport == tls ]]; then
            lines+="
        ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;"
            flags="ssl http2"
        fi
        nginx_conf "$tmp/nginx" "$p" "$lines" "" "$flags"
        cmd=("$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf")
        ;;
    esac
}

# Starts server $1 for transport $2 on a free port (port), pinned, leading a process group of
# its own; returns once it answers GET / (exits 1 when it does not: start_http_server).
start_server() {
    local s=$1 transport=$2
    port=$(free_port bench/http2/run.sh)
    configure "$s" "$transport" "$port"
    if [[ $transport == tls ]]; then
        http_scheme=https http_probe=(-k --http2)
    elif [[ $s == eddy_h1 ]]; then
        http_scheme=http http_probe=()
    else
        http_scheme=http http_probe=(--http2-prior-knowledge)
    fi
    start_http_server "$s" "$port" setsid "${cmd[@]}"
}

# Whether the server just started speaks HTTP/2 over transport $1 and serves every path the
# cases ask; the reason when not, on stdout.
h2_check() {
    local scheme=http args=(--http2-prior-knowledge) path want got
    if [[ $1 == tls ]]; then
        scheme=https args=(-k --http2)
    fi
    for path in /:13 /bytes/4096:4096 /bytes/65536:65536; do
        want=${path#*:} path=${path%%:*}
        got=$(curl -s --max-time 5 "${args[@]}" -o /dev/null \
            -w '%{http_code} %{http_version} %{size_download}' \
            "$scheme://127.0.0.1:$port$path" || true)
        if [[ $got != "200 2 $want" ]]; then
            echo "GET $path over $1: \"$got\" (status, HTTP version, bytes), not \"200 2 $want\""
            return 0
        fi
    done
}

# The servers here, in the order asked (the first one that runs is every ratio's subject:
# eddy; without it, h2o against nginx).
subjects=()
for s in ${servers//,/ }; do
    case $s in
    eddy)
        if [[ -x $eddy_server ]]; then
            subjects+=(eddy)
        elif ((require_eddy)); then
            echo "bench/http2/run.sh: $eddy_server is not built" >&2
            exit 1
        else
            echo "bench/http2/run.sh: $eddy_server is not built; eddy left out" >&2
        fi
        ;;
    h2o)
        if [[ -n $h2o_bin ]]; then
            subjects+=(h2o)
        else
            echo "bench/http2/run.sh: h2o is not installed (scripts/deps.sh --bench); left out" >&2
        fi
        ;;
    nginx)
        if [[ -x $nginx_bin ]] && "$nginx_bin" -V 2>&1 | grep -q with-http_v2_module; then
            subjects+=(nginx)
        else
            echo "bench/http2/run.sh: nginx with HTTP/2 is not installed (nginx-light);" \
                "left out" >&2
        fi
        ;;
    *)
        echo "bench/http2/run.sh: unknown server $s (eddy, h2o, nginx)" >&2
        exit 2
        ;;
    esac
done
if [[ ${#subjects[@]} -eq 0 ]]; then
    echo "bench/http2/run.sh: no server to measure" >&2
    exit 1
fi

# Each server, started once per transport the cases use, must answer in HTTP/2: eddy is marked
# not available when it does not (the smoke test fails instead), a baseline stops the run.
declare -A unavailable=()
transports=$(printf '%s\n' "${case_list[@]}" | cut -d/ -f1 | sort -u | tr '\n' ' ')
for s in "${subjects[@]}"; do
    for t in $transports; do
        if [[ $s == eddy ]]; then
            # In a subshell, which stops the server as it ends: an eddy that does not answer
            # in HTTP/2 (start_http_server exits 1 after 15 s) must not end the run.
            why=$(
                trap '[[ -n $server_pid ]] && stop_server' EXIT
                start_server eddy "$t" >/dev/null 2>&1
                h2_check "$t"
            ) || why="no answer to GET / in HTTP/2 within 15 s"
        else
            start_server "$s" "$t"
            why=$(h2_check "$t")
            stop_server
        fi
        if [[ -n $why ]]; then
            if [[ $s != eddy ]] || ((require_eddy)); then
                echo "bench/http2/run.sh: $s does not serve HTTP/2 as the cases need: $why" >&2
                exit 1
            fi
            echo "bench/http2/run.sh: eddy over $t: not available ($why)" >&2
            unavailable[eddy/$t]=1
        fi
    done
done
# eddy over HTTP/1.1, for the rss cases.
if [[ " ${subjects[*]} " == *" eddy "* && " ${case_list[*]}" == *"/rss"* ]]; then
    subjects+=(eddy_h1)
fi

# The machine's costs, printed by one of the report programs (bench/support/report.c) when
# built; a line of them is repeated under every table.
if ((costs)); then
    machine_costs http2 "$build_dir" "$cpu" "$client_cpu"
fi

h2o_version=h2o
[[ -n $h2o_bin ]] && h2o_version=$("$h2o_bin" --version | head -1)
names=()
for s in "${subjects[@]}"; do
    case $s in
    eddy) names+=("eddy-http-server (--threads 1)") ;;
    h2o) names+=("$h2o_version (num-threads 1)") ;;
    nginx) names+=("$("$nginx_bin" -v 2>&1 | sed 's/.*: //') (one worker, no master)") ;;
    esac
done
list=$(printf '%s, ' "${names[@]}")
echo "bench http2: $(h2load --version | head -1) -t 1 against ${list%, }"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds of ${seconds} s after ${warmup} s of warm-up, p99 from ${lat_seconds} s" \
    "passes of their own; servers alternating: ${subjects[*]}"
echo "cases: ${case_list[*]}"

# h2load's options and the path of case $1 (without its transport), in h2_args and path.
case_args() {
    path=/
    case $1 in
    hello) h2_args=(-c 16 -m 100) ;;
    latency) h2_args=(-c 1 -m 1) ;;
    4k) h2_args=(-c 16 -m 100 -w 16 -W 16) path=/bytes/4096 ;;
    64k) h2_args=(-c 16 -m 100 -w 16 -W 16) path=/bytes/65536 ;;
    c500) h2_args=(-c 500 -m 1) ;;
    esac
}

# Seconds (3, 0.5) in h2load's spelling of a duration: milliseconds.
ms() {
    awk -v s="$1" 'BEGIN { printf "%dms", s * 1000 }'
}

# h2load $@ pinned, its output in file $1; exits 1, with both outputs, when it fails or no
# request succeeded.
h2load_run() {
    local out=$1
    shift
    if ! "${pin_client[@]}" h2load "$@" >"$out" 2>&1 ||
        ! awk '/^requests:/ { exit !($8 > 0) }' "$out"; then
        echo "bench/http2/run.sh: h2load $* failed against $s:" >&2
        cat "$out" "$tmp/server.log" >&2
        exit 1
    fi
    server_alive "h2load $*"
}

# Exits 1, saying so after $1 (what ran), when the server has exited (crashed).
server_alive() {
    local rc
    sleep 0.1 # h2load has just closed its connections: a server that fails on that
    if ! kill -0 "$server_pid" 2>/dev/null; then
        rc=0
        wait "$server_pid" || rc=$?
        server_pid=
        echo "bench/http2/run.sh: $s exited (status $rc$( ((rc > 128)) &&
            echo ", signal $((rc - 128))")) after $1; its output:" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
}

: >"$tmp/rounds.txt"
# One round (its number $2) of case $1 with server $3: a line of $tmp/rounds.txt.
run_case() {
    local c=$1 r=$2 s=$3 t=${1%%/*} name=${1#*/} url sampler
    if [[ $name == rss ]]; then
        run_rss "$@"
        return 0
    fi
    [[ $s == eddy_h1 ]] && return 0
    if [[ -n ${unavailable[$s/$t]:-} ]]; then
        printf 'round %d %-12s %-6s not available\n' "$r" "$c" "$s"
        echo "$c $s $r na" >>"$tmp/rounds.txt"
        return 0
    fi
    case_args "$name"
    start_server "$s" "$t"
    url=http://127.0.0.1:$port$path
    [[ $t == tls ]] && url=https://127.0.0.1:$port$path
    # The server's CPU over h2load's measured window: its warm-up timer starts as h2load
    # does (connecting within it), so the window is WARMUP s after the launch, SECONDS long.
    (
        sleep "$warmup"
        group_cpu_ticks "$server_pid" >"$tmp/ticks0"
        sleep "$seconds"
        group_cpu_ticks "$server_pid" >"$tmp/ticks1"
    ) &
    sampler=$!
    h2load_run "$tmp/rate.txt" -t 1 "${h2_args[@]}" -D "$(ms "$seconds")" \
        --warm-up-time "$(ms "$warmup")" "$url"
    wait "$sampler"
    rm -f "$tmp/requests.log" # h2load appends to it
    h2load_run "$tmp/latency.txt" -t 1 "${h2_args[@]}" -D "$(ms "$lat_seconds")" \
        --warm-up-time "$(ms "$lat_warmup")" --log-file="$tmp/requests.log" "$url"
    stop_server
    # Each request's duration (µs, the log's third column; status -1: failed) sorted: the
    # median and p99 in ms.
    local pcts
    pcts=$(awk '$2 > 0 { print $3 }' "$tmp/requests.log" | sort -n | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "0 0"; else printf "%.3f %.3f\n", v[int(NR * 0.5) + 1] / 1000,
            v[int(NR * 0.99) + 1] / 1000 }')
    # case server round req/s cpu_ns/req req_per_cpu_s p50_ms p99_ms failed protocol cipher
    awk -v c="$c" -v s="$s" -v r="$r" -v ticks=$(($(cat "$tmp/ticks1") - $(cat "$tmp/ticks0"))) \
        -v hz="$hz" -v p="$pcts" '
        /^finished in/ { rps = $4 }
        /^requests:/ { ok = $8; failed = $10 + $12 + $14 }
        /^status codes:/ { non2xx = $5 + $7 + $9 }
        /^Application protocol:/ { proto = $3 }
        /^Cipher:/ { cipher = $2 }
        END {
            ns = ok > 0 ? ticks * 1e9 / hz / ok : 0
            printf "%s %s %d %.0f %.0f %.0f %s %d %s %s\n", c, s, r, rps, ns,
                (ns > 0 ? 1e9 / ns : 0), p, failed + non2xx, proto, (cipher == "" ? "-" : cipher)
        }' "$tmp/rate.txt" >"$tmp/line.txt"
    cat "$tmp/line.txt" >>"$tmp/rounds.txt"
    awk '{ printf "round %d %-12s %-6s %10.0f req/s  server CPU %7.0f ns/req, %9.0f req per" \
        " CPU-s, use %.2f  p50 %7.3f ms  p99 %7.3f ms  %s%s\n", $3, $1, $2, $4, $5, $6,
        $4 * $5 / 1e9, $7, $8, $10,
        ($9 > 0 ? sprintf("  %d FAILED or not 2xx", $9) : "") }' "$tmp/line.txt"
}

: >"$tmp/rss.txt"
# One round (its number $2) of case TRANSPORT/rss ($1) with server $3: a line of $tmp/rss.txt.
run_rss() {
    local c=$1 r=$2 s=$3 t=${1%%/*} args=() out
    ((r < rss_rounds)) || return 0
    if [[ -n ${unavailable[$s/$t]:-} || ($s == eddy_h1 && -n ${unavailable[eddy/$t]:-}) ]]
    then
        echo "$c $s $r na" >>"$tmp/rss.txt"
        return 0
    fi
    start_server "$s" "$t"
    [[ $t == tls ]] && args+=(--tls)
    [[ $s == eddy_h1 ]] && args+=(--h1)
    if ! out=$("${pin_client[@]}" "$python" "$here/h2_rss.py" --pgid "$server_pid" \
        --port "$port" --conns "$idle_conns" --stream-conns "$stream_conns" \
        --streams "$streams" --idle-wait "$idle_wait" "${args[@]}"); then
        echo "bench/http2/run.sh: h2_rss.py failed against $s over $t" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
    server_alive "h2_rss.py"
    stop_server
    # case server round idle_bytes_per_conn bytes_per_stream answered streams conns
    awk -v c="$c" -v s="$s" -v r="$r" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s %s %d %d %s %s %s %d\n", c, s, r, v["idle_bytes_per_conn"],
            (("bytes_per_stream" in v) ? v["bytes_per_stream"] : "-"),
            (("answered" in v) ? v["answered"] : "-"), (("streams" in v) ? v["streams"] : "-"),
            v["conns"] }' <<<"$out" | tee -a "$tmp/rss.txt" |
        awk '{ printf "round %d %-12s %-7s %8d bytes per idle connection (%d)%s\n", $3, $1, $2,
            $4, $8, ($5 == "-" ? "" : sprintf(", %s bytes per open stream (%s, %s answered)",
            $5, $7, $6)) }'
}
rounds_loop "$(IFS=,; echo "${case_list[*]}")" run_case

# The tables: per case, medians (the middle value; the mean of the two middle ones when even)
# and min-max, the per-round ratios of the first server (eddy) to each other one, JSON lines.
awk -v rounds="$rounds" -v rss_rounds="$rss_rounds" -v seconds="$seconds" \
    -v costs="$costs_line" -v subjects="${subjects[*]}" '
function sortv(list, a,    k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--)
            a[j + 1] = a[j]
        a[j + 1] = t
    }
    return k
}
# The median of list; lo and hi its ends.
function med(list,    a, k) {
    k = sortv(list, a)
    if (k == 0) {
        lo = hi = 0
        return 0
    }
    lo = a[1]
    hi = a[k]
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function describe(name) {
    if (name ~ /hello$/) return "GET / (13 bytes), h2load -c 16 -m 100"
    if (name ~ /latency$/) return "GET / (13 bytes), h2load -c 1 -m 1"
    if (name ~ /\/4k$/) return "GET /bytes/4096, h2load -c 16 -m 100 -w 16 -W 16"
    if (name ~ /\/64k$/) return "GET /bytes/65536, h2load -c 16 -m 100 -w 16 -W 16"
    if (name ~ /c500$/) return "GET / (13 bytes), h2load -c 500 -m 1"
    return ""
}
BEGIN { ns = split(subjects, order, " ") }
FILENAME ~ /rounds.txt$/ {
    c = $1; s = $2
    if (!(c in seen)) { seen[c] = 1; cases[++nc] = c }
    if ($4 == "na") { na[c, s] = 1; next }
    has[c, s] = 1
    rps[c, s] = rps[c, s] " " $4; cpu[c, s] = cpu[c, s] " " $5; per[c, s] = per[c, s] " " $6
    p50[c, s] = p50[c, s] " " $7; p99[c, s] = p99[c, s] " " $8
    use[c, s] = use[c, s] " " ($4 * $5 / 1e9)
    bad[c, s] += $9; proto[c, s] = $10 ($11 == "-" ? "" : " " $11)
    R[c, s, $3] = $6; Q[c, s, $3] = $4
    next
}
{
    c = $1; s = $2
    if (!(c in rseen)) { rseen[c] = 1; rcases[++nr] = c }
    if ($4 == "na") { na[c, s] = 1; next }
    has[c, s] = 1
    idle[c, s] = idle[c, s] " " $4
    if ($5 != "-") { strm[c, s] = strm[c, s] " " $5; ans[c, s] += $6; nstreams[c, s] = $7 }
    nconns[c, s] = $8
}
END {
    for (i = 1; i <= nc; i++) {
        c = cases[i]
        printf "\n== %s: %s, %d s windows, %d rounds\n", c, describe(c), seconds, rounds
        printf "%-6s %-28s %-24s %-28s %7s %8s %8s  %s\n", "server", "req/s median (min-max)",
            "CPU ns/req (min-max)", "req per CPU-s (min-max)", "CPU use", "p50 ms", "p99 ms",
            "protocol"
        first = ""
        for (j = 1; j <= ns; j++) {
            s = order[j]
            if (s == "eddy_h1") continue
            if (!((c, s) in has)) {
                if ((c, s) in na) printf "%-6s not available\n", s
                continue
            }
            if (first == "") first = s
            mr[s] = med(rps[c, s]); r1 = sprintf("%.0f (%.0f-%.0f)", mr[s], lo, hi)
            mc[s] = med(cpu[c, s]); r2 = sprintf("%.0f (%.0f-%.0f)", mc[s], lo, hi)
            mp[s] = med(per[c, s]); r3 = sprintf("%.0f (%.0f-%.0f)", mp[s], lo, hi)
            m50[s] = med(p50[c, s]); m99[s] = med(p99[c, s]); mu = med(use[c, s])
            printf "%-6s %-28s %-24s %-28s %7.2f %8.3f %8.3f  %s%s\n", s, r1, r2, r3, mu,
                m50[s], m99[s],
                proto[c, s], (bad[c, s] > 0 ? sprintf("  %d FAILED or not 2xx", bad[c, s]) : "")
        }
        for (j = 1; j <= ns; j++) {
            s = order[j]
            if (s == "eddy_h1" || s == first || !((c, s) in has)) continue
            # The ratios of each round, then their median and range.
            list = ""; qlist = ""
            for (r = 0; r < rounds; r++) {
                if ((c, first, r) in R && (c, s, r) in R && R[c, s, r] > 0 && Q[c, s, r] > 0) {
                    list = list " " sprintf("%.3f", R[c, first, r] / R[c, s, r])
                    qlist = qlist " " sprintf("%.3f", Q[c, first, r] / Q[c, s, r])
                }
            }
            shown = list
            pr = med(list); plo = lo; phi = hi
            qr = med(qlist); qlo = lo; qhi = hi
            printf "%s / %s: requests per server CPU-second %.3fx median (%.3f-%.3f; rounds:%s)," \
                " requests/s %.3fx (%.3f-%.3f)\n", first, s, pr, plo, phi, shown, qr, qlo, qhi
            json[++nj] = sprintf("{\"bench\":\"http2\",\"case\":\"%s\",\"subject\":\"%s\"," \
                "\"baseline\":\"%s\",\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f," \
                "\"ratio\":%.4f,\"ratio_min\":%.4f,\"ratio_max\":%.4f,\"cpu_ns_per_req\":%.0f," \
                "\"baseline_cpu_ns_per_req\":%.0f,\"req_per_cpu_s\":%.0f," \
                "\"baseline_req_per_cpu_s\":%.0f,\"per_cpu_ratio\":%.4f," \
                "\"per_cpu_ratio_min\":%.4f,\"per_cpu_ratio_max\":%.4f,\"p50_ms\":%.3f," \
                "\"p99_ms\":%.3f,\"baseline_p50_ms\":%.3f,\"baseline_p99_ms\":%.3f," \
                "\"seconds\":%s,\"rounds\":%d}", c, first, s, mr[first], mr[s], qr, qlo, qhi,
                mc[first], mc[s], mp[first], mp[s], pr, plo, phi, m50[first], m99[first],
                m50[s], m99[s], seconds, rounds)
        }
        if ((c, "eddy") in na)
            for (j = 1; j <= ns; j++)
                if (order[j] != "eddy" && order[j] != "eddy_h1" && (c, order[j]) in has)
                    json[++nj] = sprintf("{\"bench\":\"http2\",\"case\":\"%s\"," \
                        "\"subject\":\"eddy\",\"baseline\":\"%s\",\"available\":false}", c,
                        order[j])
        if (costs != "") print "(" costs ")"
        for (j = 1; j <= nj; j++) print json[j]
        nj = 0
    }
    for (i = 1; i <= nr; i++) {
        c = rcases[i]
        printf "\n== %s: resident memory (VmRSS of the server'\''s process group) per idle" \
            " connection, each after one GET /, and per open stream (POST /echo, body never" \
            " ended), %d rounds\n", c, rss_rounds
        printf "%-8s %-34s %-34s %s\n", "server", "bytes per idle conn median (min-max)",
            "bytes per open stream (min-max)", "streams answered (should be 0)"
        first = ""
        for (j = 1; j <= ns; j++) {
            s = order[j]
            if (!((c, s) in has)) {
                if ((c, s) in na) printf "%-8s not available\n", s
                continue
            }
            if (first == "" && s != "eddy_h1") first = s
            mi[s] = med(idle[c, s]); r1 = sprintf("%.0f (%.0f-%.0f)", mi[s], lo, hi)
            r2 = "-"; ms[s] = 0; a2 = "-"
            if ((c, s) in strm) {
                ms[s] = med(strm[c, s])
                r2 = sprintf("%.0f (%.0f-%.0f) x%d", ms[s], lo, hi, nstreams[c, s])
                a2 = ans[c, s]
            }
            printf "%-8s %-34s %-34s %s\n", s, r1 " x" nconns[c, s], r2, a2
        }
        for (j = 1; j <= ns; j++) {
            s = order[j]
            if (s == first || first == "" || !((c, s) in has) || mi[s] <= 0) continue
            if (s == "eddy_h1") {
                ratio = mi[first] / mi[s]
                printf "%s HTTP/2 / HTTP/1.1 bytes per idle connection: %.2fx (target <= 2x:" \
                    " %s)\n", first, ratio, (ratio <= 2 ? "met" : "NOT met")
                json[++nj] = sprintf("{\"bench\":\"http2\",\"case\":\"%s\",\"subject\":\"%s\"," \
                    "\"baseline\":\"eddy_h1\",\"idle_conn_bytes\":%.0f," \
                    "\"baseline_idle_conn_bytes\":%.0f,\"ratio\":%.4f,\"target_ratio_max\":2.0," \
                    "\"target_met\":%s,\"conns\":%d,\"rounds\":%d}", c, first, mi[first], mi[s],
                    ratio, (ratio <= 2 ? "true" : "false"), nconns[c, s], rss_rounds)
                continue
            }
            ratio = mi[first] / mi[s]
            sr = ms[s] > 0 ? ms[first] / ms[s] : 0
            printf "%s / %s (lower favours %s): bytes per idle connection %.2fx, per open" \
                " stream %.2fx\n", first, s, first, ratio, sr
            json[++nj] = sprintf("{\"bench\":\"http2\",\"case\":\"%s\",\"subject\":\"%s\"," \
                "\"baseline\":\"%s\",\"idle_conn_bytes\":%.0f,\"baseline_idle_conn_bytes\":%.0f," \
                "\"ratio\":%.4f,\"stream_bytes\":%.0f,\"baseline_stream_bytes\":%.0f," \
                "\"stream_ratio\":%.4f,\"conns\":%d,\"streams\":%d,\"rounds\":%d}", c, first, s,
                mi[first], mi[s], ratio, ms[first], ms[s], sr, nconns[c, s], nstreams[c, s],
                rss_rounds)
        }
        if (costs != "") print "(" costs ")"
        for (j = 1; j <= nj; j++) print json[j]
        nj = 0
    }
}' "$tmp/rounds.txt" "$tmp/rss.txt"
echo "load average $(load_average) at the end"
