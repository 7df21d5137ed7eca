#!/usr/bin/env python3
"""Hostile HTTP/2 clients against a cleartext HTTP/2 server (h2c by prior knowledge).

    tests/examples/h2_hostile.py --port P [--host 127.0.0.1] [--case NAME ...] [--list]
        [--seed N] [--strict] [--no-echo] [--fd-check PID] [--idle-timeout S]
        [--header-timeout S] [--settings-timeout S] [--stall-timeout S] [-v]
    tests/examples/h2_hostile.py --make-docroot DIR

Each case opens its own connection(s) and misbehaves in one way: the attacks and malformed
input of HTTP/2 (docs: /work/shared/research/h2-grpc.md, sections 1.4 and 5.6), plus positive
flow-control cases. For each it asserts three things:
  1. the reaction: a GOAWAY and its code, a RST_STREAM and its code on the right stream, an
     HTTP status, or the connection closed; where RFC 9113 allows several, each is accepted
     (the comment of the case says which);
  2. the server still serves: a fresh, well-behaved connection (python3-h2) gets 200 and
     "Hello, World!" for GET / and its body back from POST /echo;
  3. the server lets go: after a GOAWAY with an error the connection is closed within 3 s.
With --fd-check PID the server's descriptors are counted before and after all the cases.

A reaction is reported as tokens: GOAWAY(CODE), RST(CODE), STATUS(NNN), CLOSE (closed without
a GOAWAY), HTTP1(NNN) (an HTTP/1.1 answer), IGNORED (nothing, and the connection still answers
a PING), STALLED (nothing, and not even a PING answer), BACKPRESSURE (the server stopped
reading while it could not write), SURVIVED (a flood went through with no limit hit).
Where eddy-http-server is meant to do one particular thing among those the RFC allows (its
limits: research section 5.5), --strict asserts that thing; without it, a reaction the RFC
allows passes and the line says what eddy would do instead.

The server must answer GET / with "Hello, World!", POST /echo with the request body (not with
--no-echo), and GET /bytes/N with N bytes for the N in BYTES_SIZES. --make-docroot DIR writes
a document root that gives nghttpd and h2o the first and the last (tests/examples/
http2_hostile.sh says how they were run). Every socket operation has a deadline; a case that
takes longer than CASE_LIMIT seconds fails.
Exit status: 0 when every selected case passed (skipped cases do not fail), 1 otherwise.
"""
import argparse
import base64
import fnmatch
import os
import random
import select
import signal
import socket
import struct
import sys
import time
import traceback

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import hpack
    from hyperframe.frame import (ContinuationFrame, DataFrame, Frame,
                                  GoAwayFrame, HeadersFrame, PingFrame, PriorityFrame,
                                  PushPromiseFrame, RstStreamFrame, SettingsFrame,
                                  WindowUpdateFrame)
except ImportError as e:  # Debian: python3-h2, python3-hyperframe, python3-hpack
    print(f"SKIP: {e} (apt-get install python3-h2)")
    sys.exit(77)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
REACT = 3.0          # how long a reaction may take
CLOSE_BOUND = 3.0    # how long after its GOAWAY the server may keep the connection open
CASE_LIMIT = 30      # seconds, a whole case
BYTES_SIZES = (1, 10000, 65536, 100000, 200000, 1048576, 8388608)

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
FRAME_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING",
               "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"]
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE, \
    S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE = range(1, 7)
ERRORS = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
          "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
          "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
          "HTTP_1_1_REQUIRED"]
E = {name: code for code, name in enumerate(ERRORS)}
MAX_WINDOW = 2**31 - 1


def errname(code):
    return ERRORS[code] if 0 <= code < len(ERRORS) else f"0x{code:x}"


class Fail(Exception):
    """A case failed; with the connection, its last frames both ways are part of the message."""

    def __init__(self, msg, c=None):
        super().__init__(msg + (c.trace() if c is not None else ""))


class Skip(Exception):
    pass


# --- frames --------------------------------------------------------------------------------------
# Valid frames come from hyperframe; frames it refuses to build (wrong lengths, stream 0 where
# one is needed, ...) from raw().

def raw(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid & 0xFFFFFFFF) + payload


def f_settings(entries=None, ack=False):
    f = SettingsFrame(0, settings=entries or {})
    if ack:
        f.flags.add("ACK")
    return f.serialize()


def f_headers(sid, block, end_stream=True, end_headers=True, pad=None, priority=None):
    f = HeadersFrame(sid, data=block)
    if end_stream:
        f.flags.add("END_STREAM")
    if end_headers:
        f.flags.add("END_HEADERS")
    if pad is not None:
        f.flags.add("PADDED")
        f.pad_length = pad
    if priority is not None:
        f.flags.add("PRIORITY")
        f.depends_on, f.stream_weight, f.exclusive = priority
    return f.serialize()


def f_continuation(sid, block, end_headers=True):
    f = ContinuationFrame(sid, data=block)
    if end_headers:
        f.flags.add("END_HEADERS")
    return f.serialize()


def f_data(sid, payload, end_stream=False, pad=None):
    f = DataFrame(sid, data=payload)
    if end_stream:
        f.flags.add("END_STREAM")
    if pad is not None:
        f.flags.add("PADDED")
        f.pad_length = pad
    return f.serialize()


def f_ping(opaque=b"\0" * 8, ack=False):
    f = PingFrame(0, opaque_data=opaque)
    if ack:
        f.flags.add("ACK")
    return f.serialize()


def f_rst(sid, code):
    return RstStreamFrame(sid, error_code=code).serialize()


def f_wu(sid, inc):
    return WindowUpdateFrame(sid, window_increment=inc).serialize()


def f_priority(sid, dep, weight=16, exclusive=False):
    return PriorityFrame(sid, depends_on=dep, stream_weight=weight, exclusive=exclusive).serialize()


def f_goaway(last, code, debug=b""):
    return GoAwayFrame(0, last_stream_id=last, error_code=code, additional_data=debug).serialize()


def summarize(ftype, flags, sid, payload):
    name = FRAME_NAMES[ftype] if ftype < len(FRAME_NAMES) else f"type=0x{ftype:02x}"
    s = f"{name} stream={sid} flags=0x{flags:02x} len={len(payload)}"
    p = payload
    if ftype == GOAWAY and len(p) >= 8:
        last, code = struct.unpack(">II", p[:8])
        s += f" last={last & MAX_WINDOW} {errname(code)} debug={bytes(p[8:72])!r}"
    elif ftype == RST_STREAM and len(p) == 4:
        s += f" {errname(struct.unpack('>I', p)[0])}"
    elif ftype == SETTINGS and not flags & ACK:
        s += " " + ",".join(f"{i}={v}" for i, v in
                            (struct.unpack(">HI", p[k:k + 6]) for k in range(0, len(p) - 5, 6)))
    elif ftype == WINDOW_UPDATE and len(p) == 4:
        s += f" +{struct.unpack('>I', p)[0] & MAX_WINDOW}"
    elif ftype == PING:
        s += f" {bytes(p).hex()}"
    return s


