#!/usr/bin/env python3
"""A gRPC server of Python's grpcio for tests/codec/test_grpc_client_peer.c: messages are
bytes (no protobuf), the methods generic handlers under /peer.Test/. It listens on
127.0.0.1, an ephemeral port, prints the port on its first line, and stops when its stdin
closes (the test ended, however). Without grpcio it prints SKIP and exits 3."""
import sys
import threading
import time
from concurrent import futures

try:
    import grpc
except ImportError:
    print("SKIP", flush=True)
    sys.exit(3)

# The last Sleep call: how it ended ("cancelled" once the client went away).
last_sleep = {"end": ""}
sleep_done = threading.Event()


def echo(request, context):
    """The request back; the x- metadata back as headers; trailers of our own."""
    md = [(k, v) for k, v in context.invocation_metadata() if k.startswith("x-")]
    context.send_initial_metadata(md)
    context.set_trailing_metadata((("x-trailer", "done"), ("x-trailer-bin", b"\x00\x01\xff")))
    return request


def status(request, context):
    """The request is "<code> <message>": that status."""
    code, _, message = request.decode("utf-8").partition(" ")
    found = [s for s in grpc.StatusCode if s.value[0] == int(code)][0]
    context.abort(found, message)


def server_stream(request, context):
    for i in range(int(request)):
        yield b"r%d" % i


def client_stream(requests, context):
    count = size = 0
    for r in requests:
        count += 1
        size += len(r)
    return b"%d/%d" % (count, size)


def bidi(requests, context):
    for r in requests:
        yield r


def sleep(request, context):
    """Answers after 10 s unless the call ends first (a deadline, a cancel)."""
    sleep_done.clear()
    last_sleep["end"] = ""

    def gone():
        last_sleep["end"] = "cancelled"
        sleep_done.set()

    context.add_callback(gone)
    deadline = time.monotonic() + 10
    while context.is_active() and time.monotonic() < deadline:
        time.sleep(0.01)
    return request


def sleep_end(request, context):
    """How the last Sleep ended, once it did (waits up to 5 s)."""
    sleep_done.wait(5)
    return last_sleep["end"].encode()


def gzip(request, context):
    context.set_compression(grpc.Compression.Gzip)
    return request


def main():
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Status": grpc.unary_unary_rpc_method_handler(status),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Sleep": grpc.unary_unary_rpc_method_handler(sleep),
        "SleepEnd": grpc.unary_unary_rpc_method_handler(sleep_end),
        "Gzip": grpc.unary_unary_rpc_method_handler(gzip),
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        handlers=[grpc.method_handlers_generic_handler("peer.Test", handlers)],
        # No SO_REUSEPORT (grpcio's default): two peers at once could share a port 0 gave.
        options=[("grpc.so_reuseport", 0),
                 ("grpc.max_receive_message_length", 8 << 20),
                 ("grpc.max_send_message_length", 8 << 20)],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write("%d\n" % port)  # one write: the test closes its end after the line
    sys.stdout.flush()
    sys.stdin.read()  # until the test closes our stdin, or dies
    server.stop(0)


if __name__ == "__main__":
    main()
