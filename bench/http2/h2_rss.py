#!/usr/bin/env python3
"""What an idle connection and an open stream cost an HTTP server in resident memory
(bench/http2/run.sh, case rss).

    python3 bench/http2/h2_rss.py --pgid PGID --port PORT [--tls] [--h1] [--conns N]
                                  [--stream-conns C] [--streams M] [--idle-wait S]

The server listens on 127.0.0.1:PORT (TLS with --tls: ALPN h2, or http/1.1 with --h1) and
leads process group PGID; its memory is the VmRSS of every process of that group. Steps:

  1. one connection asks GET / and closes; then the group's RSS (before);
  2. --conns connections (1000) each ask GET / once (HTTP/2: the client preface, SETTINGS
     both ways and their ACKs, one stream; HTTP/1.1: one keep-alive request) and stay open,
     sending nothing more; after 0.5 s (--idle-wait) the RSS again (idle): (idle - before) /
     N bytes per idle connection (eddy gives back pages of an HTTP/2 connection that read
     nothing for 2 s: --idle-wait 5 sees them gone);
  3. HTTP/2 only: on --stream-conns of them (10), --streams streams each (100, at most the
     server's SETTINGS_MAX_CONCURRENT_STREAMS) open with POST /echo: HEADERS without
     END_STREAM, a body that never comes, so each stays open on the server; after 0.5 s the
     RSS again (streams): (streams - idle) / streams bytes per open stream. A stream the
     server answered or reset meanwhile is counted in "answered" (it did not stay open).

Prints one line of key=value pairs (sizes in kB, bytes per connection and per stream), then
closes everything. Needs python3-h2 for HTTP/2. Exits 1 when a connection fails.
"""
import argparse
import os
import socket
import ssl
import sys
import time


def group_rss_kb(pgid):
    """VmRSS summed over the processes of group pgid."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{name}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or a kernel thread
    return total


class Conn:
    """One client connection: a socket (TLS or not) and, for HTTP/2, its h2 state."""

    def __init__(self, args):
        self.args = args
        sock = socket.create_connection(("127.0.0.1", args.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if args.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["http/1.1"] if args.h1 else ["h2"])
            sock = ctx.wrap_socket(sock)
            want = "http/1.1" if args.h1 else "h2"
            if sock.selected_alpn_protocol() != want:
                raise RuntimeError(f"ALPN chose {sock.selected_alpn_protocol()}, not {want}")
        self.sock = sock
        self.h2 = None
        if not args.h1:
            import h2.config
            import h2.connection

            self.h2 = h2.connection.H2Connection(
                h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            self.h2.initiate_connection()
            self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def headers(self, method, path):
        scheme = "https" if self.args.tls else "http"
        return [(":method", method), (":scheme", scheme),
                (":authority", f"127.0.0.1:{self.args.port}"), (":path", path)]

    def get_once(self):
        """GET / answered whole; for HTTP/2 also the server's SETTINGS seen and ACKed."""
        if self.h2 is None:
            self.sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                got += self.recv()
            head, body = got.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(body) < length:
                body += self.recv()
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"GET / answered {head[:40]!r}")
            return
        import h2.events

        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, self.headers("GET", "/"), end_stream=True)
        self.flush()
        ended = settings = False
        while not (ended and settings):
            for ev in self.h2.receive_data(self.recv()):
                if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    ended = True
                elif isinstance(ev, h2.events.RemoteSettingsChanged):
                    settings = True
                elif isinstance(ev, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                    raise RuntimeError(f"GET / failed: {ev}")
            self.flush()

    def recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        return data

    def open_streams(self, m):
        """m streams of POST /echo whose body never comes; returns how many were opened."""
        limit = self.h2.remote_settings.max_concurrent_streams
        m = min(m, limit - self.h2.open_outbound_streams)
        for _ in range(m):
            sid = self.h2.get_next_available_stream_id()
            self.h2.send_headers(sid, self.headers("POST", "/echo") +
                                 [("content-type", "application/octet-stream")])
        self.flush()
        return m

    def answered(self):
        """Streams the server answered or reset since, read without waiting."""
        import h2.events

        n = 0
        self.sock.setblocking(False)
        try:
            while True:
                try:
                    data = self.sock.recv(65536)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                if not data:
                    raise RuntimeError("the server closed a connection with open streams")
                for ev in self.h2.receive_data(data):
                    if isinstance(ev, (h2.events.ResponseReceived, h2.events.StreamReset)):
                        n += 1
                self.flush()
        finally:
            self.sock.setblocking(True)
        return n

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pgid", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--h1", action="store_true")
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--stream-conns", type=int, default=10)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--idle-wait", type=float, default=0.5)
    args = ap.parse_args()

    conns = []
    try:
        c = Conn(args)
        c.get_once()
        c.close()
        time.sleep(0.3)
        before = group_rss_kb(args.pgid)
        for _ in range(args.conns):
            c = Conn(args)
            conns.append(c)
            c.get_once()
        time.sleep(args.idle_wait)
        idle = group_rss_kb(args.pgid)
        out = {"conns": len(conns), "rss_before_kb": before, "rss_idle_kb": idle,
               "idle_bytes_per_conn": round((idle - before) * 1024 / len(conns))}
        if not args.h1 and args.stream_conns > 0 and args.streams > 0:
            opened = sum(c.open_streams(args.streams) for c in conns[:args.stream_conns])
            time.sleep(0.5)
            answered = sum(c.answered() for c in conns[:args.stream_conns])
            streams = group_rss_kb(args.pgid)
            out.update({"streams": opened, "rss_streams_kb": streams,
                        "bytes_per_stream": round((streams - idle) * 1024 / max(opened, 1)),
                        "answered": answered})
        print(" ".join(f"{k}={v}" for k, v in out.items()))
    except (OSError, RuntimeError) as e:
        print(f"h2_rss.py: connection {len(conns) + 1}: {e}", file=sys.stderr)
        return 1
    finally:
        for c in conns:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
