#!/usr/bin/env bash
# tests/buildtypes/run.sh SOURCE_DIR: configure and build eddy with gcc and with clang in each
# common build type (Debug, Release, RelWithDebInfo, MinSizeRel), with -DEDDY_WERROR=ON, each
# in a temporary directory. Every build must succeed without one warning, from the compiler
# or from CMake. Built: what a user's plain build compiles but the tests (the library, the
# header checks, the examples, the benchmarks); the tests are built by the test trees. A
# compiler that is not installed is skipped (exit 77 when neither is). JOBS sets the build's
# parallelism (default 2).
set -euo pipefail
src=$1
jobs=${JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=()
built=0
for cc in gcc clang; do
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "buildtypes: $cc is not installed: skipped (scripts/deps.sh installs it)"
        continue
    fi
    for type in Debug Release RelWithDebInfo MinSizeRel; do
        dir=$work/$cc-$type
        log=$dir.log
        start=$(date +%s)
        rc=0
        {
            cmake -S "$src" -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" \
                -DEDDY_WERROR=ON -DEDDY_BUILD_TESTS=OFF -DEDDY_BUILD_EXAMPLES=ON \
                -DEDDY_BUILD_BENCH=ON &&
                cmake --build "$dir" -j "$jobs"
        } >"$log" 2>&1 || rc=$?
        secs=$(($(date +%s) - start))
        if [[ $rc -ne 0 ]] || grep -qiE 'warning[: ]' "$log"; then
            echo "buildtypes: $cc $type: FAILED (${secs} s); its warnings and errors:"
            grep -iE -A3 'warning|error' "$log" | head -60
            failed+=("$cc $type")
        else
            echo "buildtypes: $cc $type: ok (${secs} s)"
        fi
        built=$((built + 1))
        rm -rf "$dir" "$log"
    done
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "buildtypes: failed: ${failed[*]}"
    exit 1
fi
if [[ $built -eq 0 ]]; then
    echo "buildtypes: no compiler to build with: skipped"
    exit 77
fi
echo "buildtypes: $built builds, no warnings"
