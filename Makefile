# The front door. CMake is the build; these targets install what is missing, then build and run.
#   make run    the demo          make test   every test: normal, ASan+UBSan, TSan builds
#   make check  the inner loop: the normal build's tests but the build matrix and install check
#   make bench  the benchmarks    make fuzz   fuzz the decoders    make clean  remove build/
#   make install [PREFIX=/usr/local] [DESTDIR=]   the library, its headers and package files
#   make soak   fuzz the example servers whole (SECONDS=300,
#               SERVERS=echo,tls,echo_cap,tls_cap,rpc,http,resp,dns,ws,ws_chat,http2,grpc,
#               grpc_offload,
#               SANITIZER=address or thread)
#   make soak-client   fuzz eddy-http-client whole (SECONDS=300, SANITIZER=address or thread)
# Every target builds, and runs ctest, with JOBS parallel jobs: the processors nproc counts by
# default (2 without nproc); `make test JOBS=2` bounds it on a small or shared machine.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Our own builds treat warnings as errors; a user's plain cmake build does not (EDDY_WERROR).
DEV_FLAGS := -DEDDY_WERROR=ON

.PHONY: all deps build run test check test-normal test-asan test-tsan bench fuzz install soak clean
.PHONY: soak-tree soak-client

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo $(DEV_FLAGS) $(CMAKE_FLAGS) \
		>/dev/null
	@cmake --build build/release -j $(JOBS)

run: build
	@bash scripts/demo.sh build/release

# The sanitizer trees, configured alike wherever they are built (test-*, soak).
ASAN_TREE := build/asan
ASAN_FLAGS := -DCMAKE_BUILD_TYPE=Debug -DEDDY_SANITIZE=address,undefined -DEDDY_BUILD_BENCH=OFF
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
TSAN_TREE := build/tsan
TSAN_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEDDY_SANITIZE=thread -DEDDY_BUILD_BENCH=OFF
TSAN_ENV := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# The normal build runs every test; the ASan+UBSan build every test but the install check;
# the TSan build the tests labelled concurrency, and the server fuzzer's (serverfuzz).
# scripts/test.sh runs a tree's tests while the next one builds, SLOTS tests at a time
# (default 3 per job: most tests wait more than they compute); test-normal, test-asan and
# test-tsan run one tree alone. `make check` is the inner loop: the normal tree without the
# build-type matrix and the install check.
NORMAL_FLAGS := -DCMAKE_BUILD_TYPE=Debug
SLOTS ?= $(shell echo $$(( $(JOBS) * 3 )))
TEST_ENV = JOBS=$(JOBS) SLOTS=$(SLOTS) NORMAL_FLAGS="$(NORMAL_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS)" \
	ASAN_TREE=$(ASAN_TREE) ASAN_FLAGS="$(ASAN_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS)" \
	ASAN_ENV="$(ASAN_ENV)" TSAN_TREE=$(TSAN_TREE) \
	TSAN_FLAGS="$(TSAN_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS)" TSAN_ENV="$(TSAN_ENV)"
test: deps
	@$(TEST_ENV) bash scripts/test.sh all

check: deps
	@$(TEST_ENV) bash scripts/test.sh check

