#!/usr/bin/env python3
"""A slowloris client: it sends the first bytes of a request and then trickles the rest a byte
every 0.1 s, or stalls. A server whose message deadline (--request-timeout) is SECONDS must
close the connection before the request is whole, between 0.8 * SECONDS and SECONDS + 3 s
after the first byte; the read timeouts, which every byte restarts, would not.

    tests/examples/slow_client.py PORT SECONDS trickle|stall rpc|resp

Exit status 0 when the server cut the client off in time, else 1 with the reason.
"""
import select
import socket
import struct
import sys
import time

REQUESTS = {
    # eddy-rpc-server: a 4-byte length, then id, method length, "echo", a 100-byte body.
    "rpc": struct.pack(">IQB", 8 + 1 + 4 + 100, 1, 4) + b"echo" + b"a" * 100,
    # eddy-resp-server: ECHO of 100 bytes.
    "resp": b"*2\r\n$4\r\nECHO\r\n$100\r\n" + b"a" * 100 + b"\r\n",
}


def closed_within(s, seconds):
    """True when the peer closed s (end of stream or reset) within seconds; false on
    silence. Anything it sends instead is an error: the request was never whole."""
    if not select.select([s], [], [], seconds)[0]:
        return False
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        return True
    if data:
        sys.exit(f"an answer to a request never sent whole: {data[:40]!r}")
    return True


def main():
    port, seconds, mode, proto = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
    request = REQUESTS[proto]
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    start = time.monotonic()
    cut = False
    if mode == "stall":
        s.sendall(request[: len(request) // 2])
        cut = closed_within(s, seconds + 3)
    else:
        for b in request[:-1]:
            if time.monotonic() - start > seconds + 3:
                break
            try:
                s.send(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            if closed_within(s, 0.1):
                cut = True
                break
    took = time.monotonic() - start
    if not cut:
        sys.exit(f"{mode}: not cut off after {took:.1f} s")
    if not 0.8 * seconds <= took <= seconds + 3:
        sys.exit(f"{mode}: cut off after {took:.1f} s, the deadline is {seconds} s")
    print(f"{proto} {mode}: cut off after {took:.1f} s")


if __name__ == "__main__":
    main()
