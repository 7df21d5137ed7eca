#!/usr/bin/env bash
# The timers and tasks examples: eddy-timers must see its one-shot timer fire once and the
# cancelled one never; eddy-tasks must find every accepted task run exactly once, however the
# shutdown meets its last thread. Sizes are small so that sanitizer builds stay quick.
#   tests/examples/timers_tasks.sh TIMERS TASKS
set -euo pipefail
timers=$1
tasks=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$timers" --seconds 0.5 --rate-ms 50 --delay-ms 40 >"$out"
cat "$out"
grep -q "once    fired 1 time," "$out"
grep -q "never fired: ok" "$out"
grep -Eq "^ +[0-9]+\.[0-9] ms  rate    #1 " "$out"
grep -Eq "^ +[0-9]+\.[0-9] ms  delay   #2 " "$out"
"$timers" --quiet --seconds 0.3 >"$out"
cat "$out"
if grep -q " ms  rate" "$out"; then
    echo "--quiet printed the firings"
    exit 1
fi
grep -q "never fired: ok" "$out"

"$tasks" --loops 2 --threads 4 --tasks 20000 >"$out"
cat "$out"
grep -q "every accepted task ran exactly once" "$out"
grep -q "12 eddy_loop_submit() results awaited by their threads, 0 wrong" "$out"
grep -q "loop 1: " "$out"
"$tasks" --loops 3 --threads 1 --tasks 5000 >"$out"
cat "$out"
grep -q "every accepted task ran exactly once" "$out"

"$timers" --help | grep -q usage
"$tasks" --help | grep -q usage
if "$timers" --seconds nope 2>/dev/null || "$tasks" --loops 0 2>/dev/null; then
    echo "a bad option was accepted"
    exit 1
fi
echo "timers and tasks: ok"
