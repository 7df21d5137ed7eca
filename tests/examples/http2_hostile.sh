#!/usr/bin/env bash
# eddy-http-server's HTTP/2 against hostile clients: every case of tests/examples/h2_hostile.py
# (floods, malformed frames and header blocks, flow-control abuse, and flow control that must
# work) under --strict, on one loop, with the server's descriptors counted before and after;
# then, on a second server with a 2 s idle timeout, a connection that goes silent after its
# preface. Both servers must then stop on SIGTERM with status 0 and nothing from the
# sanitizers in their logs. Skipped (77) without python3-h2 (scripts/deps.sh).
#   tests/examples/http2_hostile.sh SERVER
#
# The same script runs against other servers by hand (--no-echo where there is no POST /echo;
# --make-docroot DIR writes the files GET / and GET /bytes/N need):
#   nghttpd --no-tls --echo-upload -d DIR PORT
#   h2o -c CONF   (file.dir: DIR, and an mruby.handler for /echo returning env["rack.input"])
set -euo pipefail
server=$1
here=$(dirname "$0")
if ! python3 -c 'import h2, hpack, hyperframe' 2>/dev/null; then
    echo "SKIP: python3-h2, python3-hpack and python3-hyperframe are needed (scripts/deps.sh)"
    exit 77
fi
source "$here/lib.sh"
log=$(mktemp)
idle_log=$(mktemp)
pid=''
idle_pid=''
cleanup() {
    for p in $pid $idle_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -f "$log" "$idle_log"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    echo "--- server log:"
    cat "$log"
    echo "--- idle-timeout server log:"
    cat "$idle_log"
    exit 1
}

# Cases failing until their fix lands in codec/http2/ (reported XFAIL, or XPASS once they
# pass: then take them off):
#   concurrent_exceeded: past MAX_CONCURRENT_STREAMS (acknowledged) nghttp2 ends the
#     connection (GOAWAY PROTOCOL_ERROR), where eddy_h2_options_t promises RST_STREAM
#     REFUSED_STREAM. Not reachable through nghttp2's API: nghttp2 checks the acknowledged
#     limit in nghttp2_session_on_request_headers_received, before any callback that could
#     refuse the stream (on_begin_headers comes after; on_begin_frame cannot stop the frame
#     but by failing the whole connection), and the limit it enforces is the one it sent.
#     Only rewriting our SETTINGS on the wire would decouple them; we do not.
#   priority_self_dependency: a PRIORITY frame on itself is ignored; RFC 9113 5.3.1 wants a
#     stream error PROTOCOL_ERROR. Not reachable, as far as we can tell: with
#     SETTINGS_NO_RFC7540_PRIORITIES 1 (no priority tree, CVE-2019-9513) nghttp2 skips the
#     PRIORITY payload whole (its own self-dependency check, which would RST_STREAM, never
#     answers), so no callback but on_begin_frame, which has the frame header only, sees it.
known=(concurrent_exceeded priority_self_dependency)

# --max-body: the 8 MiB echo through 16 KiB windows (big_echo).
"$server" --port 0 --threads 1 --max-body 16777216 >"$log" 2>&1 &
pid=$!
port=$(port_of "$log")
[[ -n "$port" ]] || fail "no port"
"$server" --port 0 --threads 1 --idle-timeout 2 >"$idle_log" 2>&1 &
idle_pid=$!
idle_port=$(port_of "$idle_log")
[[ -n "$idle_port" ]] || fail "no port for the idle-timeout server"

status=0
timeout 100 python3 "$here/h2_hostile.py" --port "$port" --strict --fd-check "$pid" \
    --known-failure "${known[@]}" || status=$?
timeout 30 python3 "$here/h2_hostile.py" --port "$idle_port" --strict --idle-timeout 2 \
    --case preface_then_silence || status=$?

stop() { # pid log: SIGTERM, then it must exit 0 within 10 s, cleanly
    kill -TERM "$1"
    for _ in $(seq 200); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$1" 2>/dev/null && fail "the server did not stop on SIGTERM"
    local rc=0
    wait "$1" || rc=$?
    if grep -Eq 'Sanitizer|runtime error:' "$2"; then
        fail "a sanitizer report (status $rc)"
    fi
    ((rc == 0)) || fail "the server exited with status $rc"
    grep -q "stopped by SIGTERM" "$2" || fail "the server did not say it stopped"
}
stop "$pid" "$log"
pid=
stop "$idle_pid" "$idle_log"
idle_pid=
((status == 0)) || fail "h2_hostile.py failed"
tail -1 "$log"
