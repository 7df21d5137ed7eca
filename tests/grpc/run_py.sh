#!/usr/bin/env bash
# tests/grpc/run_py.sh SERVER SCRIPT: start SERVER (a command line; --port 0 added unless it
# has arguments of its own), wait for its "PORT <n>" line, run /usr/bin/python3 SCRIPT PORT,
# then SIGTERM the server, which must exit 0 with nothing from a sanitizer in its output.
# 77 (skipped) without python3-h2 or python3-grpcio.
set -uo pipefail
read -r -a server <<<"$1"
script=$2
python=/usr/bin/python3 # Debian's: a version manager's python3 lacks h2 and grpcio
if ! "$python" -c 'import h2, grpc' 2>/dev/null; then
    echo "SKIP: python3-h2 or python3-grpcio missing (scripts/deps.sh)"
    exit 77
fi
[[ ${#server[@]} -eq 1 ]] && server+=(--port 0)
out=$(mktemp)
pid=
cleanup() {
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
    rm -f "$out"
}
trap cleanup EXIT
"${server[@]}" >"$out" 2>&1 &
pid=$!
port=
for _ in $(seq 200); do
    port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$out")
    [[ -n $port ]] && break
    sleep 0.05
done
[[ -n $port ]] || { echo "no PORT line from ${server[*]}:"; cat "$out"; exit 1; }
timeout -k 5 40 "$python" "$script" "$port"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
if [[ $src -ne 0 ]] || grep -q "Sanitizer\|runtime error" "$out"; then
    echo "the server exited $src:"
    cat "$out"
    exit 1
fi
exit $rc
