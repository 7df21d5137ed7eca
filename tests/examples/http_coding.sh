#!/usr/bin/env bash
# eddy-http-server --gzip end to end: curl --compressed over HTTP/1.1 and HTTP/2 (prior
# knowledge, and Upgrade: h2c) byte for byte against the uncompressed answer; each coding
# asked alone, decoded by its tool (gzip, brotli, zstd) and by Python; random and text bodies
# of many sizes echoed (POST /echo) in every coding; pipelined requests answered in order,
# each in the coding it asked for; HEAD and small bodies untouched; then SIGTERM. Every
# client call is bounded in time. Skipped (77) without the tools (scripts/deps.sh).
#   tests/examples/http_coding.sh SERVER
set -euo pipefail
server=$1
py=/usr/bin/python3
for t in curl gzip brotli zstd; do
    command -v $t >/dev/null || { echo "$t is not installed (scripts/deps.sh)"; exit 77; }
done
$py -c 'import zlib, brotli, zstandard' 2>/dev/null ||
    { echo "python3-brotli or python3-zstandard missing (scripts/deps.sh)"; exit 77; }
log=$(mktemp)
tmp=$(mktemp -d)
pid=''
cleanup() {
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
    rm -rf "$log" "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
"$server" --port 0 --threads 2 --gzip --max-body 2097152 >"$log" 2>&1 &
pid=$!
port=$(port_of "$log")
[[ -n "$port" ]] || { echo "no port in: $(cat "$log")"; exit 1; }
url=http://127.0.0.1:$port
curl() { command curl --silent --show-error --max-time 10 "$@"; }
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
# Decode file $2 of coding $1 with Python into file $3.
pydecode() {
    $py - "$@" <<'PY'
import sys, zlib, brotli, zstandard
coding, src, dst = sys.argv[1:4]
d = open(src, "rb").read()
out = {"gzip": lambda: zlib.decompress(d, 31), "deflate": lambda: zlib.decompress(d),
       "br": lambda: brotli.decompress(d),
       "zstd": lambda: zstandard.ZstdDecompressor().decompressobj().decompress(d)}[coding]()
open(dst, "wb").write(out)
PY
}
# Decode file $2 of coding $1 with its tool into file $3 (deflate has none: Python's zlib).
tooldecode() {
    case $1 in
    gzip) gzip -dc <"$2" >"$3" ;;
    br) brotli -dc <"$2" >"$3" ;;
    zstd) zstd -dcq <"$2" >"$3" ;;
    deflate) pydecode "$@" ;;
    esac
}

# curl --compressed, HTTP/1.1 and HTTP/2, against the answer uncompressed.
for path in /bytes/100000 /bytes/1048576 /bytes/5000 /bytes/1024 /bytes/1023 / /nope; do
    curl -o "$tmp/plain" "$url$path"
    for v in --http1.1 --http2-prior-knowledge --http2; do # --http2: by Upgrade: h2c
        curl $v --compressed -o "$tmp/got" "$url$path"
        cmp -s "$tmp/plain" "$tmp/got" || fail "curl $v --compressed $path"
    done
done
curl --compressed -D "$tmp/h" -o /dev/null "$url/bytes/100000"
grep -qi '^content-encoding: br' "$tmp/h" || fail "br not chosen for curl: $(cat "$tmp/h")"
grep -qi '^vary: accept-encoding' "$tmp/h" || fail "no Vary: $(cat "$tmp/h")"
curl --http2-prior-knowledge --compressed -D "$tmp/h" -o /dev/null "$url/bytes/100000"
grep -qi '^content-encoding: br' "$tmp/h" || fail "h2: br not chosen: $(cat "$tmp/h")"

