#!/usr/bin/env bash
# tests/install/run.sh BUILD_DIR SOURCE_DIR [DEBIAN_DIR]: install eddy two ways and build the
# consumer (tests/install/consumer) against each, shared and static, with find_package(eddy)
# (eddy::eddy, eddy::eddy_static) and with pkg-config (eddy, eddy-static):
#   1. BUILD_DIR into a custom prefix (cmake --install --prefix);
#   2. a build configured as Debian packages the library (/usr, with the multiarch libdir
#      lib/<triplet>), installed with DESTDIR into a staging directory, which pkg-config and
#      CMake must find where it is (the files are relocatable). DEBIAN_DIR is that build when
#      the build-type matrix made it (its gcc Release cell); without it, one is made here.
# Every consumer must run, and the static ones must not need libeddy.so; a wrong prefix in
# eddy.pc or eddyConfig.cmake fails to compile.
# shellcheck disable=SC2046 # pkg-config's output is meant to be split into words
set -euo pipefail
build=$1
src=$2
debian=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
    echo "install: $*"
    exit 1
}

# A program linked with the static library must not need libeddy.so.
static_only() {
    if readelf -d "$1" | grep NEEDED | grep -q libeddy; then
        fail "$(basename "$1") needs the shared library: $(readelf -d "$1" | grep NEEDED)"
    fi
}

# check NAME PREFIX LIBDIR: the consumers against the tree installed at PREFIX, whose
# libraries are in LIBDIR (both as they are on disk now).
check() {
    local name=$1 prefix=$2 libdir=$3
    local out=$work/$name
    echo "== $name: $prefix"
    test -f "$prefix/include/eddy/eddy.h" || fail "headers missing"
    test -f "$libdir/cmake/eddy/eddyConfig.cmake" || fail "eddyConfig.cmake missing"
    test -f "$libdir/pkgconfig/eddy.pc" || fail "eddy.pc missing"
    test -f "$libdir/pkgconfig/eddy-static.pc" || fail "eddy-static.pc missing"
    # The library carries no RPATH of its own (CMake drops the build tree's at install).
    if readelf -d "$libdir/libeddy.so" | grep -qE 'RPATH|RUNPATH'; then
        fail "libeddy.so has an RPATH: $(readelf -d "$libdir/libeddy.so" | grep -E 'R(UN)?PATH')"
    fi

    echo "-- CMake: find_package(eddy), shared and static"
    local hint=()
    # CMake looks in lib/<triplet>/cmake by itself where the compiler has a multiarch
    # triplet; elsewhere say where.
    [[ -n "$multiarch" ]] || hint=(-Deddy_DIR="$libdir/cmake/eddy")
    cmake -S "$src/tests/install/consumer" -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
        "${hint[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$out/cmake" >/dev/null
    LD_LIBRARY_PATH=$libdir "$out/cmake/consumer"
    "$out/cmake/consumer_static"
    static_only "$out/cmake/consumer_static"

    echo "-- pkg-config, from the installed tree where it is"
    export PKG_CONFIG_PATH=$libdir/pkgconfig
    local pcprefix
    pcprefix=$(pkg-config --variable=prefix eddy)
    [[ "$(cd "$pcprefix" && pwd -P)" == "$(cd "$prefix" && pwd -P)" ]] ||
        fail "eddy.pc's prefix is $pcprefix, not $prefix"
    cc -std=c11 $(pkg-config --cflags eddy) "$src/tests/install/consumer/main.c" \
        $(pkg-config --libs eddy) -o "$out/pc_consumer"
    LD_LIBRARY_PATH=$libdir "$out/pc_consumer"
    cc -std=c11 $(pkg-config --cflags eddy-static) "$src/tests/install/consumer/main.c" \
        $(pkg-config --libs eddy-static) -o "$out/pc_consumer_static"
    "$out/pc_consumer_static"
    static_only "$out/pc_consumer_static"
    unset PKG_CONFIG_PATH
}

multiarch=$(cc -print-multiarch 2>/dev/null || true)

# 1. A custom prefix, from the build under test.
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name eddy.pc | head -n 1)
test -n "$pc" || fail "no eddy.pc under $prefix"
check custom "$prefix" "$(dirname "$(dirname "$pc")")"

# 2. /usr with a multiarch libdir, staged with DESTDIR: only the library is built.
usrlib=lib/${multiarch:-x86_64-linux-gnu}
if [[ -z "$debian" || ! -f "$debian/CMakeCache.txt" ]]; then
    debian=$work/usr-build
    cmake -S "$src" -B "$debian" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
        -DCMAKE_INSTALL_LIBDIR="$usrlib" -DEDDY_BUILD_TESTS=OFF -DEDDY_BUILD_EXAMPLES=OFF \
        -DEDDY_BUILD_BENCH=OFF >/dev/null
    cmake --build "$debian" -j 2 --target eddy eddy_static >/dev/null
fi
grep -q "^CMAKE_INSTALL_PREFIX:PATH=/usr$" "$debian/CMakeCache.txt" ||
    fail "$debian is not configured with the prefix /usr"
DESTDIR=$work/stage cmake --install "$debian" >/dev/null
test -f "$work/stage/usr/$usrlib/libeddy.so" || fail "no libeddy.so in /usr/$usrlib"
check usr "$work/stage/usr" "$work/stage/usr/$usrlib"

# With a sysroot instead (cross builds): the paths land in the staging tree, once.
flags=$(PKG_CONFIG_SYSROOT_DIR=$work/stage PKG_CONFIG_PATH=$work/stage/usr/$usrlib/pkgconfig \
    pkg-config --cflags-only-I --libs-only-L eddy)
for f in $flags; do
    p=${f:2}
    [[ -d "$p" && "$(cd "$p" && pwd -P)" == "$(cd "$work/stage" && pwd -P)"/* ]] ||
        fail "under PKG_CONFIG_SYSROOT_DIR, $f is not a directory in the staging tree"
done
echo "install: ok"
