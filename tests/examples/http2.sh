#!/usr/bin/env bash
# eddy-http-server's HTTP/2 against real clients: curl by prior knowledge and by Upgrade: h2c,
# nghttp by Upgrade too, curl and nghttp over TLS with ALPN h2 (and http/1.1 still on the same
# port), nghttp with 16 KiB windows, bodies byte for byte both ways (POST /echo up to 3 MiB and
# 413 past --max-body, GET /bytes/N up to 10 MiB), h2load with many streams per connection,
# then SIGTERM: both servers must exit 0 by themselves within 10 s, say so, and have nothing
# from the sanitizers in their output. Every client call is bounded in time.
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

# Upgrade: h2c (curl --http2 on http://): 101, then the answer on stream 1. (Small answers
# only for curl: 7.88 fails a 101 followed by more than its 32 KiB buffer at once, "connection
# buffer size is too small to store data following HTTP Upgrade response header".)
v=$(curl --http2 -o "$tmp/b" -w '%{http_version}' "$url/")
[[ $v == 2 && $(cat "$tmp/b") == "Hello, World!" ]] || fail "Upgrade: version $v"
nghttp -u -n "$url/" >/dev/null 2>&1 || fail "nghttp -u (Upgrade)"
# nghttp -u: 100 KB after the 101, byte for byte; a request with a body is not upgraded (the
# server serves it as HTTP/1.1), its echo exact all the same.
pattern() { python3 -c "import sys; n=int(sys.argv[1]); a=b'abcdefghijklmnopqrstuvwxyz'; sys.stdout.buffer.write((a*(n//26+1))[:n])" "$1"; }
pattern 100000 >"$tmp/want"
timeout 20 nghttp -u "$url/bytes/100000" >"$tmp/got" 2>/dev/null || fail "nghttp -u /bytes"
cmp -s "$tmp/want" "$tmp/got" || fail "nghttp -u: GET /bytes/100000 after the 101"
head -c 100000 /dev/urandom >"$tmp/up"
v=$(curl --http2 --data-binary @"$tmp/up" -o "$tmp/down" -w '%{http_version}' "$url/echo")
[[ $v == 1.1 ]] && cmp -s "$tmp/up" "$tmp/down" || fail "Upgrade with a body: version $v"
timeout 20 nghttp -u -d "$tmp/up" "$url/echo" >"$tmp/down" 2>/dev/null || fail "nghttp -u -d"
cmp -s "$tmp/up" "$tmp/down" || fail "nghttp -u -d: POST /echo"

# HTTP/1.1 on the same port is unchanged.
v=$(curl --http1.1 -o "$tmp/b" -w '%{http_version}' "$url/")
[[ $v == 1.1 && $(cat "$tmp/b") == "Hello, World!" ]] || fail "HTTP/1.1 beside HTTP/2: $v"

# Bodies byte for byte: echo (small, 64 KiB, 1 MiB, 3 MiB: --max-body is 4 MiB; past it 413)
# and downloads (0 B to 10 MiB).
for n in 1 65536 1048576 3145728; do
    head -c $n /dev/urandom >"$tmp/up"
    curl --http2-prior-knowledge --data-binary @"$tmp/up" -o "$tmp/down" "$url/echo"
    cmp -s "$tmp/up" "$tmp/down" || fail "POST /echo of $n bytes"
done
head -c 4194305 /dev/zero >"$tmp/big"
code=$(curl --http2-prior-knowledge --data-binary @"$tmp/big" -o /dev/null -w '%{http_code}' \
    "$url/echo")
[[ $code == 413 ]] || fail "POST /echo past --max-body: $code"
for n in 0 1 16384 53248 53249 100000 10485760; do # 53248: the largest slice answer
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
timeout 30 nghttp -w 14 -W 14 "$tls_url/bytes/2000000" >"$tmp/got" 2>/dev/null || fail "nghttp h2"
cmp -s "$tmp/want" "$tmp/got" || fail "nghttp over h2 through 16 KiB windows"
# Over TLS the server keeps its default --max-body (1 MiB): 1 MiB echoes, a byte more is 413.
head -c 1048576 /dev/urandom >"$tmp/up"
v=$(curl -k --data-binary @"$tmp/up" -o "$tmp/down" -w '%{http_version}' "$tls_url/echo")
[[ $v == 2 ]] && cmp -s "$tmp/up" "$tmp/down" || fail "POST /echo over h2: version $v"
head -c 1048577 /dev/zero >"$tmp/big"
code=$(curl -k --data-binary @"$tmp/big" -o /dev/null -w '%{http_code}' "$tls_url/echo")
[[ $code == 413 ]] || fail "POST /echo over h2 past --max-body: $code"

# h2load: many streams per connection, every answer a 2xx, over h2c and h2.
for u in "$url/" "$tls_url/"; do
    out=$(timeout 60 h2load -n 20000 -c 8 -m 32 "$u" 2>&1) || fail "h2load $u: $out"
    grep -q 'status codes: 20000 2xx' <<<"$out" || fail "h2load $u: $out"
done

# SIGTERM: both stop by themselves within 10 s, exit 0, say so, and nothing from the
# sanitizers in their output (UBSan's reports do not change the exit status).
for p in pid tls_pid; do
    kill -TERM "${!p}"
    for _ in $(seq 100); do kill -0 "${!p}" 2>/dev/null || break; sleep 0.1; done
    kill -0 "${!p}" 2>/dev/null && fail "the server did not stop within 10 s"
    rc=0
    wait "${!p}" || rc=$?
    ((rc == 0)) || fail "the server exited with $rc"
    eval "$p=''"
done
for l in "$log" "$tls_log"; do
    grep -q 'stopped by SIGTERM' "$l" || fail "no goodbye: $(cat "$l")"
    grep -Eq 'Sanitizer|runtime error:' "$l" && fail "a sanitizer report: $(cat "$l")"
done
echo "http2: ok"