test-normal:
	@cmake -S . -B build/debug $(NORMAL_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build/debug -j $(JOBS)
	cd build/debug && ctest --output-on-failure -j $(SLOTS)

test-asan:
	@cmake -S . -B $(ASAN_TREE) $(ASAN_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_TREE) -j $(JOBS)
	cd $(ASAN_TREE) && $(ASAN_ENV) ctest --output-on-failure -j $(SLOTS) -LE install

test-tsan:
	@cmake -S . -B $(TSAN_TREE) $(TSAN_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_TREE) -j $(JOBS)
	cd $(TSAN_TREE) && $(TSAN_ENV) ctest --output-on-failure -j $(SLOTS) -L 'concurrency|serverfuzz'

# Benchmarks print a table and JSON lines ({"bench":...}); the JSON goes to bench/results.json.
# The baselines' packages go in before the build is configured, so it finds them (libevent).
bench:
	@bash scripts/deps.sh --bench
	@$(MAKE) --no-print-directory build
	@bash bench/run.sh build/release

# libFuzzer on the HTTP and RESP decoders and the DNS answerer (clang, ASan, UBSan),
# FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/deps.sh --fuzz
	@cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
		-DEDDY_BUILD_FUZZ=ON -DEDDY_BUILD_EXAMPLES=OFF -DEDDY_BUILD_BENCH=OFF -DEDDY_WERROR=OFF \
		-DCMAKE_C_FLAGS="-O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
		-fno-sanitize-recover=undefined" >/dev/null
	@cmake --build build/fuzz -j $(JOBS) --target fuzz_http fuzz_http_response fuzz_resp \
		fuzz_store fuzz_frame fuzz_dns fuzz_ws fuzz_http2 fuzz_http_coding
	@bash fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

# A Release build of the library alone (no tests, benchmarks or examples, so none of their
# packages are needed: deps is not run), installed under PREFIX, staged under DESTDIR if given.
# Warnings stay warnings here, as in any user's build.
PREFIX ?= /usr/local
install:
	@cmake -S . -B build/install -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$(PREFIX)" \
		-DEDDY_BUILD_TESTS=OFF -DEDDY_BUILD_BENCH=OFF -DEDDY_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) \
		>/dev/null
	@cmake --build build/install -j $(JOBS)
	@DESTDIR="$(DESTDIR)" cmake --install build/install

# The example servers fuzzed whole (tests/examples/serverfuzz.py, fuzz/README.md) in the
# ASan+UBSan build, or with SANITIZER=thread in the TSan build: fresh seeds for SECONDS in all,
# the SERVERS in turn. Each seed is printed, each failure with its trace file (in the tree's
# soak/); exits non-zero after a failure. grpc and grpc_offload need eddy-grpc-server, built
# when protoc-c and grpc-proto are there (scripts/deps.sh): without it they are left out. The
# fuzzer's Python is the system's when there is one (python3-h2 is a Debian package, which a
# python3 of pyenv's or a venv first on PATH does not see; http2 and the grpc ones need it).
SECONDS ?= 300
SERVERS ?= echo,tls,echo_cap,tls_cap,rpc,http,resp,dns,ws,ws_chat,http2,grpc,grpc_offload
PYTHON3 ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
SANITIZER ?= address
SOAK_TREE = $(if $(filter thread,$(SANITIZER)),$(TSAN_TREE),$(ASAN_TREE))
SOAK_FLAGS = $(if $(filter thread,$(SANITIZER)),$(TSAN_FLAGS),$(ASAN_FLAGS))
SOAK_ENV = $(if $(filter thread,$(SANITIZER)),$(TSAN_ENV),$(ASAN_ENV))
soak-tree: deps
	@case "$(SANITIZER)" in address|thread) ;; \
		*) echo "make soak: SANITIZER is address or thread, not '$(SANITIZER)'"; exit 2;; esac
	@cmake -S . -B $(SOAK_TREE) $(SOAK_FLAGS) $(DEV_FLAGS) $(CMAKE_FLAGS) >/dev/null

soak: soak-tree
	@cmake --build $(SOAK_TREE) -j $(JOBS) --target eddy-echo-server eddy-rpc-server \
		eddy-http-server eddy-resp-server eddy-dns-server eddy-ws-server
	@case ",$(SERVERS)," in *,grpc,*|*,grpc_offload,*) cmake --build $(SOAK_TREE) -j $(JOBS) \
		--target eddy-grpc-server || echo "make soak: no eddy-grpc-server (it needs protoc-c \
		and grpc-proto: scripts/deps.sh); grpc and grpc_offload are left out";; esac
	@bash tests/pipeline/tls_certs.sh $(SOAK_TREE)/soak-certs
	$(SOAK_ENV) $(PYTHON3) tests/examples/serverfuzz.py $(SOAK_TREE)/examples $(SOAK_TREE)/soak-certs \
		--soak $(SECONDS) --servers $(SERVERS) --out $(SOAK_TREE)/soak

# eddy-http-client fuzzed whole (tests/examples/clientfuzz.py): a seeded random server drives
# it, fresh seeds for SECONDS, in the tree SANITIZER picks, as soak does. Failures' traces go
# to the tree's clientfuzz-soak/.
soak-client: soak-tree
	@cmake --build $(SOAK_TREE) -j $(JOBS) --target eddy-http-client
	$(SOAK_ENV) python3 tests/examples/clientfuzz.py $(SOAK_TREE)/examples/eddy-http-client \
		--soak $(SECONDS) --out $(SOAK_TREE)/clientfuzz-soak

clean:
	rm -rf build