def hpack_int(value, prefix_bits, first=0):
    """HPACK integer (RFC 7541 5.1) with the bits above the prefix taken from `first`."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 | 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack_literal(name, value, index_flag=0x00):
    """A literal field with a literal name (no Huffman): 0x40 adds it to the dynamic table,
    0x00 does not."""
    return bytes([index_flag]) + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def static_block(t, method=b"GET", path=b"/"):
    """A request's pseudo-headers encoded by hand, without the dynamic table: 0x82 GET,
    0x83 POST, 0x86 http, 0x84 '/', literal :path and :authority (indexed names 4 and 1)."""
    m = {b"GET": b"\x82", b"POST": b"\x83"}[method]
    p = b"\x84" if path == b"/" else b"\x04" + hpack_int(len(path), 7) + path
    auth = t.authority.encode()
    return m + b"\x86" + p + b"\x01" + hpack_int(len(auth), 7) + auth


# --- a raw connection ----------------------------------------------------------------------------

class Stream:
    def __init__(self):
        self.status = None
        self.headers = []
        self.trailers = None
        self.body = bytearray()
        self.ended = False
        self.granted = 0   # window we have given the server on this stream, in all
        self.received = 0  # flow-controlled bytes the server sent on it


class Conn:
    """One client connection: non-blocking, every wait bounded, frames parsed with hyperframe
    and header blocks decoded with hpack. By default it acknowledges the server's SETTINGS and
    returns the window of every DATA frame at once (auto_wu); streams in `hold` get no window
    back."""

    def __init__(self, t, settings=None, preface=True, handshake=True, conn_window=0,
                 rcvbuf=None, sock=None, buf=b"", ack_settings=True):
        self.t = t
        t.conns.append(self)
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(REACT)
            sock.connect((t.host, t.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        self.sock = sock
        self.inbuf = bytearray(buf)
        self.out = bytearray()
        self.closed = False
        self.drained = 0
        self.write_failed = None
        self.close_how = None
        self.eof_at = None
        self.last_sent_at = time.monotonic()
        self.http1 = None
        self.goaway = None
        self.goaway_at = None
        self.rst = {}
        self.streams = {}
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.block = None  # (sid, fragments, end_stream) of a header block being received
        self.bad = []      # protocol faults of the server
        self.server_settings = {}
        self.settings_seen = 0
        self.settings_acks = 0
        self.ping_acks = []
        self.pings = 0
        self.ack_settings = ack_settings
        self.auto_wu = True
        self.hold = set()
        self.hold_conn = False
        self.pending_wu = {}
        self.next_sid = 1
        self.recv_log = []
        self.sent_log = []
        self.our = {S_ENABLE_PUSH: 0} if settings is None else dict(settings)
        self.our_initial = self.our.get(S_INITIAL_WINDOW_SIZE, 65535)
        self.conn_granted = 65535 + conn_window
        self.conn_received = 0
        self.peer_initial = 65535
        self.peer_max_frame = 16384
        self.send_conn = 65535
        self.send_win = {}
        if preface:
            frames = [PREFACE, f_settings(self.our)]
            if conn_window:
                frames.append(f_wu(0, conn_window))
            self.send(*frames)
            if handshake:
                self.handshake()

    # sending
    def log_sent(self, data):
        if data.startswith(PREFACE):
            self.sent_log.append("preface")
            data = data[len(PREFACE):]
        off = 0
        while off + 9 <= len(data) and len(self.sent_log) < 4000:
            n = int.from_bytes(data[off:off + 3], "big")
            self.sent_log.append(summarize(data[off + 3], data[off + 4],
                                           int.from_bytes(data[off + 5:off + 9], "big"),
                                           data[off + 9:off + 9 + n]))
            off += 9 + n

    def send(self, *frames, log=True):
        data = b"".join(frames)
        if log:
            self.log_sent(data)
        self.out += data
        self.flush()

    def flush(self, timeout=5.0):
        if not self.pump(lambda: not self.out, timeout):
            if not self.closed:
                raise Fail(f"could not send for {timeout} s (the server reads nothing)", self)

    def sid(self):
        s = self.next_sid
        self.next_sid += 2
        return s

    def open(self, sid):
        self.send_win.setdefault(sid, self.peer_initial)
        return self.stream(sid)

    def stream(self, sid):
        st = self.streams.get(sid)
        if st is None:
            st = self.streams[sid] = Stream()
            st.granted = self.our_initial
        return st

    def request(self, sid=None, method="GET", path="/", extra=(), end_stream=True, block=None,
                **kw):
        sid = self.sid() if sid is None else sid
        self.open(sid)
        if block is None:
            block = self.enc.encode(self.t.req(method, path, extra))
        self.send(f_headers(sid, block, end_stream=end_stream, **kw))
        return sid

    def headers_split(self, sid, block, pieces, end_stream=True):
        """One header block in a HEADERS frame and pieces-1 CONTINUATION frames."""
        self.open(sid)
        size = max(1, -(-len(block) // pieces))
        parts = [block[i:i + size] for i in range(0, len(block), size)]
        parts += [b""] * (pieces - len(parts))
        frames = [f_headers(sid, parts[0], end_stream=end_stream, end_headers=pieces == 1)]
        for i, p in enumerate(parts[1:], 2):
            frames.append(f_continuation(sid, p, end_headers=i == pieces))
        self.send(*frames)

    def blast(self, data, timeout=4.0, stall=1.0):
        """Writes without reading: 'sent', 'blocked' (nothing went out for `stall` s) or
        'closed'."""
        self.flush()  # what is queued (an ACK) goes first
        self.sent_log.append(f"(blast of {len(data)} bytes, not reading)")
        view = memoryview(data)
        off = 0
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while off < len(view):
            now = time.monotonic()
            if now > deadline or now - last > stall:
                return "blocked"
            _, w, _ = select.select([], [self.sock], [], 0.05)
            if not w:
                continue
            try:
                n = self.sock.send(view[off:off + 262144])
            except BlockingIOError:
                continue
            except OSError as e:
                self.send_failed(e)
                return "closed"
            off += n
            last = time.monotonic()
        self.last_sent_at = time.monotonic()
        return "sent"

    # receiving
    def pump(self, until=None, timeout=REACT):
        """Reads and writes until until() holds (True), the connection ends or the time is up
        (until() then, or False). Always makes one pass, even with timeout 0."""
        deadline = time.monotonic() + timeout
        first = True
        while True:
            if until is not None and until():
                return True
            if self.closed:
                self.out.clear()
                return until() if until is not None else False
            now = time.monotonic()
            if now >= deadline and not first:
                return False
            first = False
            try:
                r, w, _ = select.select([self.sock], [self.sock] if self.out else [], [],
                                        max(0.0, min(deadline - now, 0.05)))
            except (ValueError, OSError):
                self._closed("socket gone")
                continue
            if w:
                try:
                    n = self.sock.send(self.out[:262144])
                    del self.out[:n]
                    self.last_sent_at = time.monotonic()
                except BlockingIOError:
                    pass
                except OSError as e:
                    self.send_failed(e)
            if r and not self.closed:
                try:
                    data = self.sock.recv(262144)
                except BlockingIOError:
                    continue
                except OSError as e:
                    self._closed(f"recv: {e.strerror}")
                    continue
                if not data:
                    self._closed("EOF")
                else:
                    self.feed(data)

    def send_failed(self, e):
        """The server is gone for writing (it closed, maybe after a GOAWAY still to be read):
        drop what we meant to send and read what is left."""
        self.out.clear()
        self.write_failed = f"send: {e.strerror}"
        self.pump(timeout=0.5, until=lambda: self.closed)
        if not self.closed:
            self._closed(self.write_failed)

    def drain(self, timeout):
        """Reads a flood's answers looking at frame headers only (parsing each would take
        seconds): until EOF or the time is up; a GOAWAY is taken in full."""
        deadline = time.monotonic() + timeout
        buf = self.inbuf
        while not self.closed and time.monotonic() < deadline:
            r, _, _ = select.select([self.sock], [], [], 0.05)
            if not r:
                continue
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError as e:
                self._closed(f"recv: {e.strerror}")
                break
            if not data:
                self._closed("EOF")
                break
            buf += data
            off = 0
            while len(buf) - off >= 9:
                n = int.from_bytes(buf[off:off + 3], "big")
                if len(buf) - off < 9 + n:
                    break
                if buf[off + 3] == GOAWAY:
                    self.on_frame(bytes(buf[off:off + 9]), bytes(buf[off + 9:off + 9 + n]))
                self.drained += 1
                off += 9 + n
            del buf[:off]
        self.recv_log.append(f"({self.drained} frames drained, headers only)")

    def _closed(self, how):
        if not self.closed:
            self.closed = True
            self.close_how = how
            self.eof_at = time.monotonic()

    def feed(self, data):
        self.inbuf += data
        if self.http1 is None and len(self.inbuf) >= 5 and self.inbuf[:5] == b"HTTP/":
            self.http1 = bytearray()
        if self.http1 is not None:
            self.http1 += self.inbuf
            self.inbuf.clear()
            return
        while len(self.inbuf) >= 9:
            n = int.from_bytes(self.inbuf[:3], "big")
            if len(self.inbuf) < 9 + n:
                break
            head, payload = bytes(self.inbuf[:9]), bytes(self.inbuf[9:9 + n])
            del self.inbuf[:9 + n]
            self.on_frame(head, payload)
        self.after_read()

    def on_frame(self, head, payload):
        ftype, flags, sid = head[3], head[4], int.from_bytes(head[5:9], "big") & MAX_WINDOW
        if len(self.recv_log) < 4000:
            self.recv_log.append(summarize(ftype, flags, sid, payload))
        if self.block is not None and ftype != CONTINUATION:
            self.bad.append(f"{FRAME_NAMES[ftype] if ftype < 10 else ftype} inside a header block")
        try:
            f, _ = Frame.parse_frame_header(memoryview(head))
            f.parse_body(memoryview(payload))
        except Exception as e:  # the server sent a frame hyperframe finds invalid
            self.bad.append(f"invalid {summarize(ftype, flags, sid, payload)}: {e}")
            return
        if isinstance(f, SettingsFrame):
            if "ACK" in f.flags:
                self.settings_acks += 1
                return
            self.settings_seen += 1
            for k, v in f.settings.items():
                self.server_settings[k] = v
                if k == S_INITIAL_WINDOW_SIZE:
                    for s in self.send_win:
                        self.send_win[s] += v - self.peer_initial
                    self.peer_initial = v
                elif k == S_MAX_FRAME_SIZE:
                    self.peer_max_frame = v
            if self.ack_settings:
                self.out += f_settings(ack=True)
        elif isinstance(f, PingFrame):
            if "ACK" in f.flags:
                self.ping_acks.append(f.opaque_data)
            else:
                self.pings += 1
        elif isinstance(f, GoAwayFrame):
            self.goaway = (f.last_stream_id, f.error_code, f.additional_data)
            self.goaway_at = time.monotonic()
        elif isinstance(f, RstStreamFrame):
            self.rst[sid] = f.error_code
        elif isinstance(f, WindowUpdateFrame):
            if sid == 0:
                self.send_conn += f.window_increment
            else:
                self.send_win[sid] = self.send_win.get(sid, self.peer_initial) + \
                    f.window_increment
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            if isinstance(f, HeadersFrame):
                self.block = (sid, [f.data], "END_STREAM" in f.flags)
            elif self.block is None or self.block[0] != sid:
                self.bad.append(f"CONTINUATION on stream {sid} without its HEADERS")
                return
            else:
                self.block[1].append(f.data)
            if "END_HEADERS" in f.flags:
                bsid, parts, end = self.block
                self.block = None
                try:
                    hdrs = self.dec.decode(b"".join(parts), raw=True)
                except Exception as e:
                    self.bad.append(f"header block on stream {bsid} does not decode: {e!r}")
                    return
                st = self.stream(bsid)
                status = [v for k, v in hdrs if k == b":status"]
                if st.status is None or (st.status < 200 and status):
                    st.status = int(status[0]) if status else -1
                    st.headers = hdrs
                else:
                    st.trailers = hdrs
                if end:
                    st.ended = True
        elif isinstance(f, DataFrame):
            st = self.stream(sid)
            st.body += f.data
            n = f.flow_controlled_length
            st.received += n
            self.conn_received += n
            if st.received > st.granted:
                self.bad.append(f"stream {sid}: the server sent {st.received} bytes, "
                                f"over the {st.granted} our windows allowed")
            if self.conn_received > self.conn_granted:
                self.bad.append(f"connection: the server sent {self.conn_received} bytes, "
                                f"over the {self.conn_granted} our window allowed")
            if "END_STREAM" in f.flags:
                st.ended = True
            if n and self.auto_wu:
                if sid not in self.hold and not st.ended:
                    self.pending_wu[sid] = self.pending_wu.get(sid, 0) + n
                if not self.hold_conn:
                    self.pending_wu[0] = self.pending_wu.get(0, 0) + n
        elif isinstance(f, PushPromiseFrame):
            self.bad.append(f"PUSH_PROMISE on stream {sid}, though we disabled push")

    def after_read(self):
        for sid, n in self.pending_wu.items():
            self.grant(sid, n, send=False)
        self.pending_wu.clear()

    def grant(self, sid, n, send=True):
        """Gives the server n more bytes of window on a stream (and not the connection), or on
        the connection (sid 0)."""
        if sid == 0:
            self.conn_granted += n
        else:
            self.stream(sid).granted += n
        frame = f_wu(sid, n)
        if send:
            self.send(frame)
        else:
            self.out += frame

    def release(self, sid):
        """Stops holding a stream: returns the window of all it has received."""
        self.hold.discard(sid)
        st = self.streams[sid]
        owed = st.received - (st.granted - self.our_initial)
        if owed > 0 and not st.ended:
            self.grant(sid, owed)

    def ping_ok(self, timeout=REACT):
        """Whether the connection still answers a PING."""
        if self.closed:
            return False
        opaque = os.urandom(8)
        try:
            self.send(f_ping(opaque))
        except Fail:
            return False
        return self.pump(lambda: opaque in self.ping_acks, timeout)

    def handshake(self):
        if not self.pump(lambda: self.settings_seen and self.settings_acks, REACT):
            raise Fail("no SETTINGS exchange", self)

    def wait_streams(self, sids, timeout=REACT):
        return self.pump(lambda: all(self.done(s) for s in sids), timeout)

    def done(self, sid):
        st = self.streams.get(sid)
        return sid in self.rst or (st is not None and st.ended)

    def trace(self, n=14):
        def tail(log):
            if len(log) <= n:
                return log
            return log[:3] + [f"... {len(log) - n} more ..."] + log[-(n - 3):]
        s = "\n      sent: " + "\n            ".join(tail(self.sent_log))
        s += "\n      got:  " + "\n            ".join(tail(self.recv_log) or ["nothing"])
        if self.http1 is not None:
            s += f"\n      HTTP/1: {bytes(self.http1[:300])!r}"
        s += f"\n      connection: {self.close_how or 'open'}"
        return s

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# --- reactions -----------------------------------------------------------------------------------

def http1_status(c):
    if not c.http1:
        return None
    line = bytes(c.http1).split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else -1


def outcome(c, sid=None, timeout=REACT, probe=True):
    """Reads what the server does about what was just sent, as tokens (see the top)."""
    def finished():
        if c.closed:
            return True
        if c.goaway is not None and c.goaway[1] != 0:
            return False  # an error GOAWAY: wait for the close too
        if c.http1 is not None and b"\r\n\r\n" in c.http1:
            return True
        return sid is not None and c.done(sid)
    c.pump(finished, timeout)
    if not c.closed:
        if c.goaway is not None and c.goaway[1] != 0:
            c.pump(lambda: c.closed, CLOSE_BOUND)
        elif finished():  # a GOAWAY may follow a RST_STREAM or an answer
            c.pump(lambda: c.closed or c.goaway is not None, 0.05)
            if c.goaway is not None and c.goaway[1] != 0:
                c.pump(lambda: c.closed, CLOSE_BOUND)
    tokens = []
    if c.http1 is not None:
        tokens.append(f"HTTP1({http1_status(c)})")
    if c.goaway is not None:
        tokens.append(f"GOAWAY({errname(c.goaway[1])})")
    if sid is not None:
        if sid in c.rst:
            tokens.append(f"RST({errname(c.rst[sid])})")
        st = c.streams.get(sid)
        if st is not None and st.status is not None:
            tokens.append(f"STATUS({st.status})")
    if c.closed and c.goaway is None:
        tokens.append("CLOSE")
    if not tokens:
        tokens.append("IGNORED" if probe and c.ping_ok(1.0) else "STALLED")
    return tokens


def judge(t, c, tokens, allowed, eddy=None, what="", deviation=None):
    """Passes when a token matches one of the allowed patterns (eddy's under --strict); an
    error GOAWAY must also have been followed by the close. deviation: (patterns, why), what
    breaks a MUST of the RFC but which servers in use do (lenient parsing; nghttp2 forgetting
    closed streams): it passes without --strict, marked RFC DEVIATION. Taking a flood without
    any limit is never one of them."""
    def hit(patterns):
        return any(fnmatch.fnmatchcase(tok, p) for tok in tokens for p in patterns)
    want = eddy if t.strict and eddy else allowed
    detail = ", ".join(tokens)
    head = what + ": " if what else ""
    if c is not None and c.bad:
        raise Fail(f"{head}{detail}; the server broke the protocol: {'; '.join(c.bad[:3])}", c)
    note = ""
    if not hit(want):
        if not deviation or t.strict or not hit(deviation[0]):
            raise Fail(f"{head}got {detail}; want one of {' '.join(want)}", c)
        note = f" [RFC DEVIATION: wants {' '.join(want)}; {deviation[1]}]"
    elif not t.strict and eddy and not hit(eddy):
        note = f" [eddy: {' '.join(eddy)}]"
    if c is not None and c.goaway is not None and c.goaway[1] != 0:
        if not c.closed:
            raise Fail(f"{head}{detail}, but the connection was still open {CLOSE_BOUND} s "
                       "after", c)
        detail += f", closed {c.eof_at - c.goaway_at:.2f} s after"
    elif c is not None and c.closed:
        detail += f", closed {max(0.0, c.eof_at - c.last_sent_at):.2f} s after our last write"
    if c is not None and c.goaway is not None and c.goaway[2]:
        detail += f" ({bytes(c.goaway[2][:60]).decode('latin-1')!r})"
    return head + detail + note


# Reactions RFC 9113 calls for, as patterns.
CONN_PROTO = ["GOAWAY(PROTOCOL_ERROR)"]
STREAM_PROTO = ["RST(PROTOCOL_ERROR)", "GOAWAY(PROTOCOL_ERROR)"]
# A malformed request (8.1.1): a stream error PROTOCOL_ERROR, which the server may precede with
# a 4xx answer, or which it may treat as a connection error (5.4.1).
MALFORMED = ["RST(PROTOCOL_ERROR)", "STATUS(400)", "GOAWAY(PROTOCOL_ERROR)"]


def expect(t, c, allowed, eddy=None, sid=None, what="", timeout=REACT):
    return judge(t, c, outcome(c, sid, timeout), allowed, eddy, what)


def server_stat(pid):
    """(open descriptors, VmRSS KiB, CPU seconds) of a process, or None."""
    if not pid:
        return None
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return fds, rss, cpu
    except OSError:
        return None


# --- the well-behaved client (python3-h2) --------------------------------------------------------

def h2_requests(t, reqs, timeout=5.0):
    """Sends (method, path, body) requests on one fresh connection: [(status, body)]."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                               header_encoding=None))
    sock = socket.create_connection((t.host, t.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    deadline = time.monotonic() + timeout
    try:
        conn.initiate_connection()
        res = {}
        for method, path, body in reqs:
            sid = conn.get_next_available_stream_id()
            hdrs = t.req(method, path)
            if body is not None:
                hdrs.append(("content-length", str(len(body))))
            conn.send_headers(sid, hdrs, end_stream=body is None)
            if body is not None:
                conn.send_data(sid, body, end_stream=True)
            res[sid] = [None, bytearray(), False]
        sock.sendall(conn.data_to_send())
        while not all(r[2] for r in res.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no full answer in {timeout} s")
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed before answering")
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    res[ev.stream_id][0] = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.DataReceived):
                    res[ev.stream_id][1] += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    res[ev.stream_id][2] = True
                elif isinstance(ev, h2.events.StreamReset):
                    raise ConnectionError(f"stream {ev.stream_id} reset: {ev.error_code!r}")
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise ConnectionError(f"GOAWAY {ev.error_code!r}")
            sock.sendall(conn.data_to_send())
        conn.close_connection()
        sock.sendall(conn.data_to_send())
        return [(r[0], bytes(r[1])) for r in res.values()]
    finally:
        sock.close()


def health(t):
    """None when a fresh connection is served well, else why not. Retries connection failures
    for 5 s (the server may be pausing its accepts)."""
    body = t.rng.randbytes(3000)
    reqs = [("GET", "/", None)] + ([] if t.no_echo else [("POST", "/echo", body)])
    deadline = time.monotonic() + 5
    while True:
        try:
            got = h2_requests(t, reqs)
            break
        except (OSError, h2.exceptions.ProtocolError) as e:
            if time.monotonic() > deadline:
                return f"a fresh connection: {type(e).__name__}: {e}"
            time.sleep(0.2)
    if got[0] != (200, b"Hello, World!"):
        return f"GET / answered {got[0][0]} {got[0][1][:60]!r}"
    if not t.no_echo and got[1] != (200, body):
        return f"POST /echo answered {got[1][0]} with {len(got[1][1])} bytes, not its 3000"
    return None


# --- the cases -----------------------------------------------------------------------------------

CASES = {}


def case(group, needs=()):
    def reg(fn):
        name = fn.__name__[len("case_"):]
        CASES[name] = (group, needs, fn)
        return fn
    return reg


def settled(t, settings=None, **kw):
    """A connection past its SETTINGS exchange."""
    return Conn(t, settings=settings, **kw)


def bytes_path(n):
    assert n in BYTES_SIZES
    return f"/bytes/{n}"


_ALPHABETS = {}


def pattern(n):
    """What GET /bytes/N answers: the alphabet over and over (eddy-http-server's)."""
    if n not in _ALPHABETS:
        _ALPHABETS[n] = (b"abcdefghijklmnopqrstuvwxyz" * (n // 26 + 1))[:n]
    return _ALPHABETS[n]


def whole(c, sid, n, what="the download"):
    """Fails unless stream sid brought GET /bytes/n's answer, complete and exact."""
    st = c.streams.get(sid)
    if st is None or st.status != 200 or not st.ended:
        raise Fail(f"{what}: {outcome(c, sid, probe=False)}, {len(st.body) if st else 0} "
                   f"bytes of {n}", c)
    if bytes(st.body) != pattern(n):
        raise Fail(f"{what}: {len(st.body)} bytes, not the {n} expected"
                   + (" (same length, different bytes)" if len(st.body) == n else ""), c)
    return n


# Preface and negotiation. ALPN and "Upgrade: h2c over TLS" need TLS: not here.

@case("preface")
def case_bad_preface(t):
    """A preface with the wrong magic (RFC 9113 3.4: connection error PROTOCOL_ERROR; the
    server may not even send its GOAWAY). A server that also speaks HTTP/1.1 on the port may
    take "PRI * HTTP/2.0" for an HTTP/1 request and answer it with an error, then close.
    Seen: eddy: HTTP/1.1 505 (it reads "PRI * HTTP/2.0" as an HTTP/1 request); nghttpd and h2o:
    CLOSE."""
    c = Conn(t, preface=False)
    c.send(b"PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n" + f_settings())
    return expect(t, c, ["GOAWAY(PROTOCOL_ERROR)", "CLOSE", "HTTP1(4*)", "HTTP1(5*)"])


@case("preface")
def case_garbage_preface(t):
    """256 random bytes and a blank line instead of the preface: as bad_preface.
    Seen: eddy and h2o: HTTP/1.1 400; nghttpd: CLOSE."""
    c = Conn(t, preface=False)
    # Never "PRI " or a method; the blank line ends it for a server that reads HTTP/1.1 too.
    junk = bytes(b | 0x80 for b in t.rng.randbytes(256)) + b"\r\n\r\n"
    c.send(junk)
    return expect(t, c, ["GOAWAY(PROTOCOL_ERROR)", "CLOSE", "HTTP1(4*)", "HTTP1(5*)"])


@case("preface")
def case_partial_preface_close(t):
    """Half the preface, then our FIN: the server must close its side promptly."""
    c = Conn(t, preface=False)
    c.send(PREFACE[:12])
    c.sock.shutdown(socket.SHUT_WR)
    return expect(t, c, ["CLOSE", "GOAWAY(*)", "HTTP1(4*)"])


@case("preface")
def case_preface_then_ping(t):
    """The magic, then a PING where the SETTINGS frame must be (3.4: the preface includes the
    SETTINGS frame; an invalid preface is a connection error PROTOCOL_ERROR).
    Seen: eddy and nghttpd: GOAWAY; h2o 2.2.5 takes any first frame (IGNORED)."""
    c = Conn(t, preface=False)
    c.send(PREFACE + f_ping())
    return judge(t, c, outcome(c), ["GOAWAY(PROTOCOL_ERROR)", "CLOSE"],
                 deviation=(["IGNORED"], "h2o takes any frame first"))


@case("preface")
def case_http1_same_port(t):
    """An HTTP/1.1 request on the port. eddy speaks HTTP/1.1 there too (200); an h2c-only
    server refuses it (close, maybe with a GOAWAY or an HTTP/1 error).
    Seen: eddy and h2o: 200; nghttpd (h2c only): CLOSE."""
    c = Conn(t, preface=False)
    c.send(f"GET / HTTP/1.1\r\nHost: {t.authority}\r\nConnection: close\r\n\r\n".encode())
    toks = outcome(c)
    if "HTTP1(200)" in toks:
        c.pump(lambda: c.closed, REACT)
        if not bytes(c.http1).endswith(b"Hello, World!"):
            raise Fail(f"HTTP/1.1 GET / answered {bytes(c.http1)[-80:]!r}", c)
    return judge(t, c, toks, ["HTTP1(200)", "GOAWAY(PROTOCOL_ERROR)", "CLOSE", "HTTP1(4*)"],
                 ["HTTP1(200)"])


def upgrade(t, settings_b64, method="GET", path="/", body=b""):
    c = Conn(t, preface=False)
    req = (f"{method} {path} HTTP/1.1\r\nHost: {t.authority}\r\n"
           f"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
           f"HTTP2-Settings: {settings_b64}\r\n")
    if body:
        req += f"Content-Length: {len(body)}\r\n"
    c.send(req.encode() + b"\r\n" + body)
    c.pump(lambda: c.closed or (c.http1 is not None and b"\r\n\r\n" in c.http1), REACT)
    status = http1_status(c)
    if status != 101:
        return c, outcome(c)
    # Switched: what follows the 101's head is HTTP/2, the answer on stream 1.
    head, rest = bytes(c.http1).split(b"\r\n\r\n", 1)
    h = Conn(t, sock=c.sock, buf=b"", preface=False)
    c.sock = socket.socket()  # h owns the socket now
    h.open(1)
    h.send(PREFACE + f_settings(h.our))
    h.feed(rest)
    toks = ["HTTP1(101)"] + outcome(h, 1)
    h.http1 = None
    return h, toks


@case("preface")
def case_upgrade_valid(t):
    """A well-formed "Upgrade: h2c" GET: 101 then the answer on stream 1 over HTTP/2 (eddy), or
    the upgrade ignored (HTTP/1.1 200; RFC 9113 deprecates it). nghttpd: closes (h2c by prior
    knowledge only).
    Seen: eddy and h2o: 101; nghttpd: CLOSE."""
    c, toks = upgrade(t, base64.urlsafe_b64encode(b"\0\2\0\0\0\0").decode().rstrip("="))
    res = judge(t, c, toks, ["HTTP1(200)", "HTTP1(101)", "CLOSE"], ["HTTP1(101)"])
    if "HTTP1(101)" in toks:
        st = c.streams.get(1)
        if st is None or st.status != 200 or bytes(st.body) != b"Hello, World!":
            raise Fail(f"after the 101, stream 1: {st and st.status} {st and bytes(st.body)!r}", c)
    return res


@case("preface")
def case_upgrade_bad_base64(t):
    """Upgrade: h2c with an HTTP2-Settings that is not base64url: no 101 (RFC 7540 3.2.1); an
    HTTP/1.1 answer (the upgrade ignored, or 400) or a close. nghttpd and h2o: see the run.
    Seen: eddy: 200 (upgrade ignored); h2o: 200 then close; nghttpd: CLOSE."""
    c, toks = upgrade(t, "!!not*base64!!")
    return judge(t, c, toks, ["HTTP1(200)", "HTTP1(4*)", "CLOSE"])


@case("preface")
def case_upgrade_bad_length(t):
    """HTTP2-Settings of 5 bytes (not a whole number of 6-byte entries): as above.
    Seen: As upgrade_bad_base64."""
    c, toks = upgrade(t, base64.urlsafe_b64encode(b"\0\2\0\0\0").decode().rstrip("="))
    return judge(t, c, toks, ["HTTP1(200)", "HTTP1(4*)", "CLOSE"])


@case("preface")
def case_upgrade_with_body(t):
    """Upgrade: h2c on a POST with a body: upgraded after the body (the answer on stream 1) or
    not upgraded (an HTTP/1.1 answer), or refused.
    Seen: eddy: 200 (no upgrade with a body); h2o: 101 and the echo; nghttpd: CLOSE."""
    body = b"hello"
    c, toks = upgrade(t, base64.urlsafe_b64encode(b"\0\2\0\0\0\0").decode().rstrip("="),
                      "POST", "/echo", body)
    res = judge(t, c, toks, ["HTTP1(200)", "HTTP1(4*)", "HTTP1(101)", "CLOSE"])
    if "HTTP1(101)" in toks and not t.no_echo:
        st = c.streams.get(1)
        if st is None or st.status != 200 or bytes(st.body) != body:
            raise Fail(f"after the 101, stream 1: {st and st.status} {st and bytes(st.body)!r}", c)
    return res


# SETTINGS

def flood(t, data, what, allowed, eddy=None):
    """Sends a flood without reading (with a small receive buffer, so that the server's
    answers back up at once), checks that the server serves others meanwhile, then reads what
    it did: CLOSE or GOAWAY (it cut the flooder off), BACKPRESSURE (it stopped reading us), or
    UNBOUNDED: it read all of it while its answers could not go out, so it queued them
    (some 10 MB sent: more than the kernel's socket buffers, 4 MiB at most here)."""
    c = settled(t, rcvbuf=4096)
    before = server_stat(t.pid)
    sent = c.blast(data, timeout=8.0)
    why = health(t)
    if why:
        raise Fail(f"while a {what} flood was pending, the server did not serve: {why}", c)
    during = server_stat(t.pid)
    c.drain(REACT)
    toks = []
    if c.goaway is not None:
        toks.append(f"GOAWAY({errname(c.goaway[1])})")
    if c.closed and c.goaway is None:
        toks.append("CLOSE")
    if not toks:
        toks.append("BACKPRESSURE" if sent == "blocked" else "UNBOUNDED")
    extra = f"{len(data) >> 20} MiB {sent}"
    if before and during:
        extra += f", server RSS {during[1] - before[1]:+d} KiB, CPU {during[2] - before[2]:.2f} s"
    extra += f"; {c.drained} frames read back"
    try:
        return judge(t, c, toks, allowed, eddy) + f" ({extra})"
    except Fail as e:
        raise Fail(f"{e.args[0]}\n      ({extra})")


@case("settings")
def case_settings_flood(t):
    """SETTINGS frames never read (CVE-2019-9515): the server must not queue their ACKs
    without bound: nghttp2 drops the connection past 1000 queued (max_outbound_ack), or the
    server stops reading.
    Seen: eddy: GOAWAY ENHANCE_YOUR_CALM; nghttpd: CLOSE; h2o 2.2.5: UNBOUNDED, or BACKPRESSURE
    after queueing MBs (CVE-2019-9515, fixed in h2o 2.2.6)."""
    return flood(t, f_settings() * 1200000, "SETTINGS", ["CLOSE", "GOAWAY(*)", "BACKPRESSURE"])


@case("settings")
def case_settings_many_entries(t):
    """One SETTINGS frame of 40 entries (CVE-2020-11080): nghttp2 allows 32, then GOAWAY
    ENHANCE_YOUR_CALM; the RFC sets no limit, so accepting them (an ACK) passes too.
    Seen: h2o: ACK."""
    c = settled(t)
    payload = b"".join(struct.pack(">HI", 0x100 + i, i) for i in range(40))
    acks = c.settings_acks
    c.send(raw(SETTINGS, 0, 0, payload))
    c.pump(lambda: c.settings_acks > acks or c.goaway is not None or c.closed, REACT)
    toks = outcome(c) if c.goaway or c.closed else ["ACK"]
    return judge(t, c, toks, ["GOAWAY(ENHANCE_YOUR_CALM)", "GOAWAY(PROTOCOL_ERROR)", "CLOSE",
                              "ACK"], ["GOAWAY(ENHANCE_YOUR_CALM)"])


def bad_settings(t, entries_payload, allowed):
    c = settled(t)
    c.send(raw(SETTINGS, 0, 0, entries_payload))
    return expect(t, c, allowed)


@case("settings")
def case_settings_window_too_big(t):
    """INITIAL_WINDOW_SIZE 2^31 (6.5.2: connection error FLOW_CONTROL_ERROR)."""
    return bad_settings(t, struct.pack(">HI", S_INITIAL_WINDOW_SIZE, 2**31),
                        ["GOAWAY(FLOW_CONTROL_ERROR)"])


@case("settings")
def case_settings_frame_size_small(t):
    """MAX_FRAME_SIZE 16383 (6.5.2: connection error PROTOCOL_ERROR)."""
    return bad_settings(t, struct.pack(">HI", S_MAX_FRAME_SIZE, 16383), CONN_PROTO)


@case("settings")
def case_settings_frame_size_big(t):
    """MAX_FRAME_SIZE 2^24 (6.5.2: connection error PROTOCOL_ERROR)."""
    return bad_settings(t, struct.pack(">HI", S_MAX_FRAME_SIZE, 2**24), CONN_PROTO)


@case("settings")
def case_settings_enable_push_2(t):
    """ENABLE_PUSH 2 (6.5.2: connection error PROTOCOL_ERROR)."""
    return bad_settings(t, struct.pack(">HI", S_ENABLE_PUSH, 2), CONN_PROTO)


@case("settings")
def case_settings_bad_length(t):
    """A SETTINGS payload of 7 bytes (6.5: connection error FRAME_SIZE_ERROR)."""
    return bad_settings(t, struct.pack(">HI", S_ENABLE_PUSH, 0) + b"\0",
                        ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("settings")
def case_settings_ack_with_payload(t):
    """A SETTINGS ACK carrying an entry (6.5: connection error FRAME_SIZE_ERROR)."""
    c = settled(t)
    c.send(raw(SETTINGS, ACK, 0, struct.pack(">HI", S_ENABLE_PUSH, 0)))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("settings")
def case_settings_on_stream(t):
    """SETTINGS on stream 1 (6.5: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(SETTINGS, 0, 1, b""))
    return expect(t, c, CONN_PROTO)


@case("settings")
def case_settings_unknown_id(t):
    """An unknown setting (0x99) must be ignored (6.5.2): ACKed, and the connection serves."""
    c = settled(t)
    acks = c.settings_acks
    c.send(raw(SETTINGS, 0, 0, struct.pack(">HI", 0x99, 12345)))
    c.pump(lambda: c.settings_acks > acks or c.closed, REACT)
    sid = c.request()
    toks = outcome(c, sid)
    if c.settings_acks == acks:
        toks.append("NO-ACK")
    return judge(t, c, [" ".join(toks)], ["STATUS(200)"])


@case("settings")
def case_settings_huge_table_size(t):
    """HEADER_TABLE_SIZE 2^32-1: allowed, but the server's encoder should stay capped (eddy and
    nghttp2: 4096). We decode its answers with a 4096-byte table under --strict (hpack raises
    if the server announces more) and with the full size otherwise."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_HEADER_TABLE_SIZE: 2**32 - 1})
    c.dec.max_allowed_table_size = 4096 if t.strict else 2**32 - 1
    sids = [c.request(path="/", extra=[("x-n", str(i))]) for i in range(5)]
    c.wait_streams(sids)
    toks = [" ".join(outcome(c, s, probe=False)) for s in sids]
    return judge(t, c, [toks[-1]] if len(set(toks)) == 1 else toks, ["STATUS(200)"])


@case("settings")
def case_settings_window_negative(t):
    """A new INITIAL_WINDOW_SIZE makes an open stream's window negative (6.9.2): the server must
    send nothing more until WINDOW_UPDATEs bring it above zero, then finish the body."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 65535}, conn_window=2**24)
    n = 200000
    sid = c.sid()
    c.hold.add(sid)
    c.request(sid, path=bytes_path(n))
    c.pump(lambda: c.streams[sid].received >= 65535 or c.done(sid), REACT)
    got = c.streams[sid].received
    if got != 65535:
        raise Fail(f"before the SETTINGS: {got} bytes on the stream, not its 65535 window", c)
    acks = c.settings_acks
    c.send(f_settings({S_INITIAL_WINDOW_SIZE: 1000}))  # the window: 1000 - 65535 < 0
    c.pump(lambda: c.settings_acks > acks, REACT)
    st = c.streams[sid]
    st.granted += 1000 - 65535
    c.grant(sid, 64535 + 100)  # the window is now 100
    c.pump(lambda: st.received > got + 100 or c.closed, 0.5)
    if st.received > got + 100:
        raise Fail(f"sent {st.received - got} bytes into a window of 100", c)
    c.release(sid)
    c.grant(sid, n)
    c.wait_streams([sid], 5)
    res = judge(t, c, outcome(c, sid), ["STATUS(200)"])
    return res + f", body {whole(c, sid, n)} bytes exact"


@case("settings", needs=("settings_timeout",))
def case_settings_never_acked(t):
    """We never ACK the server's SETTINGS (6.5.3: it may end the connection with
    SETTINGS_TIMEOUT). Needs --settings-timeout S, the server's."""
    c = Conn(t, handshake=False, ack_settings=False)
    c.pump(lambda: c.settings_seen, REACT)
    toks = outcome(c, timeout=t.settings_timeout + REACT, probe=False)
    return judge(t, c, toks, ["GOAWAY(SETTINGS_TIMEOUT)", "CLOSE"], ["GOAWAY(SETTINGS_TIMEOUT)"])


# PING

@case("ping")
def case_ping_flood(t):
    """PINGs never read (CVE-2019-9512): as settings_flood.
    Seen: eddy: GOAWAY ENHANCE_YOUR_CALM; nghttpd: CLOSE; h2o 2.2.5: BACKPRESSURE or UNBOUNDED."""
    return flood(t, f_ping(b"floodflo") * 700000, "PING", ["CLOSE", "GOAWAY(*)", "BACKPRESSURE"])


@case("ping")
def case_ping_bad_length(t):
    """A PING of 7 bytes (6.7: connection error FRAME_SIZE_ERROR)."""
    c = settled(t)
    c.send(raw(PING, 0, 0, b"1234567"))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("ping")
def case_ping_on_stream(t):
    """A PING on stream 1 (6.7: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(PING, 0, 1, b"12345678"))
    return expect(t, c, CONN_PROTO)


@case("ping")
def case_ping_unsolicited_ack(t):
    """A PING ACK nobody asked for: ignored (6.7: never answered)."""
    c = settled(t)
    c.send(f_ping(b"stray-ac", ack=True))
    sid = c.request()
    return expect(t, c, ["STATUS(200)"], sid=sid)


@case("ping")
def case_ping_bdp_pattern(t):
    """gRPC's BDP probing: a PING with every burst of data, each ACK read before the next; 300
    of them while requests run must not be cut off (no GOAWAY, all ACKed)."""
    c = settled(t, conn_window=2**24)
    sids = []
    for i in range(300):
        opaque = struct.pack(">Q", i)
        c.send(f_ping(opaque))
        if i % 10 == 0:
            sids.append(c.request(path=bytes_path(10000)))
        if not c.pump(lambda: opaque in c.ping_acks, REACT):
            raise Fail(f"PING {i} not ACKed: {outcome(c)}", c)
    c.wait_streams(sids)
    bad = [s for s in sids if c.streams[s].status != 200 or c.streams[s].body != pattern(10000)]
    if bad or c.goaway or c.closed:
        raise Fail(f"{len(bad)} answers short; {outcome(c)}", c)
    return "300 PINGs ACKed, 30 answers whole"


# RST_STREAM

@case("rst")
def case_rapid_reset(t):
    """HEADERS + RST_STREAM(CANCEL) pairs at line rate (CVE-2023-44487): nghttp2's bucket
    (1000, then 33/s) ends it with a GOAWAY: nghttpd sends INTERNAL_ERROR; eddy's own bucket
    (eddy_h2_options_t reset_burst, reset_rate) ENHANCE_YOUR_CALM. A server without the limit
    survives it (SURVIVED; h2o 2.2.5).
    Seen: eddy: GOAWAY ENHANCE_YOUR_CALM; nghttpd: GOAWAY INTERNAL_ERROR; h2o 2.2.5: SURVIVED."""
    c = settled(t)
    before = server_stat(t.pid)
    block = static_block(t)  # no dynamic table: each pair is the same bytes
    pairs = 0
    for _ in range(30):
        chunk = b""
        for _ in range(100):
            sid = c.sid()
            chunk += f_headers(sid, block) + f_rst(sid, E["CANCEL"])
        c.send(chunk, log=pairs == 0)
        pairs += 100
        c.pump(timeout=0)
        if c.goaway is not None or c.closed:
            break
    c.sent_log.append(f"... {pairs} HEADERS + RST_STREAM pairs in all")
    toks = outcome(c, timeout=REACT, probe=False)
    if toks == ["STALLED"]:
        toks = ["SURVIVED"] if c.ping_ok() else ["STALLED"]
    after = server_stat(t.pid)
    cpu = f", server CPU {after[2] - before[2]:.2f} s" if before and after else ""
    # eddy_h2_options_t (reset_rate) says ENHANCE_YOUR_CALM; nghttp2's own limit INTERNAL_ERROR.
    return judge(t, c, toks, ["GOAWAY(ENHANCE_YOUR_CALM)", "GOAWAY(INTERNAL_ERROR)", "CLOSE",
                              "SURVIVED"], ["GOAWAY(ENHANCE_YOUR_CALM)"]) + \
        f" after {pairs} pairs{cpu}"


def open_upload(c, path="/echo"):
    """A POST whose body has not started: the stream stays open both ways."""
    return c.request(method="POST", path=path, end_stream=False)


@case("rst")
def case_wu_overflow_stream(t):
    """WINDOW_UPDATE pushing an open stream's send window past 2^31-1 (6.9.1: stream error
    FLOW_CONTROL_ERROR; a connection error is allowed too)."""
    c = settled(t)
    sid = open_upload(c)
    c.send(f_wu(sid, MAX_WINDOW))
    return expect(t, c, ["RST(FLOW_CONTROL_ERROR)", "GOAWAY(FLOW_CONTROL_ERROR)"], sid=sid)


@case("rst")
def case_data_half_closed(t):
    """DATA on a stream we already ended (half-closed remote; 5.1: stream error STREAM_CLOSED;
    nghttp2 makes it a connection error STREAM_CLOSED). The answer is held by our window so
    the stream is still there.
    Seen: eddy and nghttpd: GOAWAY STREAM_CLOSED; h2o: RST_STREAM STREAM_CLOSED."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 0})
    sid = c.request(path=bytes_path(1048576))
    c.pump(lambda: c.streams[sid].status is not None, 0.3)
    c.send(f_data(sid, b"late"))
    return expect(t, c, ["RST(STREAM_CLOSED)", "GOAWAY(STREAM_CLOSED)", "GOAWAY(PROTOCOL_ERROR)"],
                  sid=sid)


@case("rst")
def case_content_length_over(t):
    """content-length 10 and 20 bytes of DATA (8.1.1: malformed; stream error PROTOCOL_ERROR)."""
    c = settled(t)
    sid = c.request(method="POST", path="/echo", extra=[("content-length", "10")],
                    end_stream=False)
    c.send(f_data(sid, b"x" * 20, end_stream=True))
    return expect(t, c, MALFORMED + ["STATUS(413)"], ["RST(PROTOCOL_ERROR)", "STATUS(400)"],
                  sid=sid)


@case("rst")
def case_content_length_under(t):
    """content-length 10 and 5 bytes, then END_STREAM: malformed as above."""
    c = settled(t)
    sid = c.request(method="POST", path="/echo", extra=[("content-length", "10")],
                    end_stream=False)
    c.send(f_data(sid, b"x" * 5, end_stream=True))
    return expect(t, c, MALFORMED, ["RST(PROTOCOL_ERROR)", "STATUS(400)"], sid=sid)


@case("rst")
def case_made_you_reset(t):
    """MadeYouReset (CVE-2025-8671): 1000 streams, each opened and then sent an overflowing
    WINDOW_UPDATE, so that the server resets them itself. eddy counts the RSTs it sends and
    ends the connection (GOAWAY ENHANCE_YOUR_CALM, ~200 in 30 s); nghttp2 1.52 alone has no
    such limit (nghttpd: SURVIVED; h2o: see the run).
    Seen: eddy: GOAWAY after 200-odd; nghttpd and h2o: SURVIVED."""
    c = settled(t)
    block = static_block(t, b"POST", b"/echo")
    sent = 0
    for _ in range(10):
        chunk = b""
        for _ in range(100):
            sid = c.sid()
            c.open(sid)
            chunk += f_headers(sid, block, end_stream=False) + f_wu(sid, MAX_WINDOW)
        c.send(chunk, log=sent == 0)
        sent += 100
        c.pump(timeout=0.02)
        if c.goaway is not None or c.closed:
            break
    c.sent_log.append(f"... {sent} streams in all")
    c.pump(lambda: c.closed or len(c.rst) >= sent, REACT)
    toks = outcome(c, timeout=0.5, probe=False)
    if toks == ["STALLED"]:
        toks = ["SURVIVED"] if c.ping_ok() else ["STALLED"]
    return judge(t, c, toks, ["GOAWAY(ENHANCE_YOUR_CALM)", "CLOSE", "SURVIVED"],
                 ["GOAWAY(ENHANCE_YOUR_CALM)"]) + f" ({len(c.rst)} RST_STREAMs for {sent})"


@case("rst")
def case_reset_flood_no_read(t):
    """600000 invalid requests (an uppercase field name) that each draw a RST_STREAM, never
    read (CVE-2019-9514): as settings_flood. eddy: GOAWAY ENHANCE_YOUR_CALM from its count of
    the RSTs it sends.
    Seen: eddy, nghttpd and h2o: GOAWAY PROTOCOL_ERROR, "max concurrent streams exceeded": the
    reset streams count until their RST_STREAMs are out."""
    block = static_block(t) + hpack_literal(b"X-Upper", b"1")
    head = struct.pack(">I", len(block))[1:] + bytes([HEADERS, END_STREAM | END_HEADERS])
    data = b"".join(head + struct.pack(">I", 2 * i + 1) + block for i in range(600000))
    # nghttp2 counts a reset stream until its RST_STREAM is out: past 100 unsent, "max
    # concurrent streams exceeded" (GOAWAY PROTOCOL_ERROR) may come before eddy's own limit.
    return flood(t, data, "reset", ["GOAWAY(*)", "CLOSE", "BACKPRESSURE"],
                 ["GOAWAY(ENHANCE_YOUR_CALM)", "GOAWAY(PROTOCOL_ERROR)"])


@case("rst")
def case_rst_idle_stream(t):
    """RST_STREAM on a stream never opened (6.4: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(f_rst(5, E["CANCEL"]))
    return expect(t, c, CONN_PROTO)


@case("rst")
def case_rst_stream_zero(t):
    """RST_STREAM on stream 0 (6.4: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(RST_STREAM, 0, 0, struct.pack(">I", E["CANCEL"])))
    return expect(t, c, CONN_PROTO)


@case("rst")
def case_rst_bad_length(t):
    """RST_STREAM of 3 bytes on an open stream (6.4: connection error FRAME_SIZE_ERROR)."""
    c = settled(t)
    sid = open_upload(c)
    c.send(raw(RST_STREAM, 0, sid, b"\0\0\x08"))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("rst")
def case_rst_race(t):
    """200 streams reset at random moments of their answers (large downloads, half-sent
    uploads), racing the server's writes: the connection must go on (a last GET / answered)."""
    c = settled(t, conn_window=2**24)
    for i in range(200):
        if i % 2:
            sid = c.request(path=bytes_path(t.rng.choice([10000, 100000, 200000])))
        else:
            sid = open_upload(c)
            c.send(f_data(sid, t.rng.randbytes(t.rng.randrange(1, 5000))))
        c.pump(timeout=t.rng.random() * 0.003)
        c.send(f_rst(sid, E["CANCEL"]), log=i < 4)
        if c.closed or c.goaway:
            break
    sid = c.request()
    return expect(t, c, ["STATUS(200)"], sid=sid)


@case("rst")
def case_headers_after_rst(t):
    """HEADERS again on a stream we reset (5.1: stream error STREAM_CLOSED; 5.1.1: a stream id
    not above the last is a connection error PROTOCOL_ERROR).
    Seen: nghttpd and h2o: GOAWAY STREAM_CLOSED; eddy: IGNORED."""
    c = settled(t)
    sid = open_upload(c)
    c.send(f_rst(sid, E["CANCEL"]))
    c.pump(timeout=0.1)
    c.request(sid)
    return judge(t, c, outcome(c, sid, timeout=1.0),
                 ["RST(STREAM_CLOSED)", "GOAWAY(STREAM_CLOSED)", "GOAWAY(PROTOCOL_ERROR)"],
                 deviation=(["IGNORED"], "nghttp2 with no_closed_streams forgets the stream"))


# HEADERS, CONTINUATION, HPACK

@case("headers")
def case_continuation_flood(t):
    """A header block never ended: HEADERS then 20000 empty CONTINUATION frames (CVE-2024-27316,
    CVE-2024-28182). nghttp2 1.52 with the backport stops after 8 (close or GOAWAY); without a
    limit a server only wastes CPU (the RFC sets none), reported as IGNORED/STALLED.
    Seen: eddy: GOAWAY PROTOCOL_ERROR; nghttpd: CLOSE; h2o 2.2.5: STALLED (no limit)."""
    c = settled(t)
    block = c.enc.encode(t.req())
    sid = c.sid()
    c.open(sid)
    c.send(f_headers(sid, block[:3], end_headers=False))
    frames = f_continuation(sid, b"", end_headers=False) * 20000
    c.send(frames[:9 * 4])
    c.blast(frames, timeout=4.0)
    toks = outcome(c, sid, probe=False)
    return judge(t, c, toks, ["GOAWAY(*)", "CLOSE", "STALLED"],
                 ["GOAWAY(ENHANCE_YOUR_CALM)", "GOAWAY(PROTOCOL_ERROR)", "CLOSE"])


@case("headers")
def case_continuation_nine(t):
    """A valid block in HEADERS + 9 CONTINUATIONs (one more than nghttp2's max_continuations
    8): eddy and nghttpd end the connection; a server without that limit answers.
    Seen: eddy: GOAWAY PROTOCOL_ERROR; nghttpd: CLOSE; h2o: 200."""
    c = settled(t)
    sid = c.sid()
    c.headers_split(sid, c.enc.encode(t.req(extra=[("x-pad", "p" * 200)])), 10)
    return expect(t, c, ["GOAWAY(*)", "CLOSE", "STATUS(200)"],
                  ["GOAWAY(ENHANCE_YOUR_CALM)", "GOAWAY(PROTOCOL_ERROR)", "CLOSE"], sid=sid)


@case("headers")
def case_continuation_eight(t):
    """A valid block in HEADERS + 8 CONTINUATIONs, within every limit: answered."""
    c = settled(t)
    sid = c.sid()
    c.headers_split(sid, c.enc.encode(t.req(extra=[("x-pad", "p" * 200)])), 9)
    return expect(t, c, ["STATUS(200)"], sid=sid)


@case("headers")
def case_continuation_interleaved(t):
    """A PING inside a header block (6.10: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    sid = c.sid()
    c.open(sid)
    block = c.enc.encode(t.req())
    c.send(f_headers(sid, block[:2], end_headers=False), f_ping(),
           f_continuation(sid, block[2:]))
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_continuation_other_stream(t):
    """A header block continued on another stream (6.10: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    block = c.enc.encode(t.req())
    c.send(f_headers(1, block[:2], end_headers=False), f_continuation(3, block[2:]))
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_continuation_orphan(t):
    """A CONTINUATION with no HEADERS before it (6.10: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(f_continuation(1, c.enc.encode(t.req())))
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_header_list_too_large(t):
    """A 20000-byte field (the list past eddy's 16384 SETTINGS_MAX_HEADER_LIST_SIZE), in HEADERS
    + CONTINUATION: eddy answers 431 or resets the stream. The advertised size is advisory
    (RFC 9113 6.5.2), so a server with a higher limit may answer 200.
    Seen: eddy: 431; nghttpd and h2o: 200."""
    c = settled(t)
    sid = c.sid()
    big = t.rng.randbytes(10000).hex()
    c.headers_split(sid, c.enc.encode(t.req(extra=[("x-big", big)]), huffman=False), 2)
    return expect(t, c, ["STATUS(431)", "RST(*)", "STATUS(200)", "GOAWAY(ENHANCE_YOUR_CALM)"],
                  ["STATUS(431)"], sid=sid)


@case("headers")
def case_header_count(t):
    """150 small fields (eddy's cap: 100): 431 or a reset; 200 from a server without a cap.
    Seen: eddy: 431; nghttpd and h2o: 200."""
    c = settled(t)
    sid = c.request(extra=[(f"x-h{i}", "v") for i in range(150)])
    return expect(t, c, ["STATUS(431)", "RST(*)", "STATUS(200)", "GOAWAY(ENHANCE_YOUR_CALM)"],
                  ["STATUS(431)"], sid=sid)


@case("headers")
def case_hpack_bomb(t):
    """A 4000-byte field put in the dynamic table, then 1000 one-byte references to it: 5 KiB on
    the wire, 4 MB of header list. eddy: 431 or a reset (its list limit); a server without one
    may answer (COMPRESSION_ERROR and ENHANCE_YOUR_CALM GOAWAYs pass too).
    Seen: eddy: 431; nghttpd: RST_STREAM INTERNAL_ERROR; h2o: 200."""
    c = settled(t)
    block = static_block(t) + hpack_literal(b"x-bomb", b"a" * 4000, 0x40) + b"\xbe" * 1000
    sid = c.sid()
    c.open(sid)
    c.send(f_headers(sid, block))
    return expect(t, c, ["STATUS(431)", "RST(*)", "STATUS(200)", "GOAWAY(COMPRESSION_ERROR)",
                         "GOAWAY(ENHANCE_YOUR_CALM)", "CLOSE"],
                  ["STATUS(431)", "RST(*)"], sid=sid)


def bad_block(t, block):
    c = settled(t)
    sid = c.sid()
    c.open(sid)
    c.send(f_headers(sid, block))
    return expect(t, c, ["GOAWAY(COMPRESSION_ERROR)"], sid=sid)


@case("headers")
def case_hpack_table_update_too_big(t):
    """A dynamic table size update to 8192, above the 4096 the server allows (RFC 7541 6.3:
    a decoding error, COMPRESSION_ERROR)."""
    return bad_block(t, hpack_int(8192, 5, 0x20) + static_block(t))


@case("headers")
def case_hpack_bad_huffman_padding(t):
    """A Huffman string whose padding is not the EOS prefix ('0' then 3 zero bits; RFC 7541
    5.2: a decoding error)."""
    return bad_block(t, static_block(t) + b"\x00\x01x\x81\x00")


@case("headers")
def case_hpack_huffman_eos(t):
    """A Huffman string holding the EOS symbol (30 one bits; RFC 7541 5.2)."""
    return bad_block(t, static_block(t) + b"\x00\x01x\x84\xff\xff\xff\xff")


@case("headers")
def case_hpack_integer_overflow(t):
    """An index whose HPACK integer runs to 2^70 (RFC 7541 5.1: implementations must bound
    it)."""
    return bad_block(t, static_block(t) + b"\xff" + b"\xff" * 9 + b"\x7f")


@case("headers")
def case_hpack_bad_index(t):
    """Indexed fields 0 and 70 (an empty dynamic table: RFC 7541 2.3.3, 6.1)."""
    return bad_block(t, static_block(t) + b"\xc6")


@case("headers")
def case_hpack_index_zero(t):
    """Indexed field 0 (RFC 7541 6.1: a decoding error)."""
    return bad_block(t, static_block(t) + b"\x80")


@case("headers")
def case_zero_length_names(t):
    """1000 fields with empty names and values (CVE-2019-9516; an empty name is malformed):
    a reset, 400, 431, or a GOAWAY; nothing must be kept.
    Seen: eddy and nghttpd: RST_STREAM PROTOCOL_ERROR; h2o: 200."""
    c = settled(t)
    sid = c.sid()
    c.open(sid)
    c.send(f_headers(sid, static_block(t) + b"\x00\x00\x00" * 1000))
    return judge(t, c, outcome(c, sid),
                 MALFORMED + ["RST(*)", "STATUS(431)", "GOAWAY(ENHANCE_YOUR_CALM)"],
                 deviation=(["STATUS(*)"], "h2o 2.2.5 takes empty names"))


def malformed(t, hdrs, raw_block=None):
    c = settled(t)
    sid = c.sid()
    c.open(sid)
    c.send(f_headers(sid, raw_block if raw_block is not None else c.enc.encode(hdrs)))
    # h2o 2.2.5 answers an empty :path and values with leading or trailing whitespace.
    return judge(t, c, outcome(c, sid), MALFORMED, ["RST(PROTOCOL_ERROR)", "STATUS(400)"],
                 deviation=(["STATUS(*)"], "answered as if well-formed"))


def pseudo(t, method="GET", path="/"):
    return [(":method", method), (":scheme", "http"), (":authority", t.authority),
            (":path", path)]


MALFORMED_REQUESTS = {
    # name: (what RFC 9113 says, header list builder)
    "uppercase_name": ("8.2.1: names are lowercase", lambda t: pseudo(t) + [("X-Upper", "1")]),
    "pseudo_after_regular": ("8.3: pseudo-headers first",
                             lambda t: pseudo(t)[:2] + [("x-a", "1")] + pseudo(t)[2:]),
    "duplicate_path": ("8.3.1: exactly one :path", lambda t: pseudo(t) + [(":path", "/x")]),
    "missing_method": ("8.3.1", lambda t: pseudo(t)[1:]),
    "missing_path": ("8.3.1", lambda t: pseudo(t)[:3]),
    "missing_scheme": ("8.3.1", lambda t: [h for h in pseudo(t) if h[0] != ":scheme"]),
    "empty_path": ("8.3.1: :path must not be empty", lambda t: pseudo(t, path="")),
    "unknown_pseudo": ("8.3: no other pseudo-headers", lambda t: pseudo(t) + [(":foo", "1")]),
    "status_in_request": ("8.3: :status is a response's",
                          lambda t: pseudo(t) + [(":status", "200")]),
    "connection_header": ("8.2.2", lambda t: pseudo(t) + [("connection", "keep-alive")]),
    "transfer_encoding": ("8.2.2", lambda t: pseudo(t) + [("transfer-encoding", "chunked")]),
    "upgrade_header": ("8.2.2", lambda t: pseudo(t) + [("upgrade", "h2c")]),
    "te_gzip": ("8.2.2: te may only be 'trailers'", lambda t: pseudo(t) + [("te", "gzip")]),
    "cr_in_value": ("8.2.1", lambda t: pseudo(t) + [("x-a", b"a\rb")]),
    "lf_in_value": ("8.2.1", lambda t: pseudo(t) + [("x-a", b"a\nb")]),
    "nul_in_value": ("8.2.1", lambda t: pseudo(t) + [("x-a", b"a\0b")]),
    "leading_space": ("8.2.1: no leading or trailing whitespace",
                      lambda t: pseudo(t) + [("x-a", " v")]),
    "trailing_tab": ("8.2.1", lambda t: pseudo(t) + [("x-a", "v\t")]),
    "space_in_name": ("8.2.1", lambda t: pseudo(t) + [("x a", "1")]),
    "colon_in_name": ("8.2.1", lambda t: pseudo(t) + [("x:a", "1")]),
}


def _malformed_case(name, why, build):
    def fn(t):
        return malformed(t, build(t))
    fn.__name__ = f"case_malformed_{name}"
    fn.__doc__ = (f"A request with {name.replace('_', ' ')} (RFC 9113 {why}): malformed, a "
                  f"stream error PROTOCOL_ERROR, or 400, or a connection error.")
    case("headers")(fn)


for _n, (_why, _build) in MALFORMED_REQUESTS.items():
    _malformed_case(_n, _why, _build)


@case("headers")
def case_even_stream_id(t):
    """HEADERS on stream 2, a server's id (5.1.1: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.request(2)
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_headers_stream_zero(t):
    """HEADERS on stream 0 (6.2: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(HEADERS, END_STREAM | END_HEADERS, 0, static_block(t)))
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_decreasing_stream_id(t):
    """Stream 5, then stream 3 (5.1.1: connection error PROTOCOL_ERROR; nghttp2 may treat 3 as
    closed: STREAM_CLOSED).
    Seen: eddy and nghttpd: IGNORED; h2o: GOAWAY STREAM_CLOSED."""
    c = settled(t)
    c.request(5)
    c.wait_streams([5])
    c.request(3)
    return judge(t, c, outcome(c, 3, timeout=1.0),
                 ["GOAWAY(PROTOCOL_ERROR)", "GOAWAY(STREAM_CLOSED)"],
                 deviation=(["IGNORED"], "nghttp2 ignores HEADERS on a lower id it no longer "
                            "remembers (nghttpd too)"))


@case("headers")
def case_trailers_without_end_stream(t):
    """A second HEADERS (trailers) without END_STREAM (8.1: malformed, stream error
    PROTOCOL_ERROR).
    Seen: h2o: GOAWAY PROTOCOL_ERROR."""
    c = settled(t)
    sid = open_upload(c)
    c.send(f_data(sid, b"abc"), f_headers(sid, c.enc.encode([("x-trailer", "1")]),
                                          end_stream=False))
    return expect(t, c, STREAM_PROTO + ["STATUS(400)"], sid=sid)


@case("headers")
def case_second_headers_with_pseudo(t):
    """A second HEADERS with pseudo-headers, as a trailer section (8.1: malformed).
    Seen: h2o: GOAWAY PROTOCOL_ERROR."""
    c = settled(t)
    sid = open_upload(c)
    c.send(f_data(sid, b"abc"), f_headers(sid, c.enc.encode(t.req("POST", "/echo"))))
    return expect(t, c, STREAM_PROTO + ["STATUS(400)"], sid=sid)


@case("headers")
def case_push_promise_from_client(t):
    """PUSH_PROMISE from a client (8.4: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    sid = open_upload(c)
    f = PushPromiseFrame(sid, promised_stream_id=2, data=c.enc.encode(t.req()))
    f.flags.add("END_HEADERS")
    c.send(f.serialize())
    return expect(t, c, CONN_PROTO)


@case("headers")
def case_concurrent_100(t):
    """100 streams at once (the limit), all answered in full."""
    c = settled(t, conn_window=2**24)
    sids = [c.sid() for _ in range(100)]
    for s in sids:
        c.open(s)
    c.send(*(f_headers(s, c.enc.encode(t.req("GET", bytes_path(10000)))) for s in sids))
    c.wait_streams(sids, 10)
    bad = [(s, c.streams[s].status, len(c.streams[s].body), c.rst.get(s)) for s in sids
           if c.streams[s].status != 200 or c.streams[s].body != pattern(10000)]
    if bad or c.closed:
        raise Fail(f"{len(bad)} of 100 not whole, e.g. {bad[:3]}; {c.close_how}", c)
    return "100 answers of 10000 bytes"


@case("headers")
def case_concurrent_exceeded(t):
    """Opens as many streams as the server's MAX_CONCURRENT_STREAMS, then one more: that one is
    refused (5.1.2: stream error REFUSED_STREAM or PROTOCOL_ERROR); then all the others
    complete.
    Seen: eddy and nghttpd: GOAWAY PROTOCOL_ERROR; h2o: RST_STREAM REFUSED_STREAM."""
    c = settled(t)
    limit = c.server_settings.get(S_MAX_CONCURRENT_STREAMS)
    if limit is None or limit > 1000:
        if t.strict:
            raise Fail(f"MAX_CONCURRENT_STREAMS {limit}, not 100", c)
        return f"SKIP: MAX_CONCURRENT_STREAMS {limit}"
    sids = [c.sid() for _ in range(limit)]
    block = static_block(t, b"POST", b"/echo")
    for s in sids:
        c.open(s)
    c.send(*(f_headers(s, block, end_stream=False) for s in sids), log=False)
    extra = c.request()
    # 5.4.1 lets the server make this stream error a connection error: nghttp2 does (GOAWAY
    # PROTOCOL_ERROR "max concurrent streams exceeded"), and the others die with it.
    # eddy's eddy_h2_options_t says REFUSED_STREAM.
    res = judge(t, c, outcome(c, extra, probe=False),
                ["RST(REFUSED_STREAM)", "RST(PROTOCOL_ERROR)", "GOAWAY(PROTOCOL_ERROR)"],
                ["RST(REFUSED_STREAM)"], what=f"stream {limit + 1}")
    if c.closed:
        return res + f"; the {limit} others ended with the connection"
    c.send(*(f_data(s, b"x", end_stream=True) for s in sids), log=False)
    c.wait_streams(sids, 10)
    bad = [s for s in sids if not c.streams[s].ended or s in c.rst]
    if bad or c.closed:
        raise Fail(f"{len(bad)} of the {limit} not answered; {c.close_how}", c)
    if not t.no_echo:
        bad = [s for s in sids if bytes(c.streams[s].body) != b"x"]
        if bad:
            raise Fail(f"{len(bad)} echoes wrong", c)
    return res + f"; the {limit} others answered"


@case("headers")
def case_concurrent_before_ack(t):
    """101 streams sent with the preface, before the server's SETTINGS could be acknowledged:
    the limit is not in force yet, so the server may accept them all, or refuse those past it
    (REFUSED_STREAM, what RFC 9113 5.1.2 suggests; nghttp2 does). All it accepts complete."""
    c = Conn(t, handshake=False, ack_settings=False)
    sids = [c.sid() for _ in range(101)]
    block = static_block(t, b"POST", b"/echo")
    for s in sids:
        c.open(s)
    c.send(*(f_headers(s, block, end_stream=False) for s in sids), log=False)
    c.pump(lambda: c.settings_seen, REACT)
    c.send(f_settings(ack=True))
    c.ack_settings = True
    c.pump(lambda: sids[-1] in c.rst, 0.5)
    c.send(*(f_data(s, b"x", end_stream=True) for s in sids if s not in c.rst), log=False)
    c.wait_streams(sids, 10)
    refused = [s for s in sids if s in c.rst]
    codes = sorted({errname(c.rst[s]) for s in refused})
    bad = [s for s in sids if s not in c.rst and not c.streams[s].ended]
    if bad or c.closed or c.bad:
        raise Fail(f"{len(bad)} accepted streams not answered; {c.close_how}; {c.bad[:2]}", c)
    toks = [f"RST({x})" for x in codes] or ["ACCEPTED"]
    return judge(t, c, toks, ["RST(REFUSED_STREAM)", "ACCEPTED"], ["RST(REFUSED_STREAM)"]) + \
        f" ({len(refused)} refused)"


# DATA and flow control

@case("data")
def case_empty_data_flood(t):
    """10000 empty DATA frames without END_STREAM on one stream (CVE-2019-9518): eddy allows a
    few then GOAWAY ENHANCE_YOUR_CALM; the RFC sets no limit (SURVIVED: the stream then ends
    and is answered).
    Seen: eddy: GOAWAY ENHANCE_YOUR_CALM; nghttpd and h2o: SURVIVED."""
    c = settled(t)
    sid = open_upload(c)
    c.send(f_data(sid, b"") * 3)
    c.send(f_data(sid, b"") * 9997, log=False)
    c.pump(lambda: c.closed or c.goaway is not None, 0.3)
    if c.goaway is None and not c.closed:
        c.send(f_data(sid, b"end", end_stream=True))
        toks = outcome(c, sid)
        toks = ["SURVIVED"] if toks == ["STATUS(200)"] else toks
    else:
        toks = outcome(c, sid, probe=False)
    return judge(t, c, toks, ["GOAWAY(ENHANCE_YOUR_CALM)", "CLOSE", "SURVIVED"],
                 ["GOAWAY(ENHANCE_YOUR_CALM)"])


@case("data")
def case_data_above_window(t):
    """256 KiB of DATA on one stream ignoring the server's windows, while the answer cannot go
    out (our window 0): FLOW_CONTROL_ERROR (6.9.1), on the stream or the connection. A server
    that returns window as data arrives, whatever its application does, never sees an
    overrun (nghttpd and h2o: they buffer the upload); then it answers (ABSORBED) or refuses
    the size (413). Which one eddy is depends on how the bytes reach it: a read that takes
    several frames at once (epoll) sees the overrun before any window went back; receives of
    a 16 KiB buffer each (io_uring) return window between frames, as nghttpd does.
    Seen: eddy: RST_STREAM FLOW_CONTROL_ERROR (epoll), ABSORBED (io_uring); nghttpd and h2o:
    ABSORBED."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 0})
    sid = open_upload(c)
    win = min(c.send_conn, c.send_win[sid])
    c.send(*(f_data(sid, b"z" * 16384) for _ in range(16)), f_data(sid, b"", end_stream=True))
    toks = outcome(c, sid, timeout=1.0, probe=False)
    if toks == ["STALLED"] or toks == ["STATUS(200)"]:
        toks = ["ABSORBED"]
    return judge(t, c, toks, ["RST(FLOW_CONTROL_ERROR)", "GOAWAY(FLOW_CONTROL_ERROR)",
                              "ABSORBED", "STATUS(413)"]) + f" (its window was {win})"


@case("data")
def case_data_stream_zero(t):
    """DATA on stream 0 (6.1: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(DATA, 0, 0, b"abc"))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_data_idle_stream(t):
    """DATA on stream 7, never opened (5.1: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(f_data(7, b"abc"))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_data_closed_stream(t):
    """DATA on a stream closed both ways (5.1: STREAM_CLOSED as a stream or connection error;
    nghttp2 forgets closed streams and ignores frames on them, as RFC 9113 5.1 lets it for
    recently closed ones): anything but a crash or a hang.
    Seen: eddy and h2o: IGNORED; nghttpd: GOAWAY STREAM_CLOSED."""
    c = settled(t)
    sid = c.request()
    c.wait_streams([sid])
    c.send(f_data(sid, b"abc", end_stream=True))
    return expect(t, c, ["IGNORED", "RST(STREAM_CLOSED)", "GOAWAY(STREAM_CLOSED)",
                         "GOAWAY(PROTOCOL_ERROR)", "STATUS(200)"], timeout=1.0)


@case("data")
def case_data_padding_too_long(t):
    """A padded DATA frame whose pad length is the whole payload (6.1: connection error
    PROTOCOL_ERROR)."""
    c = settled(t)
    sid = open_upload(c)
    c.send(raw(DATA, PADDED, sid, bytes([10]) + b"abcd"))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_headers_padding_too_long(t):
    """A padded HEADERS frame whose pad length exceeds the payload (6.2: connection error
    PROTOCOL_ERROR)."""
    c = settled(t)
    block = static_block(t)
    c.send(raw(HEADERS, PADDED | END_HEADERS | END_STREAM, 1, bytes([len(block) + 1]) + block))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_data_dribble(t):
    """Our window opened one byte at a time, 300 times (CVE-2019-9511): whatever the server
    sends must fit (it may wait for more window rather than send 1-byte frames); then the
    window opens and the body must arrive whole."""
    n = 65536
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 1}, conn_window=2**24)
    sid = c.sid()
    c.hold.add(sid)
    c.request(sid, path=bytes_path(n))
    st = c.streams[sid]
    frames0 = len(c.recv_log)
    for i in range(300):
        seen = st.received
        if not c.pump(lambda: st.received > seen or c.done(sid), 0.2):
            break
        c.grant(sid, st.received - seen)
        if c.closed or c.done(sid):
            break
    dribbled = st.received
    c.release(sid)
    c.grant(sid, n)
    c.wait_streams([sid], 5)
    toks = outcome(c, sid)
    res = judge(t, c, toks, ["STATUS(200)", "RST(ENHANCE_YOUR_CALM)",
                             "GOAWAY(ENHANCE_YOUR_CALM)"])
    if "STATUS(200)" in toks:
        whole(c, sid, n)
    return res + f" ({dribbled} bytes dribbled in {len(c.recv_log) - frames0} frames)"


@case("data")
def case_tcp_window_closed(t):
    """Eight 8 MiB downloads with all HTTP/2 windows open but a TCP window that never opens
    (CVE-2019-9517): the server must cap what it queues (close, or stop there) and serve
    others meanwhile. RSS growth is reported."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: MAX_WINDOW},
                conn_window=MAX_WINDOW - 65535, rcvbuf=4096)
    c.auto_wu = False
    before = server_stat(t.pid)
    block = c.enc.encode(t.req("GET", bytes_path(8388608)))
    for _ in range(8):
        sid = c.sid()
        c.open(sid)
        c.send(f_headers(sid, block))
        block = c.enc.encode(t.req("GET", bytes_path(8388608)))
    time.sleep(1.0)  # not reading
    why = health(t)
    if why:
        raise Fail(f"while one connection would not read, the server did not serve: {why}", c)
    during = server_stat(t.pid)
    growth = f" (server RSS {during[1] - before[1]:+d} KiB)" if before and during else ""
    return "served others while stuck" + growth


@case("data")
def case_wu_zero_stream(t):
    """WINDOW_UPDATE of 0 on an open stream (6.9: stream error PROTOCOL_ERROR; nghttp2 may make
    it a connection error).
    Seen: eddy and nghttpd: GOAWAY; h2o: RST_STREAM."""
    c = settled(t)
    sid = open_upload(c)
    c.send(raw(WINDOW_UPDATE, 0, sid, struct.pack(">I", 0)))
    return expect(t, c, STREAM_PROTO, sid=sid)


@case("data")
def case_wu_zero_connection(t):
    """WINDOW_UPDATE of 0 on the connection (6.9: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_wu_overflow_connection(t):
    """The connection's send window pushed past 2^31-1 (6.9.1: connection error
    FLOW_CONTROL_ERROR)."""
    c = settled(t)
    c.send(f_wu(0, MAX_WINDOW))
    return expect(t, c, ["GOAWAY(FLOW_CONTROL_ERROR)"])


@case("data")
def case_wu_bad_length(t):
    """WINDOW_UPDATE of 3 bytes (6.9: connection error FRAME_SIZE_ERROR)."""
    c = settled(t)
    c.send(raw(WINDOW_UPDATE, 0, 0, b"\0\0\x01"))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("data")
def case_wu_idle_stream(t):
    """WINDOW_UPDATE on stream 9, never opened (5.1: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(f_wu(9, 100))
    return expect(t, c, CONN_PROTO)


@case("data")
def case_wu_flood(t):
    """20000 WINDOW_UPDATEs of 1 on the connection: harmless, or cut off (GOAWAY
    ENHANCE_YOUR_CALM); the connection then still serves."""
    c = settled(t)
    c.send(f_wu(0, 1) * 20000, log=False)
    sid = c.request()
    return expect(t, c, ["STATUS(200)", "GOAWAY(ENHANCE_YOUR_CALM)"], sid=sid)


def exact(c, sid, want, what):
    st = c.streams.get(sid)
    if st is None or st.status != 200 or not st.ended:
        raise Fail(f"{what}: {outcome(c, sid, probe=False)}", c)
    if want is not None and bytes(st.body) != want:
        raise Fail(f"{what}: {len(st.body)} bytes back, not the {len(want)} sent"
                   + (" (same length, different bytes)" if len(st.body) == len(want) else ""), c)
    return len(st.body)


def send_body(c, sid, data, end=True, timeout=20.0, until_blocked=None):
    """Sends a request body within the server's windows, reading meanwhile. With until_blocked
    S: returns the bytes sent once no window has opened for S seconds."""
    off = 0
    deadline = time.monotonic() + timeout
    while off < len(data) or (end and off == 0 and not data):
        if c.closed or sid in c.rst:
            raise Fail(f"upload ended by the server after {off} bytes: "
                       f"{outcome(c, sid, probe=False)}", c)
        room = min(c.send_conn, c.send_win.get(sid, 0), c.peer_max_frame, len(data) - off)
        if room <= 0 and data:
            wait = until_blocked if until_blocked is not None else deadline - time.monotonic()
            if not c.pump(lambda: min(c.send_conn, c.send_win.get(sid, 0)) > 0 or c.closed or
                          sid in c.rst, max(0.0, wait)):
                if until_blocked is not None:
                    return off
                raise Fail(f"upload stalled after {off} bytes: no window for {timeout} s "
                           f"(connection {c.send_conn}, stream {c.send_win.get(sid)})", c)
            continue
        chunk = data[off:off + room]
        off += len(chunk)
        c.send_conn -= len(chunk)
        c.send_win[sid] -= len(chunk)
        c.out += f_data(sid, chunk, end and off == len(data))
        if len(c.out) > 65536 or off == len(data):
            c.flush()
        else:
            c.pump(timeout=0)
        if not data:
            break
    return off


@case("data", needs=("echo",))
def case_big_echo(t):
    """8 MiB up to POST /echo and back through 16 KiB windows that we open only as we consume
    (our INITIAL_WINDOW_SIZE 16384): the bytes must come back exact."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    body = t.rng.randbytes(8 << 20)
    sid = c.request(method="POST", path="/echo", end_stream=False,
                    extra=[("content-length", str(len(body)))])
    start = time.monotonic()
    send_body(c, sid, body)
    c.wait_streams([sid], 20)
    n = exact(c, sid, body, "the echo")
    return f"{n} bytes back exact in {time.monotonic() - start:.1f} s"


@case("data")
def case_big_download(t):
    """GET /bytes/8388608 through 16 KiB windows opened as we consume: whole."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    sid = c.request(path=bytes_path(8388608))
    c.wait_streams([sid], 20)
    return f"{whole(c, sid, 8388608)} bytes exact"


@case("data")
def case_starved_download(t):
    """Two downloads on one connection; we never open the first one's window: the second must
    still complete (curl#10988)."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    a = c.sid()
    c.hold.add(a)
    c.request(a, path=bytes_path(1048576))
    b = c.request(path=bytes_path(1048576))
    c.wait_streams([b], 10)
    whole(c, b, 1048576, "the second download")
    got = c.streams[a].received
    if got > 16384:
        raise Fail(f"the held stream got {got} bytes past its 16384 window", c)
    return f"the second whole while the first waits at {got} bytes"


@case("data", needs=("echo",))
def case_starved_upload(t):
    """Two uploads to /echo; we never open the first one's answer window, so the server cannot
    echo it and stops taking its body: the second must still go through (the connection
    window must not be held by the stalled stream)."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    a = c.sid()
    c.hold.add(a)
    c.request(a, method="POST", path="/echo", end_stream=False)
    sent_a = send_body(c, a, t.rng.randbytes(1 << 20), end=False, until_blocked=0.5)
    body = t.rng.randbytes(1 << 20)
    b = c.request(method="POST", path="/echo", end_stream=False)
    send_body(c, b, body)
    c.wait_streams([b], 10)
    exact(c, b, body, "the second echo")
    return f"the second echo exact; the first took {sent_a} bytes and waits"


@case("data")
def case_pause_resume_download(t):
    """We stop opening a download's window for a second, then resume: it must complete (the
    curl#16960 stall)."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    sid = c.sid()
    c.hold.add(sid)
    c.request(sid, path=bytes_path(1048576))
    c.pump(lambda: c.done(sid), 1.0)
    got = c.streams[sid].received
    c.release(sid)
    c.wait_streams([sid], 10)
    whole(c, sid, 1048576, "after the pause")
    return f"paused at {got} bytes, then whole"


@case("data", needs=("echo",))
def case_pause_resume_upload(t):
    """An upload to /echo whose answer we stop reading (no window) until the upload stalls,
    then read again: the server's window must reopen and the echo come back exact."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 16384})
    body = t.rng.randbytes(1 << 20)
    sid = c.sid()
    c.hold.add(sid)
    c.request(sid, method="POST", path="/echo", end_stream=False)
    first = send_body(c, sid, body, end=False, until_blocked=0.7)
    c.release(sid)
    send_body(c, sid, body[first:])
    c.wait_streams([sid], 10)
    exact(c, sid, body, "the echo")
    return f"stalled after {first} bytes, then exact"


@case("data", needs=("stall_timeout",))
def case_window_zero_forever(t):
    """A download whose window we never open (INITIAL_WINDOW_SIZE 0): the server should time the
    stream out and free it (a RST_STREAM or the connection closed). Needs --stall-timeout S."""
    c = settled(t, {S_ENABLE_PUSH: 0, S_INITIAL_WINDOW_SIZE: 0})
    sid = c.request(path=bytes_path(1048576))
    toks = outcome(c, sid, t.stall_timeout + REACT, probe=False)
    return judge(t, c, toks, ["RST(*)", "GOAWAY(*)", "CLOSE"])


# PRIORITY and other frames

@case("other")
def case_priority_flood(t):
    """20000 PRIORITY frames reshuffling idle streams (CVE-2019-9513): ignored (eddy sends
    NO_RFC7540_PRIORITIES) or cut off (GOAWAY ENHANCE_YOUR_CALM); a request then is answered.
    Seen: eddy and nghttpd: 200; h2o: GOAWAY ENHANCE_YOUR_CALM."""
    c = settled(t)
    def dep(i):  # a scattered stream, never the frame's own
        d = 2 * ((i * 7919) % 20000) + 1
        return 0 if d == 2 * i + 1 else d
    frames = b"".join(f_priority(2 * i + 1, dep(i), weight=i % 256, exclusive=bool(i % 3))
                      for i in range(1, 20001))
    c.send(frames[:14 * 4])
    c.send(frames[14 * 4:], log=False)
    c.next_sid = 40003
    sid = c.request()
    return expect(t, c, ["STATUS(200)", "GOAWAY(ENHANCE_YOUR_CALM)"], sid=sid)


@case("other")
def case_priority_self_dependency(t):
    """PRIORITY making stream 3 depend on itself (5.3.1: stream error PROTOCOL_ERROR).
    Seen: nghttpd and h2o: GOAWAY PROTOCOL_ERROR; eddy: IGNORED."""
    c = settled(t)
    c.send(f_priority(3, 3))
    # RFC 9113 drops RFC 7540's priority scheme but not this rule; a server that sent
    # SETTINGS_NO_RFC7540_PRIORITIES 1 may skip PRIORITY frames whole (nghttp2 does).
    return judge(t, c, outcome(c, 3, timeout=1.0), STREAM_PROTO,
                 deviation=(["IGNORED"], "PRIORITY frames skipped whole"))


@case("other")
def case_headers_self_dependency(t):
    """HEADERS with a priority on itself (5.3.1: stream error PROTOCOL_ERROR)."""
    c = settled(t)
    sid = c.request(priority=(1, 16, False))
    return expect(t, c, STREAM_PROTO, sid=sid)


@case("other")
def case_priority_bad_length(t):
    """PRIORITY of 4 bytes (6.3: stream error FRAME_SIZE_ERROR)."""
    c = settled(t)
    c.send(raw(PRIORITY, 0, 3, b"\0\0\0\1"))
    return expect(t, c, ["RST(FRAME_SIZE_ERROR)", "GOAWAY(FRAME_SIZE_ERROR)"], sid=3)


@case("other")
def case_unknown_frame_types(t):
    """Frames of unknown types (0xfa, 0x21) on stream 0 and an open stream must be ignored
    (4.1, 5.5); the request on that stream is then answered.
    Seen: eddy 404, h2o 405 (POST /), nghttpd 200."""
    c = settled(t)
    sid = open_upload(c, "/")
    c.send(raw(0xfa, 0xff, 0, b"junk"), raw(0x21, 0, sid, b"\0" * 100),
           f_data(sid, b"", end_stream=True))
    return expect(t, c, ["STATUS(*)"], sid=sid)


@case("other")
def case_data_frame_too_large(t):
    """DATA one byte over the server's MAX_FRAME_SIZE (4.2: FRAME_SIZE_ERROR, as a stream or a
    connection error)."""
    c = settled(t)
    sid = open_upload(c)
    c.send(raw(DATA, 0, sid, b"d" * (c.peer_max_frame + 1)))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)", "RST(FRAME_SIZE_ERROR)"], sid=sid)


@case("other")
def case_headers_frame_too_large(t):
    """HEADERS one byte over MAX_FRAME_SIZE (4.2: a frame that can change the connection's
    state: connection error FRAME_SIZE_ERROR)."""
    c = settled(t)
    block = static_block(t)
    block += hpack_literal(b"x-pad", b"p" * (c.peer_max_frame + 1 - len(block) - 9))
    block = block[:c.peer_max_frame + 1]
    c.send(raw(HEADERS, END_HEADERS | END_STREAM, 1, block))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("other")
def case_frame_length_huge(t):
    """A frame header announcing 16 MiB - 1, then 100 bytes and a wait: the server must refuse
    on the header (FRAME_SIZE_ERROR), not wait for or buffer the payload."""
    c = settled(t)
    sid = open_upload(c)
    c.send(b"\xff\xff\xff" + bytes([DATA, 0]) + struct.pack(">I", sid) + b"x" * 100)
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)", "CLOSE"])


@case("other")
def case_goaway_mid_stream(t):
    """Our GOAWAY(NO_ERROR) while a download runs, then HEADERS on a new stream: the download
    must complete (or the connection close cleanly); the new stream may be answered, refused
    or ignored."""
    c = settled(t)
    sid = c.request(path=bytes_path(200000))
    c.send(f_goaway(0, E["NO_ERROR"]))
    late = c.request()
    c.pump(lambda: c.closed or (c.done(sid) and c.done(late)), REACT)
    st = c.streams[sid]
    if not c.closed:
        whole(c, sid, 200000)
    return judge(t, c, outcome(c, late, timeout=0.3), ["STATUS(200)", "RST(REFUSED_STREAM)",
                                                      "IGNORED", "STALLED", "CLOSE",
                                                      "GOAWAY(NO_ERROR)"]) + \
        f"; the download: {len(st.body)} bytes"


@case("other")
def case_goaway_large_debug(t):
    """A GOAWAY with 16000 bytes of debug data: taken (the server may close).
    Seen: eddy and nghttpd: CLOSE; h2o: IGNORED."""
    c = settled(t)
    c.send(f_goaway(0, E["NO_ERROR"], b"d" * 16000))
    return expect(t, c, ["IGNORED", "STALLED", "CLOSE", "GOAWAY(NO_ERROR)"], timeout=1.0)


@case("other")
def case_goaway_bad_length(t):
    """A GOAWAY of 4 bytes (6.8: its payload is at least 8: FRAME_SIZE_ERROR)."""
    c = settled(t)
    c.send(raw(GOAWAY, 0, 0, b"\0\0\0\0"))
    return expect(t, c, ["GOAWAY(FRAME_SIZE_ERROR)"])


@case("other")
def case_goaway_on_stream(t):
    """A GOAWAY on stream 1 (6.8: connection error PROTOCOL_ERROR)."""
    c = settled(t)
    c.send(raw(GOAWAY, 0, 1, struct.pack(">II", 0, 0)))
    return expect(t, c, CONN_PROTO)


# Slow peers

@case("slow", needs=("idle_timeout",))
def case_preface_then_silence(t):
    """The preface and SETTINGS, then nothing: closed at the server's idle timeout (with or
    without a GOAWAY). Needs --idle-timeout S."""
    c = settled(t)
    start = time.monotonic()
    toks = outcome(c, timeout=t.idle_timeout + REACT, probe=False)
    return judge(t, c, toks, ["GOAWAY(*)", "CLOSE"]) + f" after {time.monotonic() - start:.1f} s"


@case("slow", needs=("header_timeout",))
def case_header_trickle(t):
    """A HEADERS frame sent a byte every 100 ms, never finished in time: closed at the header
    timeout (eddy: GOAWAY ENHANCE_YOUR_CALM). Needs --header-timeout S."""
    c = settled(t)
    limit = t.header_timeout + REACT
    frame = f_headers(1, c.enc.encode(t.req(extra=[("x-slow", "s" * int(limit * 20))])))
    c.sent_log.append(f"a {len(frame)}-byte HEADERS frame, a byte every 100 ms")
    start = time.monotonic()
    for b in frame:
        c.send(bytes([b]), log=False)
        c.pump(lambda: c.closed, 0.1)
        if c.closed or time.monotonic() - start > limit:
            break
    if not c.closed:
        raise Fail(f"still open after {time.monotonic() - start:.1f} s of trickling", c)
    toks = outcome(c, 1, timeout=0, probe=False)
    return judge(t, c, toks, ["GOAWAY(*)", "CLOSE", "RST(*)"], ["GOAWAY(ENHANCE_YOUR_CALM)"]) + \
        f" after {time.monotonic() - start:.1f} s"


@case("slow", needs=("header_timeout",))
def case_header_block_unfinished(t):
    """HEADERS without END_HEADERS, then a CONTINUATION every sixth of the header timeout, 7
    at most (eddy allows 8), none ending the block: closed at the header timeout (not at an
    idle timeout: we keep sending). Needs --header-timeout S."""
    c = settled(t)
    block = c.enc.encode(t.req())
    c.open(1)
    c.send(f_headers(1, block[:2], end_headers=False))
    start = time.monotonic()
    for i in range(7):
        if c.pump(lambda: c.closed, t.header_timeout / 6):
            break
        c.send(f_continuation(1, block[2:3] if i == 0 else b"", end_headers=False))
    c.pump(lambda: c.closed, max(0.0, t.header_timeout + REACT - (time.monotonic() - start)))
    if not c.closed:
        raise Fail(f"a header block open {time.monotonic() - start:.1f} s was not cut off", c)
    toks = outcome(c, 1, timeout=0, probe=False)
    return judge(t, c, toks, ["GOAWAY(*)", "CLOSE", "RST(*)"], ["GOAWAY(ENHANCE_YOUR_CALM)"]) + \
        f" after {time.monotonic() - start:.1f} s"


@case("slow")
def case_idle_connections(t):
    """200 connections past their SETTINGS, idle at once: others are still served; memory per
    connection reported; all closed by us (the descriptor check then sees them go)."""
    before = server_stat(t.pid)
    conns = []
    for _ in range(200):
        conns.append(Conn(t, handshake=False))
    for c in conns:
        c.handshake()
    why = health(t)
    if why:
        raise Fail(f"with 200 idle connections open, the server did not serve: {why}")
    during = server_stat(t.pid)
    for c in conns:
        c.close()
    if before and during:
        return f"{(during[1] - before[1]) / 200:.1f} KiB RSS per idle connection"
    return "served meanwhile"


# --- the driver ----------------------------------------------------------------------------------

class Ctx:
    def __init__(self, args):
        self.host = args.host
        self.port = args.port
        self.authority = f"{args.host}:{args.port}"
        self.strict = args.strict
        self.no_echo = args.no_echo
        self.verbose = args.verbose
        self.pid = args.fd_check
        self.idle_timeout = args.idle_timeout
        self.header_timeout = args.header_timeout
        self.settings_timeout = args.settings_timeout
        self.stall_timeout = args.stall_timeout
        self.rng = random.Random(args.seed)
        self.conns = []

    def req(self, method="GET", path="/", extra=()):
        return [(":method", method), (":scheme", "http"), (":authority", self.authority),
                (":path", path)] + list(extra)


def make_docroot(d):
    os.makedirs(os.path.join(d, "bytes"), exist_ok=True)
    with open(os.path.join(d, "index.html"), "wb") as f:
        f.write(b"Hello, World!")
    for n in BYTES_SIZES:
        with open(os.path.join(d, "bytes", str(n)), "wb") as f:
            f.write(pattern(n))


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--case", nargs="+", action="extend", default=[],
                    help="cases to run (shell patterns); all by default")
    ap.add_argument("--list", action="store_true", help="list the cases")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true",
                    help="assert eddy's reaction where the RFC allows several")
    ap.add_argument("--no-echo", action="store_true", help="the server has no POST /echo")
    ap.add_argument("--fd-check", type=int, metavar="PID",
                    help="the server's pid: its descriptors must not grow across the run")
    ap.add_argument("--idle-timeout", type=float, metavar="S")
    ap.add_argument("--header-timeout", type=float, metavar="S")
    ap.add_argument("--settings-timeout", type=float, metavar="S")
    ap.add_argument("--stall-timeout", type=float, metavar="S")
    ap.add_argument("--known-failure", nargs="+", action="extend", default=[], metavar="NAME",
                    help="cases failing until a fix lands: reported XFAIL (XPASS once they "
                         "pass), not failing the run")
    ap.add_argument("--make-docroot", metavar="DIR")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.make_docroot:
        make_docroot(args.make_docroot)
        return 0
    if args.list:
        for name, (group, needs, fn) in CASES.items():
            print(f"{name:34} {group:9} {(fn.__doc__ or '').split(chr(10))[0]}")
        return 0
    if args.port is None:
        ap.error("--port is required")
    t = Ctx(args)
    names = list(CASES)
    if args.case:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in args.case)]
        if not names:
            ap.error(f"no case matches {args.case}")
    fds0 = fd_count(t.pid) if t.pid else None
    if t.pid and fds0 is None:
        ap.error(f"cannot read /proc/{t.pid}/fd")
    why = health(t)
    if why:
        print(f"FAIL the server is not serving before any case: {why}")
        return 1
    failed, known, skipped = [], [], []
    start = time.monotonic()

    def alarm(*_):
        raise TimeoutError(f"the case took over {CASE_LIMIT} s")
    signal.signal(signal.SIGALRM, alarm)
    for name in names:
        group, needs, fn = CASES[name]
        missing = [n for n in needs if (n == "echo" and t.no_echo) or
                   (n != "echo" and getattr(t, n) is None)]
        if missing:
            print(f"SKIP {name}: needs {', '.join('--' + m.replace('_', '-') for m in missing)}"
                  if missing != ["echo"] else f"SKIP {name}: --no-echo", flush=True)
            skipped.append(name)
            continue
        t0 = time.monotonic()
        ok = True
        signal.alarm(CASE_LIMIT)
        try:
            detail = fn(t)
        except Fail as e:
            ok, detail = False, str(e)
        except Exception as e:
            ok, detail = False, f"{type(e).__name__}: {e}"
            if t.verbose:
                traceback.print_exc()
        finally:
            signal.alarm(0)
            for c in t.conns:
                c.close()
            t.conns.clear()
        why = health(t)
        if why:
            ok = False
            detail += f"; AFTER IT THE SERVER DID NOT SERVE: {why}"
        is_known = name in args.known_failure
        verdict = ("XPASS" if ok else "XFAIL") if is_known else ("PASS" if ok else "FAIL")
        print(f"{verdict} {name}: {detail} [{time.monotonic() - t0:.2f} s]", flush=True)
        if is_known and not why:
            known.append(verdict + " " + name)
            continue
        if not ok:
            failed.append(name)
            if why:
                break  # a server that no longer serves fails every case after
    if t.pid:
        fds1 = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            fds1 = fd_count(t.pid)
            if fds1 is not None and fds1 <= fds0 + 2:
                break
            time.sleep(0.2)
        if fds1 is None or fds1 > fds0 + 2:
            print(f"FAIL fd-check: the server held {fds0} descriptors before and {fds1} after")
            failed.append("fd-check")
        else:
            print(f"PASS fd-check: {fds0} descriptors before, {fds1} after")
    ran = len(names) - len(skipped) - len(known)
    print(f"{ran - len([f for f in failed if f in names])} of {ran} passed in "
          f"{time.monotonic() - start:.1f} s" +
          (f"; {len(skipped)} skipped" if skipped else "") +
          (f"; known failures: {', '.join(known)}" if known else "") +
          (f"; failed: {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
