# Sourced by the bench drivers (bash): what /proc tells of a server process.

# Clock ticks per second, the unit of cpu_ticks.
hz=$(getconf CLK_TCK)

# utime + stime of process $1, in clock ticks (fields 14 and 15 of /proc/PID/stat, counted
# after the ")" that ends the command name, which may hold spaces).
cpu_ticks() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
