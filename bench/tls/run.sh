#!/usr/bin/env bash
# bench/tls: eddy's TLS handler against Netty's SslHandler (JDK engine, Debian's
# libnetty-java), both as one-loop TLS echo servers with the same EC P-256 certificate, under
# the same load generator (bench_tls load). For each round, each server in turn (eddy,
# netty_ssl, eddy, netty_ssl, ...) is started pinned to one CPU, the load runs pinned to
# another, the server is stopped. Cases: stream_64k (16 connections each streaming 64 KiB
# writes, bytes echoed per second) and handshakes (16 connections in a loop of full
# handshakes, one byte echoed, close: handshakes per second). Prints a table of medians with
# min-max and eddy / netty ratios, and one {"bench":"tls",...} line per case.
#
#   bash bench/tls/run.sh BUILD_DIR [--rounds N] [--seconds S] [--warmup S] [--java-warmup S]
#                         [--cpu N] [--client-cpu N] [--no-pin] [--port N] [--servers LIST]
#
# Defaults: 3 rounds, 3 s measured after 1 s of warm-up (Netty: 4 s, so the JIT has compiled
# the hot path), server on CPU 0, load on CPU 1. Without a JDK or Netty the eddy rows run
# alone and no ratio is printed.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, stop_server...

[[ $# -ge 1 ]] || usage
build_dir=$(cd "$1" && pwd)
shift
rounds=3 seconds=3 warmup=1 java_warmup=4 cpu=0 client_cpu=1 pin=1 port=17400
servers=eddy,netty_ssl
parse_options bench/tls/run.sh "no-pin rounds seconds warmup java-warmup cpu client-cpu port \
    servers" "$@"
port=$(run_port "$port")

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$build_dir/bench/tls/bench_tls
require_built bench/tls/run.sh "$bench"
command -v openssl >/dev/null || { echo "bench/tls: needs the openssl tool" >&2; exit 1; }

scratch_dir

# One self-signed EC P-256 certificate for both servers (a PKCS#8 key, which the JDK reads).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/key.pem" \
    -out "$tmp/cert.pem" -subj /CN=localhost -days 2 2>/dev/null

# Netty: compiled here against Debian's jars (netty-all.jar is only a manifest there).
netty_cp=
if [[ ,$servers, == *,netty_ssl,* ]]; then
    netty_classpath "$here/java/TlsEchoServer.java" netty-common netty-buffer netty-transport \
        netty-handler netty-codec netty-resolver
    if [[ -z $netty_cp ]] || ! command -v java >/dev/null; then
        echo "bench/tls: no JDK or Netty jars (bash scripts/deps.sh --bench): eddy alone" >&2
        servers=eddy
    fi
fi

# Taskset prefixes (pin_server, pin_client; empty with --no-pin). Servers start as plain
# commands in the background, never through a function, so $! is the server itself (taskset
# execs it) and kill reaches it.
pin_setup load

start_server() { # name
    local log=$tmp/server.log
    : >"$log" # here, not in the child: the wait below must not read the last server's log
    case $1 in
    eddy)
        "${pin_server[@]}" "$bench" server "$port" "$tmp/cert.pem" "$tmp/key.pem" >"$log" 2>&1 &
        ;;
    netty_ssl)
        "${pin_server[@]}" java -XX:+UseParallelGC -Xms256m -Xmx256m \
            -Dio.netty.leakDetection.level=disabled -cp "$netty_cp" TlsEchoServer "$port" \
            "$tmp/cert.pem" "$tmp/key.pem" >"$log" 2>&1 &
        ;;
    esac
    server_pid=$!
    wait_for_log "$log" "listening on" 200 && return 0
    echo "bench/tls: the $1 server did not start: $(cat "$log")" >&2
    exit 1
}

IFS=, read -r -a subjects <<<"$servers"
results=$tmp/results.txt # case server round value protocol cipher
: >"$results"
# One round (its number $2, from 0) of server $3: both cases ($1, "both") against one start.
run_round() {
    local round=$(($2 + 1)) s=$3 w=$warmup case line name value proto cipher
    start_server "$s"
    [[ $s == netty_ssl ]] && w=$java_warmup
    for case in stream handshakes; do
        line=$("${pin_client[@]}" "$bench" load "$case" "$port" "$seconds" "$w" |
            grep '^RESULT' || true)
        [[ -n $line ]] || { echo "bench/tls: no result from $s $case" >&2; exit 1; }
        read -r _ name value proto cipher <<<"$line"
        echo "$name $s $round $value $proto $cipher" >>"$results"
        printf '  round %s %-10s %-11s %14.6g  %s %s\n' "$round" "$s" "$name" "$value" \
            "$proto" "$cipher"
        w=0.5 # the server is warm after the first case
    done
    stop_server
    port=$((port + 1)) # no TIME_WAIT left on the next server's port
}
rounds_loop both run_round

# Medians, min-max, ratios and JSON lines.
awk -v servers="$servers" '
function median(arr, n,    i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
    return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $4; proto[$2] = $5 " " $6 }
END {
    split(servers, sv, ",")
    split("stream_64k handshakes", cases, " ")
    unit["stream_64k"] = "bytes_per_s"; unit["handshakes"] = "handshakes_per_s"
    printf "\n%-11s %-10s %14s %14s %14s  %s\n", "case", "server", "median", "min", "max", "negotiated"
    for (ci = 1; ci <= 2; ci++) {
        c = cases[ci]
        for (si = 1; si in sv; si++) {
            s = sv[si]; k = c SUBSEP s
            if (!(k in n)) continue
            delete a; mn = ""; mx = ""
            for (i = 1; i <= n[k]; i++) { a[i] = v[k, i]; if (mn == "" || a[i] < mn) mn = a[i]; if (mx == "" || a[i] > mx) mx = a[i] }
            med[k] = median(a, n[k]); lo[k] = mn; hi[k] = mx
            printf "%-11s %-10s %14.6g %14.6g %14.6g  %s\n", c, s, med[k], mn, mx, proto[s]
        }
    }
    printf "\n"
    for (ci = 1; ci <= 2; ci++) {
        c = cases[ci]; e = c SUBSEP "eddy"; b = c SUBSEP "netty_ssl"
        if (!(e in med)) continue
        if (b in med && med[b] > 0) {
            printf "%s: eddy / netty_ssl = %.2f\n", c, med[e] / med[b]
            printf "{\"bench\":\"tls\",\"case\":\"%s\",\"subject\":\"eddy\",\"baseline\":\"netty_ssl\",\"%s\":%.6g,\"min\":%.6g,\"max\":%.6g,\"baseline_%s\":%.6g,\"baseline_min\":%.6g,\"baseline_max\":%.6g,\"rounds\":%d,\"ratio\":%.3f}\n", \
                c, unit[c], med[e], lo[e], hi[e], unit[c], med[b], lo[b], hi[b], n[e], med[e] / med[b]
        } else {
            printf "{\"bench\":\"tls\",\"case\":\"%s\",\"subject\":\"eddy\",\"%s\":%.6g,\"min\":%.6g,\"max\":%.6g,\"rounds\":%d}\n", \
                c, unit[c], med[e], lo[e], hi[e], n[e]
        }
    }
}' "$results"
