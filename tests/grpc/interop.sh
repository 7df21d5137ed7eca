#!/usr/bin/env bash
# tests/grpc/interop.sh: real gRPC implementations as interop peers for eddy's gRPC (#31), and
# the test that runs a client against a server. The cases are gRPC's own
# (doc/interop-test-descriptions.md): the 14 in CASES below.
#
#   interop.sh server KIND --port P [--use_tls --cert FILE --key FILE]
#       Runs peer server KIND in the foreground (exec). With --port 0 it listens on an
#       ephemeral port of 127.0.0.1 and prints one line "PORT <n>" once listening.
#       SIGTERM stops it with status 0.
#   interop.sh client KIND --server_port P [--server_host H] [--test_case all|NAME,...]
#                          [--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]
#       Runs peer client KIND: a line "PASS <case>" or "FAIL <case>: <reason>" per case;
#       status 0 only when every case passed.
#   interop.sh pair SERVER CLIENT [--cases LIST] [--plaintext-only | --tls-only]
#       The test: starts SERVER with --port 0, waits for its PORT line, runs CLIENT with every
#       case (or LIST: names and "all", comma-separated; the peers also know health_check,
#       grpc.health.v1.Health/Check, which is not one of gRPC's cases), then SIGTERMs the
#       server, which must exit 0; in plaintext, then over TLS with a self-signed certificate
#       for foo.test.google.fr made with openssl (--use_tls --cert --key for the server;
#       --use_tls --use_test_ca --ca --server_host_override foo.test.google.fr for the
#       client). Every case must print PASS. Each process is under a timeout; temporary files
#       and processes are gone at the end, whatever happened.
#
# KIND is one of
#   python      tests/grpc/python/interop_{server,client}.py on Debian's python3-grpcio
#   node        tests/grpc/node/{server,client}.js on @grpc/grpc-js (installed once with npm ci
#               from tests/grpc/node/package-lock.json into $GRPC_WORK/node)
#   cpp         tests/grpc/cpp's interop_{server,client} (gRPC C++), from $GRPC_CPP_BIN
#   cmd:PROGRAM a program of yours taking the same flags: the server kind runs
#               "PROGRAM --port 0 ...", the client kind "PROGRAM --server_host ... --test_case
#               ..." (PROGRAM may carry arguments of its own: "cmd:/path/to/prog --flag", split
#               on blanks).
# eddy's gRPC server and client plug in as cmd: kinds, for example in tests/CMakeLists.txt:
#   add_test(NAME grpc.interop[python->eddy] COMMAND bash .../tests/grpc/interop.sh
#            pair cmd:$<TARGET_FILE:eddy-grpc-server> python)
#   add_test(NAME grpc.interop[eddy->cpp] COMMAND bash .../tests/grpc/interop.sh
#            pair cpp cmd:$<TARGET_FILE:eddy-grpc-client>)
# with ENVIRONMENT GRPC_WORK=<tree>/tests/grpc;GRPC_CPP_BIN=<tree>/tests/grpc and
# SKIP_RETURN_CODE 77, as tests/grpc/tests.cmake does. A cmd: server must print "PORT <n>" and
# exit 0 on SIGTERM (under a sanitizer, a report makes its status non-zero: the test fails).
#
# Environment: GRPC_WORK, the folder for node_modules (default: build/grpc-peers in this
# checkout); GRPC_CPP_BIN, the folder holding the C++ peers (default: the first of
# build/debug/tests/grpc and build/release/tests/grpc that has them); GRPC_PAIR_TIMEOUT,
# seconds a client may take (default 60). Exits 0 when all passed, 1 on a failure, 2 on a
# usage error, 77 (skipped) when a peer's runtime is missing (python3-grpcio, protoc, node and
# npm, the C++ peers: not built in a sanitizer tree, or without gRPC C++).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=/usr/bin/python3 # Debian's: a version manager's python3 lacks grpcio
CASES=empty_unary,large_unary,client_streaming,server_streaming,ping_pong,empty_stream
CASES+=,cancel_after_begin,cancel_after_first_response,timeout_on_sleeping_server
CASES+=,status_code_and_message,special_status_message,custom_metadata
CASES+=,unimplemented_method,unimplemented_service
HOST_OVERRIDE=foo.test.google.fr
work=${GRPC_WORK:-$root/build/grpc-peers}

