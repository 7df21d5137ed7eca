#!/usr/bin/env bash
# eddy-ws-server and eddy-ws-client against a real peer, node's ws package
# (tests/examples/ws/peer.js), and against each other; exact results, every step bounded.
#   - the page (curl): 200, 404, a /ws request that is not an upgrade (400)
#   - --echo: node clients with and without permessage-deflate (text, UTF-8, empty, binary,
#     fragments, 1 MiB, ping, 1000 pipelined, 1009, 1007, a clean close)
#   - broadcast: three node clients get every message, 1 MiB ones too, and one that stops
#     reading is closed (the server's stop line counts it)
#   - a node ws server echoing to eddy-ws-client: lines (empty, UTF-8, 100 KB) with and
#     without deflate, --count
#   - wss: eddy-ws-server --tls with node's client and eddy-ws-client (verified, an untrusted
#     CA refused)
#   - a server stopped under a connected client: the client gets 1001 and exits 0
#   tests/examples/ws.sh SERVER CLIENT CERT_DIR NODE_DIR
set -euo pipefail
server=$1
client=$2
certs=$3
node_dir=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/ws_lib.sh"
tmp=$(mktemp -d)
pid=''
node_pid=''
client_pid=''
cleanup() {
    for p in $pid $node_pid $client_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/*.log; do
        [[ -f $f ]] && { echo "--- $f"; cat "$f"; }
    done
    exit 1
}
ws_node_modules "$node_dir"
peer() { timeout 100 node "$here/ws/peer.js" "$@"; }
cl() { timeout 20 "$client" "$@" 2>>"$tmp/clients.log"; } # what they say goes to the log
curl() { command curl --silent --show-error --max-time 5 "$@"; }

"$server" --help | grep -q usage || fail "--help"
"$client" --help | grep -q usage || fail "client --help"
set +e
"$client" http://127.0.0.1:1/ 2>/dev/null
[[ $? == 2 ]] || fail "a URL that is not ws:// must be a usage error"
set -e

# The page, and what is not the page.
ws_start "$tmp/echo.log" "$server" --port 0 --threads 2 --echo
grep -q "echo, 2 loops" "$tmp/echo.log" || fail "the start line: $(cat "$tmp/echo.log")"
url=http://127.0.0.1:$port
[[ $(curl -o /dev/null -w '%{http_code} %{content_type}' "$url/?name=x") == "200 text/html; charset=utf-8" ]] ||
    fail "GET /"
curl "$url/" | grep -q "new WebSocket(scheme + location.host + '/ws')" || fail "the page's script"
[[ $(curl -o /dev/null -w '%{http_code}' "$url/nope") == 404 ]] || fail "GET /nope"
[[ $(curl -o /dev/null -w '%{http_code}' "$url/ws") == 400 ]] || fail "GET /ws without upgrade"

# node's client against --echo.
peer echo "ws://127.0.0.1:$port/ws" || fail "node against --echo"
# eddy's client against --echo, both ways of compressing.
printf 'one\n\ntwo\n' | cl "ws://127.0.0.1:$port/ws" >"$tmp/out" ||
    fail "eddy-ws-client against --echo"
[[ $(cat "$tmp/out") == $'one\n\ntwo' ]] || fail "echoed: $(cat "$tmp/out")"
cl --deflate --count 500 --size 2000 "ws://127.0.0.1:$port/ws" >"$tmp/out" ||
    fail "--count against --echo: $(cat "$tmp/out")"
grep -q "500 of 500 messages of 2000 bytes answered in .* 0 wrong" "$tmp/out" ||
    fail "count: $(cat "$tmp/out")"
ws_stop "$tmp/echo.log"

# Broadcast: node's clients; one falls behind and is let go.
ws_start "$tmp/chat.log" "$server" --port 0 --threads 2
grep -q "broadcast, 2 loops" "$tmp/chat.log" || fail "the start line: $(cat "$tmp/chat.log")"
peer broadcast "ws://127.0.0.1:$port/ws" || fail "node against broadcast"
# Two eddy clients: what one says, the other prints.
mkfifo "$tmp/in"
timeout 30 "$client" --deflate "ws://127.0.0.1:$port/ws" <"$tmp/in" >"$tmp/listener.out" \
    2>"$tmp/listener.err" &
client_pid=$!
exec 7>"$tmp/in" # held open: the listener's input stays open until the end
for _ in $(seq 200); do
    grep -q "connected to" "$tmp/listener.err" && break
    sleep 0.05
done
grep -q "eddy-ws-client: connected to ws://127.0.0.1:$port/ws with permessage-deflate" \
    "$tmp/listener.err" || fail "the listener did not connect: $(cat "$tmp/listener.err")"
printf 'hello from the speaker\n' | cl "ws://127.0.0.1:$port/ws" >"$tmp/out" ||
    fail "the speaker"
[[ $(cat "$tmp/out") == "hello from the speaker" ]] || fail "the speaker got: $(cat "$tmp/out")"
for _ in $(seq 100); do
    grep -q "hello from the speaker" "$tmp/listener.out" && break
    sleep 0.05
done
# The server stops under the listener: it gets 1001 and ends cleanly.
ws_stop "$tmp/chat.log"
grep -q "1 clients closed for falling behind" "$tmp/chat.log" ||
    fail "the slow client was not counted: $(cat "$tmp/chat.log")"
wait "$client_pid" || fail "the listener exited with $?: $(cat "$tmp/listener.err")"
client_pid=
exec 7>&-
[[ $(cat "$tmp/listener.out") == "hello from the speaker" ]] ||
    fail "the listener printed: $(cat "$tmp/listener.out")"
grep -q "the server closed with 1001" "$tmp/listener.err" ||
    fail "the listener: $(cat "$tmp/listener.err")"

# A node ws server echoing, for eddy-ws-client.
peer server "$tmp/node.port" >"$tmp/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 200); do
    [[ -s $tmp/node.port ]] && break
    sleep 0.05
done
[[ -s $tmp/node.port ]] || fail "the node server did not start"
nurl="ws://127.0.0.1:$(cat "$tmp/node.port")/echo?x=1"
long=$(head -c 100000 /dev/zero | tr '\0' 'z')
printf '%s\n' "first" "" "héllo ☃ 🎉" "$long" "last" >"$tmp/lines"
for flags in "" "--deflate"; do
    cl $flags "$nurl" <"$tmp/lines" >"$tmp/out" ||
        fail "eddy-ws-client $flags against node"
    cmp -s "$tmp/lines" "$tmp/out" || fail "node echoed ($flags): $(head -c 300 "$tmp/out")"
done
cl --deflate --count 300 --size 5000 "$nurl" >"$tmp/out" ||
    fail "--count against node: $(cat "$tmp/out")"
grep -q "300 of 300 messages of 5000 bytes answered in .* 0 wrong" "$tmp/out" ||
    fail "count against node: $(cat "$tmp/out")"
for _ in $(seq 100); do
    [[ $(grep -c '^closed 1000$' "$tmp/node.log") == 3 ]] && break
    sleep 0.05
done
[[ $(grep -c '^connection /echo?x=1 extensions=none$' "$tmp/node.log") == 1 &&
    $(grep -c '^connection /echo?x=1 extensions=permessage-deflate$' "$tmp/node.log") == 2 &&
    $(grep -c '^closed 1000$' "$tmp/node.log") == 3 ]] || fail "the node server saw: $(cat "$tmp/node.log")"
kill -TERM "$node_pid"
wait "$node_pid" || true
node_pid=

# wss: the same server with TLS, node's client and eddy's.
ws_start "$tmp/tls.log" "$server" --port 0 --threads 1 --echo --tls "$certs/server.pem" "$certs/server.key"
grep -q "with TLS" "$tmp/tls.log" || fail "the TLS start line: $(cat "$tmp/tls.log")"
[[ $(curl --cacert "$certs/ca.pem" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/") == 200 ]] ||
    fail "GET / over https"
peer echo "wss://127.0.0.1:$port/ws" "$certs/ca.pem" || fail "node against wss"
printf 'secret\n' | cl --tls-ca "$certs/ca.pem" "wss://127.0.0.1:$port/ws" >"$tmp/out" ||
    fail "eddy-ws-client over wss"
[[ $(cat "$tmp/out") == secret ]] || fail "over wss: $(cat "$tmp/out")"
cl --tls-ca "$certs/ca.pem" --deflate --count 200 --size 100 \
    "wss://localhost:$port/ws" >"$tmp/out" || fail "--count over wss: $(cat "$tmp/out")"
grep -q "200 of 200 messages" "$tmp/out" || fail "count over wss: $(cat "$tmp/out")"
if printf 'x\n' | timeout 20 "$client" --tls-ca "$certs/other-ca.pem" \
    "wss://127.0.0.1:$port/ws" >"$tmp/out" 2>&1; then
    fail "a certificate from an untrusted CA was accepted"
fi
grep -q "TLS handshake failed" "$tmp/out" || fail "untrusted CA: $(cat "$tmp/out")"
ws_stop "$tmp/tls.log"
echo "ws: all checks passed"
