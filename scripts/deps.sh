#!/usr/bin/env bash
# Installs the Debian packages eddy builds, tests and benchmarks with, when they are absent.
# Does nothing (and needs no network) when everything is present. Later issues add packages
# to the lists; keep them sorted.
#   scripts/deps.sh          what `make run` and `make test` need
#   scripts/deps.sh --bench  that, plus the baselines `make bench` runs against
#   scripts/deps.sh --fuzz   that, plus clang's libFuzzer runtime for `make fuzz`
set -euo pipefail

PACKAGES=(
    bind9-dnsutils      # dig: the DNS server's tests ask it
    brotli              # the content coding tests decode br with the brotli tool
    chromium            # examples.ws_browser and http2_browser: the servers in a real browser
    clang               # buildtypes.gcc_clang builds every build type with clang too
    cmake               # 3.20 or later
    curl                # the HTTP server's tests drive it with curl
    g++                 # the gRPC C++ interop peers and bench/grpc's baseline (tests/grpc/cpp)
    gcc                 # with its ASan, UBSan and TSan runtimes (libgcc-12-dev)
    grpc-proto          # gRPC's interop protos (grpc/testing/*.proto): eddy-grpc-server
    knot-dnsutils       # kdig: the DNS server's tests ask it too, in JSON
    libbrotli-dev       # the br HTTP content coding (codec/http/coding_brotli.c)
    libc-ares-dev       # name resolution on the loop (bootstrap/resolver.c)
    libck-dev           # bench/ring's ck_ring baseline (the benchmarks build in make test)
    libcmocka-dev       # the tests
    libdeflate-dev      # gzip and deflate of whole HTTP bodies, faster than zlib (optional)
    libgrpc++-dev       # gRPC C++ 1.51: an interop peer (tests/grpc/cpp), bench/grpc's baseline
    libjemalloc-dev     # bench/buffer's jemalloc baseline
    libnghttp2-dev      # HTTP/2 (codec/http2/), on nghttp2 1.52 or later
    libprotobuf-c-dev   # protobuf-c: eddy-grpc-server's messages (examples/grpc_server.c)
    libprotobuf-dev     # gRPC C++'s messages (libgrpc++-dev does not pull it in)
    libssl-dev          # OpenSSL 3: TLS, and SHA-1 for the WebSocket handshake
    liburing-dev        # the io_uring poller (built when found)
    libuv1-dev          # the libuv baselines of bench/reactor and bench/echo (built in make test)
    libzstd-dev         # the zstd HTTP content coding (codec/http/coding_zstd.c)
    make                # CMake's generator, and the Makefile's targets
    nghttp2-client      # nghttp and h2load: the HTTP/2 server's tests, and bench/http2's load
    nodejs              # tests/examples/ws.sh: node's ws package is the WebSocket peer
    openssl             # the TLS tests make their certificates with the openssl tool
    pkg-config          # how CMake finds liburing, c-ares and libuv
    protobuf-c-compiler # protoc-c: compiles those messages at build time
    protobuf-compiler   # protoc: the Python interop peers' messages (tests/grpc/)
    protobuf-compiler-grpc # grpc_cpp_plugin: the C++ peers' service code
    python3             # tests/examples/hostile.py, the hostile clients
    python3-brotli      # the content coding tests decode br in Python too
    python3-grpcio      # gRPC's own C-core in Python: an interop peer (tests/grpc/)
    python3-h2          # h2_hostile.py, serverfuzz.py http2: HTTP/2 clients (with
    python3-hpack       # hpack and hyperframe, raw frames and header blocks)
    python3-hyperframe
    python3-protobuf    # ... its messages
    python3-zstandard   # ... and zstd
    redis-tools         # redis-cli and redis-benchmark: the RESP server's tests and benchmark
    valgrind            # examples.echo_valgrind runs eddy-echo-server under memcheck
    wget                # examples.files: wget -r of a tree from eddy-http-server --root
    zlib1g-dev          # WebSocket permessage-deflate, the gzip and deflate content codings
    zstd                # the content coding tests decode zstd with the zstd tool
)

BENCH_PACKAGES=(
    bind9-dnsutils        # dig: bench/dns waits for its servers and makes its queries with it
    default-jdk-headless  # the Java baselines (Disruptor, Netty) compile and run with it
    dnsperf               # bench/dns's load generator
    gnuplot-nox           # bench/echo's chart (bench/echo.png)
    h2o                   # bench/http2's h2o 2.2 baseline
    knot                  # bench/dns's Knot DNS baseline (knotd)
    libdisruptor-java     # bench/ring's Java Disruptor baseline
    libevent-dev          # bench/echo's libevent (bufferevent) echo server
    libnetty-java         # the Netty 4.1 baselines of bench/echo, bench/rpc, bench/tls, bench/ws
    nginx-light           # bench/http's, bench/http2's and bench/files' nginx baseline
    nsd                   # bench/dns's NSD baseline
    redis-server          # bench/resp's redis-server baseline
    wrk                   # bench/http's and bench/files' load generator
)

FUZZ_PACKAGES=(
    libclang-rt-14-dev    # libFuzzer and clang's sanitizer runtimes (clang itself is above)
)

if [ "${1:-}" = "--bench" ]; then
    PACKAGES+=("${BENCH_PACKAGES[@]}")
elif [ "${1:-}" = "--fuzz" ]; then
    PACKAGES+=("${FUZZ_PACKAGES[@]}")
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done

# npm installs the tests' node packages (tests/examples/ws/). Debian's nodejs comes without
# it, in a package of its own; NodeSource's nodejs has it built in (and conflicts with it).
if ! command -v npm >/dev/null 2>&1; then
    missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "deps: done"