usage() {
    sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

skip() {
    echo "SKIP: $*"
    exit 77
}

# The node packages of tests/grpc/node (its package-lock.json: the versions) in $work/node,
# installed once: later runs find them there; npm ci takes them from npm's cache when it has
# them. A lock serializes the tests that install at once (as tests/examples/ws_lib.sh does).
node_modules() {
    local src=$here/node dir=$work/node
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        skip "node and npm are not installed (scripts/deps.sh installs them)"
    fi
    mkdir -p "$dir" || exit 1
    (
        flock 9
        if ! cmp -s "$src/package-lock.json" "$dir/package-lock.json" ||
            [[ ! -f $dir/node_modules/@grpc/grpc-js/package.json ]] ||
            [[ ! -f $dir/node_modules/@grpc/proto-loader/package.json ]]; then
            rm -f "$dir/package-lock.json"
            cp "$src/package.json" "$src/package-lock.json" "$dir/" &&
                (cd "$dir" && timeout 120 npm ci --prefer-offline --no-audit --no-fund \
                    --loglevel=error >&2) || exit 1
        fi
    ) 9>"$dir.lock" || {
        echo "FAIL: npm ci in $dir did not install tests/grpc/node's packages"
        exit 1
    }
    export NODE_PATH=$dir/node_modules
}

# The folder holding the C++ peers, or a skip.
cpp_bin() {
    local d dirs=("$root/build/debug/tests/grpc" "$root/build/release/tests/grpc")
    [[ -n ${GRPC_CPP_BIN:-} ]] && dirs=("$GRPC_CPP_BIN")
    for d in "${dirs[@]}"; do
        if [[ -x $d/interop_server && -x $d/interop_client ]]; then
            echo "$d"
            return
        fi
    done
    [[ -n ${GRPC_CPP_BIN:-} ]] && skip "no C++ peers in $GRPC_CPP_BIN (not built in a" \
        "sanitizer tree, nor without g++, libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc)"
    skip "no C++ peers built (build/debug or build/release; set GRPC_CPP_BIN)"
}

python_ok() {
    if ! "$python" -c 'import grpc, google.protobuf' 2>/dev/null; then
        skip "Debian's python3-grpcio and python3-protobuf are not installed"
    fi
    command -v protoc >/dev/null || skip "protoc is not installed (protobuf-compiler)"
    [[ -f ${GRPC_PROTO_DIR:-/usr/share/grpc-proto}/grpc/testing/test.proto ]] ||
        skip "grpc-proto's files are not installed (grpc-proto)"
}

# run ROLE KIND ARGS...: exec peer KIND's server or client with ARGS.
run() {
    local role=$1 kind=$2
    shift 2
    case $kind in
        python)
            python_ok
            exec "$python" "$here/python/interop_$role.py" "$@"
            ;;
        node)
            node_modules
            exec node "$here/node/$role.js" "$@"
            ;;
        cpp)
            local bin
            bin=$(cpp_bin) || { echo "$bin"; exit 77; }
            exec "$bin/interop_$role" "$@"
            ;;
        cmd:*)
            local -a cmd
            read -r -a cmd <<<"${kind#cmd:}"
            [[ ${#cmd[@]} -gt 0 && -x ${cmd[0]} ]] || skip "${cmd[0]:-cmd:}: no such program"
            exec "${cmd[@]}" "$@"
            ;;
        *)
            echo "interop.sh: unknown kind '$kind' (python, node, cpp or cmd:PROGRAM)" >&2
            exit 2
            ;;
    esac
}

# pair SERVER CLIENT [--cases LIST] [--plaintext-only | --tls-only]
tmp=
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill -KILL "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    [[ -n $tmp ]] && rm -rf "$tmp"
}

# Stops the server: SIGTERM, then up to 10 s for it to exit; it must exit 0.
stop_server() {
    local rc
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 200); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "FAIL: the server did not exit within 10 s of SIGTERM"
        return 1
    fi
    wait "$server_pid"
    rc=$?
    server_pid=
    if [[ $rc -ne 0 ]]; then
        echo "FAIL: the server exited with status $rc after SIGTERM; its stderr:"
        sed 's/^/  server: /' "$tmp/server.err"
        return 1
    fi
}

