#!/usr/bin/env bash
# eddy-resp-server against clients nobody here wrote: redis-cli (every command, SET options,
# expiry, a --pipe batch), raw inline requests over bash's /dev/tcp, an oversized bulk length
# answered with a protocol error and a close while another connection keeps working, and a
# short redis-benchmark run. The server listens on an ephemeral port with 2 loops; SIGTERM
# must stop it, exit 0 and say so. A second server with --request-timeout 1 cuts off a
# client whose command trickles in or stalls (slow_client.py).
#   tests/examples/resp.sh SERVER
set -euo pipefail
server=$1
for tool in redis-cli redis-benchmark; do
    if ! command -v "$tool" >/dev/null; then
        echo "resp.sh: $tool is missing (scripts/deps.sh installs redis-tools)" >&2
        exit 1
    fi
done
log=$(mktemp)
pid=
slow_pid=
cleanup() {
    for p in $pid $slow_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -f "$log" "$log.batch" "$log.slow"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
"$server" --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
port=$(port_of "$log")
[[ -n "$port" ]] || {
    echo "no port in: $(cat "$log")"
    exit 1
}

cli() {
    timeout 10 redis-cli -h 127.0.0.1 -p "$port" "$@"
}
# expect WANT COMMAND...: redis-cli's output (not a terminal: nil is an empty line, errors
# are printed as their text) must be WANT.
expect() {
    local want=$1 got
    shift
    got=$(cli "$@")
    if [[ "$got" != "$want" ]]; then
        echo "redis-cli $*: got '$got', expected '$want'"
        exit 1
    fi
}

expect PONG PING
expect "hello world" ECHO "hello world"
expect OK SET k v
expect v GET k
expect "" SET k w NX
expect OK SET k w XX
expect w GET k
expect "" SET absent v XX
expect OK SET absent v NX
expect "ERR syntax error" SET k v NX XX
expect "ERR invalid expire time in 'set' command" SET k v EX 0
expect OK SET e v EX 100
expect 100 TTL e
expect OK SET p v PX 100000
pttl=$(cli PTTL p)
((pttl > 99000 && pttl <= 100000)) || {
    echo "PTTL p: $pttl"
    exit 1
}
expect OK SET gone v PX 50
sleep 0.2
expect "" GET gone
expect -2 TTL gone
expect -1 TTL k
expect OK SET n 10
expect 11 INCR n
expect 10 DECR n
expect "ERR value is not an integer or out of range" INCR k
expect 1 EXPIRE n 5
expect 5 TTL n
expect 0 EXPIRE nope 5
expect 2 DEL k n nope
expect 0 EXISTS k n
expect 2 EXISTS e e
expect 3 DBSIZE
info=$(cli INFO)
grep -q "redis_mode:standalone" <<<"$info"
grep -q "db0:keys=3,expires=2" <<<"$info"
grep -q "connected_clients:[1-9]" <<<"$info"
expect "" COMMAND
expect "ERR wrong number of arguments for 'get' command" GET
expect "ERR unknown command 'nosuch', with args beginning with: 'x' " nosuch x
expect OK FLUSHALL
expect 0 DBSIZE

# A pipelined batch: 2000 commands in RESP, sent without waiting (redis-cli --pipe).
for i in $(seq 1000); do
    printf '*3\r\n$3\r\nSET\r\n$%d\r\nkey:%d\r\n$1\r\n%d\r\n' $((${#i} + 4)) "$i" $((i % 10))
    printf '*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n'
done >"$log.batch"
out=$(timeout 20 redis-cli -h 127.0.0.1 -p "$port" --pipe <"$log.batch")
grep -q "errors: 0, replies: 2000" <<<"$out" || {
    echo "redis-cli --pipe: $out"
    exit 1
}
expect 1001 DBSIZE
expect 1000 GET counter
expect 7 GET key:17

# Raw inline requests, quotes included, on a connection of our own.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'PING\r\nSET "a b" "c\\td"\r\nGET "a b"\r\n\r\nEXISTS "a b"\n' >&3
want=("+PONG" "+OK" "\$3" $'c\td' ":1")
for w in "${want[@]}"; do
    IFS= read -r -t 5 line <&3 || {
        echo "inline: no reply (wanted $w)"
        exit 1
    }
    line=${line%$'\r'}
    [[ "$line" == "$w" ]] || {
        echo "inline: got '$line', expected '$w'"
        exit 1
    }
done

# An oversized bulk length: the protocol error, then the server closes that connection,
# while connection 3 and new ones go on.
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf '*2\r\n$3\r\nGET\r\n$999999999999\r\n' >&4
IFS= read -r -t 5 line <&4 || {
    echo "oversized: no reply"
    exit 1
}
[[ "${line%$'\r'}" == "-ERR Protocol error: invalid bulk length" ]] || {
    echo "oversized: got '$line'"
    exit 1
}
rc=0
IFS= read -r -t 5 line <&4 || rc=$?
if ((rc != 1)); then
    echo "oversized: the connection was not closed (read: $rc, '$line')"
    exit 1
fi
exec 4<&-
printf 'PING\r\n' >&3
IFS= read -r -t 5 line <&3
[[ "${line%$'\r'}" == "+PONG" ]] || {
    echo "after the protocol error: got '$line'"
    exit 1
}
exec 3<&-
expect PONG PING

# redis-benchmark: it asks CONFIG GET at start, then pipelines.
out=$(timeout 30 redis-benchmark -h 127.0.0.1 -p "$port" -c 4 -n 2000 -P 16 -t ping,set,get -q 2>&1)
for t in PING_INLINE PING_MBULK SET GET; do
    grep -q "^$t: .* requests per second" <<<"$(tr '\r' '\n' <<<"$out")" || {
        echo "redis-benchmark: no $t row in: $out"
        exit 1
    }
done
grep -qi "error\|warning" <<<"$out" && {
    echo "redis-benchmark complained: $out"
    exit 1
}

"$server" --help | grep -q usage

# --request-timeout: a command trickling in a byte every 0.1 s, and one that stalls halfway,
# are cut off a second after their first bytes; whole commands are served as before.
"$server" --port 0 --threads 1 --request-timeout 1 >"$log.slow" 2>&1 &
slow_pid=$!
slow_port=$(port_of "$log.slow")
[[ -n "$slow_port" ]] || {
    echo "no port in: $(cat "$log.slow")"
    exit 1
}
for mode in trickle stall; do
    python3 "$(dirname "$0")/slow_client.py" "$slow_port" 1 "$mode" resp || {
        cat "$log.slow"
        echo "--request-timeout did not cut off a $mode"
        exit 1
    }
done
[[ $(timeout 10 redis-cli -h 127.0.0.1 -p "$slow_port" PING) == PONG ]] || {
    echo "the request-timeout server does not answer PING"
    exit 1
}
kill -TERM "$slow_pid"
wait "$slow_pid" || {
    cat "$log.slow"
    echo "the request-timeout server did not exit 0"
    exit 1
}
slow_pid=
grep -q "2 errors" "$log.slow" || {
    cat "$log.slow"
    echo "no count of the cut-off clients"
    exit 1
}

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
pid=
grep -q "stopped by SIGTERM" "$log"
cat "$log"
