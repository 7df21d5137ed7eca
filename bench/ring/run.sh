#!/usr/bin/env bash
# The full ring comparison: compiles the Java Disruptor baseline (java/RingBench.java, against
# Debian's libdisruptor-java) and runs bench_ring with it as a co-process, so the Java runs
# alternate with eddy's and the queues' round by round in one invocation.
#   bash bench/ring/run.sh BUILD_DIR [bench_ring options...]
# Without a JDK or the jar, bench_ring runs without the Java baseline and says so.
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: bash bench/ring/run.sh BUILD_DIR [bench_ring options...]" >&2
    exit 2
fi
build_dir=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jar=/usr/share/java/disruptor.jar # dpkg -L libdisruptor-java: disruptor-3.4.4.jar
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
java_args=()
if [[ -r $jar ]] && command -v javac >/dev/null && javac -d "$classes" -cp "$jar" "$here/java/RingBench.java"; then
    java_args=(--java "java -cp $jar:$classes RingBench --serve")
else
    echo "bench/ring/run.sh: no JDK or $jar (bash scripts/deps.sh --bench); the Java baseline is left out" >&2
fi
"$build_dir/bench/ring/bench_ring" "${java_args[@]}" "$@"
