#!/usr/bin/env bash
# eddy-http-server end to end with real clients: curl (answers, their Date, keep-alive,
# /stats, 404, oversized headers and bodies), raw pipelined and malformed requests over
# bash's /dev/tcp, a short wrk run when wrk is installed, the idle and request timeouts, then
# SIGTERM: the server must stop by itself, exit 0 and say so. Every client call is bounded in
# time.
#   tests/examples/http.sh SERVER
set -euo pipefail
server=$1
command -v curl >/dev/null || { echo "curl is not installed (scripts/deps.sh)"; exit 1; }
log=$(mktemp)
tmp=$(mktemp -d)
pid=''
idle_pid=''
slow_pid=''
cleanup() {
    for p in $pid $idle_pid $slow_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$log" "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
"$server" --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
port=$(port_of "$log")
[[ -n "$port" ]] || { echo "no port in: $(cat "$log")"; exit 1; }
url=http://127.0.0.1:$port
curl() { command curl --silent --show-error --max-time 5 "$@"; }
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }

# GET /: 200, text/plain, the body.
body=$(curl -D "$tmp/h" "$url/")
[[ $body == "Hello, World!" ]] || fail "GET / body: $body"
grep -qi '^HTTP/1.1 200' "$tmp/h" || fail "GET / status: $(cat "$tmp/h")"
grep -qi '^content-type: text/plain' "$tmp/h" || fail "GET / type: $(cat "$tmp/h")"
grep -qi '^content-length: 13' "$tmp/h" || fail "GET / length: $(cat "$tmp/h")"
grep -qi '^connection: close' "$tmp/h" && fail "GET / closes: $(cat "$tmp/h")"

# Date, the loop's cached one (renewed once a second): IMF-fixdate (RFC 9110 5.6.7), and now,
# both in the pre-encoded answer to GET / and in one the response encoder makes (404).
imf='(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-3][0-9] (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [0-9]{4} [0-2][0-9]:[0-5][0-9]:[0-6][0-9] GMT'
for path in / /nope; do
    curl -D "$tmp/h" -o /dev/null "$url$path"
    hdr=$(grep -i '^date:' "$tmp/h" | tr -d '\r') || fail "GET $path: no Date: $(cat "$tmp/h")"
    [[ $hdr =~ ^[Dd]ate:\ ($imf)$ ]] || fail "GET $path: not an IMF-fixdate: '$hdr'"
    skew=$(($(date +%s) - $(date -u -d "${BASH_REMATCH[1]}" +%s)))
    ((skew >= -1 && skew <= 2)) || fail "GET $path: Date is $skew s off: '$hdr'"
done

# Keep-alive: three requests, one connection.
conns=$(curl --http1.1 -o /dev/null -o /dev/null -o /dev/null -w '%{num_connects}' \
    "$url/" "$url/" "$url/x")
[[ $conns == 100 ]] || fail "keep-alive: connects per request $conns, want 100"
# HTTP/1.0: closed after the answer unless asked to keep it.
curl --http1.0 -D "$tmp/h" -o /dev/null "$url/"
grep -qi '^connection: close' "$tmp/h" || fail "1.0 without keep-alive: $(cat "$tmp/h")"
curl --http1.0 -H 'Connection: keep-alive' -D "$tmp/h" -o /dev/null "$url/"
grep -qi '^connection: keep-alive' "$tmp/h" || fail "1.0 keep-alive: $(cat "$tmp/h")"

# 404, HEAD, /stats.
code=$(curl -o /dev/null -w '%{http_code}' "$url/nope")
[[ $code == 404 ]] || fail "GET /nope: $code"
code=$(curl -o /dev/null -w '%{http_code}' -X POST --data x "$url/")
[[ $code == 404 ]] || fail "POST /: $code"
[[ -z $(curl --head "$url/" | tr -d '\r' | sed '1,/^$/d') ]] || fail "HEAD / sent a body"
stats=$(curl "$url/stats")
for key in '"connections":{"current":' '"total":' '"requests":' '"loops":[{' '"turns":' \
    '"io_events":' '"poll_ns":'; do
    [[ $stats == *"$key"* ]] || fail "/stats lacks $key: $stats"
