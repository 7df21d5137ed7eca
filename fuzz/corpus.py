#!/usr/bin/env python3
"""The fuzz corpora are kept as one text file each: one input per line, in hex.

    corpus.py unpack FILE DIR   write each input of FILE into DIR (named by its SHA-1)
    corpus.py pack DIR FILE     write the inputs of DIR into FILE, sorted
"""
import hashlib
import os
import sys

HEADER = "# eddy fuzz corpus: one input per line, in hex (fuzz/README.md)\n"


def unpack(src, dst):
    os.makedirs(dst, exist_ok=True)
    with open(src) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            data = bytes.fromhex(line)
            with open(os.path.join(dst, hashlib.sha1(data).hexdigest()), "wb") as out:
                out.write(data)


def pack(src, dst):
    inputs = set()
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f:
            inputs.add(f.read().hex())
    with open(dst, "w") as out:
        out.write(HEADER)
        for line in sorted(inputs):
            out.write(line + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    (unpack if sys.argv[1] == "unpack" else pack)(sys.argv[2], sys.argv[3])
