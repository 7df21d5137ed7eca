#!/usr/bin/env python3
"""Whole-server fuzzing: seeded, generated hostile traffic against the example servers.

Each run starts one example server (eddy-echo-server plain or with --tls, and both again with
a hard cap on each connection's queued replies, --max-pending ("echo_cap", "tls_cap");
eddy-rpc-server, eddy-http-server, eddy-resp-server, eddy-dns-server on
examples/zones/example.zone, eddy-ws-server with --echo ("ws") and in broadcast mode
("ws_chat"), eddy-http-server over HTTP/2 by prior knowledge ("http2"), eddy-grpc-server,
gRPC's interop TestService, over h2c ("grpc"), and so with --offload 2 ("grpc_offload":
UnaryCall and StreamingInputCall on a carrier's threads)) with two worker
loops, 256 descriptors and an ephemeral port of 127.0.0.1, and plays bursts of client
connections against it, all at once and interleaved on one selectors loop; for DNS, UDP flows
(a socket each) among them. What every connection does is generated up front from the run's
seed by a grammar of its protocol:

  - valid messages (HTTP/1.1 and 1.0 requests with Content-Length and chunked bodies,
    keep-alive and Connection: close, Expect: 100-continue; RESP arrays and inline commands;
    RPC frames of echo/add/sleep; echo bytes; the same over TLS; DNS queries for names in
    the zone and outside it, of any type, in random case, with and without EDNS; a
    WebSocket upgrade of /ws, then masked text, binary, continuation, ping, pong and close
    frames, fragmented messages with pings between the fragments, UTF-8 of 1 to 4 bytes a
    character, permessage-deflate), pipelined many at a time;
  - mutated ones (bytes flipped, inserted, deleted, duplicated, cut; numbers, length fields and
    CRLFs corrupted; DNS counts that lie, compression pointer loops, labels past the end;
    broken upgrades, and WebSocket frames unmasked, with reserved bits or opcodes, lengths
    that lie or pass the limit, control frames long or fragmented, text that is not UTF-8,
    continuations without a message, storms of thousands of fragments, compressed frames
    without the agreement or that do not inflate, decompression bombs, bad close codes) and
    pure garbage;
  - the byte stream split at random into writes with small random delays;
  - resets (SO_LINGER {1, 0}, then close) and half-closes (shutdown(SHUT_WR)) at random
    points, a reset right after a request that makes the server close, clients that stop
    reading (a small SO_RCVBUF, never recv) while they send, slow and idle ones; for echo,
    clients that pipeline up to 2 MiB as fast as the server takes it while they read slowly
    (a small SO_RCVBUF, a pause after each read) or in bursts, then wait for all of it or
    half-close and read until EOF.

Every echo connection, whatever it sent (valid, mutated, garbage, cut, reset, half-closed,
not reading), must get back a prefix of what it sent: no holes, a stream that matches up to
some offset and goes on with bytes sent later (#28: a write past the cap that vanished). Over
TLS the same holds for the plaintext, and records that do not decrypt, on a connection that
corrupted nothing itself, are a hole too. One that waits for all of it must get all of it;
under a cap (echo_cap, tls_cap) the server may instead close it, EOF or a reset after a
prefix. Other connections that sent only valid messages check what comes back (RPC: each
call's answer; HTTP: statuses in order; RESP: well-formed replies, exact ones where the
command fixes them; DNS: one answer per query, its id, QR, rcode, AA and TC as the
zone says, the question echoed as sent; WebSocket: the upgrade's answer, then each message
back exactly, each ping's pong, each close's status, and for a hostile frame the close status
it must get; in a chat, a connection's own messages among the others', in order) and, when
they wait for it, that all of it comes. Every WebSocket connection's answers must be
well-formed server frames, nothing after a close frame. In ws_chat, some bursts are busy:
clients sending 1 MiB messages, and members that never read, which the group must close.
UDP flows of valid queries check each answer and ask again for late ones; floods (hundreds
of datagrams at once) need not be answered.

HTTP/2 (http2, python3-h2 needed, skipped without it) is played differently: the bytes
depend on what the server says (its SETTINGS, its WINDOW_UPDATEs), so a plan holds actions
(open a request, reset a stream, flood PINGs, give window, inject a broken frame) that an h2
client connection turns into frames as the conversation goes; the same connection is the
state machine that checks the server's frames (flow control, stream states, headers). Valid
connections open up to 200 streams (queued past the server's limit), GET / /bytes/N /stats,
HEAD, POST /echo with bodies cut into DATA frames at random (padding, trailers, an empty
END_STREAM frame), with our SETTINGS varied (windows from 0 to 2^31-1, frame sizes, header
table sizes), windows opened by hand then kept as small as 1 byte, slow readers, resets of
streams at random points, a half-close once all is sent, h2c by Upgrade (the first request
stream 1); every answer must come byte for byte. Other connections send malformed requests, frames broken (bits flipped, lengths that
lie, stream ids not allowed, frames a client may not send), garbage after the preface,
floods (PING, SETTINGS, WINDOW_UPDATE, empty DATA, PRIORITY, streams opened and reset at
once), or vanish, reset, trickle, idle or never read. A valid stream's answer not byte
for byte, a server frame h2 refuses, a GOAWAY with an error code on a connection that broke
no rule, or answers missing on a connection the server did not end (GOAWAY, a refused
stream, a close) are failures.

gRPC (grpc, python3-h2 too) is the HTTP/2 kind with calls for requests (GrpcCall,
GrpcClient): its settings, windows, floods, broken frames and garbage, and calls of every
method of TestService and grpc.health.v1.Health (EmptyCall, UnaryCall with response_size,
payloads, response_compressed and response_status; StreamingInputCall, StreamingOutputCall
with response sizes and intervals, FullDuplexCall ping-pong or all at once, a status asked
last, the half-close after some answers; Check and Watch), messages in protobuf's wire format
by hand, their 5-byte prefixes and bytes cut into DATA frames at random (inside the prefix
too, a byte a frame), gzip'd (grpc-encoding: gzip, flag 1) or not, metadata (-bin padded,
unpadded, comma-joined; the echo fields), grpc-timeout values long and short, the
half-close on DATA, an empty DATA frame or trailers, resets by the client after some bytes
or answers, up to 300 calls at once (past the server's 100 streams). Every valid call's
answer is checked whole: :status 200 and application/grpc, each message's flag and length,
its payload (the sizes asked, zeros), compressed exactly when asked and accepted, the echoed
metadata, grpc-status 0 or the status asked (and its percent-encoded message). Hostile calls
each expect their exact answer: lengths 0xFFFFFFFF and past 4 MiB, gzip bombs (8,
RESOURCE_EXHAUSTED), a compressed flag without grpc-encoding, flags 2 to 255, corrupt gzip,
two requests or none to a unary method, the stream ending inside a message, -bin metadata
that is not base64 (13, INTERNAL), an unknown grpc-encoding (12 with grpc-accept-encoding),
unknown paths (12), a wrong content-type (HTTP 415) or :method (405); malformed
grpc-timeouts must be read as none (the call answered). Deadlines of 1 ms on calls that
never answer (up to 1000 on one connection) must each end with DEADLINE_EXCEEDED from the
server (trailers-only, then RST_STREAM NO_ERROR: a stream left open would hold up the rest). PINGs are counted as codec/grpc/server.c on_ping counts them: GOAWAY
ENHANCE_YOUR_CALM "too_many_pings" is allowed only after max_ping_strikes + 2 of them, and
required after that many on a connection with no call. After every
burst a canary (a well-formed request on a fresh connection) must be answered correctly
within CANARY_SECONDS. At the end the server gets SIGTERM and must exit 0 with no sanitizer
report in its output.

    serverfuzz.py BIN_DIR [CERT_DIR] [--servers echo,echo_cap,tls,tls_cap,rpc,http,http2,...]
                  [--seeds 1,2]
                  [--bursts N] [--out DIR]
    serverfuzz.py BIN_DIR [CERT_DIR] --soak SECONDS [--servers ...]   fresh seeds until then
    serverfuzz.py BIN_DIR [CERT_DIR] --replay TRACE.json [--repeat N] a failure, again

BIN_DIR holds the servers (build/<tree>/examples); CERT_DIR the certificates
tests/pipeline/tls_certs.sh makes (server.pem, server.key, ca.pem), needed by the tls and
tls_cap servers only. A run is named by its server and seed: `--servers http --seeds 1234`
plays it again exactly (the inputs; the interleaving is the kernel's). A failure prints the
seed, the server and the tail of its output, and writes a trace (JSON: per burst, per
connection, the actions in order: bytes sent as hex, the writes they were split into, delays,
resets and half-closes; a UDP flow's datagrams) to OUT/serverfuzz-<server>-<seed>.json;
--replay plays a trace. Traces kept as tests live in tests/examples/fuzz_cases/ (see
fuzz/README.md).

Exit status: 0 when every run passed, 1 when one failed, 2 on a usage error, 77 when the
http2 or grpc server alone was asked for (or a trace of it) without python3-h2, or grpc
without eddy-grpc-server in BIN_DIR.
"""
import argparse
import base64
import collections
import ctypes
import errno
import gzip
import hashlib
import json
import os
import random
import re
import selectors
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import zlib

try:  # HTTP/2's client state machine (python3-h2): only the http2 server needs it
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
    import hpack
except ImportError:
    h2 = None

FDS = 256  # the servers' descriptor limit (ulimit -n), as in hostile.py
THREADS = 2  # worker loops: two, so that work really crosses threads (TSan)
# AddressSanitizer's quarantine of freed memory is 256 MiB by default; a server holding many
# connections fills it. hostile.py runs the servers with the same smaller one.
ASAN_QUARANTINE = "quarantine_size_mb=16:thread_local_quarantine_size_kb=256"
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer", "SUMMARY:")

# Generous for a sanitizer build on a loaded 2-core machine: a correct server answers a canary
# in milliseconds; one that has not after this long is hung (or gone).
CANARY_SECONDS = 30.0
# A connection that sent only valid requests and waits for all the answers waits this long.
ANSWER_SECONDS = 20.0
# A burst's connections are planned to end in a few seconds; past this they are closed.
BURST_SECONDS = 60.0
# Before SIGTERM: long enough for timers a burst left behind to fire (eddy-http-server
# lingers 1 s on a closing connection), so that what they touch is checked too.
SETTLE_SECONDS = 1.5
# A UDP query whose answer has not come this long after the flow began to wait is sent again
# (resolvers wait about as long).
UDP_RETRY_SECONDS = 1.0
STOP_SECONDS = 60.0  # SIGTERM to exit: graceful shutdown takes at most ~7 s

TRACE_FORMAT = "eddy-serverfuzz-1"


class Failure(Exception):
    """The server failed: crashed, hung, answered wrongly, or exited badly."""


# ---------------------------------------------------------------------------------------------
# Generation helpers. Every random choice comes from the run's random.Random, so a seed names
# the inputs exactly. Times are milliseconds, rounded, so that traces stay readable.

def ms(x):
    return round(x, 3)


def geometric(rng, mean, cap):
    """A count >= 1, small mostly, now and then large (up to cap)."""
    n = 1
    while n < cap and rng.random() > 1.0 / mean:
        n += 1
    return n


def token(rng, lo=1, hi=12, alphabet="abcdefghijklmnopqrstuvwxyz0123456789"):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


class Msg:
    """One protocol message to send: parts (bytes, times) concatenated; a part repeated many
    times is a large body kept small in the trace. expect says what its answer must be (the
    protocol's checker reads it), closes whether the server ends the connection after it."""

    def __init__(self, data, expect=None, closes=False, parts=None):
        self.parts = parts if parts is not None else [(data, 1)]
        self.expect = expect
        self.closes = closes

    def flat(self):
        return b"".join(p * n for p, n in self.parts)

    def big(self):
        return any(n > 1 for _, n in self.parts)


INTERESTING_BYTES = b"\x00\xff\r\n :;\t-0\x7f*$+\"%"
INTERESTING_NUMS = [b"0", b"1", b"-1", b"00", b"65535", b"65536", b"4294967295", b"4294967296",
                    b"9223372036854775807", b"9223372036854775808", b"99999999999999999999",
                    b"18446744073709551616", b"+1", b"0x10", b"1e3", b" 5", b"5 ", b"", b"-0",
                    b"1048576", b"1048577", b"8192", b"67108864", b"67108865"]
CRLF_SWAPS = [b"\n", b"\r", b"", b"\r\r\n", b"\n\r", b"\r\n\r\n", b"\r\n ", b"\x00\r\n"]


def mutate_generic(rng, data):
    """Flip, set, insert, delete, duplicate, cut bytes; corrupt numbers and CRLFs."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
        if not b:
            b += rng.randbytes(rng.randint(1, 8))
            continue
        n = len(b)
        i = rng.randrange(n)
        op = rng.choice(("flip", "set", "insert", "delete", "truncate", "dup", "number",
                         "number", "crlf", "crlf"))
        if op == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif op == "set":
            b[i] = rng.choice(INTERESTING_BYTES)
        elif op == "insert":
            what = rng.choice((rng.randbytes(rng.randint(1, 16)),
                               bytes([rng.choice(INTERESTING_BYTES)]) * rng.randint(1, 64),
                               b"\r\n", b"\r\n\r\n", rng.choice(INTERESTING_NUMS)))
            b[i:i] = what
        elif op == "delete":
            del b[i:i + rng.randint(1, 16)]
        elif op == "truncate":
            del b[i:]
        elif op == "dup":
            j = min(n, i + rng.randint(1, 64))
            b[j:j] = bytes(b[i:j]) * rng.randint(1, 4)
        elif op == "number":
            runs = [m.span() for m in re.finditer(rb"\d+", bytes(b))]
            if runs:
                s, e = rng.choice(runs)
                v = int(b[s:e]) if e - s < 30 else 0
                b[s:e] = rng.choice(INTERESTING_NUMS + [b"%d" % (v + rng.choice((-2, -1, 1, 2)))])
        elif op == "crlf":
            ends = [m.start() for m in re.finditer(rb"\r\n", bytes(b))]
            if ends:
                s = rng.choice(ends)
                b[s:s + 2] = rng.choice(CRLF_SWAPS)
    return bytes(b)


def garbage_bytes(rng, tokens):
    """Pure garbage: random bytes, or a soup of the protocol's own tokens (closer to what a
    parser takes a second look at)."""
    if rng.random() < 0.5:
        return rng.randbytes(rng.choice((1, 7, 64, 512, 4096, 65536)))
    return b"".join(rng.choice(tokens) for _ in range(rng.randint(1, 400)))


# ---------------------------------------------------------------------------------------------
# Protocols: each generates messages, mutates them, checks answers, and asks its canary.

def recv_until(sock, done, limit=1 << 20):
    """Read from a blocking socket until done(bytes) or EOF; what was read."""
    got = b""
    while not done(got) and len(got) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


class Proto:
    name = ""
    exe = ""
    tls = False  # the server speaks TLS (needs CERT_DIR); the plans handshake first
    fds = FDS  # the server's descriptor limit
    max_rss_mb = None  # the server's peak resident memory must stay below (None: not checked)
    # Scenario weights (see gen_conn); protocols override some.
    weights = {"valid": 20, "mutated": 20, "garbage": 6, "reset_mid": 10, "half_close": 8,
               "noread": 5, "close_rst": 12, "idle": 3, "slow": 4, "big": 2}
    tokens = [b"\r\n", b" ", b"0", b"1"]

    def argv(self, bin_dir, cert_dir):
        return [os.path.join(bin_dir, self.exe), "--port", "0", "--threads", str(THREADS)]

    def new_conn(self, rng):
        """Per-connection generation state (ids already used and such)."""
        return {}

    def preamble(self, rng, st, kind):
        """A message every connection of this kind sends first (WebSocket: the upgrade), or
        None."""
        return None

    def flood_message(self, rng, st):
        """A message a client that never reads floods with."""
        return self.message(rng, st)

    def message(self, rng, st):
        raise NotImplementedError

    def closing(self, rng, st):
        """A message after which the server closes the connection (or any, if it never does)."""
        return self.message(rng, st)

    def big(self, rng, st):
        return self.message(rng, st)

    def mutate(self, rng, msg):
        return mutate_generic(rng, msg.flat())

    def garbage(self, rng):
        return garbage_bytes(rng, self.tokens)

    def checker(self, expects, client):
        """A checker of the answers to expects (the valid messages' expect, in order)."""
        return None

    def canary(self, port, n, tls):
        raise NotImplementedError


class Echo(Proto):
    """eddy-echo-server. Every connection, whatever it sent, must get back a prefix of it
    (EchoChecker); one that waits for all of it must get all of it, unless the server has a
    cap (below), which may close the connection instead."""
    name = "echo"
    exe = "eddy-echo-server"
    weights = dict(Proto.weights, close_rst=6, big=4, bulk=2, bulk_shut=1)
    tokens = [b"\r\n", b"\x00", b"ping", b"\xff" * 8, b"x" * 100]
    cap = 0  # --max-pending (EDDY_MAX_PENDING_OUTBOUND); 0: none

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + (
            ["--max-pending", str(self.cap)] if self.cap else [])

    def message(self, rng, st):
        if rng.random() < 0.5:
            data = (" ".join(token(rng) for _ in range(rng.randint(1, 20))) + "\n").encode()
        else:
            data = rng.randbytes(rng.choice((1, 16, 300, 1500, 4096, 20000)))
        return Msg(data)

    def big(self, rng, st):
        # 4093 bytes repeated: a hole in the echo as long as a multiple of the part (the
        # server reads in powers of two) would still look like a prefix.
        return Msg(None, parts=[(rng.randbytes(4093), rng.randint(16, 256))])

    def gen_kind(self, rng, kind, plan, acts, st, budget, pre):
        """bulk: a client that pipelines 64 KiB to 2 MiB as fast as the server takes it while
        it reads slowly (a small SO_RCVBUF, a pause after each read) or in bursts (reading
        stopped for a while as it sends), then waits for all of it; bulk_shut: the same, then
        a half-close and reading until EOF. The server's replies pile up behind a full
        socket: with a cap that ends the connection; a hole in the echo is a failure."""
        plan["rcvbuf"] = rng.choice((2048, 4096, 16384, 65536, 0))  # 0: the kernel's default
        if rng.random() < 0.5:  # read once, then not for this long (ms)
            plan["read_gap_ms"] = ms(rng.choice((1, 2, 5, 10)))
        total = rng.choice((64, 256, 512, 1024, 2048)) << 10
        # A small receive buffer keeps the TCP window at a few hundred bytes to a few KiB:
        # through 2 KiB, TLS records (which decrypt only whole) and a loaded 2-core machine
        # under TSan, CI saw 100 KB arrive in 20 s while the server's socket held the rest
        # (ss: 951 KB notsent, rwnd-limited 99.8%). What must come back within
        # ANSWER_SECONDS stays small for them.
        if plan["rcvbuf"] and plan["rcvbuf"] <= 4096:
            total = min(total, 64 << 10)
        elif plan["rcvbuf"] and plan["rcvbuf"] <= 16384:
            total = min(total, 512 << 10)
        left = total
        while left > 0:
            n = min(left, rng.choice((4096, 16384, 65536, 65536, 262144)))
            acts.append({"op": "send", "gen": rng.getrandbits(32), "n": n})
            left -= n
            r = rng.random()
            if r < 0.3:
                acts.append({"op": "stop_reading", "ms": ms(rng.choice((5, 20, 50, 200)))})
            elif r < 0.4:
                acts.append({"op": "sleep", "ms": ms(rng.choice((1, 5, 20)))})
        if kind == "bulk_shut":
            acts.append({"op": "shut"})
            acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "eof": True})
        else:
            acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True})
        return []

    def checker(self, expects, client):
        return EchoChecker(client)

    def canary(self, port, n, tls):
        probe = b"canary %d %s\n" % (n, os.urandom(8).hex().encode())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            conn = tls.wrap_socket(s, server_hostname="localhost") if tls else s
            conn.sendall(probe)
            got = recv_until(conn, lambda g: len(g) >= len(probe))
        if got != probe:
            raise CanaryWrong(f"sent {probe!r}, got {got!r}")


class EchoChecker:
    """Echo: what comes back is always a prefix of what was sent, whatever was sent (mutated
    bytes and garbage come back too). No holes: a stream that matches up to some offset and
    then goes on with bytes sent later lost the bytes between (#28)."""

    def __init__(self, client):
        self.client = client
        self.ok = 0  # rx[:ok] is known to match (rx only grows: look at each byte once)

    def feed(self, rx):
        sent = self.client.sent_plain
        n = min(len(rx), len(sent))
        if memoryview(rx)[self.ok:n] != memoryview(sent)[self.ok:n]:
            at = next(i for i in range(self.ok, n) if rx[i] != sent[i])
            return f"echoed bytes differ from those sent at offset {at}{self.hole(rx, at)}"
        self.ok = n
        if len(rx) > len(sent):
            return f"more bytes echoed ({len(rx)}) than sent ({len(sent)})"
        return None

    def hole(self, rx, at):
        """Where the bytes at the difference were sent, if later and only once: the hole."""
        sent = bytes(self.client.sent_plain)
        probe = bytes(rx[at:at + 32])
        later = sent.find(probe, at + 1) if len(probe) >= 16 else -1
        if later < 0:
            return ""
        if sent.find(probe, later + 1) >= 0:  # a part repeated (big): which copy is unknown
            return " (they were sent later too: a hole)"
        return f" (they were sent at offset {later}: {later - at} bytes missing)"

    def complete(self, rx):
        return len(rx) >= len(self.client.sent_plain)


class EchoCap(Echo):
    """eddy-echo-server --max-pending: a hard cap on each connection's queued replies at the
    high water mark, so the pause (reading stops once above the mark) never engages and the
    cap alone bounds them. A write past it fails (EDDY_ENOBUFS) with no promise, which must
    end the connection after what was queued: a prefix, then EOF or a reset; never a hole
    (#28)."""
    name = "echo_cap"
    cap = 64 << 10  # EDDY_WRITE_BUFFER_HIGH_WATER_MARK's default
    weights = dict(Echo.weights, bulk=16, bulk_shut=10)


class TlsEcho(Echo):
    """The echo server with --tls: the same grammar as plaintext inside TLS, plus handshakes
    cut, mutated or replaced by garbage, records corrupted, close_notify."""
    name = "tls"
    tls = True
    weights = dict(Echo.weights, garbage=5, hs_mutated=8, hs_cut=6, record_flip=6)
    tokens = [b"\x16\x03\x01", b"\x16\x03\x03\x00\x05", b"\x17\x03\x03", b"\x15\x03\x03\x00\x02",
              b"\x00", b"\xff\xff", b"\x01\x00\x00"]

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + [
            "--tls", os.path.join(cert_dir, "server.pem"), os.path.join(cert_dir, "server.key")]


class TlsEchoCap(TlsEcho):
    """eddy-echo-server --tls --max-pending: a cap above the high water mark by less than
    the TLS handler's plaintext reads (16 KiB), so the pause stops reading first and the write
    that crossed the mark may still pass the cap. Plaintext refused (the TLS handler counts
    it against the cap) would be a hole in the plaintext; records refused, a client's
    decryption failing, which a client that corrupted nothing must never see."""
    name = "tls_cap"
    cap = 72 << 10
    weights = dict(TlsEcho.weights, bulk=16, bulk_shut=10)


RPC_METHODS = (b"echo", b"add", b"sleep")  # what eddy-rpc-server answers


def rpc_frame(call_id, method, body, mlen=None):
    payload = struct.pack(">QB", call_id, len(method) if mlen is None else mlen) + method + body
    return struct.pack(">I", len(payload)) + payload


class Rpc(Proto):
    """rpc_proto.h: u32 length, then u64 id, u8 method length, method, body."""
    name = "rpc"
    exe = "eddy-rpc-server"
    weights = dict(Proto.weights, close_rst=8)
    tokens = [b"\x00\x00\x00", b"\x00\x00\x00\x0d", b"\xff\xff\xff\xff", b"echo", b"add",
              b"sleep", b"\x04", b"\x00" * 8]

    def new_conn(self, rng):
        return {"id": rng.randrange(1 << 32) << 16}

    def message(self, rng, st):
        st["id"] += 1
        cid = st["id"]
        kind = rng.choices(("echo", "add", "sleep", "unknown", "bad_mlen", "bad_add",
                            "bad_sleep"), (50, 25, 8, 6, 4, 4, 3))[0]
        if kind == "echo":
            body = rng.randbytes(rng.choice((0, 1, 16, 200, 1500, 9000)))
            return Msg(rpc_frame(cid, b"echo", body), [cid, [0], body.hex()])
        if kind == "add":
            a, b = rng.getrandbits(64), rng.getrandbits(64)
            s = struct.pack(">Q", (a + b) & ((1 << 64) - 1))
            return Msg(rpc_frame(cid, b"add", struct.pack(">QQ", a, b)), [cid, [0], s.hex()])
        if kind == "sleep":
            # Short: a carrier thread sleeps it. A full partition answers status 3 at once.
            # Not waited for: the carrier partition it shares with other connections may be
            # sleeping a mutated call's 10 s (MAX_SLEEP_MS), or several, first.
            body = struct.pack(">I", rng.choice((0, 1, 2, 5, 10, 25)))
            return Msg(rpc_frame(cid, b"sleep", body), [cid, [0, 3], "", "slow"])
        if kind == "unknown":
            method = rng.choice((b"", b"ech", b"echoo", b"ADD", token(rng).encode()))
            while method in RPC_METHODS:  # a random token may spell one (seed 4926090432831)
                method = token(rng).encode()
            return Msg(rpc_frame(cid, method, rng.randbytes(rng.randint(0, 20))), [cid, [1], ""])
        if kind == "bad_mlen":  # the method length runs past the payload
            body = rng.randbytes(rng.randint(0, 10))
            return Msg(rpc_frame(cid, b"echo", body, mlen=4 + len(body) + rng.randint(1, 200)),
                       [cid, [2], ""])
        if kind == "bad_add":
            body = rng.randbytes(rng.choice((0, 8, 15, 17, 32)))
            return Msg(rpc_frame(cid, b"add", body), [cid, [2], ""])
        body = rng.randbytes(rng.choice((0, 3, 5, 8)))
        return Msg(rpc_frame(cid, b"sleep", body), [cid, [2], ""])

    def closing(self, rng, st):
        if rng.random() < 0.5:  # a payload too short for an id: the stream cannot be trusted
            return Msg(struct.pack(">I", 3) + b"abc", closes=True)
        # Longer than --max-frame (1 MiB with the length field): closed unread.
        return Msg(struct.pack(">I", (1 << 20) + rng.randint(0, 1000)) + rng.randbytes(100),
                   closes=True)

    def big(self, rng, st):
        st["id"] += 1
        n = rng.randint(16, 250)
        chunk = rng.randbytes(4096)
        head = struct.pack(">IQB", 8 + 1 + 4 + 4096 * n, st["id"], 4) + b"echo"
        return Msg(None, [st["id"], [0], None], parts=[(head, 1), (chunk, n)])

    def mutate(self, rng, msg):
        data = bytearray(msg.flat())
        if rng.random() < 0.4 and len(data) >= 13:
            if rng.random() < 0.7:  # the length field
                n = struct.unpack(">I", data[:4])[0]
                v = rng.choice((0, 1, 7, 8, 9, 12, n - 1, n + 1, n + rng.randint(2, 100),
                                1 << 20, (1 << 20) - 4, (1 << 20) - 3, 0xFFFFFFFF,
                                rng.getrandbits(32)))
                data[:4] = struct.pack(">I", v & 0xFFFFFFFF)
            else:  # the method length
                data[12] = rng.randrange(256)
            if rng.random() < 0.5:
                return bytes(data)
        return mutate_generic(rng, bytes(data))

    def checker(self, expects, client):
        return RpcChecker(expects)

    def canary(self, port, n, tls):
        body = b"canary %d %s" % (n, os.urandom(8).hex().encode())
        want = struct.pack(">IQB", 9 + len(body), 0xCA0000 + n, 0) + body
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(rpc_frame(0xCA0000 + n, b"echo", body))
            got = recv_until(s, lambda g: len(g) >= len(want))
        if got != want:
            raise CanaryWrong(f"echo call answered {got!r}, wanted {want!r}")


class RpcChecker:
    """Every answer is a well-formed frame for a call we made, once, with its status and body;
    complete when every call but the slow ones (sleeps) is answered."""

    def __init__(self, expects):
        self.calls = {e[0]: e for e in expects}  # id: [id, statuses, body hex, "slow"?]
        self.answered = set()
        self.awaited = {e[0] for e in expects if len(e) < 4}
        self.pos = 0

    def feed(self, rx):
        while len(rx) - self.pos >= 4:
            pos = self.pos
            n = struct.unpack(">I", rx[pos:pos + 4])[0]
            if n < 9:
                return f"answer frame of {n} bytes"
            if len(rx) - pos - 4 < n:
                break
            cid, status = struct.unpack(">QB", rx[pos + 4:pos + 13])
            body = bytes(rx[pos + 13:pos + 4 + n])
            self.pos = pos + 4 + n
            e = self.calls.get(cid)
            if e is None:
                return f"answer for call {cid:#x}, which was never made"
            if cid in self.answered:
                return f"call {cid:#x} answered twice"
            self.answered.add(cid)
            if status not in e[1]:
                return f"call {cid:#x} answered status {status}, wanted {e[1]}"
            if status == 0 and e[2] is not None and body.hex() != e[2]:
                return f"call {cid:#x} answered a body of {len(body)} bytes, not the one wanted"
        return None

    def complete(self, rx):
        return self.awaited <= self.answered


