#!/usr/bin/env bash
# eddy-http-client over HTTP/2 end to end: against eddy-http-server (h2c by prior knowledge,
# and h2 chosen by ALPN with --tls), nginx (h2 over TLS, h2c by prior knowledge) and h2o (the
# same), when installed, each on a temporary configuration. Each fetch's output must be curl's
# over HTTP/2 for the same URL: bodies byte for byte (up to 500 KB, an echoed POST), with -i
# the status line and headers (Date aside). -Z sends several URLs at once, and the server
# must have seen them on one connection (eddy-http-server's /stats, nginx's $connection).
# --http1.1 over https and --http2 on http:// stay HTTP/1.1. The load mode with --streams keeps
# streams in flight against each server for a second, without an error. Every client run is
# bounded in time and must end with status 0 or 1 and no sanitizer report.
#   tests/examples/http2_client.sh CLIENT SERVER CERT_DIR
# Exits 77 (skipped) while CLIENT is not built, or without curl's HTTP/2.
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
if ! curl --version | grep -q HTTP2; then
    echo "SKIP: this curl speaks no HTTP/2"
    exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
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
ca=$certs/ca.pem

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
# Headers as compared: CR dropped, Date dropped (it moves with the clock), names lowercased.
normal() { tr -d '\r' <"$1" | grep -iv '^date:' | sed -E 's/^([A-Za-z0-9-]+):/\L\1:/'; }
# "what" CLIENT_ARGS -- CURL_ARGS: the client's output must be curl's, headers normalized.
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
# "what" CLIENT_ARGS -- CURL_ARGS: the bodies must be the same bytes, unnormalized.
exact() {
    local what=$1
    shift
    local a=() b=()
    while [[ $1 != -- ]]; do a+=("$1"); shift; done
    shift
    b=("$@")
    ok "${a[@]}"
    curl "${b[@]}" >"$tmp/curl" || fail "$what: curl ${b[*]} failed"
    [[ -s $tmp/curl ]] || fail "$what: curl ${b[*]} fetched nothing"
    cmp -s "$tmp/out" "$tmp/curl" ||
        fail "$what: $(wc -c <"$tmp/out") bytes from eddy-http-client, $(wc -c <"$tmp/curl") from curl"
}
first_line() { head -1 "$tmp/out" | tr -d '\r'; }
# The status line of `eddy-http-client -i ARGS` must be $1.
status_line() {
    local want=$1
    shift
    ok -i "$@"
    [[ $(first_line) == "$want" ]] || fail "$*: the status line is '$(first_line)', not '$want'"
}
# Load a URL for a second with --streams (HTTP/2): no error, some requests.
load() {
    ok --load --connections 2 --streams 8 --duration 1 "$@"
    grep -q '"http":"2"' "$tmp/out" || fail "load $*: not over HTTP/2: $(cat "$tmp/out")"
    grep -q '"errors":0,' "$tmp/out" || fail "load $*: errors: $(cat "$tmp/out" "$tmp/err")"
    grep -Eq '"rps":[1-9]' "$tmp/out" || fail "load $*: no request answered: $(cat "$tmp/out")"
}
# A server in the background; its pid joins pids.
bg() {
    "$@" &
    pids+=($!)
    disown # its SIGKILL at the end is no news
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Wait until curl ARGS... fetches; false after 5 s or when the last server started died.
answers() {
    for _ in $(seq 100); do
        curl -o /dev/null "$@" && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
stats_total() { curl "$1/stats" | grep -o '"total":[0-9]*' | cut -d: -f2; }
H2C=--http2-prior-knowledge
echo_body=$(head -c 60000 /dev/urandom | base64 -w0)

# --- eddy-http-server: h2c by prior knowledge
bg "$server" --port 0 --threads 2 >"$tmp/eddy.log" 2>&1
port=$(port_of "$tmp/eddy.log" || true)
[[ -n $port ]] || fail "eddy-http-server did not start"
url=http://127.0.0.1:$port
same "eddy h2c GET /" $H2C "$url/" -- $H2C "$url/"
same "eddy h2c -i" $H2C -i "$url/" -- $H2C -i "$url/"
status_line "HTTP/2 200 " $H2C "$url/"
same "eddy h2c 404" $H2C -i "$url/nope" -- $H2C -i "$url/nope"
same "eddy h2c HEAD" $H2C -i -X HEAD "$url/" -- $H2C -I "$url/"
same "eddy h2c POST" $H2C -i -d 'a=1&b=2' "$url/echo" -- $H2C -i --data-raw 'a=1&b=2' "$url/echo"
exact "eddy h2c POST 80 KB" $H2C -d "$echo_body" "$url/echo" -- $H2C --data-raw "$echo_body" \
    "$url/echo"
exact "eddy h2c 500 KB" $H2C "$url/bytes/500000" -- $H2C "$url/bytes/500000"
# Twenty fetches at once: one connection carries them all, each body in its place.
urls=()
for i in $(seq 20); do urls+=("$url/bytes/$((i * 1000))"); done
for u in "${urls[@]}"; do curl $H2C "$u"; done >"$tmp/curl"
before=$(stats_total "$url")
ok $H2C -Z "${urls[@]}"
after=$(stats_total "$url")
[[ $(wc -c <"$tmp/out") == $((210 * 1000)) ]] || fail "-Z: $(wc -c <"$tmp/out") bytes"
cmp -s "$tmp/out" "$tmp/curl" || fail "-Z: the bodies are not curl's, in order"
[[ $after == $((before + 2)) ]] ||
    fail "-Z: eddy-http-server counted $before, then $after connections (one of ours, one curl's)"
# --http2 on http:// is HTTP/1.1 (no Upgrade: h2c here).
status_line "HTTP/1.1 200 OK" --http2 "$url/"
load "$url/"
load $H2C -X POST -d 'some body' "$url/echo"

# --- eddy-http-server --tls: h2 by ALPN, the default for https
bg "$server" --port 0 --threads 2 --tls "$certs/server.pem" "$certs/server.key" \
    >"$tmp/eddy-tls.log" 2>&1
tport=$(port_of "$tmp/eddy-tls.log" || true)
[[ -n $tport ]] || fail "eddy-http-server --tls did not start"
turl=https://127.0.0.1:$tport
same "eddy h2 -i" --cacert "$ca" -i "$turl/" -- --cacert "$ca" -i "$turl/"
status_line "HTTP/2 200 " --cacert "$ca" "$turl/"
status_line "HTTP/2 200 " --cacert "$ca" --http2 "$turl/"
status_line "HTTP/1.1 200 OK" --cacert "$ca" --http1.1 "$turl/"
exact "eddy h2 300 KB" --cacert "$ca" "$turl/bytes/300000" -- --cacert "$ca" "$turl/bytes/300000"
exact "eddy h2 POST" --cacert "$ca" -d "$echo_body" "$turl/echo" -- --cacert "$ca" \
    --data-raw "$echo_body" "$turl/echo"
urls=("$turl/" "$turl/nope" "$turl/bytes/7" "$turl/")
for u in "${urls[@]}"; do curl --cacert "$ca" "$u"; done >"$tmp/curl"
before=$(curl --cacert "$ca" "$turl/stats" | grep -o '"total":[0-9]*' | cut -d: -f2)
ok --cacert "$ca" -Z "${urls[@]}"
after=$(curl --cacert "$ca" "$turl/stats" | grep -o '"total":[0-9]*' | cut -d: -f2)
cmp -s "$tmp/out" "$tmp/curl" || fail "h2 -Z: $(head -c 200 "$tmp/out")"
[[ $after == $((before + 2)) ]] || fail "h2 -Z: $before, then $after connections"
run "$turl/"
((rc == 1)) && grep -q "^eddy-http-client: $turl/: TLS failure" "$tmp/err" ||
    fail "h2 without --cacert: $rc $(cat "$tmp/err")"
# One line says why (the stall watchdog's own warning, when a loaded machine makes the
# trust store's load slow, is not the client's).
[[ $(grep -vc 'stalled: callback' "$tmp/err") == 1 ]] ||
    fail "h2 without --cacert: more than one line: $(cat "$tmp/err")"

# --- nginx: h2 over TLS and h2c by prior knowledge, static files
mkdir -p "$tmp/www"
head -c 150000 /dev/urandom | base64 >"$tmp/www/big.txt"
echo "a static file" >"$tmp/www/file.txt"
source "$here/../../bench/support/http.sh" # nginx_bin
if [[ -x $nginx_bin ]]; then
    mkdir -p "$tmp/nginx"
    nport= ncport=
    for _ in 1 2 3 4 5; do # free ports, then nginx on them; again if another took one meanwhile
        p=$(free_port)
        pc=$(free_port)
        cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
    log_format conn '\$connection \$request_uri \$status';
    access_log $tmp/nginx-access.log conn;
    keepalive_requests 1000000;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    server {
        listen 127.0.0.1:$p ssl http2;
        listen 127.0.0.1:$pc http2;
        ssl_certificate $certs/server.pem;
        ssl_certificate_key $certs/server.key;
        root $tmp/www;
    }
}
CONF
        bg "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"
        if answers --cacert "$ca" "https://127.0.0.1:$p/file.txt" &&
            answers $H2C "http://127.0.0.1:$pc/file.txt"; then
            nport=$p ncport=$pc
            break
        fi
        kill -9 "${pids[-1]}" 2>/dev/null || true
    done
    [[ -n $nport ]] || fail "nginx did not start"
    nurl=https://127.0.0.1:$nport
    same "nginx h2 -i" --cacert "$ca" -i "$nurl/file.txt" -- --cacert "$ca" -i "$nurl/file.txt"
    status_line "HTTP/2 200 " --cacert "$ca" "$nurl/file.txt"
    exact "nginx h2 200 KB" --cacert "$ca" "$nurl/big.txt" -- --cacert "$ca" "$nurl/big.txt"
    same "nginx h2 404" --cacert "$ca" -i "$nurl/nope" -- --cacert "$ca" -i "$nurl/nope"
    same "nginx h2 HEAD" --cacert "$ca" -i -X HEAD "$nurl/file.txt" -- --cacert "$ca" -I \
        "$nurl/file.txt"
    same "nginx h2 POST: 405" --cacert "$ca" -i -d x "$nurl/file.txt" -- --cacert "$ca" -i \
        --data-raw x "$nurl/file.txt"
    ncurl=http://127.0.0.1:$ncport
    same "nginx h2c -i" $H2C -i "$ncurl/file.txt" -- $H2C -i "$ncurl/file.txt"
    exact "nginx h2c 200 KB" $H2C "$ncurl/big.txt" -- $H2C "$ncurl/big.txt"
    # Four at once over h2: nginx's access log names one connection for the four.
    ok --cacert "$ca" -Z "$nurl/file.txt" "$nurl/big.txt" "$nurl/nope" "$nurl/file.txt"
    sleep 0.2 # nginx writes its log line after the response
    conns=$(tail -4 "$tmp/nginx-access.log" | cut -d' ' -f1 | sort -u | wc -l)
    [[ $conns == 1 ]] || fail "nginx: 4 fetches with -Z on $conns connections:"$'\n'"$(
        tail -4 "$tmp/nginx-access.log")"
    load "$ncurl/file.txt"