# One run of CLIENT against SERVER (plain or tls); says how it went; status 0 when all passed.
pair_run() {
    local server=$1 client=$2 cases=$3 mode=$4 port rc status=0 want got
    local -a sargs=(--port 0) cargs=(--server_host 127.0.0.1 --test_case "$cases")
    if [[ $mode == tls ]]; then
        sargs+=(--use_tls --cert "$tmp/cert.pem" --key "$tmp/key.pem")
        cargs+=(--use_tls --use_test_ca --ca "$tmp/cert.pem"
            --server_host_override "$HOST_OVERRIDE")
    fi
    # The server under a timeout of its own too: nothing outlives the test.
    timeout -k 5 $((client_timeout + 60)) bash "${BASH_SOURCE[0]}" server "$server" "${sargs[@]}" \
        >"$tmp/server.out" 2>"$tmp/server.err" &
    server_pid=$!
    port=
    for _ in $(seq 600); do # 30 s: npm ci may run first
        port=$(sed -n 's/^PORT \([0-9][0-9]*\)$/\1/p' "$tmp/server.out" | head -1)
        [[ -n $port ]] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [[ -z $port ]]; then
        wait "$server_pid" 2>/dev/null
        rc=$?
        server_pid=
        [[ $rc -eq 77 ]] && { cat "$tmp/server.out"; exit 77; }
        echo "FAIL ($mode): server $server printed no PORT line (status $rc); its output:"
        sed 's/^/  server: /' "$tmp/server.out" "$tmp/server.err"
        return 1
    fi
    timeout -k 5 "$client_timeout" bash "${BASH_SOURCE[0]}" client "$client" "${cargs[@]}" \
        --server_port "$port" >"$tmp/client.out" 2>"$tmp/client.err"
    rc=$?
    if [[ $rc -eq 77 ]]; then
        stop_server >/dev/null
        cat "$tmp/client.out"
        exit 77
    fi
    sed "s/^/  [$mode] /" "$tmp/client.out"
    want=$(tr ',' '\n' <<<"$cases" | grep -c .)
    got=$(grep -cE '^PASS [a-z_]+$' "$tmp/client.out")
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "FAIL ($mode): client $client did not finish within ${client_timeout} s"
        status=1
    elif [[ $rc -ne 0 || $got -ne $want ]]; then
        echo "FAIL ($mode): client $client: status $rc, $got of $want cases passed"
        status=1
    fi
    if [[ $status -ne 0 ]]; then
        sed 's/^/  client stderr: /' "$tmp/client.err" | tail -20
        sed 's/^/  server stderr: /' "$tmp/server.err" | tail -20
    fi
    stop_server || status=1
    [[ $status -eq 0 ]] &&
        echo "ok ($mode): client $client against server $server: $got cases passed"
    return $status
}

pair() {
    [[ $# -ge 2 ]] || usage
    local server=$1 client=$2 cases=$CASES modes="plain tls" status=0
    shift 2
    while [[ $# -gt 0 ]]; do
        case $1 in
            --cases) cases=$2; shift 2 ;;
            --plaintext-only) modes=plain; shift ;;
            --tls-only) modes=tls; shift ;;
            *) usage ;;
        esac
    done
    cases=$(tr ',' '\n' <<<"$cases" | sed "s/^all\$/${CASES//,/\\n}/" | grep . | paste -sd, -)
    client_timeout=${GRPC_PAIR_TIMEOUT:-60}
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/eddy-grpc-pair.XXXXXX") || exit 1
    trap cleanup EXIT
    trap 'exit 1' INT TERM
    if [[ $modes == *tls* ]]; then
        command -v openssl >/dev/null || skip "openssl is not installed"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj "/CN=$HOST_OVERRIDE" -addext "subjectAltName=DNS:$HOST_OVERRIDE" \
            -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>"$tmp/openssl.err" ||
            { echo "FAIL: openssl req: $(cat "$tmp/openssl.err")"; exit 1; }
    fi
    echo "grpc interop: client $client -> server $server ($modes)"
    for mode in $modes; do
        pair_run "$server" "$client" "$cases" "$mode" || status=1
    done
    return $status
}

[[ $# -ge 1 ]] || usage
verb=$1
shift
case $verb in
    server | client)
        [[ $# -ge 1 ]] || usage
        run "$verb" "$@"
        ;;
    pair)
        pair "$@"
        exit $?
        ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
