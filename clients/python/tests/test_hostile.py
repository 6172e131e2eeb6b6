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


def outcome_of(case: Dict[str, Any], url: str) -> Tuple[str, Any]:
    """Make the case's call; ("result", answer) or (the kind of error, it)."""
    settings = case.get("client", {})
    kw: Dict[str, Any] = {}
    if "timeout_ms" in settings:
        kw["timeout"] = settings["timeout_ms"] / 1000.0
    if "max_answer_bytes" in settings:
        kw["max_answer_bytes"] = settings["max_answer_bytes"]
    client = plimsoll.Client(url + "/" + case["name"], "plk_hostile", **kw)
    try:
        if case["call"] == "Run":
            return "result", client.run(case["request"])
        if case["call"] == "Describe":
            return "result", client.describe()
        if case["call"] == "OpenSession":
            return "result", client.open_session()
        raise AssertionError("no such call in the vectors: %s" % case["call"])
    except errors.ProtocolError as e:
        return "protocol", e
    except errors.IsolationEvidenceMismatchError as e:
        return "mismatch", e
    except errors.RefusalError as e:
        return "refusal", e
    except errors.InfrastructureError as e:
        return ("timeout" if e.code == "deadline_exceeded" else "transport"), e
    except Exception as e:  # noqa: BLE001 - anything else is what the vectors catch
        return "untyped %s" % type(e).__name__, e


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
                want = case["expect"]
                t0 = time.monotonic()
                got, value = outcome_of(case, url)
                took_ms = (time.monotonic() - t0) * 1000
                self.assertIn(got, want["outcomes"], "%s: %s" % (case["what"], value))
                if "within_ms" in want:
                    self.assertLessEqual(took_ms, want["within_ms"], case["what"])
                if got == "result" and "result" in want:
                    r = value
                    self.assertEqual((r.exit_code, r.stdout, r.stderr),
                                     (want["result"]["exit_code"], want["result"]["stdout"],
                                      want["result"]["stderr"]))
                    self.assertEqual(r.record.digest, r.raw["record"]["digest"])
                if got == "refusal":
                    self.assertEqual(value.reason, want["reason"])
                    self.assertFalse(value.dispatched)
                if got in ("protocol", "mismatch", "timeout", "transport"):
                    self.assertTrue(value.dispatched)


if __name__ == "__main__":
    unittest.main()
