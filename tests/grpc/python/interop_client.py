#!/usr/bin/python3
# A gRPC interop client on Python's grpcio (Debian's python3-grpcio): the cases of gRPC's
# doc/interop-test-descriptions.md that need no cloud or proxy, through generic stubs (no
# service code generation). It is a reference peer for eddy's gRPC server
# (tests/grpc/interop.sh).
#
#   interop_client.py --server_host H --server_port P --test_case all|NAME[,NAME...]
#                     [--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]
#
# "all" is the 14 cases; health_check (grpc.health.v1.Health/Check of "" is SERVING) runs when
# named. Prints "PASS <case>" or "FAIL <case>: <reason>" per case; exits 0 only when all passed.
import argparse
import queue
import sys
import traceback

import grpc

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from interop_common import add_bool, load_protos  # noqa: E402

m, e, h = load_protos()
SERVICE = "/grpc.testing.TestService/"
TIMEOUT = 20  # seconds: no call of a case should take long; a stuck one fails, not hangs
WHITESPACE_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
ECHO_INITIAL = ("x-grpc-test-echo-initial", "test_initial_metadata_value")
ECHO_TRAILING = ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab")


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Stubs:
    def __init__(self, channel):
        self.channel = channel

        def mk(kind, name, req, resp):
            return getattr(channel, kind)(SERVICE + name,
                                          request_serializer=req.SerializeToString,
                                          response_deserializer=resp.FromString)

        self.empty = mk("unary_unary", "EmptyCall", e.Empty, e.Empty)
        self.unary = mk("unary_unary", "UnaryCall", m.SimpleRequest, m.SimpleResponse)
        self.input = mk("stream_unary", "StreamingInputCall", m.StreamingInputCallRequest,
                        m.StreamingInputCallResponse)
        self.output = mk("unary_stream", "StreamingOutputCall", m.StreamingOutputCallRequest,
                         m.StreamingOutputCallResponse)
        self.duplex = mk("stream_stream", "FullDuplexCall", m.StreamingOutputCallRequest,
                         m.StreamingOutputCallResponse)


class Pipe:
    """A request iterator the case feeds one message at a time; close() half-closes."""

    def __init__(self):
        self.q = queue.Queue()

    def __iter__(self):
        return self

    def __next__(self):
        x = self.q.get()
        if x is None:
            raise StopIteration
        return x

    def add(self, x):
        self.q.put(x)

    def close(self):
        self.q.put(None)


def zeros(n):
    return m.Payload(body=bytes(n))


def body_ok(resp, size):
    return len(resp.payload.body) == size and not any(resp.payload.body)


def expect_error(code, fn, *args, **kw):
    """Runs fn, which must raise an RpcError with this code; returns the error."""
    try:
        fn(*args, **kw)
    except grpc.RpcError as err:
        check(err.code() == code, "status %s (%r), want %s" % (err.code(), err.details(), code))
        return err
    raise Failure("the call succeeded, want %s" % code)


def duplex_request(out=None, inn=0, status=None):
    r = m.StreamingOutputCallRequest(payload=zeros(inn))
    if out is not None:
        r.response_parameters.add(size=out)
    if status is not None:
        r.response_status.CopyFrom(status)
    return r


def empty_unary(s):
    resp = s.empty(e.Empty(), timeout=TIMEOUT)
    check(isinstance(resp, e.Empty), "no Empty response")


def large_unary(s):
    resp = s.unary(m.SimpleRequest(response_size=314159, payload=zeros(271828)), timeout=TIMEOUT)
    check(body_ok(resp, 314159), "response body of %d bytes" % len(resp.payload.body))


def client_streaming(s):
    reqs = [m.StreamingInputCallRequest(payload=zeros(n)) for n in (27182, 8, 1828, 45904)]
    resp = s.input(iter(reqs), timeout=TIMEOUT)
    check(resp.aggregated_payload_size == 74922,
          "aggregated_payload_size %d" % resp.aggregated_payload_size)


