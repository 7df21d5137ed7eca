#!/usr/bin/env bash
# eddy-http-server --root against real clients: bodies byte for byte (0 B, 1 B, 64 KiB, 5 MiB)
# over HTTP/1.1, TLS, h2c by prior knowledge and h2 over TLS; HEAD; ranges (one, several as
# multipart/byteranges, unsatisfiable); conditionals (If-None-Match, If-Modified-Since,
# If-Range); 405; the index and the 301 for a directory; precompressed siblings; wget -r of a
# small tree; a generated traversal corpus (files_traversal.py) with a secret next to the root
# and links inside it pointing out; a slow reader of a 256 MiB sparse file with the server's RSS
# bounded, and a file truncated mid-send (a short body, a closed connection, the server serving
# on), each over plain HTTP, TLS and h2c;
# then SIGTERM: both servers exit 0. Every client call is bounded in time. EDDY_POLLER picks
# the transport (ctest runs it on each).
#   tests/examples/files.sh SERVER CERT_DIR
set -euo pipefail
server=$1
certs=$2
for tool in curl wget python3; do
    command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh)"; exit 77; }
done
tmp=$(mktemp -d)
log=$tmp/log
tls_log=$tmp/tls_log
pid=''
tls_pid=''
cleanup() {
    for p in $pid $tls_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; cat "$log" "$tls_log"; exit 1; }
curl() { command curl --silent --show-error --max-time 20 "$@"; }

root=$tmp/root
mkdir -p "$root/sub/deep" "$root/tree/a"
token=SECRET-$RANDOM$RANDOM
echo "$token" >"$tmp/secret.txt"
ln -s ../secret.txt "$root/link.txt"
ln -s .. "$root/linkdir"
: >"$root/empty.bin"
printf 'x' >"$root/one.bin"
head -c 65536 /dev/urandom >"$root/k64.bin"
head -c 5242880 /dev/urandom >"$root/m5.bin"
printf 'abcdefghijklmnopqrstuvwxyz' >"$root/az.txt"
echo '<html><a href="sub/">sub</a></html>' >"$root/index.html"
echo 'sub index' >"$root/sub/index.html"
echo 'plain text' >"$root/doc.txt"
printf 'compressed-gz' >"$root/doc.txt.gz"
printf 'compressed-br' >"$root/doc.txt.br"
echo '<a href="a/one.html">1</a> <a href="two.css">2</a>' >"$root/tree/index.html"
echo 'one' >"$root/tree/a/one.html"
echo 'body{}' >"$root/tree/two.css"

# Under ASan, freed blocks wait in a quarantine of 256 MiB, which the RSS checks below would
# count as growth: a small one (no effect on other builds).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1
"$server" --port 0 --threads 1 --root "$root" >"$log" 2>&1 &
pid=$!
"$server" --port 0 --threads 1 --root "$root" --tls "$certs/server.pem" "$certs/server.key" \
    >"$tls_log" 2>&1 &
tls_pid=$!
port=$(port_of "$log")
tls_port=$(port_of "$tls_log")
[[ -n "$port" && -n "$tls_port" ]] || fail "no port"
url=http://127.0.0.1:$port
tls_url=https://127.0.0.1:$tls_port

# Bodies byte for byte, each way in.
for f in empty.bin one.bin k64.bin m5.bin; do
    curl -o "$tmp/got" "$url/$f" && cmp -s "$root/$f" "$tmp/got" || fail "HTTP/1.1 $f"
    curl --http2-prior-knowledge -o "$tmp/got" "$url/$f" && cmp -s "$root/$f" "$tmp/got" ||
        fail "h2c $f"
    curl -k --http1.1 -o "$tmp/got" "$tls_url/$f" && cmp -s "$root/$f" "$tmp/got" ||
        fail "TLS $f"
    v=$(curl -k --http2 -o "$tmp/got" -w '%{http_version}' "$tls_url/$f")
    [[ $v == 2 ]] && cmp -s "$root/$f" "$tmp/got" || fail "h2 over TLS $f (version $v)"
done

# HEAD: the length, no body; the validators and the type.
curl -I -o /dev/null -D "$tmp/h" "$url/m5.bin"
grep -qi '^content-length: 5242880' "$tmp/h" || fail "HEAD length: $(cat "$tmp/h")"
grep -qi '^content-type: application/octet-stream' "$tmp/h" || fail "HEAD type"
grep -qi '^accept-ranges: bytes' "$tmp/h" || fail "HEAD accept-ranges"
etag=$(grep -i '^etag:' "$tmp/h" | cut -d' ' -f2 | tr -d '\r')
modified=$(grep -i '^last-modified:' "$tmp/h" | cut -d' ' -f2- | tr -d '\r')
[[ -n $etag && -n $modified ]] || fail "HEAD validators: $(cat "$tmp/h")"
curl -D "$tmp/h" -o /dev/null "$url/index.html"
grep -qi '^content-type: text/html' "$tmp/h" || fail "html type: $(cat "$tmp/h")"

