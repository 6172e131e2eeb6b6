# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 on the daemon's one port (h2c, prior knowledge), attacked with
frames written by hand: the head decides before the body, bodies past the
limit, header blocks past PL_H2_MAX_HEADER_BYTES, a stream or a connection
left reading past PLIMSOLL_REQUEST_READ_TIMEOUT_MS, a flood of resets, more
streams than advertised, a preface cut short, garbage after it, the
per-address cap, a caller gone mid-run; and through it all HTTP/1.1 on the
same port still answers.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_h2
"""
import json
import os
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test import h2raw  # noqa: E402
from plimsoll_test.h2raw import (DATA, END_STREAM, GOAWAY, HEADERS, RST_STREAM,  # noqa: E402
                                 Conn, frame, request_headers)
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

READ_MS = 1000


class H2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_REQUEST_BYTES": "65536",
                            "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(READ_MS),
                            "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS": "6",
                            "SANDBOX_MAX_CONCURRENT": "2"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def setUp(self):
        self.conns = []

    def tearDown(self):
        for c in self.conns:
            c.close()
        # Whatever a case did, the daemon answers both protocols after it.
        self.assertEqual(self.d.rpc("Describe", {})[0], 200)
        c = self.conn()
        c.headers(1, request_headers("Describe", self.d.keys["alice"]), end_stream=False)
        c.data(1, b"{}")
        self.assertEqual(c.json_answer(1)["provider"], "wasm")

    def conn(self, **kw):
        c = Conn(self.d, **kw)
        self.conns.append(c)
        return c

    def call(self, c, stream, method, message, key="alice"):
        k = self.d.keys.get(key, key)
        c.headers(stream, request_headers(method, k))
        c.data(stream, json.dumps(message).encode())

    def test_calls_and_refusals_on_one_connection(self):
        c = self.conn()
        self.call(c, 1, "Run", js("console.log(7)"))
        self.call(c, 3, "Run", js("1"), key="wrong")
        self.call(c, 5, "Run", js("1", minimum_isolation="vm"))
        self.assertEqual(c.json_answer(1)["stdout"], "7\n")
        self.assertEqual(error_info(c.json_answer(3))[0]["reason"], "UNAUTHENTICATED")
        self.assertEqual(error_info(c.json_answer(5))[0]["reason"], "INSUFFICIENT_ISOLATION")

    def test_the_head_decides_before_the_body(self):
        """A wrong key is answered from the head: the body never has to
        come, and the connection goes on."""
        c = self.conn()
        c.headers(1, request_headers("Run", "wrong", extra=[("content-length", "60000")]))
        self.assertEqual(error_info(c.json_answer(1, timeout=5))[0]["reason"], "UNAUTHENTICATED")
        c.data(1, b"x" * 1000, end_stream=False)  # late body bytes are dropped
        self.call(c, 3, "Describe", {})
        self.assertEqual(c.json_answer(3)["provider"], "wasm")

    def test_a_body_past_the_limit(self):
        c = self.conn()
        c.headers(1, request_headers("Run", self.d.keys["alice"]))
        for _ in range(5):
            c.data(1, b"x" * 16000, end_stream=False)
        c.data(1, b"x" * 16000)
        body = c.json_answer(1)
        self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
        self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES", body["message"])
        # Announced past the limit: refused from the head.
        c.headers(3, request_headers("Run", self.d.keys["alice"],
                                     extra=[("content-length", "70000")]))
        self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES", c.json_answer(3, timeout=5)["message"])

    def test_a_header_block_past_the_cap_is_reset(self):
        c = self.conn()
        big = [("x-pad-%d" % i, "v" * 1000) for i in range(40)]  # ~41 KB
        c.headers(1, request_headers("Describe", self.d.keys["alice"], extra=big))
        f, _ = c.until(lambda f: f[2] == 1 or f[0] == GOAWAY, timeout=5)
        self.assertTrue(f is None or f[0] in (RST_STREAM, GOAWAY), f)

    def test_a_frame_past_the_frame_size_ends_the_connection(self):
        c = self.conn()
        big = [("x-pad", "v" * 20000)]
        try:
            c.headers(1, request_headers("Describe", self.d.keys["alice"], extra=big),
                      max_frame=30000)
            f, _ = c.until(lambda f: f[0] == GOAWAY, timeout=5)
        except (BrokenPipeError, ConnectionResetError):
            f = None
        self.assertTrue(f is None or f[0] == GOAWAY, f)

    def test_a_header_given_twice_is_reset(self):
        c = self.conn()
        c.headers(1, request_headers("Describe", self.d.keys["alice"]) +
                  [("authorization", "Bearer " + self.d.keys["bob"])], end_stream=False)
        f, _ = c.until(lambda f: f[2] == 1, timeout=5)
        self.assertEqual(f[0], RST_STREAM, f)

    def test_a_stream_left_reading_is_reset_at_the_deadline(self):
        c = self.conn()
        c.headers(1, request_headers("Run", self.d.keys["alice"]))
        c.data(1, b'{"snippet":', end_stream=False)
        t0 = time.monotonic()
        f, _ = c.until(lambda f: f[2] == 1, timeout=READ_MS / 1000 + 5)
        self.assertEqual(f[0], RST_STREAM, f)
        self.assertEqual(int.from_bytes(f[3], "big"), 8)  # CANCEL
        self.assertGreaterEqual(time.monotonic() - t0, READ_MS / 1000 * 0.8)

    def test_an_idle_connection_is_closed_at_the_deadline(self):
        c = self.conn()
        f, seen = c.until(lambda f: f[0] == GOAWAY, timeout=READ_MS / 1000 + 5)
        self.assertIsNotNone(f, seen)
        self.assertIsNone(c.read_frame(timeout=5))  # then closed

    def test_a_preface_cut_short_or_nothing_at_all(self):
        for first in (b"", b"PRI * HTTP/2.0\r\n"):
            c = self.conn(preface=False)
            c.s.sendall(first)
            t0 = time.monotonic()
            c.s.settimeout(READ_MS / 1000 + 5)
            try:  # closed, no answer (reset when the bytes were left unread)
                self.assertEqual(c.s.recv(100), b"")
            except ConnectionResetError:
                pass
            self.assertLess(time.monotonic() - t0, READ_MS / 1000 + 3)

    def test_garbage_after_the_preface(self):
        c = self.conn()
        c.send(b"\x00" * 3 + b"\xff" * 200)
        f, _ = c.until(lambda f: f[0] == GOAWAY, timeout=5)
        self.assertTrue(f is None or f[0] == GOAWAY)

    def test_a_flood_of_resets(self):
        """Streams opened and reset at once, by the thousand (the 'rapid
        reset' pattern): the daemon answers the next call, and holds no
        request of them afterwards."""
        c = self.conn()
        frames = []
        for i in range(2000):
            sid = 2 * i + 1
            frames.append(frame(HEADERS, h2raw.END_HEADERS, sid,
                                h2raw.hpack(request_headers("Describe", self.d.keys["alice"]))))
            frames.append(frame(RST_STREAM, 0, sid, (8).to_bytes(4, "big")))
        try:
            c.send(*frames)
        except OSError:
            pass  # the daemon may end a connection that floods
        d = self.conn()
        self.call(d, 1, "Describe", {})
        self.assertEqual(d.json_answer(1)["provider"], "wasm")

    def test_more_streams_than_advertised(self):
        c = self.conn()
        for i in range(120):
            c.headers(2 * i + 1, request_headers("Run", self.d.keys["alice"]))
        refused, _ = c.until(lambda f: f[0] in (RST_STREAM, GOAWAY), timeout=5)
        self.assertIsNotNone(refused)

    def test_the_per_address_cap(self):
        time.sleep(0.3)  # the connections of the case before are closed
        held = [self.conn() for _ in range(6)]
        for c in held:
            self.call(c, 1, "Describe", {})
            self.assertEqual(c.json_answer(1)["provider"], "wasm")
        extra = socket.create_connection((self.d.host, self.d.port), timeout=5)
        try:
            extra.sendall(h2raw.PREFACE)
            self.assertEqual(extra.recv(100), b"")  # closed as it was accepted
        except ConnectionResetError:
            pass
        finally:
            extra.close()
        for c in held:
            c.close()
        self.conns = []
        time.sleep(0.2)

    def test_one_per_address_count_for_both_protocols(self):
        """HTTP/1.1 connections (libmicrohttpd's) and HTTP/2 ones count
        against the same cap: an address holding six of either mix has no
        seventh of any kind, and gets them back as they close."""
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS": "6",
                        "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": "20000"}).start()
        src = "127.0.0.9"

        def connect():
            s = socket.socket()
            s.bind((src, 0))
            s.settimeout(5)
            s.connect((d.host, d.port))
            return s
        held = []
        try:
            for i in range(6):
                s = connect()
                if i % 2:
                    s.sendall(h2raw.PREFACE + frame(h2raw.SETTINGS, 0, 0))
                else:  # an HTTP/1.1 head still being read: libmicrohttpd's
                    s.sendall(b"GET /healthz HTTP/1.1\r\n")
                held.append(s)
            time.sleep(0.3)
            for opening in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", h2raw.PREFACE):
                s = connect()
                try:
                    s.sendall(opening)
                    self.assertEqual(s.recv(1000), b"")  # closed at accept
                except (ConnectionResetError, BrokenPipeError):
                    pass
                s.close()
            for s in held:
                s.close()
            time.sleep(0.5)
            s = connect()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b"200", s.recv(1000))  # the count came back
            s.close()
        finally:
            for s in held:
                s.close()
            d.stop()

    def test_an_answer_the_caller_never_reads(self):
        """300 KB of output and a caller that never opens its window (no
        WINDOW_UPDATE, nothing sent): the connection ends at the read
        deadline instead of holding its thread."""
        c = self.conn()
        self.call(c, 1, "Run", js("console.log('x'.repeat(300000))"))
        t0 = time.monotonic()
        end = time.monotonic() + READ_MS / 1000 + 10
        closed = False
        while time.monotonic() < end:
            try:
                c.s.settimeout(1)
                chunk = c.s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                closed = True
                break
        self.assertTrue(closed, "the stalled connection was never closed")
        self.assertLess(time.monotonic() - t0, READ_MS / 1000 + 8)

    def test_a_caller_gone_mid_run(self):
        c = self.conn()
        self.call(c, 1, "Run", js("let t = Date.now(); while (Date.now() - t < 800) {}"))
        time.sleep(0.2)
        c.close()
        self.conns.remove(c)
        # The run ends on its own; both slots are free again soon after.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status, body = self.d.rpc("Run", js("console.log(1)"))
            if status == 200:
                break
            time.sleep(0.1)
        self.assertEqual(status, 200, body)

    def test_grpc_over_http2_by_hand(self):
        c = self.conn()
        msg = h2raw.hpack([])  # nothing: an empty DescribeRequest
        c.headers(1, request_headers("Describe", self.d.keys["alice"],
                                     ctype="application/grpc", extra=[("te", "trailers")]))
        c.data(1, b"\x00\x00\x00\x00\x00" + msg)
        frames = []
        while True:
            f, _ = c.until(lambda f: f[2] == 1, timeout=5)
            frames.append(f)
            if f[1] & END_STREAM:
                break
        kinds = [f[0] for f in frames]
        self.assertEqual(kinds[0], HEADERS)
        self.assertEqual(kinds[-1], HEADERS)  # the trailers
        data = b"".join(f[3] for f in frames if f[0] == DATA)
        self.assertEqual(data[0], 0)
        self.assertEqual(int.from_bytes(data[1:5], "big"), len(data) - 5)
        # A compressed message, and two messages: refused, typed.
        for body in (b"\x01\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00" * 2):
            c.headers(3, request_headers("Describe", self.d.keys["alice"],
                                         ctype="application/grpc"))
            c.data(3, body)
            f, _ = c.until(lambda f: f[2] == 3, timeout=5)
            self.assertEqual(f[0], HEADERS)
            self.assertTrue(f[1] & END_STREAM)  # trailers-only: an error
            c.headers(5, request_headers("Describe", self.d.keys["alice"]))
            c.data(5, b"{}")
            self.assertEqual(c.json_answer(5)["provider"], "wasm")
            break


if __name__ == "__main__":
    unittest.main()
