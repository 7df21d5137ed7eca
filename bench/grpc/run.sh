#!/usr/bin/env bash
# bench/grpc: gRPC servers side by side under one load client, for eddy's gRPC server (#31).
# A stub for now: eddy's server does not exist yet, so there is no comparison. It checks that
# the baseline is built and works: cpp_server (gRPC C++ 1.51, callback API) under cpp_load
# (closed loop, callback API) for one second of unary calls, every call checked OK. The
# side-by-side run (eddy's server and cpp_server in turn, pinned, with /proc CPU costs and
# {"bench":"grpc",...} lines) is to be written once eddy's server exists.
#
#   bash bench/grpc/run.sh BUILD_DIR [ARGS...]    (bench/run.sh's ARGS are ignored)
#
# By hand: BUILD_DIR/bench/grpc/cpp_server --port 0 prints "PORT <n>"; then
#   BUILD_DIR/bench/grpc/cpp_load --server_port N --mode unary|server_streaming|ping_pong
#       --size 1024 --connections 16 --streams 100 --duration 10 --warmup 2 --server_pid PID
# prints one line of JSON (cpp_load.cc says what each field means).
set -uo pipefail

[[ $# -ge 1 ]] || { echo "usage: bash bench/grpc/run.sh BUILD_DIR" >&2; exit 2; }
dir=$1/bench/grpc
if [[ ! -x $dir/cpp_server || ! -x $dir/cpp_load ]]; then
    echo "bench/grpc: skipped: cpp_server and cpp_load are not built in $1 (they need g++," \
        "libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc, grpc-proto:" \
        "tests/grpc/cpp/build.cmake)"
    exit 0
fi

out=$(mktemp)
server=
cleanup() {
    [[ -n $server ]] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -f "$out"
}
trap cleanup EXIT
"$dir/cpp_server" --port 0 >"$out" & # its own pid: --server_pid reads its CPU time
server=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$out")
    [[ -n $port ]] && break
    sleep 0.05
done
[[ -n $port ]] || { echo "bench/grpc: cpp_server printed no PORT line"; exit 1; }
echo "bench/grpc: baseline check (eddy's gRPC server: not yet), gRPC C++ under cpp_load:"
timeout -k 5 60 "$dir/cpp_load" --server_port "$port" --mode unary --connections 4 \
    --streams 8 --duration 1 --warmup 0.2 --server_pid "$server" || exit 1
