# SPDX-License-Identifier: Apache-2.0
"""The shared vectors in tests/vectors/ (docs/clients.md, "Shared test vectors")."""
from __future__ import annotations

import copy
import unittest

from plimsoll.record import (Chain, ChainError, canonical, check_record, first_broken,
                             sha256_hex, verify_chain)

from .support import vectors


class CanonicalVectors(unittest.TestCase):
    def test_canonical_text_and_digest(self) -> None:
        cases = vectors("canonical.json")
        self.assertGreaterEqual(len(cases), 8)
        for case in cases:
            with self.subTest(case["name"]):
                self.assertEqual(canonical(case["input"]), case["canonical"])
                self.assertEqual(sha256_hex(case["input"]), case["sha256"])
                self.assertEqual(sha256_hex(case["canonical"]), case["sha256"])


class RecordVectors(unittest.TestCase):
    def test_each_record_alone(self) -> None:
        cases = vectors("records.json")
        self.assertTrue(any(c["valid"] for c in cases))
        self.assertTrue(any(not c["valid"] for c in cases))
        for case in cases:
            with self.subTest(case["name"]):
                args = (case["request"], case["response"], case["record"])
                if case["valid"]:
                    check_record(*args)
                    self.assertEqual(first_broken(*args), ("", ""))
                else:
                    with self.assertRaises(ChainError) as cm:
                        check_record(*args)
                    self.assertIn(cm.exception.broken, ("version", "digest", "request_sha256",
                                                        "response_sha256", "ended_at"))

    def test_record_inside_the_response(self) -> None:
        case = vectors("records.json")[0]
        answer = dict(case["response"], record=case["record"])
        check_record(case["request"], answer, case["record"], previous="")
        Chain().append(case["request"], answer)


class ChainVectors(unittest.TestCase):
    def test_each_chain(self) -> None:
        cases = vectors("chains.json")
        self.assertGreaterEqual(len(cases), 11)
        for case in cases:
            with self.subTest(case["name"]):
                entries = case["entries"]
                if case["valid"]:
                    chain = verify_chain(entries)
                    self.assertEqual(len(chain), len(entries))
                    self.assertEqual(chain.head, entries[-1]["record"]["digest"])
                    self.assertEqual(chain.entries, entries)
                    continue
                with self.assertRaises(ChainError) as cm:
                    verify_chain(entries)
                self.assertEqual((cm.exception.index, cm.exception.broken),
                                 (case["fails_at"], case["broken"]))

    def test_chain_keeper_stops_where_the_vector_says(self) -> None:
        """Feeding a broken chain entry by entry: the keeper accepts exactly
        the entries before fails_at, and its head stays at the last one."""
        for case in vectors("chains.json"):
            if case["valid"]:
                continue
            with self.subTest(case["name"]):
                chain = Chain()
                entries = copy.deepcopy(case["entries"])
                for i, e in enumerate(entries):
                    if i == case["fails_at"]:
                        head = chain.head
                        with self.assertRaises(ChainError) as cm:
                            chain.append(e["request"], e["response"], e["record"])
                        self.assertEqual(cm.exception.broken, case["broken"])
                        self.assertEqual(chain.head, head)
                        self.assertEqual(len(chain), i)
                        break
                    chain.append(e["request"], e["response"], e["record"])
                else:
                    self.fail("no entry failed")


if __name__ == "__main__":
    unittest.main()
