#!/usr/bin/env python3
"""eddy-http-server in a real browser: headless Chromium (Debian's, --no-sandbox as root)
loads https://127.0.0.1:PORT/ from the server started with --tls, and the page then fetches
/bytes/N (0 B to 4 MiB) and POSTs /echo (1 B to 1 MiB, and one byte past --max-body: 413)
all at once, comparing every byte. The browser is driven over the DevTools protocol on a
pipe (--remote-debugging-pipe: no node, no WebSocket), which also says what protocol each
response came by: the page and every fetch must have come over h2 (ALPN), on one
connection. Then the same page and fetches over plain http, where Chromium speaks HTTP/1.1
(browsers do not do h2c): the same port serves both. Both servers must then stop on SIGTERM
with status 0, say so, and have nothing from the sanitizers in their output.

    http2_browser.py SERVER CERT_DIR

Chromium runs in a session of its own, killed at the end, its profile in a temporary
directory. Exit status 0: passed; 1: failed; 77: skipped (no chromium, or it cannot start
here).
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DEADLINE = time.monotonic() + 150  # the whole test, well within ctest's TIMEOUT
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer", "SUMMARY:")

# Run in the page: every fetch at once, each body compared byte for byte; what the browser's
# resource timing says about the protocol of each. Returns a JSON-able summary.
PAGE_SCRIPT = r"""
(async () => {
  const pattern = n => { const a = new Uint8Array(n);
    for (let i = 0; i < n; i++) a[i] = 97 + i % 26;
    return a; };
  const random = n => { const a = new Uint8Array(n);
    for (let i = 0; i < n; i += 65536) {
      crypto.getRandomValues(a.subarray(i, Math.min(n, i + 65536)));
    }
    return a; };
  const same = (a, b) => { if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false; return true; };
  const get = async n => { const r = await fetch('/bytes/' + n, {cache: 'no-store'});
    const b = new Uint8Array(await r.arrayBuffer());
    return {what: 'GET /bytes/' + n, status: r.status, length: b.length,
            same: same(b, pattern(n))}; };
  const echo = async n => { const sent = random(n);
    const r = await fetch('/echo', {method: 'POST', body: sent});
    const b = new Uint8Array(await r.arrayBuffer());
    return {what: 'POST /echo ' + n, status: r.status, length: b.length,
            same: r.status === 413 || same(b, sent)}; };
  const results = await Promise.all([0, 1, 16384, 100000, 1048576, 4194304].map(get)
      .concat([1, 65536, 1048576, 1048577].map(echo)));
  const protocols = performance.getEntries()
      .filter(e => e.entryType === 'navigation' || e.entryType === 'resource')
      .map(e => [e.name, e.nextHopProtocol]);
  return {text: document.body.innerText, results, protocols};
})()
"""


class Skip(Exception):
    pass


class Failed(Exception):
    pass


def left():
    return max(0.1, DEADLINE - time.monotonic())


class Server:
    """An eddy-http-server on an ephemeral port; stop() checks its goodbye."""

    def __init__(self, exe, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([exe, "--port", "0", "--threads", "2"] + args,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        end = time.monotonic() + 10
        while True:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.output())
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None or time.monotonic() > end:
                raise Failed(f"the server did not start: {self.output()[-2000:]}")
            time.sleep(0.05)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise Failed("the server did not stop within 10 s of SIGTERM")
        out = self.output()
        found = [m for m in SANITIZER_MARKERS if m in out]
        if found:
            raise Failed(f"a sanitizer report ({found[0]!r}):\n{out[-4000:]}")
        if rc != 0:
            raise Failed(f"the server exited with status {rc}:\n{out[-2000:]}")
        if "stopped by SIGTERM" not in out:
            raise Failed(f"the server did not say it stopped:\n{out[-2000:]}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Browser:
    """Headless Chromium and its DevTools protocol over fds 3 (commands in) and 4 (answers
    and events out), messages separated by NUL bytes."""

    def __init__(self, exe, profile, log_path):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():  # in the child: the pipe's ends as fds 3 and 4
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--ignore-certificate-errors", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            pass_fds=(3, 4), preexec_fn=fds, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=30):
        """A command; its result, the events that came meanwhile kept in self.events."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + min(timeout, left())
        while True:
            m = self.receive(end)
            if m is None:
                raise TimeoutError(f"no answer to {method} within {timeout} s")
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise Failed(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout):
        end = time.monotonic() + min(timeout, left())
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(i)
            m = self.receive(end)
            if m is None:
                raise Failed(f"no {method} within {timeout} s")
            self.events.append(m)

    def receive(self, end):
        while b"\0" not in self.buf:
            wait = end - time.monotonic()
            if wait <= 0 or not select.select([self.from_chrome], [], [], wait)[0]:
                return None
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise Failed(f"the browser went away: {self.tail()}")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def tail(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()[-1500:]

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # what is left of the group
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        self.log.close()


class Tab:
    """A page of the browser's, loaded from url: the script run in it, the responses it
    received (DevTools' Network.responseReceived), closed with what it left in the events."""

    def __init__(self, browser, url):
        self.browser, self.url = browser, url
        self.target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget",
                                    {"targetId": self.target, "flatten": True})["sessionId"]
        browser.send("Network.enable", session=self.session)
        browser.send("Page.enable", session=self.session)
        browser.send("Page.navigate", {"url": url}, session=self.session)
        browser.wait_event("Page.loadEventFired", self.session, 30)

    def run(self, script):
        """The value the script's promise resolves to."""
        got = self.browser.send("Runtime.evaluate", {"expression": script, "awaitPromise": True,
                                                     "returnByValue": True},
                                session=self.session, timeout=60)
        if "exceptionDetails" in got:
            raise Failed(f"{self.url}: the page script failed: {got['exceptionDetails']}")
        return got["result"]["value"]

    def responses(self):
        return [e["params"]["response"] for e in self.browser.events
                if e.get("method") == "Network.responseReceived"
                and e.get("sessionId") == self.session]

    def check_protocols(self, protocols, at_least, want):
        """Every resource the page's timing lists came by want, at least at_least of them;
        over h2 every response on one connection. Returns the connections' count."""
        wrong = [p for p in protocols if p[1] != want]
        if len(protocols) < at_least or wrong:
            raise Failed(f"{self.url}: protocols {protocols}, wanted {want!r} for each")
        conns = {r.get("connectionId") for r in self.responses()}
        if want == "h2" and len(conns) != 1:
            raise Failed(f"{self.url}: over h2 the responses came on connections "
                         f"{sorted(conns)}")
        return len(conns)

    def close(self):
        self.browser.send("Target.closeTarget", {"targetId": self.target})
        self.browser.events = [e for e in self.browser.events
                               if e.get("sessionId") != self.session]


