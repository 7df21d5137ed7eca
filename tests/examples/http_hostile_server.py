#!/usr/bin/env python3
"""A small HTTP/1.1 server that misbehaves on purpose, to drive HTTP clients (eddy-http-client)
into the failures a real network brings. One mode per process:

  keepalive      valid: keep-alive, answers by path (below)
  slow           valid, as keepalive, but every response goes out one byte at a time
                 (--byte-delay-ms apart)
  idle_close     valid, but a connection left idle 100 ms after a response is closed: the
                 client finds it dead in its pool
  reset          headers announcing a body, part of it, then a reset (SO_LINGER {1, 0}, close)
  garbage        bytes that are no status line; the connection stays open
  stall          the headers, announcing a body that never comes; the connection stays open
  short          Content-Length larger than the body, then close
  long           Content-Length shorter than the body: what follows the declared length is a
                 complete second response ("smuggled"), sent with the first in one write, so
                 a client that takes it for the answer to its next request shows it
  chunked_flood  a chunked body that never ends

Paths in the valid modes: "/" answers 200 "hello\\n"; "/chunked" 200 with a chunked body
and a trailer; "/close" 200 framed by the close of the connection (no Content-Length);
"/echo" 200 with the request's body (any method); anything else 404 "not found\\n". HEAD
gets the headers GET would, without the body. No Date header: answers are the same every time.

    http_hostile_server.py MODE [--port N] [--byte-delay-ms MS] [--tls CERT KEY]

Listens on 127.0.0.1 (port 0: any free port) and prints the port on stdout, alone on a line.
On stderr it logs "connection N" per accepted connection and "request N METHOD TARGET" per
request, so a test can count connections (keep-alive reuse). SIGTERM or SIGINT stop it.
"""
import argparse
import signal
import socket
import ssl
import struct
import sys
import threading
import time

MODES = ("keepalive", "slow", "idle_close", "reset", "garbage", "stall", "short", "long",
         "chunked_flood")
VALID_MODES = ("keepalive", "slow", "idle_close")
# How long a connection the server keeps open on purpose (garbage, stall, a flood) waits for
# the client to give up before the server closes it: far beyond any client timeout in tests.
HOLD_SECONDS = 60.0
IDLE_CLOSE_SECONDS = 0.1
MAX_HEAD = 64 * 1024
MAX_BODY = 16 << 20


class ClientGone(Exception):
    """The client closed or reset the connection."""


class BadRequest(Exception):
    """What the client sent does not parse as an HTTP/1.1 request."""


