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

# The resident set of process $1, in KiB.
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# A slow reader (64 KiB socket buffer, a recv of 64 KiB every 10 ms for 4 s, TLS when $3 is 1)
# of GET $4 (with the header line $5, if given) from the server of pid $1 on port $2:
# it must get over 1 MiB, and the server's RSS may not grow by 4 MiB. Calls fail() otherwise.
slow_reader() { # PID PORT TLS PATH [HEADER]
    local before after
    before=$(rss "$1")
    timeout 30 python3 - "$2" "$3" "$4" "${5:-}" <<'PY' || fail "slow reader of $4 (TLS: $3)"
import socket, ssl, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", int(sys.argv[1])))
if sys.argv[2] == "1":
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    s = ctx.wrap_socket(s)
extra = sys.argv[4] + "\r\n" if sys.argv[4] else ""
s.sendall(f"GET {sys.argv[3]} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
got, end = 0, time.time() + 4
while time.time() < end:
    got += len(s.recv(65536))
    time.sleep(0.01)
assert got > 1 << 20, got
print(f"slow reader: {got} bytes in 4 s")
PY
    after=$(rss "$1")
    (( after - before < 4096 )) || fail "RSS grew by $((after - before)) KiB for a slow reader of $4"
}
