#!/usr/bin/env python3
"""gRPC's keepalive enforcement on eddy-grpc-server (grpc doc/keepalive.md), with raw HTTP/2.

  grpc_ping.py PORT

1. A client that pings again and again while the server sends nothing gets, after the
   allowed strikes (2), GOAWAY ENHANCE_YOUR_CALM with debug data "too_many_pings".
2. A client whose pings each follow an answer the server sent (gRPC's BDP pings, which come
   after data) is never struck: 20 calls, a PING after each, and no GOAWAY.
Exit 0 when both hold.
"""
import socket
import struct
import sys

import h2.config
import h2.connection
import h2.events

PORT = int(sys.argv[1])
PATH = "/grpc.health.v1.Health/Check"


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    s.sendall(c.data_to_send())
    return s, c


def pump(s, c, until):
    """Read events until until(events) says so; the events seen."""
    seen = []
    while not until(seen):
        data = s.recv(65536)
        if not data:
            break
        for ev in c.receive_data(data):
            seen.append(ev)
            if isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        s.sendall(c.data_to_send())
    return seen


def goaway(events):
    return [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]


def flood():
    s, c = connect()
    for i in range(6):
        c.ping(struct.pack(">Q", i))
    s.sendall(c.data_to_send())
    seen = pump(s, c, lambda ev: goaway(ev))
    g = goaway(seen)
    assert g, "no GOAWAY after a ping flood"
    assert g[0].error_code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, g[0].error_code
    assert g[0].additional_data == b"too_many_pings", g[0].additional_data
    s.close()


def call(s, c, sid):
    c.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", PATH),
                         (":authority", "x"), ("content-type", "application/grpc"),
                         ("te", "trailers")])
    c.send_data(sid, b"\x00\x00\x00\x00\x00", end_stream=True)
    s.sendall(c.data_to_send())
    ended = lambda ev: any(isinstance(e, h2.events.StreamEnded) and e.stream_id == sid
                           for e in ev) or goaway(ev)
    return pump(s, c, ended)


def pings_after_data():
    s, c = connect()
    for i in range(20):
        seen = call(s, c, 1 + 2 * i)
        assert not goaway(seen), "GOAWAY for pings that followed data"
        c.ping(struct.pack(">Q", i))
        s.sendall(c.data_to_send())
    seen = pump(s, c, lambda ev: any(isinstance(e, h2.events.PingAckReceived) for e in ev))
    assert not goaway(seen), "GOAWAY for pings that followed data"
    s.close()


import h2.errors  # noqa: E402 (after the functions that name it)

flood()
print("PASS ping flood: GOAWAY ENHANCE_YOUR_CALM too_many_pings")
pings_after_data()
print("PASS pings after data are never struck")
