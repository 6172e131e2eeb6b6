# SPDX-License-Identifier: Apache-2.0
"""Browsers on another origin (PLIMSOLL_CORS_ORIGINS), over HTTP/1.1 by
hand and over HTTP/2 with curl: a listed origin's preflight granted from
its head with no key, every other preflight answered as any OPTIONS is
(405, no CORS header: nothing learned), look-alikes of a listed origin
(suffix, prefix, case, port, scheme, a slash, null), a huge Origin, too
many or unknown request headers, a preflight with a body announced and
never sent, the per-address cap; the answers to a listed origin (a run, a
refusal, a stream, gRPC-Web's trailers-only refusal) carrying
Access-Control-Allow-Origin; a request with two Origin headers refused
INVALID_REQUEST with no CORS header, over HTTP/1.1 as over HTTP/2; the
console and the probes untouched; a daemon without the setting as before.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_cors
"""
import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test import h2raw  # noqa: E402
from plimsoll_test.harness import SERVICE, Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402
from plimsoll_test.rawhttp import AT_ONCE_S, closed_by_peer, raw_connect, read_answer  # noqa: E402

LISTED = "http://127.0.0.2:8000"
OTHER = "https://app.example"
ORIGINS = " http://127.0.0.2:8000 , HTTPS://App.Example:443"
# What Chromium asks for before the TypeScript client's and Connect's
# calls, and before gRPC-Web's.
CONNECT_HEADERS = "authorization,connect-protocol-version,content-type"
GRPC_WEB_HEADERS = "authorization,content-type,grpc-timeout,x-grpc-web,x-user-agent"
METHODS = ("Run", "RunStream", "Describe", "Explain", "OpenSession", "RunInSession", "RunCell",
           "RunCellStream", "CloseSession")


def preflight(origin=LISTED, method="POST", headers=CONNECT_HEADERS, path=SERVICE + "Run",
              extra=""):
    h = "OPTIONS %s HTTP/1.1\r\nHost: plimsoll\r\n" % path
    if origin is not None:
        h += "Origin: %s\r\n" % origin
    if method is not None:
        h += "Access-Control-Request-Method: %s\r\n" % method
    if headers is not None:
        h += "Access-Control-Request-Headers: %s\r\n" % headers
    return (h + extra + "\r\n").encode()


def cors_headers(headers):
    return {k: v for k, v in headers.items()
            if k.startswith("access-control-") or k == "vary"}


