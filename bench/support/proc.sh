# shellcheck shell=bash disable=SC2034,SC2154 # a library: the drivers set and read these
# Sourced by the bench drivers (bash, bench/*/run.sh): what they share. The server process a
# driver runs (server_pid) and its scratch directory (tmp); what /proc tells of the server and
# the machine; pinning with taskset; the interleaved rounds; Netty's class path; perf's count
# of the server's system calls; a field of a JSON line.

# usage: prints the driver's usage lines (those of its header from "#   bash bench/" to the
# next empty comment line) and exits 2.
usage() {
    sed -n '/^#   bash bench\//,/^#$/p' "$0" | sed '/^#$/d; s/^# *//' >&2
    exit 2
}

# parse_options DRIVER SPEC ARGS...: a driver's options (after BUILD_DIR). SPEC lists them,
# separated by spaces: NAME (--NAME VALUE sets the variable NAME, its dashes as underscores),
# NAME=VAR (sets VAR instead), the flags no-pin (pin=0) and no-costs (costs=0), and "others":
# any other --option and its value are then ignored with a word (bench/run.sh passes its own
# arguments to every driver). Anything else, or an option without its value, calls usage.
parse_options() {
    local who=$1 spec=" $2 " name var re
    shift 2
    while [[ $# -gt 0 ]]; do
        name=${1#--}
        if [[ $1 == --no-pin || $1 == --no-costs ]] && [[ $spec == *" $name "* ]]; then
            if [[ $name == no-pin ]]; then pin=0; else costs=0; fi
            shift
            continue
        fi
        [[ $# -ge 2 ]] || usage
        var='' re=" $name=([a-z_]+) "
        if [[ $1 != --* || $name == no-pin || $name == no-costs ]]; then
            var=
        elif [[ $spec == *" $name "* ]]; then
            var=${name//-/_}
        elif [[ $spec =~ $re ]]; then
            var=${BASH_REMATCH[1]}
        fi
        if [[ -n $var ]]; then
            printf -v "$var" '%s' "$2"
        elif [[ $1 == --* && $spec == *" others "* ]]; then
            echo "$who: $1 $2 ignored (an option of another benchmark?)" >&2
        else
            usage
        fi
        shift 2
    done
}

# Clock ticks per second, the unit of cpu_ticks.
hz=$(getconf CLK_TCK)

# utime + stime of process $1, in clock ticks (fields 14 and 15 of /proc/PID/stat, counted
# after the ")" that ends the command name, which may hold spaces).
cpu_ticks() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# group_cpu_ticks PGID: cpu_ticks summed over every process of process group PGID (a server
# started with setsid that forks: NSD serves from a child); a process gone meanwhile counts 0.
group_cpu_ticks() {
    local t=0 pid v
    for pid in $(pgrep -g "$1"); do
        v=$(cpu_ticks "$pid" 2>/dev/null) || v=0
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

# Stop the server started last and wait for it: SIGTERM, then SIGKILL if it is still there
# after 5 s. With server_group=1 both go to its whole process group: a server started with
# setsid leads a group of its own, and one that forks (NSD) would leave its children running.
server_group=0
stop_server() {
    local target=$server_pid _
    if ((server_group)); then
        target=-$server_pid
    fi
    kill -TERM -- "$target" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 -- "$target" 2>/dev/null || break
        sleep 0.05
    done
    kill -KILL -- "$target" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

# On exit (trap cleanup EXIT): a server still running is stopped, the scratch directory goes.
cleanup() {
    if [[ -n $server_pid ]]; then
        stop_server
    fi
    rm -rf "$tmp"
}

# scratch_dir: the driver's scratch directory (tmp), no server yet (server_pid), and cleanup
# on exit.
scratch_dir() {
    tmp=$(mktemp -d)
    server_pid=
    trap cleanup EXIT
}

# require_built DRIVER EXE...: exits 1, saying which, unless every EXE is built.
require_built() {
    local who=$1 exe
    shift
    for exe in "$@"; do
        if [[ ! -x $exe ]]; then
            echo "$who: $exe is not built" >&2
            exit 1
        fi
    done
}

# wait_for_log LOG PATTERN TRIES: returns 0 once LOG holds PATTERN (grep), looking every 50 ms
# up to TRIES times; 1 when they run out or the server ($server_pid) has exited.
wait_for_log() {
    local _
    for _ in $(seq "$3"); do
        if grep -q "$2" "$1"; then
            return 0
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    return 1
}

# the number after "key": in a JSON line: field LINE KEY
field() {
    sed -E "s/.*\"$2\":([^,}]*).*/\\1/" <<<"$1"
}

# run_port PORT: PORT, or for 0 a base port of this run's own (the tests run the drivers while
# other runs may hold the default ports), below the ephemeral range (32768 and up).
run_port() {
    if [[ $1 == 0 ]]; then
        echo $((10000 + ($$ * 37) % 20000))
    else
        echo "$1"
    fi
}

# free_port DRIVER: a port nothing listens on, UDP or TCP (ss), from a random start below the
# ephemeral range, for a driver that takes a fresh port for each server it starts (bench/dns);
# exits 1, saying so as DRIVER, when 200 tries find none.
free_port() {
    local p _
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 12000))
        if [[ -z $(ss -Hlnut "sport = :$p" 2>/dev/null) ]]; then
            echo "$p"
            return 0
        fi
    done
    echo "$1: no free port found" >&2
    exit 1
}

# raise_nofile N: at least N descriptors for this shell and what it starts (servers inherit
# it), or as many as the hard limit allows.
raise_nofile() {
    if (($(ulimit -n) < $1)); then
        ulimit -n "$1" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    fi
}

# The CPU's model name and the load average (1 minute), for the drivers' headers.
cpu_model() {
    sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1
}
load_average() {
    cut -d' ' -f1 /proc/loadavg
}

# pin_setup CLIENT: from pin (1: pin), cpu and client_cpu, sets pin_server and pin_client,
# the taskset prefixes of the servers and of the clients, server_cpu_args and
# client_cpu_args, "--cpu N" for programs of ours that pin their threads too (all empty arrays
# unpinned), and where, the header's words on it (CLIENT names the clients: "wrk").
pin_setup() {
    pin_server=() pin_client=() server_cpu_args=() client_cpu_args=() where="nothing pinned"
    if ((pin)); then
        pin_server=(taskset -c "$cpu")
        pin_client=(taskset -c "$client_cpu")
        server_cpu_args=(--cpu "$cpu")
        client_cpu_args=(--cpu "$client_cpu")
        where="servers on CPU $cpu, $1 on CPU $client_cpu"
    fi
}

# client_line WHAT CMD...: runs the client CMD pinned (pin_client) and sets line to what it
# printed (one JSON line); when it fails, prints WHAT (the driver's words on it) and the
# server's log ($tmp/server.log), and exits 1.
client_line() {
    local what=$1
    shift
    if ! line=$("${pin_client[@]}" "$@"); then
        echo "$what" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
}

# rounds_loop CASES FN: the interleaved rounds. For each case of the comma-separated CASES,
# rounds times, each server of subjects in turn (A B C A B C ...): FN CASE ROUND SERVER.
rounds_loop() {
    local c r s
    for c in ${1//,/ }; do
        for ((r = 0; r < rounds; r++)); do
            for s in "${subjects[@]}"; do
                "$2" "$c" "$r" "$s"
            done
        done
    done
}

# netty_classpath SOURCE JAR...: compiles SOURCE (javac, into $tmp/java) against Debian's
# libnetty-java jars (/usr/share/java/JAR.jar) and sets netty_cp to the class path that runs
# it; empty when a jar or the JDK is missing, or SOURCE does not compile.
netty_classpath() {
    local src=$1 j
    shift
    netty_cp=
    for j in "$@"; do
        if [[ ! -r /usr/share/java/$j.jar ]]; then
            netty_cp=
            return 0
        fi
        netty_cp+=/usr/share/java/$j.jar:
    done
    if command -v javac >/dev/null && javac -d "$tmp/java" -cp "$netty_cp" "$src"; then
        netty_cp+=$tmp/java
    else
        netty_cp=
    fi
}

# machine_costs NAME BUILD_DIR CPU CLIENT_CPU: prints the machine's costs (a system call,
# epoll_wait(0), an eventfd write, clock_gettime, a cache line and a futex between the two
# CPUs), measured by a report program of bench/support/report.c (--costs), its JSON line
# included, and sets costs_line to a one-line summary to print under each table ('' when no
# report program is built).
costs_line=''
machine_costs() {
    local name=$1 dir=$2 report='' p out mc
    for p in udp/udp_report ws/ws_report echo/echo_report; do
        if [[ -x $dir/bench/$p ]]; then
            report=$dir/bench/$p
            break
        fi
    done
    if [[ -z $report ]]; then
        echo "machine costs: not measured (no bench/udp/udp_report, bench/ws/ws_report or" \
            "bench/echo/echo_report built under $dir)"
        return 0
    fi
    out=$("$report" --costs "$name" "$3" "$4")
    echo "$out"
    mc=$(grep '^{"bench":"machine"' <<<"$out" || true)
    if [[ -n $mc ]]; then
        costs_line="machine: a system call $(field "$mc" syscall_ns) ns, epoll_wait(0)"
        costs_line+=" $(field "$mc" epoll_wait0_ns) ns, an eventfd write"
        costs_line+=" $(field "$mc" eventfd_write_ns) ns, clock_gettime"
        costs_line+=" $(field "$mc" clock_ns) ns"
    fi
}

# System calls per operation: perf counts the server's over the measured window, when it can
# count that tracepoint here (root, or perf_event_paranoid low enough; syscalls_probe finds
# out); 0 otherwise.
count_syscalls=0 perf_pid=''
syscalls_probe() {
    if command -v perf >/dev/null &&
        perf stat -x, -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
        count_syscalls=1
    fi
}
# Starts counting server $server_pid's system calls after $1 s, for $2 s, into $tmp/perf.txt.
syscalls_start() {
    : >"$tmp/perf.txt"
    if ((count_syscalls)); then
        (sleep "$1" && perf stat -x, -e raw_syscalls:sys_enter -p "$server_pid" \
            -o "$tmp/perf.txt" -- sleep "$2" >/dev/null 2>&1) &
        perf_pid=$!
    fi
}
# Waits for the count (in this shell: a subshell cannot wait for it).
syscalls_wait() {
    if [[ -n $perf_pid ]]; then
        wait "$perf_pid" 2>/dev/null || true
        perf_pid=''
    fi
}
# The count per operation of the window: $1 operations per second, $2 s.
syscalls_per_op() {
    awk -F, -v ops="$1" -v s="$2" 'BEGIN { n = 0 }
        /raw_syscalls/ && ops > 0 { n = $1 / (ops * s) } END { printf "%.4f", n }' \
        "$tmp/perf.txt"
}
