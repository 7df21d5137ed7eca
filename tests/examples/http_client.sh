#!/usr/bin/env bash
# eddy-http-client end to end: against eddy-http-server, nginx (when installed, unprivileged
# on a temporary configuration) and tests/examples/http_hostile_server.py, each fetch's
# output must be curl's for the same URL (bodies; with -i status line and headers, Date
# aside): 200s, 404, HEAD, POST, chunked and close-delimited bodies. Keep-alive reuse is
# counted on the server's side (eddy-http-server's /stats, nginx's $connection, the hostile
# server's log), also for a connection the server closed while it sat idle in the pool.
# https: against the hostile server over TLS and openssl s_server with --cacert; without it,
# and against an expired certificate, the fetch fails with eddy's TLS error. Then each
# hostile mode (a reset mid-body, garbage, a stall, a short body, an endless chunked body): a
# clear error line and exit status 1, and for a body longer than its Content-Length, never
# the bytes behind it taken for the next answer. Every client run is bounded in time and must
# end with status 0 or 1 and no sanitizer report.
#   tests/examples/http_client.sh CLIENT SERVER CERT_DIR
# Exits 77 (skipped) while CLIENT (eddy-http-client) is not built.
set -euo pipefail
client=$1
server=$2
certs=${3:-}
if [[ ! -x $client ]]; then
    echo "SKIP: $client is not built"
    exit 77