class Http(Proto):
    """HTTP/1.1 and 1.0: GET, HEAD, POST (and others, 404) with Content-Length or chunked
    bodies, keep-alive, Connection: close, Expect: 100-continue, pipelined."""
    name = "http"
    exe = "eddy-http-server"
    weights = dict(Proto.weights, close_rst=16)
    tokens = [b"GET ", b"HEAD ", b"POST ", b"/", b"/stats", b" HTTP/1.1", b" HTTP/1.0",
              b"\r\n", b"\r\n\r\n", b"Host: a", b"Content-Length: ", b"Transfer-Encoding: ",
              b"chunked", b"Connection: close", b"Expect: 100-continue", b": ", b"0", b"5",
              b"ffff", b";", b"\n", b" ", b"\t"]

    def request(self, rng, *, close=None, body=None, version=None):
        method = rng.choices(("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"),
                             (40, 10, 30, 5, 5, 3))[0]
        target = rng.choice(("/", "/", "/", "/stats", "/missing", "/a/b?c=d", "/?x=1",
                             "/" + token(rng), "/" + "x" * rng.randint(100, 3000)))
        version = version or rng.choices(("1.1", "1.0"), (85, 15))[0]
        headers = []
        if version == "1.1" or rng.random() < 0.5:
            headers.append(("Host", rng.choice(("a", "localhost", "127.0.0.1:8080"))))
        for _ in range(geometric(rng, 2, 20)):
            headers.append(rng.choice((("User-Agent", "serverfuzz/" + token(rng)),
                                       ("Accept", "*/*"), ("X-" + token(rng), token(rng, 0, 40)),
                                       ("Cookie", token(rng, 1, 200)))))
        if body is None and (method in ("POST", "PUT") or rng.random() < 0.1):
            body = rng.randbytes(rng.choice((0, 1, 10, 100, 1000, 5000, 20000)))
        chunked = body is not None and version == "1.1" and rng.random() < 0.35
        if body is not None and not chunked:
            headers.append(("Content-Length", str(len(body))))
        if chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        if body is not None and version == "1.1" and rng.random() < 0.2:
            headers.append(("Expect", "100-continue"))
        if close is None:
            close = rng.random() < 0.12
        keep = not close
        if version == "1.1" and close:
            headers.append(("Connection", rng.choice(("close", "Close", "keep-alive, close"))))
        elif version == "1.0" and keep:
            headers.append(("Connection", "keep-alive"))
        elif version == "1.1" and rng.random() < 0.1:
            headers.append(("Connection", "keep-alive"))
        rng.shuffle(headers)
        head = "".join(["\r\n" if rng.random() < 0.03 else "",
                        f"{method} {target} HTTP/{version}\r\n"] +
                       [f"{k}: {v}\r\n" for k, v in headers] + ["\r\n"]).encode()
        data = head + (self.chunks(rng, body) if chunked else (body or b""))
        ok = method in ("GET", "HEAD") and target in ("/", "/stats")
        expect = [method, 200 if ok else 404, version]
        return Msg(data, expect, closes=close)

    def chunks(self, rng, body):
        out, pos = [], 0
        while pos < len(body):
            n = min(len(body) - pos, rng.choice((1, 7, 100, 1000, 8192)))
            size = "%x" % n if rng.random() < 0.7 else "%X" % n
            ext = rng.choice(("", "", ";a=b", ";x"))
            out.append(f"{size}{ext}\r\n".encode() + body[pos:pos + n] + b"\r\n")
            pos += n
        trailer = rng.choice((b"", b"", b"X-Trailer: 1\r\n"))
        return b"".join(out) + b"0\r\n" + trailer + b"\r\n"

    def message(self, rng, st):
        return self.request(rng)

    def closing(self, rng, st):
        """Connection: close, or 1.0, or a request the server rejects (then it closes)."""
        r = rng.random()
        if r < 0.4:
            return self.request(rng, close=True)
        if r < 0.5:
            return self.request(rng, close=True, version="1.0")
        bad = rng.choice((b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
                          b"GET / HTTP/1.1\r\n\r\n",
                          b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
                          b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\nabc",
                          b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
                          b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n",
                          b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"zz\r\n",
                          b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
                          b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"))
        return Msg(bad, closes=True)

    def big(self, rng, st):
        n = rng.randint(16, 255)  # at most 1044480 bytes: within the 1 MiB limit
        head = (f"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: {4096 * n}\r\n\r\n").encode()
        return Msg(None, ["POST", 404, "1.1"], parts=[(head, 1), (rng.randbytes(4096), n)])

    def checker(self, expects, client):
        return HttpChecker(expects)

    def canary(self, port, n, tls):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: canary-%d\r\n\r\n" % n)
            got = recv_until(s, lambda g: b"Hello, World!" in g)
        if not (got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\nHello, World!")):
            raise CanaryWrong(f"GET / answered {got[:300]!r}")


def chunked_length(rx, at):
    """The length of the chunked body at rx[at:] (its chunks, the zero chunk, and trailers):
    None while incomplete, a string saying what is wrong when malformed."""
    pos = at
    while True:
        eol = rx.find(b"\r\n", pos)
        if eol < 0:
            return None if len(rx) - pos < 64 else "a chunk size line with no end"
        m = re.fullmatch(rb"([0-9a-fA-F]{1,16})(;[^\r\n]*)?", bytes(rx[pos:eol]))
        if not m:
            return f"malformed chunk size line {bytes(rx[pos:eol])[:40]!r}"
        n = int(m.group(1), 16)
        pos = eol + 2
        if n == 0:
            end = rx.find(b"\r\n", pos)  # trailers end at an empty line
            while end > pos:
                pos = end + 2
                end = rx.find(b"\r\n", pos)
            return None if end < 0 else end + 2 - at
        if len(rx) < pos + n + 2:
            return None
        if rx[pos + n:pos + n + 2] != b"\r\n":
            return "a chunk not followed by CRLF"
        pos += n + 2


class HttpChecker:
    """Answers in order: a status line, headers, the body Content-Length says (none for HEAD);
    100 Continue allowed between; nothing after the answer to a closing request."""

    def __init__(self, expects):
        self.expects = expects  # [method, status, version, closes] per request, in order
        self.pos = 0
        self.n = 0

    def wanted(self):
        for i, e in enumerate(self.expects):
            if e[3]:
                return i + 1
        return len(self.expects)

    def feed(self, rx):
        while True:
            end = rx.find(b"\r\n\r\n", self.pos)
            if end < 0:
                if len(rx) - self.pos > 16384:
                    return "an answer's head has no end"
                return None
            head = bytes(rx[self.pos:end]).decode("latin-1")
            m = re.match(r"HTTP/1\.([01]) (\d{3}) ", head)
            if not m:
                return f"malformed status line {head[:80]!r}"
            status = int(m.group(2))
            if status == 100:
                self.pos = end + 4
                continue
            if self.n >= self.wanted():
                return f"an answer ({status}) beyond the {self.wanted()} requests answerable"
            method, want, version, _ = self.expects[self.n]
            cl = re.search(r"\r\ncontent-length:\s*(\d+)", head, re.I)
            length = 0 if method == "HEAD" else int(cl.group(1)) if cl else 0
            if (method != "HEAD" and status not in (204, 304) and
                    re.search(r"\r\ntransfer-encoding:\s*chunked\r\n", head + "\r\n", re.I)):
                length = chunked_length(rx, end + 4)
                if isinstance(length, str):
                    return f"request {self.n} ({method}): {length}"
                if length is None:
                    return None
            if len(rx) < end + 4 + length:
                return None
            if not self.allowed(status, want):
                return f"request {self.n} ({method}) answered {status}, wanted {want}"
            if m.group(1) != version[-1]:
                return f"request {self.n} (HTTP/{version}) answered with HTTP/1.{m.group(1)}"
            self.n += 1
            self.pos = end + 4 + length

    def allowed(self, status, want):
        return status == want

    def complete(self, rx):
        return self.n >= self.wanted()


class HttpFiles(Http):
    """eddy-http-server --root DIR --gzip (#33): GET and HEAD of files and directories, with
    single, multiple, unsatisfiable and malformed ranges, conditionals, precompressed siblings,
    files compressed on the fly (chunked answers), other methods (405), and targets that try to
    leave the root; no answer may hold the secret placed next to the root, and every status is
    the one the rules give (or one of a few for hostile targets)."""
    name = "http_files"
    # Each answer holds its file open until it is written, so pipelined requests to a slow
    # reader hold one each: at 256 the listener ran out and reset valid connections (as it
    # must), which this checker cannot tell from a lost answer.
    fds = 1024
    SECRET = b"serverfuzz-secret-7f3a"
    FILES = {"index.html": b"<html>files</html>\n", "a.txt": b"abcdefghijklmnopqrstuvwxyz",
             "empty.bin": b"", "sub/index.html": b"sub\n", "sub/k4.bin": bytes(range(256)) * 16,
             "doc.txt": b"plain\n", "doc.txt.gz": b"gz-bytes",
             "text.txt": b"".join(b"line %d of a text the compressor codes\n" % i
                                  for i in range(600))}
    root = None

    def argv(self, bin_dir, cert_dir):
        if HttpFiles.root is None:
            top = tempfile.mkdtemp(prefix="serverfuzz-files-")
            HttpFiles.root = os.path.join(top, "root")
            for name, data in self.FILES.items():
                path = os.path.join(HttpFiles.root, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
            with open(os.path.join(top, "secret.txt"), "wb") as f:
                f.write(self.SECRET)
            os.symlink("../secret.txt", os.path.join(HttpFiles.root, "link.txt"))
        return super().argv(bin_dir, cert_dir) + ["--root", HttpFiles.root, "--gzip"]

    def target(self, rng):
        """A target and the statuses a GET of it may get without a Range."""
        r = rng.random()
        if r < 0.5:
            name = rng.choice([n for n in self.FILES if not n.endswith(".gz")])
            return "/" + name, 200
        if r < 0.6:
            return rng.choice((("/", 200), ("/sub/", 200), ("/sub", 301), ("/sub/?q=1", 200)))
        if r < 0.7:
            return "/missing-" + token(rng), 404
        bad = rng.choice(("/../secret.txt", "/%2e%2e/secret.txt", "/sub/%2e%2e%2f..%2fsecret.txt",
                          "/link.txt", "/%00", "/a.txt%00.html", "/..%5csecret.txt",
                          "/%c0%ae%c0%ae/secret.txt", "/sub/../a.txt", "/%252e%252e/secret.txt",
                          "/" + "a/" * rng.randint(1, 2000)))
        return bad, (400, 403, 404)

    def request(self, rng, *, close=None, body=None, version=None):
        version = version or rng.choices(("1.1", "1.0"), (90, 10))[0]
        method = rng.choices(("GET", "HEAD", "POST", "DELETE"), (70, 15, 10, 5))[0]
        target, want = self.target(rng)
        headers = [("Host", "a")]
        gettable = want == 200 and method in ("GET", "HEAD")
        name = target.split("?")[0].lstrip("/")
        size = len(self.FILES.get(name, self.FILES.get(name + "index.html", b"")))
        if gettable and rng.random() < 0.4:
            rv, rwant = rng.choice((("bytes=0-9", 206), ("bytes=-5", 206), ("bytes=1-2,4-", 206),
                                    ("bytes=99999-", 416), ("bytes=x", 200), ("items=0-1", 200),
                                    ("bytes=5-2", 200), ("bytes = 0-0", 200)))
            if rwant != 200 and size == 0:
                rwant = 416  # nothing of an empty file is satisfiable
            headers.append(("Range", rv))
            want = rwant if method == "GET" else 200
        elif gettable and rng.random() < 0.2:
            headers.append(("If-None-Match", "*"))
            want = 304
        if gettable and version == "1.1" and rng.random() < 0.4:
            # Not for 1.0: a coded file's length is not known, so the close would end it.
            headers.append(("Accept-Encoding", rng.choice(("gzip", "br;q=0, gzip", "identity",
                                                           "br", "zstd"))))
        if method in ("POST", "DELETE"):
            want = 405  # the method is refused before the path is looked at
            body = body if body is not None else rng.randbytes(rng.choice((0, 10, 1000)))
        if body is not None:
            headers.append(("Content-Length", str(len(body))))
        close = rng.random() < 0.1 if close is None else close
        if version == "1.1" and close:
            headers.append(("Connection", "close"))
        elif version == "1.0" and not close:
            headers.append(("Connection", "keep-alive"))
        head = (f"{method} {target} HTTP/{version}\r\n" +
                "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode()
        return Msg(head + (body or b""), [method, want, version], closes=close)

    def big(self, rng, st):
        return self.request(rng)

    def checker(self, expects, client):
        return HttpFilesChecker(expects, self.SECRET)

    def canary(self, port, n, tls):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /a.txt?canary-%d HTTP/1.1\r\nHost: a\r\n\r\n" % n)
            got = recv_until(s, lambda g: g.endswith(b"xyz"))
        if not (got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\n" + self.FILES["a.txt"])):
            raise CanaryWrong(f"GET /a.txt answered {got[:300]!r}")


class HttpFilesChecker(HttpChecker):
    """HttpChecker with a set of statuses allowed per request, and no secret anywhere."""

    def __init__(self, expects, secret):
        # 503 is always allowed: under the fuzzer's 256 descriptors the server may have none
        # left to open the file with.
        # A set comes as a tuple, or as a list once a trace went through JSON.
        super().__init__([[m, (tuple(w) if isinstance(w, (tuple, list)) else (w,)) + (503,), v,
                           c] for m, w, v, c in expects])
        self.secret = secret

    def allowed(self, status, want):
        return status in want

    def feed(self, rx):
        if self.secret in rx:
            return "an answer holds the secret placed next to the root"
        return super().feed(rx)


RESP_KEYS = ["k%d" % i for i in range(8)] + ["counter", "big"]


def resp_encode(rng, args):
    """An array of bulk strings, or (args without blanks) an inline command."""
    if all(re.fullmatch(rb"[A-Za-z0-9_:.+-]+", a) for a in args) and rng.random() < 0.25:
        return b" ".join(args) + rng.choice((b"\r\n", b"\r\n", b"\n"))
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class Resp(Proto):
    """RESP2: arrays of bulk strings and inline commands from examples/resp_store.c."""
    name = "resp"
    exe = "eddy-resp-server"
    weights = dict(Proto.weights, close_rst=10)
    tokens = [b"*", b"$", b"\r\n", b"-1", b"0", b"3", b"SET", b"GET", b"k1", b"PING", b"+", b":",
              b"\n", b" ", b"\"", b"'", b"*-1", b"$-1", b"999999999"]

    def message(self, rng, st):
        key = rng.choice(RESP_KEYS).encode() if rng.random() < 0.9 else token(rng).encode()
        val = (str(rng.randint(-100, 100)) if rng.random() < 0.3 else token(rng, 0, 200)).encode()
        c = rng.choices(
            ("get", "set", "set_opt", "del", "incr", "decr", "incrby", "expire", "pexpire", "ttl",
             "pttl", "persist", "exists", "echo", "ping", "ping_msg", "dbsize", "info", "select",
             "config", "command", "client", "flushall", "unknown", "arity"),
            (14, 14, 5, 5, 6, 3, 3, 3, 3, 2, 2, 2, 2, 4, 5, 2, 1, 1, 1, 1, 1, 1, 0.3, 2, 2))[0]
        expect = None  # any well-formed reply
        if c == "get":
            args = [b"GET", key]
        elif c == "set":
            args = [b"SET", key, val]
        elif c == "set_opt":
            opt = rng.choice(([b"EX", b"1"], [b"PX", b"%d" % rng.randint(1, 300)], [b"NX"],
                              [b"XX"], [b"KEEPTTL"], [b"GET"]))
            args = [b"SET", key, val] + opt
        elif c == "del":
            args = [b"DEL"] + [rng.choice(RESP_KEYS).encode() for _ in range(rng.randint(1, 3))]
        elif c in ("incr", "decr"):
            args = [c.upper().encode(), rng.choice((b"counter", key))]
        elif c == "incrby":
            args = [rng.choice((b"INCRBY", b"DECRBY")), b"counter",
                    rng.choice((b"1", b"-5", b"1000", b"9223372036854775807"))]
        elif c == "expire":
            args = [b"EXPIRE", key, rng.choice((b"0", b"1", b"2", b"-1"))]
        elif c == "pexpire":
            args = [b"PEXPIRE", key, b"%d" % rng.randint(0, 500)]
        elif c in ("ttl", "pttl", "persist", "exists"):
            args = [c.upper().encode(), key]
        elif c == "echo":
            args = [b"ECHO", val]
            expect = (b"$%d\r\n" % len(val) + val + b"\r\n").hex()
        elif c == "ping":
            args = [b"PING"]
            expect = b"+PONG\r\n".hex()
        elif c == "ping_msg":
            args = [b"PING", val]
            expect = (b"$%d\r\n" % len(val) + val + b"\r\n").hex()
        elif c == "dbsize":
            args = [b"DBSIZE"]
        elif c == "info":
            args = [b"INFO"] + rng.choice(([], [b"server"], [b"keyspace"], [b"nope"]))
        elif c == "select":
            args = [b"SELECT", b"0"]
            expect = b"+OK\r\n".hex()
        elif c == "config":
            args = [b"CONFIG", b"GET", rng.choice((b"save", b"appendonly", b"x"))]
        elif c == "command":
            args = [b"COMMAND"] + rng.choice(([], [b"COUNT"], [b"DOCS"]))
        elif c == "client":
            args = [b"CLIENT", b"SETNAME", b"fuzz"]
            expect = b"+OK\r\n".hex()
        elif c == "flushall":
            args = [b"FLUSHALL"]
        elif c == "unknown":
            # (a prefix, so that a random name is never a real command, QUIT say)
            args = [rng.choice((b"KEYS", b"HGET", b"SUBSCRIBE", b"NO" + token(rng).encode())), key]
            expect = "-"
        else:  # wrong arity
            args = [rng.choice((b"GET", b"SET", b"INCR", b"TTL", b"ECHO"))]
            expect = "-"
        if rng.random() < 0.5:
            args[0] = args[0].lower()
        return Msg(resp_encode(rng, args), expect)

    def closing(self, rng, st):
        if rng.random() < 0.5:
            return Msg(resp_encode(rng, [rng.choice((b"QUIT", b"quit"))]), b"+OK\r\n".hex(),
                       closes=True)
        bad = rng.choice((b"*1\r\n$x\r\n", b"*2\r\n$3\r\nGET\r\n:1\r\n", b"*-5\r\n",
                          b"$3\r\nGET\r\n", b"*1\r\n$999999999999\r\n", b"\"unbalanced\r\n"))
        return Msg(bad, closes=True)

    def big(self, rng, st):
        n = rng.randint(16, 255)
        head = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % (4096 * n)
        return Msg(None, None, parts=[(head, 1), (rng.randbytes(4096), n), (b"\r\n", 1)])

    def checker(self, expects, client):
        return RespChecker(expects)

    def canary(self, port, n, tls):
        tok = b"canary-%d-%s" % (n, os.urandom(8).hex().encode())
        want = b"+PONG\r\n$%d\r\n%s\r\n" % (len(tok), tok)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"PING\r\n" + resp_encode(random.Random(n), [b"ECHO", tok]))
            got = recv_until(s, lambda g: len(g) >= len(want))
        if got != want:
            raise CanaryWrong(f"PING, ECHO answered {got!r}")


def resp_reply_end(rx, pos, depth=0):
    """Where the RESP2 reply at rx[pos:] ends; None if it has not all arrived; raises
    ValueError when it is malformed."""
    nl = rx.find(b"\r\n", pos)
    if nl < 0:
        if len(rx) - pos > 65536:
            raise ValueError("reply line without an end")
        return None
    kind, line = rx[pos:pos + 1], bytes(rx[pos + 1:nl])
    if kind in (b"+", b"-"):
        return nl + 2
    if kind == b":":
        if not re.fullmatch(rb"-?\d+", line):
            raise ValueError(f"integer reply {line[:40]!r}")
        return nl + 2
    if kind in (b"$", b"*"):
        if not re.fullmatch(rb"-1|\d+", line):
            raise ValueError(f"length {line[:40]!r}")
        n = int(line)
        if kind == b"$":
            if n < 0:
                return nl + 2
            if len(rx) < nl + 2 + n + 2:
                return None
            if rx[nl + 2 + n:nl + 4 + n] != b"\r\n":
                raise ValueError("bulk reply not ended by CRLF")
            return nl + 4 + n
        end = nl + 2
        for _ in range(max(n, 0)):
            end = resp_reply_end(rx, end, depth + 1)
            if end is None:
                return None
        return end
    raise ValueError(f"reply starting {bytes(rx[pos:pos + 20])!r}")


class RespChecker:
    """Replies well-formed, one per command, exact where the command fixes it; nothing after
    QUIT's +OK."""

    def __init__(self, expects):
        self.expects = expects  # per command: None (any), "-" (an error), or the reply in hex
        self.pos = 0
        self.n = 0

    def feed(self, rx):
        while self.pos < len(rx):
            try:
                end = resp_reply_end(rx, self.pos)
            except ValueError as e:
                return f"malformed reply {self.n}: {e}"
            if end is None:
                return None
            if self.n >= len(self.expects):
                return f"a reply beyond the {len(self.expects)} commands sent"
            got, want = bytes(rx[self.pos:end]), self.expects[self.n]
            if want == "-" and not got.startswith(b"-"):
                return f"command {self.n} should have failed; answered {got[:80]!r}"
            if want not in (None, "-") and got.hex() != want:
                return f"command {self.n} answered {got[:80]!r}, wanted {bytes.fromhex(want)!r}"
            self.n += 1
            self.pos = end
        return None

    def complete(self, rx):
        return self.n >= len(self.expects)


# DNS (eddy-dns-server, examples/zones/example.zone): queries over TCP with their two-byte
# length, and over UDP (UdpClient below), one datagram each.

DNS_ZONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "zones", "example.zone")
T_A, T_NS, T_CNAME, T_SOA, T_MX, T_TXT, T_AAAA, T_OPT, T_IXFR, T_AXFR, T_ANY = \
    1, 2, 5, 6, 15, 16, 28, 41, 251, 252, 255
NOERROR, FORMERR, NXDOMAIN, NOTIMP, REFUSED, BADVERS = 0, 1, 3, 4, 5, 16
# The zone's names below example.test. ("" the apex) and their types; CNAMEs and their
# targets (relative, or None: out of the zone); the empty non-terminals have no types.
DNS_TYPES = {"": {T_SOA, T_NS, T_MX, T_A, T_AAAA, T_TXT}, "ns1": {T_A, T_AAAA}, "ns2": {T_A},
             "mail": {T_A, T_AAAA}, "host": {T_A, T_AAAA}, "txt": {T_TXT}, "c10": {T_A},
             "a.b.c.deep": {T_A}, "b.c.deep": set(), "c.deep": set(), "deep": set(),
             "many": {T_A}}
DNS_CNAMES = {"www": "web", "web": "host", "alias-out": None, "dangling": "nowhere",
              "loop1": "loop2", "loop2": "loop1"}
DNS_CNAMES.update({"c%d" % i: "c%d" % (i + 1) for i in range(1, 10)})
for _n in DNS_CNAMES:
    DNS_TYPES[_n] = {T_CNAME}
DNS_MANY = 40  # A records at many: 16 bytes each in an answer
# The longest query eddy-dns-server's UDP side reads (the datagram channel's default
# EDDY_DATAGRAM_RECV_SIZE); a longer one is dropped unanswered.
DNS_UDP_QUERY_MAX = 2048
DNS_QTYPES = [T_A] * 8 + [T_AAAA] * 4 + [T_NS, T_CNAME, T_SOA, T_MX, T_TXT, T_ANY] * 2 + \
    [0, 3, 99, 257, 65535, T_AXFR, T_IXFR]


def dns_name(rng):
    """A query name as labels (bytes): the zone's names, names below them that do not exist,
    names outside the zone, the root, long names; letters in random case (0x20)."""
    r = rng.random()
    zone = [b"example", b"test"]
    if r < 0.55:
        rel = rng.choice(sorted(DNS_TYPES))
        labels = [x.encode() for x in rel.split(".") if x] + zone
    elif r < 0.7:
        base = rng.choice(sorted(DNS_TYPES))
        labels = [token(rng, 1, 20).encode() for _ in range(rng.randint(1, 3))] + \
            [x.encode() for x in base.split(".") if x] + zone
    elif r < 0.85:
        labels = rng.choice(([b"example", b"net"], [b"test"], [b"com"], [b"example", b"testing"],
                             [b"www", b"example", b"net"], [b"xexample", b"test"], [b"arpa"],
                             [token(rng).encode(), b"org"], []))
    elif r < 0.95:  # binary labels, dots and escapes inside labels
        labels = [rng.randbytes(rng.randint(1, 63)) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.5:
            labels += zone
    else:  # near the 255-byte limit
        labels = []
        while sum(len(x) + 1 for x in labels) + 64 < 255 - 14:
            labels.append(token(rng, 63, 63).encode())
        labels += zone
    if rng.random() < 0.6:  # 0x20: random case, ASCII letters only
        labels = [bytes(c ^ 0x20 if 97 <= (c | 0x20) <= 122 and rng.random() < 0.5 else c
                        for c in x) for x in labels]
    return labels


def dns_wire(labels):
    return b"".join(bytes([len(x)]) + x for x in labels) + b"\x00"


def dns_expect_rcode(labels, qtype, qclass, version):
    """The rcode and AA the zone's answer has (eddy_dns_answer in include/eddy/dns.h)."""
    if version not in (None, 0):
        return BADVERS, False
    if qclass not in (1, 255):
        return REFUSED, False
    if qtype in (T_AXFR, T_IXFR):
        return NOTIMP, False
    low = [x.lower() for x in labels]  # ASCII only, as DNS compares names
    if low[-2:] != [b"example", b"test"]:
        return REFUSED, False
    try:
        name = b".".join(low[:-2]).decode("ascii")
    except UnicodeDecodeError:
        return NXDOMAIN, True
    if any(x in name for x in "\\ ") or any(b"." in x for x in low[:-2]):
        return NXDOMAIN, True  # a dot or a backslash inside a label: no such name
    seen = set()
    for _ in range(8):
        if name not in DNS_TYPES:
            return NXDOMAIN, True
        types = DNS_TYPES[name]
        if qtype == T_ANY or qtype in types or T_CNAME not in types:
            return NOERROR, True
        seen.add(name)
        name = DNS_CNAMES[name]
        if name is None or name in seen:
            return NOERROR, True
    return NOERROR, True


def dns_query(rng, st, *, big=False):
    """A valid query and what its answer must be: [id, question hex, rcode, aa, tc over UDP,
    opt]."""
    ids = st.setdefault("ids", set())
    qid = rng.randrange(65536)
    while qid in ids and len(ids) < 60000:
        qid = rng.randrange(65536)
    ids.add(qid)
    labels = dns_name(rng)
    qtype = rng.choice(DNS_QTYPES)
    if labels[:1] and labels[0].lower() == b"many" and rng.random() < 0.5:
        qtype = rng.choice((T_A, T_ANY))  # the answer that truncates
    qclass = rng.choices((1, 255, 3, 4, 254, 65535), (90, 4, 3, 1, 1, 1))[0]
    flags = 0x0100 if rng.random() < 0.5 else 0  # RD, copied back
    flags |= rng.choice((0, 0, 0, 0x0020, 0x0010))  # AD, CD: ignored
    question = dns_wire(labels) + struct.pack(">HH", qtype, qclass)
    opt = b""
    version = None
    udp_size = 0
    if big or rng.random() < 0.6:
        udp_size = rng.choice((0, 1, 511, 512, 600, 685, 686, 687, 1232, 1232, 4096, 65535,
                               rng.randrange(65536)))
        version = 0 if rng.random() < 0.95 else rng.choice((1, 255))
        do = 0x8000 if rng.random() < 0.3 else 0
        options = b""
        for _ in range(geometric(rng, 3, 5) - 1):
            code = rng.choice((3, 8, 10, 12, 15, 65001))  # NSID, ECS, cookie, padding, EDE
            data = rng.randbytes(rng.choice((0, 2, 8, 16, 40)))
            options += struct.pack(">HH", code, len(data)) + data
        if big:  # padding: a query up to what a UDP read takes, or far past it on TCP
            pad = rng.randint(1000, 1900) if big == "udp" else rng.randint(2000, 60000)
            if big == "udp":
                # eddy-dns-server reads datagrams of DNS_UDP_QUERY_MAX bytes at most; longer
                # ones are dropped unanswered.
                pad = min(pad, DNS_UDP_QUERY_MAX - (12 + len(question) + 11 + len(options) + 4))
            options += struct.pack(">HH", 12, pad) + bytes(pad)
        opt = b"\x00" + struct.pack(">HHIH", T_OPT, udp_size, (version or 0) << 16 | do,
                                    len(options)) + options
    msg = struct.pack(">HHHHHH", qid, flags, 1, 0, 0, 1 if opt else 0) + question + opt
    rcode, aa = dns_expect_rcode(labels, qtype, qclass, version)
    limit = min(max(512, udp_size if opt else 0), 4096) - (11 if opt else 0)
    low = [x.lower() for x in labels]
    tc = (rcode == NOERROR and low == [b"many", b"example", b"test"] and
          qtype in (T_A, T_ANY) and 12 + len(question) + 16 * DNS_MANY > limit)
    return msg, [qid, question.hex(), rcode, aa, tc, bool(opt)]


def dns_skip_name(b, off):
    while True:
        if off >= len(b):
            raise ValueError("a name runs past the end")
        n = b[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            if off + 2 > len(b):
                raise ValueError("a pointer runs past the end")
            return off + 2
        if n & 0xC0:
            raise ValueError(f"label type {n:#x}")
        off += 1 + n


def dns_parse(b):
    """The header fields and records of a message; ValueError when it is malformed."""
    if len(b) < 12:
        raise ValueError(f"{len(b)} bytes, no header")
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", b[:12])
    off = 12
    for _ in range(qd):
        off = dns_skip_name(b, off) + 4
    rrs = []
    for i in range(an + ns + ar):
        start = off
        off = dns_skip_name(b, off)
        if off + 10 > len(b):
            raise ValueError(f"record {i} cut")
        rtype, rclass, ttl, rdlen = struct.unpack(">HHIH", b[off:off + 10])
        off += 10 + rdlen
        rrs.append((0 if i < an else 1 if i < an + ns else 2, rtype, rclass, ttl,
                    b[off - rdlen:off], start))
    if off != len(b):
        raise ValueError(f"{len(b) - off} bytes after the last record" if off < len(b)
                         else "the last record runs past the end")
    return {"id": qid, "flags": flags, "counts": (qd, an, ns, ar), "rrs": rrs}


def dns_check(b, e, udp):
    """What is wrong with the answer b to the query whose expectation is e, or None."""
    qid, qhex, rcode, aa, tc, opt = e
    try:
        m = dns_parse(b)
    except ValueError as err:
        return f"a malformed answer ({err}): {b[:64].hex()}"
    flags, (qd, an, ns, ar) = m["flags"], m["counts"]
    what = f"query {qid:#06x}"
    if m["id"] != qid:
        return f"{what}: answered with id {m['id']:#06x}"
    if not flags & 0x8000 or (flags >> 11) & 15 != 0:
        return f"{what}: flags {flags:#06x} (QR clear or opcode not QUERY)"
    q = bytes.fromhex(qhex)
    if qd != 1 or b[12:12 + len(q)] != q:
        return f"{what}: question not echoed: {b[12:12 + len(q) + 4].hex()}, sent {qhex}"
    opts = [r for r in m["rrs"] if r[1] == T_OPT]
    if len(opts) != (1 if opt else 0) or (opts and opts[0][0] != 2):
        return f"{what}: {len(opts)} OPT records, the query had {1 if opt else 0}"
    got = (flags & 15) | ((opts[0][3] >> 24) << 4 if opts else 0)
    if got != rcode:
        return f"{what}: rcode {got}, wanted {rcode}"
    if bool(flags & 0x0400) != aa:
        return f"{what}: AA {'set' if aa else 'clear'} wanted"
    want_tc = tc and udp
    if bool(flags & 0x0200) != want_tc:
        return f"{what}: TC {'set' if want_tc else 'clear'} wanted ({'UDP' if udp else 'TCP'})"
    if want_tc and an + ns != 0:
        return f"{what}: truncated, yet {an} answers and {ns} authority records"
    if not want_tc and rcode == NXDOMAIN and not any(r[0] == 1 and r[1] == T_SOA
                                                     for r in m["rrs"]):
        return f"{what}: NXDOMAIN without the SOA"
    return None


class Dns(Proto):
    """eddy-dns-server: DNS queries with their two-byte length over TCP (pipelined), and
    datagrams over UDP (plans with "udp": UdpClient)."""
    name = "dns"
    exe = "eddy-dns-server"
    weights = dict(Proto.weights, close_rst=10)
    tokens = [b"\x00\x0c", b"\x00", b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", b"\xc0\x0c",
              b"\x07example\x04test\x00", b"\x00\x01\x00\x01", b"\x00\x00\x29\x10\x00",
              b"\xff\xff", b"\x3f", b"\x80\x00", b"\x00\x00\x01\x00\x01"]
    udp_share = 0.4  # of a burst's plans, UDP flows
    udp_weights = {"udp_valid": 30, "udp_mutated": 20, "udp_garbage": 12, "udp_flood": 10}

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + ["--zone", DNS_ZONE]

    def message(self, rng, st):
        msg, e = dns_query(rng, st)
        return Msg(struct.pack(">H", len(msg)) + msg, e)

    def closing(self, rng, st):
        """A frame with no whole header, or a response: the server closes after it."""
        r = rng.random()
        if r < 0.25:
            return Msg(b"\x00\x00", closes=True)
        if r < 0.6:
            junk = rng.randbytes(rng.randint(1, 11))
            return Msg(struct.pack(">H", len(junk)) + junk, closes=True)
        msg = bytearray(dns_query(rng, st)[0])
        msg[2] |= 0x80  # QR: a response
        return Msg(struct.pack(">H", len(msg)) + bytes(msg), closes=True)

    def big(self, rng, st):
        msg, e = dns_query(rng, st, big="tcp")
        return Msg(struct.pack(">H", len(msg)) + msg, e)

    def mutate_query(self, rng, q):
        """DNS-aware damage to a query (no length prefix)."""
        b = bytearray(q)
        op = rng.choice(("counts", "counts", "ptr_loop", "ptr_forward", "label_past_end",
                         "label_long", "qr_opcode", "two_opts", "generic"))
        if op == "counts":
            i = rng.choice((4, 6, 8, 10))
            b[i:i + 2] = struct.pack(">H", rng.choice((0, 2, 3, 255, 0xFFFF,
                                                       rng.randrange(65536))))
        elif op == "ptr_loop":  # the question's name a pointer to itself, or two in a ring
            end = dns_skip_name(b, 12)
            b[12:end] = rng.choice((b"\xc0\x0c", b"\x01a\xc0\x0c", b"\xc0\x0e\xc0\x0c"))
        elif op == "ptr_forward":
            end = dns_skip_name(b, 12)
            b[12:end] = b"\xc0" + bytes([rng.choice((0, 5, 11, 0x20, 0xff))])
        elif op == "label_past_end":
            cut = rng.randint(13, max(13, dns_skip_name(b, 12) - 1))
            del b[cut:]
            b[12] = rng.choice((b[12], 63, 0x3f))
        elif op == "label_long":
            b[12] = rng.choice((64, 100, 0x7f, 0xbf))
        elif op == "qr_opcode":
            b[2] = (b[2] & 0x87) | (rng.choice((1, 2, 3, 4, 5, 15)) << 3)
        elif op == "two_opts" and b[11]:
            opt = b"\x00" + struct.pack(">HHIH", T_OPT, 1232, 0, 0)
            b += opt
            b[10:12] = struct.pack(">H", struct.unpack(">H", b[10:12])[0] + 1)
        else:
            return mutate_generic(rng, bytes(b))
        return bytes(b)

    def mutate(self, rng, msg):
        data = msg.flat()
        if rng.random() < 0.35:
            return mutate_generic(rng, data)  # the framed bytes
        q = self.mutate_query(rng, data[2:])
        n = len(q)
        if rng.random() < 0.2:  # a length prefix that lies
            n = rng.choice((0, 1, 11, 12, n - 1, n + 1, n + rng.randint(2, 100), 0xFFFF,
                            rng.randrange(65536))) & 0xFFFF
        return struct.pack(">H", n) + q

    def checker(self, expects, client):
        return DnsTcpChecker(expects)

    def canary(self, port, n, tls):
        for udp in (True, False):
            qid = (0xCA00 + n * 2 + udp) & 0xFFFF
            q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + \
                dns_wire([b"www", b"example", b"test"]) + struct.pack(">HH", T_A, 1)
            e = [qid, q[12:].hex(), NOERROR, True, False, False]
            if udp:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.settimeout(2)
                    s.connect(("127.0.0.1", port))
                    s.send(q)
                    got = s.recv(4096)
            else:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(struct.pack(">H", len(q)) + q)
                    got = recv_until(s, lambda g: len(g) >= 2 and len(g) >= 2 + g[0] * 256 + g[1])
                    got = got[2:]
            why = dns_check(got, e, udp)
            if why is None:
                rrs = dns_parse(got)["rrs"]
                if [r[1] for r in rrs] != [T_CNAME, T_CNAME, T_A] or rrs[2][4] != bytes(
                        [192, 0, 2, 80]) or [r[3] for r in rrs] != [3600] * 3:
                    why = f"answer records {rrs}"
            if why:
                raise CanaryWrong(f"{'UDP' if udp else 'TCP'} www.example.test A: {why}")

    def gen_udp(self, rng, cid):
        """A UDP flow's plan (UdpClient plays it)."""
        kinds = list(self.udp_weights)
        kind = rng.choices(kinds, [self.udp_weights[k] for k in kinds])[0]
        plan = {"id": cid, "kind": kind, "udp": True, "start_ms": ms(rng.uniform(0, 300)),
                "actions": []}
        acts = plan["actions"]
        st = {}
        if kind == "udp_valid":
            check = []
            for _ in range(geometric(rng, 5, 40)):
                msg, e = dns_query(rng, st, big="udp" if rng.random() < 0.05 else False)
                acts.append({"op": "dgram", "hex": msg.hex()})
                check.append(e)
                if rng.random() < 0.3:
                    acts.append({"op": "sleep", "ms": ms(rng.choice((0.1, 1, rng.uniform(0, 20))))})
            plan["check"] = check
            acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True})
        elif kind == "udp_mutated":
            for _ in range(geometric(rng, 5, 40)):
                msg = dns_query(rng, st)[0]
                if rng.random() < 0.6:
                    msg = self.mutate_query(rng, msg) if rng.random() < 0.7 else \
                        mutate_generic(rng, msg)
                acts.append({"op": "dgram", "hex": msg.hex()})
            acts.append({"op": "read", "ms": ms(rng.choice((0, 50, 300)))})
        elif kind == "udp_garbage":
            for _ in range(geometric(rng, 3, 20)):
                r = rng.random()
                if r < 0.15:
                    d = b""
                elif r < 0.3:
                    d = rng.randbytes(rng.choice((1, 11)))
                elif r < 0.45:  # a response: never answered
                    d = bytearray(dns_query(rng, st)[0])
                    d[2] |= 0x80
                    d = bytes(d)
                elif r < 0.55:
                    d = rng.randbytes(rng.choice((65507, 2049, 4096, 9000)))
                elif r < 0.65:
                    d = rng.randbytes(12)
                else:
                    d = garbage_bytes(rng, self.tokens)[:65507]
                acts.append({"op": "dgram", "hex": d.hex()})
            acts.append({"op": "read", "ms": ms(rng.choice((0, 50, 300)))})
        else:  # udp_flood: hundreds of datagrams at once, read or not
            qs = [dns_query(rng, st) for _ in range(rng.randint(1, 16))]
            acts.append({"op": "flood", "hex": [q.hex() for q, _ in qs],
                         "times": rng.choice((100, 300, 500, 1000))})
            if rng.random() < 0.3:
                plan["noread"] = True
                plan["rcvbuf"] = rng.choice((1024, 4096))
            else:
                plan["check"] = [e for _, e in qs]
                plan["flood"] = True
                acts.append({"op": "read", "ms": ms(rng.uniform(200, 1500))})
        acts.append({"op": "close"})
        return plan


class DnsTcpChecker:
    """Answers in order, one per query, each as dns_check wants it."""

    def __init__(self, expects):
        self.expects = expects
        self.pos = 0
        self.n = 0

    def feed(self, rx):
        while len(rx) - self.pos >= 2:
            n = rx[self.pos] << 8 | rx[self.pos + 1]
            if len(rx) - self.pos - 2 < n:
                return None
            if self.n >= len(self.expects):
                return f"an answer beyond the {len(self.expects)} queries sent"
            why = dns_check(bytes(rx[self.pos + 2:self.pos + 2 + n]), self.expects[self.n], False)
            if why:
                return f"answer {self.n}: {why}"
            self.n += 1
            self.pos += 2 + n
        return None

    def complete(self, rx):
        return self.n >= len(self.expects)


class DnsUdpChecker:
    """UDP answers, by id: each as dns_check wants it, at most once (a flood's repeats
    excepted); complete when every query sent has its answer."""

    def __init__(self, expects, flood):
        self.by_id = {e[0]: e for e in expects}
        self.flood = flood
        self.answered = set()
        self.sent = set()
        self.retried = set()  # asked again: two answers may come

    def feed_one(self, data):
        if len(data) < 2:
            return f"an answer of {len(data)} bytes"
        qid = data[0] << 8 | data[1]
        e = self.by_id.get(qid)
        if e is None:
            return f"an answer with id {qid:#06x}, which no query had"
        if qid in self.answered and not self.flood and qid not in self.retried:
            return f"query {qid:#06x} answered twice"
        self.answered.add(qid)
        return dns_check(data, e, True)

    def complete(self, rx):
        return self.sent <= self.answered


# ---------------------------------------------------------------------------------------------
# WebSocket (eddy-ws-server, examples/ws_server.c): every connection first sends an upgrade of
# /ws (or a broken one), then masked client frames. "ws" runs the server with --echo (each
# message back to its sender), "ws_chat" in broadcast mode (each message to every member of
# a channel group, the sender too; a member 4 MiB behind is closed).

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WS_MAX = 1 << 20  # EDDY_WS_MAX_FRAME_SIZE and _MESSAGE_SIZE: eddy-ws-server's limits
WS_DEFLATE_FRAME_MAX = WS_MAX + (WS_MAX >> 8) + 64  # a compressed data frame's (codec.c)
WS_HIGH_WATER = 4 << 20  # eddy-ws-server's HIGH_WATER_MARK
# A reader that never reads, in a group that broadcasts more than this to it, must have been
# closed by the group's policy: past the high water mark, plus the message that crossed it and
# one in flight, what the server's socket send buffer may hold (it grows up to tcp_wmem's
# maximum, 4 MiB on Debian: a member that got 8.39 MB against a limit of 8 MiB failed CI once
# under TSan) and the client's small receive buffer, with slack.


def tcp_wmem_max():
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 << 20


WS_SLOW_READER_LIMIT = WS_HIGH_WATER + 3 * WS_MAX + tcp_wmem_max()
WS_TAIL = b"\x00\x00\xff\xff"  # what permessage-deflate strips from each message
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
WS_CODES = [1000, 1001, 1003, 1007, 1008, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999]
WS_BAD_CODES = [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]
WS_TEXTS = ["hello", "h\u00e9llo w\u00f6rld", "\u65e5\u672c\u8a9e", "emoji \U0001f600\U0001f389",
            "\U0001d11e clef", "\u0000", "\U0010ffff", "\u07ff\u0800\uffff\U00010000", " ",
            "\u00a0\u2028\ufeff", "tab\tnl\n"]
WS_BAD_UTF8 = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
               b"\x80", b"\xf0\x9f\x98", b"\xc3\x28", b"\xf8\x88\x80\x80\x80", b"\xfe\xfe"]


def utf8_valid(data):
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def ws_mask(data, key):
    if not data:
        return b""
    k = (key * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(len(data), "big")


def ws_head(op, n, fin=True, rsv=0, masked=True, form=None):
    """A frame header up to the masking key: form 7, 16 or 64 (the length's encoding)."""
    b0 = (0x80 if fin else 0) | rsv | op
    m = 0x80 if masked else 0
    form = form or (7 if n < 126 else 16 if n < 65536 else 64)
    if form == 7:
        return bytes([b0, m | n])
    if form == 16:
        return bytes([b0, m | 126]) + struct.pack(">H", n)
    return bytes([b0, m | 127]) + struct.pack(">Q", n)


def ws_frame(rng, op, payload, fin=True, rsv=0, masked=True, length=None, form=None):
    head = ws_head(op, len(payload) if length is None else length, fin, rsv, masked, form)
    if not masked:
        return head + payload
    key = rng.randbytes(4)
    return head + key + ws_mask(payload, key)


def ws_deflate(data, wbits=15):
    """One message as permessage-deflate sends it: raw deflate, a sync flush, the tail cut.
    A fresh context each time, which every agreement allows."""
    c = zlib.compressobj(6, zlib.DEFLATED, -wbits)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    return out[:-4] if out.endswith(WS_TAIL) else out


def ws_event_msg(op, data):
    """What a data message back must be: opcode, length, SHA-1 (traces stay small)."""
    return ["m", op, len(data), hashlib.sha1(data).hexdigest()]


def ws_text(rng, n):
    """Valid UTF-8 of about n bytes: ASCII, 2-, 3- and 4-byte sequences."""
    parts, size = [], 0
    while size < n:
        r = rng.random()
        if r < 0.4:
            s = token(rng, 1, 40, "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?")
        elif r < 0.6:
            s = rng.choice(WS_TEXTS)
        else:
            cp = rng.choice((rng.randint(0x80, 0x7ff), rng.randint(0x800, 0xd7ff),
                             rng.randint(0xe000, 0xffff), rng.randint(0x10000, 0x10ffff)))
            s = chr(cp)
        parts.append(s)
        size += len(s.encode())
    return "".join(parts).encode()


def ws_split(rng, data, k):
    """data in k pieces (some may be empty), cut anywhere (inside UTF-8 sequences too)."""
    cuts = sorted(rng.randint(0, len(data)) for _ in range(k - 1))
    return [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]


def ws_request(rng, st, broken=None):
    """An upgrade request for /ws and what its answer must be: ["hs", statuses, accept,
    tag, deflate offered, closes]; broken names a way to spoil it."""
    key = base64.b64encode(rng.randbytes(16)).decode()
    path = rng.choice(("/ws", "/ws", "/ws", "/ws?room=" + token(rng)))
    version = "1.1"
    method = "GET"
    headers = [("Host", rng.choice(("127.0.0.1", "localhost:8081", "a"))),
               ("Upgrade", rng.choice(("websocket", "websocket", "WebSocket"))),
               ("Connection", rng.choice(("Upgrade", "upgrade", "keep-alive, Upgrade"))),
               ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]
    for _ in range(rng.choice((0, 0, 1, 3))):
        headers.append(rng.choice((("Origin", "http://127.0.0.1"), ("User-Agent", "serverfuzz"),
                                   ("Sec-WebSocket-Protocol", "chat, superchat"),
                                   ("X-" + token(rng), token(rng, 0, 30)))))
    offered = st["deflate"] and broken is None
    if offered:
        params = rng.choice(("", "; client_max_window_bits", "; server_no_context_takeover",
                             "; client_no_context_takeover", "; server_max_window_bits=10",
                             "; client_max_window_bits=12; server_no_context_takeover"))
        if "client_max_window_bits=12" in params:
            st["wbits"] = 12
        headers.append(("Sec-WebSocket-Extensions", "permessage-deflate" + params))
    statuses, closes = [101], False
    tail = b""
    if broken == "key":
        bad = rng.choice(("abc", "", base64.b64encode(rng.randbytes(17)).decode(),
                          base64.b64encode(rng.randbytes(15)).decode(), "!!!!" * 6, key[:-2]))
        headers = [(k, bad if k == "Sec-WebSocket-Key" else v) for k, v in headers]
        if rng.random() < 0.3:
            headers = [h for h in headers if h[0] != "Sec-WebSocket-Key"]
        statuses, closes = [400], True
    elif broken == "version":
        v = rng.choice(("12", "8", "14", "", "13, 8", None))
        headers = [h for h in headers if h[0] != "Sec-WebSocket-Version"]
        if v is not None:
            headers.append(("Sec-WebSocket-Version", v))
        statuses, closes = [426], True
    elif broken == "upgrade":
        headers = [h for h in headers if h[0] != "Upgrade"]
        if rng.random() < 0.5:
            headers.append(("Upgrade", rng.choice(("h2c", "websockets", "web socket"))))
        statuses, closes = [400], True
    elif broken == "connection":
        headers = [h for h in headers if h[0] != "Connection"]
        if rng.random() < 0.5:
            headers.append(("Connection", rng.choice(("keep-alive", "Upgrade-Insecure"))))
        statuses, closes = [400], True
    elif broken == "http10":
        version = "1.0"
        statuses, closes = [400], True
    elif broken == "method":
        method = rng.choice(("POST", "PUT", "DELETE"))
        headers.append(("Content-Length", "0"))
        statuses, closes = [405], True
    elif broken == "path":  # another page: answered and kept alive
        path = rng.choice(("/wss", "/ws/x", "/WS", "/nope", "/ws%20"))
        statuses = [404]
    elif broken == "headers":  # garbage the HTTP decoder refuses
        bad = rng.choice(("X-No-Colon", "Bad Name: x", ": empty", "X-Ctl: a\x01b",
                          "X-Long: " + "a" * 70000, " folded: x"))
        headers.insert(rng.randint(0, len(headers)), (None, bad))
        statuses, closes = list(range(400, 500)), True
    rng.shuffle(headers)
    head = f"{method} {path} HTTP/{version}\r\n" + "".join(
        (f"{k}: {v}\r\n" if k is not None else f"{v}\r\n") for k, v in headers) + "\r\n"
    accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
    return Msg(head.encode("latin-1") + tail,
               ["hs", statuses, accept if statuses == [101] else None, st["tag"], offered, closes])


class Ws(Proto):
    """eddy-ws-server --echo: an upgrade, then client frames; each message comes back whole."""
    name = "ws"
    exe = "eddy-ws-server"
    chat = False
    lenient_check = True  # every connection's answers are checked for well-formedness
    weights = dict(Proto.weights, valid=24, mutated=16, garbage=4, reset_mid=8, half_close=6,
                   noread=3, close_rst=8, idle=2, slow=3, big=3, bad_hs=6, hostile=18, storm=3,
                   bomb=2)
    tokens = [b"\x81", b"\x82", b"\x88", b"\x89", b"\x8a", b"\x80", b"\x00", b"\x01", b"\xc1",
              b"\x7e", b"\x7f", b"\xfe", b"\xff", b"\x00\x00\x00\x00", b"\x81\x80", b"\x03\xe8",
              b"\x81\xfe\x00\x7e", b"\x82\xff" + b"\x00" * 8, b"\xff" * 8]
    sizes = (0, 1, 5, 125, 126, 127, 200, 1000, 4096, 65535, 65536, 70000, 200000)

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + ([] if self.chat else ["--echo"])

    def new_conn(self, rng, deflate=None):
        return {"tag": "t" + token(rng, 8, 8, "0123456789abcdef"), "n": 0, "wbits": 15,
                "deflate": rng.random() < 0.35 if deflate is None else deflate}

    def preamble(self, rng, st, kind):
        if kind == "bad_hs":
            return None  # gen_kind sends its own
        if kind == "bomb":
            st["deflate"] = True
        if kind == "garbage" and rng.random() < 0.3:
            return None  # garbage instead of a request
        hs = ws_request(rng, st)
        if kind == "mutated" and rng.random() < 0.2:
            return Msg(mutate_generic(rng, hs.flat()), None)
        return hs

    def payload(self, rng, st, op, n=None):
        """A data message's payload; in a chat it starts with the connection's tag."""
        n = rng.choice(self.sizes) if n is None else n
        st["n"] += 1
        lead = f"{st['tag']}:{st['n']}:".encode() if self.chat else b""
        body = ws_text(rng, n) if op == OP_TEXT else rng.randbytes(n)
        return lead + body

    def data(self, rng, st, op=None, data=None, frags=None, pings=0.2):
        """A text or binary message, whole or fragmented, maybe compressed, with pings
        between its fragments; the events it must bring back."""
        op = op or rng.choice((OP_TEXT, OP_BIN))
        data = self.payload(rng, st, op) if data is None else data
        deflate = st["deflate"] and rng.random() < 0.6
        wire = ws_deflate(data, st["wbits"]) if deflate else data
        k = frags or (1 if rng.random() < 0.6 else geometric(rng, 3, 20))
        out, events = b"", []
        for i, piece in enumerate(ws_split(rng, wire, k)):
            out += ws_frame(rng, op if i == 0 else OP_CONT, piece, fin=i == k - 1,
                            rsv=0x40 if deflate and i == 0 else 0)
            if i < k - 1 and rng.random() < pings:
                p = rng.randbytes(rng.choice((0, 1, 4, 125)))
                out += ws_frame(rng, OP_PING, p)
                events.append(["p", p.hex()])
        events.append(ws_event_msg(op, data))
        return Msg(out, events)

    def close(self, rng, st):
        code = rng.choice(WS_CODES + [None])
        if code is None:
            return Msg(ws_frame(rng, OP_CLOSE, b""), [["c", 1000]], closes=True)
        reason = ws_text(rng, rng.randint(0, 40))[:123] if rng.random() < 0.5 else b""
        try:
            reason.decode()
        except UnicodeDecodeError:  # cut inside a sequence
            reason = b"bye"
        return Msg(ws_frame(rng, OP_CLOSE, struct.pack(">H", code) + reason), [["c", code]],
                   closes=True)

    def message(self, rng, st):
        r = rng.random()
        if r < 0.1:
            p = rng.randbytes(rng.choice((0, 1, 8, 125)))
            return Msg(ws_frame(rng, OP_PING, p), [["p", p.hex()]])
        if r < 0.14:
            return Msg(ws_frame(rng, OP_PONG, rng.randbytes(rng.choice((0, 4, 125)))), [])
        if r < 0.17:
            return self.close(rng, st)
        return self.data(rng, st)

    def flood_message(self, rng, st):
        """What a client that never reads floods with: pings, and (echo) small messages."""
        if self.chat or rng.random() < 0.5:
            return Msg(ws_frame(rng, OP_PING, rng.randbytes(rng.choice((0, 8, 125)))), [])
        return self.data(rng, st, data=self.payload(rng, st, OP_BIN, rng.choice((1, 100))))

    def big(self, rng, st):
        """One message of 64 KiB to 1 MiB (the limit, exactly, at most) in one frame: a
        4096-byte masked chunk repeated (the key's period divides it)."""
        n = rng.randint(16, 256) if not self.chat else rng.randint(16, 64)
        op = rng.choice((OP_TEXT, OP_BIN))
        st["n"] += 1
        chunk = (token(rng, 4096, 4096) if op == OP_TEXT else "").encode() or rng.randbytes(4096)
        lead = f"{st['tag']}:{st['n']}:".encode() if self.chat else b""
        first = lead + chunk[len(lead):]
        key = rng.randbytes(4)
        head = ws_head(op, 4096 * n) + key
        data = first + chunk * (n - 1)
        return Msg(None, [ws_event_msg(op, data)],
                   parts=[(head + ws_mask(first, key), 1), (ws_mask(chunk, key), n - 1)])

    def hostile(self, rng, st):
        """A frame (or a few) the server must refuse: (bytes, the close status it answers,
        or None where more than one outcome is right)."""
        kind = rng.choice(("unmasked", "rsv", "opcode", "long_control", "frag_control",
                           "utf8", "utf8_frag", "cont", "nested", "len_top", "too_long",
                           "too_long_agg", "close_code", "close_1", "close_utf8", "rsv1",
                           "deflate_garbage", "rsv1_cont"))
        text = self.payload(rng, st, OP_TEXT, rng.choice((0, 10, 200)))
        if kind == "unmasked":
            return ws_frame(rng, rng.choice((OP_TEXT, OP_BIN, OP_PING)), text, masked=False), 1002
        if kind == "rsv":
            rsv = rng.choice((0x20, 0x10, 0x30, 0x70) if st["deflate"] else (0x40, 0x20, 0x10))
            return ws_frame(rng, rng.choice((OP_TEXT, OP_BIN, OP_PING)), text, rsv=rsv), 1002
        if kind == "opcode":
            return ws_frame(rng, rng.choice((3, 4, 5, 6, 7, 11, 12, 13, 14, 15)), text), 1002
        if kind == "long_control":
            p = rng.randbytes(rng.choice((126, 127, 200, 65535)))
            return ws_frame(rng, rng.choice((OP_PING, OP_PONG, OP_CLOSE)), p), 1002
        if kind == "frag_control":
            return ws_frame(rng, rng.choice((OP_PING, OP_PONG)), b"x", fin=False), 1002
        if kind in ("utf8", "utf8_frag"):
            bad = text[:rng.randint(0, len(text))] + rng.choice(WS_BAD_UTF8) + \
                ws_text(rng, rng.choice((0, 5)))
            if utf8_valid(bad):
                # A prefix cut inside a character, completed by the bad bytes and what
                # follows, can make a valid text (b"\x00\xe4\x94\xb2\xcc\x80", seed
                # 76911881748518): never a 1007 then.
                bad += b"\xff"
            if kind == "utf8":
                return ws_frame(rng, OP_TEXT, bad), 1007
            return self.data(rng, st, OP_TEXT, bad, rng.randint(2, 6), 0).flat(), 1007
        if kind == "cont":
            return ws_frame(rng, OP_CONT, text, fin=rng.random() < 0.5), 1002
        if kind == "nested":
            return (ws_frame(rng, OP_TEXT, text, fin=False) +
                    ws_frame(rng, rng.choice((OP_TEXT, OP_BIN)), b"x")), 1002
        if kind == "len_top":
            return ws_head(OP_BIN, (1 << 63) + rng.randrange(1 << 20), form=64) + \
                rng.randbytes(4 + 16), 1002
        if kind == "too_long":
            limit = WS_DEFLATE_FRAME_MAX if st["deflate"] else WS_MAX
            n = rng.choice((limit + 1, limit + 1000, 2 * WS_MAX, 1 << 32, (1 << 63) - 1))
            return ws_head(rng.choice((OP_TEXT, OP_BIN)), n, form=64) + rng.randbytes(4) + \
                rng.randbytes(rng.choice((0, 100, 5000))), 1009
        if kind == "too_long_agg":  # fragments each within the limit, together past it
            half = WS_MAX // 2 + rng.randint(1, 1000)
            return (ws_frame(rng, OP_BIN, bytes(half), fin=False) +
                    ws_frame(rng, OP_CONT, bytes(half))), 1009
        if kind == "close_code":
            p = struct.pack(">H", rng.choice(WS_BAD_CODES)) + b"bad"[:rng.randint(0, 3)]
            return ws_frame(rng, OP_CLOSE, p), 1002
        if kind == "close_1":
            return ws_frame(rng, OP_CLOSE, b"\x03"), 1002
        if kind == "close_utf8":
            return ws_frame(rng, OP_CLOSE, b"\x03\xe8" + rng.choice(WS_BAD_UTF8)), 1007
        if kind == "rsv1" and not st["deflate"]:  # compressed without the agreement
            return ws_frame(rng, OP_TEXT, ws_deflate(text), rsv=0x40), 1002
        if kind == "rsv1_cont" and st["deflate"]:  # RSV1 on a continuation
            return (ws_frame(rng, OP_TEXT, ws_deflate(text)[:3], fin=False, rsv=0x40) +
                    ws_frame(rng, OP_CONT, b"\x00", rsv=0x40)), 1002
        if kind == "deflate_garbage" and st["deflate"]:
            # It may even inflate (to text that is not UTF-8, or binary that comes back).
            return ws_frame(rng, rng.choice((OP_TEXT, OP_BIN)), rng.randbytes(
                rng.choice((1, 5, 100, 3000))), rsv=0x40), None
        return ws_frame(rng, OP_CONT, text), 1002

    def bomb(self, rng, st):
        """A small compressed message that inflates past the limit: 1009 while it inflates."""
        n = WS_MAX + rng.choice((1, 1000, WS_MAX, 20 * WS_MAX))
        unit = rng.choice((b"\x00", b"a", b"ab"))
        data = unit * (n // len(unit) + 1)
        op = rng.choice((OP_TEXT, OP_BIN))
        wire = ws_deflate(data[:n])
        if rng.random() < 0.5:
            return ws_frame(rng, op, wire, rsv=0x40)
        a, b = ws_split(rng, wire, 2)
        return ws_frame(rng, op, a, fin=False, rsv=0x40) + ws_frame(rng, OP_CONT, b)

    def closing(self, rng, st):
        if rng.random() < 0.5:
            return self.close(rng, st)
        data, code = self.hostile(rng, st)
        return Msg(data, [["c", code]] if code else None, closes=True)

    def mutate(self, rng, msg):
        b = bytearray(msg.flat())
        if len(b) >= 2 and rng.random() < 0.6:
            op = rng.choice(("mask", "rsv", "opcode", "fin", "len", "len", "key"))
            if op == "mask":
                b[1] ^= 0x80
            elif op == "rsv":
                b[0] ^= rng.choice((0x40, 0x20, 0x10))
            elif op == "opcode":
                b[0] = (b[0] & 0xf0) | rng.randrange(16)
            elif op == "fin":
                b[0] ^= 0x80
            elif op == "len":  # a length that lies (7-bit), or a 16/64-bit one
                b[1] = (b[1] & 0x80) | rng.choice((0, 1, 125, 126, 127, rng.randrange(128)))
            else:
                b[2:2] = rng.randbytes(rng.choice((1, 2, 8)))
            if rng.random() < 0.6:
                return bytes(b)
        return mutate_generic(rng, bytes(b))

    def gen_kind(self, rng, kind, plan, acts, st, budget, pre):
        """The kinds of WebSocket's own: a broken upgrade, a valid prefix then a hostile
        frame, a fragment storm, a decompression bomb. Returns the check, or None."""
        if kind == "bad_hs":
            hs = ws_request(rng, st, rng.choice(("key", "version", "upgrade", "connection",
                                                 "http10", "method", "path", "headers")))
            frames = b""
            if hs.expect[5] and rng.random() < 0.5:  # frames behind it: never read as such
                frames = b"".join(self.message(rng, st).flat() for _ in range(2))
            add_msgs(rng, [hs, Msg(frames)], acts, budget)
            acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True})
            return [hs.expect]
        check = [pre.expect]
        if kind == "hostile":
            msgs = [m for m in (self.message(rng, st) for _ in range(rng.choice((0, 0, 1, 3))))
                    if not m.closes]
            data, code = self.hostile(rng, st)
            add_msgs(rng, msgs + [Msg(data)], acts, budget)
            if code is None:
                acts.append({"op": "read", "ms": ms(rng.choice((100, 500)))})
                return []
            check += [m.expect for m in msgs] + [[["c", code]]]
        elif kind == "storm":  # thousands of tiny fragments, pings among them
            op = rng.choice((OP_TEXT, OP_BIN))
            data = self.payload(rng, st, op, rng.choice((100, 1000, 4000)))
            k = rng.randint(1000, 5000)
            m = self.data(rng, st, op, data, k, 0.01)
            add_msgs(rng, [m], acts, budget)
            check.append(m.expect)
        elif kind == "bomb":
            msgs = [m for m in (self.message(rng, st) for _ in range(rng.choice((0, 1, 2))))
                    if not m.closes]
            add_msgs(rng, msgs + [Msg(self.bomb(rng, st))], acts, budget)
            check += [m.expect for m in msgs] + [[["c", 1009]]]
        acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True})
        return check

    def checker(self, expects, client):
        if client.plan["kind"] == "slow_reader":
            return WsSlowReaderChecker(client)
        return WsChecker(expects, client, self.chat)

    def canary(self, port, n, tls):
        rng = random.Random(n)
        st = self.new_conn(rng, deflate=False)
        hs = ws_request(rng, st)
        text = b"canary %d %s" % (n, os.urandom(8).hex().encode())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(hs.flat() + ws_frame(rng, OP_TEXT, text))
            got = bytearray()
            head = None
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise CanaryWrong(f"closed after {bytes(got[:300])!r}")
                got += chunk
                if head is None:
                    end = got.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    head = bytes(got[:end])
                    if not head.startswith(b"HTTP/1.1 101 ") or hs.expect[2].encode() not in head:
                        raise CanaryWrong(f"the upgrade answered {head[:300]!r}")
                    del got[:end + 4]
                # Frames: a text frame with our text ends it (a chat's others are skipped).
                while len(got) >= 2:
                    k = got[1] & 0x7f
                    hl = 2 if k < 126 else 4 if k == 126 else 10
                    if len(got) < hl:
                        break
                    k = k if k < 126 else int.from_bytes(got[2:hl], "big")
                    if len(got) < hl + k:
                        break
                    op, payload = got[0] & 0x0f, bytes(got[hl:hl + k])
                    del got[:hl + k]
                    if op == OP_TEXT and payload == text:
                        s.sendall(ws_frame(rng, OP_CLOSE, b"\x03\xe8"))
                        return
                    if op == OP_CLOSE or (not self.chat and op != OP_PING):
                        raise CanaryWrong(f"answered a frame of opcode {op}: {payload[:100]!r}")


class WsChat(Ws):
    """eddy-ws-server in broadcast mode: every connection's own messages come back to it, in
    order, among the others'. Some bursts are busy: a few connections send 1 MiB messages
    while readers that never read must be closed by the group's policy."""
    name = "ws_chat"
    chat = True
    weights = dict(Ws.weights, big=1, noread=2)
    sizes = (0, 1, 5, 125, 126, 200, 1000, 4000)
    busy_share = 0.3

    def busy_burst(self, rng):
        """Flooders sending 6 MiB each, readers that never read (small SO_RCVBUF) until the
        others are done, and a few ordinary connections; every one may be closed for falling
        behind, none may get a wrong answer."""
        plans = [gen_conn(rng, self, i, deflate=False) for i in range(rng.randint(3, 8))]
        for _ in range(2):
            st = self.new_conn(rng, deflate=False)
            hs = ws_request(rng, st)
            msgs = []
            for _ in range(6):
                st["n"] += 1
                lead = f"{st['tag']}:{st['n']}:".encode()
                chunk = rng.randbytes(4096)
                first = lead + chunk[len(lead):]
                key = rng.randbytes(4)
                msgs.append(Msg(None, [ws_event_msg(OP_BIN, first + chunk * 255)], parts=[
                    (ws_head(OP_BIN, 4096 * 256) + key + ws_mask(first, key), 1),
                    (ws_mask(chunk, key), 255)]))
            plan = {"id": len(plans), "kind": "flood_chat", "start_ms": ms(rng.uniform(0, 100)),
                    "actions": []}
            add_msgs(rng, [hs] + msgs, plan["actions"], [0])
            plan["actions"] += [{"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True},
                                {"op": "close"}]
            plan["check"] = [hs.expect] + [m.expect for m in msgs]
            plans.append(plan)
        for _ in range(rng.randint(1, 3)):
            st = self.new_conn(rng, deflate=False)
            plans.append({"id": len(plans), "kind": "slow_reader", "start_ms": 0,
                          "rcvbuf": rng.choice((1024, 2048, 4096)), "check": [], "actions": [
                              {"op": "stop_reading"}, {"op": "send", "hex": ws_request(
                                  rng, st).flat().hex()},
                              {"op": "wait_others", "ms": BURST_SECONDS * 500},
                              {"op": "resume_reading"}, {"op": "read", "ms": 15000},
                              {"op": "close"}]})
        for p in plans:
            p["may_drop"] = True
        return {"conns": plans}


class WsChecker:
    """What a WebSocket connection gets: the upgrade's answer (101 with the right accept, or
    the refusal expected, then nothing), then frames as a server sends them (unmasked, known
    opcodes, RSV1 only on a compressed message's first frame, control frames short and whole,
    text UTF-8, close codes that may travel, nothing after the close). With expectations
    (valid connections): the events in order, each message back exactly (in a chat, among
    others' messages, which are skipped), each ping's pong, each close's status. Consumes rx
    as it goes (a chat's connections get megabytes)."""

    def __init__(self, expects, client, chat):
        self.client = client
        self.chat = chat
        self.hs = expects[0] if expects else None
        self.want = [e for m in expects[1:] for e in (m or [])]
        self.k = 0
        self.phase = "http"
        self.http_done = False
        self.frag = None  # [opcode, compressed, payloads] of the message arriving
        self.inflater = None
        self.closed = False
        self.tag = self.hs[3].encode() if self.hs else None
        self.may_drop = client.plan.get("may_drop", False)

    def feed(self, rx):
        if self.phase == "http":
            why = self.feed_http(rx)
            if why or self.phase != "ws":
                return why
        if self.phase == "ws":
            return self.feed_ws(rx)
        if self.phase == "after" and rx:
            return f"{len(rx)} bytes after the refusal {bytes(rx[:40])!r}"
        return None

    def feed_http(self, rx):
        end = rx.find(b"\r\n\r\n")
        if end < 0:
            return "an answer's head has no end" if len(rx) > 16384 else None
        head = bytes(rx[:end]).decode("latin-1")
        m = re.match(r"HTTP/1\.1 (\d{3}) ", head)
        if not m:
            return f"malformed status line {head[:80]!r}"
        status = int(m.group(1))
        if self.hs is None and status != 101:
            self.phase = "stop"  # a mutated request: what follows is not ours to predict
            return None
        if self.hs is not None and status not in self.hs[1]:
            return f"the upgrade answered {status}, wanted {self.hs[1][:3]}: {head[:200]!r}"
        if status == 101:
            if not re.search(r"\r\nupgrade: *websocket\r", head + "\r", re.I):
                return f"101 without Upgrade: websocket: {head[:300]!r}"
            if self.hs and self.hs[2] and f"\r\nSec-WebSocket-Accept: {self.hs[2]}\r" not in \
                    head + "\r":
                return f"101 without Sec-WebSocket-Accept: {self.hs[2]}: {head[:300]!r}"
            ext = re.search(r"\r\nsec-websocket-extensions: *([^\r]*)", head, re.I)
            deflate = bool(ext and ext.group(1).startswith("permessage-deflate"))
            if self.hs and deflate != self.hs[4]:
                return f"permessage-deflate {'offered' if self.hs[4] else 'not offered'}, " \
                       f"answered {ext.group(1) if ext else 'nothing'}"
            if deflate:
                self.inflater = zlib.decompressobj(-15)
            del rx[:end + 4]
            self.http_done = True
            self.phase = "ws"
            return None
        cl = re.search(r"\r\ncontent-length: *(\d+)", head, re.I)
        n = int(cl.group(1)) if cl else 0
        if len(rx) < end + 4 + n:
            return None
        del rx[:end + 4 + n]
        self.http_done = True
        self.phase = "after" if self.hs[5] else "stop"
        return None

    def feed_ws(self, rx):
        pos = 0
        why = None
        while len(rx) - pos >= 2:
            b0, b1 = rx[pos], rx[pos + 1]
            if b1 & 0x80:
                why = "a masked frame from the server"
                break
            n, hl = b1 & 0x7f, 2
            if n >= 126:
                hl = 4 if n == 126 else 10
                if len(rx) - pos < hl:
                    break
                n = int.from_bytes(rx[pos + 2:pos + hl], "big")
            if len(rx) - pos < hl + n:
                break
            payload = bytes(rx[pos + hl:pos + hl + n])
            pos += hl + n
            why = self.frame(b0 & 0x80, b0 & 0x70, b0 & 0x0f, payload)
            if why:
                break
        del rx[:pos]
        return why

    def frame(self, fin, rsv, op, payload):
        if self.closed:
            return f"a frame (opcode {op}) after the server's close frame"
        if op not in (0, 1, 2, 8, 9, 10):
            return f"a frame of opcode {op}"
        if rsv and (rsv != 0x40 or self.inflater is None or op not in (OP_TEXT, OP_BIN)):
            return f"a frame (opcode {op}) with RSV bits {rsv:#x}"
        if op >= 8:
            if not fin or len(payload) > 125:
                return f"a control frame (opcode {op}) of {len(payload)} bytes, FIN {bool(fin)}"
            if op == OP_CLOSE:
                if len(payload) < 2:
                    return f"a close frame of {len(payload)} bytes"
                code = struct.unpack(">H", payload[:2])[0]
                if not (1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999):
                    return f"a close frame with status {code}"
                try:
                    payload[2:].decode()
                except UnicodeDecodeError:
                    return "a close reason that is not UTF-8"
                self.closed = True
                return self.event(["c", code])
            if op == OP_PONG:
                return self.event(["p", payload.hex()])
            return None  # the server's keep-alive ping
        if (op == OP_CONT) != (self.frag is not None):
            return "a continuation without a message" if op == OP_CONT else \
                "a new message inside a fragmented one"
        if op != OP_CONT:
            self.frag = [op, bool(rsv), []]
        self.frag[2].append(payload)
        if not fin:
            return None
        op, compressed, parts = self.frag
        self.frag = None
        data = b"".join(parts)
        if compressed:
            try:
                data = self.inflater.decompress(data + WS_TAIL)
            except zlib.error as e:
                return f"a compressed message that does not inflate: {e}"
        if op == OP_TEXT:
            try:
                data.decode()
            except UnicodeDecodeError as e:
                return f"a text message that is not UTF-8: {e}"
        return self.event(["m", op, data])

    def event(self, ev):
        if self.hs is None or self.hs[1] != [101]:
            return None
        if ev[0] == "m" and self.chat and not ev[2].startswith(self.tag + b":"):
            return None  # another connection's message
        got = ws_event_msg(ev[1], ev[2]) if ev[0] == "m" else ev
        if self.k >= len(self.want):
            return f"{self.describe(got)} after the {len(self.want)} answers wanted"
        want = self.want[self.k]
        if got != want:
            return f"answer {self.k}: {self.describe(got)}, wanted {self.describe(want)}"
        self.k += 1
        return None

    @staticmethod
    def describe(ev):
        if ev[0] == "m":
            return f"a {'text' if ev[1] == OP_TEXT else 'binary'} message of {ev[2]} bytes " \
                   f"(sha1 {ev[3][:12]})"
        if ev[0] == "p":
            return f"a pong of {len(ev[1]) // 2} bytes"
        return f"a close frame with status {ev[1]}"

    def complete(self, rx):
        if self.may_drop and self.client.eof:
            return True  # closed for falling behind: the group's policy
        if self.hs is None:
            return False
        if self.hs[1] != [101]:
            return self.http_done and (self.client.eof or not self.hs[5])
        return self.k >= len(self.want)


class WsSlowReaderChecker:
    """A member that never read while the others flooded: closed by the group's policy (EOF
    once it reads again), unless the group sent it too little to matter."""

    def __init__(self, client):
        self.client = client
        self.got = 0

    def feed(self, rx):
        self.got += len(rx)
        del rx[:]
        if self.got > WS_SLOW_READER_LIMIT and not self.client.eof:
            return f"a member that did not read got {self.got} bytes and was not closed " \
                   f"(high water mark {WS_HIGH_WATER})"
        return None

    def complete(self, rx):
        return self.client.eof


# ---------------------------------------------------------------------------------------------
# HTTP/2: eddy-http-server by prior knowledge. The client side's state machine is python3-h2's
# (optional: without it the http2 server is skipped). A plan's actions say what to do (open a
# request, reset a stream, flood PINGs, give window, inject a broken frame); the bytes they
# make come from h2 as the conversation goes, since they depend on what the server says
# (SETTINGS, WINDOW_UPDATE). Requests and their answers:
#   GET / "Hello, World!"; GET /bytes/N N bytes of 'a' + i % 26 (N <= 64 MiB, else 400);
#   POST /echo its body (413 past --max-body); GET /stats JSON; HEAD the same heads, no body;
#   the rest 404 "Not Found\n"; a header list past 16 KiB or 100 fields 431.

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_ALPHABET = b"abcdefghijklmnopqrstuvwxyz"
H2_PATTERN = H2_ALPHABET * 2600  # GET /bytes/N's bytes, 67600 of them: most DATA frames fit
H2_MAX_WINDOW = (1 << 31) - 1
H2_BYTES_MAX = 64 << 20
# Settings codes (RFC 9113 section 6.5.2), and error codes by number, for the messages.
H2_HEADER_TABLE_SIZE, H2_ENABLE_PUSH, H2_MAX_CONCURRENT_STREAMS = 1, 2, 3
H2_INITIAL_WINDOW_SIZE, H2_MAX_FRAME_SIZE, H2_MAX_HEADER_LIST_SIZE = 4, 5, 6
H2_ERRORS = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
             "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
             "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
             "HTTP_1_1_REQUIRED"]
H2_REFUSED_STREAM = 7


def h2_code(code):
    code = int(code)
    return H2_ERRORS[code] if code < len(H2_ERRORS) else hex(code)


def h2_pattern(off, n):
    """Bytes off to off + n of GET /bytes/N's answer."""
    s = off % 26
    if s + n <= len(H2_PATTERN):
        return H2_PATTERN[s:s + n]
    return (H2_ALPHABET * ((s + n) // 26 + 1))[s:s + n]


def h2_frame(ftype, flags, sid, payload, length=None):
    """One frame, by hand: its 9-byte header (length may lie) and payload."""
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([ftype & 0xFF, flags & 0xFF]) + \
        struct.pack(">I", sid & 0xFFFFFFFF) + payload


def h2_expect(method, path, n, max_body):
    """What eddy-http-server answers: (status, body) where body is bytes, ("pattern", N),
    "json", or None (any); a HEAD's body is b"" (its Content-Length as GET's is not checked
    then but for / and /bytes/N: the third item)."""
    head = method == "HEAD"
    get = method in ("GET", "HEAD")
    if get and path == "/":
        return 200, b"" if head else b"Hello, World!", 13
    if get and path == "/stats":
        return 200, b"" if head else "json", None
    if method == "POST" and path == "/echo":
        if n > max_body:
            return 413, None, None
        return 200, None, n  # the body sent: the request fills it in
    if get and path.startswith("/bytes/") and len(path) > 7:  # ("/bytes/" alone: 404)
        digits = path[7:]
        if 0 < len(digits) < 16 and digits.isdigit() and int(digits) <= H2_BYTES_MAX:
            return 200, b"" if head else ("pattern", int(digits)), int(digits)
        return 400, b"" if head else b"Bad Request\n", None
    return 404, b"" if head else b"Not Found\n", None


class H2Req:
    """One request of a plan as it goes: queued until the server's stream limit allows, open,
    its body sent as the windows allow, then answered (or reset, refused)."""

    def __init__(self, op, max_body):
        self.op = op
        self.i = op["i"]
        self.method = op["method"]
        self.path = op["path"]
        b = op.get("body")
        if b is None:
            self.body = None
        elif "gen" in b:
            self.body = random.Random(b["gen"]).randbytes(b["n"])
        else:
            self.body = bytes.fromhex(b["hex"])
        self.bad = op.get("bad")  # a malformed request: its answer is not checked
        self.hold = bool(op.get("hold"))  # its body waits for an h2_empty action
        cut = op.get("cut") or {}
        self.cut_rng = random.Random(cut.get("seed", 0))
        self.cut_sizes = cut.get("sizes", [16384])
        self.cut_pad = cut.get("pad", 0)
        self.sent = 0
        self.sid = None
        self.state = "queued"  # open, done, reset_us, reset_server, refused, unsent
        self.reset_code = None  # the server's RST_STREAM code (reset_server)
        self.status = None
        self.got = 0
        self.head_len = None  # Content-Length of the answer
        self.status_want, self.want, self.len_want = h2_expect(
            self.method, self.path, len(self.body or b""), max_body)
        if self.want is None and self.status_want == 200:  # POST /echo
            self.want = self.body or b""
        if op.get("big_head"):
            self.status_want, self.want, self.len_want = 431, None, None
        self.json = bytearray() if self.want == "json" else None

    def name(self):
        return f"stream {self.sid} ({self.method} {self.path[:40]})"

    def settled(self):
        return self.state not in ("queued", "open")

    def on_head(self, headers):
        """The answer's head: its status and Content-Length; an error, or None."""
        fields = dict(headers)
        self.status = int(fields.get(b":status", b"0"))
        cl = fields.get(b"content-length")
        self.head_len = int(cl) if cl is not None and cl.isdigit() else None
        if self.bad:
            return None
        if self.status != self.status_want:
            return f"{self.name()}: status {self.status}, wanted {self.status_want}"
        if self.method == "HEAD" and self.len_want is not None and \
                self.head_len != self.len_want:
            return f"{self.name()}: Content-Length {self.head_len}, wanted {self.len_want}"
        return None

    def on_data(self, data):
        if self.bad or self.want is None:
            self.got += len(data)
            return None
        if self.status is None:
            return f"{self.name()}: DATA before the head"
        off = self.got
        self.got += len(data)
        if self.json is not None:
            self.json += data
            return None
        if isinstance(self.want, tuple):
            n = self.want[1]
            if self.got > n:
                return f"{self.name()}: {self.got} bytes, more than the {n} wanted"
            if data != h2_pattern(off, len(data)):
                at = next(i for i in range(len(data)) if data[i:i + 1] != h2_pattern(off + i, 1))
                return f"{self.name()}: byte {off + at} of the answer differs"
            return None
        if bytes(data) != self.want[off:off + len(data)]:
            at = next((i for i in range(len(data)) if off + i >= len(self.want) or
                       data[i] != self.want[off + i]), len(data))
            return f"{self.name()}: byte {off + at} of the answer differs (of {len(self.want)})"
        return None

    def on_end(self):
        self.state = "done"
        if self.bad or self.want is None:
            return None
        n = self.want[1] if isinstance(self.want, tuple) else \
            len(self.json) if self.json is not None else len(self.want)
        if self.got != n:
            return f"{self.name()}: the answer ended after {self.got} bytes, wanted {n}"
        if self.method != "HEAD" and self.head_len is not None and self.head_len != n:
            return f"{self.name()}: Content-Length {self.head_len} for {n} bytes"
        if self.json is not None:
            try:
                json.loads(self.json)
            except ValueError:
                return f"{self.name()}: not JSON: {bytes(self.json[:80])!r}"
        return None

    def on_trailers(self, headers):
        """The answer's trailers (eddy-http-server sends none); an error, or None."""
        return None

    def reset_ok(self, code):
        """Whether the server may reset the stream with code on a strict connection."""
        return False

    def next_piece(self, room, max_frame, limit=None):
        """The next DATA frame's (bytes, padding) within room bytes of window (and the body's
        first limit bytes)."""
        size = self.cut_rng.choice(self.cut_sizes)
        pad = self.cut_rng.randint(0, 255) if self.cut_rng.random() < self.cut_pad else None
        left = (len(self.body) if limit is None else limit) - self.sent
        n = min(size, left, max_frame, room)
        if pad is not None and n + pad + 1 > min(room, max_frame):
            pad = None  # no room for the padding: none
        return n, pad


def h2_never_header(value):
    """A field HPACK must never index (RFC 7541 section 7.1.3)."""
    return hpack.NeverIndexedHeaderTuple(b"authorization", value.encode())


class Http2(Proto):
    """eddy-http-server over HTTP/2 by prior knowledge (h2c), its state machine on our side
    python3-h2's. See H2Client for what is checked."""
    name = "http2"
    exe = "eddy-http-server"
    max_body = 1 << 20  # --max-body, as the server is started
    weights = {"h2_valid": 24, "h2_big": 4, "h2_windows": 8, "h2_slow_reader": 3,
               "h2_stream_rst": 8, "h2_bad_request": 5, "h2_mutated": 14, "h2_garbage": 5,
               "h2_flood": 10, "h2_noread": 3, "h2_reset_mid": 7, "h2_half_close": 5,
               "h2_vanish": 5, "h2_slow": 2, "h2_idle": 2, "h2_upgrade": 6}

    @property
    def client_class(self):
        return H2Client  # (defined with the other clients, below)
    tokens = [H2_PREFACE, b"\x00\x00\x00\x04\x00\x00\x00\x00\x00", b"\x00\x00\x08\x06\x00",
              b"\x00\x00\x00\x00\x01", b"\x00\x00\x01", b"\x01\x05", b"\x00\x00\x00\x01",
              b"\x7f\xff\xff\xff", b"\x00" * 8, b"\xff" * 4, b"\x82\x84\x86", b"GET / HTTP/1.1\r\n"]
    SIZES = (0, 1, 13, 25, 26, 27, 100, 1000, 4096, 16383, 16384, 16385, 65535, 65536, 65537,
             100000)
    BIG_SIZES = (262144, 262144, 1 << 20, (1 << 20) + 7, 3 << 20, 10 << 20)
    # How a body is cut into DATA frames: sizes drawn in turn (the windows may cut more);
    # bytes one at a time only for bodies of a few KiB.
    CUTS = ([16384], [16384], [1], [1, 2, 3], [100, 1000], [7, 16384, 5000, 1], [4096],
            [1, 16384])
    BIG_CUTS = ([16384], [16384], [4096], [1000, 16384], [100, 1000, 5000])

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + ["--max-body", str(self.max_body)]

    def new_conn(self, rng):
        return {"reqs": 0}

    def settings(self, rng, small=False, big=False):
        """h2_start: our SETTINGS and how we give window."""
        s = {}
        if rng.random() < 0.3:
            s[H2_HEADER_TABLE_SIZE] = rng.choice((0, 100, 4096, 65536))
        if rng.random() < 0.2:
            s[H2_MAX_FRAME_SIZE] = rng.choice((16384, 16385, 65536, (1 << 24) - 1))
        if rng.random() < 0.1:
            s[H2_MAX_HEADER_LIST_SIZE] = rng.choice((8192, 65536))
        if big:
            win, conn = H2_MAX_WINDOW, H2_MAX_WINDOW
        elif small:
            win, conn = rng.choice((0, 0, 1, 10, 100)), 65535
        else:
            win = rng.choice((65535, 65535, 16384, 1000, 1 << 20, H2_MAX_WINDOW))
            conn = rng.choice((65535, 1 << 20, 16 << 20, H2_MAX_WINDOW))
        if win != 65535 or rng.random() < 0.2:
            s[H2_INITIAL_WINDOW_SIZE] = win
        return {"op": "h2_start", "settings": {str(k): v for k, v in s.items()},
                "keep": max(win, 1), "conn": conn}

    def request(self, rng, st, big=False, post=None, plain=False):
        """One valid request (h2_req); plain: within the server's header limits."""
        op = {"op": "h2_req", "i": st["reqs"]}
        st["reqs"] += 1
        r = rng.random() if post is None else (0.6 if post else 0.3)
        body = None
        if r < 0.25:
            op["method"], op["path"] = "GET", "/"
        elif r < 0.5:
            n = rng.choice(self.BIG_SIZES if big else self.SIZES)
            op["method"], op["path"] = "GET", f"/bytes/{n}"
        elif r < 0.75:
            n = rng.choice(self.BIG_SIZES[:3] if big else self.SIZES)
            op["method"], op["path"] = "POST", "/echo"
            body = n
        elif r < 0.8:
            op["method"] = "HEAD"
            op["path"] = rng.choice(("/", "/stats", f"/bytes/{rng.choice(self.SIZES)}"))
        elif r < 0.85:
            op["method"], op["path"] = "GET", "/stats"
        else:
            op["method"] = rng.choice(("GET", "GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"))
            op["path"] = rng.choice(("/missing", "/?x=1", "/" + token(rng), "/bytes/abc",
                                     "/bytes/99999999999", "/bytes/", "/echo/x",
                                     "/" + "x" * rng.randint(100, 3000)))
            if op["method"] in ("POST", "PUT", "PATCH"):
                body = rng.choice((0, 10, 1000, 20000))
        if body is not None:
            op["body"] = {"gen": rng.getrandbits(32), "n": body}  # (1 MiB + 7: 413)
            op["cut"] = {"seed": rng.getrandbits(32),
                         "sizes": rng.choice(self.CUTS if body <= 4096 else self.BIG_CUTS),
                         "pad": rng.choice((0, 0, 0.3, 1.0))}
            op["cl"] = rng.random() < 0.5
            if rng.random() < 0.15:
                op["trailers"] = True
            elif rng.random() < 0.15:
                op["end"] = "empty"
        hdrs = []
        for _ in range(geometric(rng, 2, 12) - 1):
            hdrs.append(rng.choice((["user-agent", "serverfuzz/" + token(rng)],
                                    ["accept", "*/*"], ["x-" + token(rng), token(rng, 0, 40)],
                                    ["cookie", "a=" + token(rng, 1, 100)],
                                    ["cookie", "b=1; c=" + token(rng)])))
        # Past the server's header limits (16 KiB, 100 fields): 431, trailers or not
        # (fuzz_cases/http2-431-trailers.json).
        if plain:
            pass
        elif rng.random() < 0.03:
            hdrs.append(["x-big", "b" * rng.choice((17000, 40000))])
            op["big_head"] = True
        elif rng.random() < 0.02:
            hdrs += [[f"x-{k}", str(k)] for k in range(101)]
            op["big_head"] = True
        if hdrs:
            op["hdrs"] = hdrs
        if rng.random() < 0.1:
            op["never"] = "Bearer " + token(rng, 8, 40)
        if rng.random() < 0.05 and not op.get("big_head"):  # HEADERS and CONTINUATIONs
            op["cont"] = rng.choice((1, 10, 100))
        if rng.random() < 0.05:
            op["authority"] = rng.choice(("localhost", "a.example:8080", "[::1]"))
        return op

    def bad_request(self, rng, st):
        """A request RFC 9113 section 8.1.1 calls malformed (nghttp2 resets its stream)."""
        op = self.request(rng, st, post=False, plain=True)
        op["bad"] = True
        how = rng.choice(("upper", "connection", "te", "cl", "empty_path", "pseudo_last",
                          "space", "upgrade"))
        hdrs = op.setdefault("hdrs", [])
        if how == "upper":
            hdrs.append(["X-Upper", "1"])
        elif how == "connection":
            hdrs.append(["connection", rng.choice(("close", "keep-alive"))])
        elif how == "te":
            hdrs.append(["te", "gzip"])
        elif how == "cl":
            op["method"], op["path"] = "POST", "/echo"
            op["body"] = {"gen": rng.getrandbits(32), "n": rng.choice((0, 5, 100))}
            hdrs.append(["content-length", str(op["body"]["n"] + rng.choice((-1, 1, 1000)))])
            op.pop("cl", None)
            if op["body"]["n"] == 0 and hdrs[-1][1] == "-1":
                hdrs[-1][1] = "1"
        elif how == "empty_path":
            op["path"] = ""
        elif how == "pseudo_last":
            op["pseudo_last"] = True
        elif how == "space":
            hdrs.append(["x-bad name", "1"])
        else:
            hdrs.append(["upgrade", "h2c"])
        return op

    def bad_frame(self, rng, st):
        """A frame that breaks a rule, or a valid one cut or changed: bits flipped, a length
        that lies, a stream id that is not allowed."""
        nxt = 2 * st["reqs"] + 1  # the next stream id, when every request opened in order
        sid = rng.choice((nxt, nxt, 0, nxt + 1, 1, max(1, nxt - 2), 0x7FFFFFFF, nxt + 200))
        kind = rng.choice(("data", "headers", "headers", "priority", "rst", "settings", "push",
                           "ping", "goaway", "window", "continuation", "unknown"))
        if kind == "data":
            pad = b"\x05" if rng.random() < 0.3 else b""  # a pad length, maybe past the end
            f = h2_frame(0, rng.choice((0, 1, 8, 9)), sid, pad + rng.randbytes(rng.randint(0, 40)))
        elif kind in ("headers", "continuation"):
            enc = hpack.Encoder()
            block = enc.encode([(b":method", b"GET"), (b":scheme", b"http"),
                                (b":authority", b"a"), (b":path", b"/")])
            if rng.random() < 0.5:
                b = bytearray(block)
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                block = bytes(b)
            flags = rng.choice((4, 5, 0, 1, 0x24, 0x0C))
            if kind == "headers":
                payload = block
                if flags & 0x20:
                    payload = struct.pack(">IB", rng.choice((0, sid, 3)), 15) + payload
                if flags & 0x08:
                    payload = b"\x03" + payload + b"\x00\x00\x00"
                f = h2_frame(1, flags, sid, payload)
            else:
                f = h2_frame(9, rng.choice((0, 4)), sid, block)
        elif kind == "priority":
            f = h2_frame(2, 0, sid, struct.pack(">IB", rng.choice((0, sid, 0x80000000 | sid)),
                                                rng.randrange(256))[:rng.choice((5, 5, 4, 6))])
        elif kind == "rst":
            f = h2_frame(3, 0, sid, struct.pack(">I", rng.randrange(16))[:rng.choice((4, 4, 3))])
        elif kind == "settings":
            entries = b"".join(struct.pack(">HI", rng.choice((1, 2, 3, 4, 5, 6, 8, 9, 0x77)),
                                           rng.choice((0, 1, 2, 100, 16383, 65535,
                                                       H2_MAX_WINDOW, 1 << 31, 1 << 24)))
                               for _ in range(rng.choice((1, 2, 40))))
            if rng.random() < 0.2:
                entries = entries[:-1]
            f = h2_frame(4, rng.choice((0, 0, 1)), rng.choice((0, 0, sid)), entries)
        elif kind == "push":
            f = h2_frame(5, 4, sid, struct.pack(">I", nxt + 1) + b"\x82\x84\x86")
        elif kind == "ping":
            f = h2_frame(6, rng.choice((0, 1)), rng.choice((0, 0, sid)),
                         rng.randbytes(rng.choice((8, 8, 7, 9))))
        elif kind == "goaway":
            f = h2_frame(7, 0, rng.choice((0, sid)),
                         struct.pack(">II", rng.choice((0, nxt, 0x7FFFFFFF)), rng.randrange(14))
                         + rng.randbytes(rng.randint(0, 8)))
        elif kind == "window":
            f = h2_frame(8, 0, rng.choice((0, sid)),
                         struct.pack(">I", rng.choice((0, 1, H2_MAX_WINDOW, 0x80000000)))
                         [:rng.choice((4, 4, 3, 5))])
        else:
            f = h2_frame(rng.choice((0x0A, 0x10, 0xFF)), rng.randrange(256), sid,
                         rng.randbytes(rng.randint(0, 30)))
        b = bytearray(f)
        for _ in range(rng.choice((0, 0, 1, 2))):  # and then changed
            how = rng.choice(("flip", "length", "type", "cut", "sid"))
            if how == "flip" and b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            elif how == "length" and len(b) >= 9:
                n = max(0, (len(b) - 9) + rng.choice((-3, -1, 1, 2, 100, 20000)))
                b[0:3] = struct.pack(">I", n)[1:]
            elif how == "type" and len(b) > 3:
                b[3] = rng.randrange(12)
            elif how == "cut":
                del b[rng.randint(1, max(1, len(b) - 1)):]
            elif how == "sid" and len(b) >= 9:
                b[5:9] = struct.pack(">I", rng.choice((0, 2, nxt + 1, 0xFFFFFFFF)))
        return bytes(b)

    def several(self, rng, st, acts, lo=1, mean=4, cap=40, big=False):
        for _ in range(lo + geometric(rng, mean, cap) - 1):
            acts.append(self.request(rng, st, big=big))

    def between(self, rng, acts, keep=65535):
        """Now and then a pause, waiting for the first answers, a PING, new SETTINGS
        (windows, frame size, header table: the server must follow), or a frame the server
        must ignore."""
        r = rng.random()
        if r < 0.1:
            acts.append({"op": "sleep", "ms": ms(rng.choice((0.1, 1, 10, 50)))})
        elif r < 0.15:
            acts.append({"op": "wait_data", "ms": 500})
        elif r < 0.17:
            acts.append({"op": "h2_ping", "n": 1, "base": rng.getrandbits(32)})
        elif r < 0.2:
            new = [(H2_HEADER_TABLE_SIZE, 0), (H2_HEADER_TABLE_SIZE, 100),
                   (H2_HEADER_TABLE_SIZE, 4096), (H2_MAX_FRAME_SIZE, 16384),
                   (H2_MAX_FRAME_SIZE, 1 << 20)]
            if keep <= 1 << 20:  # (windows kept near 2^31 - 1 cannot grow: a FLOW_CONTROL_ERROR)
                new += [(H2_INITIAL_WINDOW_SIZE, 0), (H2_INITIAL_WINDOW_SIZE, 1000),
                        (H2_INITIAL_WINDOW_SIZE, 1 << 20), (H2_INITIAL_WINDOW_SIZE, 65535)]
            code, value = rng.choice(new)
            acts.append({"op": "h2_settings", "set": {str(code): value}})
        elif r < 0.23:
            acts.append(self.ext(rng))

    def ext(self, rng):
        """h2_ext: PRIORITY_UPDATE, or a frame of an unknown type."""
        if rng.random() < 0.5:
            return {"op": "h2_ext", "type": 0x10, "back": rng.choice((0, 1, 3, -1)),
                    "value": rng.choice(("u=0", "u=7, i", "i", "u=3", "x=?1, u=1"))}
        return {"op": "h2_ext", "type": rng.choice((0x0A, 0x0C, 0x20, 0x77, 0xFF)),
                "flags": rng.randrange(256), "on_stream": rng.random() < 0.5,
                "hex": rng.randbytes(rng.choice((0, 1, 8, 100, 1000))).hex()}

    def gen_kind(self, rng, kind, plan, acts, st, budget, pre):
        mode = "strict"
        read = {"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True}
        if kind in ("h2_valid", "h2_stream_rst", "h2_bad_request", "h2_flood"):
            acts.append(self.settings(rng))
            # Mostly a few streams; now and then more than the server's 100 at once.
            n = geometric(rng, 8, 60) if rng.random() < 0.95 else rng.randint(100, 200)
            rsts = set(rng.sample(range(n), min(n, rng.randint(1, 4)))) \
                if kind == "h2_stream_rst" else set()
            flood_at = rng.randrange(n + 1)
            for k in range(n):
                if kind == "h2_flood" and k == flood_at:
                    self.flood(rng, st, acts)
                if kind == "h2_bad_request" and rng.random() < 0.3:
                    acts.append(self.bad_request(rng, st))
                else:
                    acts.append(self.request(rng, st))
                self.between(rng, acts, acts[0]["keep"])
                for j in [j for j in rsts if j <= k and rng.random() < 0.5]:
                    acts.append({"op": "h2_rst", "req": j, "code": rng.choice((0, 8, 8, 1))})
                    rsts.discard(j)
            if kind == "h2_flood" and flood_at == n:
                self.flood(rng, st, acts)
            for j in rsts:
                if rng.random() < 0.5:
                    acts.append({"op": "wait_data", "ms": 300})
                acts.append({"op": "h2_rst", "req": j, "code": 8})
            if kind == "h2_bad_request":
                acts[0]["bad"] = True
            if kind in ("h2_bad_request", "h2_flood"):
                mode = "semi"
            acts.append(read)
            if rng.random() < 0.3:
                acts.append({"op": "h2_goaway"})
        elif kind == "h2_big":
            acts.append(self.settings(rng))
            self.several(rng, st, acts, 1, 2, 3, big=True)
            self.several(rng, st, acts, 1, 3, 10)
            acts.append(read)
        elif kind == "h2_windows":  # small or zero windows, opened by hand, then kept small
            acts.append(dict(self.settings(rng, small=True), auto=False))
            total = 0
            for _ in range(geometric(rng, 4, 12)):
                op = self.request(rng, st)
                if op["path"].startswith("/bytes/") and op["path"][7:].isdigit():
                    if int(op["path"][7:]) > 100000:
                        op["path"] = "/bytes/100000"
                total += int(op["path"][7:]) if op["path"][7:].isdigit() else 100
                total += op.get("body", {}).get("n", 0)
                acts.append(op)
            for _ in range(rng.randint(1, 6)):
                acts.append({"op": "sleep", "ms": ms(rng.choice((1, 10, 50, 200)))})
                acts.append({"op": "h2_grant", "n": rng.choice((1, 10, 100, 1000, 16384))})
            keep = max(rng.choice((1, 10, 100, 1000, 16384, 65535)), total // 1500 + 1)
            acts.append({"op": "h2_auto", "keep": keep})
            acts.append(read)
        elif kind == "h2_slow_reader":  # a small receive buffer, read now and then
            plan["rcvbuf"] = rng.choice((2048, 4096, 16384))
            plan["read_gap_ms"] = ms(rng.choice((1, 2, 5, 10)))
            acts.append(self.settings(rng))
            for _ in range(geometric(rng, 3, 8)):
                op = self.request(rng, st)
                if op["path"].startswith("/bytes/") and op["path"][7:].isdigit():
                    op["path"] = f"/bytes/{min(int(op['path'][7:]), 65536)}"
                acts.append(op)
            acts.append({"op": "h2_ping", "n": rng.choice((1, 10, 100))})
            acts.append(read)
        elif kind == "h2_half_close":  # all sent, then shutdown(SHUT_WR): answers still come
            acts.append(self.settings(rng, big=True))
            for _ in range(geometric(rng, 4, 30)):
                op = self.request(rng, st)
                if op.get("body", {}).get("n", 0) > 16384:
                    op["body"]["n"] = 16384
                acts.append(op)
            acts.append({"op": "h2_drain", "ms": 10000})
            acts.append({"op": "shut"})
            acts.append(read)
        elif kind == "h2_mutated":
            acts.append(self.settings(rng))
            for _ in range(rng.choice((0, 1, 1, 3, 10))):
                acts.append(self.request(rng, st))
            if rng.random() < 0.4:
                acts.append({"op": "wait_data", "ms": 300})
            for _ in range(rng.choice((1, 1, 1, 2, 5))):
                acts.append({"op": "h2_raw", "hex": self.bad_frame(rng, st).hex()})
            for _ in range(rng.choice((0, 0, 1, 3))):
                acts.append(self.request(rng, st))
            acts.append({"op": "read", "ms": ms(rng.choice((0, 50, 300, 1000)))})
            mode = "lenient"
        elif kind == "h2_garbage":
            r = rng.random()
            data = self.garbage(rng)
            if r < 0.6:  # after the preface and our SETTINGS, or after part of the preface
                acts.append(self.settings(rng))
                if rng.random() < 0.5:
                    acts.append(self.request(rng, st))
                acts.append({"op": "h2_raw", "hex": data.hex()})
            else:
                split_stream(rng, (H2_PREFACE[:rng.randint(0, 24)] if r < 0.8 else b"") + data,
                             acts, budget)
            acts.append({"op": "read", "ms": ms(rng.choice((0, 100, 500)))})
            mode = "lenient"
        elif kind == "h2_noread":  # never reads while it asks for MiBs and floods PINGs
            plan["rcvbuf"] = rng.choice((1024, 2048, 4096))
            plan["noread"] = True
            acts.append(self.settings(rng))
            for _ in range(rng.randint(1, 8)):
                acts.append(self.request(rng, st, big=rng.random() < 0.3))
            acts.append({"op": "h2_ping", "n": rng.choice((10, 500, 2000))})
            acts.append({"op": "sleep", "ms": ms(rng.uniform(200, 1500))})
            mode = "lenient"
        elif kind == "h2_reset_mid":  # the connection reset at a random point
            acts.append(self.settings(rng))
            n = geometric(rng, 6, 40)
            cut = rng.randrange(n + 1)
            for k in range(n):
                acts.append(self.request(rng, st, big=rng.random() < 0.1))
                if k == cut:
                    acts.append({"op": "sleep", "ms": ms(rng.choice((0, 0.1, 1, 10, 100)))})
                    break
            if rng.random() < 0.5:
                acts.append({"op": "wait_data", "ms": 300})
            acts.append({"op": "rst"})
            mode = "lenient"
        elif kind == "h2_vanish":  # gone without a GOAWAY, reading nothing more
            acts.append(self.settings(rng))
            self.several(rng, st, acts, 1, 4, 20, big=rng.random() < 0.1)
            acts.append(rng.choice(({"op": "sleep", "ms": ms(rng.choice((0, 1, 20)))},
                                    {"op": "wait_data", "ms": 300},
                                    {"op": "read", "ms": ms(rng.choice((10, 100)))})))
            acts.append({"op": rng.choice(("close", "rst"))})
            mode = "lenient"
        elif kind == "h2_slow":  # the preface, SETTINGS and a request a byte at a time
            acts.append(dict(self.settings(rng), hold=True))
            acts.append(self.request(rng, st, post=False))
            acts.append({"op": "h2_trickle", "n": rng.randint(10, 80),
                         "ms": ms(rng.uniform(1, 20))})
            acts.append(read)
        elif kind == "h2_upgrade":  # h2c by Upgrade: the first request becomes stream 1
            start = self.settings(rng)
            first = self.request(rng, st, post=False, plain=True)
            if first["method"] == "HEAD":  # (h2 cannot know stream 1's method)
                first["method"] = "GET"
            up = {k: first[k] for k in ("method", "path", "hdrs") if k in first}
            # Eager half the time: the preface right behind the request, in the same write
            # (fuzz_cases/http2-upgrade-eager-preface.json).
            up["eager"] = rng.random() < 0.5
            start["upgrade"] = up
            acts.append(start)
            self.several(rng, st, acts, 1, 4, 30)
            acts.append(read)
        elif kind == "h2_idle":
            acts.append(self.settings(rng))
            acts.append({"op": "sleep", "ms": ms(rng.uniform(100, 1500))})
            if rng.random() < 0.5:
                acts.append(self.request(rng, st))
                acts.append(read)
            else:
                mode = "lenient"
        else:
            raise ValueError(kind)
        plan["h2"] = {"check": mode}
        return None

    def flood(self, rng, st, acts):
        """Control frames by the thousand, or empty DATA frames, or streams opened and reset
        at once; the answers before and after are still checked (semi)."""
        what = rng.choice(("ping", "settings", "window", "empty", "rapid", "priority"))
        n = rng.choice((10, 100, 1000, 3000))
        if what == "ping":
            acts.append({"op": "h2_ping", "n": n, "base": rng.getrandbits(32)})
        elif what == "settings":
            acts.append({"op": "h2_settings", "n": min(n, 1000)})
        elif what == "window":
            acts.append({"op": "h2_window", "n": n, "streams": rng.random() < 0.5})
        elif what == "empty":
            op = self.request(rng, st, post=True, plain=True)
            op["method"], op["path"] = "POST", "/echo"
            op.setdefault("body", {"gen": rng.getrandbits(32), "n": 10})
            op["hold"] = True
            acts.append(op)
            pad = rng.random() < 0.3  # only a pad length: not empty for the limit
            acts.append({"op": "h2_empty", "req": op["i"], "pad": pad,
                         "n": rng.choice((1, 2, 3, 50, 1000) if pad else (1, 2, 3, 50))})
        elif what == "rapid":
            acts.append({"op": "h2_rapid", "n": rng.choice((10, 100, 1100, 2000))})
        else:
            acts.append({"op": "h2_priority", "n": n})

    def canary(self, port, n, tls):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                    header_encoding=None))
        conn.initiate_connection()
        want = {1: b"Hello, World!", 3: h2_pattern(0, 1000 + n)}
        for sid, path in ((1, b"/"), (3, b"/bytes/%d" % (1000 + n))):
            conn.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"http"),
                                    (b":authority", b"canary-%d" % n), (b":path", path)],
                              end_stream=True)
        got = {1: b"", 3: b""}
        ended = set()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(conn.data_to_send())
            while len(ended) < 2:
                data = s.recv(65536)
                if not data:
                    raise OSError("closed before the answers")
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    raise CanaryWrong(f"the server's frames broke HTTP/2: {e}")
                for ev in events:
                    if isinstance(ev, h2.events.DataReceived):
                        got[ev.stream_id] += ev.data
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        ended.add(ev.stream_id)
                    elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                        raise OSError(f"{ev}")  # refused while busy: again
                s.sendall(conn.data_to_send())
        if got != want:
            raise CanaryWrong(f"GET / and /bytes/{1000 + n} answered {got[1][:40]!r}, "
                              f"{len(got[3])} bytes")

