#!/usr/bin/env bash
# eddy-http-server's HTTP/2 against real clients: curl by prior knowledge and by Upgrade: h2c,
# curl and nghttp over TLS with ALPN h2 (and http/1.1 still on the same port), nghttp with
# 16 KiB windows, bodies byte for byte both ways (POST /echo, GET /bytes/N), h2load with many
# streams per connection, then SIGTERM: the server must exit 0 by itself and say so. Every
# client call is bounded in time.
#   tests/examples/http2.sh SERVER CERT_DIR
set -euo pipefail
server=$1
certs=$2
for tool in curl nghttp h2load; do
    command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh)"; exit 77; }
done
log=$(mktemp)
tls_log=$(mktemp)
tmp=$(mktemp -d)
pid=''
tls_pid=''
cleanup() {
    for p in $pid $tls_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$log" "$tls_log" "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; cat "$log" "$tls_log"; exit 1; }
curl() { command curl --silent --show-error --max-time 20 "$@"; }

"$server" --port 0 --threads 2 --max-body 4194304 >"$log" 2>&1 &
pid=$!
"$server" --port 0 --threads 1 --tls "$certs/server.pem" "$certs/server.key" >"$tls_log" 2>&1 &
tls_pid=$!
port=$(port_of "$log")
tls_port=$(port_of "$tls_log")
[[ -n "$port" && -n "$tls_port" ]] || fail "no port"
url=http://127.0.0.1:$port
tls_url=https://127.0.0.1:$tls_port

# Prior knowledge: GET /, its head in lower case, the version curl saw.
v=$(curl --http2-prior-knowledge -D "$tmp/h" -o "$tmp/b" -w '%{http_version}' "$url/")
[[ $v == 2 ]] || fail "prior knowledge: HTTP version $v"
[[ $(cat "$tmp/b") == "Hello, World!" ]] || fail "prior knowledge body: $(cat "$tmp/b")"
grep -q '^content-length: 13' "$tmp/h" || fail "prior knowledge head: $(cat "$tmp/h")"
grep -qi '^connection:' "$tmp/h" && fail "a connection field in HTTP/2: $(cat "$tmp/h")"

# Upgrade: h2c (curl --http2 on http://): 101, then the answer on stream 1.
v=$(curl --http2 -o "$tmp/b" -w '%{http_version}' "$url/")
[[ $v == 2 && $(cat "$tmp/b") == "Hello, World!" ]] || fail "Upgrade: version $v"
nghttp -u -n "$url/" >/dev/null 2>&1 || fail "nghttp -u (Upgrade)"

# HTTP/1.1 on the same port is unchanged.
v=$(curl --http1.1 -o "$tmp/b" -w '%{http_version}' "$url/")
[[ $v == 1.1 && $(cat "$tmp/b") == "Hello, World!" ]] || fail "HTTP/1.1 beside HTTP/2: $v"

# Bodies byte for byte: echo (small, 64 KiB, 3 MiB) and downloads (0 B to 10 MB).
for n in 1 65536 3145728; do
    head -c $n /dev/urandom >"$tmp/up"
    curl --http2-prior-knowledge --data-binary @"$tmp/up" -o "$tmp/down" "$url/echo"
    cmp -s "$tmp/up" "$tmp/down" || fail "POST /echo of $n bytes"
done
pattern() { python3 -c "import sys; n=int(sys.argv[1]); a=b'abcdefghijklmnopqrstuvwxyz'; sys.stdout.buffer.write((a*(n//26+1))[:n])" "$1"; }
for n in 0 1 16384 100000 10000000; do
    pattern $n >"$tmp/want"
    curl --http2-prior-knowledge -o "$tmp/got" "$url/bytes/$n"
    cmp -s "$tmp/want" "$tmp/got" || fail "GET /bytes/$n"
done
# nghttp with 16 KiB windows (-w 14 -W 14): flow control at work, several streams at once.
pattern 1000000 >"$tmp/want"
timeout 30 nghttp -w 14 -W 14 -d /dev/null "$url/bytes/1000000" "$url/" "$url/bytes/1000000" \
    >/dev/null 2>&1 || fail "nghttp with 16 KiB windows"
timeout 30 nghttp -w 14 -W 14 "$url/bytes/1000000" >"$tmp/got" 2>/dev/null || fail "nghttp body"
cmp -s "$tmp/want" "$tmp/got" || fail "nghttp body through 16 KiB windows"

# TLS: ALPN chooses h2 for curl and nghttp, http/1.1 when that is all the client offers.
v=$(curl -k -o "$tmp/b" -w '%{http_version}' "$tls_url/")
[[ $v == 2 && $(cat "$tmp/b") == "Hello, World!" ]] || fail "h2 over TLS: version $v"
v=$(curl -k --http1.1 -o "$tmp/b" -w '%{http_version}' "$tls_url/")
[[ $v == 1.1 ]] || fail "http/1.1 over TLS: version $v"
timeout 20 nghttp -nv "$tls_url/" 2>&1 | grep -q 'negotiated protocol: h2' || fail "nghttp ALPN"
pattern 2000000 >"$tmp/want"
curl -k -o "$tmp/got" "$tls_url/bytes/2000000"
cmp -s "$tmp/want" "$tmp/got" || fail "GET /bytes over h2"

# h2load: many streams per connection, every answer a 2xx, over h2c and h2.
for u in "$url/" "$tls_url/"; do
    out=$(timeout 60 h2load -n 20000 -c 8 -m 32 "$u" 2>&1) || fail "h2load $u: $out"
    grep -q 'status codes: 20000 2xx' <<<"$out" || fail "h2load $u: $out"
done

# SIGTERM: both stop by themselves, exit 0, and say so.
for p in pid tls_pid; do
    kill -TERM "${!p}"
    for _ in $(seq 100); do kill -0 "${!p}" 2>/dev/null || break; sleep 0.1; done
    kill -0 "${!p}" 2>/dev/null && fail "the server did not stop within 10 s"
    wait "${!p}" || fail "the server exited with $?"
    eval "$p=''"
done
grep -q 'stopped by SIGTERM' "$log" || fail "no goodbye: $(cat "$log")"
echo "http2: ok"
