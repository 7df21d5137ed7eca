#!/usr/bin/env bash
# eddy-echo-server under valgrind's memcheck: echo traffic from eddy-echo-client, then a
# connection the server closes with input it has not read (the close discards that input
# first, pipeline/transport/socket.c's stream_discard_input), then SIGTERM. The server must exit 0 with
# no memory error, no definite leak, and no block at all left at exit that eddy's library code
# allocated: the server ends with eddy_library_shutdown(). glibc's and OpenSSL's own memory
# is theirs and not looked at. Exit 77 (skipped) without valgrind.
#   tests/examples/echo_valgrind.sh SERVER CLIENT SOURCE_DIR
set -euo pipefail
server=$1
client=$2
src=$(cd "$3" && pwd -P)
if ! command -v valgrind >/dev/null 2>&1; then
    echo "echo_valgrind: skipped: valgrind is not installed (scripts/deps.sh installs it)"
    exit 77
fi
work=$(mktemp -d)
pid=
writer=
cleanup() {
    if [[ -n "$writer" ]]; then kill "$writer" 2>/dev/null || true; fi
    if [[ -n "$pid" ]]; then kill -9 "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
log=$work/server.log
vglog=$work/valgrind.log
show_logs() {
    echo "--- server output"
    cat "$log"
    echo "--- valgrind"
    cat "$vglog"
}

# Full source paths in the stacks (--fullpath-after=), to tell eddy's frames from others.
valgrind --error-exitcode=1 --leak-check=full --show-leak-kinds=all \
    --errors-for-leak-kinds=definite --fullpath-after= --num-callers=24 --log-file="$vglog" \
    "$server" --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
    grep -q "listening on" "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
port=$(grep -o "127.0.0.1:[0-9]*" "$log" | head -1 | cut -d: -f2 || true)
[[ -n "$port" ]] || { echo "echo_valgrind: the server did not start"; show_logs; exit 1; }

"$client" --port "$port" --count 200 --size 64
"$client" --port "$port" --count 10 --size 200000 --connections 2 --threads 2

# A peer that sends and never reads: the server's replies back up, it stops reading that
# connection (EDDY_PAUSE_READ_WHEN_UNWRITABLE), and its receive queue fills.
exec 3<>"/dev/tcp/127.0.0.1/$port"
head -c $((64 << 20)) /dev/zero >&3 2>/dev/null &
writer=$!
# The largest receive queue of the server's established connections (/proc/net/tcp, which
# may list thousands of other sockets on a shared machine: awk picks, bash reads the hex).
hexport=$(printf '%04X' "$port")
unread() {
    local most=0 q
    for q in $(awk -v p=":$hexport" '$2 ~ p "$" && $4 == "01" { sub(/.*:/, "", $5); print $5 }' \
        /proc/net/tcp); do
        ((16#$q > most)) && most=$((16#$q))
    done
    echo "$most"
}
# Paused: input is waiting and stays as it is.
last=0
for _ in $(seq 100); do
    now=$(unread)
    ((now > 0 && now == last)) && break
    last=$now
    sleep 0.3
done
((now > 0 && now == last)) || { echo "echo_valgrind: no unread input at the server"; exit 1; }
echo "echo_valgrind: $now bytes unread by the server at SIGTERM"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
exec 3>&-
if [[ $rc -ne 0 ]]; then
    echo "echo_valgrind: the server under valgrind exited $rc"
    show_logs
    exit 1
fi
grep -q "stopped by SIGTERM" "$log" || { echo "echo_valgrind: no clean stop"; show_logs; exit 1; }

# Every loss record (any kind) with a frame in the library's sources is eddy's memory left.
eddy=$(awk -v src="$src" '
    / in loss record / { rec = $0 "\n"; ours = 0; inrec = 1; next }
    inrec && /^==[0-9]+== *$/ { if (ours) printf "%s", rec; inrec = 0; next }
    inrec {
        rec = rec $0 "\n"
        if (index($0, "(" src "/buffer/") || index($0, "(" src "/reactor/") ||
            index($0, "(" src "/pipeline/") || index($0, "(" src "/bootstrap/") ||
            index($0, "(" src "/include/"))
            ours = 1
    }' "$vglog")
if [[ -n "$eddy" ]]; then
    echo "echo_valgrind: eddy's memory is still held at exit:"
    echo "$eddy"
    exit 1
fi
grep -E "in use at exit|ERROR SUMMARY" "$vglog" | sed 's/^==[0-9]*== /echo_valgrind: /'
cat "$log"
