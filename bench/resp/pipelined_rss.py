#!/usr/bin/env python3
"""What one pipelining client costs a RESP server in memory (#28).

    python3 bench/resp/pipelined_rss.py EXE [EXE ...]

Starts each eddy-resp-server given (--threads 1, an ephemeral port), stores a 1 MiB value,
then, from a client whose receive buffer is 4 KiB, sends 10 KB of pipelined GETs of it (465
requests) in one write and reads nothing for 3 s. Prints the server's peak and current resident
set (VmHWM, VmRSS from /proc) before and after: with backpressure per message the replies
queued stay near one, without it every request of the read had its 1 MiB reply queued.
"""
import os
import re
import socket
import subprocess
import sys
import time


def mem(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def run(exe):
    p = subprocess.Popen([exe, "--port", "0", "--threads", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        port = int(re.search(r":(\d+)", p.stdout.readline()).group(1))
        s = socket.create_connection(("127.0.0.1", port))
        v = b"v" * (1 << 20)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n" % (len(v), v))
        got = b""
        while b"+OK\r\n" not in got:
            got += s.recv(1 << 16)
        before = mem(p.pid)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 465)
        time.sleep(3)
        after = mem(p.pid)
        alive = p.poll() is None
        print(f"{exe}: VmHWM {before['VmHWM']} -> {after['VmHWM']} kB, VmRSS after "
              f"{after['VmRSS']} kB, server {'running' if alive else 'exited'}")
        s.close()
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for exe in sys.argv[1:]:
        run(exe)