fi
for tool in curl python3 openssl; do
    command -v $tool >/dev/null || { echo "$tool is not installed (scripts/deps.sh)"; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
hostile=$here/http_hostile_server.py
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
source "$here/lib.sh"
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/*.log "$tmp"/nginx/*.log; do
        [[ -s $f ]] && { echo "--- $f"; tail -20 "$f"; }
    done
    exit 1
}
if [[ ! -r $certs/server.pem ]]; then # run by hand without the ctest fixture
    certs=$tmp/certs
    bash "$here/../pipeline/tls_certs.sh" "$certs"
fi

# The client, bounded in time: stdout to $tmp/out, stderr to $tmp/err, status in $rc. Any
# status but 0 and 1 (a crash, a sanitizer's, timeout's 124) or a sanitizer report fails.
CLIENT_SECONDS=60
rc=0
run() {
    rc=0
    timeout -k 5 $CLIENT_SECONDS "$client" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if grep -Eq 'Sanitizer|runtime error:' "$tmp/err"; then
        fail "sanitizer report from: $client $*"$'\n'"$(head -60 "$tmp/err")"
    fi
    if ((rc == 124 || rc == 137)); then
        fail "still running after $CLIENT_SECONDS s: $client $*"
    fi
    if ((rc != 0 && rc != 1)); then
        fail "exit status $rc from: $client $*"$'\n'"$(head -40 "$tmp/err")"
    fi
}
ok() { # run, and every fetch must have succeeded
    run "$@"
    ((rc == 0)) || fail "exit status $rc from: $client $*"$'\n'"$(cat "$tmp/err")"
}
curl() { command curl --silent --max-time 10 "$@"; }
# Headers as compared: CR dropped, Date dropped (it moves with the clock), names lowercased,
# and the hostile server's trailer left out: curl -i prints trailers after the body, eddy's
# codec reads and drops them (docs/http.md).
normal() { tr -d '\r' <"$1" | grep -iv '^date:\|^x-trailer:' | sed -E 's/^([A-Za-z0-9-]+):/\L\1:/'; }
# "what" CLIENT_ARGS -- CURL_ARGS: the client's output must be curl's.
same() {
    local what=$1
    shift
    local a=() b=()
    while [[ $1 != -- ]]; do a+=("$1"); shift; done
    shift
    b=("$@")
    ok "${a[@]}"
    curl "${b[@]}" >"$tmp/curl" || fail "$what: curl ${b[*]} failed"
    if ! cmp -s <(normal "$tmp/out") <(normal "$tmp/curl"); then
        fail "$what: eddy-http-client ${a[*]} differs from curl ${b[*]}:"$'\n'"$(diff \
            <(normal "$tmp/out") <(normal "$tmp/curl") | head -30)"
    fi
}
# A server in the background; its pid joins pids.
bg() {
    "$@" &
    pids+=($!)
    disown # its SIGKILL at the end is no news
}
# The hostile server in mode $1 (more arguments follow); sets hport, and hlog, its log.
nhostile=0
hostile() {
    local mode=$1
    shift
    nhostile=$((nhostile + 1))
    hlog=$tmp/hostile-$nhostile-$mode.log
    bg python3 "$hostile" "$mode" "$@" >"$tmp/port-$nhostile" 2>"$hlog"
    hport=
    for _ in $(seq 100); do
        hport=$(head -1 "$tmp/port-$nhostile" 2>/dev/null || true)
        [[ -n $hport ]] && break
        sleep 0.05
    done
    [[ -n $hport ]] || fail "the hostile server ($mode) did not start"
}
connections() { grep -c '^connection [0-9]*$' "$hlog" || true; }

# --- eddy-http-server
bg "$server" --port 0 --threads 2 >"$tmp/eddy.log" 2>&1
port=$(port_of "$tmp/eddy.log" || true)
[[ -n $port ]] || fail "eddy-http-server did not start"
url=http://127.0.0.1:$port
same "eddy GET /" "$url/" -- "$url/"
same "eddy GET / -i" -i "$url/" -- -i "$url/"
same "eddy 404" "$url/nope" -- "$url/nope"
same "eddy 404 -i" -i "$url/nope" -- -i "$url/nope"
same "eddy HEAD" -i -X HEAD "$url/" -- -I "$url/"
same "eddy POST" -i -X POST -d 'a=1&b=2' "$url/" -- -i -X POST --data-raw 'a=1&b=2' "$url/"
# Three fetches, one connection: the server has seen one more (curl's) than before.
before=$(curl "$url/stats" | grep -o '"total":[0-9]*' | cut -d: -f2)
ok "$url/" "$url/nope" "$url/stats"
after=$(grep -o '"total":[0-9]*' "$tmp/out" | cut -d: -f2)
[[ $after == $((before + 1)) ]] ||
    fail "keep-alive: eddy-http-server counted $before, then $after connections for 3 fetches"
[[ $(head -c 22 "$tmp/out") == "Hello, World!Not Found" ]] || fail "3 fetches: $(head -c 80 "$tmp/out")"

# Failures: one URL failing among good ones still fetches the others, in turn; exit status 1.
run "$url/" "http://127.0.0.1:1/" "$url/"
((rc == 1)) || fail "a refused connection among others: exit status $rc"
[[ $(cat "$tmp/out") == "Hello, World!Hello, World!" ]] || fail "around a refusal: $(cat "$tmp/out")"
grep -q "^eddy-http-client: http://127.0.0.1:1/: connection refused" "$tmp/err" ||
    fail "no error line for a refused connection: $(cat "$tmp/err")"
run "ftp://127.0.0.1:$port/"
((rc == 1)) && grep -q "^eddy-http-client: ftp://127.0.0.1:$port/: " "$tmp/err" ||
    fail "an ftp URL: status $rc, $(cat "$tmp/err")"

# --- nginx, one worker, no master, everything in $tmp, access log with $connection
source "$here/../../bench/support/http.sh" # nginx_bin, nginx_conf
if [[ -x $nginx_bin ]]; then
    mkdir -p "$tmp/nginx/www"
    head -c 100000 /dev/urandom | base64 >"$tmp/nginx/www/big.txt"
    echo "a static file" >"$tmp/nginx/www/file.txt"
    nport=
    for _ in 1 2 3 4 5; do # a free port, then nginx on it; again if another took it meanwhile
        p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        nginx_conf "$tmp/nginx" "$p" "root $tmp/nginx/www; access_log $tmp/nginx-access.log conn;" \
            "log_format conn '\$connection \$request_method \$request_uri \$status';"
        bg "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"
        for _ in $(seq 100); do
            curl -o /dev/null "http://127.0.0.1:$p/" && { nport=$p; break; }
            kill -0 "${pids[-1]}" 2>/dev/null || break
            sleep 0.05
        done
        [[ -n $nport ]] && break
    done
    [[ -n $nport ]] || fail "nginx did not start"
    nurl=http://127.0.0.1:$nport
    same "nginx GET /" "$nurl/" -- "$nurl/"
    same "nginx GET / -i" -i "$nurl/" -- -i "$nurl/"
    same "nginx static file" -i "$nurl/file.txt" -- -i "$nurl/file.txt"
    same "nginx 100 KB" "$nurl/big.txt" -- "$nurl/big.txt"
    same "nginx 404" -i "$nurl/nope" -- -i "$nurl/nope"
    same "nginx HEAD" -i -X HEAD "$nurl/file.txt" -- -I "$nurl/file.txt"
    same "nginx POST to a file: 405" -i -X POST -d x "$nurl/file.txt" -- -i -X POST --data-raw x \
        "$nurl/file.txt"
    same "nginx POST /" -X POST -d 'some body' "$nurl/" -- -X POST --data-raw 'some body' "$nurl/"
    # Four fetches, one connection: the access log's last four lines share their $connection.
    ok "$nurl/" "$nurl/file.txt" "$nurl/nope" "$nurl/big.txt"
    sleep 0.2 # nginx writes its log line after the response
    conns=$(tail -4 "$tmp/nginx-access.log" | cut -d' ' -f1 | sort -u | wc -l)
    [[ $conns == 1 ]] || fail "keep-alive: nginx logged 4 fetches on $conns connections:"$'\n'"$(
        tail -4 "$tmp/nginx-access.log")"
else
    echo "nginx is not installed: its part is left out"
fi

# --- the hostile server's valid modes
hostile keepalive
kurl=http://127.0.0.1:$hport
same "chunked" -i "$kurl/chunked" -- -i "$kurl/chunked"
same "close-delimited" -i "$kurl/close" -- -i "$kurl/close"
same "POST echoed" -X POST -d 'echo me' "$kurl/echo" -- -X POST --data-raw 'echo me' "$kurl/echo"
same "PUT echoed" -i -X PUT -d 'and me' "$kurl/echo" -- -i -X PUT --data-raw 'and me' "$kurl/echo"
before=$(connections)
ok "$kurl/" "$kurl/chunked" "$kurl/nope" "$kurl/"
[[ $(connections) == $((before + 1)) ]] ||
    fail "keep-alive: 4 fetches on $(($(connections) - before)) connections"
# Slow: every byte a write of its own.
hostile slow --byte-delay-ms 1
surl=http://127.0.0.1:$hport
same "byte by byte" -i "$surl/chunked" -- -i "$surl/chunked"
# The server closes a connection idle for 100 ms; the slow server's answer between the two
# fetches takes longer than that, so the pooled connection is dead when its turn comes: the
# client must notice (or retry) and fetch on a new one.
hostile idle_close
iurl=http://127.0.0.1:$hport
ok "$iurl/" "$surl/chunked" "$iurl/"
[[ $(cat "$tmp/out") == "hello"$'\n'"$(curl "$surl/chunked")"$'\n'"hello" ]] ||
    fail "around an idle close: $(head -c 200 "$tmp/out")"
[[ $(connections) == 2 ]] || fail "idle close: $(connections) connections, 2 expected"
grep -q "closing an idle connection" "$hlog" || fail "idle close: the server closed none"

# --- https
hostile keepalive --tls "$certs/server.pem" "$certs/server.key"
turl=https://127.0.0.1:$hport
same "https" --cacert "$certs/ca.pem" "$turl/" "$turl/chunked" -- --cacert "$certs/ca.pem" \
    "$turl/" "$turl/chunked"
[[ $(connections) == 2 ]] ||
    fail "https keep-alive: 2 fetches and curl's on $(connections) connections, 2 expected"
run "$turl/"
((rc == 1)) || fail "https without --cacert: exit status $rc"
grep -q "^eddy-http-client: $turl/: TLS failure" "$tmp/err" ||
    fail "https without --cacert: $(cat "$tmp/err")"
ok --insecure "$turl/"
[[ $(cat "$tmp/out") == hello ]] || fail "--insecure: $(cat "$tmp/out")"
hostile keepalive --tls "$certs/expired.pem" "$certs/expired.key"
run --cacert "$certs/ca.pem" "https://127.0.0.1:$hport/"
((rc == 1)) && grep -q "TLS failure" "$tmp/err" || fail "an expired certificate: $rc $(cat "$tmp/err")"
# openssl s_server -WWW: files from its directory, HTTP/1.0, closed after each answer.
mkdir -p "$tmp/www"
echo "served by openssl s_server" >"$tmp/www/hello.txt"
(cd "$tmp/www" && exec openssl s_server -accept 127.0.0.1:0 -cert "$certs/server.pem" \
    -key "$certs/server.key" -WWW >"$tmp/s_server.log" 2>&1) &
pids+=($!)
disown
sport=$(port_of "$tmp/s_server.log" ACCEPT || true)
[[ -n $sport ]] || fail "openssl s_server did not start"
same "s_server" --cacert "$certs/ca.pem" -i "https://127.0.0.1:$sport/hello.txt" \
    "https://127.0.0.1:$sport/hello.txt" -- --cacert "$certs/ca.pem" -i \
    "https://127.0.0.1:$sport/hello.txt" "https://127.0.0.1:$sport/hello.txt"
run "https://127.0.0.1:$sport/hello.txt"
((rc == 1)) && grep -q "TLS failure" "$tmp/err" || fail "s_server without --cacert: $(cat "$tmp/err")"

# --- hostile modes: exit status 1, an error line saying what went wrong
hostile_fails() { # mode, what the error line must say (an ERE)
    hostile "$1"
    local u=http://127.0.0.1:$hport/
    run --timeout-ms 2000 "$u"
    ((rc == 1)) || fail "$1: exit status $rc"$'\n'"$(cat "$tmp/err")"
    grep -Eq "^eddy-http-client: $u: ($2)" "$tmp/err" ||
        fail "$1: the error line is not /$2/: $(cat "$tmp/err")"
    kill "${pids[-1]}"
}
hostile_fails reset 'connection reset by peer|end of file'
hostile_fails garbage 'malformed input'
hostile_fails stall 'operation timed out'
hostile_fails short 'end of file'
hostile_fails chunked_flood 'frame longer than the decoder allows'
# A body longer than its Content-Length: what follows is a whole response, in the same write.
# The client may fail the next fetch or make it on a new connection; it must never take those
# bytes for the next answer.
hostile long
run "http://127.0.0.1:$hport/" "http://127.0.0.1:$hport/"
grep -q smuggled "$tmp/out" && fail "long body: the excess was taken for an answer: $(cat "$tmp/out")"
[[ $(head -n 1 "$tmp/out") == hello ]] || fail "long body: $(cat "$tmp/out")"
if ((rc == 1)); then
    grep -q "^eddy-http-client: http://127.0.0.1:$hport/: " "$tmp/err" ||
        fail "long body: status 1 without an error line: $(cat "$tmp/err")"
fi
echo "eddy-http-client: all checks passed"
