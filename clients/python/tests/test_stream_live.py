# SPDX-License-Identifier: Apache-2.0
"""RunStream against the harness's real wasm daemon, through the
synchronous and the asyncio client."""
from __future__ import annotations

import asyncio
import unittest
from typing import List

import plimsoll
from plimsoll import errors

from .support import env

LINES = 5
CODE = ("for (let i = 0; i < %d; i++) console.log('line ' + i);\n"
        "console.error('to stderr');\n" % LINES)
WANT = "".join("line %d\n" % i for i in range(LINES))


class Live(unittest.TestCase):
    def setUp(self) -> None:
        self.url, self.key = env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY")
        self.client = plimsoll.Client(self.url, self.key)
        self.streams = self.client.describe().operations.snippet.streams

    def check_chunks(self, chunks: List[plimsoll.OutputChunk], r: plimsoll.RunResult) -> None:
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, WANT, "to stderr\n"))
        self.assertEqual(r.record.provider if r.record else None, "wasm")
        if not self.streams:  # Describe says the kind sends only the result
            self.assertEqual(chunks, [])
            return
        self.assertGreater(len(chunks), 0)
        self.assertEqual(b"".join(c.stdout for c in chunks), r.stdout_bytes())
        self.assertEqual(b"".join(c.stderr for c in chunks), r.stderr_bytes())
        self.assertEqual({c.step for c in chunks}, {0})

    def test_a_snippet_streams_its_lines(self) -> None:
        chunks: List[plimsoll.OutputChunk] = []
        r = self.client.run_stream(plimsoll.snippet_request(CODE, minimum_isolation="process"),
                                   chunks.append)
        self.check_chunks(chunks, r)
        self.assertEqual(r.isolation, "process")

    def test_the_asyncio_client_streams_too(self) -> None:
        chunks: List[plimsoll.OutputChunk] = []

        async def go() -> plimsoll.RunResult:
            c = plimsoll.AsyncClient(self.url, self.key)
            return await c.run_stream(plimsoll.snippet_request(CODE), chunks.append)
        self.check_chunks(chunks, asyncio.run(go()))

    def test_a_module_streams(self) -> None:
        with open(env("PLIMSOLL_TEST_WASM_MODULE"), "rb") as f:
            wasm = f.read()
        chunks: List[plimsoll.OutputChunk] = []
        r = self.client.run_stream(plimsoll.module_request(wasm), chunks.append)
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(b"".join(c.stdout for c in chunks),
                         r.stdout_bytes() if chunks else b"")

    def test_a_refusal_is_unary_runs_refusal(self) -> None:
        req = plimsoll.snippet_request("console.log(1)", minimum_isolation="vm")
        with self.assertRaises(errors.InsufficientIsolationError) as unary:
            self.client.run(req)
        chunks: List[plimsoll.OutputChunk] = []
        with self.assertRaises(errors.InsufficientIsolationError) as streamed:
            self.client.run_stream(req, chunks.append)
        u, s = unary.exception, streamed.exception
        self.assertEqual((s.reason, s.code, s.dispatched), (u.reason, u.code, u.dispatched))
        self.assertEqual((s.reason, s.dispatched), ("INSUFFICIENT_ISOLATION", False))
        self.assertEqual(s.metadata.get("isolation"), "process")
        self.assertEqual(chunks, [])

        async def go() -> None:
            await plimsoll.AsyncClient(self.url, self.key).run_stream(req)
        with self.assertRaises(errors.InsufficientIsolationError) as aio:
            asyncio.run(go())
        self.assertFalse(aio.exception.dispatched)

    def test_a_wrong_key_is_unauthenticated(self) -> None:
        c = plimsoll.Client(self.url, "plk_not_a_key_of_this_daemon")
        with self.assertRaises(errors.UnauthenticatedError) as cm:
            c.run_stream(plimsoll.snippet_request("console.log(1)"))
        self.assertEqual((cm.exception.reason, cm.exception.dispatched),
                         ("UNAUTHENTICATED", False))

        async def go() -> None:
            await plimsoll.AsyncClient(self.url, "plk_nope").run_stream(
                plimsoll.snippet_request("console.log(1)"))
        with self.assertRaises(errors.UnauthenticatedError):
            asyncio.run(go())

    def test_a_guest_that_throws_streams_its_stderr(self) -> None:
        chunks: List[plimsoll.OutputChunk] = []
        r = self.client.run_stream(
            plimsoll.snippet_request("console.log('before'); throw new Error('boom')"),
            chunks.append)
        self.assertNotEqual(r.exit_code, 0)
        self.assertIn("boom", r.stderr)
        if chunks:
            self.assertEqual(b"".join(c.stderr for c in chunks), r.stderr_bytes())


if __name__ == "__main__":
    unittest.main()
