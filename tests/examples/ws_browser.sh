#!/usr/bin/env bash
# eddy-ws-server's chat page in a real browser: a headless Chromium (Debian's, as root with
# --no-sandbox) opens it in two tabs, as alice and bob, over http and then https; each says
# something and must show both messages (tests/examples/ws/browser.js, over the DevTools
# protocol). Chromium runs in a process group of its own, killed at the end or on timeout,
# and its profile directory is removed. Skipped (77) without chromium or node.
#   tests/examples/ws_browser.sh SERVER CERT_DIR NODE_DIR [SCREENSHOT_DIR]
set -euo pipefail
server=$1
certs=$2
node_dir=$3
shots=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
source "$here/ws_lib.sh"
browser=''
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null; then
        browser=$b
        break
    fi
done
if [[ -z $browser ]]; then
    echo "SKIP: no chromium (scripts/deps.sh installs Debian's)"
    exit 77
fi
ws_node_modules "$node_dir"
tmp=$(mktemp -d)
pid=''
browser_pid=''
stop_browser() {
    if [[ -n $browser_pid ]]; then
        kill -TERM -- "-$browser_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 -- "-$browser_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$browser_pid" 2>/dev/null || true
        wait "$browser_pid" 2>/dev/null || true
        browser_pid=''
    fi
}
cleanup() {
    stop_browser
    [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/*.log; do
        [[ -f $f ]] && { echo "--- $f"; tail -n 40 "$f"; }
    done
    exit 1
}

# One browser for both runs; its own process group (setsid), so that all of its processes
# go with it. The test certificate is not trusted by the browser: the https run ignores that.
start_browser() {
    rm -rf "$tmp/profile" && mkdir -p "$tmp/profile"
    setsid "$browser" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --no-default-browser-check --disable-extensions \
        --ignore-certificate-errors --user-data-dir="$tmp/profile" \
        --remote-debugging-address=127.0.0.1 --remote-debugging-port=0 about:blank \
        >"$tmp/browser.log" 2>&1 &
    browser_pid=$!
    for _ in $(seq 300); do
        [[ -s $tmp/profile/DevToolsActivePort ]] && break
        kill -0 "$browser_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ ! -s $tmp/profile/DevToolsActivePort ]]; then
        echo "SKIP: $browser did not start here: $(tail -n 5 "$tmp/browser.log")"
        exit 77
    fi
    devtools="ws://127.0.0.1:$(sed -n 1p "$tmp/profile/DevToolsActivePort")$(sed -n 2p "$tmp/profile/DevToolsActivePort")"
}

run() { # scheme server-arguments...
    local scheme=$1
    shift
    ws_start "$tmp/server.log" "$server" --port 0 --threads 2 "$@"
    start_browser
    timeout 90 node "$here/ws/browser.js" "$devtools" "$scheme://127.0.0.1:$port/" \
        ${shots:+"$shots/ws_browser_$scheme.png"} || fail "the browser over $scheme"
    stop_browser
    ws_stop "$tmp/server.log"
    # Two pages, two sockets; four messages.
    grep -q "2 pages, 2 WebSocket sessions, 4 messages" "$tmp/server.log" ||
        fail "the server's counts: $(cat "$tmp/server.log")"
}
run http
run https --tls "$certs/server.pem" "$certs/server.key"
echo "ws_browser: all checks passed"
