#!/usr/bin/env bash
# Run every benchmark built under BUILD_DIR, show its table, and collect its JSON lines (those
# starting with {"bench":) into bench/results.json, one object per line.
#
#   bash bench/run.sh BUILD_DIR [ARGS...]    ARGS go to every benchmark (e.g. --rounds 9)
#
# The benchmarks pin their own threads (main/producer on the first allowed CPU, consumer on
# the second), so nothing here uses taskset.
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

# Every benchmark built: BUILD_DIR/bench/<name>/bench_<name>, in name order.
ran=0
for exe in "$build_dir"/bench/*/bench_*; do
    [[ -f $exe && -x $exe ]] || continue
    b=${exe#"$build_dir"/bench/}
    name=${b%%/*}
    echo "== $b $*"
    if [[ -f $root/bench/$name/run.sh ]]; then
        # A benchmark with baselines outside C (the Java Disruptor) has a driver of its own.
        bash "$root/bench/$name/run.sh" "$build_dir" "$@" | tee "$tmp/out.txt"
    else
        "$exe" "$@" | tee "$tmp/out.txt"
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