done
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["requests"] >= 8, d; assert len(d["loops"]) == 2, d' \
        <<<"$stats" || fail "/stats is not the JSON expected: $stats"
fi

# Raw requests over one connection: write $1, read until the server closes (or 3 s).
raw() {
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf '%b' "$1" >&3 || true # the server may answer and close before all is sent
    timeout 3 cat <&3 >"$tmp/raw" || true
    exec 3<&-
}
count() { grep -o "$1" "$tmp/raw" | wc -l; }

# A connection kept open across the bad ones below: it must go on being served.
exec 4<>"/dev/tcp/127.0.0.1/$port"

# Pipelined: four requests in one write, answered in order, then closed as the last asks.
raw 'GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\nGET /stats HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'
[[ $(grep -o 'HTTP/1.1 [0-9][0-9][0-9]' "$tmp/raw" | tr '\n' ' ') == "HTTP/1.1 200 HTTP/1.1 404 HTTP/1.1 200 HTTP/1.1 200 " ]] ||
    fail "pipelined answers: $(cat "$tmp/raw")"
# Pipelined POSTs with bodies, Content-Length and chunked.
raw 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcPOST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'
[[ $(grep -o 'HTTP/1.1 [0-9][0-9][0-9]' "$tmp/raw" | tr '\n' ' ') == "HTTP/1.1 404 HTTP/1.1 404 HTTP/1.1 200 " ]] ||
    fail "pipelined bodies: $(cat "$tmp/raw")"

# "100 Continue" comes in order after the answers to requests before it.
raw 'GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'
[[ $(grep -o 'HTTP/1.1 [0-9][0-9][0-9]' "$tmp/raw" | tr '\n' ' ') == "HTTP/1.1 200 HTTP/1.1 100 HTTP/1.1 404 " ]] ||
    fail "pipelined Expect: $(cat "$tmp/raw")"

# Bad input: answered and closed (cat ends before its timeout), nothing after it answered.
raw 'GET / HTTP/1.1\r\nHost: a\r\n\r\nBAD\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n'
[[ $(count 'HTTP/1.1 200') == 1 && $(count 'HTTP/1.1 400 Bad Request') == 1 ]] ||
    fail "malformed: $(cat "$tmp/raw")"
grep -qi '^connection: close' "$tmp/raw" || fail "400 without Connection: close"
raw 'GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n'
[[ $(count 'HTTP/1.1 400') == 1 ]] || fail "obs-fold: $(cat "$tmp/raw")"
raw 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc'
[[ $(count 'HTTP/1.1 400') == 1 ]] || fail "CL and TE: $(cat "$tmp/raw")"
raw 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n'
[[ $(count 'HTTP/1.1 501') == 1 ]] || fail "TE gzip: $(cat "$tmp/raw")"
raw 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n'
[[ $(count 'HTTP/1.1 400') == 1 ]] || fail "bad chunk size: $(cat "$tmp/raw")"
raw 'GET / HTTP/3.0\r\nHost: a\r\n\r\n'
[[ $(count 'HTTP/1.1 505') == 1 ]] || fail "HTTP/3.0: $(cat "$tmp/raw")"
raw "GET /$(head -c 5000 /dev/zero | tr '\0' a) HTTP/1.1\r\nHost: a\r\n\r\n"
[[ $(count 'HTTP/1.1 414') == 1 ]] || fail "long request line: $(cat "$tmp/raw")"