else
    echo "nginx is not installed: its part is left out"
fi

# --- h2o: h2 over TLS and h2c by prior knowledge, static files
if command -v h2o >/dev/null; then
    hport= hcport=
    for _ in 1 2 3 4 5; do
        p=$(free_port)
        pc=$(free_port)
        user= # as root h2o would become nobody, who cannot read $tmp
        [[ $(id -u) == 0 ]] && user="user: root"
        cat >"$tmp/h2o.conf" <<CONF
$user
pid-file: $tmp/h2o.pid
error-log: $tmp/h2o-error.log
access-log: /dev/null
listen:
  host: 127.0.0.1
  port: $p
  ssl:
    certificate-file: $certs/server.pem
    key-file: $certs/server.key
listen:
  host: 127.0.0.1
  port: $pc
hosts:
  default:
    paths:
      /:
        file.dir: $tmp/www
CONF
        bg h2o -c "$tmp/h2o.conf" >"$tmp/h2o.log" 2>&1
        if answers --cacert "$ca" "https://127.0.0.1:$p/file.txt" &&
            answers $H2C "http://127.0.0.1:$pc/file.txt"; then
            hport=$p hcport=$pc
            break
        fi
        kill -9 "${pids[-1]}" 2>/dev/null || true
    done
    [[ -n $hport ]] || fail "h2o did not start"
    hurl=https://127.0.0.1:$hport
    same "h2o h2 -i" --cacert "$ca" -i "$hurl/file.txt" -- --cacert "$ca" -i "$hurl/file.txt"
    status_line "HTTP/2 200 " --cacert "$ca" "$hurl/file.txt"
    exact "h2o h2 200 KB" --cacert "$ca" "$hurl/big.txt" -- --cacert "$ca" "$hurl/big.txt"
    same "h2o h2 404" --cacert "$ca" -i "$hurl/nope" -- --cacert "$ca" -i "$hurl/nope"
    same "h2o h2 HEAD" --cacert "$ca" -i -X HEAD "$hurl/file.txt" -- --cacert "$ca" -I \
        "$hurl/file.txt"
    ok --cacert "$ca" -Z "$hurl/file.txt" "$hurl/big.txt" "$hurl/file.txt"
    cat "$tmp/www/file.txt" "$tmp/www/big.txt" "$tmp/www/file.txt" | cmp -s - "$tmp/out" ||
        fail "h2o -Z: the bodies are not the files, in order"
    hcurl=http://127.0.0.1:$hcport
    exact "h2o h2c 200 KB" $H2C "$hcurl/big.txt" -- $H2C "$hcurl/big.txt"
    load "$hcurl/file.txt"
else
    echo "h2o is not installed: its part is left out"
fi
echo "eddy-http-client over HTTP/2: all checks passed"
