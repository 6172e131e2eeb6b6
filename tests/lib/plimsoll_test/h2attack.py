# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 peers that try to make the daemon hold things for nothing, for the
load test (tests/load/test_h2_load.py) and bench/attack.py.  Loopback only;
every loop ends when its stop event is set.

  HalfOpen  from one address, connections each opening streams without a
            key and never ending them, a PING every second; reconnects
            whenever the daemon closes one (at the per-address cap, or idle
            at the read deadline)
  Honest    a caller that runs snippets throughout, timing each
  Unread    as one key, connections whose receive window is 0, each asking
            for runs with a large output it never reads, a PING every
            second; reconnects when the daemon closes one

Each counts what happened to it in .counts (a dict of outcome -> n).
"""
import json
import socket
import struct
import threading
import time

from .h2raw import (END_HEADERS, GOAWAY, HEADERS, PING, PREFACE, RST_STREAM, SETTINGS, Conn,
                    frame, hpack, request_headers)
from .harness import SERVICE
from .rawhttp import head, read_answer

SETTINGS_INITIAL_WINDOW_SIZE = 4


class _Peer(threading.Thread):
    def __init__(self, d, source, stop):
        super().__init__(daemon=True)
        self.d, self.source, self.stop_event = d, source, stop
        self.counts = {}
        self.lock = threading.Lock()

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def open(self, window=None):
        c = Conn(self.d, timeout=5, preface=False, source=self.source)
        settings = b"" if window is None else struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE,
                                                           window)
        c.send(PREFACE + frame(SETTINGS, 0, 0, settings))
        return c

    def streams(self, c):
        """Open this peer's streams on c (subclasses)."""
        raise NotImplementedError

    def hold(self, c):
        """PING every second and read what comes until the daemon ends c."""
        while not self.stop_event.is_set():
            try:
                c.send(frame(PING, 0, 0, b"plimsoll"))
                end = time.monotonic() + 1
                while time.monotonic() < end:
                    f = c.read_frame(timeout=max(0.01, end - time.monotonic()))
                    if f is None:
                        self.count("closed")
                        return
                    if f[0] == GOAWAY:
                        self.count("goaway")
                        return
                    if f[0] == HEADERS:
                        self.count("answers")
                    if f[0] == RST_STREAM:
                        self.count("resets")
            except socket.timeout:
                continue
            except OSError:
                self.count("closed")
                return

    def run(self):
        while not self.stop_event.is_set():
            try:
                c = self.open(self.window)
            except OSError:
                self.count("refused at connect")
                self.stop_event.wait(0.2)
                continue
            try:
                self.streams(c)
                self.count("connections")
                self.hold(c)
            except OSError:
                self.count("closed")
            finally:
                c.close()


class HalfOpen(_Peer):
    window = None

    def __init__(self, d, source, stop, streams=100):
        super().__init__(d, source, stop)
        self.n = streams

    def streams(self, c):
        # HEADERS without END_STREAM, no key: answered from the head.
        block = hpack(request_headers("Run", None, extra=[("x-pad", "p" * 200)]))
        c.send(*[frame(HEADERS, END_HEADERS, 1 + 2 * i, block) for i in range(self.n)])
        self.count("streams", self.n)


class Unread(_Peer):
    window = 0

    def __init__(self, d, source, stop, key, runs=4, output=262144):
        super().__init__(d, source, stop)
        self.key, self.runs = key, runs
        self.body = json.dumps({"snippet": {"language": "javascript",
                                            "code": "console.log('u'.repeat(%d))" % output}}
                               ).encode()

    def streams(self, c):
        for i in range(self.runs):
            c.headers(1 + 2 * i, request_headers("Run", self.key))
            c.data(1 + 2 * i, self.body)
        self.count("streams", self.runs)


class Honest(threading.Thread):
    """/healthz and a wasm run as principal, one after the other, each on a
    new HTTP/1.1 connection from source; the runs' latencies (s) by .phase,
    and what was not answered correctly in .bad."""

    def __init__(self, d, stop, principal="bob", source="127.0.0.1"):
        super().__init__(daemon=True)
        self.d, self.stop_event, self.principal, self.source = d, stop, principal, source
        self.phase = "quiet"
        self.latency, self.bad = {}, []
        self.msg = json.dumps({"snippet": {"language": "javascript",
                                           "code": "console.log(6*7)"}}).encode()

    def one(self, request, check, timed=True):
        t0 = time.monotonic()
        try:
            s = socket.create_connection((self.d.host, self.d.port), timeout=30,
                                         source_address=(self.source, 0))
            try:
                s.sendall(request)
                status, _, body = read_answer(s, 30)
            finally:
                s.close()
            if not check(status, body):
                self.bad.append((self.phase, status, body[:200]))
                return
            if timed:
                self.latency.setdefault(self.phase, []).append(time.monotonic() - t0)
        except (OSError, ValueError) as e:
            self.bad.append((self.phase, type(e).__name__, str(e)))

    def run(self):
        while not self.stop_event.is_set():
            self.one(b"GET /healthz HTTP/1.1\r\nHost: plimsoll\r\nConnection: close\r\n\r\n",
                     lambda st, b: (st, b) == (200, b"ok\n"), timed=False)
            self.one(head(SERVICE + "Run", key=self.d.keys[self.principal], length=len(self.msg)) +
                     self.msg,
                     lambda st, b: st == 200 and json.loads(b).get("stdout") == "42\n")
            self.stop_event.wait(0.05)


def p50(xs):
    return sorted(xs)[len(xs) // 2] if xs else float("nan")


def totals(peers):
    out = {}
    for p in peers:
        with p.lock:
            for k, v in p.counts.items():
                out[k] = out.get(k, 0) + v
    return out
