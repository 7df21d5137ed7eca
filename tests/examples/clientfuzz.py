#!/usr/bin/env python3
"""Whole-client fuzzing: a seeded random HTTP server drives eddy-http-client.

The mirror of serverfuzz.py: there, generated clients drive our servers; here a generated
server drives our client. Each run starts a server on an ephemeral port of 127.0.0.1 (a
thread per connection) and runs eddy-http-client against it once, in one of two ways:

  - fetch: 1 to 6 URLs of the server in turn (GET, HEAD, POST or another method, with or
    without -d BODY, with or without -i), each with --timeout-ms;
  - load: --load with 1 to 4 connections, 1 to 4 requests pipelined on each, for 1 or 2 s.

The server reads each request (which must parse, carry Host, ask for the URL's target and
carry the body given with -d: anything else is the client's bug) and answers it as the
run's seed says, per connection (in accept order) and request:

  - valid: 200 to 599 with a reason or none, 1xx interim answers before it, HTTP/1.1 or
    1.0, keep-alive or Connection: close, the body framed by Content-Length, by chunks (of
    random sizes, hex in either case, extensions, trailers) or by the close; headers in
    random case and spacing; no body for HEAD, 204, 304; bodies up to the client's 1 MiB;
  - mutated: a valid answer with bytes flipped, inserted, deleted, cut, numbers and CRLFs
    corrupted (serverfuzz's mutator); lengths that lie or contradict (two Content-Lengths,
    Content-Length with chunked, signs, hex, overflows, a body longer or shorter than said);
    a second answer nobody asked for; a status line or header section over the limits;
  - garbage; a valid answer cut by a reset, a half-close or a close at a random point, or
    a stall there; a flood (a body, a header, interim answers that never end).

Every answer is split into writes at random with small random delays. Nothing the server
does may crash the client or hang it: it must exit 0 or 1 within a bound (else it is killed
and the run fails), with no sanitizer report (under ASan also LeakSanitizer's at exit). A
fetch run whose every answer was valid must exit 0 with exactly the bodies on stdout (unless
-i); a fetch run that exits 1 must say why on stderr ("eddy-http-client: URL: ..."); a load
run that exits 0 must print its figures and JSON line.

    clientfuzz.py CLIENT [--seeds 1,2] [--runs N] [--run I] [--out DIR] [-v]
    clientfuzz.py CLIENT --soak SECONDS                 fresh seeds until then
    clientfuzz.py CLIENT --replay TRACE.json [--repeat N]

CLIENT is build/<tree>/examples/eddy-http-client; while it is not built, exit status 77
(skipped). Run I of seed S is named "S/I" and generated from it alone (--seeds S --run I
plays it again: the same command line and answers; the timing is the kernel's). A failure
prints the seed and run, the client's command line and output, and writes a trace (JSON: the
client's arguments; per connection in accept order, per request, the request line and the
server's actions: bytes sent as hex, one action per write, delays, resets, half-closes,
stalls, floods) to OUT/clientfuzz-<seed>-<run>.json, which --replay plays.

Exit status: 0 when every run passed, 1 when one failed, 2 on a usage error, 77 as above.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_hostile_server as hs  # noqa: E402  (the request reader, resets, holds)
import serverfuzz as sf  # noqa: E402  (the mutator, garbage, write splitting, sanitizers)

TRACE_FORMAT = "eddy-clientfuzz-1"
MAX_BODY = 1 << 20  # the client's default max_content_length (EDDY_HTTP_MAX_CONTENT_LENGTH)
FLOOD_SECONDS = 30.0  # a flood ends when the client closes, or after this (then a stall)
FLOOD_BYTES = 256 << 20
# Bounds on a client run, generous for a sanitizer build on a loaded 2-core machine. A fetch
# may wait --timeout-ms for each answer (a stall), twice for a connect and an answer.
FETCH_SLACK_SECONDS = 30.0
LOAD_SLACK_SECONDS = 45.0  # a load run may wait out its requests in flight (30 s by default)
DELAY_BUDGET_MS = 150  # the random delays within one answer, in all

WEIGHTS_FETCH = {"valid": 45, "mutated": 12, "lengths": 10, "garbage": 4, "cut": 8, "stall": 3,
                 "flood": 4, "extra": 4, "huge_head": 4}
WEIGHTS_LOAD = {"valid": 400, "mutated": 4, "lengths": 3, "garbage": 1, "cut": 3, "stall": 1,
                "flood": 1, "extra": 2, "huge_head": 1}
TOKENS = [b"HTTP/1.1 ", b"HTTP/1.0 ", b"200 OK", b"\r\n", b"\r\n\r\n", b"Content-Length: ",
          b"Transfer-Encoding: chunked", b"Connection: close", b": ", b"0", b"5", b"ffff",
          b";", b"\n", b" ", b"\t", b"100 Continue"]
REASONS = {100: "Continue", 103: "Early Hints", 200: "OK", 201: "Created", 202: "Accepted",
           204: "No Content", 206: "Partial Content", 301: "Moved Permanently",
           304: "Not Modified", 400: "Bad Request", 404: "Not Found", 418: "I'm a teapot",
           500: "Internal Server Error", 503: "Service Unavailable", 599: "Whatever"}


class Failure(Exception):
    """The client failed: crashed, hung, answered wrongly, or sent a bad request."""


def case(rng, name):
    """A header name in random case (field names are case-insensitive)."""
    r = rng.random()
    if r < 0.6:
        return name
    if r < 0.75:
        return name.lower()
    if r < 0.85:
        return name.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)


def header(rng, name, value):
    ows = rng.choice(("", " ", " ", " ", "  ", "\t"))
    tail = rng.choice(("", "", "", " ", "\t"))
    return f"{case(rng, name)}:{ows}{value}{tail}\r\n"


def body_bytes(rng):
    n = rng.choices((0, 1, 2, 13, 100, 1000, 4096, 16384, 65536, 200000, MAX_BODY),
                    (6, 3, 3, 10, 10, 8, 5, 4, 3, 2, 1))[0]
    if rng.random() < 0.5:
        return rng.randbytes(n)
    text = bytes(rng.choice(b"abcdefghij \n") for _ in range(min(n, 4096)))
    return (text * (n // 4096 + 1))[:n]


def valid_answer(rng, method, interim=True):
    """A valid answer to a request of method: (bytes, body the client must show, closes)."""
    out = b""
    if interim and rng.random() < 0.1:
        for _ in range(rng.choice((1, 1, 2, 5))):
            code = rng.choice((100, 103))
            extra = header(rng, "Link", "</a.css>; rel=preload") if code == 103 else ""
            out += f"HTTP/1.1 {code} {REASONS[code]}\r\n{extra}\r\n".encode()
    version = rng.choices(("1.1", "1.0"), (88, 12))[0]
    status = rng.choices((200, 201, 202, 204, 206, 301, 304, 400, 404, 418, 500, 503, 599),
                         (50, 3, 2, 4, 2, 3, 3, 3, 8, 1, 3, 2, 1))[0]
    reason = rng.choice((REASONS[status], REASONS[status], "", "x y  z"))
    no_body = method == "HEAD" or status in (204, 304)
    body = b"" if status in (204, 304) else body_bytes(rng)
    framing = rng.choices(("length", "chunked", "close"), (55, 30, 15))[0]
    if version == "1.0" and framing == "chunked":
        framing = "length"
    if version == "1.1":
        closes = framing == "close" or rng.random() < 0.12
        conn = "close" if closes else rng.choice((None, None, None, "keep-alive"))
    else:
        closes = framing == "close" or rng.random() < 0.5
        conn = None if closes else "keep-alive"
    if status in (204, 304) and framing == "close":
        framing = "length"
    headers = [header(rng, "Server", "clientfuzz"),
               header(rng, "Content-Type", rng.choice(("text/plain", "application/json")))]
    for _ in range(sf.geometric(rng, 2, 30)):
        headers.append(header(rng, rng.choice(("X-", "x-", "Set-Cookie", "Cache-Control")) +
                              sf.token(rng, 0, 10), sf.token(rng, 0, 60)))
    if conn is not None:
        headers.append(header(rng, "Connection", conn))
    if framing == "length" and status != 204:
        headers.append(header(rng, "Content-Length", str(len(body))))
    elif framing == "chunked" and status != 204:
        headers.append(header(rng, "Transfer-Encoding", "chunked"))
    rng.shuffle(headers)
    out += f"HTTP/{version} {status} {reason}\r\n".encode() + "".join(headers).encode() + b"\r\n"
    if not no_body:
        if framing == "chunked":
            out += sf.PROTOS["http"].chunks(rng, body)
        else:
            out += body
    return out, (b"" if no_body else body), closes


def lying_lengths(rng, method):
    """Framing that lies or contradicts itself."""
    body = rng.randbytes(rng.choice((0, 5, 100, 3000)))
    n = len(body)
    kind = rng.choice(("two_cl", "cl_te", "cl_sign", "cl_huge", "cl_hex", "cl_list", "te_gzip",
                       "te_list", "chunk_size", "chunk_overflow", "chunk_crlf", "longer",
                       "shorter_close", "shorter_stall"))
    head = b"HTTP/1.1 200 OK\r\n"
    actions = []
    if kind == "two_cl":
        data = head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n, n + 1) + body
    elif kind == "cl_te":
        data = head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % n + \
            sf.PROTOS["http"].chunks(rng, body)
    elif kind == "cl_sign":
        data = head + b"Content-Length: %s%d\r\n\r\n" % (rng.choice((b"+", b"-", b" -")), n) + body
    elif kind == "cl_huge":
        data = head + b"Content-Length: " + rng.choice(sf.INTERESTING_NUMS[6:]) + b"\r\n\r\n" + body
    elif kind == "cl_hex":
        data = head + b"Content-Length: 0x%x\r\n\r\n" % n + body
    elif kind == "cl_list":
        data = head + b"Content-Length: %d, %d\r\n\r\n" % (n, n + rng.choice((0, 1))) + body
    elif kind == "te_gzip":
        data = head + b"Transfer-Encoding: gzip\r\n\r\n" + body
    elif kind == "te_list":
        data = head + b"Transfer-Encoding: chunked, gzip\r\n\r\n" + body
    elif kind == "chunk_size":
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + rng.choice(
            (b"zz", b"-1", b" 5", b"5 5", b"")) + b"\r\nhello\r\n0\r\n\r\n"
    elif kind == "chunk_overflow":
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + rng.choice(
            (b"ffffffffffffffffff", b"10000000000000000", b"7fffffffffffffff")) + b"\r\nabc"
    elif kind == "chunk_crlf":
        data = head + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"
    elif kind == "longer":
        data = head + b"Content-Length: %d\r\n\r\n" % n + body + \
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled\n"
    else:  # a body shorter than said, then the end of the connection or nothing more
        data = head + b"Content-Length: %d\r\n\r\n" % (n + rng.randint(1, 5000)) + body
        actions = [{"op": "shut"}] if kind == "shorter_close" else [{"op": "stall"}]
    return data, actions


def huge_head(rng):
    kind = rng.choice(("status_line", "header", "headers", "count"))
    if kind == "status_line":
        return b"HTTP/1.1 200 " + b"O" * rng.choice((4100, 10000, 70000)) + b"\r\n\r\n"
    if kind == "header":
        return b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * rng.choice((8200, 20000, 70000)) + \
            b"\r\nContent-Length: 0\r\n\r\n"
    if kind == "headers":
        return b"HTTP/1.1 200 OK\r\n" + \
            b"".join(b"X-%d: %s\r\n" % (i, b"v" * 90) for i in range(99)) + b"\r\n"
    return b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(
        rng.choice((101, 500, 5000)))) + b"Content-Length: 0\r\n\r\n"


def flood(rng):
    kind = rng.choice(("chunked", "length", "close", "header", "interim", "status"))
    if kind == "chunked":
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", \
            b"%x\r\n" % 8192 + rng.randbytes(8192) + b"\r\n"
    if kind == "length":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n", rng.randbytes(16384)
    if kind == "close":
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", rng.randbytes(16384)
    if kind == "header":
        return b"HTTP/1.1 200 OK\r\nX-Endless: ", b"e" * 16384
    if kind == "interim":
        return b"", b"HTTP/1.1 100 Continue\r\n\r\n" * 64
    return b"HTTP/1.1 200 ", b"s" * 16384


def split(rng, data, actions):
    """data as send actions, split at random with small delays (serverfuzz's splitter)."""
    sf.split_stream(rng, data, actions, [DELAY_BUDGET_MS])


def gen_answer(rng, req, weights):
    """The server's answer to req: a dict with the actions and, for valid answers, the body
    the client must show."""
    kind = rng.choices(list(weights), list(weights.values()))[0]
    actions = []
    entry = {"req": f"{req.method} {req.target}", "kind": kind, "actions": actions}
    if kind == "valid":
        data, body, closes = valid_answer(rng, req.method)
        split(rng, data, actions)
        if closes:
            actions.append({"op": "shut"})
        entry["body"] = body.hex()
        return entry
    if kind == "mutated":
        data, _, _ = valid_answer(rng, req.method)
        split(rng, sf.mutate_generic(rng, data), actions)
        actions.append(rng.choice(({"op": "shut"}, {"op": "rst"}, {"op": "stall"}, None, None)))
    elif kind == "lengths":
        data, after = lying_lengths(rng, req.method)
        split(rng, data, actions)
        actions += after
    elif kind == "garbage":
        split(rng, sf.garbage_bytes(rng, TOKENS), actions)
        actions.append(rng.choice(({"op": "shut"}, {"op": "rst"}, {"op": "stall"}, None)))
    elif kind == "cut":
        data, _, _ = valid_answer(rng, req.method)
        split(rng, data[:rng.randrange(len(data))], actions)
        actions.append(rng.choice(({"op": "shut"}, {"op": "rst"}, {"op": "close"})))
    elif kind == "stall":
        data, _, _ = valid_answer(rng, req.method)
        split(rng, data[:rng.randrange(len(data))], actions)
        actions.append({"op": "stall"})
    elif kind == "flood":
        head, piece = flood(rng)
        split(rng, head, actions)
        actions.append({"op": "flood", "hex": piece.hex()})
    elif kind == "extra":  # an answer, then another that nobody asked for
        data, _, _ = valid_answer(rng, req.method, interim=False)
        more, _, _ = valid_answer(rng, "GET", interim=False)
        split(rng, data + more, actions)
    elif kind == "huge_head":
        split(rng, huge_head(rng), actions)
        actions.append(rng.choice(({"op": "shut"}, {"op": "stall"})))
    entry["actions"] = [a for a in actions if a is not None]
    return entry


# ---------------------------------------------------------------------------------------------
# A run: its client command line, and the answers.

def gen_run(seed, index):
    """Run index of seed: the client's arguments (without the URLs' port)."""
    rng = random.Random(f"clientfuzz {seed}/{index}")
    run = {"seed": seed, "index": index}
    if rng.random() < 0.25:
        run["mode"] = "load"
        run["connections"] = rng.randint(1, 4)
        run["depth"] = rng.randint(1, 4)
        run["duration"] = rng.choice((1, 1, 2))
        run["threads"] = rng.choice((None, 1, 2))
        run["targets"] = [rng.choice(("/", "/load", "/a?b=c"))]
    else:
        run["mode"] = "fetch"
        run["targets"] = [rng.choice(("/", "/x", "/a/b?c=d&e", "/" + sf.token(rng, 1, 40)))
                          for _ in range(rng.randint(1, 6))]
        run["method"] = rng.choices((None, "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"),
                                    (50, 5, 12, 15, 6, 6, 6))[0]
        # -d with POST, PUT or PATCH, or alone (the client picks the method then, as curl).
        run["data"] = sf.token(rng, 0, 200) if run["method"] in ("POST", "PUT", "PATCH") or \
            (run["method"] is None and rng.random() < 0.1) else None
        run["include"] = rng.random() < 0.3
        run["timeout_ms"] = rng.choice((1000, 2000, 3000))
    return run


def client_argv(client, run, port):
    urls = [f"http://127.0.0.1:{port}{t}" for t in run["targets"]]
    if run["mode"] == "load":
        argv = [client, "--load", "--connections", str(run["connections"]), "--depth",
                str(run["depth"]), "--duration", str(run["duration"])]
        if run.get("threads"):
            argv += ["--threads", str(run["threads"])]
        return argv + urls
    argv = [client]
    if run["include"]:
        argv.append("-i")
    if run["method"]:
        argv += ["-X", run["method"]]
    if run["data"] is not None:
        argv += ["-d", run["data"]]
    return argv + ["--timeout-ms", str(run["timeout_ms"])] + urls


def run_bound(run):
    if run["mode"] == "load":
        return run["duration"] + LOAD_SLACK_SECONDS
    return FETCH_SLACK_SECONDS + len(run["targets"]) * (2 * run["timeout_ms"] / 1000.0 + 1)


class FuzzServer:
    """Accepts connections and answers each request with what source(k, j, req) says: k the
    connection in accept order, j the request on it. Records what it played."""

    def __init__(self, run, source):
        self.run = run
        self.source = source
        self.lock = threading.Lock()
        self.conns = []  # per connection, the answers played
        self.answers = []  # (connection, entry) in the order played
        self.errors = []  # what the client did wrong
        self.socks = []
        self.stopping = False
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.stopping:
                    sock.close()
                    return
                k = len(self.conns)
                self.conns.append([])
                self.socks.append(sock)
            threading.Thread(target=self.connection, args=(sock, k), daemon=True).start()

    def error(self, text):
        with self.lock:
            self.errors.append(text)

    def check_request(self, req):
        run = self.run
        if req.header("host") is None:
            self.error(f"a request without Host: {req.method} {req.target}")
        if req.target not in run["targets"]:
            self.error(f"a request for {req.target!r}, none of {run['targets']}")
        if run["mode"] == "fetch":
            want = (run["data"] or "").encode()
            if req.body != want:
                self.error(f"a request body of {len(req.body)} bytes, {req.body[:40]!r}; "
                           f"-d gave {want[:40]!r}")
            if run["method"] and req.method != run["method"]:
                self.error(f"a {req.method} request; -X said {run['method']}")

    def connection(self, sock, k):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = hs.Reader(sock)
        j = 0
        try:
            while True:
                try:
                    req = reader.request()
                except hs.BadRequest as e:
                    self.error(f"connection {k}: the client sent a malformed request: {e}")
                    return
                if req is None:
                    return
                self.check_request(req)
                entry = self.source(k, j, req)
                j += 1
                with self.lock:
                    self.conns[k].append(entry)
                    self.answers.append((k, entry))
                if not self.play(sock, entry["actions"]):
                    return
        except (hs.ClientGone, OSError, ValueError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def play(self, sock, actions):
        """Play an answer's actions; False when the connection is over."""
        for a in actions:
            op = a["op"]
            if op == "send":
                sock.sendall(bytes.fromhex(a["hex"]) * a.get("times", 1))
            elif op == "sleep":
                time.sleep(a["ms"] / 1000.0)
            elif op == "shut":  # FIN, then read and drop until the client closes
                sock.shutdown(socket.SHUT_WR)
                hs.hold(sock)
                return False
            elif op == "rst":
                hs.reset(sock)
                return False
            elif op == "close":
                sock.close()
                return False
            elif op == "stall":
                hs.hold(sock)
                return False
            elif op == "flood":
                piece = bytes.fromhex(a["hex"])
                sock.settimeout(FLOOD_SECONDS)
                end, sent = time.monotonic() + FLOOD_SECONDS, 0
                while time.monotonic() < end and sent < FLOOD_BYTES:
                    sock.sendall(piece)
                    sent += len(piece)
                hs.hold(sock)
                return False
        return True

    def stop(self):
        with self.lock:
            self.stopping = True
            socks = list(self.socks)
        self.listener.close()
        for s in socks:  # ends the threads holding or flooding
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def check_output(run, rc, out, err, answers):
    """The client's results against the contract; a list of what is wrong."""
    wrong = []
    err_text = err.decode(errors="replace")
    if run["mode"] == "fetch":
        all_valid = len(answers) == len(run["targets"]) and \
            all(e["kind"] == "valid" for _, e in answers)
        if all_valid:
            if rc != 0:
                wrong.append(f"every answer was valid, yet exit status {rc}")
            want = b"".join(bytes.fromhex(e["body"]) for _, e in answers)
            if not run["include"] and rc == 0 and out != want:
                at = next((i for i in range(min(len(out), len(want))) if out[i] != want[i]),
                          min(len(out), len(want)))
                wrong.append(f"stdout is not the bodies sent: {len(out)} bytes, {len(want)} "
                             f"expected, first difference at {at}")
        if rc == 1 and not re.search(r"^eddy-http-client: http://127\.0\.0\.1:\d+/.*: ",
                                     err_text, re.M):
            wrong.append("exit status 1 without an error line on stderr")
    elif rc == 0:
        text = out.decode(errors="replace")
        if not re.search(r"^requests/s \S+ +p50 \S+ us +p99 \S+ us +p99\.9 \S+ us +errors \S+",
                         text, re.M):
            wrong.append("load: no figures line")
        js = [ln for ln in text.splitlines() if ln.startswith('{"bench":"http_client"')]
        try:
            d = json.loads(js[-1])
            missing = {"rps", "p50_us", "p99_us", "p999_us", "errors"} - set(d)
            if missing:
                wrong.append(f"load: the JSON line lacks {sorted(missing)}")
        except (IndexError, ValueError) as e:
            wrong.append(f"load: no JSON line ({e})")
    return wrong


def play(args, run, source, label):
    """One client run against a server answering from source; None when it passed, else
    (why, the server's record)."""
    srv = FuzzServer(run, source)
    argv = client_argv(args.client, run, srv.port)
    bound = run_bound(run)
    out_path = os.path.join(args.out, f"clientfuzz-{label}.out")
    err_path = os.path.join(args.out, f"clientfuzz-{label}.err")
    t0 = time.monotonic()
    why = None
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    env=sf.sanitizer_env(), preexec_fn=sf.die_with_parent)
            try:
                rc = proc.wait(bound)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
        took = time.monotonic() - t0
        with open(out_path, "rb") as f:
            out = f.read()
        with open(err_path, "rb") as f:
            err = f.read()
        err_text = err.decode(errors="replace")
        problems = []
        if rc is None:
            problems.append(f"still running after {bound:.0f} s: killed")
        elif rc < 0:
            problems.append(f"killed by signal {-rc}")
        elif rc not in (0, 1):
            tsan = " (ThreadSanitizer's: a report)" if rc == 66 else ""
            problems.append(f"exit status {rc}{tsan}")
        found = [m for m in sf.SANITIZER_MARKERS if m in err_text]
        if found:
            problems.append(f"sanitizer report ({found[0]!r})")
        with srv.lock:
            answers = list(srv.answers)
            problems += srv.errors[:10]
        if rc in (0, 1):
            problems += check_output(run, rc, out, err, answers)
        if problems:
            why = "; ".join(problems) + \
                f"\n  client: {' '.join(argv)}\n  answers: " + \
                ", ".join(f"{k}:{e['kind']}" for k, e in answers[:40]) + \
                f"\n--- client stderr ({err_path}) ---\n" + sf.report_output(err_text)
    finally:
        srv.stop()
    with srv.lock:
        record = [list(c) for c in srv.conns]
    if why is not None:
        return why, record
    kinds = {}
    for _, e in answers:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    if args.verbose:
        print(f"  {label}: {run['mode']}, exit {rc}, {len(record)} connections, "
              f"{len(answers)} answers {kinds}, {took:.1f} s", flush=True)
    os.unlink(out_path)
    os.unlink(err_path)
    return None


def generated(run):
    weights = WEIGHTS_LOAD if run["mode"] == "load" else WEIGHTS_FETCH
    seed, index = run["seed"], run["index"]

    def source(k, j, req):
        return gen_answer(random.Random(f"clientfuzz {seed}/{index}/{k}/{j}"), req, weights)
    return source


def replayed(conns):
    def source(k, j, req):
        if k < len(conns) and j < len(conns[k]):
            return conns[k][j]
        return {"req": f"{req.method} {req.target}", "kind": "beyond the trace",
                "actions": [{"op": "close"}]}
    return source


def write_trace(args, run, record, why, label):
    path = os.path.join(args.out, f"clientfuzz-{label}.json")
    with open(path, "w") as f:
        json.dump({"format": TRACE_FORMAT, "run": run, "failure": why.splitlines()[0],
                   "conns": record}, f, separators=(",", ":"))
        f.write("\n")
    return path


def run_one(args, seed, index):
    run = gen_run(seed, index)
    label = f"{seed}-{index}"
    res = play(args, run, generated(run), label)
    if res is None:
        return True
    why, record = res
    path = write_trace(args, run, record, why, label)
    print(f"clientfuzz: FAILED: seed {seed} run {index} ({run['mode']}): {why}\n"
          f"clientfuzz: trace {path}\n"
          f"clientfuzz: again: {sys.argv[0]} {args.client} --seeds {seed} --run {index}"
          f"   or   --replay {path}", flush=True)
    return False


def run_seed(args, seed, indexes):
    t0 = time.monotonic()
    failed = sum(0 if run_one(args, seed, i) else 1 for i in indexes)
    print(f"clientfuzz: seed {seed}: {len(indexes)} runs, {failed} failed, "
          f"{time.monotonic() - t0:.1f} s", flush=True)
    return failed


def replay(args, path):
    with open(path) as f:
        trace = json.load(f)
    if trace.get("format") != TRACE_FORMAT:
        print(f"clientfuzz: {path}: not a {TRACE_FORMAT} trace", file=sys.stderr)
        sys.exit(2)
    run = trace["run"]
    label = "replay-" + os.path.splitext(os.path.basename(path))[0]
    failed = 0
    for r in range(args.repeat):
        res = play(args, run, replayed(trace["conns"]), label)
        if res is not None:
            failed += 1
            print(f"clientfuzz: FAILED: replay of {path}: {res[0]}", flush=True)
    print(f"clientfuzz: {failed} of {args.repeat} replays of {path} failed")
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("client", help="eddy-http-client (build/<tree>/examples)")
    ap.add_argument("--seeds", help="comma-separated seeds (default: one fresh seed)")
    ap.add_argument("--runs", type=int, default=16, help="client runs per seed (default 16)")
    ap.add_argument("--run", type=int, help="only this run of each seed")
    ap.add_argument("--soak", type=float, metavar="SECONDS", help="fresh seeds until then")
    ap.add_argument("--replay", metavar="TRACE", help="play a trace file")
    ap.add_argument("--repeat", type=int, default=1, help="--replay: this many times")
    ap.add_argument("--out", help="where outputs and traces go (default: a new temporary "
                    "directory)")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per run")
    args = ap.parse_args()
    if not (os.path.isfile(args.client) and os.access(args.client, os.X_OK)):
        print(f"SKIP: {args.client} is not built")
        sys.exit(77)
    args.out = args.out or tempfile.mkdtemp(prefix="clientfuzz-")
    os.makedirs(args.out, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.replay:
        sys.exit(0 if replay(args, args.replay) else 1)
    failed = 0
    if args.soak:
        end = time.monotonic() + args.soak
        seeds = 0
        while time.monotonic() < end:
            seed = int.from_bytes(os.urandom(6), "big")
            seeds += 1
            failed += run_seed(args, seed, range(args.runs))
        print(f"clientfuzz: soak: {seeds} seeds of {args.runs} runs in {args.soak:.0f} s, "
              f"{failed} runs failed; outputs and traces in {args.out}")
    else:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else \
            [int.from_bytes(os.urandom(6), "big")]
        indexes = [args.run] if args.run is not None else range(args.runs)
        for seed in seeds:
            failed += run_seed(args, seed, indexes)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
