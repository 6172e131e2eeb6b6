# SPDX-License-Identifier: Apache-2.0
"""The asyncio client against real daemons started by
tests/clients/harness.py: the synchronous client's cases, and runs at once."""
from __future__ import annotations

import asyncio
import json
import unittest
import urllib.request
from typing import List

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError, check_record

from .support import env

BUSY_MS = 1500  # a run that keeps its slot this long


def busy(ms: int, out: str) -> str:
    return "const t = Date.now(); while (Date.now() - t < %d) {} console.log(%s)" % (
        ms, json.dumps(out))


class AsyncWasm(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.client = plimsoll.AsyncClient(env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY"))

    async def test_describe(self) -> None:
        d = await self.client.describe()
        self.assertEqual((d.provider, d.isolation, d.ready), ("wasm", "process", True))
        self.assertTrue(d.operations.module.supported)
        self.assertEqual(d.limits.max_snippet_bytes, 262144)

    async def test_snippet_runs_and_its_record_checks_out(self) -> None:
        r = await self.client.run_snippet("console.log(6 * 7)", minimum_isolation="process",
                                          timeout_ms=5000)
        self.assertEqual((r.exit_code, r.stdout, r.outcome, r.isolation),
                         (0, "42\n", "completed", "process"))
        assert r.record is not None
        self.assertEqual((r.record.provider, r.record.previous_digest), ("wasm", ""))
        sent = {"minimum_isolation": "process", "timeout_ms": 5000,
                "snippet": {"language": "javascript", "code": "console.log(6 * 7)"}}
        check_record(sent, r.raw, r.raw["record"], previous="")

    async def test_throwing_snippet_and_module(self) -> None:
        r = await self.client.run_snippet("throw new Error('no')")
        self.assertNotEqual(r.exit_code, 0)
        self.assertIn("no", r.stderr)
        with open(env("PLIMSOLL_TEST_WASM_MODULE"), "rb") as f:
            m = await self.client.run_module(f.read())
        self.assertIn("hello, world", m.stdout)

    async def test_refusals(self) -> None:
        with self.assertRaises(errors.InsufficientIsolationError) as cm:
            await self.client.run_snippet("console.log(1)", minimum_isolation="vm")
        e = cm.exception
        self.assertEqual((e.reason, e.code, e.dispatched, e.http_status),
                         ("INSUFFICIENT_ISOLATION", "failed_precondition", False, 400))
        self.assertEqual(e.metadata["isolation"], "process")
        with self.assertRaises(errors.InvalidRequestError):
            await self.client.run_snippet("//" + "x" * 262144)
        with self.assertRaises(errors.UnauthenticatedError):
            await plimsoll.AsyncClient(env("PLIMSOLL_TEST_URL"),
                                       "plk_not_a_key").run_snippet("console.log(1)")
        with self.assertRaises(errors.UnsupportedError):
            await self.client.open_session()
        with self.assertRaises(errors.DisabledError):
            await plimsoll.AsyncClient(env("PLIMSOLL_TEST_DISABLED_URL"),
                                       env("PLIMSOLL_TEST_KEY")).run_snippet("console.log(1)")

    async def test_dead_address(self) -> None:
        c = plimsoll.AsyncClient(env("PLIMSOLL_TEST_DEAD_URL"), env("PLIMSOLL_TEST_KEY"),
                                 retry=plimsoll.RetryPolicy())
        with self.assertRaises(errors.InfrastructureError) as cm:
            await c.run_snippet("console.log(1)")
        self.assertTrue(cm.exception.dispatched)
        self.assertIsNone(cm.exception.http_status)

    async def test_runs_at_once(self) -> None:
        """Eight runs through asyncio.gather, four per caller (each caller's
        share of the daemon's slots): every one answers with its own output
        and a record that checks, and their records show them running at the
        same time."""
        other = plimsoll.AsyncClient(env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY_B"))
        d = await self.client.describe()
        per_key = d.limits.per_key_concurrent
        self.assertGreaterEqual(d.limits.max_concurrent, 2 * per_key)
        calls = [c.run_snippet(busy(BUSY_MS, "%s %d" % (name, i)), minimum_isolation="process")
                 for name, c in (("a", self.client), ("b", other)) for i in range(per_key)]
        results = await asyncio.gather(*calls)
        want = ["%s %d\n" % (name, i) for name in "ab" for i in range(per_key)]
        self.assertEqual([r.stdout for r in results], want)
        records = [r.record for r in results]
        self.assertEqual(len({r.digest for r in records if r}), len(want))
        starts = [r.started_at for r in records if r]
        ends = [r.ended_at for r in records if r]
        # RFC 3339 with fixed nanoseconds, in UTC: text order is time order.
        self.assertLess(max(starts), min(ends), "the runs did not overlap")


class AsyncLowering(unittest.IsolatedAsyncioTestCase):
    def count(self) -> int:
        with urllib.request.urlopen(env("PLIMSOLL_TEST_LOWERING_URL") + "/__proxy/count",
                                    timeout=10) as r:
            return int(json.load(r)["count"])

    def client(self, **kw: object) -> plimsoll.AsyncClient:
        return plimsoll.AsyncClient(env("PLIMSOLL_TEST_LOWERING_URL"), env("PLIMSOLL_TEST_KEY"),
                                    **kw)  # type: ignore[arg-type]

    async def test_lowered_tier_is_a_mismatch_never_retried(self) -> None:
        c = self.client(retry=plimsoll.RetryPolicy(max_attempts=4, base_ms=10, cap_ms=50))
        before = self.count()
        with self.assertRaises(errors.IsolationEvidenceMismatchError) as cm:
            await c.run_snippet("console.log(1)", minimum_isolation="process")
        e = cm.exception
        self.assertEqual((e.code, e.dispatched, e.isolation, e.record_isolation),
                         ("data_loss", True, "none", "process"))
        self.assertEqual(self.count() - before, 1)

    async def test_without_a_floor_the_record_catches_it(self) -> None:
        with self.assertRaises(ChainError) as cm:
            await self.client().run_snippet("console.log(1)")
        self.assertEqual(cm.exception.broken, "response_sha256")


class AsyncRate(unittest.IsolatedAsyncioTestCase):
    """One run per second per principal (burst 1)."""

    async def test_rate_limited_then_the_policy_gets_through(self) -> None:
        url, key = env("PLIMSOLL_TEST_RATE_URL"), env("PLIMSOLL_TEST_KEY")
        patient = plimsoll.AsyncClient(url, key, retry=plimsoll.RetryPolicy(8, 250, 2000))
        await patient.run_snippet("console.log(1)")  # waits for a token if needed
        with self.assertRaises(errors.RateLimitedError) as cm:
            await plimsoll.AsyncClient(url, key).run_snippet("console.log(2)")
        self.assertEqual((cm.exception.dispatched, cm.exception.http_status), (False, 429))
        second = plimsoll.AsyncClient(url, key, retry=plimsoll.RetryPolicy(6, 250, 2000))
        slept: List[float] = []

        async def sleep(s: float) -> None:
            slept.append(s)
            await asyncio.sleep(s)
        second._sleep = sleep
        self.assertEqual((await second.run_snippet("console.log(3)")).stdout, "3\n")
        self.assertGreaterEqual(len(slept), 1)


class AsyncCapacity(unittest.IsolatedAsyncioTestCase):
    """One run at a time on the capacity daemon: of two runs at once, one is
    refused AT_CAPACITY, nothing having run; with a retry policy both run,
    one after the other."""

    async def test_two_at_once(self) -> None:
        url, key = env("PLIMSOLL_TEST_CAPACITY_URL"), env("PLIMSOLL_TEST_KEY")
        c = plimsoll.AsyncClient(url, key)
        # The busy run takes the slot (retrying, should an earlier run
        # still hold it); the second is sent while it runs.
        patient = plimsoll.AsyncClient(url, key, retry=plimsoll.RetryPolicy(10, 100, 1000))
        first = asyncio.ensure_future(patient.run_snippet(busy(BUSY_MS, "first")))
        await asyncio.sleep(0.5)
        with self.assertRaises(errors.AtCapacityError) as cm:
            await c.run_snippet("console.log(2)")
        self.assertFalse(cm.exception.dispatched)
        self.assertEqual((await first).stdout, "first\n")

    async def test_the_retry_policy_waits_for_the_slot(self) -> None:
        url, key = env("PLIMSOLL_TEST_CAPACITY_URL"), env("PLIMSOLL_TEST_KEY")
        retrying = plimsoll.AsyncClient(url, key, retry=plimsoll.RetryPolicy(10, 200, 1000))
        results = await asyncio.gather(retrying.run_snippet(busy(BUSY_MS // 2, "one")),
                                       retrying.run_snippet(busy(BUSY_MS // 2, "two")))
        self.assertEqual([r.stdout for r in results], ["one\n", "two\n"])
        a, b = (r.record for r in results)
        assert a is not None and b is not None
        # one slot: the two ran one after the other
        self.assertTrue(a.ended_at <= b.started_at or b.ended_at <= a.started_at,
                        (a.started_at, a.ended_at, b.started_at, b.ended_at))


if __name__ == "__main__":
    unittest.main()