# ---------------------------------------------------------------------------------------------
# gRPC (eddy-grpc-server): gRPC's interop TestService and the health service over h2c, the
# messages protobuf's wire format by hand (grpc/testing/messages.proto), played by GrpcClient,
# an H2Client whose requests are calls (GrpcCall).

GRPC_SVC = "/grpc.testing.TestService/"
GRPC_HEALTH = "/grpc.health.v1.Health/"
GRPC_MAX = 4 << 20  # EDDY_GRPC_MAX_MESSAGE, each way: a message of exactly this is allowed
# The largest response_size (and payload) whose message is at most GRPC_MAX: the payload's
# 1 + 4 bytes of tag and length in a message's 1 + 4 (SimpleResponse, StreamingOutputCall-
# Response; a SimpleRequest with only its payload is the same).
GRPC_MAX_PAYLOAD = GRPC_MAX - 10
GRPC_OK, GRPC_CANCELLED, GRPC_UNKNOWN, GRPC_NOT_FOUND = 0, 1, 2, 5
GRPC_RESOURCE_EXHAUSTED, GRPC_UNIMPLEMENTED, GRPC_INTERNAL = 8, 12, 13
GRPC_PING_STRIKES = 2  # the server's max_ping_strikes: GOAWAY at the strike past it
H2_CANCEL, H2_ENHANCE_YOUR_CALM = 8, 11
GRPC_DEADLINE = b"4"  # grpc-status DEADLINE_EXCEEDED
# Methods that answer the interop cases' "Echo Metadata" (x-grpc-test-echo-initial in the
# response headers, x-grpc-test-echo-trailing-bin in the trailers): examples/grpc_server.c.
GRPC_ECHOES = ("EmptyCall", "UnaryCall", "StreamingOutputCall", "FullDuplexCall")
# Hostile calls the generator leaves out while the server's bug they meet is open (their
# fuzz_cases/ trace plays them, on the known_failing list of tests/CMakeLists.txt); none now.
# (resp_big, a response past the largest message, was until 0f58968: the call went on.)
GRPC_OPEN = set()


