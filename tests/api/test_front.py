# SPDX-License-Identifier: Apache-2.0
"""The front door, through the real daemon over raw sockets: what is decided
from a request's head before any body byte is read, the absolute deadline on
reading a request, the per-address connection cap, the request bytes in
flight, the JSON shape bounds, PLIMSOLL_MAX_REQUEST_BYTES's default, and
memory_mb below what the provider can start. Each bound is shown at its edge:
at the bound the call goes on, one past it is refused (docs/configuration.md).

Timings here are generous guards (an answer "at once" is one within seconds
on a loaded machine, where the old daemon never answered at all), never a
performance claim."""
import base64
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import docker_env, engine_up, ours  # noqa: E402
from plimsoll_test.harness import SERVICE, ClassDaemon, Daemon, error_info, run_startup  # noqa: E402
from plimsoll_test.rawhttp import AT_ONCE_S, closed_by_peer, head, raw_connect, read_answer  # noqa: E402


def reason_of(body):
    return error_info(json.loads(body))[0]["reason"]


def snippet_body(size):
    """A valid Run body of exactly size bytes (the code pads it)."""
    frame = json.dumps({"snippet": {"language": "javascript", "code": ""}}).encode()
    code = "x" * (size - len(frame))
    body = json.dumps({"snippet": {"language": "javascript", "code": code}}).encode()
    assert len(body) == size, (len(body), size)
    return body


class HeadDecides(ClassDaemon, unittest.TestCase):
    """Everything the head decides is answered before a body byte is sent."""
    DAEMON_ENV = {"PLIMSOLL_MAX_REQUEST_BYTES": "65536"}

    def answer_without_body(self, raw_head):
        s = raw_connect(self.d)
        try:
            s.sendall(raw_head)
            return read_answer(s)
        finally:
            s.close()

    def test_unauthenticated_refused_before_the_body(self):
        # A 16 MiB body announced, not one byte sent: the old daemon waited
        # for the body before it looked at the key.  Past 16 KiB
        # (PL_HTTP_DRAIN_BYTES) the answer goes at once and the connection
        # closes, the body never read.
        for key in (None, "wrong"):
            for length in (16 << 20, 16385):
                status, headers, body = self.answer_without_body(
                    head(SERVICE + "Run", key=key, length=length))
                self.assertEqual(status, 401, body)
                self.assertEqual(reason_of(body), "UNAUTHENTICATED")
                self.assertEqual(headers.get("connection"), "close")
        # The same answer, byte for byte, as a caller who sent the body.
        status, whole = self.d.rpc("Run", {"snippet": {"language": "javascript", "code": "1"}},
                                   key="wrong")
        s = raw_connect(self.d)
        try:
            s.sendall(head(SERVICE + "Run", key="wrong", length=16 << 20))
            _, _, early = read_answer(s)
        finally:
            s.close()
        self.assertEqual(json.loads(early), whole)

    def test_a_small_body_is_dropped_before_the_refusal(self):
        """Up to 16 KiB the refusal is decided from the head, the body is
        read into nothing, then the answer goes on a connection kept alive:
        a caller still writing its body gets the refusal, not a reset."""
        for length in (1, 16384):
            s = raw_connect(self.d)
            try:
                s.sendall(head(SERVICE + "Run", key="wrong", length=length))
                s.sendall(b"x" * length)
                status, headers, body = read_answer(s)
                self.assertEqual(status, 401, body)
                self.assertEqual(reason_of(body), "UNAUTHENTICATED")
                self.assertNotEqual(headers.get("connection"), "close")
                # The connection is in step: the next request is answered.
                s.sendall(head("/healthz", method="GET"))
                self.assertEqual(read_answer(s)[0], 200)
            finally:
                s.close()
        # A chunked body (Connect's clients send one) is read to its end,
        # whatever its size, then refused the same way.
        for length in (10, 1 << 20):
            s = raw_connect(self.d)
            try:
                s.sendall(head(SERVICE + "Run", key="wrong",
                               extra="Transfer-Encoding: chunked\r\n"))
                s.sendall(b"%x\r\n" % length + b"x" * length + b"\r\n0\r\n\r\n")
                status, headers, body = read_answer(s)
                self.assertEqual((status, reason_of(body)), (401, "UNAUTHENTICATED"))
                self.assertNotEqual(headers.get("connection"), "close")
            finally:
                s.close()

    def test_route_method_and_type_refused_before_the_body(self):
        cases = [
            (head("/nope", length=16 << 20), 404),
            (head(SERVICE + "Explode", length=16 << 20), 404),
            (head(SERVICE + "Run", length=16 << 20, method="PUT"), 405),
            (head(SERVICE + "Run", key=self.d.keys["alice"], length=16 << 20,
                  ctype="text/plain"), 415),
        ]
        for raw, want in cases:
            with self.subTest(want=want, head=raw[:40]):
                status, _, _ = self.answer_without_body(raw)
                self.assertEqual(status, want)

    def test_max_request_bytes_edge(self):
        # One past the limit: refused from the head, the body never read.
        status, headers, body = self.answer_without_body(
            head(SERVICE + "Run", key=self.d.keys["alice"], length=65537))
        self.assertEqual(status, 400)
        self.assertEqual(reason_of(body), "INVALID_REQUEST")
        self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES (65536 bytes)", json.loads(body)["message"])
        self.assertEqual(headers.get("connection"), "close")
        # At the limit: the daemon waits for the body, then decides on it
        # (DISABLED: it passed every check of the request itself).
        s = raw_connect(self.d)
        try:
            s.sendall(head(SERVICE + "Run", key=self.d.keys["alice"], length=65536))
            with self.assertRaises(socket.timeout):
                read_answer(s, timeout=0.5)
            s.sendall(snippet_body(65536))
            status, _, body = read_answer(s)
        finally:
            s.close()
        self.assertEqual(status, 400)
        self.assertEqual(reason_of(body), "DISABLED")
        # A chunked body past the limit is refused once it passes it.
        status, body = self.d.rpc("Run", None, raw=iter([b"[" + b" " * 70000 + b"]"]))
        self.assertEqual(status, 400)
        self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES", body["message"])


