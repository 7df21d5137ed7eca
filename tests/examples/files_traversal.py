#!/usr/bin/env python3
"""Traversal corpus against eddy-http-server --root: hundreds of request targets, generated
here, that try to leave the root (dot segments plain, percent-encoded, double-encoded, as
overlong or fullwidth UTF-8, with backslashes and NULs, absolute paths, links inside the root
that point out) are sent as raw HTTP/1.1 requests; none may answer with the secret placed next
to the root, none may be a 5xx, and the server must still serve its index afterwards.

    files_traversal.py PORT ROOT SECRET_TOKEN
"""
import itertools
import socket
import sys

port, root, token = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()

# Ways to write "..", "/" and "\" that a decoder, a normaliser or a file system might turn
# into the real thing.
DOTDOTS = ["..", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "%252e%252e", "%c0%ae%c0%ae",
           "%e0%80%ae%e0%80%ae", "%ef%bc%8e%ef%bc%8e", "%uff0e%uff0e", "...", "....", "..%00",
           "%2e%2e%00", "..;", "%%32%65%%32%65"]
SLASHES = ["/", "%2f", "%2F", "%252f", "\\", "%5c", "%5C", "%c0%af", "%e0%80%af", "%c1%9c",
           "%ef%bc%8f", "//", "/./"]
TARGETS = ["secret.txt", "root/../secret.txt", "secret.txt%00.html", "secret.txt%00"]


def corpus():
    seen = set()
    for dd, sl, depth, prefix, target in itertools.product(
            DOTDOTS, SLASHES, (1, 2, 4), ("/", "/sub/", "/./"), TARGETS[:2]):
        t = prefix + (dd + sl) * depth + target
        if t not in seen:
            seen.add(t)
            yield t
    absolute = root.rstrip("/").rsplit("/", 1)[0] + "/secret.txt"
    for t in [absolute, "/" + absolute, absolute.replace("/", "%2f"), "/%2f" + absolute[1:],
              "/etc/passwd", "//etc/passwd", "/%2fetc%2fpasswd", "/\\etc\\passwd",
              "/link.txt", "/linkdir/secret.txt", "/linkdir/%2e%2e/secret.txt",
              "/sub/../../secret.txt", "/sub/%2e%2e/%2e%2e/secret.txt", "/%00", "/sub%00/",
              "/" + "a/" * 3000 + "secret.txt", "/" + "../" * 2000 + "secret.txt",
              "/" + "x" * 5000, "*", "http://127.0.0.1/../secret.txt", "secret.txt"]:
        yield t


def fetch(target):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET " + target.encode("latin-1") + b" HTTP/1.1\r\nHost: x\r\n"
                  b"Connection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    finally:
        s.close()


def main():
    n = 0
    for target in corpus():
        data = fetch(target)
        status = data[9:12]
        if token in data:
            sys.exit(f"FAIL: {target!r} answered with the secret:\n{data[:300]!r}")
        if status.startswith(b"5") or status == b"200" and b"secret" in target.encode():
            sys.exit(f"FAIL: {target!r} answered {data[:200]!r}")
        n += 1
    if b"200 OK" not in fetch("/"):
        sys.exit("FAIL: the index is not served after the corpus")
    print(f"traversal: {n} targets, none left the root")


main()