def pb_varint(n):
    n &= (1 << 64) - 1  # negative int32s are ten bytes, as protobuf sends them
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_int(num, v):
    return pb_varint(num << 3) + pb_varint(v)


def pb_bytes(num, b):
    return pb_varint(num << 3 | 2) + pb_varint(len(b)) + b


def pb_decode(b):
    """A message's fields [(number, wire type, value)], value an int or bytes; ValueError when
    it does not parse."""
    out, i, n = [], 0, len(b)

    def var():
        nonlocal i
        v = shift = 0
        while True:
            if i >= n or shift > 63:
                raise ValueError("a varint past the end")
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v
    while i < n:
        key = var()
        num, wt = key >> 3, key & 7
        if wt == 0:
            v = var()
        elif wt in (1, 2, 5):
            ln = var() if wt == 2 else 8 if wt == 1 else 4
            if i + ln > n:
                raise ValueError("a field past the end")
            v = bytes(b[i:i + ln])
            i += ln
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, wt, v))
    return out


def grpc_payload_bytes(spec):
    """A request payload's body: [seed, n] random bytes, ["z", n] zeros (they compress)."""
    if spec[0] == "z":
        return bytes(spec[1])
    return random.Random(spec[0]).randbytes(spec[1])


def grpc_status_of(code):
    """The grpc-status eddy-grpc-server finishes with for an EchoStatus code (0: none)."""
    return code if 0 <= code <= 16 else GRPC_UNKNOWN


