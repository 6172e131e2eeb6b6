# SPDX-License-Identifier: Apache-2.0
"""The client's reasons against tests/vectors/reasons.json, the daemon's
table: entry for entry, both ways (docs/clients.md, "Typed refusals")."""
from __future__ import annotations

import unittest
from typing import Any, Dict

import plimsoll
from plimsoll import client as sync_client
from plimsoll import errors

from .support import env, vectors

REASONS: Dict[str, Dict[str, Any]] = {r["reason"]: r for r in vectors("reasons.json")["reasons"]}
REQUEST = {"snippet": {"language": "javascript", "code": "console.log(1)"}}


class Table(unittest.TestCase):
    """The client's own table: every reason it has a type for is in the file
    as a refusal, and the reasons it retries are the file's."""

    def test_every_reason_the_client_knows_is_in_the_file(self) -> None:
        for reason, cls in errors._BY_REASON.items():
            with self.subTest(reason):
                self.assertTrue(reason in REASONS, "the client has %s for a reason the daemon "
                                "does not send" % cls.__name__)
                self.assertEqual(REASONS[reason]["channel"], "refusal")
                self.assertTrue(issubclass(cls, errors.RefusalError))
        self.assertEqual(len(set(errors._BY_REASON.values())), len(errors._BY_REASON))

    def test_the_retried_reasons_are_the_files(self) -> None:
        retried = {r for r, cls in errors._BY_REASON.items()
                   if issubclass(cls, sync_client.RETRYABLE)}
        self.assertEqual(retried, {r for r, e in REASONS.items() if e["retried"]})


def check(t: unittest.TestCase, reason: str, e: errors.PlimsollError) -> None:
    """The typed error a client made of the reason's answer is what the file
    says of the reason."""
    want = REASONS[reason]
    if want["channel"] == "refusal":
        t.assertIsInstance(e, errors.RefusalError)
        t.assertIsNot(type(e), errors.RefusalError,
                      "%s has no type of its own in the client" % reason)
        t.assertIs(type(e), errors.refusal_class(reason))
    else:
        t.assertEqual(want["channel"], "infrastructure")
        t.assertIs(type(e), errors.InfrastructureError)
    t.assertEqual((e.reason, e.code, e.http_status, e.dispatched),
                  (reason, want["code"], want["http_status"], want["dispatched"]))
    t.assertEqual(isinstance(e, sync_client.RETRYABLE), want["retried"], "%s: retried" % reason)


class Served(unittest.TestCase):
    """Each reason of the file, answered as the daemon sends it by the
    harness's hostile daemon: the client's typed error says what the file
    says."""

    def test_every_reason_of_the_file(self) -> None:
        base = env("PLIMSOLL_TEST_HOSTILE_URL")
        self.assertGreater(len(REASONS), 10)
        for reason in REASONS:
            with self.subTest(reason):
                c = plimsoll.Client(base + "/reason/" + reason, "plk_reasons")
                with self.assertRaises(errors.PlimsollError) as cm:
                    c.run(REQUEST)
                check(self, reason, cm.exception)


class AsyncServed(unittest.IsolatedAsyncioTestCase):
    """The same through the asyncio client."""

    async def test_every_reason_of_the_file(self) -> None:
        base = env("PLIMSOLL_TEST_HOSTILE_URL")
        for reason in REASONS:
            with self.subTest(reason):
                c = plimsoll.AsyncClient(base + "/reason/" + reason, "plk_reasons")
                with self.assertRaises(errors.PlimsollError) as cm:
                    await c.run(REQUEST)
                check(self, reason, cm.exception)


if __name__ == "__main__":
    unittest.main()
