#!/usr/bin/python3
# A gRPC interop server on Python's grpcio (Debian's python3-grpcio): grpc.testing.TestService
# (EmptyCall, UnaryCall, StreamingInputCall, StreamingOutputCall, FullDuplexCall, with Echo
# Status and Echo Metadata; UnimplementedCall left out) and grpc.health.v1.Health/Check, through
# generic handlers: no service code generation. It is a reference peer for eddy's gRPC client
# (tests/grpc/interop.sh).
#
#   interop_server.py --port P [--use_tls --cert FILE --key FILE]
#
# It listens on 127.0.0.1 only; with --port 0 on an ephemeral port. Once listening it prints
# one line "PORT <n>" on stdout. SIGTERM or SIGINT stop it (status 0).
import argparse
import signal
import sys
import time
from concurrent import futures

# SIGTERM and SIGINT wait for sigwait in main(): every thread grpc starts inherits the mask.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

import grpc  # noqa: E402 (after the mask)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from interop_common import add_bool, load_protos  # noqa: E402

m, e, h = load_protos()
CODES = {s.value[0]: s for s in grpc.StatusCode}
ECHO_INITIAL = "x-grpc-test-echo-initial"
ECHO_TRAILING = "x-grpc-test-echo-trailing-bin"


def echo_metadata(ctx):
    """Echo Metadata: the two keys go back, in the headers and in the trailers."""
    md = dict(ctx.invocation_metadata())
    if ECHO_INITIAL in md:
        ctx.send_initial_metadata(((ECHO_INITIAL, md[ECHO_INITIAL]),))
    if ECHO_TRAILING in md:
        ctx.set_trailing_metadata(((ECHO_TRAILING, md[ECHO_TRAILING]),))


def echo_status(ctx, req):
    """Echo Status: a request with a response_status ends the call with it."""
    if req.HasField("response_status") and req.response_status.code != 0:
        code = CODES.get(req.response_status.code, grpc.StatusCode.UNKNOWN)
        ctx.abort(code, req.response_status.message)


def payload(size):
    return m.Payload(body=bytes(size))


def empty_call(req, ctx):
    echo_metadata(ctx)
    return e.Empty()


def unary_call(req, ctx):
    echo_metadata(ctx)
    echo_status(ctx, req)
    return m.SimpleResponse(payload=payload(req.response_size))


def streaming_input_call(req_iter, ctx):
    total = sum(len(r.payload.body) for r in req_iter)
    return m.StreamingInputCallResponse(aggregated_payload_size=total)


def respond(params):
    for p in params:
        if p.interval_us > 0:
            time.sleep(p.interval_us / 1e6)
        yield m.StreamingOutputCallResponse(payload=payload(p.size))


def streaming_output_call(req, ctx):
    echo_metadata(ctx)
    yield from respond(req.response_parameters)
    echo_status(ctx, req)


def full_duplex_call(req_iter, ctx):
    # One response per ResponseParameters of each request, as each request comes; a request
    # without any gets none (timeout_on_sleeping_server's "sleeping server").
    echo_metadata(ctx)
    for req in req_iter:
        echo_status(ctx, req)
        yield from respond(req.response_parameters)


def health_check(req, ctx):
    if req.service in ("", "grpc.testing.TestService"):
        return h.HealthCheckResponse(status=h.HealthCheckResponse.SERVING)
    ctx.abort(grpc.StatusCode.NOT_FOUND, "unknown service")


def handlers():
    def rpc(kind, fn, req, resp):
        make = getattr(grpc, kind + "_rpc_method_handler")
        return make(fn, request_deserializer=req.FromString,
                    response_serializer=resp.SerializeToString)

    test = grpc.method_handlers_generic_handler("grpc.testing.TestService", {
        "EmptyCall": rpc("unary_unary", empty_call, e.Empty, e.Empty),
        "UnaryCall": rpc("unary_unary", unary_call, m.SimpleRequest, m.SimpleResponse),
        "StreamingInputCall": rpc("stream_unary", streaming_input_call,
                                  m.StreamingInputCallRequest, m.StreamingInputCallResponse),
        "StreamingOutputCall": rpc("unary_stream", streaming_output_call,
                                   m.StreamingOutputCallRequest,
                                   m.StreamingOutputCallResponse),
        "FullDuplexCall": rpc("stream_stream", full_duplex_call,
                              m.StreamingOutputCallRequest, m.StreamingOutputCallResponse),
    })
    health = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": rpc("unary_unary", health_check, h.HealthCheckRequest, h.HealthCheckResponse),
    })
    return (test, health)


def main():
    ap = argparse.ArgumentParser(description="gRPC interop server (Python grpcio)")
    ap.add_argument("--port", type=int, required=True)
    add_bool(ap, "--use_tls", "serve TLS with --cert and --key")
    ap.add_argument("--cert", help="PEM certificate chain (with --use_tls)")
    ap.add_argument("--key", help="PEM private key (with --use_tls)")
    args = ap.parse_args()
    if args.use_tls and not (args.cert and args.key):
        ap.error("--use_tls needs --cert and --key")

    # Sleeping-server calls hold a worker each until their client gives up.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32),
                         handlers=handlers())
    address = "127.0.0.1:%d" % args.port
    if args.use_tls:
        with open(args.key, "rb") as k, open(args.cert, "rb") as c:
            creds = grpc.ssl_server_credentials(((k.read(), c.read()),))
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    if not port:
        sys.exit("interop_server.py: cannot listen on " + address)
    server.start()
    print("PORT %d" % port, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