def visit(browser, url, want):
    """Open url in a new tab, run the page script, check it all came by protocol want."""
    tab = Tab(browser, url)
    doc = [r for r in tab.responses() if r["url"] == url]
    if not doc:
        raise Failed(f"{url}: no response seen")
    if doc[0]["status"] != 200 or doc[0].get("protocol") != want:
        raise Failed(f"{url}: status {doc[0]['status']} by {doc[0].get('protocol')!r}, "
                     f"wanted 200 by {want!r}")
    v = tab.run(PAGE_SCRIPT)
    if v["text"] != "Hello, World!":
        raise Failed(f"{url}: the page says {v['text'][:80]!r}")
    for r in v["results"]:
        status = 413 if r["what"] == "POST /echo 1048577" else 200
        if r["status"] != status or not r["same"]:
            raise Failed(f"{url}: {r['what']}: status {r['status']} (wanted {status}), "
                         f"{r['length']} bytes, {'the same' if r['same'] else 'NOT the same'}")
    conns = tab.check_protocols(v["protocols"], 1 + len(v["results"]), want)
    tab.close()
    print(f"http2_browser: {url}: {want}, {len(v['results'])} fetches byte for byte "
          f"({sum(r['length'] for r in v['results'])} bytes), "
          f"{conns} connection{'s' if conns != 1 else ''}", flush=True)


def drive(name, argv, doc, server_args, visits):
    """The frame of a browser test: argv is SERVER CERT_DIR; server_args(tmp) gives the
    servers' own arguments (it may fill tmp first); an eddy-http-server with --tls and one
    without are started with them, then headless Chromium, and visits(browser, tls_port,
    plain_port) checks what it wants; both servers must then stop cleanly. Returns the exit
    status: 0 passed, 1 failed, 2 usage, 77 skipped."""
    if len(argv) != 3:
        print(doc)
        return 2
    exe, certs = argv[1], argv[2]
    chromium = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                     if shutil.which(b)), None)
    if chromium is None:
        print("SKIP: no chromium (scripts/deps.sh installs Debian's)")
        return 77
    tmp = tempfile.mkdtemp(prefix=name.replace("_", "-") + "-")
    servers = []
    browser = None
    try:
        args = server_args(tmp)
        tls = Server(exe, args + ["--tls", os.path.join(certs, "server.pem"),
                                  os.path.join(certs, "server.key")], os.path.join(tmp, "tls.log"))
        servers.append(tls)
        plain = Server(exe, args, os.path.join(tmp, "plain.log"))
        servers.append(plain)
        browser = Browser(chromium, os.path.join(tmp, "profile"),
                          os.path.join(tmp, "chromium.log"))
        try:
            browser.send("Browser.getVersion", timeout=30)
        except (TimeoutError, Failed) as e:
            raise Skip(f"{chromium} did not start here ({e}): {browser.tail()}")
        visits(browser, tls.port, plain.port)
        browser.close()
        browser = None
        for s in servers:
            s.stop()
        print(f"{name}: all checks passed")
        return 0
    except Skip as e:
        print(f"SKIP: {e}")
        return 77
    except (Failed, TimeoutError) as e:
        print(f"FAIL: {e}")
        for s in servers:
            print(f"--- {s.log_path}:\n{s.output()[-3000:]}")
        return 1
    finally:
        if browser is not None:
            browser.close()
        for s in servers:
            s.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    def visits(browser, tls_port, plain_port):
        visit(browser, f"https://127.0.0.1:{tls_port}/", "h2")
        visit(browser, f"http://127.0.0.1:{plain_port}/", "http/1.1")
    return drive("http2_browser", sys.argv, __doc__, lambda tmp: [], visits)


if __name__ == "__main__":
    sys.exit(main())
