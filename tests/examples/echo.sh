#!/usr/bin/env bash
# The echo example end to end: eddy-echo-server on an ephemeral port, eddy-echo-client
# against it (small and large messages, several connections), then SIGTERM: the server must
# stop by itself, exit 0 and say so.
#   tests/examples/echo.sh SERVER CLIENT
set -euo pipefail
server=$1
client=$2
log=$(mktemp)
trap 'kill -9 "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
"$server" --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    grep -q "listening on" "$log" && break
    sleep 0.05
done
port=$(grep -o "127.0.0.1:[0-9]*" "$log" | head -1 | cut -d: -f2)
[[ -n "$port" ]] || { echo "no port in: $(cat "$log")"; exit 1; }
"$client" --port "$port" --count 500 --size 64
"$client" --port "$port" --count 20 --size 200000 --connections 4 --threads 2
"$client" --host localhost --port "$port" --count 10
"$server" --help | grep -q usage
kill -TERM "$pid"
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if kill -0 "$pid" 2>/dev/null; then
    echo "the server did not stop on SIGTERM"
    exit 1
fi
wait "$pid"
grep -q "stopped by SIGTERM" "$log"
cat "$log"
