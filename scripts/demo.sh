#!/usr/bin/env bash
# The demo `make run` shows: eddy's example servers on loopback, driven by eddy's clients
# (correctness first, then a short throughput run with a live progress line), the timers and
# tasks examples, the library tour, and a summary table. Ends by itself; exit 0 when every
# part passed.
#   bash scripts/demo.sh BUILD_DIR
set -uo pipefail
build=${1:-build/release}
ex=$build/examples
results=()   # "part|result|figure"
failed=0
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }
note() { printf '  %s\n' "$*"; }
record() { # part result figure
    results+=("$1|$2|$3")
    [[ $2 == ok ]] || failed=1
}

# start_server NAME LOGFILE ARGS...: starts it on an ephemeral port, sets $port.
start_server() {
    local name=$1 log=$2
    shift 2
    "$ex/$name" --port 0 "$@" >"$log" 2>&1 &
    pids+=($!)
    server_pid=$!
    port=
    for _ in $(seq 200); do
        port=$(grep -o '127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
        [[ -n $port ]] && break
        sleep 0.05
    done
    note "$(head -1 "$log")"
}

stop_server() { # LOGFILE
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 200); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    wait "$server_pid" 2>/dev/null
    local rc=$?
    note "$(tail -1 "$1")"
    return $rc
}

tmp=$(mktemp -d)
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

printf '\033[1meddy demo\033[0m: a reactor networking framework in C, in the spirit of Netty\n'
printf 'every part below runs on 127.0.0.1 and checks what it gets back\n'

# ---------------------------------------------------------------------------------------
bold "1. echo: eddy-echo-server, driven by eddy-echo-client"
start_server eddy-echo-server "$tmp/echo.log" --threads 2
if out=$("$ex/eddy-echo-client" --port "$port" --count 2000 --size 64 --connections 4 2>&1) &&
    out2=$("$ex/eddy-echo-client" --port "$port" --count 50 --size 262144 --connections 2 2>&1); then
    note "correctness: 4 x 2000 messages of 64 B and 2 x 50 of 256 KiB, every byte checked: ok"
    record "echo correctness" ok "8,100 messages, 25 MiB checked"
else
    note "correctness FAILED:"; printf '%s\n%s\n' "${out:-}" "${out2:-}"
    record "echo correctness" FAILED "-"
fi
note "throughput: 16 connections, one 256 B message in flight each, 10,000 each:"
progress=()
[[ -t 2 ]] && progress=(--progress) # a live line on a terminal only
if out=$("$ex/eddy-echo-client" --port "$port" --count 10000 --size 256 --connections 16 \
    --threads 1 "${progress[@]}"); then
    printf '%s\n' "$out" | sed 's/^/  /'
    rate=$(printf '%s\n' "$out" | grep -o '[0-9]* messages/s' | head -1)
    p50=$(printf '%s\n' "$out" | grep -o 'p50 [0-9.]* us' | head -1)
    record "echo throughput" ok "$rate, $p50"
else
    record "echo throughput" FAILED "-"
fi
stop_server "$tmp/echo.log" && record "echo server stop (SIGTERM)" ok "graceful" ||
    record "echo server stop (SIGTERM)" FAILED "-"

# ---------------------------------------------------------------------------------------
bold "2. RPC: length-prefixed frames (Netty-compatible), sleep offloaded to a carrier"
start_server eddy-rpc-server "$tmp/rpc.log" --threads 2
if out=$("$ex/eddy-rpc-client" --port "$port" --method mix --calls 600 --connections 2 2>&1); then
    printf '%s\n' "$out" | sed 's/^/  /'
    record "rpc echo/add/sleep mix" ok "600 calls, every reply checked"
else
    printf '%s\n' "$out" | sed 's/^/  /'
    record "rpc echo/add/sleep mix" FAILED "-"
fi
note "throughput: \"echo\" calls, 64 in flight on each of 2 connections:"
if out=$("$ex/eddy-rpc-client" --port "$port" --method echo --calls 40000 --connections 2 2>&1)
then
    printf '%s\n' "$out" | sed 's/^/  /'
    rate=$(printf '%s\n' "$out" | grep -o '[0-9]* calls/s' | head -1)
    record "rpc echo throughput" ok "${rate:-done}"
else
    printf '%s\n' "$out" | sed 's/^/  /'
    record "rpc echo throughput" FAILED "-"
fi
if out=$("$ex/eddy-rpc-client" --port "$port" --bad 2>&1); then
    note "hostile input (malformed payloads, an oversize frame): answered or closed, still serving"
    record "rpc bad input" ok "status 2 / close, server alive"
else
    printf '%s\n' "$out" | sed 's/^/  /'
    record "rpc bad input" FAILED "-"
fi
stop_server "$tmp/rpc.log" && record "rpc server stop (SIGTERM)" ok "graceful" ||
    record "rpc server stop (SIGTERM)" FAILED "-"

# ---------------------------------------------------------------------------------------
if [[ -x $ex/eddy-timers ]]; then
    bold "3. timers: one-shot, fixed rate, fixed delay, cancelled"
    if out=$("$ex/eddy-timers" --seconds 0.5 2>&1); then
        printf '%s\n' "$out" | tail -6 | sed 's/^/  /'
        record "timers" ok "cancelled timer never fired"
    else
        printf '%s\n' "$out" | sed 's/^/  /'
        record "timers" FAILED "-"
    fi
fi
if [[ -x $ex/eddy-tasks ]]; then
    bold "4. tasks: threads handing work to a loop group, then a graceful shutdown"
    if out=$("$ex/eddy-tasks" 2>&1); then
        printf '%s\n' "$out" | tail -6 | sed 's/^/  /'
        rate=$(printf '%s\n' "$out" | grep -o '[0-9.]* [M]*tasks/s' | head -1)
        record "tasks" ok "${rate:-every accepted task ran once}"
    else
        printf '%s\n' "$out" | sed 's/^/  /'
        record "tasks" FAILED "-"
    fi
fi

# ---------------------------------------------------------------------------------------
bold "5. the library tour: buffers, loops, carriers, channels in one process"
if out=$("$ex/eddy-demo" 2>&1); then
    printf '%s\n' "$out" | sed 's/^/  /'
    record "library tour" ok "no buffer left live"
else
    printf '%s\n' "$out" | sed 's/^/  /'
    record "library tour" FAILED "-"
fi

# ---------------------------------------------------------------------------------------
bold "summary"
printf '  %-30s %-8s %s\n' "part" "result" "figure"
printf '  %-30s %-8s %s\n' "----" "------" "------"
for r in "${results[@]}"; do
    IFS='|' read -r part res fig <<<"$r"
    printf '  %-30s %-8s %s\n' "$part" "$res" "$fig"
done
if [[ $failed -eq 0 ]]; then
    printf '\n  all parts passed. Next: README.md (the API in a small example), make test.\n'
fi
exit $failed
