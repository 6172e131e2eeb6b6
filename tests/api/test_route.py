# SPDX-License-Identifier: Apache-2.0
"""A fleet's parts in one daemon (docs/deploy.md), against a real wasm
daemon: PLIMSOLL_INSTANCE on every answer as Plimsoll-Route; a call naming
another daemon refused WRONG_ROUTE before its body is read, over HTTP/1.1,
h2c, gRPC-Web and gRPC (trailers-only), naming no id; a route that is no
route key INVALID_REQUEST; the daemon's own route served; SIGTERM's drain
notice (PLIMSOLL_DRAIN_NOTICE_MS): /readyz and gRPC health fail while runs
are still served, then SHUTTING_DOWN, and a second SIGTERM cuts it short.
(tests/fleet drives the same behind HAProxy with docker daemons.)
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import SERVICE, ClassDaemon, Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

RUN = js("console.log(6 * 7)")


class Routes(ClassDaemon, unittest.TestCase):
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_INSTANCE": "east-1.a_b",
                  "PLIMSOLL_MAX_REQUEST_BYTES": "65536"}

    def headers(self, **extra):
        h = {"Content-Type": "application/json", "Authorization": "Bearer " + self.d.keys["alice"]}
        h.update(extra)
        return h

    def test_every_answer_names_the_daemon(self):
        for method, path, body, h in (
                ("GET", "/healthz", None, {}), ("GET", "/readyz", None, {}),
                ("POST", SERVICE + "Run", b"{}", {"Content-Type": "application/json"}),
                ("POST", SERVICE + "Describe", b"{}", self.headers()),
                ("POST", SERVICE + "Nope", b"{}", self.headers())):
            status, headers, _ = self.d.request(method, path, body, h)
            self.assertEqual(headers.get("plimsoll-route"), "east-1.a_b", (path, status))

    def test_another_daemons_route_is_refused_before_the_body(self):
        before = self.d.rpc("Describe", {})[1]
        answers = []
        for body in (json.dumps(RUN).encode(), b"{not json", b""):
            status, headers, data = self.d.request(
                "POST", SERVICE + "Run", body, self.headers(**{"Plimsoll-Route": "west-2"}))
            self.assertEqual(status, 503, data)
            answer = json.loads(data)
            info, _ = error_info(answer)
            self.assertEqual((answer["code"], info["reason"], info["metadata"]["dispatched"]),
                             ("unavailable", "WRONG_ROUTE", "false"))
            self.assertIn('"west-2"', answer["message"])
            self.assertIn('"east-1.a_b"', answer["message"])
            answers.append(data)
        self.assertEqual(answers[0], answers[1])
        self.assertEqual(answers[0], answers[2])
        # A body announced past PLIMSOLL_MAX_REQUEST_BYTES: the route's
        # refusal comes first, from the head alone.
        status, _, data = self.d.request("POST", SERVICE + "Run", b"x" * 70000,
                                         self.headers(**{"Plimsoll-Route": "west-2"}))
        self.assertEqual(status, 503, data)
        metrics = self.d.request("GET", "/metrics", None, self.headers())[2].decode()
        self.assertIn('plimsoll_refusals_total{reason="WRONG_ROUTE"} 4', metrics)
        self.assertEqual(before, self.d.rpc("Describe", {})[1])

    def test_no_key_first(self):
        status, _, _ = self.d.request("POST", SERVICE + "Run", json.dumps(RUN).encode(),
                                      {"Content-Type": "application/json",
                                       "Plimsoll-Route": "west-2"})
        self.assertEqual(status, 401)

    def test_a_route_that_is_no_route_key(self):
        for bad in ("a/b", "x" * 64, "d1 d2", "é", "..%2f"):
            status, _, data = self.d.request("POST", SERVICE + "Run", json.dumps(RUN).encode(),
                                             self.headers(**{"Plimsoll-Route": bad}))
            self.assertEqual(status, 400, (bad, data))
            info, _ = error_info(json.loads(data))
            self.assertEqual(info["reason"], "INVALID_REQUEST")
            self.assertNotIn(bad.encode(), data)

    def test_its_own_route_is_served(self):
        status, headers, data = self.d.request("POST", SERVICE + "Run", json.dumps(RUN).encode(),
                                               self.headers(**{"Plimsoll-Route": "east-1.a_b"}))
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["stdout"], "42\n")

    def curl(self, *args):
        p = subprocess.run(["curl", "-sS", "-D", "-", "-o", "-"] + list(args), capture_output=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.decode("latin-1")

    def test_over_h2c_grpc_web_and_grpc(self):
        url = "http://%s:%d%sRun" % (self.d.host, self.d.port, SERVICE)
        auth = ["-H", "Authorization: Bearer " + self.d.keys["alice"],
                "-H", "Plimsoll-Route: west-2"]
        out = self.curl("--http2-prior-knowledge", "-H", "Content-Type: application/json",
                        "--data-binary", json.dumps(RUN), *auth, url)
        self.assertIn("HTTP/2 503", out)
        self.assertIn("plimsoll-route: east-1.a_b", out)
        self.assertIn("WRONG_ROUTE", out)
        frame = b"\x00\x00\x00\x00\x00"  # an empty RunRequest
        for proto, ctype in ((["--http2-prior-knowledge", "-H", "te: trailers"],
                              "application/grpc"), ([], "application/grpc-web+proto")):
            # The answer comes from the head, and the stream is then reset
            # with NO_ERROR while curl may still be sending the body: curl
            # 7.88 then drops the answer (exit 92; RFC 9113 section 8.1
            # says keep it), so a try that got no answer is made again.
            for _ in range(10):
                p = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null"] + proto +
                                   ["-H", "Content-Type: " + ctype, "--data-binary", "@-"] + auth +
                                   [url], input=frame, capture_output=True, timeout=60)
                if p.returncode != 92:
                    break
            head = p.stdout.decode("latin-1").lower()
            self.assertIn("grpc-status: 14", head, (ctype, p.returncode, p.stderr))  # UNAVAILABLE
            self.assertIn("plimsoll-route: east-1.a_b", head)


class DrainNotice(unittest.TestCase):
    def start(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_DRAIN_NOTICE_MS": "60000",
                        "PLIMSOLL_INSTANCE": "leaving"}).start()
        self.addCleanup(d.stop)
        return d

    def wait_readyz(self, d, status):
        deadline = time.monotonic() + 20
        while d.request("GET", "/readyz")[0] != status:
            self.assertLess(time.monotonic(), deadline, "/readyz never answered %d" % status)
            time.sleep(0.02)

    def test_not_ready_first_while_runs_are_served_then_a_second_signal_ends_it(self):
        d = self.start()
        self.assertEqual(d.request("GET", "/readyz")[0], 200)
        d.proc.send_signal(signal.SIGTERM)
        self.wait_readyz(d, 503)
        for _ in range(3):
            status, body = d.rpc("Run", RUN)
            self.assertEqual((status, body.get("stdout")), (200, "42\n"), body)
        status, _, data = d.request("GET", "/metrics", None,
                                    {"Authorization": "Bearer " + d.keys["alice"]})
        self.assertIn("plimsoll_ready 0", data.decode())
        self.assertTrue(any(x.get("msg") == "leaving" and x.get("notice_ms") == 60000
                            for x in d.log_lines()), d.log_text())
        self.assertIsNone(d.proc.poll())
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)  # the notice cut short
        self.assertEqual(d.proc.wait(30), 0, d.log_text())
        self.assertLess(time.monotonic() - t0, 30)
        msgs = [x.get("msg") for x in d.log_lines()]
        self.assertLess(msgs.index("leaving"), msgs.index("draining"))

    def test_grpc_health_says_not_serving(self):
        d = self.start()
        d.proc.send_signal(signal.SIGTERM)
        self.wait_readyz(d, 503)
        url = "http://%s:%d/grpc.health.v1.Health/Check" % (d.host, d.port)
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "-", "-H", "te: trailers",
                            "-H", "Content-Type: application/grpc", "--data-binary", "@-", url],
                           input=b"\x00\x00\x00\x00\x00", capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        # HealthCheckResponse{status: NOT_SERVING (2)}: field 1, varint 2.
        self.assertEqual(p.stdout, b"\x00\x00\x00\x00\x02\x08\x02")
        d.proc.send_signal(signal.SIGINT)
        self.assertEqual(d.proc.wait(30), 0)


if __name__ == "__main__":
    unittest.main()