def grpc_message_bytes(m):
    """A request message of the plan, serialized."""
    t = m["t"]
    out = b""
    if t == "empty":
        return b""
    if t == "raw":
        return bytes.fromhex(m["hex"])
    if t == "health":
        return pb_bytes(1, m["svc"].encode()) if m["svc"] or m.get("explicit") else b""
    if t == "simple":
        if m.get("size"):
            out += pb_int(2, m["size"])
        if m.get("pay") is not None:
            out += pb_bytes(3, pb_bytes(2, grpc_payload_bytes(m["pay"])))
        if m.get("comp") is not None:
            out += pb_bytes(6, pb_int(1, 1) if m["comp"] else b"")
    elif t == "in":
        if m.get("pay") is not None:
            out += pb_bytes(1, pb_bytes(2, grpc_payload_bytes(m["pay"])))
    elif t == "out":
        for size, interval in m.get("params", []):
            p = (pb_int(1, size) if size else b"") + (pb_int(2, interval) if interval else b"")
            out += pb_bytes(2, p)
        if m.get("pay") is not None:
            out += pb_bytes(3, pb_bytes(2, grpc_payload_bytes(m["pay"])))
    else:
        raise ValueError(f"message type {t!r}")
    if m.get("status") is not None:
        code, text = m["status"]
        out += pb_bytes(7, (pb_int(1, code) if code else b"") +
                        (pb_bytes(2, text.encode()) if text else b""))
    return out


_GRPC_BOMBS = {}


def grpc_gzip(data):
    return gzip.compress(data, compresslevel=6, mtime=0)  # the same bytes every time


def grpc_bomb(n):
    """n zero bytes gzip'd (cached: a burst may use one many times)."""
    if n not in _GRPC_BOMBS:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = bytes(1 << 20)
        out = [z.compress(chunk) for _ in range(n >> 20)]
        out.append(z.compress(bytes(n & ((1 << 20) - 1))))
        out.append(z.flush())
        _GRPC_BOMBS[n] = b"".join(out)
    return _GRPC_BOMBS[n]


def gzip_whole(data):
    """Whether data inflates (gzip) to its end with nothing left over: what a server accepts."""
    d = zlib.decompressobj(31)
    try:
        d.decompress(data)
    except zlib.error:
        return False
    return d.eof and not d.unused_data


def grpc_framed(m):
    """A message of the plan with its 5-byte prefix, as its framing says: gz (compressed),
    flag (the prefix's flag byte), len (the length the prefix claims), flip (a byte of the
    compressed bytes changed), junk (bytes after them), cut (only the first bytes)."""
    if m["t"] == "bomb":
        data = grpc_bomb(m["n"])
    else:
        data = grpc_message_bytes(m)
        if m.get("gz"):
            data = grpc_gzip(data)
    if m.get("flip") is not None:
        b = bytearray(data)
        at = 10 + m["flip"] % max(1, len(b) - 10)  # past gzip's header, whose bytes go unread
        b[min(at, len(b) - 1)] ^= 0x55
        data = bytes(b)
    if m.get("trunc") is not None:
        data = data[:m["trunc"]]
    if m.get("junk"):
        data += bytes.fromhex(m["junk"])
    flag = m.get("flag", 1 if m.get("gz") or m["t"] == "bomb" else 0)
    n = m.get("len", len(data))
    out = bytes([flag]) + struct.pack(">I", n & 0xFFFFFFFF) + data
    if m.get("body") is not None:  # (a claimed length past the limit: these bytes of it)
        out = out[:5] + random.Random(m["body"][0]).randbytes(m["body"][1])
    if m.get("cut") is not None:
        out = out[:m["cut"]]
    return out


def grpc_b64(data, rng=None, padded=False):
    out = base64.b64encode(data).decode()
    return out if padded else out.rstrip("=")


def grpc_percent_decode(b):
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i:i + 1] == b"%" and i + 2 < len(b) + 0 and \
                re.match(rb"[0-9a-fA-F]{2}", b[i + 1:i + 3]):
            out.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def grpc_unbase64(v):
    """A -bin value as gRPC reads it: parts split on ',', each padded or not."""
    out = b""
    for part in v.split(b","):
        part = part.strip(b" ").rstrip(b"=")
        out += base64.b64decode(part + b"=" * (-len(part) % 4))
    return out


class Grpc(Http2):
    """eddy-grpc-server (h2c by prior knowledge): gRPC's interop TestService and the health
    service. Its plans are HTTP/2 plans (see Http2: the same settings, windows, floods, broken
    frames) whose requests are calls (grpc_call actions, played by GrpcClient); each call says
    what its answer must be."""
    name = "grpc"
    exe = "eddy-grpc-server"
    # Calls announcing 4 GiB, gzip bombs of 64 MiB, 4 MiB messages each way: a server that
    # gathered or inflated what it was told would pass this; the runs peak near 100 MiB under
    # ASan (a few 4 MiB messages at once at most), more under TSan's shadow.
    max_rss_mb = 1536
    weights = {"grpc_valid": 22, "grpc_many": 4, "grpc_big": 4, "grpc_windows": 5,
               "grpc_slow_reader": 3, "grpc_cancel": 8, "grpc_deadline": 6, "grpc_hostile": 20,
               "grpc_sleep": 3, "grpc_ping": 4, "grpc_ping_idle": 3, "grpc_flood": 4,
               "grpc_half_close": 4, "grpc_vanish": 5, "grpc_reset_mid": 4, "grpc_mutated": 6,
               "grpc_garbage": 3, "grpc_noread": 2}
    SIZES = (0, 0, 1, 5, 10, 100, 1000, 4096, 16379, 16384, 16385, 65536, 100000)
    BIG_SIZES = (1 << 20, 3 << 20, GRPC_MAX_PAYLOAD, GRPC_MAX_PAYLOAD - 1)
    # How a call's bytes are cut into DATA frames: inside the 5-byte prefixes too.
    CUTS = ([16384], [16384], [1], [1, 2, 3], [4], [5], [6], [3, 7], [1, 4, 16384],
            [100, 1000], [7, 16384, 5000, 1], [4096], [5, 16384])
    BIG_CUTS = ([16384], [16384], [4096], [1000, 16384], [5, 16384, 3])
    TIMEOUTS = ("100S", "5M", "1H", "99999999S", "30000m", "99999999H", "60000000u", "2H")
    SHORT_TIMEOUTS = ("0S", "1n", "1u", "100u", "1m", "2m", "5m", "20m", "50m", "100m")
    BAD_TIMEOUTS = ("", "1", "123456789S", "-1S", "1x", "S", "1.5S", "+1S", "100000000H", "1s",
                    "0x10S", "1SS", "99999999999H")
    TEXTS = ("", "status", "a message", "100% done", "line\nbreak", "caf\u00e9",
             "\u65e5\u672c", "emoji \U0001f600", "%41", "x" * 300)

    @property
    def client_class(self):
        return GrpcClient

    def argv(self, bin_dir, cert_dir):
        return Proto.argv(self, bin_dir, cert_dir)

    def new_conn(self, rng):
        return {"reqs": 0}

    # -- pieces of calls
    def payload(self, rng, n, zeros=None):
        if zeros is None:
            zeros = rng.random() < 0.3
        return ["z", n] if zeros else [rng.getrandbits(32), n]

    def size(self, rng, big=False):
        return rng.choice(self.BIG_SIZES if big else self.SIZES)

    def echo_status(self, rng):
        code = rng.choice(list(range(1, 17)) + [17, 100, -1, 0])
        return [code, rng.choice(self.TEXTS)]

    def metadata(self, rng, op, echoes):
        """Metadata for a call: custom fields, -bin ones (padded, unpadded, parts joined by
        ','), and the echo fields, with what must come back."""
        hdrs = op["hdrs"]
        exp = op["expect"]
        for _ in range(geometric(rng, 2, 8) - 1):
            r = rng.random()
            if r < 0.3:
                hdrs.append(["x-md-" + token(rng, 1, 8), token(rng, 0, 60)])
            elif r < 0.55:
                data = rng.randbytes(rng.randint(0, 40))
                v = grpc_b64(data, padded=rng.random() < 0.5)
                if rng.random() < 0.2:
                    v = v + "," + grpc_b64(rng.randbytes(rng.randint(1, 9)), padded=True)
                hdrs.append(["x-" + token(rng, 1, 8) + "-bin", v])
            elif r < 0.65:
                hdrs.append(["user-agent", "serverfuzz-grpc/" + token(rng)])
            elif r < 0.75:
                op["never"] = "Bearer " + token(rng, 8, 40)
            elif r < 0.87:
                if any(h[0] == "x-grpc-test-echo-initial" for h in hdrs):
                    continue  # (one of each echo field: the server echoes the first)
                v = token(rng, 1, 40, alphabet="abcdefghijklmnopqrstuvwxyz0123456789 -_.:/")
                v = v.strip() or "v"
                hdrs.append(["x-grpc-test-echo-initial", v])
                if echoes:
                    exp["echo_init"] = v
            else:
                if any(h[0] == "x-grpc-test-echo-trailing-bin" for h in hdrs):
                    continue
                parts = [rng.randbytes(rng.randint(0, 30)) for _ in range(rng.choice((1, 1, 2)))]
                v = ",".join(grpc_b64(p, padded=rng.random() < 0.5) for p in parts)
                hdrs.append(["x-grpc-test-echo-trailing-bin", v])
                if echoes:
                    exp["echo_trail"] = b"".join(parts).hex()

    def call(self, rng, st, path, msgs, resp, status=GRPC_OK, end=None, cut=None, big=False):
        """A grpc_call action: path, the messages, what must come back."""
        op = {"op": "grpc_call", "i": st["reqs"], "path": path, "msgs": msgs,
              "hdrs": [["te", "trailers"], ["content-type", rng.choice(
                  ("application/grpc",) * 6 + ("application/grpc+proto",
                                               "application/grpc;charset=utf-8"))]],
              "expect": {"status": status, "resp": resp}}
        st["reqs"] += 1
        if end is None:
            end = rng.choices(("data", "empty", "trailers"), (55, 30, 15))[0] if msgs else \
                rng.choice(("headers", "headers", "empty", "trailers"))
        op["end"] = end
        op["cut"] = {"seed": rng.getrandbits(32),
                     "sizes": cut or rng.choice(self.BIG_CUTS if big else self.CUTS),
                     "pad": rng.choice((0, 0, 0, 0.3))}
        self.recut(rng, op)
        return op

    def recut(self, rng, op):
        """Bytes a few at a time only for calls of a few KiB (about: the payloads say)."""
        size = 0
        for m in op["msgs"]:
            size += 100 + (m.get("pay") or [0, 0])[1] + len(m.get("hex", "")) // 2 + \
                (m.get("body") or [0, 0])[1] + m.get("n", 0) // 1000
        if size > 8192 and min(op["cut"]["sizes"]) < 1000:
            op["cut"]["sizes"] = rng.choice(self.BIG_CUTS)

    def encodings(self, rng, op, msgs):
        """grpc-encoding gzip now and then, the messages compressed or not; what the client
        accepts (grpc-accept-encoding)."""
        if rng.random() < 0.25:
            op["hdrs"].append(["grpc-encoding", rng.choice(("gzip", "gzip", "identity"))])
            if op["hdrs"][-1][1] == "gzip":
                for m in msgs:
                    if rng.random() < 0.6:
                        m["gz"] = True
        if rng.random() < 0.4:
            op["hdrs"].append(["grpc-accept-encoding", rng.choice(
                ("gzip", "identity,gzip", "deflate, gzip", "identity", "br"))])
            return "gzip" in op["hdrs"][-1][1]
        return False

    def valid_call(self, rng, st, big=False, method=None, timeout=None, small=False, cap=None):
        """One valid call of any method, with what it must answer; cap: its responses' and
        requests' payloads at most that."""
        method = method or rng.choices(
            ("UnaryCall", "EmptyCall", "StreamingInputCall", "StreamingOutputCall",
             "FullDuplexCall", "Check", "Watch"), (35, 8, 14, 15, 18, 6, 4))[0]
        status, extra, gate = GRPC_OK, {}, None
        if small:
            big = False

        def sz():
            n = 0 if small else self.size(rng, big and rng.random() < 0.5)
            return n if cap is None else min(n, cap)
        if method == "UnaryCall":
            m = {"t": "simple", "size": sz()}
            if rng.random() < 0.6 or big:
                m["pay"] = self.payload(rng, sz())
            if rng.random() < 0.2:
                m["comp"] = rng.random() < 0.8
            if rng.random() < 0.15:
                m["status"] = self.echo_status(rng)
                status = grpc_status_of(m["status"][0])
                if status:
                    extra["msg"] = m["status"][1]
            msgs = [m]
            resp = [] if status else [["simple", max(0, m["size"])]]
        elif method == "EmptyCall":
            msgs, resp = [{"t": "empty"}], [["empty", 0]]
        elif method == "StreamingInputCall":
            msgs = [{"t": "in", "pay": self.payload(rng, sz())} if rng.random() < 0.9 else
                    {"t": "in"} for _ in range(rng.choice((0, 1, 1, 2, 3, 5, 10)))]
            total = sum(m["pay"][1] for m in msgs if "pay" in m)
            resp = [["in", total]]
        elif method == "StreamingOutputCall":
            m = {"t": "out", "params": self.params(rng, big, small, cap=cap)}
            if rng.random() < 0.3:
                m["pay"] = self.payload(rng, rng.choice(self.SIZES))
            if rng.random() < 0.1:
                m["status"] = self.echo_status(rng)
                status = grpc_status_of(m["status"][0])
                if status:
                    extra["msg"] = m["status"][1]
            msgs = [m]
            resp = [] if status else [["out", max(0, p[0])] for p in m["params"]]
        elif method == "FullDuplexCall":
            msgs, resp, gate = [], [], []
            pingpong = rng.random() < 0.5
            for _ in range(rng.choice((0, 1, 1, 2, 3, 4, 8))):
                m = {"t": "out", "params": self.params(rng, big, small, few=True, cap=cap)}
                if rng.random() < 0.2:
                    m["pay"] = self.payload(rng, rng.choice(self.SIZES))
                gate.append(len(resp) if pingpong else 0)
                msgs.append(m)
                resp += [["out", max(0, p[0])] for p in m["params"]]
            if rng.random() < 0.1:  # a status asked last; messages after it are dropped
                m = {"t": "out", "params": self.params(rng, False, True, few=True),
                     "status": self.echo_status(rng)}
                status = grpc_status_of(m["status"][0])
                gate.append(len(resp) if pingpong else 0)
                msgs.append(m)
                if status:
                    extra["msg"] = m["status"][1]
                    for _ in range(rng.choice((0, 0, 1, 2))):
                        msgs.append({"t": "out", "params": [[10, 0]]})
                        gate.append(len(resp) if pingpong else 0)
                else:
                    resp += [["out", max(0, p[0])] for p in m["params"]]
        else:  # Check, Watch
            svc = rng.choice(("", "", "grpc.testing.TestService", "grpc.health.v1.Health",
                              "unknown.Service", "grpc.testing", "grpc.testing.TestService/"))
            known = svc in ("", "grpc.testing.TestService", "grpc.health.v1.Health")
            msgs = [{"t": "health", "svc": svc, "explicit": rng.random() < 0.3}]
            if method == "Check":
                resp = [["health", 1]] if known else []
                status = GRPC_OK if known else GRPC_NOT_FOUND
            else:
                resp = [["health", 1 if known else 3]]  # then open until the client goes
        path = (GRPC_HEALTH if method in ("Check", "Watch") else GRPC_SVC) + method
        op = self.call(rng, st, path, msgs, resp, status, big=big)
        if gate and any(gate):
            op["gate"] = gate
        if method == "FullDuplexCall" and resp and rng.random() < 0.3:
            op["end_gate"] = rng.randint(1, len(resp))  # half-closed after some answers
        op["expect"].update(extra)
        if method == "Watch":  # (its request comes with the half-close, as for any stream)
            op["rst"] = {"got": 1}  # it never ends: cancelled once its answer came
        self.metadata(rng, op, method in GRPC_ECHOES)
        accept = self.encodings(rng, op, msgs)
        for m in msgs:
            self.fit(m)
        if method == "UnaryCall" and msgs[0].get("comp") and not status:
            op["expect"]["gz"] = accept
        elif method != "UnaryCall":
            op["expect"]["gz"] = False
        elif not msgs[0].get("comp"):
            op["expect"]["gz"] = False
        t = timeout if timeout is not None else \
            rng.choice(self.TIMEOUTS) if rng.random() < 0.4 else None
        if t is not None:
            op["hdrs"].append(["grpc-timeout", t])
        rng.shuffle(op["hdrs"])  # (fields in any order; pseudo-headers stay first)
        return op

    @staticmethod
    def fit(m):
        """A valid request within the largest message: its payload cut by what the other
        fields take; zeros when compressed near the limit (random bytes grow when gzip'd)."""
        pay = m.get("pay")
        if pay is None or pay[1] < GRPC_MAX - (64 << 10):
            return
        if m.get("gz"):
            pay[0] = "z"
        n = len(grpc_message_bytes(dict(m, pay=["z", pay[1]])))
        if n > GRPC_MAX:
            pay[1] -= n - GRPC_MAX

    def params(self, rng, big=False, small=False, few=False, cap=None):
        """StreamingOutputCall's response_parameters: [size, interval_us]."""
        n = rng.choice((0, 1, 1, 2, 3, 5) if few else (1, 2, 3) if big else
                       (0, 1, 2, 3, 5, 10, 30))
        out = []
        for _ in range(n):
            size = 0 if small else self.size(rng, big and rng.random() < 0.3)
            if rng.random() < 0.03:
                size = rng.choice((-1, -100))
            if cap is not None:
                size = min(size, cap)
            interval = rng.choice((0, 0, 0, 0, 1, 100, 1000, 20000)) if not big else 0
            out.append([size, interval])
        return out

    def hostile_call(self, rng, st):
        """A call that breaks a rule of gRPC's, with the exact answer it must get."""
        how = rng.choice(("len_huge", "len_over", "flag_noenc", "flag_bad", "bomb", "gz_corrupt",
                          "enc_unsupported", "timeout_bad", "timeout_bad", "ctype", "method",
                          "path", "two", "none", "cut", "cut", "bin_bad", "exact") +
                         (("resp_big",) if "resp_big" not in GRPC_OPEN else ()))
        method = rng.choice(("UnaryCall", "UnaryCall", "EmptyCall", "StreamingInputCall",
                             "StreamingOutputCall", "FullDuplexCall"))
        # A valid call first (its messages may go before the broken one), then broken.
        op = self.valid_call(rng, st, method=method, small=rng.random() < 0.5)
        exp = op["expect"]
        exp.pop("gz", None)
        exp["hostile"] = how
        msgs = op["msgs"]
        streaming = method in ("StreamingInputCall", "FullDuplexCall")
        keep = msgs[:rng.randint(0, len(msgs))] if streaming else []
        keep = [m for m in keep if m.get("status") is None]  # (a status would end it first)
        resp_before = self.responses_of(method, keep)
        hdrs = op["hdrs"]

        def drop_hdr(name):
            hdrs[:] = [h for h in hdrs if h[0] != name]

        def fail(status, before=True):
            """The call ends with status; responses to messages before may come first (a
            prefix of theirs: the server drops what it had not sent)."""
            exp["status"] = status
            exp["resp"] = resp_before if before else []
            exp["prefix"] = True
            exp.pop("msg", None)
            exp.pop("echo_trail", None)
            if not (method in ("StreamingOutputCall", "FullDuplexCall") and before):
                exp.pop("echo_init", None)
            else:
                exp["echo_init_maybe"] = exp.pop("echo_init", None)
            op.pop("gate", None)
            op.pop("end_gate", None)
        bad = {"t": "raw", "hex": rng.randbytes(rng.choice((0, 3, 20))).hex()}
        if how in ("len_huge", "len_over"):
            bad["len"] = 0xFFFFFFFF if how == "len_huge" else \
                GRPC_MAX + rng.choice((1, 2, 1000, 1 << 20))
            bad["body"] = [rng.getrandbits(32), rng.choice((0, 1, 100, 20000))]
            op["msgs"] = keep + [bad]
            op["end"] = rng.choice(("data", "none", "none", "empty"))
            fail(GRPC_RESOURCE_EXHAUSTED)
        elif how == "flag_noenc":  # compressed, without grpc-encoding (or identity)
            drop_hdr("grpc-encoding")
            if rng.random() < 0.3:
                hdrs.append(["grpc-encoding", "identity"])
            for m in keep:
                m.pop("gz", None)
            m = dict(msgs[0]) if msgs and method not in ("StreamingInputCall",) else \
                {"t": "in", "pay": self.payload(rng, 10)}
            m["gz"] = rng.random() < 0.5
            m["flag"] = 1
            op["msgs"] = keep + [m]
            fail(GRPC_INTERNAL)
        elif how == "flag_bad":
            bad["flag"] = rng.choice((2, 3, 0x80, 0xFF, rng.randint(2, 255)))
            op["msgs"] = keep + [bad]
            fail(GRPC_INTERNAL)
        elif how in ("bomb", "gz_corrupt"):
            drop_hdr("grpc-encoding")
            hdrs.append(["grpc-encoding", "gzip"])
            if how == "bomb":
                m = {"t": "bomb", "n": rng.choice((GRPC_MAX + 1, 5 << 20, 16 << 20, 64 << 20))}
                status = GRPC_RESOURCE_EXHAUSTED
            else:
                m = dict(msgs[0]) if msgs else {"t": "simple", "size": 10,
                                                "pay": self.payload(rng, 100)}
                m["gz"] = True
                kind = rng.choice(("flip", "trunc", "junk", "garbage", "empty"))
                if kind == "flip":
                    # A flipped byte can leave the stream whole (bits a block never reads:
                    # seed 137945024961763's came out as the same 100,008 bytes): another.
                    for _ in range(8):
                        m["flip"] = rng.getrandbits(16)
                        if not gzip_whole(grpc_framed(m)[5:]):
                            break
                elif kind == "trunc":
                    m["trunc"] = rng.choice((0, 1, 5, 10, 11, 18))
                    if m["trunc"] == 0:  # (an empty compressed message)
                        pass
                elif kind == "junk":
                    m["junk"] = rng.randbytes(rng.choice((1, 4, 10))).hex()
                elif kind == "garbage":
                    m = {"t": "raw", "hex": rng.randbytes(rng.randint(1, 60)).hex(), "flag": 1}
                else:
                    m = {"t": "raw", "hex": "", "flag": 1}
                status = GRPC_INTERNAL
            op["msgs"] = keep + [m]
            fail(status)
        elif how == "enc_unsupported":
            drop_hdr("grpc-encoding")
            hdrs.append(["grpc-encoding", rng.choice(("br", "deflate", "snappy", "zstd",
                                                      "x-none", "GZIP", "gzip, identity", ""))])
            op["expect"]["accept_enc"] = True
            fail(GRPC_UNIMPLEMENTED, before=False)
        elif how == "timeout_bad":  # a malformed timeout is none: the call is answered
            drop_hdr("grpc-timeout")
            hdrs.append(["grpc-timeout", rng.choice(self.BAD_TIMEOUTS)])
            exp.pop("hostile")
        elif how == "ctype":
            drop_hdr("content-type")
            ct = rng.choice(("application/json", "text/plain", "application/grpc-web",
                             "application/grpcx", "application/grp", "APPLICATION/GRPC",
                             "application/grp+proto", None))
            if ct is not None:
                hdrs.append(["content-type", ct])
            exp["http"] = 415
        elif how == "method":
            op["method"] = rng.choice(("GET", "PUT", "DELETE", "PATCH", "OPTIONS"))
            exp["http"] = 405
        elif how == "path":
            op["path"] = rng.choice((GRPC_SVC + "UnimplementedCall", GRPC_SVC + "HalfDuplexCall",
                                     "/x", "/", GRPC_SVC + "unarycall", GRPC_SVC + "UnaryCall/x",
                                     GRPC_SVC + "UnaryCall?x=1", "/grpc.testing.TestService",
                                     "//UnaryCall", GRPC_HEALTH + "List",
                                     "/grpc.testing.UnimplementedService/UnimplementedCall"))
            fail(GRPC_UNIMPLEMENTED, before=False)
            exp["msg"] = "Method not found"
        elif how == "two":  # two requests for a unary or server streaming method
            path = rng.choice(("UnaryCall", "EmptyCall", "StreamingOutputCall"))
            op["path"] = GRPC_SVC + path
            m = {"UnaryCall": {"t": "simple", "size": 10}, "EmptyCall": {"t": "empty"},
                 "StreamingOutputCall": {"t": "out", "params": [[1, 0]]}}[path]
            op["msgs"] = [m, dict(m)] + ([dict(m)] if rng.random() < 0.3 else [])
            fail(GRPC_INTERNAL, before=False)
        elif how == "none":  # no request for a unary or server streaming method
            op["path"] = GRPC_SVC + rng.choice(("UnaryCall", "EmptyCall", "StreamingOutputCall"))
            op["msgs"] = []
            op["end"] = rng.choice(("headers", "empty", "trailers"))
            fail(GRPC_INTERNAL, before=False)
        elif how == "cut":  # the stream ends inside a message
            m = dict(msgs[0]) if msgs else {"t": "in", "pay": self.payload(rng, 50)}
            m.pop("gz", None)
            n = len(grpc_framed(m))
            m["cut"] = rng.choice((1, 2, 4, 5, 6, max(1, n - 1), rng.randint(1, max(1, n - 1))))
            if m["cut"] >= n:
                m["cut"] = 1
            if method == "StreamingOutputCall" or method in ("UnaryCall", "EmptyCall"):
                keep = []
                resp_before = []
            op["msgs"] = keep + [m]
            op["end"] = rng.choice(("data", "empty", "trailers"))
            fail(GRPC_INTERNAL)
        elif how == "bin_bad":
            hdrs.append(["x-" + token(rng, 1, 6) + "-bin",
                         rng.choice(("!", "a", "abcde", "ab=c", "a%b", "AAAA,x", "AAAA,,B",
                                     "A===", "AA=A", "****", "AAAA BBBB", "AB~D"))])
            fail(GRPC_INTERNAL, before=False)
        elif how == "resp_big":  # a response past the limit: the send fails, the call ends
            size = GRPC_MAX_PAYLOAD + rng.choice((1, 2, 100))
            if method == "StreamingOutputCall":
                op["msgs"] = [{"t": "out", "params": [[10, 0], [size, 0]]}]
                op["expect"]["resp"] = [["out", 10]]
            else:
                op["path"] = GRPC_SVC + "UnaryCall"
                op["msgs"] = [{"t": "simple", "size": size}]
                op["expect"]["resp"] = []
            exp["status"] = GRPC_RESOURCE_EXHAUSTED
            exp["prefix"] = True
            exp.pop("msg", None)
            exp.pop("echo_trail", None)
            exp["echo_init_maybe"] = exp.pop("echo_init", None)
            op.pop("gate", None)
            op.pop("end_gate", None)
        else:  # "exact": messages of exactly the largest size, plain or inflated
            op["path"] = GRPC_SVC + "UnaryCall"
            m = {"t": "simple", "pay": self.payload(rng, GRPC_MAX_PAYLOAD, zeros=True)}
            if rng.random() < 0.5:
                drop_hdr("grpc-encoding")
                hdrs.append(["grpc-encoding", "gzip"])
                m["gz"] = True
            op["msgs"] = [m]
            exp.update(status=GRPC_OK, resp=[["simple", 0]])
            exp.pop("msg", None)
            exp.pop("hostile")
            if "echo_init" not in exp:
                exp.pop("echo_init_maybe", None)
            op.pop("gate", None)
            op.pop("end_gate", None)
        if op["end"] == "headers" and op["msgs"]:
            op["end"] = "data"
        exp.pop("gz", None)
        self.recut(rng, op)
        return op

    @staticmethod
    def responses_of(method, msgs):
        if method != "FullDuplexCall":
            return []
        return [["out", max(0, p[0])] for m in msgs for p in m.get("params", [])
                if m.get("status") is None]

    def calls(self, rng, st, acts, n, between=True, **kw):
        for _ in range(n):
            acts.append(self.valid_call(rng, st, **kw))
            if between:
                self.between(rng, acts, acts[0].get("keep", 65535))

    def between(self, rng, acts, keep=65535):
        """Now and then a pause, waiting for the first answers, new SETTINGS, or a frame the
        server must ignore: Http2's, without PINGs (grpc_ping plays those, counted)."""
        r = rng.random()
        if r < 0.1:
            acts.append({"op": "sleep", "ms": ms(rng.choice((0.1, 1, 10, 50)))})
        elif r < 0.15:
            acts.append({"op": "wait_data", "ms": 500})
        elif r < 0.18:
            new = [(H2_HEADER_TABLE_SIZE, 0), (H2_HEADER_TABLE_SIZE, 100),
                   (H2_HEADER_TABLE_SIZE, 4096), (H2_MAX_FRAME_SIZE, 16384),
                   (H2_MAX_FRAME_SIZE, 1 << 20)]
            if keep <= 1 << 20:
                new += [(H2_INITIAL_WINDOW_SIZE, 0), (H2_INITIAL_WINDOW_SIZE, 1000),
                        (H2_INITIAL_WINDOW_SIZE, 1 << 20), (H2_INITIAL_WINDOW_SIZE, 65535)]
            code, value = rng.choice(new)
            acts.append({"op": "h2_settings", "set": {str(code): value}})
        elif r < 0.21:
            acts.append(self.ext(rng))

    def gen_kind(self, rng, kind, plan, acts, st, budget, pre):
        mode = "strict"
        read = {"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True}
        if kind in ("grpc_valid", "grpc_cancel", "grpc_deadline", "grpc_hostile", "grpc_flood"):
            acts.append(self.settings(rng))
            n = geometric(rng, 6, 40)
            flood_at = rng.randrange(n + 1)
            for k in range(n):
                if kind == "grpc_flood" and k == flood_at:
                    self.flood(rng, st, acts)
                if kind == "grpc_hostile" and rng.random() < 0.5:
                    op = self.hostile_call(rng, st)
                elif kind == "grpc_deadline" and rng.random() < 0.6:
                    op = self.valid_call(rng, st, timeout=rng.choice(self.SHORT_TIMEOUTS))
                    op["expect"]["cancel_ok"] = True
                else:
                    op = self.valid_call(rng, st)
                extra = self.cancel(rng, op) if kind == "grpc_cancel" and \
                    rng.random() < 0.4 else []
                acts.append(op)
                acts += extra
                self.between(rng, acts, acts[0]["keep"])
            if kind == "grpc_flood" and flood_at == n:
                self.flood(rng, st, acts)
            if kind == "grpc_flood":
                mode = "semi"
            acts.append(read)
            if rng.random() < 0.3:
                acts.append({"op": "h2_goaway"})
        elif kind == "grpc_many":  # past the server's 100 streams, queued here
            acts.append(self.settings(rng, big=True))
            self.calls(rng, st, acts, rng.randint(100, 300), between=False, small=True,
                       method=rng.choice(("UnaryCall", "EmptyCall", None)))
            acts.append(read)
        elif kind == "grpc_big":
            start = self.settings(rng, big=rng.random() < 0.5)
            if start["keep"] < 65535:  # (MiBs through windows of 1000 bytes: minutes)
                start["keep"] = rng.choice((65535, 1 << 20))
                start["settings"][str(H2_INITIAL_WINDOW_SIZE)] = start["keep"]
            acts.append(start)
            self.calls(rng, st, acts, rng.randint(1, 3), big=True)
            self.calls(rng, st, acts, geometric(rng, 3, 10))
            acts.append(read)
        elif kind == "grpc_windows":  # our windows small, opened by hand, then kept small
            acts.append(dict(self.settings(rng, small=True), auto=False))
            total = 0
            for _ in range(geometric(rng, 4, 12)):
                op = self.valid_call(rng, st, cap=100000)
                total += sum(r[1] for r in op["expect"]["resp"] if r[0] in ("simple", "out"))
                acts.append(op)
            for _ in range(rng.randint(1, 6)):
                acts.append({"op": "sleep", "ms": ms(rng.choice((1, 10, 50, 200)))})
                acts.append({"op": "h2_grant", "n": rng.choice((1, 10, 100, 1000, 16384))})
            # (Kept small, but not a round trip per few bytes of all that is asked.)
            keep = max(rng.choice((100, 1000, 16384, 65535)), total // 1500 + 1)
            acts.append({"op": "h2_auto", "keep": keep})
            acts.append(read)
        elif kind == "grpc_slow_reader":  # a small receive buffer, read now and then
            plan["rcvbuf"] = rng.choice((2048, 4096, 16384))
            plan["read_gap_ms"] = ms(rng.choice((1, 2, 5, 10)))
            acts.append(self.settings(rng))
            for _ in range(geometric(rng, 3, 6)):
                op = self.valid_call(rng, st, method=rng.choice(
                    ("StreamingOutputCall", "FullDuplexCall", "UnaryCall")), cap=65536)
                acts.append(op)
            acts.append(read)
        elif kind == "grpc_sleep":  # 1 ms deadlines on calls that never answer
            acts.append(self.settings(rng, big=True))
            n = rng.choice((100, 300, 1000))
            for _ in range(n):
                msgs = [] if rng.random() < 0.7 else \
                    [{"t": "out", "params": [[10, 10000000]]}]  # (a response 10 s later)
                op = self.call(rng, st, GRPC_SVC + "FullDuplexCall", msgs, [], None, end="none")
                op["hdrs"].append(["grpc-timeout", rng.choice(("1m", "1m", "1000u", "2m"))])
                op["expect"]["cancel"] = True
                acts.append(op)
            self.calls(rng, st, acts, 1, between=False)
            acts.append(read)
        elif kind == "grpc_ping":  # PINGs among calls: the ping policy may end it (counted)
            acts.append(self.settings(rng))
            for _ in range(rng.randint(1, 6)):
                if rng.random() < 0.7:
                    self.calls(rng, st, acts, rng.randint(1, 3), between=False)
                acts.append({"op": "h2_ping", "n": rng.choice((1, 1, 2, 3)),
                             "base": rng.getrandbits(32)})
                acts.append(rng.choice(({"op": "wait_data", "ms": 300},
                                        {"op": "sleep", "ms": ms(rng.choice((0, 1, 20)))})))
            acts.append(read)
        elif kind == "grpc_ping_idle":  # PINGs and no call: past the strikes, GOAWAY
            acts.append(self.settings(rng))
            n = rng.choice((1, 2, 3, 4, 5, 10, 100))
            for _ in range(n):  # one at a time or all at once
                acts.append({"op": "h2_ping", "n": 1, "base": rng.getrandbits(32)})
                if rng.random() < 0.3:
                    acts.append({"op": "sleep", "ms": ms(rng.choice((0.1, 1, 10)))})
            if n > GRPC_PING_STRIKES + 1:
                acts.append({"op": "grpc_calm", "ms": ANSWER_SECONDS * 1000})
            else:
                self.calls(rng, st, acts, rng.randint(1, 3), between=False)
                acts.append(read)
        elif kind == "grpc_half_close":
            # All sent, then shutdown(SHUT_WR). The server does not allow half-closure: the
            # FIN closes the connection, answers on their way or not; what came is checked.
            acts.append(self.settings(rng, big=True))
            for _ in range(geometric(rng, 4, 20)):
                op = self.valid_call(rng, st)
                if op["end"] == "none":
                    op["end"] = "data"
                acts.append(op)
            acts.append({"op": "h2_drain", "ms": 10000})
            acts.append({"op": "shut"})
            acts.append(read)
            mode = "semi"
        elif kind == "grpc_mutated":
            acts.append(self.settings(rng))
            self.calls(rng, st, acts, rng.choice((0, 1, 1, 3, 10)), between=False)
            if rng.random() < 0.4:
                acts.append({"op": "wait_data", "ms": 300})
            for _ in range(rng.choice((1, 1, 1, 2, 5))):
                acts.append({"op": "h2_raw", "hex": self.bad_frame(rng, st).hex()})
            self.calls(rng, st, acts, rng.choice((0, 0, 1, 3)), between=False)
            acts.append({"op": "read", "ms": ms(rng.choice((0, 50, 300, 1000)))})
            mode = "lenient"
        elif kind == "grpc_garbage":
            data = self.garbage(rng)
            if rng.random() < 0.6:
                acts.append(self.settings(rng))
                if rng.random() < 0.5:
                    self.calls(rng, st, acts, 1, between=False)
                acts.append({"op": "h2_raw", "hex": data.hex()})
            else:
                split_stream(rng, H2_PREFACE[:rng.randint(0, 24)] + data, acts, budget)
            acts.append({"op": "read", "ms": ms(rng.choice((0, 100, 500)))})
            mode = "lenient"
        elif kind == "grpc_noread":  # never reads while it asks for MiBs
            plan["rcvbuf"] = rng.choice((1024, 2048, 4096))
            plan["noread"] = True
            acts.append(self.settings(rng))
            for _ in range(rng.randint(1, 6)):
                acts.append(self.valid_call(rng, st, big=rng.random() < 0.5, method=rng.choice(
                    ("StreamingOutputCall", "UnaryCall", "FullDuplexCall"))))
            acts.append({"op": "h2_ping", "n": rng.choice((1, 10, 500))})
            acts.append({"op": "sleep", "ms": ms(rng.uniform(200, 1500))})
            mode = "lenient"
        elif kind in ("grpc_reset_mid", "grpc_vanish"):  # the client gone mid-call
            acts.append(self.settings(rng))
            n = geometric(rng, 6, 30)
            for _ in range(n):
                op = self.valid_call(rng, st, big=rng.random() < 0.1)
                if rng.random() < 0.3:
                    op["end"] = "none"
                acts.append(op)
            acts.append(rng.choice(({"op": "sleep", "ms": ms(rng.choice((0, 0.1, 1, 20, 100)))},
                                    {"op": "wait_data", "ms": 300},
                                    {"op": "read", "ms": ms(rng.choice((10, 100)))})))
            acts.append({"op": "rst" if kind == "grpc_reset_mid" else
                         rng.choice(("close", "rst"))})
            mode = "lenient"
        else:
            raise ValueError(kind)
        plan["h2"] = {"check": mode}
        return None

    def cancel(self, rng, op):
        """The call cancelled by the client at a random point: after some of its bytes went,
        after some answers came, or at a point of the plan (the actions to play after it)."""
        r = rng.random()
        extra = []
        if r < 0.4:
            n = len(b"".join(grpc_framed(m) for m in op["msgs"]))
            op["rst"] = {"sent": rng.randint(0, n)}
        elif r < 0.7:
            op["rst"] = {"got": rng.randint(0, len(op["expect"]["resp"]))}
        else:
            extra.append(rng.choice(({"op": "sleep", "ms": ms(rng.choice((0, 1, 10)))},
                                     {"op": "wait_data", "ms": 300})))
            extra.append({"op": "h2_rst", "req": op["i"], "code": rng.choice((8, 8, 0))})
        # Never half-closed now and then: the reset ends it. (Not when it waits for answers
        # that come only after the half-close.)
        waits = "got" in op.get("rst", {}) and op["rst"]["got"] > 0 and \
            not op["path"].endswith("/FullDuplexCall")
        if rng.random() < 0.5 and op["end"] != "headers" and not waits:
            op["end"] = "none"
        op["expect"]["ours"] = True  # (what came before the reset is checked)
        return extra

    def flood(self, rng, st, acts):
        what = rng.choice(("ping", "settings", "window", "rapid", "priority"))
        n = rng.choice((10, 100, 1000, 3000))
        if what == "ping":
            acts.append({"op": "h2_ping", "n": n, "base": rng.getrandbits(32)})
        elif what == "settings":
            acts.append({"op": "h2_settings", "n": min(n, 1000)})
        elif what == "window":
            acts.append({"op": "h2_window", "n": n, "streams": rng.random() < 0.5})
        elif what == "rapid":
            acts.append({"op": "h2_rapid", "n": rng.choice((10, 100, 1100, 2000))})
        else:
            acts.append({"op": "h2_priority", "n": n})

    def canary(self, port, n, tls):
        """A UnaryCall (a payload in, response_size back) and a health Check on a fresh
        connection."""
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                    header_encoding=None))
        conn.initiate_connection()
        size = 1000 + n
        body = {1: pb_int(2, size) + pb_bytes(3, pb_bytes(2, b"c" * 100)), 3: b""}
        for sid, path in ((1, GRPC_SVC + "UnaryCall"), (3, GRPC_HEALTH + "Check")):
            conn.send_headers(sid, [(b":method", b"POST"), (b":scheme", b"http"),
                                    (b":authority", b"canary-%d" % n), (b":path", path.encode()),
                                    (b"te", b"trailers"), (b"content-type", b"application/grpc"),
                                    (b"grpc-timeout", b"30S")])
            conn.send_data(sid, b"\x00" + struct.pack(">I", len(body[sid])) + body[sid],
                           end_stream=True)
        got = {1: b"", 3: b""}
        trailers = {}
        ended = set()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(conn.data_to_send())
            while len(ended) < 2:
                data = s.recv(65536)
                if not data:
                    raise OSError("closed before the answers")
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    raise CanaryWrong(f"the server's frames broke HTTP/2: {e}")
                for ev in events:
                    if isinstance(ev, h2.events.DataReceived):
                        got[ev.stream_id] += ev.data
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.TrailersReceived):
                        trailers[ev.stream_id] = dict(ev.headers)
                    elif isinstance(ev, h2.events.StreamEnded):
                        ended.add(ev.stream_id)
                    elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                        raise OSError(f"{ev}")  # refused while busy: again
                s.sendall(conn.data_to_send())
        want1 = pb_bytes(1, pb_bytes(2, bytes(size)))
        want = {1: b"\x00" + struct.pack(">I", len(want1)) + want1,
                3: b"\x00\x00\x00\x00\x02\x08\x01"}  # (HealthCheckResponse SERVING)
        status = [trailers.get(sid, {}).get(b"grpc-status") for sid in (1, 3)]
        if got != want or status != [b"0", b"0"]:
            raise CanaryWrong(f"UnaryCall ({len(got[1])} bytes, grpc-status {status[0]}) or "
                              f"Check ({got[3].hex()}, grpc-status {status[1]}) answered wrongly")


