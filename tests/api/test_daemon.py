# SPDX-License-Identifier: Apache-2.0
"""The real daemon, Disabled provider, over HTTP: routes, authentication,
every refusal it can reach, metrics, logs and shutdown."""
import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import SERVICE, ClassDaemon, Daemon, error_info  # noqa: E402

SNIPPET = {"snippet": {"language": "javascript", "code": "console.log(1)"}}


class DisabledDaemon(ClassDaemon, unittest.TestCase):
    def assertRefusal(self, status, body, http, code, reason):
        self.assertEqual(status, http, body)
        self.assertEqual(body["code"], code)
        info, debug = error_info(body)
        self.assertEqual(info["reason"], reason)
        self.assertEqual(info["domain"], "plimsoll")
        self.assertEqual(info["metadata"]["dispatched"], "false")
        self.assertEqual(info["metadata"]["isolation"], "none")
        self.assertEqual(debug["reason"], reason)
        self.assertTrue(body["message"])

    # ---- operations endpoints -------------------------------------------
    def test_healthz_without_key(self):
        status, _, data = self.d.request("GET", "/healthz")
        self.assertEqual((status, data), (200, b"ok\n"))

    def test_readyz_without_key(self):
        status, _, data = self.d.request("GET", "/readyz")
        self.assertEqual((status, data), (200, b"ready\n"))

    def test_metrics_needs_key(self):
        status, _, _ = self.d.request("GET", "/metrics")
        self.assertEqual(status, 401)
        status, headers, data = self.d.request(
            "GET", "/metrics", headers={"Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain; version=0.0.4"))
        text = data.decode()
        for name in ("plimsoll_runs_total", "plimsoll_refusals_total", "plimsoll_in_flight",
                     "plimsoll_run_duration_seconds_bucket", "plimsoll_ready 1"):
            self.assertIn(name, text)
        # What runs cost, by the daemon's provider and a fixed list of
        # kinds, there before any run (api/test_usage counts them up).
        for kind in ("snippet", "module", "project", "cell"):
            for name in ("plimsoll_run_cpu_seconds", "plimsoll_run_memory_peak_bytes"):
                self.assertIn('%s_count{provider="disabled",kind="%s"} 0' % (name, kind), text)
        self.assertIn("# TYPE plimsoll_run_cpu_seconds histogram", text)

    def test_metrics_count_refusals(self):
        def disabled_count():
            _, _, data = self.d.request(
                "GET", "/metrics", headers={"Authorization": "Bearer " + self.d.keys["alice"]})
            for line in data.decode().splitlines():
                if line.startswith('plimsoll_refusals_total{reason="DISABLED"}'):
                    return int(line.split()[-1])
            self.fail("no DISABLED counter")
        before = disabled_count()
        self.d.rpc("Run", SNIPPET)
        self.d.rpc("Run", SNIPPET)
        self.assertEqual(disabled_count(), before + 2)

    # ---- Describe -------------------------------------------------------
    def test_describe(self):
        status, body = self.d.rpc("Describe", {})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["provider"], "disabled")
        self.assertEqual(body["isolation"], "none")
        self.assertTrue(body["ready"])
        self.assertFalse(body["supports_sessions"])
        for op in ("snippet", "project", "module", "session"):
            self.assertFalse(body["operations"][op]["supported"], op)
        lim = body["limits"]
        self.assertEqual(lim["max_concurrent"], 8)
        self.assertEqual(lim["per_key_concurrent"], 4)
        self.assertEqual(lim["max_snippet_bytes"], 262144)

    def test_describe_empty_body_is_empty_message(self):
        status, body = self.d.rpc("Describe", None, raw=b"")
        self.assertEqual(status, 200, body)

    # ---- refusals ---------------------------------------------------------
    def test_disabled_refuses_every_payload(self):
        payloads = [
            SNIPPET,
            {"snippet": {"language": "python", "code": "print(1)"}},
            {"project": {"files": [{"path": "a.py", "content": "print(1)"}],
                         "steps": [{"name": "run", "argv": ["python3", "a.py"]}]}},
            {"module": {"wasm_base64": "AGFzbQEAAAA=", "args": ["x"]}},
        ]
        for p in payloads:
            status, body = self.d.rpc("Run", p)
            self.assertRefusal(status, body, 400, "failed_precondition", "DISABLED")

    def test_disabled_before_floor(self):
        # Every payload gets DISABLED, whatever floor it states.
        status, body = self.d.rpc("Run", dict(SNIPPET, minimum_isolation="vm"))
        self.assertRefusal(status, body, 400, "failed_precondition", "DISABLED")

    def test_invalid_requests(self):
        big = "x" * (256 * 1024 + 1)
        cases = [
            ("snippet over 256 KiB", {"snippet": {"language": "javascript", "code": big}}),
            ("no payload", {}),
            ("two payloads", {"snippet": SNIPPET["snippet"],
                              "module": {"wasm_base64": "AGFzbQEAAAA="}}),
            ("malformed floor", dict(SNIPPET, minimum_isolation="fortress")),
            ("unknown grant profile", dict(SNIPPET, grant_profile="github")),
            ("grant sent in full", dict(SNIPPET, grant={"base_url": "https://api",
                                                        "routes": ["GET /x"]})),
            ("unknown field", dict(SNIPPET, shell=True)),
            ("cell outside a session", {"cell": {"language": "python", "code": "1"}}),
            ("timeout above the maximum", dict(SNIPPET, timeout_ms=60001)),
        ]
        for name, msg in cases:
            with self.subTest(name):
                status, body = self.d.rpc("Run", msg)
                self.assertRefusal(status, body, 400, "invalid_argument", "INVALID_REQUEST")

    def test_snippet_at_the_limit_passes_validation(self):
        exact = "x" * (256 * 1024)
        status, body = self.d.rpc("Run", {"snippet": {"language": "javascript", "code": exact}})
        # Valid, so it reaches the provider check: DISABLED, not INVALID_REQUEST.
        self.assertRefusal(status, body, 400, "failed_precondition", "DISABLED")

    def test_not_json(self):
        status, body = self.d.rpc("Run", None, raw=b"{not json")
        self.assertRefusal(status, body, 400, "invalid_argument", "INVALID_REQUEST")

    def test_unauthenticated(self):
        for key in ("", "wrong", self.d.keys["alice"] + "x"):
            status, body = self.d.rpc("Run", SNIPPET, key=key)
            self.assertRefusal(status, body, 401, "unauthenticated", "UNAUTHENTICATED")
        status, body = self.d.rpc("Describe", {}, key="",
                                  headers={"Authorization": "Basic " + self.d.keys["alice"]})
        self.assertRefusal(status, body, 401, "unauthenticated", "UNAUTHENTICATED")

    def test_second_principal(self):
        status, _ = self.d.rpc("Describe", {}, principal="bob")
        self.assertEqual(status, 200)

    def test_unknown_method_and_path(self):
        status, body = self.d.rpc("Explode", {})
        self.assertEqual(status, 404)
        self.assertEqual(body["code"], "not_found")
        status, _, _ = self.d.request("GET", "/nope")
        self.assertEqual(status, 404)

    def test_session_methods_disabled(self):
        sid = "0" * 64
        for m, msg in (("OpenSession", {}), ("CloseSession", {"session_id": sid}),
                       ("RunInSession", {"session_id": sid, "run": {
                           "snippet": {"language": "python", "code": "1"}}}),
                       ("RunCell", {"session_id": sid, "cell": {"language": "python",
                                                                "code": "1"}})):
            status, body = self.d.rpc(m, msg)
            self.assertRefusal(status, body, 400, "failed_precondition", "DISABLED")
        status, body = self.d.rpc("RunInSession", {"bogus": 1})
        self.assertRefusal(status, body, 400, "invalid_argument", "INVALID_REQUEST")

    def test_get_and_wrong_content_type(self):
        status, headers, _ = self.d.request("GET", SERVICE + "Run")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("allow"), "POST")
        status, _, _ = self.d.request(
            "POST", SERVICE + "Run", b"{}",
            {"Content-Type": "text/plain", "Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 415)

    def test_body_over_request_limit(self):
        d = Daemon(env={"PLIMSOLL_MAX_REQUEST_BYTES": "65536"}).start()
        try:
            body = json.dumps({"snippet": {"language": "javascript",
                                           "code": "x" * 70000}}).encode()
            status, resp = d.rpc("Run", None, raw=body)
            self.assertRefusal(status, resp, 400, "invalid_argument", "INVALID_REQUEST")
            self.assertIn("PLIMSOLL_MAX_REQUEST_BYTES", resp["message"])
            # The daemon still answers afterwards.
            self.assertEqual(d.rpc("Describe", {})[0], 200)
        finally:
            d.stop()

    def test_keep_alive_connection_serves_many_calls(self):
        c = self.d.connection()
        try:
            for _ in range(20):
                status, body = self.d.rpc("Describe", {}, conn=c)
                self.assertEqual(status, 200)
        finally:
            c.close()

    def test_concurrent_callers(self):
        results = []

        def worker():
            for _ in range(10):
                results.append(self.d.rpc("Run", SNIPPET)[0])

        ts = [threading.Thread(target=worker) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, [400] * 80)


class Logs(unittest.TestCase):
    def test_request_lines_and_no_secrets(self):
        d = Daemon().start()
        try:
            d.rpc("Run", SNIPPET)
            d.rpc("Describe", {}, principal="bob")
            d.rpc("Run", SNIPPET, key="not-a-key")
        finally:
            d.stop()
        text = d.log_text()
        for k in d.keys.values():
            self.assertNotIn(k, text)
        self.assertNotIn("not-a-key", text)
        lines = d.log_lines()
        describe = [l for l in lines if l.get("msg") == "describe"]
        self.assertEqual(len(describe), 1)
        self.assertEqual(describe[0]["describe"]["provider"], "disabled")
        reqs = [l for l in lines if l.get("msg") == "request"]
        self.assertEqual(len(reqs), 3)
        self.assertEqual((reqs[0]["principal"], reqs[0]["method"], reqs[0]["outcome"],
                          reqs[0]["reason"]), ("alice", "Run", "refused", "DISABLED"))
        self.assertEqual((reqs[1]["principal"], reqs[1]["method"], reqs[1]["outcome"]),
                         ("bob", "Describe", "ok"))
        self.assertIsNone(reqs[2].get("principal"))
        self.assertEqual(reqs[2]["reason"], "UNAUTHENTICATED")
        for r in reqs:
            self.assertIn("duration_ms", r)
            self.assertIn("ts", r)
        # Every line is one JSON object, and libmicrohttpd has nothing to
        # say to a start and three plain requests (a warning about the
        # order of its options would be one).
        for raw in text.splitlines():
            self.assertTrue(raw.startswith("{") and raw.endswith("}"), raw)
        self.assertEqual([l for l in lines if l.get("msg") == "http"], [])


class Lifecycle(unittest.TestCase):
    def test_sigterm_exits_cleanly(self):
        d = Daemon().start()
        t0 = time.monotonic()
        code = d.stop(signal.SIGTERM)
        self.assertEqual(code, 0)
        self.assertLess(time.monotonic() - t0, 10)
        msgs = [l.get("msg") for l in d.log_lines()]
        self.assertIn("draining", msgs)
        self.assertIn("stopped", msgs)

    def test_unix_socket_listener(self):
        import tempfile
        path = os.path.join(tempfile.mkdtemp(prefix="plimsoll-sock-"), "api.sock")
        d = Daemon(listen="unix:" + path).start()
        try:
            status, body = d.rpc("Describe", {})
            self.assertEqual(status, 200)
            status, _, data = d.request("GET", "/healthz")
            self.assertEqual(status, 200)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o660)
        finally:
            d.stop()
        self.assertFalse(os.path.exists(path))


if __name__ == "__main__":
    unittest.main()
