# SPDX-License-Identifier: Apache-2.0
"""The client against real daemons started by tests/clients/harness.py."""
from __future__ import annotations

import json
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError, check_record

from .support import env


class Wasm(unittest.TestCase):
    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY"))

    def test_describe(self) -> None:
        d = self.client.describe()
        self.assertEqual(d.provider, "wasm")
        self.assertEqual(d.isolation, "process")
        self.assertTrue(d.ready)
        self.assertTrue(d.operations.snippet.supported)
        self.assertIn("javascript", d.operations.snippet.languages)
        self.assertTrue(d.operations.module.supported)
        self.assertEqual(d.limits.max_snippet_bytes, 262144)
        self.assertFalse(d.supports_sessions)
        self.assertEqual(d.raw["provider"], "wasm")

    def test_snippet_runs_and_its_record_checks_out(self) -> None:
        r = self.client.run_snippet("console.log(6 * 7)", minimum_isolation="process",
                                    timeout_ms=5000)
        self.assertEqual((r.exit_code, r.stdout, r.outcome), (0, "42\n", "completed"))
        self.assertEqual(r.isolation, "process")
        self.assertIsNotNone(r.record)
        assert r.record is not None
        self.assertEqual((r.record.provider, r.record.previous_digest), ("wasm", ""))
        sent = {"minimum_isolation": "process", "timeout_ms": 5000,
                "snippet": {"language": "javascript", "code": "console.log(6 * 7)"}}
        check_record(sent, r.raw, r.raw["record"], previous="")
        self.assertEqual(r.stdout_bytes(), b"42\n")
        with self.assertRaises(ChainError):
            check_record(dict(sent, timeout_ms=5001), r.raw, r.raw["record"])

    def test_throwing_snippet_is_a_result(self) -> None:
        r = self.client.run_snippet("throw new Error('no')")
        self.assertNotEqual(r.exit_code, 0)
        self.assertIn("no", r.stderr)
        self.assertIsNotNone(r.record)

    def test_module_prints_hello(self) -> None:
        with open(env("PLIMSOLL_TEST_WASM_MODULE"), "rb") as f:
            wasm = f.read()
        r = self.client.run_module(wasm)
        self.assertEqual(r.exit_code, 0)
        self.assertIn("hello, world", r.stdout)

    def test_floor_above_the_tier_is_refused(self) -> None:
        with self.assertRaises(errors.InsufficientIsolationError) as cm:
            self.client.run_snippet("console.log(1)", minimum_isolation="vm")
        e = cm.exception
        self.assertFalse(e.dispatched)
        self.assertEqual(e.reason, "INSUFFICIENT_ISOLATION")
        self.assertEqual(e.code, "failed_precondition")
        self.assertEqual(e.metadata["isolation"], "process")
        self.assertEqual(e.http_status, 400)

    def test_oversized_snippet_is_invalid(self) -> None:
        with self.assertRaises(errors.InvalidRequestError) as cm:
            self.client.run_snippet("//" + "x" * 262144)
        self.assertFalse(cm.exception.dispatched)

    def test_bad_key(self) -> None:
        c = plimsoll.Client(env("PLIMSOLL_TEST_URL"), "plk_not_a_key")
        with self.assertRaises(errors.UnauthenticatedError):
            c.run_snippet("console.log(1)")

    def test_sessions_unsupported_on_wasm(self) -> None:
        with self.assertRaises(errors.UnsupportedError) as cm:
            self.client.open_session()
        self.assertFalse(cm.exception.dispatched)

    def test_disabled(self) -> None:
        c = plimsoll.Client(env("PLIMSOLL_TEST_DISABLED_URL"), env("PLIMSOLL_TEST_KEY"))
        with self.assertRaises(errors.DisabledError):
            c.run_snippet("console.log(1)")

    def test_dead_address(self) -> None:
        c = plimsoll.Client(env("PLIMSOLL_TEST_DEAD_URL"), env("PLIMSOLL_TEST_KEY"),
                            retry=plimsoll.RetryPolicy())
        with self.assertRaises(errors.InfrastructureError) as cm:
            c.run_snippet("console.log(1)")
        self.assertTrue(cm.exception.dispatched)
        self.assertIsNone(cm.exception.http_status)