class GrpcOffload(Grpc):
    """eddy-grpc-server --offload 2: UnaryCall and StreamingInputCall run on a carrier's two
    threads (eddy_grpc_server_add_method_on), their call functions handed back to the loops;
    the same plans and checks."""
    name = "grpc_offload"

    def argv(self, bin_dir, cert_dir):
        return super().argv(bin_dir, cert_dir) + ["--offload", "2"]


class CanaryWrong(Exception):
    """The canary was answered, wrongly: a failure at once (no retry)."""


PROTOS = {p.name: p for p in (Echo(), EchoCap(), TlsEcho(), TlsEchoCap(), Rpc(), Http(), HttpFiles(),
                              Resp(), Dns(), Ws(), WsChat(), Http2(), Grpc(),
                              GrpcOffload())}
ALL_SERVERS = ["echo", "echo_cap", "tls", "tls_cap", "rpc", "http", "http_files", "resp", "dns",
               "ws", "ws_chat", "http2", "grpc", "grpc_offload"]


# ---------------------------------------------------------------------------------------------
# Connection plans. A plan is a list of actions; a burst is a list of plans.
#   send {hex, times}   write these bytes (times: repeated), one write call as far as the
#                       socket takes them (TLS: plaintext, one record per write)
#   send {gen, n}       the same with n bytes of random.Random(gen).randbytes(n): MiBs that
#                       never repeat (a hole in an echo cannot look like a prefix)
#   raw {hex}           TLS connections: bytes straight to the socket, not encrypted
#   sleep {ms}          do nothing for a while (what arrives is still read)
#   read {ms, all}      wait for EOF, or all the answers, or ms; all: missing answers fail
#                       (unless the server has a cap: then EOF after a prefix is enough)
#   read {ms, eof}      wait for EOF only (after our half-close); none within ms fails
#   wait_data {ms}      wait until some answer bytes arrive (or EOF, or ms)
#   shut                shutdown(SHUT_WR): a half-close
#   rst                 SO_LINGER {1, 0}, close: a reset
#   close               close
#   flood {hex, ms}     write these bytes again and again, as fast as the socket takes them
#   handshake {ms, mutate}  TLS handshake; mutate: {op, at} changes the ClientHello
#   stop_reading {ms}   never read again (until resume_reading), or only for ms
#   resume_reading      read again
#   wait_others {ms}    wait until every connection of the burst of another kind is done
#   tls_close           send close_notify
#   flip {at}           TLS: corrupt the next write's ciphertext at that fraction of it
# A plan also says: rcvbuf (SO_RCVBUF, before connect), noread (never read), read_gap_ms
# (read once, then not for that long), tls (version), start_ms (when, in the burst), check
# (the answers valid messages must get).
# A plan with "udp": true is a UDP flow (UdpClient), with actions of its own:
#   dgram {hex}             send one datagram
#   flood {hex: [...], times}  send times datagrams, cycling through the list, at once
#   sleep, read {ms, all}, close   as above; "flood": true in the plan: answers need not come
# A burst of a trace may say "times": played that many times over (cases written by hand).
# (Traces stay "eddy-serverfuzz-1": these only add to it.)

def split_stream(rng, data, actions, budget):
    """Append send actions for data, split into writes at random, with small random delays
    between some of them; budget is a one-item list of delay milliseconds left."""
    if not data:
        return
    style = rng.choices(("whole", "chunks", "tiny"), (35, 55, 10))[0]
    pos = 0
    while pos < len(data):
        if style == "whole":
            n = len(data)
        elif style == "tiny" and pos < 300:
            n = rng.randint(1, 3)
        else:
            n = rng.choice((1, 2, rng.randint(1, 64), rng.randint(1, 1500), rng.randint(1, 16384)))
        actions.append({"op": "send", "hex": data[pos:pos + n].hex()})
        pos += n
        if pos < len(data) and budget[0] > 0 and rng.random() < (0.8 if style == "tiny" else 0.2):
            d = ms(rng.choice((0.05, 0.2, 1, rng.uniform(0, 5), rng.uniform(0, 30))))
            budget[0] -= d
            actions.append({"op": "sleep", "ms": d})


def add_msgs(rng, msgs, actions, budget):
    """Send messages: flat bytes split at random; repeated parts as one action each."""
    flat = b""
    for m in msgs:
        for part, times in m.parts:
            if times == 1:
                flat += part
            else:
                split_stream(rng, flat, actions, budget)
                flat = b""
                actions.append({"op": "send", "hex": part.hex(), "times": times})
    split_stream(rng, flat, actions, budget)


def gen_conn(rng, proto, cid, **conn_args):
    """One connection's plan, of a kind drawn by the protocol's weights; conn_args go to the
    protocol's new_conn."""
    if getattr(proto, "udp_share", 0) and rng.random() < proto.udp_share:
        return proto.gen_udp(rng, cid)
    kinds = list(proto.weights)
    kind = rng.choices(kinds, [proto.weights[k] for k in kinds])[0]
    plan = {"id": cid, "kind": kind, "start_ms": ms(rng.uniform(0, 300)), "actions": []}
    acts = plan["actions"]
    budget = [rng.choice((0, 50, 300, 1000))]  # milliseconds of write delays, at most
    st = proto.new_conn(rng, **conn_args)
    tls = proto.tls
    if tls:
        plan["tls"] = rng.choice(("1.2", "1.3", "1.3"))
        if kind not in ("garbage", "hs_mutated", "hs_cut"):
            acts.append({"op": "handshake", "ms": ANSWER_SECONDS * 1000})

    pre = proto.preamble(rng, st, kind)
    if pre is not None:
        add_msgs(rng, [pre], acts, budget)
        if rng.random() < 0.3:  # the answer first, or the rest right behind the request
            acts.append({"op": "wait_data", "ms": 2000})

    def several(lo=1, mean=4, cap=40):
        """lo or more messages, about lo + mean - 1."""
        return [proto.message(rng, st) for _ in range(lo + geometric(rng, mean, cap) - 1)]

    end = rng.choice(("close", "close", "rst"))
    if kind in ("valid", "big"):
        msgs = several() if kind == "valid" else [proto.big(rng, st)] + several(1, 2, 4)
        closing_at = next((i for i, m in enumerate(msgs) if m.closes), None)
        if closing_at is not None:
            msgs = msgs[:closing_at + 1]
        add_msgs(rng, msgs, acts, budget)
        plan["check"] = ([pre.expect] if pre is not None else []) + \
            [m.expect if not isinstance(proto, Http) else m.expect + [m.closes] for m in msgs]
        acts.append({"op": "read", "ms": ANSWER_SECONDS * 1000, "all": True})
    elif kind == "mutated":
        msgs = several()
        data = b"".join(proto.mutate(rng, m) if (not m.big() and rng.random() < 0.5) else m.flat()
                        for m in msgs)
        split_stream(rng, data, acts, budget)
        acts.append({"op": "read", "ms": ms(rng.choice((0, 50, 300, 1000)))})
    elif kind == "garbage":
        data = proto.garbage(rng)
        if tls and rng.random() < 0.5:
            acts.append({"op": "raw", "hex": data.hex()})
        else:
            split_stream(rng, data, acts, budget)
            if tls:  # garbage instead of a handshake: all of it raw
                for a in acts:
                    if a["op"] == "send":
                        a["op"] = "raw"
        acts.append({"op": "read", "ms": ms(rng.choice((0, 100, 500)))})
    elif kind in ("reset_mid", "half_close"):
        msgs = several()
        data = b"".join(proto.mutate(rng, m) if rng.random() < 0.2 else m.flat()
                        for m in msgs if not m.big())
        cut = rng.randint(0, len(data))
        split_stream(rng, data[:cut], acts, budget)
        if rng.random() < 0.5:
            acts.append({"op": "sleep", "ms": ms(rng.choice((0, 0.1, 1, 10, 100)))})
        if kind == "reset_mid":
            end = "rst"
        else:
            acts.append({"op": "shut"})
            acts.append({"op": "read", "ms": ms(rng.choice((100, 500, 2000)))})
    elif kind == "noread":
        plan["rcvbuf"] = rng.choice((1024, 2048, 4096))
        if tls:
            acts.append({"op": "stop_reading"})
        else:
            plan["noread"] = True
        batch = b"".join(m.flat() for m in (proto.flood_message(rng, st)
                                            for _ in range(3 + geometric(rng, 8, 64)))
                         if not m.big() and not m.closes)
        acts.append({"op": "flood", "hex": batch[:16384].hex(),
                     "ms": ms(rng.uniform(200, 1500))})
    elif kind == "close_rst":
        # A request after which the server closes (or one that answers), then a reset right
        # as the answer is on its way: at once, after a moment, or as its first bytes arrive.
        msgs = [proto.message(rng, st) for _ in range(rng.choice((0, 0, 0, 1, 3)))]
        msgs = [m for m in msgs if not m.closes] + [proto.closing(rng, st)]
        data = b"".join(m.flat() for m in msgs)
        if rng.random() < 0.7:
            acts.append({"op": "send", "hex": data.hex()})
        else:
            split_stream(rng, data, acts, budget)
        when = rng.choices(("now", "soon", "data"), (50, 30, 20))[0]
        if when == "soon":
            acts.append({"op": "sleep", "ms": ms(rng.choice((0.01, 0.05, 0.1, 0.3, 1, 3)))})
        elif when == "data":
            acts.append({"op": "wait_data", "ms": 200})
        end = "rst"
    elif kind == "idle":
        msgs = several()
        data = b"".join(m.flat() for m in msgs if not m.big())
        if rng.random() < 0.5:
            split_stream(rng, data[:rng.randint(0, len(data))], acts, budget)
        acts.append({"op": "sleep", "ms": ms(rng.uniform(100, 1500))})
    elif kind == "slow":
        m = proto.message(rng, st)
        for i, part in enumerate(m.flat()[:rng.randint(10, 60)]):
            acts.append({"op": "send", "hex": bytes([part]).hex()})
            acts.append({"op": "sleep", "ms": ms(rng.uniform(1, 20))})
        acts.append({"op": "read", "ms": ms(rng.choice((0, 100)))})
    elif kind == "hs_mutated":  # TLS: a ClientHello changed, then whatever comes
        acts.append({"op": "handshake", "ms": 3000,
                     "mutate": {"op": rng.choice(("flip", "flip", "insert", "delete", "dup")),
                                "at": ms(rng.random())}})
        add_msgs(rng, several(), acts, budget)
        acts.append({"op": "read", "ms": ms(rng.choice((0, 100, 500)))})
    elif kind == "hs_cut":  # TLS: part of a ClientHello, then a reset, a close or silence
        acts.append({"op": "handshake", "ms": 3000,
                     "mutate": {"op": "cut", "at": ms(rng.random())}})
        acts.append({"op": "sleep", "ms": ms(rng.choice((0, 1, 50, 500)))})
    elif kind == "record_flip":  # TLS: a corrupted record among good ones
        msgs = several()
        k = rng.randrange(len(msgs))
        add_msgs(rng, msgs[:k], acts, budget)
        acts.append({"op": "flip", "at": ms(rng.random())})
        add_msgs(rng, msgs[k:], acts, budget)
        acts.append({"op": "read", "ms": ms(rng.choice((0, 100, 500)))})
    else:  # the protocol's own kinds
        check = proto.gen_kind(rng, kind, plan, acts, st, budget, pre)
        if check is not None:
            plan["check"] = check
    if tls and kind in ("valid", "mutated", "half_close") and rng.random() < 0.3:
        # close_notify before the end (a half-close of TLS); after shut it would not be sent
        i = next((j for j, a in enumerate(acts) if a["op"] in ("shut", "read")), len(acts))
        acts.insert(i, {"op": "tls_close"})
    acts.append({"op": end})
    if isinstance(proto, Echo) and "check" not in plan:
        # Echo: what comes back is a prefix of what was sent, on every connection, whatever
        # it sent (mutated bytes and garbage are echoed too; TLS garbage, handshakes broken
        # and records corrupted get no plaintext back, which is a prefix as well).
        plan["check"] = []
    if getattr(proto, "lenient_check", False) and "check" not in plan:
        plan["check"] = []  # well-formed answers, whatever was sent
    return plan


def gen_burst(rng, proto):
    """Tens of connections at once, now and then about a hundred."""
    if getattr(proto, "busy_share", 0) and rng.random() < proto.busy_share:
        return proto.busy_burst(rng)
    n = rng.randint(10, 30) if rng.random() < 0.6 else rng.randint(30, 100)
    return {"conns": [gen_conn(rng, proto, i) for i in range(n)]}


# ---------------------------------------------------------------------------------------------
# Playing plans: one client actor per connection, all on one selectors loop.

def tls_contexts(cert_dir):
    """Client contexts per TLS version, trusting the test CA (the server's certificate is for
    localhost and 127.0.0.1)."""
    ctxs = {}
    for v, ver in (("1.2", ssl.TLSVersion.TLSv1_2), ("1.3", ssl.TLSVersion.TLSv1_3)):
        c = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.pem"))
        c.minimum_version = c.maximum_version = ver
        ctxs[v] = c
    return ctxs


def mutate_hello(op, at, raw):
    """The ClientHello (raw, the first flight) changed by op at fraction at of its length."""
    b = bytearray(raw)
    i = min(len(b) - 1, int(at * len(b)))
    if op == "flip":
        b[i] ^= 0x5A
    elif op == "insert":
        b[i:i] = b"\x00\xff\x16"
    elif op == "delete":
        del b[i:i + 3]
    elif op == "dup":
        b[i:i] = b[i:i + 16]
    elif op == "cut":
        del b[i:]
    return bytes(b)


