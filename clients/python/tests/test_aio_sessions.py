# SPDX-License-Identifier: Apache-2.0
"""Sessions through the asyncio client against the docker (runc) daemon of
the harness; skipped, with a clear message, when PLIMSOLL_TEST_SESSION_URL
is not set."""
from __future__ import annotations

import asyncio
import os
import sys
import unittest

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError, verify_chain

from .support import env

NO_SESSIONS = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
               "--no-sessions, or no harness): the asyncio session tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_aio_sessions: %s\n" % NO_SESSIONS)


class AsyncSessions(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.client = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                           env("PLIMSOLL_TEST_KEY"))

    async def open(self, **kw: object) -> plimsoll.AsyncSession:
        s = await self.client.open_session(**kw)  # type: ignore[arg-type]
        self.addAsyncCleanup(s.__aexit__, None, None, None)
        return s

    async def test_a_session_keeps_files_state_and_its_chain(self) -> None:
        s = await self.open(languages=["python"], minimum_isolation="container")
        r = await s.run_snippet("open('a.txt', 'w').write('x')", language="python")
        self.assertEqual((r.exit_code, r.isolation), (0, "container"), r.stderr)
        a = await s.cell("x = 41", "python")
        self.assertTrue(a.interpreter_started, a.stderr)
        b = await s.cell("x + 1", "python", timeout_ms=20000)
        self.assertEqual(b.stdout, "42\n")
        p = await s.run_project({"t.py": "print(open('a.txt').read())"},
                                [["python3", "t.py"]], timeout_ms=20000)
        self.assertEqual(p.steps[0].stdout, "x\n", p.detail)
        assert p.record is not None
        self.assertEqual(len(s.chain), 4)
        self.assertEqual(s.chain.head, p.record.digest)
        self.assertEqual(verify_chain(s.chain.entries).head, p.record.digest)

    async def test_calls_at_once_on_one_session_keep_their_order(self) -> None:
        """Cells sent through asyncio.gather on one session run one at a
        time, in the order they were made, and the chain checks."""
        s = await self.open(languages=["python"])
        results = await asyncio.gather(s.cell("x = 1", "python"), s.cell("x += 1", "python"),
                                       s.cell("x *= 10", "python"), s.cell("x", "python"))
        self.assertEqual(results[-1].stdout, "20\n")
        self.assertEqual([e["request"]["cell"]["code"] for e in s.chain.entries],
                         ["x = 1", "x += 1", "x *= 10", "x"])
        verify_chain(s.chain.entries)

    async def test_two_sessions_at_once(self) -> None:
        one, two = await asyncio.gather(self.open(), self.open())
        self.assertNotEqual(one.session_id, two.session_id)
        a, b = await asyncio.gather(one.cell("v = 'one'; print(v)", "python"),
                                    two.cell("v = 'two'; print(v)", "python"))
        self.assertEqual((a.stdout, b.stdout), ("one\n", "two\n"))
        self.assertEqual((len(one.chain), len(two.chain)), (1, 1))

    async def test_a_call_behind_the_sessions_back_breaks_the_chain(self) -> None:
        s = await self.open()
        await s.cell("y = 1", "python")
        r = await self.client.run_cell(s.session_id, {"language": "python", "code": "y += 1"})
        self.assertEqual(r.exit_code, 0)
        head = s.chain.head
        with self.assertRaises(ChainError) as cm:
            await s.cell("print(y)", "python")
        self.assertEqual((cm.exception.index, cm.exception.broken), (1, "previous_digest"))
        self.assertEqual(s.chain.head, head)

    async def test_closed_session_and_another_callers_id(self) -> None:
        s = await self.open()
        await s.run_snippet("console.log(1)")
        other = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL"),
                                     env("PLIMSOLL_TEST_KEY_B"))
        with self.assertRaises(errors.NotFoundError) as nf:
            await other.run_cell(s.session_id, {"language": "python", "code": "1"})
        self.assertFalse(nf.exception.dispatched)
        async with s:
            pass
        self.assertTrue(s.closed)
        with self.assertRaises(errors.SessionEndedError) as cm:
            await s.cell("1", "python")
        self.assertTrue(cm.exception.ended_reason)
        self.assertEqual((cm.exception.reason, cm.exception.dispatched), ("SESSION_ENDED", False))

    # -- ListSessions, GetSession, ExtendSession, connect_session ----------------

    async def test_list_get_and_extend(self) -> None:
        other = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL"),
                                     env("PLIMSOLL_TEST_KEY_B"))
        mine, theirs = await asyncio.gather(self.open(languages=["python"]),
                                            other.open_session())
        self.addAsyncCleanup(theirs.__aexit__, None, None, None)
        listed, their_list = await asyncio.gather(self.client.list_sessions(),
                                                  other.list_sessions())
        self.assertIn(mine.session_id, [i.session_id for i in listed])
        self.assertNotIn(theirs.session_id, [i.session_id for i in listed])
        self.assertIn(theirs.session_id, [i.session_id for i in their_list])
        self.assertNotIn(mine.session_id, [i.session_id for i in their_list])
        r = await mine.cell("x = 1", "python")
        info = await mine.info()
        assert r.record is not None
        self.assertEqual((info.calls, info.previous_digest, info.state),
                         (1, r.record.digest, "ready"))
        longer = await mine.extend(1200)
        assert longer.lifetime_deadline_time and info.lifetime_deadline_time
        self.assertGreater(longer.lifetime_deadline_time, info.lifetime_deadline_time)
        with self.assertRaises(errors.InvalidRequestError) as cm:
            await self.client.extend_session(mine.session_id, info.max_lifetime_s + 60)
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", cm.exception.message)
        with self.assertRaises(errors.NotFoundError):
            await other.get_session(mine.session_id)
        with self.assertRaises(errors.NotFoundError):
            await other.extend_session(mine.session_id, 60)

    async def test_connect_session_continues_the_chain(self) -> None:
        s = await self.open(languages=["python"])
        await s.cell("x = 41", "python")
        async with plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL"),
                                        env("PLIMSOLL_TEST_KEY")) as elsewhere:
            again = await elsewhere.connect_session(s.session_id)
            self.assertEqual(again.chain.head, s.chain.head)
            r = await again.cell("x + 1", "python")
            self.assertEqual(r.stdout, "42\n", r.stderr)
            self.assertEqual((await again.info()).previous_digest, again.chain.head)
        self.assertTrue(elsewhere.closed)
        with self.assertRaises(ChainError) as cm:
            await s.cell("x", "python")
        self.assertEqual(cm.exception.broken, "previous_digest")
        other = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL"),
                                     env("PLIMSOLL_TEST_KEY_B"))
        with self.assertRaises(errors.NotFoundError):
            await other.connect_session(s.session_id)
        await s.close()
        with self.assertRaises(errors.SessionEndedError) as se:
            await self.client.connect_session(s.session_id)
        self.assertTrue(se.exception.ended_reason)


if __name__ == "__main__":
    unittest.main()
