#!/usr/bin/env bash
# Run every benchmark built under BUILD_DIR, show its table, and collect its JSON lines (those
# starting with {"bench":) into bench/results.json, one object per line.
#
#   bash bench/run.sh BUILD_DIR [ARGS...]    ARGS go to every benchmark (e.g. --rounds 9)
#
# The benchmarks pin their own threads and servers (the first allowed CPU for the server,
# producer or main thread, the second for the load), so nothing here uses taskset.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: bash bench/run.sh BUILD_DIR [ARGS...]" >&2
    exit 2
fi
build_dir=$1
shift

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
results=$root/bench/results.json

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/results.json"

# Every benchmark, in name order: bench/<name>/run.sh when it has one (drivers that run
# baselines outside C: the Java Disruptor, Netty, other servers), else the program
# BUILD_DIR/bench/<name>/bench_<name>. A driver whose programs are not built says so and is
# skipped by its own checks.
ran=0
for dir in "$root"/bench/*/; do
    name=$(basename "$dir")
    exe=$build_dir/bench/$name/bench_$name
    if [[ -f $dir/run.sh ]]; then
        echo "== bench/$name/run.sh $*"
        bash "$dir/run.sh" "$build_dir" "$@" | tee "$tmp/out.txt"
    elif [[ -x $exe ]]; then
        echo "== $name/bench_$name $*"
        "$exe" "$@" | tee "$tmp/out.txt"
    else
        continue
    fi
    grep '^{"bench":' "$tmp/out.txt" >>"$tmp/results.json" || true
    ran=$((ran + 1))
done

if [[ $ran -eq 0 ]]; then
    echo "bench/run.sh: no benchmark found under $build_dir/bench" >&2
    exit 1
fi
mv "$tmp/results.json" "$results"
echo "== $(wc -l <"$results") result lines in ${results#"$root"/}"