class Shape(ClassDaemon, unittest.TestCase):
    """PL_JSON_MAX_DEPTH and PL_JSON_MAX_ELEMENTS over HTTP, Run and sessions."""

    def test_depth_edge(self):
        def nested(n):  # a snippet whose stdin nests n - 2 arrays: n levels in all
            return (b'{"snippet":{"language":"javascript","code":"1","stdin":'
                    + b"[" * (n - 2) + b"]" * (n - 2) + b"}}")
        status, body = self.d.rpc("Run", None, raw=nested(8))
        self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
        self.assertIn("snippet.stdin: must be a string", body["message"])  # measured, then typed
        status, body = self.d.rpc("Run", None, raw=nested(9))
        self.assertEqual(status, 400)
        self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
        self.assertIn("PL_JSON_MAX_DEPTH", body["message"])
        for method in ("RunInSession", "RunCell", "CloseSession", "OpenSession"):
            with self.subTest(method):
                status, body = self.d.rpc(method, None, raw=b"[" * 9 + b"]" * 9)
                self.assertEqual(status, 400)
                self.assertIn("PL_JSON_MAX_DEPTH", body["message"])

    def test_element_edge(self):
        def args(n):  # a module with n args: 7 elements besides them
            return json.dumps({"module": {"wasm_base64": "AGFzbQEAAAA=",
                                          "args": ["a"] * n}}).encode()
        # 8192 elements in all: measured, then refused for its 8185 args.
        status, body = self.d.rpc("Run", None, raw=args(8192 - 7))
        self.assertIn("module.args: more than", body["message"])
        self.assertNotIn("PL_JSON_MAX_ELEMENTS", body["message"])
        status, body = self.d.rpc("Run", None, raw=args(8192 - 6))
        self.assertEqual(status, 400)
        self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
        self.assertIn("PL_JSON_MAX_ELEMENTS", body["message"])

    def test_largest_legal_request_fits_the_default(self):
        """The default PLIMSOLL_MAX_REQUEST_BYTES (14680064) admits the largest
        legal request written compactly: 256 files of 4 MiB in all in base64
        and 32 steps of 64 arguments of 4096 bytes. Padded one byte past the
        default, the same request is refused."""
        per = (4 << 20) // 256
        files = [{"path": ("d/%03d-" % i) + "p" * 250,
                  "content_base64": base64.b64encode(b"\0" * per).decode()}
                 for i in range(256)]
        steps = [{"name": ("s%02d-" % i) + "n" * 124, "argv": ["a" * 4096] * 64}
                 for i in range(32)]
        msg = {"minimum_isolation": "container", "timeout_ms": 60000, "memory_mb": 256,
               "project": {"files": files, "steps": steps}}
        body = json.dumps(msg, separators=(",", ":")).encode()
        self.assertGreater(len(body), 14 * 10 ** 6)
        self.assertLessEqual(len(body), 14680064)
        status, resp = self.d.rpc("Run", None, raw=body)
        self.assertEqual(error_info(resp)[0]["reason"], "DISABLED", resp["message"])
        # One byte past the default (JSON may be padded with spaces): refused
        # from its head; a client that waits for "100 Continue" never sends it.
        s = raw_connect(self.d)
        try:
            s.sendall(head(SERVICE + "Run", key=self.d.keys["alice"], length=14680065,
                           extra="Expect: 100-continue\r\n"))
            status, _, resp = read_answer(s)
        finally:
            s.close()
        self.assertEqual(status, 400)
        self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES (14680064 bytes)", json.loads(resp)["message"])


