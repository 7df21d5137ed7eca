#!/usr/bin/env bash
# Compile and run the Java Disruptor baseline (java/RingBench.java) against Debian's
# libdisruptor-java. Prints its JSON lines ({"bench":"ring",...,"subject":"java_disruptor"}).
#   bash bench/ring/run_java.sh [EVENTS] [ROUNDS]      defaults: 50000000 3
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jar=/usr/share/java/disruptor.jar   # dpkg -L libdisruptor-java: disruptor-3.4.4.jar
if [[ ! -r $jar ]] || ! command -v javac >/dev/null; then
    echo "run_java.sh: needs $jar and a JDK (bash scripts/deps.sh --bench)" >&2
    exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
javac -d "$out" -cp "$jar" "$here/java/RingBench.java"
java -cp "$jar:$out" RingBench "${1:-50000000}" "${2:-3}"
