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
import http.client
import json
import os
import socket
import struct
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test import h2raw  # noqa: E402
from plimsoll_test.h2raw import (DATA, END_STREAM, GOAWAY, HEADERS, RST_STREAM,  # noqa: E402
                                 SETTINGS, Conn, frame, request_headers)
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

READ_MS = 1000


class H2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_REQUEST_BYTES": "65536",
                            "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(READ_MS),
                            "PLIMSOLL_ANSWER_SEND_TIMEOUT_MS": str(READ_MS),
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
        WINDOW_UPDATE, nothing sent): the stream is reset at the send
        deadline, and the connection, idle then, ends at the read deadline
        after it instead of holding its thread."""
        c = self.conn()
        self.call(c, 1, "Run", js("console.log('x'.repeat(300000))"))
        t0 = time.monotonic()
        end = time.monotonic() + 2 * READ_MS / 1000 + 10
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
        self.assertLess(time.monotonic() - t0, 2 * READ_MS / 1000 + 8)

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


SEND_MS = 2000
SETTINGS_INITIAL_WINDOW_SIZE = 4


class HeldForNothing(unittest.TestCase):
    """What a peer can make the daemon hold by not finishing its side: a
    stream refused at its head and never ended, an answer never read.
    Every such thing has an absolute deadline no PING moves
    (PLIMSOLL_REQUEST_READ_TIMEOUT_MS, PLIMSOLL_ANSWER_SEND_TIMEOUT_MS), and
    an answer waiting for its reader is charged to its caller's bytes
    (PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT), which come back when it is
    reset (docs/security.md, "What a peer can make the daemon hold")."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_REQUEST_BYTES": "65536",
                            "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT": "65536",
                            "SANDBOX_OUTPUT_BYTES": str(16 << 20),
                            "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(READ_MS),
                            "PLIMSOLL_ANSWER_SEND_TIMEOUT_MS": str(SEND_MS)}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def pinging_until_closed(self, c, seconds):
        """PING every 0.2 s for up to seconds; the frames seen and whether
        the daemon closed the connection (GOAWAY or end) meanwhile."""
        seen, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                c.send(frame(h2raw.PING, 0, 0, b"12345678"))
            except (BrokenPipeError, ConnectionResetError):
                return seen, True
            t = time.monotonic() + 0.2
            while time.monotonic() < t:
                try:
                    f = c.read_frame(timeout=max(0.01, t - time.monotonic()))
                except socket.timeout:
                    break
                except ConnectionResetError:
                    return seen, True
                if f is None:
                    return seen, True
                seen.append(f)
                if f[0] == GOAWAY:
                    return seen, True
        return seen, False

    def test_a_refused_stream_never_ended_is_reset_and_pings_keep_nothing(self):
        """No key, HEADERS without END_STREAM: 401 from the head, then
        RST_STREAM(NO_ERROR) at once; a PING every 0.2 s after that keeps
        neither the stream nor the connection past the read deadline."""
        c = Conn(self.d)
        try:
            for sid in (1, 3, 5):
                c.headers(sid, request_headers("Run", None), end_stream=False)
            for sid in (1, 3, 5):
                f, _ = c.until(lambda f, sid=sid: f[2] == sid and f[0] == RST_STREAM, timeout=3)
                self.assertIsNotNone(f)
                self.assertEqual(int.from_bytes(f[3], "big"), 0)  # NO_ERROR
            t0 = time.monotonic()
            _, closed = self.pinging_until_closed(c, READ_MS / 1000 + 5)
            self.assertTrue(closed, "PINGs kept an idle connection open")
            self.assertGreaterEqual(time.monotonic() - t0, READ_MS / 1000 * 0.5)
        finally:
            c.close()

    def test_an_answer_never_read_is_reset_at_its_send_deadline(self):
        """A receive window of 0 and a PING every 0.2 s: the answer's head
        comes, its DATA never can, and at PLIMSOLL_ANSWER_SEND_TIMEOUT_MS the
        stream is reset (CANCEL).  Meanwhile the 300 KB answer is charged to
        alice's bytes (her next body is refused AT_CAPACITY, bob's is not);
        after the reset they are hers again."""
        c = Conn(self.d, preface=False)
        try:
            c.send(h2raw.PREFACE + frame(SETTINGS, 0, 0, struct.pack(
                ">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0)))
            c.headers(1, request_headers("Run", self.d.keys["alice"]))
            c.data(1, json.dumps(js("console.log('x'.repeat(300000))")).encode())
            f, _ = c.until(lambda f: f[2] == 1 and f[0] == HEADERS, timeout=15)
            t0 = time.monotonic()
            self.assertIsNotNone(f)
            status, body = self.d.rpc("Run", js("console.log(1)"))
            self.assertEqual(status, 429, body)
            self.assertEqual(error_info(body)[0]["reason"], "AT_CAPACITY")
            self.assertIn("PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT", body["message"])
            self.assertEqual(self.d.rpc("Run", js("console.log(1)"), principal="bob")[0], 200)
            seen, _ = self.pinging_until_closed(c, SEND_MS / 1000 + 5)
            resets = [f for f in seen if f[2] == 1 and f[0] == RST_STREAM]
            self.assertTrue(resets, "the unread answer was never reset: %r" % seen[-5:])
            self.assertEqual(int.from_bytes(resets[0][3], "big"), 8)  # CANCEL
            self.assertFalse([f for f in seen if f[2] == 1 and f[0] == DATA])
            self.assertGreaterEqual(time.monotonic() - t0, SEND_MS / 1000 * 0.8)
        finally:
            c.close()
        status, body = self.d.rpc("Run", js("console.log(1)"))
        self.assertEqual(status, 200, body)

    def test_an_http1_answer_never_read_is_cut_at_its_send_deadline(self):
        """HTTP/1.1, a small receive buffer and a reader that never reads an
        8 MB answer (more than the kernel's socket buffers take): charged to alice while it waits, the connection cut at
        the send deadline, and her bytes hers again."""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((self.d.host, self.d.port))
        try:
            body = json.dumps(js("console.log('y'.repeat(8000000))")).encode()
            s.sendall(b"POST /plimsoll.v1.SandboxService/Run HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nAuthorization: Bearer " +
                      self.d.keys["alice"].encode() + b"\r\nContent-Length: " +
                      str(len(body)).encode() + b"\r\n\r\n" + body)
            t0 = time.monotonic()
            refused = False
            while time.monotonic() - t0 < 10 and not refused:
                status, answer = self.d.rpc("Run", js("console.log(1)"))
                refused = status == 429
                time.sleep(0.1)
            self.assertTrue(refused, "the unread answer was not charged to its caller")
            end = time.monotonic() + SEND_MS / 1000 + 5
            while time.monotonic() < end:
                status, answer = self.d.rpc("Run", js("console.log(1)"))
                if status == 200:
                    break
                time.sleep(0.2)
            self.assertEqual(status, 200, answer)
            self.assertTrue(any(x.get("msg") == "send deadline" for x in self.d.log_lines()))
        finally:
            s.close()


def rss_peak_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def run_project(inner):
    """A RunRequest whose project (field 11) holds inner's bytes."""
    return b"\x5a" + varint(len(inner)) + inner


# Hostile binary bodies of 4 MiB: what each decodes to is bounded by the
# JSON path's element count, checked while decoding.
HOSTILE_BODIES = {
    "empty repeated entries": run_project(b"\x0a\x00" * (2 << 20)),
    "many small strings": run_project((b"\x12\x06\x12\x01a\x12\x01b") * (1 << 19)),
    "many empty steps": run_project(b"\x12\x00" * (2 << 20)),
}

# What one such body may cost the daemon's peak resident memory, over its
# peak before: the body itself and the one copy a transport keeps, with
# room for the allocator (docs/security.md, "Decoding").
PEAK_PER_BODY_KIB = 4 * 4096 + 8192


class BinaryBodies(unittest.TestCase):
    """Connect binary, gRPC and gRPC-Web bodies that would expand a
    hundredfold as a JSON tree: each is refused INVALID_REQUEST, and the
    daemon's peak RSS grows by no more than PEAK_PER_BODY_KIB.  A daemon
    of its own for each protocol: a peak, once reached, hides the next."""

    def setUp(self):
        self.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()

    def tearDown(self):
        self.d.stop()

    def check_peak(self, before, what):
        grew = rss_peak_kib(self.d.proc.pid) - before
        if os.environ.get("PL_SHOW_PEAKS"):
            print("%s %s: peak RSS +%d KiB" % (self.id(), what, grew))
        self.assertLess(grew, PEAK_PER_BODY_KIB, "%s: peak RSS grew %d KiB" % (what, grew))

    def test_connect_binary(self):
        for name, body in HOSTILE_BODIES.items():
            before = rss_peak_kib(self.d.proc.pid)
            conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=30)
            conn.request("POST", "/plimsoll.v1.SandboxService/Run", body=body, headers={
                "Content-Type": "application/proto",
                "Authorization": "Bearer " + self.d.keys["alice"]})
            r = conn.getresponse()
            answer = json.loads(r.read())
            conn.close()
            self.assertEqual(r.status, 400, name)
            self.assertEqual(error_info(answer)[0]["reason"], "INVALID_REQUEST", name)
            self.assertIn("PL_JSON_MAX_ELEMENTS", answer["message"], name)
            self.check_peak(before, name)

    def test_grpc_web(self):
        for name, body in HOSTILE_BODIES.items():
            before = rss_peak_kib(self.d.proc.pid)
            conn = http.client.HTTPConnection(self.d.host, self.d.port, timeout=30)
            conn.request("POST", "/plimsoll.v1.SandboxService/Run",
                         body=b"\x00" + struct.pack(">I", len(body)) + body, headers={
                             "Content-Type": "application/grpc-web+proto",
                             "Authorization": "Bearer " + self.d.keys["alice"]})
            r = conn.getresponse()
            raw = r.read()
            conn.close()
            self.assertEqual(r.status, 200, name)
            # Trailers in the body, or (trailers-only) in the head.
            said = raw + ("grpc-status:%s grpc-message:%s" % (
                r.getheader("grpc-status"), r.getheader("grpc-message"))).encode()
            self.assertIn(b"grpc-status:3", said.replace(b": ", b":"), name)
            self.assertIn(b"PL_JSON_MAX_ELEMENTS", said, name)
            self.check_peak(before, name)

    def test_grpc(self):
        """Through Debian's python3-grpcio, bytes as they are."""
        try:
            import grpc
        except ImportError:
            sys.path.append("/usr/lib/python3/dist-packages")
            import grpc
        channel = grpc.insecure_channel("%s:%d" % (self.d.host, self.d.port))
        run = channel.unary_unary("/plimsoll.v1.SandboxService/Run",
                                  request_serializer=None, response_deserializer=None)
        try:
            for name, body in HOSTILE_BODIES.items():
                before = rss_peak_kib(self.d.proc.pid)
                with self.assertRaises(grpc.RpcError) as cm:
                    run(body, timeout=30,
                        metadata=[("authorization", "Bearer " + self.d.keys["alice"])])
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, name)
                self.assertIn("PL_JSON_MAX_ELEMENTS", cm.exception.details(), name)
                self.check_peak(before, name)
        finally:
            channel.close()
