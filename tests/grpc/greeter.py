#!/usr/bin/env python3
"""eddy-greeter-server answers gRPC's own client (grpcio): greeter.py PORT."""
import sys, grpc
ch = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
# HelloRequest{name="eddy"} by hand: field 1, length 4
f = ch.unary_unary("/helloworld.Greeter/SayHello")
r = f(b"\x0a\x04eddy", timeout=5)
assert r == b"\x0a\x0bHello, eddy", r
print("PASS greeter")
