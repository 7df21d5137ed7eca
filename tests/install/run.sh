#!/usr/bin/env bash
# tests/install/run.sh BUILD_DIR SOURCE_DIR: install the build into a temporary prefix, then
# build and run the consumer both ways: find_package(eddy) and pkg-config.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name eddy.pc | head -n 1)
test -n "$pc" || { echo "install: no eddy.pc under $prefix"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
test -f "$prefix/include/eddy/eddy.h" || { echo "install: headers missing"; exit 1; }
test -f "$libdir/cmake/eddy/eddyConfig.cmake" || { echo "install: eddyConfig.cmake missing"; exit 1; }

echo "== CMake: find_package(eddy), shared and static"
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/cmake/consumer"
"$work/cmake/consumer_static"

echo "== pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c11 $(pkg-config --cflags eddy) "$src/tests/install/consumer/main.c" \
    $(pkg-config --libs eddy) -o "$work/pc_consumer"
LD_LIBRARY_PATH=$libdir "$work/pc_consumer"
cc -std=c11 $(pkg-config --cflags eddy) "$src/tests/install/consumer/main.c" \
    "$libdir/libeddy.a" $(pkg-config --libs-only-other --static eddy) -lpthread -ldl \
    -o "$work/pc_consumer_static"
"$work/pc_consumer_static"
echo "install: ok"