class BytesInFlight(unittest.TestCase):
    """PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT (three bodies of the largest
    size) and PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT (two of them)."""

    def hold(self, d, principal, length=65536):
        s = raw_connect(d)
        s.sendall(head(SERVICE + "Run", key=d.keys[principal], length=length))
        return s

    def refused_at_once(self, d, principal, setting):
        s = self.hold(d, principal, 1)
        s.sendall(b"x")  # a small body is dropped, never held, then refused
        try:
            status, _, body = read_answer(s)
        finally:
            s.close()
        self.assertEqual(status, 429)
        info = error_info(json.loads(body))[0]
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                         ("AT_CAPACITY", "false"))
        self.assertIn(setting, json.loads(body)["message"])

    def test_budget_edges(self):
        d = Daemon(env={"PLIMSOLL_MAX_REQUEST_BYTES": "65536",
                        "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT": "196608",
                        "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT": "131072"}).start()
        held = []
        try:
            # alice at her share exactly: both heads wait for their bodies.
            held += [self.hold(d, "alice"), self.hold(d, "alice")]
            for s in held:
                with self.assertRaises(socket.timeout):
                    read_answer(s, timeout=0.3)
            # One byte more of hers is refused, her body never held.
            self.refused_at_once(d, "alice", "PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT (131072")
            # bob takes the daemon's last 65536: the budget exactly.
            held.append(self.hold(d, "bob"))
            with self.assertRaises(socket.timeout):
                read_answer(held[-1], timeout=0.3)
            self.refused_at_once(d, "bob", "PLIMSOLL_MAX_REQUEST_BYTES_IN_FLIGHT (196608")
            # A call without a body holds nothing and still passes.
            self.assertEqual(d.rpc("Describe", None, raw=b"")[0], 200)
            # The bodies complete; their bytes come back after the answers.
            for s in held:
                s.sendall(snippet_body(65536))
                self.assertEqual(reason_of(read_answer(s)[2]), "DISABLED")
            deadline = time.monotonic() + AT_ONCE_S
            while True:
                status, body = d.rpc("Run", None, raw=snippet_body(65536))
                reason = error_info(body)[0]["reason"]
                if reason == "DISABLED" or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(reason, "DISABLED")
        finally:
            for s in held:
                s.close()
            d.stop()