class Client:
    """One connection playing its plan. Never blocks: advance() runs actions until one waits
    (for the socket to take bytes, for time, for answers), the loop calls it again when that
    may be over."""

    def __init__(self, burst, plan):
        self.burst = burst
        self.plan = plan
        self.actions = plan["actions"]
        self.i = 0
        self.sock = None
        self.connecting = False
        self.done = False
        self.out = bytearray()        # raw bytes the socket has not taken yet
        self.sent_plain = bytearray()  # what we sent (plaintext for TLS)
        self.rx = bytearray()         # what came back (plaintext for TLS)
        self.rx_raw = 0
        self.eof = False
        self.dead = False  # a write failed: the server closed or reset the connection
        self.reading = not plan.get("noread")
        self.resume_at = None  # reading stopped until then (stop_reading {ms}, read_gap_ms)
        self.wait = None   # the action waiting: (kind, deadline, extra)
        self.wait_from = None  # when it began
        self.wake = None   # when the loop must call advance() anyway
        self.flood = None  # bytes a flood writes again and again
        self.flip_next = None
        self.corrupt = False  # TLS: we broke the stream ourselves (raw bytes, a flip, a hello)
        self.registered = 0
        self.error = None  # what was wrong with the answers
        self.tls = None    # ssl.SSLObject
        self.tls_in = self.tls_out = None
        self.tls_ok = self.tls_failed = False
        self.tls_error = None
        check = plan.get("check")
        self.checker = burst.proto.checker(check, self) if check is not None else None

    # -- socket plumbing
    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.plan.get("rcvbuf"):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.plan["rcvbuf"])
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # our splits reach the wire
        s.setblocking(False)
        self.sock = s
        err = s.connect_ex(("127.0.0.1", self.burst.port))
        if err not in (0, errno.EINPROGRESS):
            self.finish()  # refused: the server may be out of descriptors; not ours to judge
            return
        self.connecting = True
        self.started_at = time.monotonic()
        self.update()

    def update(self):
        """Register with the selector for what we wait for."""
        if self.done:
            return
        ev = 0
        if self.reading and not self.eof and not self.connecting:
            ev |= selectors.EVENT_READ
        if self.connecting or (self.out and not self.dead):
            ev |= selectors.EVENT_WRITE
        sel = self.burst.sel
        if ev == self.registered:
            return
        if self.registered and ev:
            sel.modify(self.sock, ev, self)
        elif self.registered:
            sel.unregister(self.sock)
        else:
            sel.register(self.sock, ev, self)
        self.registered = ev

    def on_event(self, mask):
        if self.done:
            return
        if self.connecting:
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            self.connecting = False
            if err != 0:
                self.finish()
                return
            self.advance()
            return
        if mask & selectors.EVENT_READ:
            self.read()
        if mask & selectors.EVENT_WRITE:
            self.flush()
        self.advance()

    def read(self):
        gap = self.plan.get("read_gap_ms")
        for _ in range(1 if gap else 16):
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:  # a reset: ours, or the server's after bad input
                self.eof = True
                break
            if not data:
                self.eof = True
                break
            self.rx_raw += len(data)
            if self.tls:
                self.tls_in.write(data)
                self.tls_pump()
            elif not self.plan.get("tls"):  # (TLS garbage gets alerts back: no plaintext)
                self.rx += data
        if gap and not self.eof and self.resume_at is None:  # a slow reader: a pause
            self.reading = False
            self.resume_at = time.monotonic() + gap / 1000
        if self.checker and self.error is None:
            self.error = self.checker.feed(self.rx)

    def flush(self):
        """Write what is pending; False while the socket does not take it all."""
        while self.out and not self.dead:
            try:
                n = self.sock.send(self.out[:65536])
            except BlockingIOError:
                return False
            except OSError:  # EPIPE, ECONNRESET: the server closed on us, legitimately
                self.dead = True
                self.out.clear()
                return True
            del self.out[:n]
        return True

    def finish(self, how="close"):
        if self.done:
            return
        if self.registered:
            self.burst.sel.unregister(self.sock)
            self.registered = 0
        if self.sock is not None:
            try:
                if how == "rst":
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.sock.close()
        self.done = True

    # -- TLS through memory BIOs, so that the socket stays non-blocking and ours
    def tls_drain(self):
        data = self.tls_out.read()
        if data and self.flip_next is not None:
            b = bytearray(data)
            b[min(len(b) - 1, int(self.flip_next * len(b)))] ^= 0x20
            data = bytes(b)
            self.flip_next = None
        self.out += data

    def tls_pump(self):
        """Advance the handshake, or read what was decrypted."""
        try:
            if not self.tls_ok and not self.tls_failed:
                self.tls.do_handshake()
                self.tls_ok = True
            while self.tls_ok:
                data = self.tls.read(65536)
                if not data:
                    break
                self.rx += data
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except (ssl.SSLError, OSError, ValueError) as e:
            # A failed handshake or a record we corrupted: nothing more to decrypt. Not a
            # failure; the server is entitled to refuse. But records that do not decrypt on
            # a connection that corrupted nothing were lost or damaged by the server: the
            # hole of #28 in a TLS stream (close_notify and a cut stream are no error).
            if self.tls_ok and not self.corrupt and self.error is None and \
                    not isinstance(e, (ssl.SSLZeroReturnError, ssl.SSLEOFError)):
                self.error = f"the server's TLS records did not decrypt after " \
                    f"{len(self.rx)} bytes of plaintext: {e}"
            self.tls_error = self.tls_error or str(e)
            self.tls_failed = True
            self.tls_ok = False
        self.tls_drain()

    # -- the plan
    def satisfied(self, now):
        kind, deadline, extra = self.wait
        if kind == "sleep":
            return now >= deadline
        if kind == "read":
            complete = extra != "eof" and self.checker is not None and \
                self.checker.complete(self.rx)
            stopped = not self.reading and self.resume_at is None
            if complete or self.eof or now >= deadline or stopped or self.error:
                if extra == "all" and not complete and self.error is None and not self.dead:
                    if not self.eof:
                        self.error = f"not every answer came within {ANSWER_SECONDS:.0f} s"
                    elif not getattr(self.burst.proto, "cap", 0):
                        # (With a cap the server may end a connection whose answers pile
                        # up: the prefix that came is checked, its end is not a failure.)
                        self.error = "the connection closed before every answer came"
                elif extra == "eof" and not self.eof and self.error is None and not self.dead:
                    self.error = f"no EOF within {deadline - self.wait_from:.0f} s of the " \
                        f"half-close ({len(self.rx)} of {len(self.sent_plain)} bytes back)"
                return True
            return False
        if kind == "wait_data":
            return self.rx_raw > extra or self.eof or now >= deadline
        if kind == "wait_others":
            return now >= deadline or all(c.done for c in self.burst.clients
                                          if c.plan["kind"] != self.plan["kind"])
        if kind == "handshake":
            if self.tls_ok or self.tls_failed or self.eof or now >= deadline:
                if not self.tls_ok and extra and self.error is None:
                    # A plain handshake on a connection that sends only valid data.
                    self.error = f"the TLS handshake failed: {self.tls_error or 'no answer'}"
                return True
            return False
        if kind == "flood":
            if now >= deadline or self.dead:
                if self.out and not self.dead:  # what the socket did not take is not sent
                    if self.tls:
                        self.corrupt = True  # a record cut
                    else:
                        del self.sent_plain[len(self.sent_plain) - len(self.out):]
                self.out.clear()
                return True
            # Refill while the socket takes it all, a few times, then leave bytes pending:
            # the selector wakes us when it takes more (a server reading as fast as we write
            # would otherwise keep us here until the deadline).
            for _ in range(8):
                if self.out and not self.flush():
                    break
                if self.tls:
                    try:
                        self.tls.write(self.flood)
                    except ssl.SSLError:
                        self.out.clear()
                        return True
                    self.tls_drain()
                else:
                    self.out += self.flood
                self.sent_plain += self.flood
            return False
        raise AssertionError(kind)

    def advance(self):
        while not self.done and not self.connecting:
            now = time.monotonic()
            self.wake = None
            if self.resume_at is not None and now >= self.resume_at:
                self.resume_at = None
                self.reading = True
            blocked = bool(self.out) and not self.dead and not self.flush()
            if self.wait is not None:
                if not self.satisfied(now):
                    # (wait_others looks again every 0.1 s: nothing else wakes it)
                    self.wake = self.wait[1] if self.wait[0] != "wait_others" else \
                        min(self.wait[1], now + 0.1)
                    break
                self.wait = None
                continue  # look at the socket again: a flood leaves bytes behind
            if blocked:
                break  # the next action waits until the socket took the last send
            if self.i == len(self.actions):
                self.finish()
                return
            a = self.actions[self.i]
            self.i += 1
            self.do(a, now)
        if self.resume_at is not None and not self.done:
            self.wake = min(self.wake or self.resume_at, self.resume_at)
        self.update()

    def do(self, a, now):
        op = a["op"]
        if op == "send":
            if self.dead or (self.plan.get("tls") and not self.tls_ok):
                return  # nobody to send to: the server closed, or TLS is not up
            if "gen" in a:
                data = random.Random(a["gen"]).randbytes(a["n"])
            else:
                data = bytes.fromhex(a["hex"]) * a.get("times", 1)
            self.sent_plain += data
            if self.tls:
                try:
                    self.tls.write(data)
                except ssl.SSLError:
                    self.tls_failed, self.tls_ok = True, False
                self.tls_drain()
            else:
                self.out += data
        elif op == "raw":
            self.corrupt = True
            if not self.dead:
                self.out += bytes.fromhex(a["hex"])
        elif op == "flip":
            self.corrupt = True
            self.flip_next = a["at"]
        elif op == "sleep":
            self.wait = ("sleep", now + a["ms"] / 1000, None)
        elif op == "read":
            self.wait_from = now
            self.wait = ("read", now + a["ms"] / 1000,
                         "all" if a.get("all") else "eof" if a.get("eof") else None)
        elif op == "wait_data":
            self.wait = ("wait_data", now + a["ms"] / 1000, self.rx_raw)
        elif op == "flood":
            self.flood = bytes.fromhex(a["hex"])
            self.wait = ("flood", now + a["ms"] / 1000, None)
        elif op == "shut":
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        elif op == "stop_reading":
            self.reading = False
            self.resume_at = now + a["ms"] / 1000 if "ms" in a else None
        elif op == "resume_reading":
            self.reading = True
            self.resume_at = None
        elif op == "wait_others":
            self.wait = ("wait_others", now + a["ms"] / 1000, None)
        elif op == "handshake":
            ctx = self.burst.tls_ctxs[self.plan["tls"]]
            self.tls_in, self.tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.tls = ctx.wrap_bio(self.tls_in, self.tls_out, server_hostname="localhost")
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            hello = self.tls_out.read()
            m = a.get("mutate")
            if m:
                hello = mutate_hello(m["op"], m["at"], hello)
                self.tls_failed = True  # our ClientHello is not the one the state machine sent
                self.corrupt = True
            self.out += hello
            if m and m["op"] == "cut":
                return
            self.wait = ("handshake", now + a["ms"] / 1000,
                         self.plan["kind"] in ("valid", "big", "bulk", "bulk_shut"))
        elif op == "tls_close":
            if self.tls_ok:
                try:
                    self.tls.unwrap()
                except (ssl.SSLError, ValueError):
                    pass
                self.tls_drain()
        elif op in ("rst", "close"):
            if op == "close":
                self.flush()
            self.finish(op)
        else:
            raise ValueError(f"unknown action {op!r}")


class UdpClient:
    """One UDP flow playing its plan on a connected socket of its own: datagrams, floods of
    them, sleeps, reads. The same interface to Burst as Client."""

    def __init__(self, burst, plan):
        self.burst = burst
        self.plan = plan
        self.actions = plan["actions"]
        self.i = 0
        self.sock = None
        self.done = False
        self.eof = self.dead = False  # (what Burst.summary asks of a stream)
        self.rx = []  # the datagrams that came back
        self.reading = not plan.get("noread")
        self.wait = None
        self.wake = None
        self.error = None
        self.unsent = 0  # datagrams the socket refused (EAGAIN in a flood)
        self.queries = {}  # id: the datagram, to ask again when its answer is late
        self.retry_at = None
        check = plan.get("check")
        self.checker = DnsUdpChecker(check, plan.get("flood")) if check is not None else None

    def start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if self.plan.get("rcvbuf"):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.plan["rcvbuf"])
        s.setblocking(False)
        s.connect(("127.0.0.1", self.burst.port))
        self.sock = s
        if self.reading:
            self.burst.sel.register(s, selectors.EVENT_READ, self)
        self.advance()

    def on_event(self, mask):
        if not self.done:
            self.read()
            self.advance()

    def read(self):
        for _ in range(1024):
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:  # ECONNREFUSED: an ICMP error for an earlier datagram
                continue
            self.rx.append(data)
            if self.checker and self.error is None:
                self.error = self.checker.feed_one(data)

    def send(self, data, qid=None):
        try:
            self.sock.send(data)
        except OSError:  # EAGAIN (a full send buffer), ECONNREFUSED: not sent
            self.unsent += 1
            return
        if qid is not None and self.checker is not None:
            self.checker.sent.add(qid)
            self.queries[qid] = data

    def finish(self, how="close"):
        if self.done:
            return
        if self.reading and self.sock is not None:
            self.burst.sel.unregister(self.sock)
        if self.sock is not None:
            self.sock.close()
        self.done = True

    def satisfied(self, now):
        kind, deadline, extra = self.wait
        if kind == "sleep":
            return now >= deadline
        complete = self.checker is not None and self.checker.complete(self.rx)
        if extra and not complete and not self.error and now >= self.retry_at:
            # A datagram can be lost to a full socket buffer (another flow's flood fills the
            # server's): ask again, as resolvers do, and take a second answer.
            for qid in sorted(self.checker.sent - self.checker.answered):
                self.checker.retried.add(qid)
                self.send(self.queries[qid])
            self.retry_at = now + UDP_RETRY_SECONDS
        if complete or now >= deadline or not self.reading or self.error:
            if extra and not complete and self.error is None and not self.checker.flood:
                missing = sorted(self.checker.sent - self.checker.answered)
                self.error = (f"{len(missing)} queries not answered within "
                              f"{ANSWER_SECONDS:.0f} s (ids {[hex(i) for i in missing[:5]]})")
            return True
        return False

    def advance(self):
        while not self.done:
            now = time.monotonic()
            self.wake = None
            if self.wait is not None:
                if not self.satisfied(now):
                    self.wake = min(self.wait[1], self.retry_at or self.wait[1])
                    return
                self.wait = None
            if self.i == len(self.actions):
                self.finish()
                return
            a = self.actions[self.i]
            self.i += 1
            op = a["op"]
            if op == "dgram":
                data = bytes.fromhex(a["hex"])
                self.send(data, struct.unpack(">H", data[:2])[0] if len(data) >= 2 else None)
            elif op == "flood":  # all at once, nothing read in between
                dgrams = [bytes.fromhex(h) for h in a["hex"]]
                for k in range(a["times"]):
                    d = dgrams[k % len(dgrams)]
                    self.send(d, struct.unpack(">H", d[:2])[0] if len(d) >= 2 else None)
            elif op == "sleep":
                self.wait = ("sleep", now + a["ms"] / 1000, None)
            elif op == "read":
                self.wait = ("read", now + a["ms"] / 1000, a.get("all", False))
                self.retry_at = now + UDP_RETRY_SECONDS
            elif op == "close":
                self.finish()
            else:
                raise ValueError(f"unknown UDP action {op!r}")


class H2FifoSettings(h2.settings.Settings if h2 is not None else object):
    """h2's local settings, a SETTINGS frame acknowledged at a time. h2 keeps pending values
    per setting and pops one of each per ACK, and does not count the first SETTINGS frame:
    its ACK would apply the next frame's values early (a smaller window, a smaller header
    table), and the server's frames sent meanwhile would look wrong."""

    def __init__(self, values):
        super().__init__(client=True, initial_values=values)
        self.frames = [{}]  # sent, not acknowledged yet: the first is in force already

    def update(self, new):  # (update_settings: the frame it sends)
        self.frames.append(dict(new))

    def acknowledge(self):
        changed = {}
        for k, v in (self.frames.pop(0) if self.frames else {}).items():
            old = self._settings[k][0] if k in self._settings else None
            self._settings[k] = collections.deque([v])
            changed[k] = h2.settings.ChangedSetting(k, old, v)
        return changed


class H2Checker:
    """What Burst.summary asks of a checker; the H2Client does the checking."""

    def __init__(self, client):
        self.client = client

    def feed(self, rx):
        return None

    def complete(self, rx):
        return bool(self.client.reqs) and self.client.settled()


class H2Client(Client):
    """One HTTP/2 connection: the plan's actions through an h2 client connection (the
    state machine that also checks the server's frames), answers checked as they come.

    A plan's "h2" says how strict the check is: "strict" (every request answered byte for
    byte unless the server refused the stream, a GOAWAY with an error code is a failure),
    "semi" (a GOAWAY or the server closing excuses missing answers, a stall does not), or
    "lenient" (what comes must be right; nothing need come). Answers that come are checked
    on every connection until it sent raw bytes (mutated frames, garbage): from then on the
    state machine no longer speaks for it."""

    def __init__(self, burst, plan):
        super().__init__(burst, plan)
        self.h2 = None
        self.reqs = []
        self.by_sid = {}
        self.queue = []    # requests waiting for the server's stream limit
        self.sending = []  # open requests with body (or trailers) left to send
        self.broken = False  # raw bytes went out
        self.goaway = None   # (error code, last stream id) of the server's GOAWAY
        self.goaway_debug = b""
        self.remote_seen = False
        self.first = bytearray()  # the server's first bytes, until its first frame is whole
        self.first_ok = False
        self.shut_sent = False
        self.mode = plan.get("h2", {}).get("check", "lenient")
        self.auto = True
        self.keep = 65535       # the stream window kept open (auto)
        self.conn_keep = 65535  # the connection's
        self.pings = 0        # PING ACKs received
        self.pings_sent = 0   # PINGs sent (not ACKs): what a server's ping policy counts
        self.hold_out = None  # what h2 made, held back (h2_slow)
        self.upgrading = False  # h2c by Upgrade: the 101 is still to come
        self.up_eager = False
        self.trickle_n = 0
        self.trickle_ms = 0
        self.max_body = burst.proto.max_body
        self.checker = H2Checker(self)

    # -- receiving
    def read(self):
        gap = self.plan.get("read_gap_ms")
        for _ in range(1 if gap else 16):
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                self.eof = True
                break
            if not data:
                self.eof = True
                break
            self.rx_raw += len(data)
            self.receive(data)
        if gap and not self.eof and self.resume_at is None:
            self.reading = False
            self.resume_at = time.monotonic() + gap / 1000

    def fail(self, why):
        if self.error is None:
            self.error = why

    def receive(self, data):
        if self.h2 is None or self.broken:
            return
        if self.upgrading:
            data = self.upgraded(data)
            if not data:
                self.pump()
                return
        if not self.first_ok:
            self.first += data
            if len(self.first) < 9:
                return
            ftype, flags, sid = self.first[3], self.first[4], \
                struct.unpack(">I", self.first[5:9])[0]
            if ftype != 4 or flags & 1 or sid != 0:
                self.fail("the server's first frame is not SETTINGS: "
                          f"{bytes(self.first[:9]).hex()}")
                self.broken = True
                return
            self.first_ok = True
            self.first_at = time.monotonic()
            data = bytes(self.first)
            self.first = None
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            self.fail(f"the server's frames broke HTTP/2 ({type(e).__name__}: {e})")
            self.broken = True
            return
        touched = set()
        for ev in events:
            sid = getattr(ev, "stream_id", None)
            r = self.by_sid.get(sid)
            if isinstance(ev, h2.events.ResponseReceived):
                if r is not None:
                    self.fail_req(r, r.on_head(ev.headers))
            elif isinstance(ev, h2.events.DataReceived):
                touched.add(sid)
                if r is not None and r.state == "open":
                    self.fail_req(r, r.on_data(ev.data))
            elif isinstance(ev, h2.events.TrailersReceived):
                if r is not None and r.state == "open":
                    self.fail_req(r, r.on_trailers(ev.headers))
            elif isinstance(ev, h2.events.StreamEnded):
                if r is not None and r.state == "open":
                    self.fail_req(r, r.on_end())
                    self.drop_sending(r)
            elif isinstance(ev, h2.events.StreamReset):
                if r is not None and r.state == "open":
                    self.drop_sending(r)
                    if not ev.remote_reset:  # h2 reset it: the server broke its rules
                        r.state = "reset_us"
                        if not r.bad:
                            self.fail(f"{r.name()}: h2 reset it, the server's frames broke "
                                      f"the stream's rules ({h2_code(ev.error_code)})")
                    elif ev.error_code == H2_REFUSED_STREAM:
                        r.state = "refused"
                    else:
                        r.state = "reset_server"
                        r.reset_code = ev.error_code
                        if self.mode == "strict" and not r.bad and not r.reset_ok(ev.error_code):
                            self.fail(f"{r.name()}: reset by the server "
                                      f"({h2_code(ev.error_code)})")
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.on_goaway(ev)
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                self.remote_seen = True
            elif isinstance(ev, h2.events.PingAckReceived):
                self.pings += 1
        self.windows(touched)
        self.pump()

    def fail_req(self, r, why):
        if why is not None:
            self.fail(why)
            self.by_sid.pop(r.sid, None)  # one error a stream is enough
            r.state = "done"

    def goaway_ok(self, code, debug):
        """Whether a GOAWAY with this error code and debug data is allowed on a connection
        that broke no rule (gRPC: its ping policy's)."""
        return False

    def on_goaway(self, ev):
        code, last = int(ev.error_code), ev.last_stream_id
        self.goaway = (code, last)
        self.goaway_debug = bytes(ev.additional_data or b"")
        if code != 0 and self.mode == "strict" and not self.goaway_ok(code, self.goaway_debug):
            debug = self.goaway_debug[:80]
            # When we read the server's first frame tells a server that did not wait from a
            # client that was not there to answer (starved of the CPU on a loaded machine).
            t0 = getattr(self, "started_at", None)
            when = f"; its SETTINGS read {self.first_at - t0:.1f} s after the connect, this " \
                f"{time.monotonic() - t0:.1f} s" if t0 and getattr(self, "first_at", None) else ""
            self.fail(f"GOAWAY {h2_code(code)} ({debug!r}) on a connection that broke no "
                      f"rule{when}")
        for r in self.reqs:
            if r.state == "queued":
                r.state = "unsent"
            elif r.state == "open" and r.sid > last:
                r.state = "refused"
                self.drop_sending(r)
        self.queue.clear()

    def drop_sending(self, r):
        if r in self.sending:
            self.sending.remove(r)

    # -- flow control: the windows we give the server
    def windows(self, touched=()):
        """Auto: keep each open stream's window and the connection's above half of what we
        keep (h2 counts what the server sent against them, and fails it past them)."""
        if not self.auto or self.h2 is None or self.broken:
            return
        try:
            for r in self.reqs:
                if r.state != "open":
                    continue
                st = self.h2.streams.get(r.sid)
                if st is None or st.closed:
                    continue
                cur = st.inbound_flow_control_window
                if cur <= self.keep // 2:
                    self.h2.increment_flow_control_window(
                        min(self.keep - cur, H2_MAX_WINDOW - max(cur, 0)), r.sid)
            cur = self.h2.inbound_flow_control_window
            if cur <= self.conn_keep // 2:
                self.h2.increment_flow_control_window(self.conn_keep - cur)
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError):
            pass

    def grant(self, n):
        """Manual: n more bytes of window on every open stream and the connection."""
        try:
            for r in self.reqs:
                st = self.h2.streams.get(r.sid) if r.state == "open" else None
                if st is not None and not st.closed and \
                        st.inbound_flow_control_window + n <= H2_MAX_WINDOW:
                    self.h2.increment_flow_control_window(n, r.sid)
            if self.h2.inbound_flow_control_window + n <= H2_MAX_WINDOW:
                self.h2.increment_flow_control_window(n)
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError):
            pass

    # -- sending
    def emit(self):
        if self.h2 is None:
            return
        data = self.h2.data_to_send()
        if not data or self.shut_sent or self.dead:
            return
        if self.upgrading and not self.up_eager:  # after the 101
            self.up_pending += data
        elif self.hold_out is not None:  # h2_slow: held for h2_trickle
            self.hold_out += data
        else:
            self.out += data

    def pump(self):
        """Open what the server's stream limit allows, send what the windows allow."""
        if self.h2 is None or self.done:
            return
        try:
            limit = self.h2.remote_settings.max_concurrent_streams if self.remote_seen else 100
            while self.queue and self.goaway is None and not self.upgrading and \
                    self.h2.open_outbound_streams < limit:
                self.open(self.queue.pop(0))
            for r in list(self.sending):
                if not r.hold:
                    self.send_body(r)
        except h2.exceptions.ProtocolError as e:
            if not self.broken:
                self.fail(f"h2 refused to go on ({type(e).__name__}: {e})")
                self.broken = True
        self.emit()

    def open(self, r):
        op = r.op
        sid = self.h2.get_next_available_stream_id()
        hdrs = [(b":method", r.method.encode()), (b":scheme", b"http"),
                (b":authority", op.get("authority", "127.0.0.1").encode()),
                (b":path", r.path.encode())]
        for k, v in op.get("hdrs", []):
            hdrs.append((k.encode(), v.encode()))
        if op.get("never"):
            hdrs.append(h2_never_header(op["never"]))
        if op.get("cl") and r.body is not None:
            hdrs.append((b"content-length", str(len(r.body)).encode()))
        if op.get("pseudo_last"):  # (bad) a pseudo-header after the regular ones
            hdrs.append(hdrs.pop(0))
        body_left = r.body is not None or op.get("trailers") or op.get("end") == "empty"
        full = self.h2.max_outbound_frame_size
        if op.get("cont"):  # the block cut into HEADERS and up to 7 CONTINUATION frames
            est = sum(len(k) + len(v) + 6 for k, v in hdrs)
            self.h2.max_outbound_frame_size = min(full, max(op["cont"], -(-est // 8)))
        try:
            self.h2.send_headers(sid, hdrs, end_stream=not body_left)
        finally:
            self.h2.max_outbound_frame_size = full
            if sid in self.h2.streams:
                self.h2.streams[sid].max_outbound_frame_size = full
        r.sid = sid
        r.state = "open"
        self.by_sid[sid] = r
        if body_left:
            self.sending.append(r)
        if self.auto:
            self.windows()

    def send_body(self, r):
        st = self.h2.streams.get(r.sid)
        if st is None or st.closed or r.state != "open":
            self.drop_sending(r)
            return
        body = r.body or b""
        trailers = r.op.get("trailers")
        end_empty = r.op.get("end") == "empty"
        while r.sent < len(body):
            room = min(self.h2.local_flow_control_window(r.sid), self.h2.max_outbound_frame_size)
            if room <= 0:
                return
            n, pad = r.next_piece(room, self.h2.max_outbound_frame_size)
            last = r.sent + n == len(body)
            self.h2.send_data(r.sid, body[r.sent:r.sent + n],
                              end_stream=last and not trailers and not end_empty,
                              pad_length=pad)
            r.sent += n
        if trailers:
            self.h2.send_headers(r.sid, [(b"x-trailer", b"1"), (b"x-sum", b"%d" % len(body))],
                                 end_stream=True)
        elif end_empty or not body:
            self.h2.send_data(r.sid, b"", end_stream=True)
        self.drop_sending(r)

    def settled(self):
        return all(r.settled() for r in self.reqs)

    def missing(self):
        r = next(r for r in self.reqs if not r.settled())
        n = sum(1 for r in self.reqs if not r.settled())
        what = f"{r.name()} got {r.got} bytes" if r.sid is not None else \
            f"request {r.i} ({r.method} {r.path[:40]}) never opened"
        return f"{n} of {len(self.reqs)} requests unanswered ({what})"

    # -- the plan
    def satisfied(self, now):
        kind, deadline, extra = self.wait
        if kind == "read":
            done = self.settled() if extra == "all" else False
            stopped = not self.reading and self.resume_at is None
            if done or self.eof or now >= deadline or stopped or self.error:
                if extra == "all" and not done and self.error is None and not self.broken:
                    self.judge_missing(now >= deadline and not self.eof and not self.dead)
                elif extra == "eof" and not self.eof and self.error is None and not self.dead:
                    self.fail(f"no EOF within {deadline - self.wait_from:.0f} s of the half-close")
                return True
            return False
        if kind == "drain":  # every request sent (bodies too), all of it taken by the socket
            idle = not self.queue and not self.sending and not self.out and self.remote_seen
            return idle or self.eof or self.dead or now >= deadline or self.broken
        if kind == "trickle":  # a byte of what is held, then a pause; at last the rest
            if self.dead or self.eof:
                self.hold_out = None
                return True
            if now < deadline:
                return False
            if self.trickle_n > 0 and len(self.hold_out) > 1:
                self.out += self.hold_out[:1]
                del self.hold_out[:1]
                self.trickle_n -= 1
                self.wait = ("trickle", now + self.trickle_ms / 1000, None)
                return False
            self.out += self.hold_out
            self.hold_out = None
            return True
        return super().satisfied(now)

    def judge_missing(self, stalled):
        """Answers still missing when the read ended: a failure unless the server said why
        (a GOAWAY, a refused stream) or, but on strict connections, closed it."""
        if self.mode == "lenient":
            return
        if stalled:
            took = time.monotonic() - self.wait_from
            self.fail(f"not every answer came within {took:.0f} s: {self.missing()}")
            return
        if self.goaway is not None and self.goaway[0] != 0:
            return  # (strict ones failed at the GOAWAY)
        if self.mode == "semi":
            return  # closed by the server
        if self.goaway is not None:
            self.fail(f"closed after GOAWAY NO_ERROR (last stream {self.goaway[1]}) "
                      f"without every answer: {self.missing()}")
        else:
            self.fail(f"the connection closed before every answer came: {self.missing()}")

    def do(self, a, now):
        op = a["op"]
        if not op.startswith("h2_"):
            if op in ("send", "raw") and self.h2 is not None:
                self.broken = True  # bytes past the state machine: it no longer knows
            if op == "shut":
                self.emit()
                self.shut_sent = True
            super().do(a, now)
            return
        if self.dead or self.shut_sent:
            return
        if op == "h2_start":
            self.start_h2(a)
        elif op == "h2_req":
            r = H2Req(a, self.max_body)
            self.reqs.append(r)
            if self.goaway is not None:
                r.state = "unsent"
            else:
                self.queue.append(r)
        elif op == "h2_rst":
            r = self.reqs[a["req"]] if a["req"] < len(self.reqs) else None
            if r is not None and r.state == "queued":
                self.queue.remove(r)
                r.state = "reset_us"
            elif r is not None and r.state == "open":
                self.drop_sending(r)
                r.state = "reset_us"
                try:
                    self.h2.reset_stream(r.sid, a.get("code", 8))
                except h2.exceptions.ProtocolError:
                    pass
        elif op == "h2_empty":  # empty DATA frames on a held request's stream, then its body
            r = self.reqs[a["req"]] if a["req"] < len(self.reqs) else None
            if r is not None and r.state == "open" and r in self.sending:
                try:  # (padded: a frame of only its pad length, no data)
                    for _ in range(a["n"]):
                        self.h2.send_data(r.sid, b"", pad_length=0 if a.get("pad") else None)
                except h2.exceptions.ProtocolError:
                    pass
            if r is not None:
                r.hold = False
        elif op == "h2_ping":
            for k in range(a["n"]):
                self.h2.ping(struct.pack(">Q", (a.get("base", 0) + k) & (2 ** 64 - 1)))
            self.pings_sent += a["n"]
        elif op == "h2_settings":  # the same SETTINGS n times, or new values once
            new = {int(k): v for k, v in a.get("set", {}).items()} or \
                {H2_MAX_CONCURRENT_STREAMS: 100, H2_ENABLE_PUSH: 0}
            for _ in range(a.get("n", 1)):
                self.h2.update_settings(new)
        elif op == "h2_ext":  # a frame the server must ignore (RFC 9113 section 5.5)
            self.emit()
            self.out += self.ext_frame(a)
        elif op == "h2_window":  # WINDOW_UPDATEs of 1 on the connection or open streams
            open_ = [r.sid for r in self.reqs if r.state == "open"]
            try:
                for k in range(a["n"]):
                    sid = open_[k % len(open_)] if a.get("streams") and open_ else None
                    self.h2.increment_flow_control_window(1, sid)
            except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError):
                pass
        elif op == "h2_rapid":  # streams opened and reset at once (CVE-2023-44487)
            try:
                for _ in range(a["n"]):
                    if self.goaway is not None:
                        break
                    sid = self.h2.get_next_available_stream_id()
                    self.h2.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"http"),
                                               (b":authority", b"a"), (b":path", b"/")],
                                         end_stream=True)
                    self.h2.reset_stream(sid, 8)
            except h2.exceptions.ProtocolError:
                pass
        elif op == "h2_priority":  # PRIORITY frames on streams of ours and idle ones
            frames = b""
            base = self.h2.highest_outbound_stream_id
            for k in range(a["n"]):
                sid = max(1, base - 2 * (k % 4)) if k % 2 else base + 2 * (k % 50) + 2
                frames += h2_frame(2, 0, sid, struct.pack(">IB", 0, k % 256))
            self.emit()
            self.out += frames  # h2 has no call for idle streams; it tracks nothing here
        elif op == "h2_grant":
            self.grant(a["n"])
        elif op == "h2_auto":
            self.auto = True
            self.keep = a.get("keep", self.keep)
            self.windows()
        elif op == "h2_drain":
            self.pump()
            self.wait = ("drain", now + a["ms"] / 1000, None)
        elif op == "h2_raw":  # a frame broken by the plan: the state machine cannot follow
            self.emit()
            self.broken = True
            self.out += bytes.fromhex(a["hex"])
            return
        elif op == "h2_trickle":  # what h2_start {hold} held, n bytes one at a time
            self.pump()
            if self.hold_out is None:
                return
            self.trickle_n = a["n"]
            self.trickle_ms = a["ms"]
            self.wait = ("trickle", now, None)
            return
        elif op == "h2_goaway":
            try:
                self.h2.close_connection()
            except h2.exceptions.ProtocolError:
                pass
            self.emit()
        else:
            raise ValueError(f"unknown action {op!r}")
        self.pump()

    def ext_frame(self, a):
        """An extension frame: PRIORITY_UPDATE (RFC 9218) of a stream of ours or an idle
        one, or a frame of a type nobody defined, on the connection or an open stream."""
        base = self.h2.highest_outbound_stream_id
        if a["type"] == 0x10:
            sid = max(1, base - 2 * a.get("back", 0)) if a.get("back", 0) >= 0 else base + 2
            return h2_frame(0x10, 0, 0, struct.pack(">I", sid) + a.get("value", "u=3").encode())
        open_ = [r.sid for r in self.reqs if r.state == "open"]
        sid = open_[-1] if a.get("on_stream") and open_ else 0
        return h2_frame(a["type"], a.get("flags", 0), sid, bytes.fromhex(a.get("hex", "")))

    def start_h2(self, a):
        s = a.get("settings", {})
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_outbound_headers=not a.get("bad"),
            normalize_outbound_headers=not a.get("bad")))
        values = {H2_ENABLE_PUSH: 0, H2_MAX_CONCURRENT_STREAMS: 100}
        values.update({int(k): v for k, v in s.items()})
        # Our first SETTINGS, in force from the start: the server applies them before it
        # reads anything after them.
        self.h2.local_settings = H2FifoSettings(values)
        # h2 takes no frame after a GOAWAY, sent or received; but the streams up to its last
        # stream id go on (RFC 9113 section 6.8), and their answers are checked too.
        sm = self.h2.state_machine
        sm._transitions = dict(sm._transitions)
        for state in (h2.connection.ConnectionState.IDLE,
                      h2.connection.ConnectionState.CLIENT_OPEN):
            for inp in (h2.connection.ConnectionInputs.RECV_GOAWAY,
                        h2.connection.ConnectionInputs.SEND_GOAWAY):
                sm._transitions[(state, inp)] = (None, state)
        self.h2.max_inbound_frame_size = self.h2.local_settings.max_frame_size
        self.h2.decoder.max_allowed_table_size = self.h2.local_settings.header_table_size
        up = a.get("upgrade")
        if up:
            self.upgrade(up)
        else:
            self.h2.initiate_connection()
        self.auto = a.get("auto", True)
        self.keep = a.get("keep", self.h2.local_settings.initial_window_size or 65535)
        self.conn_keep = a.get("conn", 65535)
        if a.get("hold"):
            self.hold_out = bytearray()
        if self.conn_keep > 65535:
            self.h2.increment_flow_control_window(self.conn_keep - 65535)
        self.emit()

    def upgrade(self, up):
        """h2c by Upgrade: an HTTP/1.1 request with Upgrade: h2c and our SETTINGS in
        HTTP2-Settings, which becomes stream 1 once the server answers 101; the preface goes
        after the 101, or right behind the request (eager)."""
        settings = self.h2.initiate_upgrade_connection().decode().rstrip("=")
        r = H2Req(dict(up, op="h2_req", i=0), self.max_body)
        r.sid, r.state = 1, "open"
        self.reqs.append(r)
        self.by_sid[1] = r
        fields = [("Host", "127.0.0.1"), ("Connection", "Upgrade, HTTP2-Settings"),
                  ("Upgrade", "h2c"), ("HTTP2-Settings", settings)] + \
            [tuple(f) for f in up.get("hdrs", [])]
        self.out += (f"{r.method} {r.path} HTTP/1.1\r\n" +
                     "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n").encode()
        self.upgrading = True
        self.up_buf = bytearray()
        self.up_eager = bool(up.get("eager"))
        preface = self.h2.data_to_send()
        if self.up_eager:
            self.out += preface
        else:
            self.up_pending = bytearray(preface)

    def upgraded(self, data):
        """Bytes read while the Upgrade is answered: the 101's head, then HTTP/2 (returned);
        None while the head is not whole, or when it is not a 101."""
        self.up_buf += data
        end = self.up_buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.up_buf) > 16384:
                self.fail(f"the Upgrade's answer has no end: {bytes(self.up_buf[:80])!r}")
                self.broken = True
            return None
        head = bytes(self.up_buf[:end])
        self.upgrading = False
        if not re.match(rb"HTTP/1\.1 101 ", head):
            self.fail(f"the Upgrade was answered {head[:80]!r}")
            self.broken = True
            return None
        if not self.up_eager:
            self.out += self.up_pending
            self.up_pending = None
        return bytes(self.up_buf[end + 4:])


