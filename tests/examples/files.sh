#!/usr/bin/env bash
# eddy-http-server --root against real clients: bodies byte for byte (0 B, 1 B, 64 KiB, 5 MiB)
# over HTTP/1.1, TLS, h2c by prior knowledge and h2 over TLS; HEAD; ranges (one, several as
# multipart/byteranges, unsatisfiable); conditionals (If-None-Match, If-Modified-Since,
# If-Range); 405; the index and the 301 for a directory; precompressed siblings; wget -r of a
# small tree; a generated traversal corpus (files_traversal.py) with a secret next to the root
# and links inside it pointing out; a slow reader of a 256 MiB sparse file with the server's RSS
# bounded, and a file truncated mid-send (a short body, a closed connection, the server serving
# on), each over plain HTTP, TLS and h2c. The servers run with --gzip: files compressed on the
# fly in each coding (gzip, br, zstd, deflate) decoded by the system's tools and by Python over
# each protocol; the headers of a coded answer; HTTP/1.0 (the close ends it); pipelined coded
# and plain answers in order; what stays as it is (small, image, HEAD, Range); a slow reader
# of a coded file and a file truncated while coded, as above.
# Then SIGTERM: both servers exit 0. Every client call is bounded in time. EDDY_POLLER picks
# the transport (ctest runs it on each).
#   tests/examples/files.sh SERVER CERT_DIR
set -euo pipefail
server=$1
certs=$2
for tool in curl wget python3 gzip brotli zstd; do
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
docs=$(dirname "$0")/../../docs
cat "$docs"/*.md "$docs"/*.md >"$tmp/docs"
head -c 102400 "$tmp/docs" >"$root/prose.txt"
head -c 786432 /dev/urandom | base64 >"$root/m1.txt"
printf 'short text, too short to code\n' >"$root/small.txt"
head -c 4096 /dev/urandom >"$root/photo.png"

# Under ASan, freed blocks wait in a quarantine of 256 MiB, which the RSS checks below would
# count as growth: a small one (no effect on other builds).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1
"$server" --port 0 --threads 1 --root "$root" --gzip >"$log" 2>&1 &
pid=$!
"$server" --port 0 --threads 1 --root "$root" --gzip --tls "$certs/server.pem" "$certs/server.key" \
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

# Each coding, decoded by its tool, each way in.
decode() { # CODING
    case $1 in
    gzip) gzip -dc ;;
    br) brotli -dc ;;
    zstd) zstd -dcq ;;
    deflate) python3 -c 'import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))' ;;
    esac
}
for f in prose.txt m1.txt; do
    for coding in gzip br zstd deflate; do
        for way in "$url --http1.1" "$url --http2-prior-knowledge" "$tls_url --http1.1" \
            "$tls_url --http2"; do
            set -- $way
            curl -k "$2" -H "Accept-Encoding: $coding" -D "$tmp/h" -o "$tmp/got" "$1/$f" ||
                fail "$coding $f over $way"
            grep -qi "^content-encoding: $coding" "$tmp/h" || fail "$coding $f over $way: $(cat "$tmp/h")"
            decode $coding <"$tmp/got" | cmp -s - "$root/$f" || fail "$coding $f over $way: the body"
        done
    done
done
# Python's own decoders, and curl's.
curl -H 'Accept-Encoding: gzip' -o "$tmp/got" "$url/m1.txt"
python3 - "$tmp/got" "$root/m1.txt" <<'EOF' || fail "Python's gzip"
import gzip, sys
assert gzip.decompress(open(sys.argv[1], "rb").read()) == open(sys.argv[2], "rb").read()
EOF
curl --compressed -o "$tmp/got" "$url/prose.txt" && cmp -s "$tmp/got" "$root/prose.txt" ||
    fail "curl --compressed"

# The headers of a coded answer (a file over 256 KiB is coded as it is read: chunked; a
# smaller one may be coded whole, with its length), and of the same file plain.
for f in prose.txt m1.txt; do
    curl -H 'Accept-Encoding: gzip' -D "$tmp/h" -o /dev/null "$url/$f"
    grep -qi '^vary: accept-encoding' "$tmp/h" && grep -qi '^etag: W/"' "$tmp/h" &&
        ! grep -qi '^accept-ranges' "$tmp/h" || fail "coded headers of $f: $(cat "$tmp/h")"
done
grep -qi '^transfer-encoding: chunked' "$tmp/h" && ! grep -qi '^content-length' "$tmp/h" ||
    fail "m1.txt coded as it is read: $(cat "$tmp/h")"
curl -H 'Accept-Encoding: identity' -D "$tmp/h" -o "$tmp/got" "$url/prose.txt"
grep -qi '^content-length: 102400' "$tmp/h" && grep -qi '^etag: "' "$tmp/h" &&
    ! grep -qi '^content-encoding' "$tmp/h" && cmp -s "$tmp/got" "$root/prose.txt" ||
    fail "identity: $(cat "$tmp/h")"
# HTTP/1.0: no chunks; the close ends the body.
curl --http1.0 -H 'Accept-Encoding: gzip' -D "$tmp/h" -o "$tmp/got" "$url/m1.txt"
grep -qi '^connection: close' "$tmp/h" && ! grep -qi '^transfer-encoding' "$tmp/h" &&
    gzip -dc <"$tmp/got" | cmp -s - "$root/m1.txt" || fail "HTTP/1.0: $(cat "$tmp/h")"
# What stays as it is.
for args in "small.txt" "photo.png" "prose.txt -I" "prose.txt -r 0-9"; do
    set -- $args
    curl -H 'Accept-Encoding: gzip' -D "$tmp/h" -o /dev/null "${@:2}" "$url/$1"
    ! grep -qi '^content-encoding' "$tmp/h" && grep -qi '^content-length' "$tmp/h" ||
        fail "coded, but should not be: $args: $(cat "$tmp/h")"
done

# Pipelined: coded and plain answers in the order asked, each whole.
timeout 20 python3 - "$port" "$root" <<'EOF' || fail "pipelined"
import gzip, socket, sys
port, root = int(sys.argv[1]), sys.argv[2]
asks = [("prose.txt", "gzip"), ("small.txt", "gzip"), ("m1.txt", "identity"), ("m1.txt", "gzip"),
        ("prose.txt", "identity")]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"".join(b"GET /%s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: %s\r\n\r\n"
                   % (f.encode(), c.encode()) for f, c in asks))
buf = bytearray()
def need(n):
    while len(buf) < n:
        got = s.recv(1 << 16)
        assert got, "closed early"
        buf.extend(got)
def line():
    while b"\r\n" not in buf:
        need(len(buf) + 1)
    i = buf.index(b"\r\n")
    out = bytes(buf[:i]); del buf[:i + 2]
    return out
for name, coding in asks:
    status = line()
    assert status.startswith(b"HTTP/1.1 200"), status
    heads = {}
    while (l := line()):
        k, v = l.split(b":", 1)
        heads[k.strip().lower()] = v.strip()
    if b"content-length" in heads:
        n = int(heads[b"content-length"]); need(n); body = bytes(buf[:n]); del buf[:n]
    else:
        assert heads.get(b"transfer-encoding") == b"chunked", heads
        body = bytearray()
        while (n := int(line().split(b";")[0], 16)):
            need(n + 2); body += buf[:n]; assert buf[n:n + 2] == b"\r\n"; del buf[:n + 2]
        assert line() == b""
    if heads.get(b"content-encoding") == b"gzip":
        body = gzip.decompress(body)
    want = open(f"{root}/{name}", "rb").read()
    assert body == want, (name, coding, len(body), len(want))
print("pipelined: ok")
EOF

# A slow reader of a large file, over plain HTTP and over TLS (where the file is read and
# sealed a piece at a time): each server's memory stays put.
truncate -s 256M "$root/sparse.bin"
slow_reader "$pid" "$port" 0 /sparse.bin
slow_reader "$tls_pid" "$tls_port" 1 /sparse.bin
# HTTP/2 (h2c): the body goes as the stream takes it, not read whole into the stream's queue.
before=$(rss "$pid")
command curl -s --http2-prior-knowledge --limit-rate 2M --max-time 4 -o /dev/null \
    "$url/sparse.bin" && fail "the h2 slow reader got 256 MiB in 4 s"
after=$(rss "$pid")
(( after - before < 4096 )) || fail "RSS grew by $((after - before)) KiB for a slow h2 reader"
# The same, of a 64 MiB text file compressed on the fly: it is read only as the reader takes
# its coded bytes.
head -c $((48 << 20)) /dev/urandom | base64 >"$root/big.txt"
slow_reader "$pid" "$port" 0 /big.txt 'Accept-Encoding: gzip'
slow_reader "$tls_pid" "$tls_port" 1 /big.txt 'Accept-Encoding: gzip'
before=$(rss "$pid")
command curl -s --http2-prior-knowledge -H 'Accept-Encoding: gzip' --limit-rate 1M --max-time 4 \
    -o /dev/null "$url/big.txt" && fail "the h2 slow reader got 48 MiB of gzip in 4 s"
after=$(rss "$pid")
(( after - before < 4096 )) || fail "RSS grew by $((after - before)) KiB for a slow coded h2 reader"

# A file truncated while it is sent, over plain HTTP, TLS and h2c, as it is and gzip'd on the
# fly: a short body and a closed connection (a reset stream for h2c; no zero chunk), never
# more than the file holds; the server serves the next request.
truncated() { # URL CURL_VERSION_FLAG [CODING]
    local cpid rc=0 size coded=(cat)
    head -c $((48 << 20)) /dev/urandom | base64 >"$root/shrinks.txt"
    cp "$root/shrinks.txt" "$tmp/shrinks.orig"
    if [[ -n ${3:-} ]]; then
        coded=(gzip -dc)
    fi
    curl -k "$2" -H "Accept-Encoding: ${3:-identity}" --limit-rate 4M -o "$tmp/got" \
        "$1/shrinks.txt" 2>/dev/null &
    cpid=$!
    sleep 1
    truncate -s 1M "$root/shrinks.txt"
    wait $cpid || rc=$?
    [[ $rc != 0 ]] || fail "a truncated file came whole from $1 ($2 ${3:-})"
    "${coded[@]}" <"$tmp/got" >"$tmp/got.plain" 2>/dev/null || true
    size=$(stat -c %s "$tmp/got.plain")
    (( size > 0 && size < $(stat -c %s "$tmp/shrinks.orig") )) && cmp -s -n "$size" "$tmp/got.plain" "$tmp/shrinks.orig" ||
        fail "truncated at $1 ($2 ${3:-}): $size bytes, or not the file's"
    [[ $(curl -k "$1/az.txt") == abcdefghijklmnopqrstuvwxyz ]] || fail "serving after a truncation"
}
for coding in '' gzip; do
    truncated "$url" --http1.1 $coding
    truncated "$tls_url" --http1.1 $coding
    truncated "$url" --http2-prior-knowledge $coding # the stream is reset
done

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
