#!/usr/bin/env bash
# tests/buildtypes/run.sh SOURCE_DIR CC TYPE SCOPE DIR: one cell of the build-type matrix
# (tests/buildtypes/tests.cmake): configure eddy with compiler CC in build type TYPE, with
# -DEDDY_WERROR=ON, in DIR, and build it. It must build without one warning, from the
# compiler or from CMake. SCOPE says what is built:
#   library   the library (shared and static) and the public headers' self-containment check
#   minimal   the library without its optional components (-DEDDY_WITH_TLS=OFF,
#             -DEDDY_WITH_ZLIB=OFF, -DEDDY_WITH_NGHTTP2=OFF, -DEDDY_WITH_BROTLI=OFF,
#             -DEDDY_WITH_ZSTD=OFF): libeddy.so must then need none of OpenSSL, zlib,
#             nghttp2, brotli and zstd
#   all       that, the examples and the benchmarks: what a user's plain build compiles but
#             the tests, which the test trees build
#   debian    as all, configured as Debian packages the library (prefix /usr, libdir
#             lib/<triplet>); the tree is kept for the install test (tests/install/run.sh)
# DIR is removed first, and afterwards unless SCOPE is debian. A compiler that is not installed
# is skipped (exit 77). JOBS sets the build's parallelism (default 1: ctest runs the cells
# beside each other and beside the other tests).
set -euo pipefail
src=$1
cc=$2
type=$3
scope=$4
dir=$5
jobs=${JOBS:-1}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "buildtypes: $cc is not installed: skipped (scripts/deps.sh installs it)"
    exit 77
fi
args=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" -DEDDY_WERROR=ON
    -DEDDY_BUILD_TESTS=OFF)
targets=()
case $scope in
    library)
        args+=(-DEDDY_BUILD_EXAMPLES=OFF -DEDDY_BUILD_BENCH=OFF)
        targets=(--target eddy eddy_static eddy_header_check)
        ;;
    minimal)
        args+=(-DEDDY_BUILD_EXAMPLES=OFF -DEDDY_BUILD_BENCH=OFF -DEDDY_WITH_TLS=OFF
            -DEDDY_WITH_ZLIB=OFF -DEDDY_WITH_NGHTTP2=OFF -DEDDY_WITH_BROTLI=OFF
            -DEDDY_WITH_ZSTD=OFF)
        targets=(--target eddy eddy_static eddy_header_check)
        ;;
    all) args+=(-DEDDY_BUILD_EXAMPLES=ON -DEDDY_BUILD_BENCH=ON) ;;
    debian)
        multiarch=$(cc -print-multiarch 2>/dev/null || true)
        args+=(-DEDDY_BUILD_EXAMPLES=ON -DEDDY_BUILD_BENCH=ON -DCMAKE_INSTALL_PREFIX=/usr
            -DCMAKE_INSTALL_LIBDIR="lib/${multiarch:-x86_64-linux-gnu}")
        ;;
    *)
        echo "buildtypes: SCOPE is library, minimal, all or debian, not '$scope'"
        exit 2
        ;;
esac

rm -rf "$dir"
mkdir -p "$dir"
log=$dir.log
start=$(date +%s)
rc=0
{
    cmake -S "$src" -B "$dir" "${args[@]}" && cmake --build "$dir" -j "$jobs" "${targets[@]}"
} >"$log" 2>&1 || rc=$?
secs=$(($(date +%s) - start))
if [[ $rc -ne 0 ]] || grep -qiE 'warning[: ]' "$log"; then
    echo "buildtypes: $cc $type ($scope): FAILED (${secs} s); its warnings and errors:"
    grep -iE -A3 'warning|error' "$log" | head -60
    exit 1
fi
if [[ $scope == minimal ]] && readelf -d "$dir/libeddy.so" | grep NEEDED | grep -qE 'libssl|libcrypto|libz\.|libnghttp2|libbrotli|libzstd'; then
    echo "buildtypes: $cc $type ($scope): libeddy.so needs an optional component:"
    readelf -d "$dir/libeddy.so" | grep NEEDED
    exit 1
fi
echo "buildtypes: $cc $type ($scope): ok, no warnings (${secs} s)"
rm -f "$log"
[[ $scope == debian ]] || rm -rf "$dir"