class Cors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_CORS_ORIGINS": ORIGINS,
                            "PLIMSOLL_MAX_CONNECTIONS": "32",
                            "PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS": "4"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def ask(self, raw, source="127.0.0.1"):
        s = raw_connect(self.d, source)
        try:
            s.sendall(raw)
            return read_answer(s)
        finally:
            s.close()

    def plain_options(self, path=SERVICE + "Run"):
        """What an OPTIONS has always had: no CORS in it."""
        return self.ask(preflight(origin=None, method=None, headers=None, path=path))

    def assertNoGrant(self, answer, path=SERVICE + "Run"):
        status, headers, body = answer
        want = self.plain_options(path)
        self.assertEqual(cors_headers(headers), {})
        self.assertEqual((status, body), (want[0], want[2]))
        self.assertEqual({k: v for k, v in headers.items() if k != "date"},
                         {k: v for k, v in want[1].items() if k != "date"})

    def assertGranted(self, answer, origin=LISTED):
        status, headers, body = answer
        self.assertEqual(status, 204, (headers, body))
        self.assertEqual(body, b"")
        self.assertEqual(headers["access-control-allow-origin"], origin)
        self.assertEqual(headers["access-control-allow-methods"], "POST")
        allowed = {h.strip() for h in headers["access-control-allow-headers"].split(",")}
        self.assertLessEqual(set(CONNECT_HEADERS.split(",")) | set(GRPC_WEB_HEADERS.split(",")),
                             allowed)
        self.assertEqual(headers["access-control-max-age"], "600")
        self.assertEqual(headers["vary"], "Origin")
        self.assertNotIn("access-control-allow-credentials", headers)

    # ---- the preflight ------------------------------------------------------

    def test_listed_origin_granted_without_a_key(self):
        for m in METHODS:
            self.assertGranted(self.ask(preflight(path=SERVICE + m)))
        self.assertGranted(self.ask(preflight(headers=GRPC_WEB_HEADERS)))
        # Names in any case, spaces around them, none at all.
        self.assertGranted(self.ask(preflight(headers=" Authorization ,Content-Type")))
        self.assertGranted(self.ask(preflight(headers=None)))
        # The second listed origin, normalised from how the setting wrote it.
        self.assertGranted(self.ask(preflight(origin=OTHER)), OTHER)

    def test_refused_preflights_learn_nothing(self):
        """Every preflight that is not granted gets the answer any OPTIONS
        gets, byte for byte but the date: whether the origin is unlisted,
        a look-alike, absent, or the method or a header is not allowed."""
        refused = [
            preflight(origin="http://127.0.0.3:8000"),
            preflight(origin="http://127.0.0.2:800"),       # a prefix of the port
            preflight(origin="http://127.0.0.2:80000"),     # a suffix
            preflight(origin="http://127.0.0.2:8000.evil.example"),
            preflight(origin="http://127.0.0.2"),
            preflight(origin="https://127.0.0.2:8000"),     # another scheme
            preflight(origin="http://127.0.0.2:8000/"),
            preflight(origin="HTTP://127.0.0.2:8000"),      # not as a browser writes it
            preflight(origin="https://App.Example"),
            preflight(origin="https://app.example:443"),
            preflight(origin="https://evilapp.example"),
            preflight(origin="https://app.example.evil.example"),
            preflight(origin="null"),
            preflight(origin="*"),
            preflight(origin=""),
            preflight(origin=LISTED + ", " + LISTED),
            preflight(origin=None),
            preflight(origin=LISTED * 200),                 # 4400 bytes
            preflight(method="GET"),
            preflight(method="post"),
            preflight(method="PUT"),
            preflight(headers="authorization,cookie"),
            preflight(headers="x-custom"),
            preflight(headers="content-type,content-typ"),
            preflight(headers=",".join(["content-type"] * 17)),  # past the 16 names
        ]
        for raw in refused:
            with self.subTest(raw=raw[:160]):
                self.assertNoGrant(self.ask(raw))
        # Sixteen names: the edge, granted.
        self.assertGranted(self.ask(preflight(headers=",".join(["content-type"] * 16))))

    def test_only_the_service_paths(self):
        """The probes, the console, /metrics and a path outside the service
        grant nothing to a listed origin; a preflight for a method the
        service does not have neither (its 404, as without CORS); a call
        to one is the service's refusal, readable by the listed origin."""
        outside = ("/healthz", "/readyz", "/metrics", "/", "/console.js",
                   "/plimsoll.v1.Other/Run", "/plimsoll.v1.SandboxService")
        for path in outside + (SERVICE + "Nope",):
            with self.subTest(path=path):
                self.assertNoGrant(self.ask(preflight(path=path)), path)
        for path in outside:
            with self.subTest(path=path):
                status, headers, _ = self.ask(
                    ("GET %s HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\n\r\n" % (path, LISTED)).encode())
                self.assertEqual(cors_headers(headers), {})
        status, headers, _ = self.call("Nope", {})
        self.assertEqual(status, 404)
        self.assertAllowed(headers)

    def test_the_console_is_unaffected(self):
        plain = self.ask(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        same = self.ask(("GET / HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\n\r\n" % LISTED).encode())
        self.assertEqual(plain[0], 200)
        self.assertEqual((same[0], same[2]), (plain[0], plain[2]))
        self.assertEqual({k: v for k, v in same[1].items() if k != "date"},
                         {k: v for k, v in plain[1].items() if k != "date"})

    def test_a_preflight_holds_nothing(self):
        """Answered from its head: a body it announces is never waited for
        (the connection closes after the answer), granted or not."""
        for raw in (preflight(extra="Content-Length: 10000000\r\n"),
                    preflight(origin="http://elsewhere", extra="Content-Length: 10000000\r\n")):
            s = raw_connect(self.d)
            try:
                s.sendall(raw)
                status, headers, _ = read_answer(s)
                self.assertIn(status, (204, 405))
                self.assertEqual(headers.get("connection"), "close")
                self.assertTrue(closed_by_peer(s, AT_ONCE_S))
            finally:
                s.close()

    def test_many_headers(self):
        """A preflight in a head of 200 other headers is decided as any
        other; one past the server's head bound is refused by the front
        door, before the API sees it, with no grant."""
        junk = "".join("X-Junk-%d: %s\r\n" % (i, "v" * 40) for i in range(200))
        self.assertGranted(self.ask(preflight(extra=junk)))
        self.assertNoGrant(self.ask(preflight(origin="http://elsewhere.example", extra=junk)))
        huge = "".join("X-Junk-%d: %s\r\n" % (i, "v" * 1000) for i in range(200))
        s = raw_connect(self.d)
        try:
            s.sendall(preflight(extra=huge))
            try:
                status, headers, _ = read_answer(s)
                self.assertGreaterEqual(status, 400)
                self.assertEqual(cors_headers(headers), {})
            except (ConnectionError, OSError):
                pass  # closed unanswered: nothing granted either
        finally:
            s.close()
        self.assertGranted(self.ask(preflight()))

    def test_the_per_address_cap_holds(self):
        """Preflights from one address on kept-alive connections take its
        share like any call; the next connection is closed unanswered, and
        another address is served."""
        socks = []
        try:
            for _ in range(4):
                s = raw_connect(self.d, "127.0.0.5")
                s.sendall(preflight())
                self.assertEqual(read_answer(s)[0], 204)
                socks.append(s)
            s = raw_connect(self.d, "127.0.0.5")
            try:
                s.sendall(preflight())
                self.assertTrue(closed_by_peer(s, AT_ONCE_S))
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                s.close()
            self.assertGranted(self.ask(preflight(), source="127.0.0.6"))
        finally:
            for s in socks:
                s.close()

    def test_logged_and_counted_as_preflights(self):
        self.ask(preflight(path=SERVICE + "Describe"))
        self.ask(preflight(origin="http://stranger.example", path=SERVICE + "Describe"))
        time.sleep(0.2)  # the log line is written after the answer
        lines = [l for l in self.d.log_lines() if l.get("method") == "preflight"]
        self.assertIn("granted", {l.get("cors") for l in lines})
        self.assertIn("an origin not in PLIMSOLL_CORS_ORIGINS", {l.get("cors") for l in lines})
        self.assertTrue(all(l.get("principal") is None for l in lines))
        status, _, text = self.d.request("GET", "/metrics", headers={
            "Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 200)
        self.assertRegex(text.decode(), r'plimsoll_requests_total\{method="preflight",code="ok"\} [1-9]')

    # ---- the answers ---------------------------------------------------------

    def assertAllowed(self, headers, origin=LISTED):
        self.assertEqual(headers.get("access-control-allow-origin"), origin)
        exposed = {h.strip() for h in headers["access-control-expose-headers"].split(",")}
        self.assertLessEqual({"grpc-status", "grpc-message", "grpc-status-details-bin"}, exposed)
        self.assertEqual(headers["vary"], "Origin")
        self.assertNotIn("access-control-allow-credentials", headers)

    def call(self, method, message, origin=LISTED, key="alice", ctype="application/json",
             body=None):
        h = {"Content-Type": ctype, "Connect-Protocol-Version": "1"}
        if origin:
            h["Origin"] = origin
        if key:
            h["Authorization"] = "Bearer " + self.d.keys.get(key, key)
        return self.d.request("POST", SERVICE + method,
                              body if body is not None else json.dumps(message).encode(), h)

    def test_answers_to_a_listed_origin(self):
        status, headers, body = self.call("Run", js("console.log(6 * 7)"))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["stdout"], "42\n")
        self.assertAllowed(headers)
        # Refusals, from the head and from the body.
        status, headers, _ = self.call("Run", js("1"), key="wrong")
        self.assertEqual(status, 401)
        self.assertAllowed(headers)
        status, headers, _ = self.call("Run", js("1", minimum_isolation="vm"))
        self.assertEqual(status, 400)
        self.assertAllowed(headers)
        status, headers, _ = self.call("Run", js("1"), ctype="text/plain")
        self.assertEqual(status, 415)
        self.assertAllowed(headers)
        # A stream: the head carries it.
        env = b"\x00" + len(json.dumps(js("console.log(1)")).encode()).to_bytes(4, "big")
        status, headers, body = self.call(
            "RunStream", None, ctype="application/connect+json",
            body=env + json.dumps(js("console.log(1)")).encode())
        self.assertEqual(status, 200)
        self.assertAllowed(headers)
        self.assertIn(b'"exit_code":0', body)
        # gRPC-Web's refusal, trailers-only: its status in the exposed headers.
        status, headers, _ = self.call("Run", None, key="wrong", ctype="application/grpc-web+proto",
                                       body=b"\x00\x00\x00\x00\x00")
        self.assertEqual((status, headers["grpc-status"]), (200, "16"))
        self.assertAllowed(headers)

    def test_origin_twice_is_refused(self):
        """Two Origin headers: INVALID_REQUEST with no CORS header, whichever
        of them is listed (libmicrohttpd would hand over the first alone)."""
        key = self.d.keys["alice"]
        for first, second in ((LISTED, LISTED), (LISTED, "http://127.0.0.3:8000"),
                              ("http://127.0.0.3:8000", LISTED)):
            with self.subTest(origins=(first, second)):
                extra = "Origin: %s\r\n" % second
                status, headers, body = self.ask(preflight(origin=first, extra=extra))
                self.assertEqual(status, 400, body)
                self.assertEqual(cors_headers(headers), {})
                self.assertEqual(error_info(json.loads(body))[0]["reason"], "INVALID_REQUEST")
                self.assertIn("Origin header came more than once", json.loads(body)["message"])
                raw = (("POST %sDescribe HTTP/1.1\r\nHost: plimsoll\r\nOrigin: %s\r\n"
                        "Origin: %s\r\nContent-Type: application/json\r\nAuthorization: "
                        "Bearer %s\r\nContent-Length: 2\r\n\r\n{}") % (SERVICE, first, second,
                                                                      key)).encode()
                status, headers, body = self.ask(raw)
                self.assertEqual(status, 400, body)
                self.assertEqual(cors_headers(headers), {})
                self.assertEqual(error_info(json.loads(body))[0]["reason"], "INVALID_REQUEST")
        # one Origin, as ever
        self.assertGranted(self.ask(preflight()))

    def test_answers_to_others_carry_no_grant(self):
        """The call is answered as ever (CORS is the browser's to enforce:
        a key decides who runs what); no grant for an unlisted origin."""
        for origin in (None, "http://127.0.0.3:8000", "null", "HTTP://127.0.0.2:8000"):
            status, headers, body = self.call("Run", js("console.log(1)"), origin=origin)
            self.assertEqual(status, 200, body)
            self.assertEqual(cors_headers(headers), {})


class CorsH2(unittest.TestCase):
    """The same decisions over HTTP/2 (h2c), by curl."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_CORS_ORIGINS": ORIGINS}).start()
        cls.base = "http://%s:%d" % (cls.d.host, cls.d.port)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def curl(self, *args):
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null",
                            "-D", "-", "-w", "%{http_version}"] + list(args),
                           capture_output=True, timeout=60)
        # A refusal at the head (401) ends the stream before a body is sent
        # and the reset that follows is NO_ERROR (RFC 9113, 8.1); Debian's
        # curl 7.88 exits 92 when it comes while the body is still going
        # out, with the answer's head written: the head is judged below.
        self.assertIn(p.returncode, (0, 92), p.stderr)
        lines = p.stdout.decode().split("\r\n")
        if p.returncode == 92:
            lines.append("2")  # -w is not written after an error
        self.assertEqual(lines[-1], "2")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, sep, v = line.partition(":")
            if sep:
                headers[k.strip().lower()] = v.strip()
        return status, headers

    def options(self, *headers, path=SERVICE + "Run"):
        args = ["-X", "OPTIONS"]
        for h in headers:
            args += ["-H", h]
        return self.curl(*args, self.base + path)

    def test_preflight(self):
        status, h = self.options("Origin: " + LISTED, "Access-Control-Request-Method: POST",
                                 "Access-Control-Request-Headers: " + GRPC_WEB_HEADERS)
        self.assertEqual(status, 204)
        self.assertEqual(h["access-control-allow-origin"], LISTED)
        self.assertEqual(h["access-control-allow-methods"], "POST")
        self.assertEqual(h["access-control-max-age"], "600")
        self.assertEqual(h["vary"], "Origin")
        plain = self.options()
        self.assertEqual(plain[0], 405)
        for refused in (("Origin: http://127.0.0.2:8001", "Access-Control-Request-Method: POST"),
                        ("Origin: null", "Access-Control-Request-Method: POST"),
                        ("Origin: " + LISTED, "Access-Control-Request-Method: DELETE"),
                        ("Origin: " + LISTED, "Access-Control-Request-Method: POST",
                         "Access-Control-Request-Headers: cookie"),
                        ("Access-Control-Request-Method: POST",)):
            with self.subTest(refused=refused):
                status, h = self.options(*refused)
                self.assertEqual(status, 405)
                self.assertEqual(cors_headers(h), {})
                self.assertEqual({k: v for k, v in h.items() if k != "date"},
                                 {k: v for k, v in plain[1].items() if k != "date"})
        status, h = self.options("Origin: " + LISTED, "Access-Control-Request-Method: POST",
                                 path="/healthz")
        self.assertEqual(cors_headers(h), {})

    def test_answers(self):
        key = self.d.keys["alice"]
        for auth, want in (("Authorization: Bearer " + key, 200),
                           ("Authorization: Bearer nope", 401)):
            status, h = self.curl("-H", "Origin: " + LISTED, "-H", "Content-Type: application/json",
                                  "-H", auth, "--data", json.dumps(js("console.log(1)")),
                                  self.base + SERVICE + "Run")
            self.assertEqual(status, want)
            self.assertEqual(h["access-control-allow-origin"], LISTED)
            self.assertIn("grpc-status", h["access-control-expose-headers"])
        msg = json.dumps(js("console.log(1)")).encode()
        body = b"\x00" + len(msg).to_bytes(4, "big") + msg
        path = os.path.join(self.d.dir, "stream.bin")
        with open(path, "wb") as f:
            f.write(body)
        status, h = self.curl("-H", "Origin: " + OTHER, "-H", "Content-Type: application/connect+json",
                              "-H", "Authorization: Bearer " + key, "--data-binary", "@" + path,
                              self.base + SERVICE + "RunStream")
        self.assertEqual(status, 200)
        self.assertEqual(h["access-control-allow-origin"], OTHER)
        status, h = self.curl("-H", "Origin: http://127.0.0.3:8000", "-H",
                              "Content-Type: application/json", "-H", "Authorization: Bearer " + key,
                              "--data", json.dumps(js("1")), self.base + SERVICE + "Run")
        self.assertEqual((status, cors_headers(h)), (200, {}))

    def test_origin_twice_is_refused(self):
        """As over HTTP/1.1: INVALID_REQUEST, no CORS header."""
        for first, second in ((LISTED, LISTED), (LISTED, OTHER)):
            status, h = self.options("Origin: " + first, "Origin: " + second,
                                     "Access-Control-Request-Method: POST")
            self.assertEqual((status, cors_headers(h)), (400, {}))
            status, h = self.curl("-H", "Origin: " + first, "-H", "Origin: " + second,
                                  "-H", "Content-Type: application/json", "-H",
                                  "Authorization: Bearer " + self.d.keys["alice"], "--data", "",
                                  self.base + SERVICE + "Describe")  # no body: no race with
            # the early answer's RST_STREAM(NO_ERROR), which curl may take for an error
            self.assertEqual((status, cors_headers(h)), (400, {}))
        c = h2raw.Conn(self.d)  # the refusal's body: the typed error
        try:
            base = [(":method", "OPTIONS"), (":scheme", "http"), (":path", SERVICE + "Run"),
                    (":authority", "plimsoll"), ("access-control-request-method", "POST")]
            c.headers(1, base + [("origin", LISTED), ("origin", LISTED)], end_stream=True)
            body = c.json_answer(1)
            self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
            self.assertIn("Origin header came more than once", body["message"])
        finally:
            c.close()

    def test_hostile_heads(self):
        """An Origin past PL_H2_MAX_HEADER_BYTES resets the stream; the
        connection goes on."""
        c = h2raw.Conn(self.d)
        try:
            base = [(":method", "OPTIONS"), (":scheme", "http"), (":path", SERVICE + "Run"),
                    (":authority", "plimsoll"), ("access-control-request-method", "POST")]
            c.headers(3, base + [("origin", "http://" + "a" * 40000)], end_stream=True)
            for stream in (3,):
                f, _ = c.until(lambda f, stream=stream: f[2] == stream)
                self.assertEqual(f[0], h2raw.RST_STREAM, f)
            c.headers(5, h2raw.request_headers("Describe", self.d.keys["alice"],
                                               extra=[("origin", LISTED)]), end_stream=False)
            c.data(5, b"{}")
            self.assertEqual(c.json_answer(5)["provider"], "wasm")
        finally:
            c.close()


class NoSetting(unittest.TestCase):
    """Unset: no CORS anywhere, a listed-looking preflight is an OPTIONS."""

    def test_none(self):
        with Daemon(env={"SANDBOX_PROVIDER": "wasm"}) as d:
            s = raw_connect(d)
            try:
                s.sendall(preflight())
                status, headers, _ = read_answer(s)
            finally:
                s.close()
            self.assertEqual((status, headers.get("allow")), (405, "POST"))
            self.assertEqual(cors_headers(headers), {})
            status, headers, _ = d.request(
                "POST", SERVICE + "Describe", b"{}",
                {"Content-Type": "application/json", "Origin": LISTED,
                 "Authorization": "Bearer " + d.keys["alice"]})
            self.assertEqual((status, cors_headers(headers)), (200, {}))
            # Origin means nothing here: twice is no refusal either
            s = raw_connect(d)
            try:
                s.sendall(("POST %sDescribe HTTP/1.1\r\nHost: plimsoll\r\nOrigin: %s\r\n"
                           "Origin: %s\r\nContent-Type: application/json\r\nAuthorization: "
                           "Bearer %s\r\nContent-Length: 2\r\n\r\n{}" % (
                               SERVICE, LISTED, OTHER, d.keys["alice"])).encode())
                status, headers, _ = read_answer(s)
            finally:
                s.close()
            self.assertEqual((status, cors_headers(headers)), (200, {}))


if __name__ == "__main__":
    unittest.main()
