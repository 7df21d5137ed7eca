#!/usr/bin/env python3
"""Hostile clients against every example server: garbage, a reader that never reads, resets in
the middle of a request, more connections than the server has descriptors, (RESP) requests
whose replies are a thousand times larger, never read, and (TLS) silent connections and
garbage instead of a handshake. After each, the server must still answer a
well-formed request; its memory must stay bounded; SIGTERM must end it with status 0 (under
the sanitizers that also means no leak after all of it).

    tests/examples/hostile.py BIN_DIR CERT_DIR

BIN_DIR holds eddy-echo-server, eddy-rpc-server, eddy-http-server and eddy-resp-server;
CERT_DIR the certificates tests/pipeline/tls_certs.sh makes (server.pem and server.key for the
echo server's --tls mode, ca.pem to verify it).
Every server runs with 256 descriptors (ulimit -n) on an ephemeral port of 127.0.0.1.
"""
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import time

FDS = 256
# How much a server may grow (VmRSS, KiB) across everything here: this bounds runaway
# buffering, not exact use. AddressSanitizer keeps freed memory in a quarantine (256 MiB by
# default, which a SET flood fills); the servers run with a 16 MiB one.
GROWTH_KB = 64 * 1024
ASAN_QUARANTINE = "quarantine_size_mb=16:thread_local_quarantine_size_kb=256"


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, argv):
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), ASAN_QUARANTINE]))
        self.proc = subprocess.Popen(
            ["bash", "-c", f'ulimit -n {FDS}; exec "$@"', "server"] + argv,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit(f"{argv[0]} did not start: {line!r}")
        self.port = int(m.group(1))
        self.name = os.path.basename(argv[0])
        time.sleep(0.1)
        self.rss0 = rss_kb(self.proc.pid)

    def check_alive(self, probe, expect, what, tls=None):
        deadline = time.time() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                    conn = tls.wrap_socket(s, server_hostname="localhost") if tls else s
                    conn.sendall(probe)
                    got = b""
                    while expect not in got:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        got += chunk
                    if expect in got:
                        return
            except OSError:
                pass
            if time.time() > deadline:
                self.fail(f"no answer after {what}")
            time.sleep(0.2)  # the server may be pausing accepts (out of descriptors)

    def fail(self, why):
        self.proc.kill()
        out = self.proc.stdout.read()
        sys.exit(f"{self.name}: {why}\n{out}")

    def stop(self):
        grown = rss_kb(self.proc.pid) - self.rss0
        if grown > GROWTH_KB:
            self.fail(f"grew by {grown} KiB")
        self.proc.terminate()
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.fail("did not stop on SIGTERM")
        out = self.proc.stdout.read()
        if rc != 0:
            sys.exit(f"{self.name}: exit status {rc}\n{out}")
        print(f"{self.name}: ok (grew {grown} KiB)")


def garbage(port, total=4 << 20):
    """Random bytes until total or the server closes; returns bytes sent."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            while sent < total:
                s.sendall(os.urandom(65536))
                sent += 65536
        except OSError:
            pass
    return sent


def never_reads(port, request, seconds=2.0):
    """Pipelined requests while never reading a reply: the server must stop reading, not
    buffer replies without bound."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    batch = request * max(1, 65536 // len(request))
    end = time.time() + seconds
    while time.time() < end:
        try:
            s.send(batch)
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:
            break
    return s


def resets(port, data, n=200):
    """Connect, send half a request, close with a reset."""
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.connect(("127.0.0.1", port))
        s.send(data)
        s.close()


def flood(port, n=FDS * 2):
    """More connections than the server has descriptors; all closed afterwards."""
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    time.sleep(0.3)
    for s in socks:
        s.close()


def rpc_frame(method, body, call_id=1):
    payload = struct.pack(">QB", call_id, len(method)) + method + body
    return struct.pack(">I", len(payload)) + payload


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hostile.py BIN_DIR CERT_DIR")
    bin_dir, cert_dir = sys.argv[1:]
    cert, key = os.path.join(cert_dir, "server.pem"), os.path.join(cert_dir, "server.key")
    plain = [
        ("eddy-echo-server", b"ping", b"ping", b"x" * 64),
        ("eddy-rpc-server", rpc_frame(b"echo", b"abc"), b"abc", rpc_frame(b"echo", b"y" * 64)),
        ("eddy-http-server", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"Hello, World!",
         b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("eddy-resp-server", b"PING\r\n", b"+PONG", b"SET k v\r\n"),
    ]
    for exe, probe, expect, request in plain:
        srv = Server([os.path.join(bin_dir, exe), "--port", "0", "--threads", "1"])
        garbage(srv.port)
        srv.check_alive(probe, expect, "garbage")
        slow = never_reads(srv.port, request)
        srv.check_alive(probe, expect, "a client that never reads")
        slow.close()
        resets(srv.port, request[: len(request) // 2])
        srv.check_alive(probe, expect, "resets mid-request")
        flood(srv.port)
        srv.check_alive(probe, expect, f"{FDS * 2} connections on {FDS} descriptors")
        srv.stop()

    # One read of GETs of a large value, never read back: 400 replies of 1 MiB would be made
    # from 3.6 KB of requests. The server closes the connection at --max-output instead.
    srv = Server([os.path.join(bin_dir, "eddy-resp-server"), "--port", "0", "--threads", "1",
                  "--max-output", str(8 << 20)])
    big = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n" % (len(big), big))
        if s.recv(16) != b"+OK\r\n":
            srv.fail("SET of 1 MiB not answered")
        s.sendall(b"GET big\r\n" * 400)
        time.sleep(1)
        srv.check_alive(b"PING\r\n", b"+PONG", "400 GETs of 1 MiB never read")
    srv.stop()

    tls = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.pem"))
    srv = Server([os.path.join(bin_dir, "eddy-echo-server"), "--port", "0", "--threads", "1",
                  "--tls", cert, key])
    garbage(srv.port)
    srv.check_alive(b"ping", b"ping", "garbage instead of a handshake", tls)
    silent = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(100)]
    srv.check_alive(b"ping", b"ping", "100 connections that never start a handshake", tls)
    resets(srv.port, b"\x16\x03\x01\x00\xff\x01")  # a ClientHello cut short
    srv.check_alive(b"ping", b"ping", "resets mid-handshake", tls)
    # The handshake done on the client's side, then a reset: the server's last flight (TLS 1.3
    # tickets) meets it, and the write failing closes the connection under the handshake.
    for _ in range(50):
        try:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                conn = tls.wrap_socket(s, server_hostname="localhost")
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
        except OSError:
            pass
    srv.check_alive(b"ping", b"ping", "resets right after the handshake", tls)
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        conn = tls.wrap_socket(s, server_hostname="localhost")
        conn.setblocking(False)
        end = time.time() + 2
        while time.time() < end:
            try:
                conn.send(b"z" * 16384)
            except (ssl.SSLWantWriteError, BlockingIOError):
                time.sleep(0.01)
        srv.check_alive(b"ping", b"ping", "a TLS client that never reads", tls)
    for s in silent:
        s.close()
    srv.stop()


if __name__ == "__main__":
    main()
