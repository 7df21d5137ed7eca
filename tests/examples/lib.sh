# Shared by the example servers' end-to-end scripts: source "$(dirname "$0")/lib.sh".

# The port a server started with log $1 listens on, once its line saying so (one matching $2,
# "listening on" by default) is out; empty after 5 s.
port_of() {
    for _ in $(seq 100); do
        grep -q "${2:-listening on}" "$1" && break
        sleep 0.05
    done
    grep -o "127.0.0.1:[0-9]*" "$1" | head -1 | cut -d: -f2
}
