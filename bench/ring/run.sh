#!/usr/bin/env bash
# The full ring comparison: the Java Disruptor first (run_java.sh), then bench_ring with the
# Java figures, so every ratio comes from one invocation on one machine state.
#   bash bench/ring/run.sh BUILD_DIR [bench_ring options...]
# JAVA_EVENTS and JAVA_ROUNDS (defaults 50000000 and 3) size the Java run.
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: bash bench/ring/run.sh BUILD_DIR [bench_ring options...]" >&2
    exit 2
fi
build_dir=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
java_out=$(mktemp)
trap 'rm -f "$java_out"' EXIT
if bash "$here/run_java.sh" "${JAVA_EVENTS:-50000000}" "${JAVA_ROUNDS:-3}" >"$java_out"; then
    cat "$java_out"
else
    echo "bench/ring/run.sh: the Java baseline did not run; continuing without it" >&2
fi
"$build_dir/bench/ring/bench_ring" --java-results "$java_out" "$@"
