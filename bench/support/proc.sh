# Sourced by the bench drivers (bash): the server process a driver runs (server_pid) and its
# scratch directory (tmp), and what /proc tells of the server.

# Clock ticks per second, the unit of cpu_ticks.
hz=$(getconf CLK_TCK)

# utime + stime of process $1, in clock ticks (fields 14 and 15 of /proc/PID/stat, counted
# after the ")" that ends the command name, which may hold spaces).
cpu_ticks() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# Stop the server started last (SIGTERM) and wait for it.
stop_server() {
    kill "$server_pid" 2>/dev/null || true
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
