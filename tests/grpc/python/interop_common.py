# Shared by interop_client.py and interop_server.py: the message classes, generated at start
# with protoc from Debian's grpc-proto (no service code generation: the peers use grpcio's
# generic stubs and handlers), and the interop flags' boolean form.
#
# The modules are generated into a temporary directory that is removed as soon as they are
# imported: never under a directory named grpc/, which would shadow the grpc package.
import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

PROTO_ROOT = os.environ.get("GRPC_PROTO_DIR", "/usr/share/grpc-proto")


def load_protos():
    """Returns (messages_pb2, empty_pb2, health_pb2) generated from grpc-proto's files."""
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    testing = os.path.join(PROTO_ROOT, "grpc", "testing")
    health = os.path.join(PROTO_ROOT, "grpc", "health", "v1")
    out = tempfile.mkdtemp(prefix="eddy-grpc-py-")
    try:
        # messages.proto and empty.proto import nothing, nor does health.proto: each compiles
        # from its own folder into a top-level module.
        for inc, files in ((testing, ["messages.proto", "empty.proto"]),
                           (health, ["health.proto"])):
            subprocess.run([protoc, "-I", inc, "--python_out", out] + files, check=True)
        sys.path.insert(0, out)
        try:
            return tuple(importlib.import_module(m)
                         for m in ("messages_pb2", "empty_pb2", "health_pb2"))
        finally:
            sys.path.remove(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def flag_bool(text):
    """gflags' booleans: --use_tls, --use_tls=true, --use_tls=false."""
    low = str(text).lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError("not a boolean: %r" % text)


def add_bool(parser, name, help_text):
    parser.add_argument(name, nargs="?", const=True, default=False, type=flag_bool,
                        help=help_text)
