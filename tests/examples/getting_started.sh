#!/usr/bin/env bash
# docs/getting-started.md's program end to end: its server on an ephemeral port, its client
# sending three frames and printing the answers, a frame that never completes (cut by the
# message deadline), then SIGTERM: the server must exit 0.
#   tests/examples/getting_started.sh PROGRAM
set -euo pipefail
prog=$1
log=$(mktemp)
trap 'kill -9 "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
"$prog" server 0 >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    grep -q "listening on port" "$log" && break
    sleep 0.05
done
port=$(grep -o "port [0-9]*" "$log" | cut -d' ' -f2)
[[ -n "$port" ]] || { echo "no port in: $(cat "$log")"; exit 1; }
out=$("$prog" client "$port" hello world "new user")
[[ "$out" == $'HELLO\nWORLD\nNEW USER' ]] || { echo "client printed: $out"; exit 1; }
# Half a frame: the server closes it at its 5 s message deadline, and says why.
python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"\x00\x00\x00\x10half")
t = time.time()
assert s.recv(1) == b"", "the server answered half a frame"
assert time.time() - t < 9, "not cut at the deadline"
PY
grep -q "server: connection timed out\|server: .*timed out" "$log" || { echo "no timeout: $(cat "$log")"; exit 1; }
kill -TERM "$pid"
wait "$pid" || { echo "the server exited $?: $(cat "$log")"; exit 1; }
echo "getting started: ok"
