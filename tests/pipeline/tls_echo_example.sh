#!/usr/bin/env bash
# The echo example over TLS: eddy-echo-server --tls on an ephemeral port, eddy-echo-client
# --tls against it (verified, a wrong name refused, --insecure), then a server that requires
# client certificates refusing a client without one.
#   tests/pipeline/tls_echo_example.sh SERVER CLIENT CERT_DIR
set -euo pipefail
server=$1
client=$2
certs=$3
log=$(mktemp)
pid=
trap '[[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null; rm -f "$log"' EXIT
start() { # server arguments...
    "$server" --port 0 --threads 1 "$@" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$log" && break
        sleep 0.05
    done
    port=$(grep -o "127.0.0.1:[0-9]*" "$log" | head -1 | cut -d: -f2)
    [[ -n "$port" ]] || { echo "no port in: $(cat "$log")"; exit 1; }
}
stop() {
    kill -TERM "$pid"
    wait "$pid"
    pid=
}
start --tls "$certs/server.pem" "$certs/server.key"
grep -q "with TLS" "$log"
"$client" --port "$port" --tls --tls-ca "$certs/ca.pem" --count 200 --size 64
"$client" --port "$port" --tls --tls-ca "$certs/ca.pem" --count 5 --size 100000 --connections 2
"$client" --host localhost --port "$port" --tls --tls-ca "$certs/ca.pem" --count 10
if "$client" --port "$port" --tls --tls-ca "$certs/ca.pem" --servername wrong.example \
    --count 1 2>"$log.err"; then
    echo "a wrong server name was accepted"
    exit 1
fi
grep -q "hostname mismatch" "$log.err"
"$client" --port "$port" --tls --insecure --count 10
stop
start --tls "$certs/server.pem" "$certs/server.key" --tls-ca "$certs/ca.pem"
if "$client" --port "$port" --tls --tls-ca "$certs/ca.pem" --count 3 2>"$log.err"; then
    echo "a client without a certificate was served"
    exit 1
fi
stop
rm -f "$log.err"
"$server" --help | grep -q -- "--tls CERT KEY"
"$client" --help | grep -q -- "--servername"
echo "echo over TLS: ok"