# Small bodies and HEAD go as they are.
curl -H 'Accept-Encoding: gzip' -D "$tmp/h" -o "$tmp/got" "$url/bytes/1023"
grep -qi '^content-encoding' "$tmp/h" && fail "1023 bytes compressed: $(cat "$tmp/h")"
curl -I -H 'Accept-Encoding: gzip' -D "$tmp/h" -o /dev/null "$url/bytes/5000"
grep -qi '^content-encoding' "$tmp/h" && fail "HEAD compressed: $(cat "$tmp/h")"
grep -qi '^content-length: 5000' "$tmp/h" || fail "HEAD length: $(cat "$tmp/h")"

# Each coding alone, over both versions, decoded by its tool and by Python; bodies of many
# sizes, random (incompressible) and text, echoed.
head -c 3000000 /dev/urandom >"$tmp/random"
find "$(dirname "$0")/../.." -name '*.md' -print0 | xargs -0 cat | head -c 3000000 >"$tmp/text"
for n in 0 1 1023 1024 1025 65536 1048576; do
    for kind in random text; do
        head -c $n "$tmp/$kind" >"$tmp/want"
        for coding in gzip deflate br zstd; do
            for v in --http1.1 --http2-prior-knowledge; do
                curl $v -H "Accept-Encoding: $coding" --data-binary @"$tmp/want" \
                    -D "$tmp/h" -o "$tmp/wire" "$url/echo"
                if ((n < 1024)); then
                    cmp -s "$tmp/want" "$tmp/wire" || fail "$n bytes: not as they were"
                    continue
                fi
                grep -qi "^content-encoding: $coding" "$tmp/h" || fail "$coding $n: $(cat "$tmp/h")"
                tooldecode $coding "$tmp/wire" "$tmp/got" || fail "$coding tool: $n $kind $v"
                cmp -s "$tmp/want" "$tmp/got" || fail "$coding tool: $n $kind $v differs"
                pydecode $coding "$tmp/wire" "$tmp/got" || fail "$coding python: $n $kind $v"
                cmp -s "$tmp/want" "$tmp/got" || fail "$coding python: $n $kind $v differs"
            done
        done
    done
done

# Pipelined on one connection: each answer in its own request's coding, in order.
$py - "$port" <<'PY' || fail "pipelined answers"
import socket, sys, zlib, brotli, zstandard
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
codings = ["gzip", "br", "identity", "zstd", "deflate", "br;q=0, gzip;q=0.5"]
req = "".join("GET /bytes/%d HTTP/1.1\r\nHost: a\r\nAccept-Encoding: %s\r\n\r\n" % (2000 + i, c)
              for i, c in enumerate(codings))
s.sendall(req.encode())
buf = b""
def need(n):
    global buf
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            raise SystemExit("closed early")
        buf += d
want = {"gzip": "gzip", "br": "br", "identity": None, "zstd": "zstd", "deflate": "deflate",
        "br;q=0, gzip;q=0.5": "gzip"}
dec = {None: lambda d: d, "gzip": lambda d: zlib.decompress(d, 31), "deflate": zlib.decompress,
       "br": brotli.decompress,
       "zstd": lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d)}
for i, c in enumerate(codings):
    while b"\r\n\r\n" not in buf:
        need(len(buf) + 1)
    head, buf = buf.split(b"\r\n\r\n", 1)
    fields = dict(l.split(b": ", 1) for l in head.split(b"\r\n")[1:])
    fields = {k.lower().decode(): v.decode() for k, v in fields.items()}
    n = int(fields["content-length"])
    need(n)
    body, buf = buf[:n], buf[n:]
    got = fields.get("content-encoding")
    if got != want[c]:
        raise SystemExit("answer %d: %s for %s" % (i, got, c))
    plain = dec[got](body)
    a = b"abcdefghijklmnopqrstuvwxyz"
    if plain != (a * 200)[:2000 + i]:
        raise SystemExit("answer %d: body differs" % i)
PY

kill -TERM "$pid"
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$pid" 2>/dev/null && fail "the server did not stop on SIGTERM"
wait "$pid"
pid=
grep -q "stopped by SIGTERM" "$log" || fail "no stop line"
echo "ok"
