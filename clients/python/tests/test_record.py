# SPDX-License-Identifier: Apache-2.0
"""The canonical form's edges and the chain keeper's behaviour, offline."""
from __future__ import annotations

import unittest

from plimsoll.errors import PlimsollError
from plimsoll.record import Chain, ChainError, canonical, check_record, verify_chain

from .support import make_record, run_answer


class Canonical(unittest.TestCase):
    def test_refuses_what_has_no_canonical_form(self) -> None:
        for bad in (1.5, 1.0, float("nan"), {1: "x"}, {"s": "\ud800"}, b"x", {"a": {1, 2}}):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    canonical(bad)

    def test_escapes_only_what_json_requires(self) -> None:
        self.assertEqual(canonical("\u007f/\u2028é\x01<>&"), '"\u007f/\u2028é\\u0001<>&"')
        self.assertEqual(canonical([True, False, None, -0, 2 ** 64]),
                         "[true,false,null,0,18446744073709551616]")

    def test_keys_sorted_by_utf16_code_units(self) -> None:
        # U+FF61 sorts after U+1F600 by code point but before it in UTF-16.
        self.assertEqual(canonical({"\U0001F600": 1, "\uff61": 2, "a": 3}),
                         '{"a":3,"\U0001F600":1,"\uff61":2}')


class Records(unittest.TestCase):
    req = {"snippet": {"language": "javascript", "code": "console.log(1)"}}

    def test_each_check_names_itself(self) -> None:
        good = run_answer(self.req)
        rec = good["record"]
        cases = {
            "version": [dict(rec, version=2), dict(rec, version=True), None],
            "digest": [dict(rec, runtime="other"), dict(rec, digest="")],
            "request_sha256": [make_record({"snippet": {}}, good)],
            "response_sha256": [make_record(self.req, dict(good, stdout="altered"))],
            "previous_digest": [make_record(self.req, good, previous="ab" * 32)],
            "ended_at": [make_record(self.req, good, ended="2026-11-30T01:02:02.999999999Z"),
                         make_record(self.req, good, ended="2026-11-30T01:02:04Z")],
        }
        for broken, records in cases.items():
            for r in records:
                with self.subTest(broken=broken, record=r):
                    with self.assertRaises(ChainError) as cm:
                        check_record(self.req, good, r, previous="")
                    self.assertEqual(cm.exception.broken, broken)
                    self.assertEqual(cm.exception.index, 0)
                    self.assertIsInstance(cm.exception, PlimsollError)
        check_record(self.req, good, rec, previous="")
        # previous None skips check 5
        check_record(self.req, good, make_record(self.req, good, previous="ab" * 32))

    def test_chain_head_advances_only_on_success(self) -> None:
        chain = Chain()
        a = run_answer(self.req)
        chain.append(self.req, a)
        self.assertEqual(chain.head, a["record"]["digest"])
        stale = run_answer(self.req)  # names "" again: a foreign first call
        with self.assertRaises(ChainError) as cm:
            chain.append(self.req, stale)
        self.assertEqual((cm.exception.index, cm.exception.broken), (1, "previous_digest"))
        self.assertEqual(chain.head, a["record"]["digest"])
        b = run_answer(self.req, previous=chain.head)
        chain.append(self.req, b)
        self.assertEqual(len(chain), 2)
        again = verify_chain(chain.entries)
        self.assertEqual(again.head, b["record"]["digest"])
        self.assertNotIn("record", chain.entries[0]["response"])

    def test_chain_from_a_signed_head(self) -> None:
        a = run_answer(self.req, previous="cd" * 32)
        self.assertEqual(verify_chain([{"request": self.req, "response": a,
                                        "record": a["record"]}],
                                      previous="cd" * 32).head, a["record"]["digest"])


if __name__ == "__main__":
    unittest.main()
