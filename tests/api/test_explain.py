# SPDX-License-Identifier: Apache-2.0
"""Explain against Run itself, through the real daemon over HTTP: for a
table of requests, the refusal Explain predicts is exactly the one Run (or
RunInSession, RunCell) gives (reason, code, message, metadata, HTTP
status), and a request it passes is one Run dispatches.  Explain runs
nothing, makes no broker (the test API sees no call), takes no slot, and
spends a rate token.  The CLI's `plimsoll explain`.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_explain
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.grants import TOKEN, grant_env, profile, token_cred  # noqa: E402
from plimsoll_test.harness import CLI, Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

ID = "0" * 64  # a session id of the right length that is nobody's


def refusal_of(status, body):
    """Run's error answer as Explain states it."""
    info = error_info(body)[0]
    return {"code": body["code"], "message": body["message"], "reason": info["reason"],
            "domain": info["domain"], "metadata": info["metadata"], "http_status": status}


class Agreement(unittest.TestCase):
    """A wasm daemon with grants: Explain's prediction, then the call."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="plimsoll-explain-")
        cls.up = Upstream(Check(token=TOKEN))
        path = os.path.join(cls.dir, "grants.json")
        with open(path, "w") as f:
            json.dump({"profiles": {
                "items": profile(cls.up.url, token_cred()),
                "others": profile(cls.up.url, token_cred(), callers=("someone-else",))}}, f)
        cls.d = Daemon(env=dict(grant_env(path), SANDBOX_PROVIDER="wasm",
                                SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="1000")).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.up.close()

    def explain(self, message, **kw):
        status, body = self.d.rpc("Explain", message, **kw)
        self.assertEqual(status, 200, body)
        checks = body["checks"]
        self.assertEqual(checks[0]["check"], "request", body)
        # passed, passed, ..., then at most one refusal, which ends it
        refused = [c for c in checks if not c["passed"]]
        self.assertLessEqual(len(refused), 1, body)
        if refused:
            self.assertIs(checks[-1], refused[0])
            self.assertFalse(body["dispatch"], body)
        else:
            self.assertEqual(checks[-1]["check"], "admission", body)
            self.assertTrue(body["dispatch"], body)
        self.assertEqual(body["isolation"], "process")
        return body

    def agree(self, method, call, explained, principal="alice"):
        """Explain's verdict equals the call's answer."""
        e = self.explain(explained, principal=principal)
        status, body = self.d.rpc(method, call, principal=principal)
        if e["dispatch"]:
            self.assertEqual(status, 200, (e, body))
        else:
            self.assertNotEqual(status, 200, body)
            self.assertEqual(e["checks"][-1]["refusal"], refusal_of(status, body), (e, body))
        return e

    def test_run_table(self):
        table = [
            ("runs", js("console.log(1)"), True),
            ("the floor above the tier", js("1", minimum_isolation="vm"), "isolation_floor"),
            ("the floor at the tier", js("1", minimum_isolation="process"), True),
            ("an unknown profile", js("1", grant_profile="nope"), "grant_profile"),
            ("a language the provider does not run",
             {"snippet": {"language": "python", "code": "1"}}, "payload"),
            ("a caller not allowed", js("1", grant_profile="others"), "grant_caller"),
            ("a grant on a module", {"module": {"wasm_base64": "AGFzbQEAAAA="},
                                     "grant_profile": "items"}, "grant_brokered"),
            ("a timeout past the longest", js("1", timeout_ms=10 ** 7), "request"),
            ("an unknown field", {"bogus": 1}, "request"),
            ("no payload", {}, "request"),
            ("a cell outside a session", {"cell": {"language": "python", "code": "1"}}, "request"),
        ]
        for name, run, want in table:
            with self.subTest(name):
                e = self.agree("Run", run, {"run": run})
                if want is True:
                    self.assertTrue(e["dispatch"], e)
                else:
                    self.assertEqual(e["checks"][-1]["check"], want, e)

    def test_a_grant_it_passes_is_one_run_dispatches_and_explain_makes_no_broker(self):
        code = "plimsoll.request({path: '/items/1'});"
        self.up.take()
        e = self.explain({"run": js(code, grant_profile="items")})
        self.assertTrue(e["dispatch"], e)
        self.assertEqual(self.up.take(), [])  # no credential used, no call made
        status, body = self.d.rpc("Run", js(code, grant_profile="items"))
        self.assertEqual((status, body["record"]["broker_calls"]), (200, 1), body)
        self.assertEqual(len(self.up.take()), 1)

    def test_session_variants(self):
        # wasm keeps no sessions: RunInSession and RunCell are refused
        # where Explain says.
        run = js("1")
        self.agree("RunInSession", {"session_id": ID, "run": run}, {"session_id": ID, "run": run})
        cell = {"language": "python", "code": "1"}
        self.agree("RunCell", {"session_id": ID, "cell": cell}, {"session_id": ID, "cell": cell})

    def test_malformed_explain_requests_are_refused(self):
        for bad in ({}, {"run": js("1"), "cell": {"language": "python", "code": "1"}},
                    {"cell": {"language": "python", "code": "1"}},
                    {"run": js("1"), "timeout_ms": 5}, {"run": js("1"), "extra": 1}):
            with self.subTest(bad=bad):
                status, body = self.d.rpc("Explain", bad)
                self.assertEqual(status, 400, body)
                self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST", body)

    def test_explain_takes_no_slot_and_runs_nothing(self):
        before = self.metrics()
        for _ in range(5):
            self.explain({"run": js("console.log(1)")})
        after = self.metrics()
        self.assertEqual(after.get("plimsoll_in_flight"), 0)
        self.assertEqual(after.get("plimsoll_runs_total"), before.get("plimsoll_runs_total"))

    def test_a_ticket_that_passes_says_nothing_of_other_callers(self):
        """While bob's runs hold two slots, alice's passing ticket reads as
        it does on a quiet daemon: the daemon-wide count is said only in
        an AT_CAPACITY refusal, as Run says it."""
        quiet = self.explain({"run": js("console.log(1)")})["checks"][-1]
        busy_code = "let t = Date.now(); while (Date.now() - t < 1500) {}"
        threads = [threading.Thread(target=self.d.rpc, args=("Run", js(busy_code)),
                                    kwargs={"principal": "bob"}) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            end = time.monotonic() + 5
            while self.metrics().get("plimsoll_in_flight") != 2 and time.monotonic() < end:
                time.sleep(0.02)
            self.assertEqual(self.metrics().get("plimsoll_in_flight"), 2)
            busy = self.explain({"run": js("console.log(1)")})["checks"][-1]
        finally:
            for t in threads:
                t.join()
        self.assertEqual(busy["check"], "admission")
        self.assertEqual(busy, quiet)
        self.assertNotIn("in progress", busy["value"])

    def metrics(self):
        status, _, text = self.d.request("GET", "/metrics",
                                         headers={"Authorization": "Bearer " + self.d.keys["alice"]})
        out = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                if "{" not in name:
                    out[name] = float(value)
        return out


class Rate(unittest.TestCase):
    def test_explain_spends_a_token(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "1",
                        "SANDBOX_RATE_BURST": "3"}).start()
        try:
            for _ in range(2):
                status, body = d.rpc("Explain", {"run": js("1")})
                self.assertTrue(body["dispatch"], body)
            # It spends the last token, and so foresees that the run would
            # find none: the run is refused as it said...
            status, e = d.rpc("Explain", {"run": js("1")})
            self.assertEqual(e["checks"][-1]["check"], "admission", e)
            status, body = d.rpc("Run", js("1"))
            self.assertEqual(e["checks"][-1]["refusal"], refusal_of(status, body))
            # ...and another Explain is itself refused: no probing for free.
            status, body = d.rpc("Explain", {"run": js("1")})
            self.assertEqual(status, 429, body)
            self.assertEqual(error_info(body)[0]["reason"], "RATE_LIMITED", body)
        finally:
            d.stop()


class Disabled(unittest.TestCase):
    def test_disabled_agrees(self):
        d = Daemon(env={}).start()
        try:
            status, e = d.rpc("Explain", {"run": js("1")})
            self.assertEqual(status, 200, e)
            self.assertEqual(e["checks"][-1]["check"], "provider", e)
            status, body = d.rpc("Run", js("1"))
            self.assertEqual(e["checks"][-1]["refusal"], refusal_of(status, body))
        finally:
            d.stop()


class Cli(unittest.TestCase):
    def test_plimsoll_explain(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        try:
            env = dict(os.environ, PLIMSOLL_URL="http://%s:%d" % (d.host, d.port),
                       PLIMSOLL_KEY=d.keys["alice"])
            ok = subprocess.run([CLI, "explain", "console.log(1)"], env=env, capture_output=True,
                                text=True, timeout=30)
            self.assertEqual(ok.returncode, 0, ok)
            self.assertIn("would be dispatched", ok.stdout)
            self.assertIn("admission", ok.stdout)
            no = subprocess.run([CLI, "explain", "--floor", "vm", "console.log(1)"], env=env,
                                capture_output=True, text=True, timeout=30)
            self.assertEqual(no.returncode, 3, no)
            self.assertIn("INSUFFICIENT_ISOLATION", no.stdout)
            self.assertNotIn("admission", no.stdout)  # it stops where Run stops
            j = subprocess.run([CLI, "explain", "--json", "-l", "python", "1"], env=env,
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(j.returncode, 3, j)
            self.assertEqual(json.loads(j.stdout)["checks"][-1]["refusal"]["reason"], "UNSUPPORTED")
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