class Request:
    def __init__(self, method, target, version, headers, body):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers  # [(name lowercased, value)]
        self.body = body

    def header(self, name):
        return next((v for n, v in self.headers if n == name), None)

    def keep_alive(self):
        conn = (self.header("connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


class Reader:
    """Requests off a blocking socket, pipelined ones included (bytes read past one request
    stay for the next)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            raise  # a wait the caller bounded (idle_close)
        except (ConnectionError, ssl.SSLError, OSError) as e:
            raise ClientGone(str(e))
        if not chunk:
            raise ClientGone("end of stream")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD:
                raise BadRequest("line too long")
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode("latin-1")

    def exactly(self, n):
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def request(self):
        """The next request, or None at a clean end of stream before it began."""
        if not self.buf:
            try:
                self.fill()
            except ClientGone:
                return None
        line = self.line()
        while line == "":  # RFC 9112 2.2: empty lines before a request are ignored
            line = self.line()
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(f"request line {line!r}")
        headers = []
        while True:
            h = self.line()
            if h == "":
                break
            name, sep, value = h.partition(":")
            if not sep:
                raise BadRequest(f"header {h!r}")
            headers.append((name.strip().lower(), value.strip()))
        req = Request(parts[0], parts[1], parts[2], headers, b"")
        if "chunked" in (req.header("transfer-encoding") or "").lower():
            req.body = self.chunked_body()
        else:
            n = int(req.header("content-length") or 0)
            if n < 0 or n > MAX_BODY:
                raise BadRequest(f"Content-Length {n}")
            req.body = self.exactly(n)
        return req

    def chunked_body(self):
        body = b""
        while True:
            size = int(self.line().split(";")[0].strip(), 16)
            if size == 0:
                while self.line() != "":  # trailers
                    pass
                return body
            body += self.exactly(size)
            if len(body) > MAX_BODY:
                raise BadRequest("chunked body too long")
            self.exactly(2)


def valid_answer(req):
    """(status, reason, headers, body, framing) of the valid modes' answer to req; framing is
    "length", "chunked" or "close"."""
    path = req.target.split("?", 1)[0]
    if path == "/":
        return 200, "OK", [("Content-Type", "text/plain")], b"hello\n", "length"
    if path == "/chunked":
        return 200, "OK", [("Content-Type", "text/plain")], b"chunked hello\n" * 3, "chunked"
    if path == "/close":
        return 200, "OK", [("Content-Type", "text/plain")], b"until the close\n", "close"
    if path == "/echo":
        return 200, "OK", [("Content-Type", "application/octet-stream")], req.body, "length"
    return 404, "Not Found", [("Content-Type", "text/plain")], b"not found\n", "length"


def render(req, status, reason, headers, body, framing, keep_alive):
    """The answer's bytes. HEAD gets the headers GET would, no body."""
    head = [f"HTTP/1.1 {status} {reason}", "Server: hostile"] + [f"{n}: {v}" for n, v in headers]
    if framing == "length":
        head.append(f"Content-Length: {len(body)}")
    elif framing == "chunked":
        head.append("Transfer-Encoding: chunked")
    if not keep_alive or framing == "close":
        head.append("Connection: close")
    out = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
    if req.method == "HEAD":
        return out
    if framing == "chunked":
        third = max(1, len(body) // 3)
        for i in range(0, len(body), third):
            piece = body[i:i + third]
            out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        return out + b"0\r\nX-Trailer: done\r\n\r\n"
    return out + body


def reset(sock):
    """Close with a reset instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def hold(sock):
    """Keep the connection open, reading and dropping what comes, until the client closes it
    or HOLD_SECONDS pass."""
    sock.settimeout(HOLD_SECONDS)
    try:
        while sock.recv(65536):
            pass
    except (OSError, ssl.SSLError):
        pass


class Server:
    def __init__(self, mode, port, byte_delay, tls):
        self.mode = mode
        self.byte_delay = byte_delay
        self.tls = tls
        self.lock = threading.Lock()
        self.conns = 0
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(128)

    def log(self, text):
        with self.lock:
            print(text, file=sys.stderr, flush=True)

    def serve(self):
        print(self.listener.getsockname()[1], flush=True)
        while True:
            sock, _ = self.listener.accept()
            with self.lock:
                self.conns += 1
                n = self.conns
            threading.Thread(target=self.connection, args=(sock, n), daemon=True).start()

    def connection(self, sock, n):
        self.log(f"connection {n}")
        try:
            if self.tls is not None:
                sock.settimeout(10)
                sock = self.tls.wrap_socket(sock, server_side=True)
                sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.exchange(sock, n)
        except (ClientGone, BadRequest, OSError, ssl.SSLError, ValueError) as e:
            self.log(f"connection {n}: {e}")
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def send(self, sock, data):
        if self.mode != "slow":
            sock.sendall(data)
            return
        for i in range(len(data)):
            sock.sendall(data[i:i + 1])
            time.sleep(self.byte_delay)

    def exchange(self, sock, n):
        reader = Reader(sock)
        while True:
            req = reader.request()
            if req is None:
                return
            self.log(f"request {n} {req.method} {req.target}")
            if not self.answer(sock, req, reader):
                return

    def answer(self, sock, req, reader):
        """Answer req as the mode says; False when the connection is done."""
        mode = self.mode
        if mode in VALID_MODES:
            status, reason, headers, body, framing = valid_answer(req)
            keep = req.keep_alive() and framing != "close"
            self.send(sock, render(req, status, reason, headers, body, framing, keep))
            if not keep:
                sock.shutdown(socket.SHUT_WR)
                hold(sock)
                return False
            if mode == "idle_close" and not reader.buf:
                sock.settimeout(IDLE_CLOSE_SECONDS)
                try:
                    reader.fill()
                except TimeoutError:
                    self.log("closing an idle connection")
                    return False
                finally:
                    sock.settimeout(None)
            return True
        if mode == "reset":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"r" * 100)
            time.sleep(0.05)  # the part sent arrives before the reset discards it
            reset(sock)
        elif mode == "garbage":
            sock.sendall(b"\x16\x03\x01\x00\xa5garbage, not a status line\x00\xff\r\n\r\n")
            hold(sock)
        elif mode == "stall":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 100\r\n\r\n")
            hold(sock)
        elif mode == "short":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
            sock.shutdown(socket.SHUT_WR)
            hold(sock)
        elif mode == "long":
            # One write: the client has the excess before it can ask anything else.
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n"
                         b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled\n")
            return True
        elif mode == "chunked_flood":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"4000\r\n" + b"f" * 0x4000 + b"\r\n"
            sock.settimeout(HOLD_SECONDS)
            end = time.monotonic() + HOLD_SECONDS
            while time.monotonic() < end:
                sock.sendall(chunk)  # raises once the client has closed
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--byte-delay-ms", type=float, default=2.0,
                    help="slow mode: between bytes (default 2)")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve https")
    args = ap.parse_args()
    tls = None
    if args.tls:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls[0], args.tls[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = Server(args.mode, args.port, args.byte_delay_ms / 1000.0, tls)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
