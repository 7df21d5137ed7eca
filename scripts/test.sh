#!/usr/bin/env bash
# scripts/test.sh all|check: build the test trees and run their tests (make test, make check).
#   all    the normal tree (every test), the ASan+UBSan tree (every test but the install
#          check) and the TSan tree (the tests labelled concurrency or serverfuzz; only the
#          programs they run, and the examples, are built there). Each tree's tests start as
#          soon as it is built, while the next tree builds: tests mostly wait on sockets,
#          timers and child processes, builds compute.
#   check  the normal tree alone, without the build-type matrix and the install check: the
#          inner loop, a minute or two once built.
# JOBS: build jobs (default: the processors nproc counts). SLOTS: ctest's parallel slots
# (default three per build job; a test that keeps a core busy asks for three: EDDY_TEST_CORE
# in tests/CMakeLists.txt). The trees' flags come from the Makefile (NORMAL_FLAGS, ASAN_FLAGS,
# TSAN_FLAGS, ASAN_ENV, TSAN_ENV). Each tree's ctest output is in <tree>/ctest.log; a tree
# whose tests fail has its failures printed. Exits non-zero when a build or a test fails.
set -uo pipefail
mode=${1:-all}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
slots=${SLOTS:-$((jobs * 3))}
start=$(date +%s)
python=$(command -v /usr/bin/python3 || command -v python3) # pyenv's shim costs a second a start

# since: seconds since the start.
since() { echo $(($(date +%s) - start)); }

# build TREE FLAGS...: configure and build TREE; says how long it took.
build() {
    local tree=$1
    shift
    cmake -S . -B "$tree" "$@" >/dev/null || return 1
    cmake --build "$tree" -j "$jobs" || return 1
    echo "== $tree built ($(since) s)"
}

# build_for_tests TREE EXTRA CTEST_ARGS... -- FLAGS...: configure TREE and build only the
# targets whose programs the tests ctest selects with CTEST_ARGS run (those their commands and
# their REQUIRED_FILES name, with what those link), and the targets EXTRA names (one word,
# comma-separated). Builds everything when ctest can't say.
build_for_tests() {
    local tree=$1 extra=${2//,/ } args=() targets
    shift 2
    while [ "$1" != "--" ]; do
        args+=("$1")
        shift
    done
    shift
    cmake -S . -B "$tree" "$@" >/dev/null || return 1
    targets=$(targets_of "$tree" "${args[@]}")
    if [ -z "$targets" ]; then
        build "$tree" "$@"
        return
    fi
    # shellcheck disable=SC2086 # one word per target
    cmake --build "$tree" -j "$jobs" --target $targets $extra || return 1
    echo "== $tree built for its tests: $(wc -w <<<"$targets") targets ($(since) s)"
}

# targets_of TREE CTEST_ARGS...: the build targets named by the selected tests' commands (as
# the tree's CTestTestfile.cmake files hold them: ctest leaves out a program not yet built)
# and REQUIRED_FILES: a path in the tree whose file name is a target's. One line; empty when
# the generator lists no targets.
targets_of() {
    local tree=$1
    shift
    local known
    known=$(cmake --build "$tree" --target help 2>/dev/null | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')
    [ -n "$known" ] || return 0
    (cd "$tree" && ctest --show-only=json-v1 "$@" 2>/dev/null) |
        "$python" -c '
import json, os, re, sys
tree, known = os.path.realpath(sys.argv[1]), set(sys.argv[2].split())
commands = {}
for top, _, files in os.walk(tree):
    if "CTestTestfile.cmake" in files:
        for line in open(os.path.join(top, "CTestTestfile.cmake")):
            m = re.match(r"add_test\(\[=\[(.*?)\]=\] (.*)\)$", line)
            if m:
                commands[m.group(1)] = re.findall(r"\"([^\"]*)\"", m.group(2))
found = set()
for test in json.load(sys.stdin).get("tests", []):
    paths = commands.get(test["name"], [])
    for prop in test.get("properties", []):
        if prop["name"] == "REQUIRED_FILES":
            paths += prop["value"]
    for p in paths:
        if p.startswith(tree + "/") and os.path.basename(p) in known:
            found.add(os.path.basename(p))
print(" ".join(sorted(found)))' "$tree" "$known"
}

# run_tests TREE ENV CTEST_ARGS...: the tree's tests, output to TREE/ctest.log, in the
# background; its pid goes to pids, its tree to trees.
pids=()
trees=()
run_tests() {
    local tree=$1 env=$2
    shift 2
    echo "== $tree: tests started ($(since) s)"
    (cd "$tree" && env $env ctest --output-on-failure -j "$slots" "$@" >ctest.log 2>&1) &
    pids+=($!)
    trees+=("$tree")
}

# finish: wait for every tree's tests, say how each ended, print the failures.
finish() {
    local rc=0 i
    for i in "${!pids[@]}"; do
        if wait "${pids[$i]}"; then
            echo "== ${trees[$i]}: $(grep -E 'tests passed' "${trees[$i]}/ctest.log")"
        else
            rc=1
            echo "== ${trees[$i]}: FAILED; its ctest output:"
            sed -n '/The following tests FAILED/,$p' "${trees[$i]}/ctest.log"
            grep -B2 -A40 -E '\*\*\*(Failed|Timeout|Exception)|Failed  ' "${trees[$i]}/ctest.log" |
                head -400
        fi
    done
    echo "== done in $(since) s"
    return $rc
}

read -r -a normal_flags <<<"${NORMAL_FLAGS:--DCMAKE_BUILD_TYPE=Debug -DEDDY_WERROR=ON}"
case $mode in
    check)
        build build/debug "${normal_flags[@]}" || exit 1
        run_tests build/debug "" -LE 'buildtypes|install'
        finish
        ;;
    all)
        read -r -a asan_flags <<<"${ASAN_FLAGS:?from the Makefile}"
        read -r -a tsan_flags <<<"${TSAN_FLAGS:?from the Makefile}"
        build build/debug "${normal_flags[@]}" || exit 1
        run_tests build/debug ""
        build "${ASAN_TREE:-build/asan}" "${asan_flags[@]}" || { finish; exit 1; }
        run_tests "${ASAN_TREE:-build/asan}" "${ASAN_ENV:-}" -LE install
        build_for_tests "${TSAN_TREE:-build/tsan}" eddy-examples -L 'concurrency|serverfuzz' -- \
            "${tsan_flags[@]}" || { finish; exit 1; }
        run_tests "${TSAN_TREE:-build/tsan}" "${TSAN_ENV:-}" -L 'concurrency|serverfuzz'
        finish
        ;;
    *)
        echo "scripts/test.sh: all or check, not '$mode'"
        exit 2
        ;;
esac
