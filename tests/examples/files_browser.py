#!/usr/bin/env python3
"""eddy-http-server --root in a real browser: headless Chromium (Debian's, driven over the
DevTools protocol on a pipe as http2_browser.py does) loads a page with its assets from a
directory served by the file handler: a stylesheet that must apply, a script served from its
precompressed .gz sibling (Chromium accepts gzip) that must run, an image that must decode,
a subdirectory's index reached through the 301 to "dir/", a 1 MiB file fetched whole and by
a Range (206), each compared by SHA-256 with what the test wrote, and a ".." between encoded
slashes, which must be refused (403; a plain or %2e-encoded one the browser resolves itself). Over https every resource must have come by h2 on one
connection; over plain http by HTTP/1.1. Both servers must then stop on SIGTERM with status 0
and nothing from the sanitizers in their output.

    files_browser.py SERVER CERT_DIR

Exit status 0: passed; 1: failed; 77: skipped (no chromium, or it cannot start here).
"""
import gzip
import hashlib
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http2_browser import Failed, Tab, drive  # noqa: E402

BIG = 1 << 20
SCRIPT = "document.body.dataset.script = 'ran ' + (6 * 7);\n" + "// padding\n" * 200


def png(width, height):
    """A small RGB PNG, written by hand (no imaging library needed)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    raw = b"".join(b"\0" + b"".join(bytes((x * 40 % 256, y * 60 % 256, 200))
                                    for x in range(width)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_root(root):
    """The site; returns the SHA-256 of the big file and of its range 1000-66535."""
    big = os.urandom(BIG)
    files = {
        "index.html": (
            "<!doctype html><html><head><meta charset=utf-8><title>eddy files</title>"
            "<link rel=stylesheet href=style.css></head><body><p id=p>served from a root</p>"
            "<img id=img src=img/dot.png><script src=app.js></script></body></html>").encode(),
        "style.css": b"#p { color: rgb(1, 2, 3); }\n",
        # The plain script must not be what runs: the .gz sibling is served to Chromium.
        "app.js": b"document.body.dataset.script = 'the plain one';\n",
        "app.js.gz": gzip.compress(SCRIPT.encode()),
        "img/dot.png": png(2, 3),
        "sub/index.html": b"<!doctype html><p>the index of sub</p>",
        "big.bin": big,
        "secret.txt": b"outside the page, inside the root",
    }
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return hashlib.sha256(big).hexdigest(), hashlib.sha256(big[1000:66536]).hexdigest()


PAGE_SCRIPT = r"""
(async () => {
  const hex = async b => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', b)))
      .map(x => x.toString(16).padStart(2, '0')).join('');
  const img = document.getElementById('img');
  if (!img.complete) await new Promise(r => { img.onload = r; img.onerror = r; });
  const whole = await fetch('/big.bin', {cache: 'no-store'});
  const wholeHash = await hex(await whole.arrayBuffer());
  const part = await fetch('/big.bin', {cache: 'no-store', headers: {Range: 'bytes=1000-66535'}});
  const partHash = await hex(await part.arrayBuffer());
  const sub = await fetch('/sub', {cache: 'no-store'});
  const subText = await sub.text();
  const up = await fetch('/img%2f..%2fsecret.txt', {cache: 'no-store'});
  const protocols = performance.getEntries()
      .filter(e => e.entryType === 'navigation' || e.entryType === 'resource')
      .map(e => [e.name, e.nextHopProtocol]);
  return {
    color: getComputedStyle(document.getElementById('p')).color,
    script: document.body.dataset.script || '',
    img: [img.naturalWidth, img.naturalHeight],
    whole: [whole.status, wholeHash],
    part: [part.status, part.headers.get('content-range'), partHash],
    sub: [sub.status, sub.redirected, sub.url, subText],
    up: up.status,
    protocols,
  };
})()
"""


def visit(browser, url, want, hashes):
    """Open url in a new tab, check what the page says, and the protocol of everything."""
    tab = Tab(browser, url)
    v = tab.run(PAGE_SCRIPT)
    checks = [
        ("the stylesheet applies", v["color"] == "rgb(1, 2, 3)", v["color"]),
        ("the script ran from app.js.gz", v["script"] == "ran 42", v["script"]),
        ("the image decoded", v["img"] == [2, 3], v["img"]),
        ("big.bin whole", v["whole"] == [200, hashes[0]], v["whole"]),
        ("big.bin bytes 1000-66535",
         v["part"] == [206, f"bytes 1000-66535/{BIG}", hashes[1]], v["part"]),
        ("/sub through its 301", v["sub"][0] == 200 and v["sub"][1] and
         v["sub"][2].endswith("/sub/") and "the index of sub" in v["sub"][3], v["sub"]),
        ("an encoded slash before .. refused", v["up"] == 403, v["up"]),
    ]
    for what, ok, seen in checks:
        if not ok:
            raise Failed(f"{url}: {what}: no, {seen!r}")
    encodings = {r["url"].rsplit("/", 1)[-1]:
                 {k.lower(): x for k, x in r["headers"].items()}.get("content-encoding")
                 for r in tab.responses()}
    if encodings.get("app.js") != "gzip":
        raise Failed(f"{url}: app.js came with Content-Encoding {encodings.get('app.js')!r}")
    tab.check_protocols(v["protocols"], 8, want)
    tab.close()
    print(f"files_browser: {url}: {want}, {len(v['protocols'])} resources, every check passed",
          flush=True)


def main():
    hashes = []

    def server_args(tmp):
        root = os.path.join(tmp, "www")
        hashes.extend(make_root(root))
        return ["--root", root]

    def visits(browser, tls_port, plain_port):
        visit(browser, f"https://127.0.0.1:{tls_port}/", "h2", hashes)
        visit(browser, f"http://127.0.0.1:{plain_port}/", "http/1.1", hashes)
    return drive("files_browser", sys.argv, __doc__, server_args, visits)


if __name__ == "__main__":
    sys.exit(main())