def server_streaming(s):
    sizes = [31415, 9, 2653, 58979]
    req = m.StreamingOutputCallRequest(
        response_parameters=[m.ResponseParameters(size=n) for n in sizes])
    call = s.output(req, timeout=TIMEOUT)
    got = [r for r in call]
    check([len(r.payload.body) for r in got] == sizes,
          "response sizes %s" % [len(r.payload.body) for r in got])
    check(all(body_ok(r, n) for r, n in zip(got, sizes)), "non-zero payload")
    check(call.code() == grpc.StatusCode.OK, "status %s" % call.code())


def ping_pong(s):
    p = Pipe()
    call = s.duplex(p, timeout=TIMEOUT)
    try:
        for out, inn in zip((31415, 9, 2653, 58979), (27182, 8, 1828, 45904)):
            p.add(duplex_request(out, inn))
            resp = next(call)
            check(body_ok(resp, out), "response of %d bytes, want %d"
                  % (len(resp.payload.body), out))
    finally:
        p.close()
    check(next(call, None) is None, "a fifth response")
    check(call.code() == grpc.StatusCode.OK, "status %s" % call.code())


def empty_stream(s):
    p = Pipe()
    p.close()
    call = s.duplex(p, timeout=TIMEOUT)
    got = list(call)
    check(got == [], "%d responses" % len(got))
    check(call.code() == grpc.StatusCode.OK, "status %s" % call.code())


def cancel_after_begin(s):
    p = Pipe()
    fut = s.input.future(p, timeout=TIMEOUT)
    try:
        fut.cancel()
    finally:
        p.close()
    check(fut.cancelled(), "not cancelled")
    check(fut.code() == grpc.StatusCode.CANCELLED, "status %s" % fut.code())


def cancel_after_first_response(s):
    p = Pipe()
    call = s.duplex(p, timeout=TIMEOUT)
    try:
        p.add(duplex_request(31415, 27182))
        resp = next(call)
        check(body_ok(resp, 31415), "first response of %d bytes" % len(resp.payload.body))
        call.cancel()
        expect_error(grpc.StatusCode.CANCELLED, next, call)
    finally:
        p.close()
    check(call.code() == grpc.StatusCode.CANCELLED, "status %s" % call.code())


def timeout_on_sleeping_server(s):
    p = Pipe()
    call = s.duplex(p, timeout=0.001)
    try:
        p.add(duplex_request(None, 27182))
        expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, next, call)
    finally:
        p.close()


def status_code_and_message(s, message="test status message", duplex=True):
    st = m.EchoStatus(code=2, message=message)
    err = expect_error(grpc.StatusCode.UNKNOWN, s.unary, m.SimpleRequest(response_status=st),
                       timeout=TIMEOUT)
    check(err.details() == message, "unary: message %r, want %r" % (err.details(), message))
    if duplex:
        p = Pipe()
        p.add(duplex_request(status=st))
        p.close()
        err = expect_error(grpc.StatusCode.UNKNOWN, lambda: list(s.duplex(p, timeout=TIMEOUT)))
        check(err.details() == message,
              "duplex: message %r, want %r" % (err.details(), message))


def special_status_message(s):
    status_code_and_message(s, WHITESPACE_MESSAGE, duplex=False)


def custom_metadata(s):
    md = (ECHO_INITIAL, ECHO_TRAILING)
    resp, call = s.unary.with_call(m.SimpleRequest(response_size=314159, payload=zeros(271828)),
                                   metadata=md, timeout=TIMEOUT)
    check(body_ok(resp, 314159), "unary: response of %d bytes" % len(resp.payload.body))
    check(ECHO_INITIAL in call.initial_metadata(),
          "unary: initial metadata %s" % (call.initial_metadata(),))
    check(ECHO_TRAILING in call.trailing_metadata(),
          "unary: trailing metadata %s" % (call.trailing_metadata(),))

    p = Pipe()
    p.add(duplex_request(314159, 271828))
    p.close()
    call = s.duplex(p, metadata=md, timeout=TIMEOUT)
    got = list(call)
    check(len(got) == 1 and body_ok(got[0], 314159), "duplex: responses %s"
          % [len(r.payload.body) for r in got])
    check(call.code() == grpc.StatusCode.OK, "duplex: status %s" % call.code())
    check(ECHO_INITIAL in call.initial_metadata(),
          "duplex: initial metadata %s" % (call.initial_metadata(),))
    check(ECHO_TRAILING in call.trailing_metadata(),
          "duplex: trailing metadata %s" % (call.trailing_metadata(),))