class GrpcCall(H2Req):
    """One call of a plan as it goes (an H2Req to H2Client): its messages framed into one
    byte string, sent as the windows allow, its gates (answers to wait for before a message),
    its half-close (end: on its last DATA frame, an empty one, trailers, none; after end_gate
    answers) and its reset (rst: once sent bytes went, or got answers came); what comes back
    checked as it comes against its expect:
      status      the grpc-status it must end with (None: it must not end with one)
      resp        the responses, in order: [kind, size]: simple, out (a payload of size
                  zeros), in (aggregated_payload_size), empty, health (the serving status)
      prefix      the responses may stop short (a call ended early by an error)
      http        an HTTP status instead of gRPC's answer (415, 405)
      msg         the grpc-message it must carry (percent-decoded)
      echo_init, echo_trail   the echoed metadata (the trailer's bytes in hex)
      echo_init_maybe         the echoed initial metadata, if the headers went
      gz          the response must be compressed (True) or not (False)
      accept_enc  the answer must say what the server accepts (grpc-accept-encoding)
      cancel_ok   its deadline may pass: the server may end it DEADLINE_EXCEEDED (a status,
                  or a reset CANCEL while its answers wait for our window)
      cancel      its deadline must pass: it must end so, and nothing else must come"""

    def __init__(self, op):
        self.op = op
        self.i = op["i"]
        self.method = op.get("method", "POST")
        self.path = op["path"]
        self.starts = []  # where each message begins in the body
        body = bytearray()
        for m in op["msgs"]:
            self.starts.append(len(body))
            body += grpc_framed(m)
        self.body = bytes(body)
        self.gate = op.get("gate") or [0] * len(self.starts)
        rst = op.get("rst") or {}
        self.rst_sent, self.rst_got = rst.get("sent"), rst.get("got")
        self.bad = False
        self.hold = False
        cut = op.get("cut") or {}
        self.cut_rng = random.Random(cut.get("seed", 0))
        self.cut_sizes = cut.get("sizes", [16384])
        self.cut_pad = cut.get("pad", 0)
        self.sent = 0
        self.sid = None
        self.state = "queued"
        self.reset_code = None
        self.exp = op["expect"]
        self.status = None   # the HTTP status
        self.gz = False      # the answer's messages are gzip'd (grpc-encoding: gzip)
        self.head_block = None
        self.trailers = None
        self.buf = bytearray()
        self.resps = 0       # response messages checked
        self.got = 0         # bytes of DATA

    def name(self):
        return f"stream {self.sid} ({self.method} {self.path[:60]}" + \
            (f", {self.exp['hostile']}" if self.exp.get("hostile") else "") + ")"

    def limit(self):
        """How much of the body may go now: up to the first message whose gate (answers to
        wait for) is not met, and up to where the call is reset."""
        n = len(self.body)
        for start, g in zip(self.starts, self.gate):
            if g and self.resps < g:
                n = start
                break
        if self.rst_sent is not None:
            n = min(n, self.rst_sent)
        return n

    def reset_ok(self, code):
        return code == H2_CANCEL and (self.exp.get("cancel_ok") or self.exp.get("cancel"))

    def on_head(self, headers):
        self.status = int(dict(headers).get(b":status", b"0"))
        fields = dict(headers)
        want = self.exp.get("http", 200)
        if self.exp.get("cancel") and (self.status != 200 or
                                       fields.get(b"grpc-status") != GRPC_DEADLINE):
            return f"{self.name()}: answered (:status {self.status}, grpc-status " \
                f"{fields.get(b'grpc-status')}), wanted DEADLINE_EXCEEDED"
        if self.status != want:
            return f"{self.name()}: :status {self.status}, wanted {want}"
        if want != 200:
            return None
        ct = fields.get(b"content-type", b"")
        if not ct.startswith(b"application/grpc"):
            return f"{self.name()}: content-type {ct!r}"
        enc = fields.get(b"grpc-encoding")
        if enc not in (None, b"identity", b"gzip"):
            return f"{self.name()}: grpc-encoding {enc!r}"
        self.gz = enc == b"gzip"
        self.head_block = fields
        if b"grpc-status" in fields:  # trailers-only
            self.trailers = fields
            return None
        if self.exp.get("gz") is not None and self.gz != self.exp["gz"]:
            return f"{self.name()}: grpc-encoding {enc!r}, " \
                f"{'compressed' if self.exp['gz'] else 'plain'} answers wanted"
        for key in ("echo_init", "echo_init_maybe"):
            v = self.exp.get(key)
            got = fields.get(b"x-grpc-test-echo-initial")
            if v is not None and (got is not None or key == "echo_init") and \
                    got != v.encode():
                return f"{self.name()}: x-grpc-test-echo-initial {got!r}, wanted {v!r}"
        return None

    def on_data(self, data):
        if self.status is None:
            return f"{self.name()}: DATA before the head"
        if self.exp.get("http", 200) != 200 or self.trailers is not None:
            return f"{self.name()}: DATA after an answer without a body"
        self.got += len(data)
        self.buf += data
        while len(self.buf) >= 5:
            flag, n = self.buf[0], struct.unpack(">I", self.buf[1:5])[0]
            if flag > 1 or (flag == 1 and not self.gz):
                return f"{self.name()}: response {self.resps} has flag {flag}" + \
                    (" without grpc-encoding" if flag == 1 else "")
            if n > GRPC_MAX:
                return f"{self.name()}: response {self.resps} of {n} bytes, past the limit"
            if len(self.buf) < 5 + n:
                break
            msg = bytes(self.buf[5:5 + n])
            del self.buf[:5 + n]
            if flag:
                try:
                    msg = zlib.decompress(msg, 31)
                except zlib.error as e:
                    return f"{self.name()}: response {self.resps} does not inflate: {e}"
            elif self.exp.get("gz") and n > 0:
                return f"{self.name()}: response {self.resps} not compressed"
            why = self.check_response(msg)
            self.resps += 1
            if why is not None:
                return f"{self.name()}: response {self.resps - 1}: {why}"
        return None

    def check_response(self, msg):
        want = self.exp["resp"]
        if self.resps >= len(want):
            return f"more responses than the {len(want)} wanted ({len(msg)} bytes)"
        kind, n = want[self.resps]
        try:
            fields = pb_decode(msg)
        except ValueError as e:
            return f"does not parse ({e}): {msg[:40].hex()}"
        if kind == "empty":
            return None if msg == b"" else f"not empty: {msg[:40].hex()}"
        if kind in ("in", "health"):
            v = [f[2] for f in fields if f[0] == 1 and f[1] == 0]
            got = v[-1] if v else 0
            if got != n or len(fields) != len(v):
                return f"{kind} {got} ({msg[:40].hex()}), wanted {n}"
            return None
        # simple, out: a payload of n zeros
        if len(fields) != 1 or fields[0][:2] != (1, 2):
            return f"not a response with a payload: {msg[:40].hex()}"
        try:
            pay = pb_decode(fields[0][2])
        except ValueError as e:
            return f"its payload does not parse ({e})"
        body = b"".join(f[2] for f in pay if f[0] == 2 and f[1] == 2)
        if any(f[0] != 2 and not (f[0] == 1 and f[2] == 0) for f in pay):
            return f"its payload has other fields: {fields[0][2][:40].hex()}"
        if len(body) != n or body.count(0) != n:
            return f"a payload of {len(body)} bytes, wanted {n} zeros"
        return None

    def on_trailers(self, headers):
        self.trailers = dict(headers)
        return None

    def on_end(self):
        self.state = "done"
        exp = self.exp
        if exp.get("http", 200) != 200:
            return None
        if self.buf:
            return f"{self.name()}: the answer ended inside a message ({len(self.buf)} bytes)"
        t = self.trailers
        if t is None or b"grpc-status" not in t:
            return f"{self.name()}: ended without a grpc-status"
        st = t[b"grpc-status"]
        if st == GRPC_DEADLINE and (exp.get("cancel") or exp.get("cancel_ok")):
            return None  # the deadline passed (what came before it was checked as it came)
        if exp.get("cancel") or exp.get("status") is None:
            return f"{self.name()}: ended with grpc-status {st.decode()}, wanted a reset " \
                f"(CANCEL)"
        if not re.fullmatch(rb"0|[1-9][0-9]?", st) or int(st) != exp["status"]:
            m = grpc_percent_decode(t.get(b"grpc-message", b""))[:80]
            return f"{self.name()}: grpc-status {st.decode()} ({m!r}), wanted {exp['status']}"
        want = len(exp["resp"])
        if self.resps < want and not exp.get("prefix"):
            return f"{self.name()}: {self.resps} responses, wanted {want}"
        if exp.get("msg") is not None:
            got = grpc_percent_decode(t.get(b"grpc-message", b""))
            if got != exp["msg"].encode():
                return f"{self.name()}: grpc-message {got[:80]!r}, wanted {exp['msg'][:80]!r}"
        if exp.get("echo_trail") is not None:
            v = t.get(b"x-grpc-test-echo-trailing-bin")
            try:
                got = grpc_unbase64(v) if v is not None else None
            except ValueError:
                got = v
            if got != bytes.fromhex(exp["echo_trail"]):
                return f"{self.name()}: x-grpc-test-echo-trailing-bin {v!r}, wanted " \
                    f"{exp['echo_trail']}"
        if exp.get("accept_enc") and not t.get(b"grpc-accept-encoding"):
            return f"{self.name()}: UNIMPLEMENTED for the encoding without grpc-accept-encoding"
        return None


class GrpcClient(H2Client):
    """One HTTP/2 connection of gRPC calls (GrpcCall): H2Client, with calls opened as gRPC
    requests, their bodies held at their gates, reset where the plan says, and the ping
    policy's GOAWAY allowed once enough PINGs went (grpc_calm: it must come)."""

    def do(self, a, now):
        op = a["op"]
        if op == "grpc_call":  # ("times": that many alike, in cases written by hand)
            if self.dead or self.shut_sent:
                return
            for k in range(a.get("times", 1)):
                r = GrpcCall(dict(a, i=a["i"] + k) if k else a)
                self.reqs.append(r)
                if self.goaway is not None:
                    r.state = "unsent"
                else:
                    self.queue.append(r)
            self.pump()
        elif op == "grpc_calm":  # the ping policy's GOAWAY must come
            self.wait_from = now
            self.wait = ("calm", now + a["ms"] / 1000, None)
        else:
            super().do(a, now)

    def goaway_ok(self, code, debug):
        # codec/grpc/server.c on_ping: a PING is a strike when no head, message nor status
        # went since the one before (the first never is); GOAWAY ENHANCE_YOUR_CALM
        # "too_many_pings" at the strike past max_ping_strikes. So never before that many
        # PINGs and one.
        return code == H2_ENHANCE_YOUR_CALM and debug == b"too_many_pings" and \
            self.pings_sent >= GRPC_PING_STRIKES + 2

    def satisfied(self, now):
        kind, deadline, extra = self.wait
        if kind == "calm":
            if self.goaway is None and not self.eof and not self.dead and now < deadline and \
                    not self.broken:
                return False
            if self.goaway is None or self.goaway[0] != H2_ENHANCE_YOUR_CALM:
                got = "no GOAWAY" if self.goaway is None else \
                    f"GOAWAY {h2_code(self.goaway[0])} ({self.goaway_debug[:80]!r})"
                self.fail(f"{self.pings_sent} PINGs and no call: {got}, wanted "
                          f"ENHANCE_YOUR_CALM too_many_pings")
            return True
        return super().satisfied(now)

    def open(self, r):
        op = r.op
        sid = self.h2.get_next_available_stream_id()
        hdrs = [(b":method", r.method.encode()), (b":scheme", b"http"),
                (b":authority", op.get("authority", "127.0.0.1").encode()),
                (b":path", r.path.encode())]
        for k, v in op.get("hdrs", []):
            hdrs.append((k.encode(), v.encode("latin-1")))
        if op.get("never"):
            hdrs.append(h2_never_header(op["never"]))
        end_now = op.get("end") == "headers"
        self.h2.send_headers(sid, hdrs, end_stream=end_now)
        r.sid = sid
        r.state = "open"
        self.by_sid[sid] = r
        if not end_now:
            self.sending.append(r)
        if self.auto:
            self.windows()

    def cancel(self, r):
        self.drop_sending(r)
        r.state = "reset_us"
        try:
            self.h2.reset_stream(r.sid, H2_CANCEL)
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError):
            pass

    def send_body(self, r):
        st = self.h2.streams.get(r.sid)
        if st is None or st.closed or r.state != "open":
            self.drop_sending(r)
            return
        limit = r.limit()
        end = r.op.get("end", "data")
        while r.sent < limit:
            room = min(self.h2.local_flow_control_window(r.sid), self.h2.max_outbound_frame_size)
            if room <= 0:
                return
            n, pad = r.next_piece(room, self.h2.max_outbound_frame_size, limit)
            last = r.sent + n == len(r.body) and end == "data" and r.rst_sent is None and \
                not r.op.get("end_gate")
            self.h2.send_data(r.sid, r.body[r.sent:r.sent + n], end_stream=last, pad_length=pad)
            r.sent += n
        if r.rst_sent is not None and r.sent >= r.rst_sent:
            self.cancel(r)
            return
        if r.sent < len(r.body) or r.resps < r.op.get("end_gate", 0):
            return  # at a gate: the answers it waits for will bring us back
        if end == "data" and (not r.body or r.op.get("end_gate")) or end == "empty":
            self.h2.send_data(r.sid, b"", end_stream=True)
        elif end == "trailers":
            self.h2.send_headers(r.sid, [(b"x-client-trailer", b"1")], end_stream=True)
        self.drop_sending(r)

    def pump(self):
        super().pump()
        if self.h2 is not None and not self.done and not self.broken:
            for r in self.reqs:
                if r.state == "open" and r.rst_got is not None and r.resps >= r.rst_got:
                    self.cancel(r)
            self.emit()


class Burst:
    """Every connection of a burst, played at once."""

    def __init__(self, proto, plans, port, tls_ctxs):
        self.proto = proto
        self.port = port
        self.tls_ctxs = tls_ctxs
        self.sel = selectors.DefaultSelector()
        stream = getattr(proto, "client_class", Client)
        self.clients = [UdpClient(self, p) if p.get("udp") else stream(self, p) for p in plans]

    def run(self, limit=BURST_SECONDS):
        t0 = time.monotonic()
        pending = sorted(self.clients, key=lambda c: c.plan["start_ms"])
        started = []
        deadline = t0 + limit
        while True:
            now = time.monotonic()
            while pending and t0 + pending[0].plan["start_ms"] / 1000 <= now:
                c = pending.pop(0)
                started.append(c)
                c.start()
            live = [c for c in started if not c.done]
            if (not pending and not live) or now > deadline:
                break
            wakes = [c.wake for c in live if c.wake is not None]
            if pending:
                wakes.append(t0 + pending[0].plan["start_ms"] / 1000)
            timeout = min(min(wakes, default=now + 0.1), now + 0.1) - now
            for key, mask in self.sel.select(max(0.0, timeout)):
                key.data.on_event(mask)
            now = time.monotonic()
            for c in live:
                if not c.done and c.wake is not None and c.wake <= now:
                    c.advance()
        stuck = 0
        for c in self.clients:
            if not c.done:
                stuck += 1
                c.finish()
        self.sel.close()
        errors = [f"connection {c.plan['id']} ({c.plan['kind']}): {c.error}"
                  for c in self.clients if c.error]
        return errors, stuck, time.monotonic() - t0

    def summary(self):
        """How the connections went: checked and answered in full, closed by the server."""
        full = sum(1 for c in self.clients if c.checker and c.checker.complete(c.rx))
        closed = sum(1 for c in self.clients if c.eof or c.dead)
        slow = [c for c in self.clients if c.plan["kind"] == "slow_reader"]
        slow = f", {sum(1 for c in slow if c.eof)} of {len(slow)} slow readers closed " \
            f"(after {', '.join(str(c.checker.got) for c in slow)} bytes)" if slow else ""
        h2s = [c for c in self.clients if isinstance(c, H2Client)]
        if h2s:  # streams answered and checked byte for byte, and the bytes
            done = [r for c in h2s for r in c.reqs if r.state == "done"]
            slow += f", {len(done)} streams answered ({sum(r.got for r in done)} bytes " \
                f"checked), {sum(1 for c in h2s if c.goaway)} GOAWAYs"
        return f"{full} answered in full, {closed} closed by the server{slow}"


# ---------------------------------------------------------------------------------------------
# The server under test.

def die_with_parent():
    """In the child before exec: SIGKILL when we die, however we die (a ctest timeout)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def sanitizer_env():
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), ASAN_QUARANTINE]))
    # Defaults first, so that the caller's settings win.
    env["TSAN_OPTIONS"] = ":".join(filter(None, ["halt_on_error=1:second_deadlock_stack=1",
                                                 env.get("TSAN_OPTIONS")]))
    env["UBSAN_OPTIONS"] = ":".join(filter(None, ["print_stacktrace=1", env.get("UBSAN_OPTIONS")]))
    return env


class Server:
    def __init__(self, argv, log_path, fds=FDS):
        self.name = os.path.basename(argv[0])
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            ["bash", "-c", f'ulimit -n {fds}; exec "$@"', "server"] + argv,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env=sanitizer_env(), preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while True:
            m = re.search(r"(?:listening|serving .*) on 127\.0\.0\.1:(\d+)|^PORT (\d+)$",
                          self.output(), re.M)
            if m:
                self.port = int(m.group(1) or m.group(2))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise Failure(f"{self.name} did not start:\n{self.output()[-3000:]}")
            time.sleep(0.02)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def peak_rss_mb(self):
        """The server's peak resident memory (Linux's VmHWM), or None."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
        except OSError:
            return None
        return int(m.group(1)) // 1024 if m else None

    def stop(self):
        """SIGTERM; the exit status, or a Failure when it does not exit."""
        self.proc.terminate()
        try:
            return self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            raise Failure(f"did not exit within {STOP_SECONDS:.0f} s of SIGTERM")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def canary(proto, srv, n, tls):
    """A well-formed request on a fresh connection, answered correctly, or a Failure."""
    deadline = time.monotonic() + CANARY_SECONDS
    last = None
    while True:
        if not srv.alive():
            raise Failure(f"canary {n}: the server died (status {srv.proc.returncode})")
        try:
            proto.canary(srv.port, n, tls)
            return
        except CanaryWrong as e:
            raise Failure(f"canary {n} answered wrongly: {e}")
        except (OSError, ssl.SSLError) as e:
            last = e  # out of descriptors, or still closing what the burst left: again
        if time.monotonic() > deadline:
            raise Failure(f"canary {n} not answered within {CANARY_SECONDS:.0f} s ({last})")
        time.sleep(0.2)


def report_output(text):
    """The part of the server's output worth showing: the first sanitizer report, up to its
    SUMMARY line, else the tail."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if any(m in line for m in SANITIZER_MARKERS):
            end = next((j for j in range(i, len(lines)) if "SUMMARY:" in lines[j]), i + 80)
            return "\n".join(lines[max(0, i - 1):min(end + 1, i + 150)])
    return "\n".join(lines[-40:])


def signature(why):
    """What names a failure for --reduce: the sanitizer's SUMMARY line, else its first line."""
    m = re.search(r"^SUMMARY: .*$", why, re.M)
    return re.sub(r"\d+", "N", m.group(0) if m else why.splitlines()[0])  # sizes, counts vary


def play(args, name, bursts, label):
    """Start the server, play the bursts, canary after each, stop it; None when it passed,
    else (why, the bursts played). label names the run (its seed, or the trace)."""
    proto = PROTOS[name]
    tls_client = tls_contexts(args.cert_dir) if proto.tls else None
    canary_tls = tls_client["1.3"] if tls_client else None
    log_path = os.path.join(args.out, f"serverfuzz-{name}-{label}.log")
    t0 = time.monotonic()
    srv = None
    played = 0
    conns = stuck = 0
    try:
        srv = Server(proto.argv(args.bin_dir, args.cert_dir), log_path, proto.fds)
        for k, b in enumerate(bursts):
            played = k + 1
            burst = Burst(proto, b["conns"], srv.port, tls_client)
            errors, s, took = burst.run()
            conns += len(b["conns"])
            stuck += s
            if args.verbose:
                print(f"  burst {k}: {len(b['conns'])} connections in {took:.1f} s, "
                      f"{burst.summary()}{f', {s} cut at the time limit' if s else ''}",
                      flush=True)
            if not srv.alive():  # what its connections saw follows from that
                raise Failure(f"burst {k}: the server died (status {srv.proc.returncode})")
            if errors:
                raise Failure(f"burst {k}: wrong answers:\n    " + "\n    ".join(errors[:10]))
            canary(proto, srv, k, canary_tls)
        time.sleep(SETTLE_SECONDS)
        if not srv.alive():
            raise Failure(f"the server died (status {srv.proc.returncode})")
        peak = srv.peak_rss_mb()
        if proto.max_rss_mb is not None and peak is not None and peak > proto.max_rss_mb:
            raise Failure(f"the server's memory grew to {peak} MiB (VmHWM), past "
                          f"{proto.max_rss_mb} MiB")
        rc = srv.stop()
        out = srv.output()
        found = [m for m in SANITIZER_MARKERS if m in out]
        if found:
            raise Failure(f"sanitizer report in the output ({found[0]!r})")
        if rc != 0:
            tsan = " (ThreadSanitizer's exit status: a report)" if rc == 66 else ""
            raise Failure(f"exit status {rc} after SIGTERM{tsan}")
    except Failure as f:
        if srv is not None:
            srv.kill()
            why = f"{f}\n--- {srv.name} output ({log_path}) ---\n{report_output(srv.output())}"
        else:
            why = str(f)
        return why, bursts[:played]
    finally:
        if srv is not None:
            srv.kill()
    print(f"serverfuzz: {name} {label}: ok ({len(bursts)} bursts, {conns} connections, "
          f"{time.monotonic() - t0:.1f} s{f', {stuck} cut at the time limit' if stuck else ''})",
          flush=True)
    os.unlink(log_path)
    return None


def write_trace(args, name, seed, bursts, why, label):
    path = os.path.join(args.out, f"serverfuzz-{name}-{label}.json")
    trace = {"format": TRACE_FORMAT, "server": name, "seed": seed, "threads": THREADS,
             "failure": why.splitlines()[0], "bursts": bursts}
    with open(path, "w") as f:
        json.dump(trace, f, separators=(",", ":"))
        f.write("\n")
    return path


def run_seed(args, name, seed):
    rng = random.Random(seed)
    bursts = [gen_burst(rng, PROTOS[name]) for _ in range(args.bursts)]
    print(f"serverfuzz: {name} seed {seed}: {args.bursts} bursts", flush=True)
    res = play(args, name, bursts, str(seed))
    if res is None:
        return True
    why, played = res
    path = write_trace(args, name, seed, played, why, str(seed))
    print(f"serverfuzz: FAILED: {name} seed {seed}: {why}\n"
          f"serverfuzz: trace {path}\n"
          f"serverfuzz: again: {sys.argv[0]} {args.bin_dir} {args.cert_dir} --servers {name} "
          f"--seeds {seed} --bursts {args.bursts}   or   --replay {path}", flush=True)
    return False


def need_h2(names, what):
    """The http2 and grpc servers need python3-h2: without it, alone (or a trace of one) they
    are skipped (exit 77, ctest's SKIP_RETURN_CODE); among others they are left out, saying
    so."""
    h2_names = [n for n in names if n in ("http2", "grpc", "grpc_offload")]
    if h2 is not None or not h2_names:
        return names
    if len(names) == len(h2_names):
        print(f"SKIP: {what}: the {' and '.join(h2_names)} server needs python3-h2 "
              "(scripts/deps.sh)")
        sys.exit(77)
    print(f"serverfuzz: {', '.join(h2_names)} left out: python3-h2 is not installed", flush=True)
    return [n for n in names if n not in h2_names]


def need_exe(args, names, what):
    """A server whose program the tree did not build (eddy-grpc-server needs protoc-c): alone,
    skipped (77); among others left out, saying so."""
    missing = [n for n in names if not os.path.exists(os.path.join(args.bin_dir, PROTOS[n].exe))
               and n.startswith("grpc")]
    if not missing:
        return names
    if len(missing) == len(names):
        print(f"SKIP: {what}: {PROTOS[missing[0]].exe} is not built in {args.bin_dir}")
        sys.exit(77)
    print(f"serverfuzz: {', '.join(missing)} left out: not built", flush=True)
    return [n for n in names if n not in missing]


def need_certs(args, name, what):
    """A TLS server's certificates are there, or exit 2 (a usage error)."""
    if PROTOS[name].tls and not os.path.exists(os.path.join(args.cert_dir, "server.pem")):
        print(f"serverfuzz: {what}: the {name} server needs CERT_DIR "
              "(tests/pipeline/tls_certs.sh DIR makes it)", file=sys.stderr)
        sys.exit(2)


def trace_bursts(trace):
    """A trace's bursts, each as many times as its "times" says (a case written by hand that
    plays one burst again and again stays one burst long)."""
    return [b for b in trace["bursts"] for _ in range(b.get("times", 1))]


def replay(args, path):
    with open(path) as f:
        trace = json.load(f)
    if trace.get("format") != TRACE_FORMAT:
        print(f"serverfuzz: {path}: not a {TRACE_FORMAT} trace", file=sys.stderr)
        sys.exit(2)
    name = trace["server"]
    need_h2([name], path)
    need_exe(args, [name], path)
    need_certs(args, name, path)
    label = os.path.splitext(os.path.basename(path))[0]
    failed = 0
    for r in range(args.repeat):
        print(f"serverfuzz: replaying {path} ({name}, seed {trace.get('seed')}, "
              f"{len(trace['bursts'])} bursts){f' #{r + 1}' if args.repeat > 1 else ''}",
              flush=True)
        res = play(args, name, trace_bursts(trace), f"replay-{label}")
        if res is not None:
            failed += 1
            print(f"serverfuzz: FAILED: replay of {path}: {res[0]}", flush=True)
    if args.repeat > 1:
        print(f"serverfuzz: {failed} of {args.repeat} replays failed")
    return failed == 0


def reduce(args, path):
    """Make a failing trace smaller: drop bursts, then connections (halves, quarters, ...,
    one at a time) while a replay still fails the same way (its signature) at least once in
    --repeat tries. Writes OUT/<name>-reduced.json."""
    with open(path) as f:
        trace = json.load(f)
    name = trace["server"]
    need_h2([name], path)
    need_certs(args, name, path)

    def fails(bursts, sig=None):
        for _ in range(args.repeat):
            res = play(args, name, bursts, "reduce")
            if res is not None and (sig is None or signature(res[0]) == sig):
                return signature(res[0])
        return None

    sig = fails(trace_bursts(trace))
    if sig is None:
        print(f"serverfuzz: {path} does not fail in {args.repeat} tries: nothing to reduce")
        return False
    print(f"serverfuzz: reducing {path}, failing with: {sig}", flush=True)
    bursts = trace_bursts(trace)
    i = 0
    while len(bursts) > 1 and i < len(bursts):
        cand = bursts[:i] + bursts[i + 1:]
        if fails(cand, sig):
            bursts = cand
        else:
            i += 1
    for bi in range(len(bursts)):
        conns, n = bursts[bi]["conns"], 2
        while len(conns) > 1:
            chunk = max(1, len(conns) // n)
            for start in range(0, len(conns), chunk):
                cand_conns = conns[:start] + conns[start + chunk:]
                cand = bursts[:bi] + [{"conns": cand_conns}] + bursts[bi + 1:]
                if cand_conns and fails(cand, sig):
                    conns = cand_conns
                    bursts = cand
                    n = max(n - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                n = min(n * 2, len(conns))
        print(f"serverfuzz: burst {bi}: {len(conns)} connections left", flush=True)
    out = dict(trace, bursts=bursts, failure=sig, reduced_from=os.path.basename(path))
    dest = os.path.join(args.out, os.path.splitext(os.path.basename(path))[0] + "-reduced.json")
    with open(dest, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"serverfuzz: reduced trace {dest}: {len(bursts)} bursts, "
          f"{sum(len(b['conns']) for b in bursts)} connections")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir", help="where eddy-*-server are (build/<tree>/examples)")
    ap.add_argument("cert_dir", nargs="?", default="",
                    help="tls_certs.sh's certificates (for the tls server)")
    ap.add_argument("--servers", default=",".join(ALL_SERVERS),
                    help="comma-separated, of " + ",".join(ALL_SERVERS) + " (default: all)")
    ap.add_argument("--seeds", help="comma-separated seeds, each run on every server "
                    "(default: one fresh seed)")
    ap.add_argument("--bursts", type=int, default=4, help="bursts per run (default 4)")
    ap.add_argument("--soak", type=float, metavar="SECONDS",
                    help="fresh seeds, servers in turn, until SECONDS have passed")
    ap.add_argument("--replay", metavar="TRACE", help="play a trace file")
    ap.add_argument("--repeat", type=int, default=1,
                    help="--replay: this many times; --reduce: tries per candidate")
    ap.add_argument("--reduce", metavar="TRACE", help="make a failing trace smaller")
    ap.add_argument("--out", help="where logs and traces go (default: a new temporary directory)")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per burst")
    args = ap.parse_args()
    args.out = args.out or tempfile.mkdtemp(prefix="serverfuzz-")
    os.makedirs(args.out, exist_ok=True)
    # SIGTERM (ctest, make) ends us through the finally clauses, which kill the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    if args.replay:
        sys.exit(0 if replay(args, args.replay) else 1)
    if args.reduce:
        sys.exit(0 if reduce(args, args.reduce) else 1)
    names = [s for s in args.servers.split(",") if s]
    for n in names:
        if n not in PROTOS:
            ap.error(f"unknown server {n!r}")
    names = need_h2(names, "--servers")
    names = need_exe(args, names, "--servers")
    for n in names:
        need_certs(args, n, "--servers")
    failures = []
    if args.soak:
        end = time.monotonic() + args.soak
        runs = 0
        while time.monotonic() < end:
            name = names[runs % len(names)]
            seed = int.from_bytes(os.urandom(6), "big") ^ (time.time_ns() & 0xFFFFFF)
            runs += 1
            if not run_seed(args, name, seed):
                failures.append(f"{name} seed {seed}")
        print(f"serverfuzz: soak: {runs} runs in {args.soak:.0f} s, {len(failures)} failed"
              + "".join(f"\n  {f}" for f in failures)
              + f"\nserverfuzz: logs and traces in {args.out}")
    else:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else \
            [int.from_bytes(os.urandom(6), "big")]
        for seed in seeds:
            for name in names:
                if not run_seed(args, name, seed):
                    failures.append(f"{name} seed {seed}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