class Lowering(unittest.TestCase):
    def count(self) -> int:
        with urllib.request.urlopen(env("PLIMSOLL_TEST_LOWERING_URL") + "/__proxy/count",
                                    timeout=10) as r:
            return int(json.load(r)["count"])

    def client(self, **kw: Any) -> plimsoll.Client:
        return plimsoll.Client(env("PLIMSOLL_TEST_LOWERING_URL"), env("PLIMSOLL_TEST_KEY"), **kw)

    def test_lowered_tier_is_a_mismatch(self) -> None:
        with self.assertRaises(errors.IsolationEvidenceMismatchError) as cm:
            self.client().run_snippet("console.log(1)", minimum_isolation="process")
        e = cm.exception
        self.assertEqual((e.code, e.dispatched), ("data_loss", True))
        self.assertEqual((e.isolation, e.record_isolation), ("none", "process"))

    def test_mismatch_is_not_retried(self) -> None:
        c = self.client(retry=plimsoll.RetryPolicy(max_attempts=4, base_ms=10, cap_ms=50))
        before = self.count()
        with self.assertRaises(errors.IsolationEvidenceMismatchError):
            c.run_snippet("console.log(1)", minimum_isolation="process")
        self.assertEqual(self.count() - before, 1)

    def test_without_a_floor_the_record_catches_it(self) -> None:
        with self.assertRaises(ChainError) as cm:
            self.client().run_snippet("console.log(1)")
        self.assertEqual(cm.exception.broken, "response_sha256")


class Rate(unittest.TestCase):
    """One run per second per principal (burst 1)."""

    def clients(self, retry: Any) -> List[plimsoll.Client]:
        url, key = env("PLIMSOLL_TEST_RATE_URL"), env("PLIMSOLL_TEST_KEY")
        patient = plimsoll.Client(url, key, retry=plimsoll.RetryPolicy(8, 250, 2000))
        return [patient, plimsoll.Client(url, key, retry=retry)]

    def test_second_quick_run_is_rate_limited(self) -> None:
        first, second = self.clients(None)
        first.run_snippet("console.log(1)")  # waits for a token if an earlier test took it
        with self.assertRaises(errors.RateLimitedError) as cm:
            second.run_snippet("console.log(2)")
        self.assertFalse(cm.exception.dispatched)
        self.assertEqual(cm.exception.http_status, 429)

    def test_retry_policy_gets_through(self) -> None:
        first, second = self.clients(plimsoll.RetryPolicy(max_attempts=6, base_ms=250,
                                                          cap_ms=2000))
        slept: List[float] = []
        second._sleep = lambda s: (slept.append(s), time.sleep(s))  # type: ignore
        first.run_snippet("console.log(1)")
        r = second.run_snippet("console.log(2)")
        self.assertEqual(r.stdout, "2\n")
        self.assertGreaterEqual(len(slept), 1)


class Capacity(unittest.TestCase):
    """One run at a time."""

    def busy(self) -> Dict[str, Any]:
        """Start a 1.5 s busy loop in a thread; returns once it is running."""
        url, key = env("PLIMSOLL_TEST_CAPACITY_URL"), env("PLIMSOLL_TEST_KEY")
        patient = plimsoll.Client(url, key, retry=plimsoll.RetryPolicy(10, 100, 1000))
        out: Dict[str, Any] = {}

        def loop() -> None:
            try:
                out["result"] = patient.run_snippet("for(;;){}", timeout_ms=1500)
            except BaseException as e:  # reported by the test
                out["error"] = e
        t = threading.Thread(target=loop)
        out["thread"] = t
        t.start()
        self.addCleanup(t.join)
        time.sleep(0.5)
        return out

    def test_at_capacity(self) -> None:
        busy = self.busy()
        c = plimsoll.Client(env("PLIMSOLL_TEST_CAPACITY_URL"), env("PLIMSOLL_TEST_KEY"))
        with self.assertRaises(errors.AtCapacityError) as cm:
            c.run_snippet("console.log(1)")
        self.assertFalse(cm.exception.dispatched)
        busy["thread"].join()
        self.assertNotIn("error", busy)
        self.assertTrue(busy["result"].timed_out)

    def test_retry_waits_for_the_slot(self) -> None:
        busy = self.busy()
        c = plimsoll.Client(env("PLIMSOLL_TEST_CAPACITY_URL"), env("PLIMSOLL_TEST_KEY"),
                            retry=plimsoll.RetryPolicy(max_attempts=8, base_ms=200, cap_ms=1000))
        slept: List[float] = []
        c._sleep = lambda s: (slept.append(s), time.sleep(s))  # type: ignore
        r = c.run_snippet("console.log(1)")
        self.assertEqual(r.stdout, "1\n")
        self.assertGreaterEqual(len(slept), 1)
        busy["thread"].join()
        self.assertTrue(busy["result"].timed_out)


if __name__ == "__main__":
    unittest.main()