class ReadDeadline(ClassDaemon, unittest.TestCase):
    """PLIMSOLL_REQUEST_READ_TIMEOUT_MS: an absolute deadline on reading a
    request, head and body; a request read in time is never cut."""
    TIMEOUT_MS = 1500
    DAEMON_ENV = {"PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(TIMEOUT_MS)}

    def trickle(self, first, drip, limit_s=15.0):
        """Send first, then drip one byte every 100 ms. Returns the seconds
        from connect until the daemon ended the connection (None: it never
        did within limit_s) and the bytes it sent before."""
        s = raw_connect(self.d)
        t0 = time.monotonic()
        got = b""
        try:
            s.sendall(first)
            for i in range(int(limit_s / 0.1)):
                try:
                    s.sendall(drip[i % len(drip):i % len(drip) + 1])
                    s.settimeout(0.1)
                    chunk = s.recv(65536)
                    if not chunk:
                        return time.monotonic() - t0, got
                    got += chunk
                except socket.timeout:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    return time.monotonic() - t0, got
            return None, got
        finally:
            s.close()

    def wait_for_log(self, msg):
        deadline = time.monotonic() + AT_ONCE_S
        while time.monotonic() < deadline:
            if [l for l in self.d.log_lines() if l.get("msg") == msg]:
                return True
            time.sleep(0.1)
        return False

    def test_trickled_head_is_cut(self):
        took, got = self.trickle(b"GET /hea", b"x-filler: " + b"y" * 1000)
        self.assertIsNotNone(took, "a trickled head kept its connection for 15 s")
        self.assertGreaterEqual(took, self.TIMEOUT_MS / 1000.0 - 0.05, "cut before its deadline")
        self.assertEqual(got, b"")
        self.assertTrue(self.wait_for_log("read deadline"))

    def test_trickled_body_is_cut(self):
        took, got = self.trickle(
            head(SERVICE + "Run", key=self.d.keys["alice"], length=60000), b" ")
        self.assertIsNotNone(took, "a trickled body kept its connection for 15 s")
        self.assertGreaterEqual(took, self.TIMEOUT_MS / 1000.0 - 0.05)
        self.assertEqual(got, b"", "a request cut while being read is never answered")
        self.assertEqual(self.d.request("GET", "/healthz")[0], 200)

    def test_slow_but_in_time_is_served(self):
        # The head and body over about a third of the deadline: answered.
        s = raw_connect(self.d)
        try:
            body = json.dumps({"snippet": {"language": "javascript", "code": "1"}}).encode()
            raw = head(SERVICE + "Run", key=self.d.keys["alice"], length=len(body)) + body
            for i in range(0, len(raw), len(raw) // 5 + 1):
                s.sendall(raw[i:i + len(raw) // 5 + 1])
                time.sleep(0.1)
            status, _, resp = read_answer(s)
        finally:
            s.close()
        self.assertEqual(reason_of(resp), "DISABLED")

    def test_kept_alive_connection_serves_within_the_deadline(self):
        c = self.d.connection()
        try:
            for _ in range(3):
                self.assertEqual(self.d.rpc("Describe", {}, conn=c)[0], 200)
                time.sleep(self.TIMEOUT_MS / 1000.0 / 4)
        finally:
            c.close()
        # Idle past the deadline, a kept-alive connection is closed.
        s = raw_connect(self.d)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(read_answer(s)[0], 200)
            self.assertTrue(closed_by_peer(s, self.TIMEOUT_MS / 1000.0 + AT_ONCE_S))
        finally:
            s.close()


class PerAddress(unittest.TestCase):
    """PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS: one address's share; another
    address, and its /healthz, are unaffected."""
    CAP = 4

    def test_cap_edge(self):
        d = Daemon(env={"PLIMSOLL_MAX_CONNECTIONS": "16",
                        "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS": str(self.CAP)}).start()
        socks = []
        try:
            # At the cap: each connection is served.
            for _ in range(self.CAP):
                s = raw_connect(d, "127.0.0.3")
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_answer(s)[0], 200)
                socks.append(s)
            # One past it: closed without an answer.
            s = raw_connect(d, "127.0.0.3")
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertTrue(closed_by_peer(s, AT_ONCE_S))
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                s.close()
            # Another address is unaffected.
            s = raw_connect(d, "127.0.0.4")
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_answer(s)[:3:2], (200, b"ok\n"))
            finally:
                s.close()
            # A freed slot is usable again.
            socks.pop().close()
            deadline = time.monotonic() + AT_ONCE_S
            while True:
                s = raw_connect(d, "127.0.0.3")
                try:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    status = read_answer(s)[0]
                    break
                except (ConnectionError, OSError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
                finally:
                    s.close()
            self.assertEqual(status, 200)
        finally:
            for s in socks:
                s.close()
            d.stop()


class RunNotCut(unittest.TestCase):
    """A run that lasts longer than the read deadline is answered."""

    def test_run_longer_than_the_read_deadline(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm",
                        "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": "300"}).start()
        try:
            code = "const t = Date.now(); while (Date.now() - t < 1500) {} console.log('done')"
            status, body = d.rpc("Run", {"snippet": {"language": "javascript", "code": code},
                                         "timeout_ms": 20000})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["stdout"], "done\n")
            # It ran well past the 300 ms read deadline (the guest's clock and
            # the daemon's are not the same: 1500 can read as 1499).
            self.assertGreater(body["duration_ms"], 1000)
        finally:
            d.stop()


class MinMemoryWasm(unittest.TestCase):
    def test_wasm_takes_any_cap(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        try:
            status, body = d.rpc("Describe", {})
            self.assertEqual(body["limits"]["min_memory_mb"], 1)
            status, body = d.rpc("Run", {"snippet": {"language": "javascript",
                                                     "code": "console.log(1)"}, "memory_mb": 1})
            self.assertEqual(status, 200, body)  # a result: out of memory, or it ran
        finally:
            d.stop()


class MinMemoryDocker(unittest.TestCase):
    """memory_mb below what the engine can start: INVALID_REQUEST before
    dispatch (the old daemon answered INTERNAL after the engine refused)."""

    def edge(self, runtime, minimum):
        self.assertTrue(engine_up(), "the docker engine is not running: run scripts/docker-setup")
        instance = "front-mem-" + runtime
        d = Daemon(env=docker_env(runtime, instance)).start(timeout=180)
        try:
            status, body = d.rpc("Describe", {})
            self.assertEqual(body["limits"]["min_memory_mb"], minimum)
            run = {"snippet": {"language": "python", "code": "print(1)"}}
            status, body = d.rpc("Run", dict(run, memory_mb=minimum - 1))
            self.assertEqual(status, 400, body)
            info = error_info(body)[0]
            self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                             ("INVALID_REQUEST", "false"))
            self.assertIn("below %d" % minimum, body["message"])
            # At the minimum the sandbox starts: a result (printed, or out
            # of memory), never INTERNAL.
            status, body = d.rpc("Run", dict(run, memory_mb=minimum))
            self.assertEqual(status, 200, body)
            self.assertIn(body["exit_code"], (0, 137))
        finally:
            d.stop()
        self.assertEqual(ours(instance), [])

    def test_runc(self):
        self.edge("runc", 6)

    def test_runsc(self):
        self.edge("runsc", 32)
        # An allowance too small for the startup proof's exec beside the
        # sandbox's first process refuses startup, naming the setting.
        code, err = run_startup(docker_env("runsc", "front-mem-low", SANDBOX_MEMORY_MB="63",
                                           SANDBOX_TOTAL_MEMORY_MB="1024"), timeout=180)
        self.assertEqual(code, 2, err)
        self.assertIn("plimsolld: SANDBOX_MEMORY_MB: 63 is below 64, the least allowance under "
                      "runsc", err)
        self.assertEqual(ours("front-mem-low"), [])


if __name__ == "__main__":
    unittest.main()