# Ranges: one, a suffix, several, unsatisfiable, over each protocol.
for u in "$url" "$tls_url"; do
    [[ $(curl -k -r 2-5 "$u/az.txt") == cdef ]] || fail "range 2-5 at $u"
    [[ $(curl -k -H 'Range: bytes=-3' "$u/az.txt") == xyz ]] || fail "suffix range at $u"
done
[[ $(curl --http2-prior-knowledge -r 2-5 "$url/az.txt") == cdef ]] || fail "h2c range"
s=$(curl -r 1000-2000 -D "$tmp/h" -o "$tmp/got" -w '%{http_code}' "$url/m5.bin")
[[ $s == 206 ]] && cmp -s "$tmp/got" <(tail -c +1001 "$root/m5.bin" | head -c 1001) ||
    fail "range of m5.bin: $s"
grep -qi '^content-range: bytes 1000-2000/5242880' "$tmp/h" || fail "content-range: $(cat "$tmp/h")"
curl -H 'Range: bytes=0-1,-3' -D "$tmp/h" -o "$tmp/got" "$url/az.txt"
grep -qi '^content-type: multipart/byteranges; boundary=' "$tmp/h" || fail "multipart type"
grep -q 'Content-Range: bytes 0-1/26' "$tmp/got" && grep -q '^ab' "$tmp/got" &&
    grep -q 'Content-Range: bytes 23-25/26' "$tmp/got" && grep -q '^xyz' "$tmp/got" ||
    fail "multipart body: $(cat "$tmp/got")"
python3 - "$tmp/h" "$tmp/got" <<'EOF' || fail "multipart parse"
import email, sys
head = open(sys.argv[1], "rb").read().split(b"\r\n", 1)[1]
msg = email.message_from_bytes(head + b"\r\n" + open(sys.argv[2], "rb").read())
parts = [p.get_payload(decode=True) for p in msg.get_payload()]
assert parts == [b"ab", b"xyz"], parts
EOF
s=$(curl -H 'Range: bytes=100-' -D "$tmp/h" -o /dev/null -w '%{http_code}' "$url/az.txt")
[[ $s == 416 ]] && grep -qi '^content-range: bytes \*/26' "$tmp/h" || fail "416: $s"
[[ $(curl -H 'Range: lines=1-2' -o /dev/null -w '%{http_code}' "$url/az.txt") == 200 ]] ||
    fail "another unit is ignored"

# Conditionals.
[[ $(curl -H "If-None-Match: $etag" -o /dev/null -w '%{http_code}' "$url/m5.bin") == 304 ]] ||
    fail "If-None-Match"
[[ $(curl -H 'If-None-Match: "nope"' -o /dev/null -w '%{http_code}' "$url/m5.bin") == 200 ]] ||
    fail "If-None-Match mismatch"
[[ $(curl -H "If-Modified-Since: $modified" -o /dev/null -w '%{http_code}' "$url/m5.bin") == 304 ]] ||
    fail "If-Modified-Since"
[[ $(curl -H 'If-Modified-Since: Thu, 01 Jan 1981 00:00:00 GMT' -o /dev/null -w '%{http_code}' \
    "$url/m5.bin") == 200 ]] || fail "If-Modified-Since, older"
[[ $(curl -r 0-9 -H "If-Range: $etag" -o /dev/null -w '%{http_code}' "$url/m5.bin") == 206 ]] ||
    fail "If-Range holding"
[[ $(curl -r 0-9 -H 'If-Range: "old"' -o /dev/null -w '%{http_code}' "$url/m5.bin") == 200 ]] ||
    fail "If-Range stale"
[[ $(curl --http2-prior-knowledge -H "If-None-Match: $etag" -o /dev/null -w '%{http_code}' \
    "$url/m5.bin") == 304 ]] || fail "h2c If-None-Match"

# Methods, directories, precompressed siblings.
s=$(curl -X POST -d x -D "$tmp/h" -o /dev/null -w '%{http_code}' "$url/az.txt")
[[ $s == 405 ]] && grep -qi '^allow: GET, HEAD' "$tmp/h" || fail "POST: $s"
s=$(curl -D "$tmp/h" -o /dev/null -w '%{http_code}' "$url/sub?x=1")
[[ $s == 301 ]] && grep -qi '^location: /sub/?x=1' "$tmp/h" || fail "redirect: $s $(cat "$tmp/h")"
[[ $(curl "$url/sub/") == 'sub index' ]] || fail "index of sub/"
[[ $(curl -o /dev/null -w '%{http_code}' "$url/sub/deep/") == 404 ]] || fail "no index"
[[ $(curl -o /dev/null -w '%{http_code}' "$url/nope") == 404 ]] || fail "404"
[[ $(curl -H 'Accept-Encoding: gzip, br' -D "$tmp/h" "$url/doc.txt") == compressed-br ]] &&
    grep -qi '^content-encoding: br' "$tmp/h" && grep -qi '^vary: accept-encoding' "$tmp/h" ||
    fail "br sibling: $(cat "$tmp/h")"
