#!/usr/bin/env bash
# bench/resolve: name lookups per second and CPU per lookup through eddy's resolver (its cache;
# c-ares on the loop with 4 and 64 lookups in flight) against getaddrinfo() on a pool of 4
# threads, all asking one eddy-dns-server (--threads 1) on 127.0.0.1, which serves a zone
# of NAMES names made here (n0 ... nNAMES-1 .bench.test, one A record each). The server is
# pinned to one CPU, the benchmark (its loop and the pool) to another; subjects alternate
# within each round (bench_resolve.c says how each is measured).
#
#   bash bench/resolve/run.sh BUILD_DIR [--rounds N] [--seconds S] [--names N] [--cpu N]
#                             [--client-cpu N] [--no-pin]
#
# Defaults: 5 rounds of 1 s per subject, 1000 names, server on CPU 0, benchmark on CPU 1.
# Other --options (bench/run.sh passes its arguments to every benchmark) are ignored.
set -euo pipefail

usage() {
    sed -n '9,10p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
    exit 2
}
[[ $# -ge 1 ]] || usage
build_dir=$1
shift
rounds=5 seconds=1 names=1000 cpu=0 client_cpu=1 pin=1
while [[ $# -gt 0 ]]; do
    case $1 in
    --no-pin) pin=0; shift; continue ;;
    --rounds | --seconds | --names | --cpu | --client-cpu)
        [[ $# -ge 2 ]] || usage
        case $1 in
        --rounds) rounds=$2 ;;
        --seconds) seconds=$2 ;;
        --names) names=$2 ;;
        --cpu) cpu=$2 ;;
        --client-cpu) client_cpu=$2 ;;
        esac
        shift 2
        ;;
    *) echo "bench/resolve: ignoring $1" >&2; shift ;;
    esac
done

server_bin=$build_dir/examples/eddy-dns-server
bench_bin=$build_dir/bench/resolve/bench_resolve
if [[ ! -x $server_bin || ! -x $bench_bin ]]; then
    echo "bench/resolve: $server_bin or $bench_bin not built (needs c-ares): skipped"
    exit 0
fi

tmp=$(mktemp -d)
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

{
    echo '$ORIGIN bench.test.'
    echo '$TTL 300'
    echo '@ IN SOA ns.bench.test. admin.bench.test. 1 3600 600 86400 60'
    for ((i = 0; i < names; i++)); do
        echo "n$i IN A 10.$((i >> 16 & 255)).$((i >> 8 & 255)).$((i & 255))"
    done
} >"$tmp/bench.zone"

server_cmd=("$server_bin" --zone "$tmp/bench.zone" --host 127.0.0.1 --port 0 --threads 1)
bench_cmd=("$bench_bin")
if [[ $pin -eq 1 ]]; then
    server_cmd=(taskset -c "$cpu" "${server_cmd[@]}")
    bench_cmd=(taskset -c "$client_cpu" "${bench_cmd[@]}")
fi
"${server_cmd[@]}" >"$tmp/server.out" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.* on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/server.out")
    [[ -n $port ]] && break
    sleep 0.1
done
if [[ -z $port ]]; then
    echo "bench/resolve: eddy-dns-server did not start:" >&2
    cat "$tmp/server.out" >&2
    exit 1
fi
echo "bench/resolve: eddy-dns-server on 127.0.0.1:$port (pid $server_pid)"
"${bench_cmd[@]}" --server "127.0.0.1:$port" --names "$names" --rounds "$rounds" \
    --seconds "$seconds"