# Headers too large (curl): 431; too many: 431. Body too large: 413, announced or chunked.
code=$(curl -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' b)" "$url/")
[[ $code == 431 ]] || fail "large header: $code"
hdrs=()
for i in $(seq 101); do hdrs+=(-H "X-$i: $i"); done
code=$(curl -o /dev/null -w '%{http_code}' "${hdrs[@]}" "$url/")
[[ $code == 431 ]] || fail "101 headers: $code"
head -c 1100000 /dev/zero >"$tmp/big"
code=$(curl -o /dev/null -w '%{http_code}' --data-binary "@$tmp/big" "$url/")
[[ $code == 413 ]] || fail "large body: $code"
code=$(curl -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
    --data-binary "@$tmp/big" "$url/")
[[ $code == 413 ]] || fail "large chunked body: $code"
code=$(curl -o /dev/null -w '%{http_code}' --data-binary "@$tmp/big" -r 0-10 "$url/" \
    -H 'Content-Length: 99999999999999999999')
[[ $code == 400 ]] || fail "huge Content-Length: $code"

# The connection opened before all that is still served.
printf 'GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' >&4
timeout 3 cat <&4 >"$tmp/raw" || true
exec 4<&-
[[ $(count 'HTTP/1.1 200') == 1 ]] || fail "the open connection: $(cat "$tmp/raw")"

# Load: wrk, 16 connections, 1 s, no errors (when installed; bench/http runs it for real).
if command -v wrk >/dev/null; then
    timeout 10 wrk -t1 -c16 -d1s "$url/" >"$tmp/wrk"
    grep -q 'Requests/sec' "$tmp/wrk" || fail "wrk: $(cat "$tmp/wrk")"
    if grep -Eq 'Socket errors|Non-2xx' "$tmp/wrk"; then
        fail "wrk saw errors: $(cat "$tmp/wrk")"
    fi
fi

"$server" --help | grep -q usage

# --idle-timeout: a second server closes a connection that sends nothing within a second.
"$server" --port 0 --threads 1 --idle-timeout 1 >"$tmp/idle.log" 2>&1 &
idle_pid=$!
idle_port=$(port_of "$tmp/idle.log")
[[ -n "$idle_port" ]] || fail "no port in: $(cat "$tmp/idle.log")"
exec 5<>"/dev/tcp/127.0.0.1/$idle_port"
start=$SECONDS
timeout 5 cat <&5 >/dev/null || true
exec 5<&-
kill -TERM "$idle_pid"
wait "$idle_pid" || fail "the idle-timeout server: $(cat "$tmp/idle.log")"
idle_pid=
((SECONDS - start <= 3)) || fail "an idle connection stayed open $((SECONDS - start)) s"

# --request-timeout: a request trickling in a byte every 0.1 s (which the idle timeout, reset
# by every read, never cuts) is closed a second after its first byte.
"$server" --port 0 --threads 1 --request-timeout 1 >"$tmp/slow.log" 2>&1 &
slow_pid=$!
slow_port=$(port_of "$tmp/slow.log")
[[ -n "$slow_port" ]] || fail "no port in: $(cat "$tmp/slow.log")"
python3 - "$slow_port" <<'PY' || fail "--request-timeout: $(cat "$tmp/slow.log")"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
start = time.time()
try:
    for b in b"GET / HTTP/1.1\r\nHost: slow\r\nX-Pad: " + b"a" * 100:
        s.send(bytes([b]))
        time.sleep(0.1)
    sys.exit("a request trickling in for 13 s was not cut off")
except OSError:
    pass
took = time.time() - start
sys.exit(0 if took < 4 else f"cut off only after {took:.1f} s")
PY
kill -TERM "$slow_pid"
wait "$slow_pid" || fail "the request-timeout server: $(cat "$tmp/slow.log")"
slow_pid=
grep -q "1 closed at a timeout" "$tmp/slow.log" || fail "no count: $(cat "$tmp/slow.log")"
kill -TERM "$pid"
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if kill -0 "$pid" 2>/dev/null; then
    fail "the server did not stop on SIGTERM"
fi
wait "$pid"
pid=
grep -q "stopped by SIGTERM" "$log"
cat "$log"