[[ $(curl -H 'Accept-Encoding: gzip, br;q=0' "$url/doc.txt") == compressed-gz ]] || fail "gz sibling"
[[ $(curl -H 'Accept-Encoding: identity' -D "$tmp/h" "$url/doc.txt") == 'plain text' ]] &&
    grep -qi '^vary: accept-encoding' "$tmp/h" || fail "identity"

# wget -r: the tree as it is.
(cd "$tmp" && timeout 20 wget -q -r -np -nH -P wget "$url/tree/") || fail "wget -r"
for f in tree/index.html tree/a/one.html tree/two.css; do
    cmp -s "$root/$f" "$tmp/wget/$f" || fail "wget -r: $f"
done

# The traversal corpus.
timeout 120 python3 "$(dirname "$0")/files_traversal.py" "$port" "$root" "$token" ||
    fail "traversal"

# A slow reader of a large file, over plain HTTP and over TLS (where the file is read and
# sealed a piece at a time): each server's memory stays put.
truncate -s 256M "$root/sparse.bin"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
slow_reader() { # PID PORT TLS
    local before after
    before=$(rss "$1")
    timeout 30 python3 - "$2" "$3" <<'EOF' || fail "slow reader (TLS: $3)"
import socket, ssl, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", int(sys.argv[1])))
if sys.argv[2] == "1":
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    s = ctx.wrap_socket(s)
s.sendall(b"GET /sparse.bin HTTP/1.1\r\nHost: x\r\n\r\n")
got, end = 0, time.time() + 4
while time.time() < end:
    got += len(s.recv(65536))
    time.sleep(0.01)
assert got > 1 << 20, got
print(f"slow reader: {got} bytes in 4 s")
EOF
    after=$(rss "$1")
    (( after - before < 4096 )) || fail "RSS grew by $((after - before)) KiB for a slow reader"
}
slow_reader "$pid" "$port" 0
slow_reader "$tls_pid" "$tls_port" 1
# HTTP/2 (h2c): the body goes as the stream takes it, not read whole into the stream's queue.
before=$(rss "$pid")
command curl -s --http2-prior-knowledge --limit-rate 2M --max-time 4 -o /dev/null \
    "$url/sparse.bin" && fail "the h2 slow reader got 256 MiB in 4 s"
after=$(rss "$pid")
(( after - before < 4096 )) || fail "RSS grew by $((after - before)) KiB for a slow h2 reader"

# A file truncated while it is sent, over plain HTTP, TLS and h2c: a short body and a closed
# connection (a reset stream for h2c), never more than the file holds; the server serves the
# next request.
truncated() { # URL CURL_VERSION_FLAG
    head -c $((64 << 20)) /dev/urandom >"$root/shrinks.bin"
    cp "$root/shrinks.bin" "$tmp/shrinks.orig"
    curl -k "$2" --limit-rate 4M -o "$tmp/got" "$1/shrinks.bin" 2>/dev/null &
    local cpid=$! rc=0 size
    sleep 1
    truncate -s 1M "$root/shrinks.bin"
    wait $cpid || rc=$?
    [[ $rc != 0 ]] || fail "a truncated file came whole from $1"
    size=$(stat -c %s "$tmp/got")
    (( size < 64 << 20 )) && cmp -s -n "$size" "$tmp/got" "$tmp/shrinks.orig" ||
        fail "truncated at $1: $size bytes, or not the file's"
    [[ $(curl -k "$1/az.txt") == abcdefghijklmnopqrstuvwxyz ]] || fail "serving after a truncation"
}
truncated "$url" --http1.1
truncated "$tls_url" --http1.1
truncated "$url" --http2-prior-knowledge # the stream is reset

# SIGTERM: both stop by themselves.
kill -TERM "$pid" "$tls_pid"
for p in $pid $tls_pid; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    wait "$p" || fail "exit status $?"
done
pid=''
tls_pid=''
grep -q 'stopped by SIGTERM' "$log" || fail "no stop line"
if grep -q 'ERROR: \(Address\|Leak\|Undefined\)Sanitizer\|runtime error' "$log" "$tls_log"; then
    fail "sanitizer report"
fi
echo "files: ok"
