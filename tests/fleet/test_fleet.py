# SPDX-License-Identifier: Apache-2.0
"""A fleet: three real plimsolld (docker provider, runc, one engine,
distinct PLIMSOLL_INSTANCE and SANDBOX_DOCKER_INSTANCE) behind Debian's
HAProxy running deploy/haproxy.cfg as shipped (docs/deploy.md).

FleetServes: runs spread over all three; sessions keep their daemon for
100 calls by the Plimsoll-Route header; a call naming another daemon is
refused WRONG_ROUTE before its body is read and says nothing of the id;
HTTP/1.1, h2c and TLS (h2 and HTTP/1.1) through the proxy; gRPC (grpcio,
unary and streaming) and Connect streaming intact through it.

FleetLoses: SIGTERM with PLIMSOLL_DRAIN_NOTICE_MS: the daemon fails
/readyz first, the proxy stops sending it work while runs keep flowing
(none refused), its run in flight finishes, it exits 0; a daemon killed
outright: its session's calls answer WRONG_ROUTE (typed, nothing ran)
while the other sessions and runs carry on; restarted, it reaps what its
first life left and answers NOT_FOUND for the session it lost; no
container of any daemon is left.

Run: PLIMSOLL_BUILD_DIR=... python3 tests/fleet/test_fleet.py
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.fleet import SERVICE, Fleet  # noqa: E402
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.payloads import js, py  # noqa: E402

CONFORMANCE = os.path.join(HERE, "..", "conformance")
DEBIAN_PYTHON = "/usr/bin/python3"  # the one python3-grpcio is for
RUN = js("console.log(6 * 7)")


def cell(code, language="python"):
    return {"language": language, "code": code}


class FleetCase(unittest.TestCase):
    TLS = False
    SETTINGS = {}

    @classmethod
    def setUpClass(cls):
        cls.f = Fleet(n=3, instance="fleet" + cls.__name__.lower(), tls=cls.TLS,
                      settings=cls.SETTINGS).start()

    @classmethod
    def tearDownClass(cls):
        cls.f.stop()

    def open_session(self, route=None):
        status, body, answered = self.f.rpc("OpenSession", {"languages": ["python"]}, route=route)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["route"], answered, body)
        if route:
            self.assertEqual(answered, route)
        self.addCleanup(self.f.rpc, "CloseSession", {"session_id": body["session_id"]},
                        route=body["route"])
        return body["session_id"], body["route"]

    def assertRefused(self, status, body, reason, http_status):
        self.assertEqual(status, http_status, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason, body)
        self.assertEqual(info["metadata"]["dispatched"], "false", body)
        return info


class FleetServes(FleetCase):
    TLS = True

    def test_runs_spread_over_all_three(self):
        """30 runs, 6 at a time: each daemon answers some, and its own
        /metrics counts them (the proxy's word and the daemons' agree)."""
        def before(name):
            d = self.f.daemons[name]
            _, _, data = d.request("GET", "/metrics", headers={
                "Authorization": "Bearer " + self.f.keys["alice"]})
            return sum(float(line.rsplit(" ", 1)[1]) for line in data.decode().splitlines()
                       if line.startswith("plimsoll_runs_total{"))
        counts0 = {n: before(n) for n in self.f.daemons}
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            answers = list(ex.map(lambda _: self.f.rpc("Run", RUN), range(30)))
        by = {}
        for status, body, answered in answers:
            self.assertEqual(status, 200, body)
            self.assertEqual(body["stdout"], "42\n")
            by[answered] = by.get(answered, 0) + 1
        self.assertEqual(sorted(by), ["d1", "d2", "d3"], by)
        counts1 = {n: before(n) for n in self.f.daemons}
        for n in self.f.daemons:
            self.assertGreaterEqual(counts1[n] - counts0[n], by[n], (counts0, counts1, by))

    def test_sessions_keep_their_daemon_for_100_calls(self):
        """Three sessions, one opened on each daemon (the route header on
        OpenSession picks it), 102 cells in turn: every cell answered by its
        session's daemon, and each session's counter counts on (one
        interpreter per session the whole time)."""
        sessions = [self.open_session(route=n) for n in ("d1", "d2", "d3")]
        for sid, route in sessions:
            status, body, _ = self.f.rpc("RunCell", {"session_id": sid, "cell": cell("n = 0")},
                                         route=route)
            self.assertEqual(status, 200, body)
        for i in range(1, 35):
            for sid, route in sessions:
                status, body, answered = self.f.rpc(
                    "RunCell", {"session_id": sid, "cell": cell("n += 1\nprint(n)")}, route=route)
                self.assertEqual(status, 200, body)
                self.assertEqual(answered, route)
                self.assertEqual(body["stdout"], "%d\n" % i, body)

    def test_without_the_route_a_session_call_may_miss(self):
        """The reason for the header: a session's calls without it are
        balanced like runs, and the daemons that do not hold it answer
        NOT_FOUND (the id is theirs to keep secret)."""
        sid, route = self.open_session(route="d1")
        seen = set()
        for _ in range(12):
            status, body, answered = self.f.rpc("GetSession", {"session_id": sid})
            seen.add((answered, status))
        self.assertIn(("d1", 200), seen)
        self.assertTrue(any(s == 404 for _, s in seen), seen)

    def test_a_wrong_route_is_refused_before_the_body_and_says_nothing_of_the_id(self):
        """Straight to d1, naming d2: WRONG_ROUTE (unavailable, 503),
        nothing ran, the same answer for d2's real session id, a made-up
        id and no body at all; the id is in no answer and no log line."""
        sid, route = self.open_session(route="d2")
        d1 = self.f.daemons["d1"]
        h = {"Content-Type": "application/json", "Authorization": "Bearer " + self.f.keys["alice"],
             "Plimsoll-Route": "d2"}
        answers = []
        for body in (json.dumps({"session_id": sid, "cell": cell("1")}).encode(),
                     json.dumps({"session_id": "0" * 64, "cell": cell("1")}).encode(), b"{"):
            status, headers, data = d1.request("POST", SERVICE + "RunCell", body, h)
            self.assertEqual(headers.get("plimsoll-route"), "d1")
            self.assertRefused(status, json.loads(data), "WRONG_ROUTE", 503)
            self.assertNotIn(sid.encode(), data)
            answers.append(data)
        self.assertEqual(answers[0], answers[1])
        self.assertEqual(answers[0], answers[2])
        self.assertNotIn(sid, d1.log_text())
        # No key: 401 first, whatever the route says.
        status, _, _ = d1.request("POST", SERVICE + "RunCell", b"{}",
                                  {"Content-Type": "application/json", "Plimsoll-Route": "d2"})
        self.assertEqual(status, 401)
        # A route that is no route key: INVALID_REQUEST; the daemon's own: served.
        status, _, data = d1.request("POST", SERVICE + "Describe", b"{}",
                                     dict(h, **{"Plimsoll-Route": "d2/../x"}))
        self.assertRefused(status, json.loads(data), "INVALID_REQUEST", 400)
        status, _, data = d1.request("POST", SERVICE + "Describe", b"{}",
                                     dict(h, **{"Plimsoll-Route": "d1"}))
        self.assertEqual(status, 200, data)
        # The session, through the proxy with its route, is untouched.
        status, body, answered = self.f.rpc("RunCell", {"session_id": sid, "cell": cell("1 + 1")},
                                            route=route)
        self.assertEqual((status, answered), (200, "d2"), body)

    def curl(self, *args):
        p = subprocess.run(["curl", "-sS", "--max-time", "60", "-D", "-"] + list(args),
                           capture_output=True, text=True, timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr)
        head, _, body = p.stdout.partition("\n\n")  # text mode: CRLF read as LF
        return head, body

    def test_h2c_and_tls_through_the_proxy(self):
        """curl, as a caller would: h2c with prior knowledge to the plain
        port, h2 and HTTP/1.1 by ALPN to the TLS port; a session's cell by
        its route over each."""
        sid, route = self.open_session(route="d3")
        data = json.dumps({"session_id": sid, "cell": cell("print('via', 40 + 2)")})
        plain = "http://127.0.0.1:%d" % self.f.proxy_port
        tls = "https://localhost:%d" % self.f.tls_port
        common = ["-H", "Content-Type: application/json",
                  "-H", "Authorization: Bearer " + self.f.keys["alice"],
                  "-H", "Plimsoll-Route: " + route, "--data-binary", data]
        for proto, url in ((["--http2-prior-knowledge"], plain), (["--http1.1"], plain),
                           (["--http2", "--cacert", self.f.ca], tls),
                           (["--http1.1", "--cacert", self.f.ca], tls)):
            head, body = self.curl(*(proto + common + [url + SERVICE + "RunCell"]))
            first = head.splitlines()[0]
            self.assertIn("200", first, head)
            self.assertTrue(first.startswith("HTTP/2" if "--http1.1" not in proto else "HTTP/1.1"),
                            first)
            self.assertIn("plimsoll-route: d3", head.lower())
            self.assertEqual(json.loads(body)["stdout"], "via 42\n")

    def test_connect_streaming_through_the_proxy(self):
        """RunStream in Connect's streaming JSON over HTTP/1.1 through the
        proxy: the chunks, then the end with the result."""
        msg = json.dumps(py("import sys, time\nfor i in range(3):\n    print(i, flush=True)\n"
                            "    time.sleep(0.1)\n")).encode()
        env = b"\x00" + len(msg).to_bytes(4, "big") + msg
        status, headers, data = self.f.request(
            "POST", SERVICE + "RunStream", env,
            {"Content-Type": "application/connect+json",
             "Authorization": "Bearer " + self.f.keys["alice"]})
        self.assertEqual(status, 200, data)
        msgs, i = [], 0
        while i < len(data):
            flags, n = data[i], int.from_bytes(data[i + 1:i + 5], "big")
            msgs.append((flags, json.loads(data[i + 5:i + 5 + n])))
            i += 5 + n
        self.assertEqual(msgs[-1][0] & 2, 2, msgs)  # the end-of-stream message
        results = [m for f, m in msgs if not f & 2 and "result" in m]
        self.assertEqual(len(results), 1, msgs)
        self.assertEqual(results[0]["result"]["stdout"], "0\n1\n2\n")

    def grpc(self, calls):
        gen = os.path.join(self.f.dir, "gen")
        if not os.path.isdir(gen):
            os.mkdir(gen)
            sys.path.insert(0, CONFORMANCE)
            from test_grpcio import generate
            generate(gen)
        for c in calls:
            c.setdefault("key", self.f.keys["alice"])
        cfg = {"target": "127.0.0.1:%d" % self.f.proxy_port, "gen": gen, "calls": calls}
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(CONFORMANCE, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(x) for x in p.stdout.splitlines()]

    def test_grpc_through_the_proxy(self):
        """Debian's grpcio over h2c to the proxy: unary, server streaming,
        a typed error in grpc-status-details-bin, and a session opened and
        used by its route given as gRPC metadata."""
        out = self.grpc([{"method": "Run", "request": RUN},
                         {"method": "RunStream", "request": py("print('streamed')")},
                         {"method": "Run", "request": js("1", minimum_isolation="vm")},
                         {"method": "OpenSession", "request": {"languages": ["python"]},
                          "metadata": [["plimsoll-route", "d2"]]}])
        self.assertEqual(out[0]["ok"]["stdout"], "42\n", out[0])
        self.assertEqual(out[1]["stream"][-1]["result"]["stdout"], "streamed\n", out[1])
        self.assertEqual(out[2]["error"]["code"], "failed_precondition", out[2])
        self.assertEqual(out[2]["error"]["details"][0]["reason"], "INSUFFICIENT_ISOLATION")
        opened = out[3]["ok"]
        self.assertEqual((opened["route"], out[3]["route"]), ("d2", "d2"), out[3])
        self.addCleanup(self.f.rpc, "CloseSession", {"session_id": opened["session_id"]},
                        route="d2")
        md = [["plimsoll-route", "d2"]]
        out = self.grpc([
            {"method": "RunCell", "metadata": md,
             "request": {"session_id": opened["session_id"], "cell": cell("x = 5")}},
            {"method": "RunCellStream", "metadata": md,
             "request": {"session_id": opened["session_id"], "cell": cell("print(x * 2)")}},
            {"method": "RunCell", "metadata": [["plimsoll-route", "d9"]],
             "request": {"session_id": opened["session_id"], "cell": cell("x")}}])
        self.assertIn("ok", out[0], out[0])
        self.assertEqual(out[0]["route"], "d2")
        self.assertEqual(out[1]["stream"][-1]["result"]["stdout"], "10\n", out[1])
        # d9 is no server of the proxy's: balanced, and refused where it lands.
        self.assertEqual(out[2]["error"]["code"], "unavailable", out[2])
        self.assertEqual(out[2]["error"]["details"][0]["reason"], "WRONG_ROUTE")
        self.assertEqual(out[2]["error"]["details"][0]["metadata"]["dispatched"], "false")

    def test_an_mcp_session_keeps_its_daemon(self):
        """MCP's Streamable HTTP through the proxy: the daemon that answered
        initialize answers every later message of the MCP session (the
        proxy keeps the session id's digest), so 9 tool calls in a row all
        work (balanced like runs, two in three would get 404)."""
        h = self.f.headers(extra={"Accept": "application/json, text/event-stream",
                                  "Host": "127.0.0.1"})
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "fleet", "version": "1"}}}
        status, headers, data = self.f.request("POST", "/mcp", json.dumps(init).encode(), h)
        self.assertEqual(status, 200, data)
        sid, home = headers["mcp-session-id"], headers["plimsoll-route"]
        h = dict(h, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        status, _, _ = self.f.request("POST", "/mcp", json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), h)
        self.assertEqual(status, 202)
        for i in range(1, 10):
            status, headers, data = self.f.request("POST", "/mcp", json.dumps(
                {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                 "params": {"name": "run_code",
                            "arguments": {"language": "python", "code": "print(%d)" % i}}}).encode(),
                h)
            self.assertEqual((status, headers.get("plimsoll-route")), (200, home), data)
            answer = json.loads(data)["result"]
            self.assertFalse(answer["isError"], answer)
            self.assertEqual(answer["structuredContent"]["stdout"], "%d\n" % i)
        self.assertNotIn(sid, self.f.proxy_text())

    def test_the_proxy_logs_routes_never_ids_or_keys(self):
        sid, route = self.open_session(route="d1")
        self.f.rpc("GetSession", {"session_id": sid}, route=route)
        text = self.f.proxy_text()
        self.assertIn("{d1}", text)
        self.assertNotIn(sid, text)
        for k in self.f.keys.values():
            self.assertNotIn(k, text)


class FleetLoses(FleetCase):
    # Long enough for the proxy's check (every second, down at the first
    # failure) to see /readyz fail while the daemon still serves.
    SETTINGS = {"PLIMSOLL_DRAIN_NOTICE_MS": "5000"}

    def test_1_a_drained_daemon_finishes_its_run_and_gets_no_new_work(self):
        """A 3 s run pinned on d2 (a run naming d2's route goes there);
        SIGTERM d2 a second in: /readyz fails at once, the proxy takes d2
        out, runs sent all along are answered (none refused, none by d2 once
        it is out), d2's run finishes ok and d2 exits 0 with nothing
        abandoned."""
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            pinned = ex.submit(self.f.rpc, "Run",
                               py("import time\ntime.sleep(3)\nprint('finished')"), route="d2")
            time.sleep(1)
            d2 = self.f.daemons["d2"]
            d2.proc.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            while d2.request("GET", "/readyz")[0] != 503:  # from the signal's taking on
                self.assertLess(time.monotonic() - t0, 10, "/readyz still ready")
                time.sleep(0.02)
            flowing, out_at = [], None
            while d2.proc.poll() is None and time.monotonic() - t0 < 60:
                flowing.append(self.f.rpc("Run", RUN))
                if out_at is None and not self.f.proxy_up("d2"):
                    out_at = len(flowing)
            status, body, answered = pinned.result()
        self.assertEqual((status, answered), (200, "d2"), body)
        self.assertEqual((body["outcome"], body["stdout"]), ("completed", "finished\n"), body)
        self.assertEqual(d2.proc.wait(30), 0, d2.log_text()[-2000:])
        self.assertTrue(any(x.get("msg") == "stopped" and x.get("abandoned_runs") == 0
                            for x in d2.log_lines()), d2.log_text()[-2000:])
        self.assertIsNotNone(out_at, "the proxy never took d2 out")
        for status, body, _ in flowing:
            self.assertEqual(status, 200, body)
        self.assertFalse([a for _, _, a in flowing[out_at:] if a == "d2"], flowing[out_at:])
        self.assertGreater(len(flowing) - out_at, 0)

    def test_2_a_killed_daemons_sessions_answer_typed_and_the_rest_carry_on(self):
        """Sessions on d1 and d3; d3 killed outright (SIGKILL): its
        session's next call is WRONG_ROUTE (503, nothing ran) from a daemon
        that is still up, before and after the proxy has seen it go; d1's
        session keeps its state, and runs go on."""
        s1 = self.open_session(route="d1")
        s3 = self.open_session(route="d3")
        for sid, route in (s1, s3):
            status, body, _ = self.f.rpc("RunCell", {"session_id": sid, "cell": cell("k = 7")},
                                         route=route)
            self.assertEqual(status, 200, body)
        d3 = self.f.daemons["d3"]
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            # A run in progress on d3 when it dies: the proxy's INTERNAL,
            # dispatched (the code may have run), in the daemons' model.
            doomed = ex.submit(self.f.rpc, "Run", py("import time\nprint('started', flush=True)"
                                                       "\ntime.sleep(20)"), route="d3")
            # (Whether it has started or not when d3 dies, the proxy
            # cannot know: its answer is the same.)
            time.sleep(1)
            d3.proc.kill()
            d3.proc.wait()
            status, body, _ = doomed.result()
        self.assertEqual(status, 502, body)
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]), ("INTERNAL", "true"))
        for _ in range(2):
            status, body, answered = self.f.rpc(
                "RunCell", {"session_id": s3[0], "cell": cell("k")}, route="d3")
            self.assertIn(answered, ("d1", "d2"))
            self.assertRefused(status, body, "WRONG_ROUTE", 503)
            self.assertIn('"d3"', body["message"])
            self.f.wait_proxy("d3", False)
        status, body, answered = self.f.rpc(
            "RunCell", {"session_id": s1[0], "cell": cell("k += 1\nprint(k)")}, route="d1")
        self.assertEqual((status, answered, body.get("stdout")), (200, "d1", "8\n"), body)
        for _ in range(6):
            status, body, answered = self.f.rpc("Run", RUN)
            self.assertEqual(status, 200, body)
            self.assertNotEqual(answered, "d3")

        # d3 again, the same instance: it reaps its first life's session
        # container at start, and answers for the lost session's id as for
        # any id it does not hold.
        first_life = {c["Id"] for c in self.f.leftovers_of("d3")}
        self.assertTrue(first_life, "the killed daemon left nothing to reap?")
        d3.stop()
        self.f.start_daemon("d3", self.f.ports["d3"])
        self.f.wait_proxy("d3", True)
        deadline = time.monotonic() + 30
        left = first_life
        while left and time.monotonic() < deadline:
            left = first_life & {c["Id"] for c in self.f.leftovers_of("d3")}
            time.sleep(0.2)
        self.assertEqual(left, set(), "the first life's containers are still there")
        status, body, answered = self.f.rpc(
            "RunCell", {"session_id": s3[0], "cell": cell("k")}, route="d3")
        self.assertEqual(answered, "d3")
        self.assertRefused(status, body, "NOT_FOUND", 404)

    def test_3_nothing_is_left_behind(self):
        for d in self.f.daemons.values():
            d.stop()
        self.assertEqual(self.f.leftovers(), [])
        # No daemon left: the proxy's own NOT_READY, nothing ran.
        for name in self.f.daemons:
            self.f.wait_proxy(name, False)
        status, body, answered = self.f.rpc("Run", RUN)
        self.assertIsNone(answered)
        self.assertRefused(status, body, "NOT_READY", 503)


if __name__ == "__main__":
    unittest.main()