def unimplemented(s, path):
    call = s.channel.unary_unary(path, request_serializer=e.Empty.SerializeToString,
                                 response_deserializer=e.Empty.FromString)
    expect_error(grpc.StatusCode.UNIMPLEMENTED, call, e.Empty(), timeout=TIMEOUT)


def unimplemented_method(s):
    unimplemented(s, SERVICE + "UnimplementedCall")


def unimplemented_service(s):
    unimplemented(s, "/grpc.testing.UnimplementedService/UnimplementedCall")


def health_check(s):
    """Not one of gRPC's interop cases: grpc.health.v1.Health/Check of "" answers SERVING."""
    check_call = s.channel.unary_unary("/grpc.health.v1.Health/Check",
                                       request_serializer=h.HealthCheckRequest.SerializeToString,
                                       response_deserializer=h.HealthCheckResponse.FromString)
    resp = check_call(h.HealthCheckRequest(service=""), timeout=TIMEOUT)
    check(resp.status == h.HealthCheckResponse.SERVING, "status %s" % resp.status)


CASES = [empty_unary, large_unary, client_streaming, server_streaming, ping_pong, empty_stream,
         cancel_after_begin, cancel_after_first_response, timeout_on_sleeping_server,
         status_code_and_message, special_status_message, custom_metadata,
         unimplemented_method, unimplemented_service]
EXTRA = [health_check]  # run only when named
BY_NAME = {c.__name__: c for c in CASES + EXTRA}


def main():
    ap = argparse.ArgumentParser(description="gRPC interop client (Python grpcio)")
    ap.add_argument("--server_host", default="127.0.0.1")
    ap.add_argument("--server_port", type=int, required=True)
    ap.add_argument("--server_host_override", default="",
                    help="the name TLS checks and :authority carries")
    ap.add_argument("--test_case", default="all", help="all, or names separated by commas")
    add_bool(ap, "--use_tls", "connect over TLS")
    add_bool(ap, "--use_test_ca", "trust --ca instead of the system's roots")
    ap.add_argument("--ca", help="PEM CA certificate (with --use_test_ca)")
    args = ap.parse_args()
    names = []
    for n in args.test_case.split(","):
        names += [c.__name__ for c in CASES] if n == "all" else [n] if n else []
    unknown = [n for n in names if n not in BY_NAME]
    if unknown or not names:
        ap.error("unknown test case(s): %s; known: all, %s"
                 % (", ".join(unknown), ", ".join(BY_NAME)))
    if args.use_test_ca and not args.ca:
        ap.error("--use_test_ca needs --ca FILE")

    target = "%s:%d" % (args.server_host, args.server_port)
    if args.use_tls:
        root = open(args.ca, "rb").read() if args.use_test_ca else None
        options = []
        if args.server_host_override:
            options.append(("grpc.ssl_target_name_override", args.server_host_override))
            options.append(("grpc.default_authority", args.server_host_override))
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root),
                                      options=options)
    else:
        options = []
        if args.server_host_override:
            options.append(("grpc.default_authority", args.server_host_override))
        channel = grpc.insecure_channel(target, options=options)
    stubs = Stubs(channel)

    failed = 0
    for name in names:
        try:
            BY_NAME[name](stubs)
            print("PASS", name, flush=True)
        except Failure as f:
            failed += 1
            print("FAIL %s: %s" % (name, f), flush=True)
        except grpc.RpcError as err:
            failed += 1
            print("FAIL %s: status %s: %r" % (name, err.code(), err.details()), flush=True)
        except Exception as x:  # a bug in the case or the library: say where
            failed += 1
            where = traceback.extract_tb(x.__traceback__)[-1]
            print("FAIL %s: %s: %s (line %d)" % (name, type(x).__name__, x, where.lineno),
                  flush=True)
    channel.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
