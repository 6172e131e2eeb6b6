# SPDX-License-Identifier: Apache-2.0
"""The client against the hostile daemon of tests/clients/harness.py, which
serves tests/vectors/hostile_answers.json: huge, nested, wrong-typed,
NUL-holding and slow answers (docs/clients.md, "What a client reads")."""
from __future__ import annotations

import time
import unittest
from typing import Any, Dict, Tuple

import plimsoll
from plimsoll import errors

from .support import env, vectors

HOSTILE = vectors("hostile_answers.json")


def client_settings(case: Dict[str, Any]) -> Dict[str, Any]:
    settings = case.get("client", {})
    kw: Dict[str, Any] = {}
    if "timeout_ms" in settings:
        kw["timeout"] = settings["timeout_ms"] / 1000.0
    if "max_answer_bytes" in settings:
        kw["max_answer_bytes"] = settings["max_answer_bytes"]
    return kw


def kind_of(e: BaseException) -> str:
    """The kind of error the vectors name."""
    if isinstance(e, errors.ProtocolError):
        return "protocol"
    if isinstance(e, errors.IsolationEvidenceMismatchError):
        return "mismatch"
    if isinstance(e, errors.RefusalError):
        return "refusal"
    if isinstance(e, errors.InfrastructureError):
        return "timeout" if e.code == "deadline_exceeded" else "transport"
    return "untyped %s" % type(e).__name__


def outcome_of(case: Dict[str, Any], url: str) -> Tuple[str, Any]:
    """Make the case's call; ("result", answer) or (the kind of error, it)."""
    client = plimsoll.Client(url + "/" + case["name"], "plk_hostile", **client_settings(case))
    try:
        if case["call"] == "Run":
            return "result", client.run(case["request"])
        if case["call"] == "Describe":
            return "result", client.describe()
        if case["call"] == "OpenSession":
            return "result", client.open_session()
        raise AssertionError("no such call in the vectors: %s" % case["call"])
    except Exception as e:  # noqa: BLE001 - anything else is what the vectors catch
        return kind_of(e), e


async def aio_outcome_of(case: Dict[str, Any], url: str) -> Tuple[str, Any]:
    """outcome_of through the asyncio client."""
    client = plimsoll.AsyncClient(url + "/" + case["name"], "plk_hostile",
                                  **client_settings(case))
    try:
        if case["call"] == "Run":
            return "result", await client.run(case["request"])
        if case["call"] == "Describe":
            return "result", await client.describe()
        if case["call"] == "OpenSession":
            return "result", await client.open_session()
        raise AssertionError("no such call in the vectors: %s" % case["call"])
    except Exception as e:  # noqa: BLE001 - anything else is what the vectors catch
        return kind_of(e), e


def check_case(t: unittest.TestCase, case: Dict[str, Any], got: str, value: Any,
               took_ms: float) -> None:
    want = case["expect"]
    t.assertIn(got, want["outcomes"], "%s: %s" % (case["what"], value))
    if "within_ms" in want:
        t.assertLessEqual(took_ms, want["within_ms"], case["what"])
    if got == "result" and "result" in want:
        r = value
        t.assertEqual((r.exit_code, r.stdout, r.stderr),
                      (want["result"]["exit_code"], want["result"]["stdout"],
                       want["result"]["stderr"]))
        t.assertEqual(r.record.digest, r.raw["record"]["digest"])
    if got == "refusal":
        t.assertEqual(value.reason, want["reason"])
        t.assertFalse(value.dispatched)
    if got in ("protocol", "mismatch", "timeout", "transport"):
        t.assertTrue(value.dispatched)


class Hostile(unittest.TestCase):
    def test_the_limits_are_the_shared_ones(self) -> None:
        limits = HOSTILE["limits"]
        self.assertEqual(plimsoll.DEFAULT_MAX_ANSWER_BYTES, limits["max_answer_bytes"])
        self.assertEqual(plimsoll.Client("http://x", "k").max_answer_bytes,
                         limits["max_answer_bytes"])
        self.assertEqual(plimsoll.MAX_ANSWER_DEPTH, limits["max_depth"])
        self.assertEqual(plimsoll.MAX_ANSWER_INTEGER, limits["max_integer"])

    def test_every_hostile_answer(self) -> None:
        url = env("PLIMSOLL_TEST_HOSTILE_URL")
        self.assertGreater(len(HOSTILE["cases"]), 40)
        for case in HOSTILE["cases"]:
            with self.subTest(case["name"]):
                t0 = time.monotonic()
                got, value = outcome_of(case, url)
                check_case(self, case, got, value, (time.monotonic() - t0) * 1000)


class AsyncHostile(unittest.IsolatedAsyncioTestCase):
    async def test_every_hostile_answer(self) -> None:
        url = env("PLIMSOLL_TEST_HOSTILE_URL")
        self.assertGreater(len(HOSTILE["cases"]), 40)
        for case in HOSTILE["cases"]:
            with self.subTest(case["name"]):
                t0 = time.monotonic()
                got, value = await aio_outcome_of(case, url)
                check_case(self, case, got, value, (time.monotonic() - t0) * 1000)

if __name__ == "__main__":
    unittest.main()
