# SPDX-License-Identifier: Apache-2.0
"""Sessions against the docker (runc) daemon of the harness; skipped, with
a clear message, when PLIMSOLL_TEST_SESSION_URL is not set."""
from __future__ import annotations

import datetime
import os
import sys
import unittest

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError, verify_chain

from .support import env

NO_SESSIONS = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
               "--no-sessions, or no harness): the session tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_sessions: %s\n" % NO_SESSIONS)


class Sessions(unittest.TestCase):
    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                      env("PLIMSOLL_TEST_KEY"))

    def open(self, **kw: object) -> plimsoll.Session:
        s = self.client.open_session(**kw)  # type: ignore[arg-type]
        self.addCleanup(s.__exit__, None, None, None)
        return s

    def test_a_session_keeps_files_state_and_its_chain(self) -> None:
        s = self.open(languages=["python"], minimum_isolation="container")
        r = s.run_snippet("open('a.txt', 'w').write('x')", language="python")
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual(r.isolation, "container")
        a = s.cell("x = 41", "python")
        self.assertEqual(a.exit_code, 0, a.stderr)
        self.assertTrue(a.interpreter_started)
        b = s.cell("x + 1", "python", timeout_ms=20000)
        self.assertEqual(b.stdout, "42\n")
        self.assertFalse(b.interpreter_started)
        p = s.run_project({"t.py": "print(open('a.txt').read())"}, [["python3", "t.py"]],
                          timeout_ms=20000)
        self.assertEqual(p.exit_code, 0, p.detail)
        self.assertEqual(p.steps[0].stdout, "x\n")
        self.assertEqual(len(s.chain), 4)
        self.assertEqual(s.chain.entries[0]["record"]["previous_digest"], "")
        assert p.record is not None
        self.assertEqual(s.chain.head, p.record.digest)
        self.assertEqual(verify_chain(s.chain.entries).head, p.record.digest)
        self.assertEqual(s.chain.entries[2]["request"],
                         {"cell": {"language": "python", "code": "x + 1"},
                          "timeout_ms": 20000})

    def test_a_call_behind_the_sessions_back_breaks_the_chain(self) -> None:
        s = self.open()
        s.cell("y = 1", "python")
        # the same session id, bypassing the Session object
        r = self.client.run_cell(s.session_id, {"language": "python", "code": "y += 1"})
        self.assertEqual(r.exit_code, 0)
        head = s.chain.head
        with self.assertRaises(ChainError) as cm:
            s.cell("print(y)", "python")
        self.assertEqual((cm.exception.index, cm.exception.broken), (1, "previous_digest"))
        self.assertEqual(s.chain.head, head)

    def test_closed_session_and_another_callers_id(self) -> None:
        s = self.open()
        s.run_snippet("console.log(1)")
        other = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL"), env("PLIMSOLL_TEST_KEY_B"))
        with self.assertRaises(errors.NotFoundError) as nf:
            other.run_cell(s.session_id, {"language": "python", "code": "1"})
        self.assertFalse(nf.exception.dispatched)
        with self.assertRaises(errors.NotFoundError):
            other.close_session(s.session_id)
        s.close()
        with self.assertRaises(errors.SessionEndedError) as cm:
            s.cell("1", "python")
        e = cm.exception
        self.assertTrue(e.ended_reason)
        self.assertFalse(e.dispatched)
        self.assertEqual(e.reason, "SESSION_ENDED")

    def test_a_raising_cell_is_a_result(self) -> None:
        s = self.open(languages=["python"])
        r = s.cell("raise ValueError('no')", "python")
        self.assertEqual(r.exit_code, 1)
        self.assertIn("ValueError", r.stderr)
        self.assertEqual(len(s.chain), 1)

    def test_a_cell_streams_its_output_and_extends_the_chain(self) -> None:
        streams = self.client.describe().operations.session.streams
        s = self.open(languages=["python"])
        s.cell("n = 3", "python")
        chunks: list = []
        r = s.cell_stream("for i in range(n): print('line', i, flush=True)", "python",
                          chunks.append)
        self.assertEqual((r.exit_code, r.stdout), (0, "line 0\nline 1\nline 2\n"), r.stderr)
        self.assertEqual(len(s.chain), 2)
        assert r.record is not None
        self.assertEqual(s.chain.head, r.record.digest)
        if streams:
            self.assertGreater(len(chunks), 0)
            self.assertEqual(b"".join(c.stdout for c in chunks), r.stdout_bytes())
        else:
            self.assertEqual(chunks, [])
        self.assertEqual(s.cell("n", "python").stdout, "3\n")

    def test_a_module_in_a_session_is_unsupported(self) -> None:
        s = self.open()
        with self.assertRaises(errors.UnsupportedError):
            s.run({"module": {"wasm_base64": "AGFzbQEAAAA="}})
        self.assertEqual(len(s.chain), 0)

    # -- ListSessions, GetSession, ExtendSession, connect_session ----------------

    def other_client(self) -> plimsoll.Client:
        """The harness's second caller on the same daemon."""
        return plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL"), env("PLIMSOLL_TEST_KEY_B"))

    def test_list_shows_the_callers_own_sessions_only(self) -> None:
        mine = self.open()
        other = self.other_client()
        theirs = other.open_session()
        self.addCleanup(theirs.__exit__, None, None, None)
        listed = self.client.list_sessions()
        ids = [i.session_id for i in listed]
        self.assertIn(mine.session_id, ids)
        self.assertNotIn(theirs.session_id, ids)
        created = [i.created_at for i in listed]
        self.assertEqual(created, sorted(created))  # oldest first
        self.assertTrue(all(isinstance(i, plimsoll.SessionInfo) for i in listed))
        self.assertEqual([i.state for i in listed if i.session_id == mine.session_id],
                         ["ready"])
        their_ids = [i.session_id for i in other.list_sessions()]
        self.assertIn(theirs.session_id, their_ids)
        self.assertNotIn(mine.session_id, their_ids)

    def test_get_after_calls_names_the_last_record(self) -> None:
        s = self.open(languages=["python"])
        before = s.info()
        self.assertEqual((before.session_id, before.state, before.calls, before.calls_waiting,
                          before.previous_digest, before.last_call_at, before.ended_at,
                          before.languages),
                         (s.session_id, "ready", 0, 0, "", "", "", ["python"]))
        assert before.created_time is not None and before.lifetime_deadline_time is not None
        self.assertEqual(before.lifetime_deadline_time - before.created_time,
                         datetime.timedelta(seconds=600))  # the harness's lifetime
        self.assertGreaterEqual(before.max_lifetime_s, 600)
        self.assertEqual(before.disk_budget_kib, 8 * 1024)  # SANDBOX_SESSION_DISK_MB=8
        s.cell("x = 41", "python")
        r = s.run_snippet("print('two')", language="python")
        info = self.client.get_session(s.session_id)
        assert r.record is not None
        self.assertEqual((info.calls, info.calls_waiting, info.state), (2, 0, "ready"))
        self.assertEqual(info.previous_digest, r.record.digest)
        self.assertEqual(info.previous_digest, s.chain.head)
        assert info.last_call_time is not None
        self.assertGreaterEqual(info.last_call_time, before.created_time)
        self.assertEqual(info.created_at, before.created_at)
        for interp in info.interpreters:
            self.assertIn(interp.language, ("python", "javascript"))

    def test_extend_moves_the_deadline_within_the_maximum(self) -> None:
        s = self.open()
        first = s.info()
        assert first.lifetime_deadline_time is not None
        longer = s.extend(1200)
        assert longer.lifetime_deadline_time is not None
        self.assertGreater(longer.lifetime_deadline_time, first.lifetime_deadline_time)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.assertLess(abs((longer.lifetime_deadline_time - now).total_seconds() - 1200), 60)
        shorter = self.client.extend_session(s.session_id, 300)  # sooner is allowed too
        assert shorter.lifetime_deadline_time is not None
        self.assertLess(shorter.lifetime_deadline_time, longer.lifetime_deadline_time)
        self.assertEqual(s.info().lifetime_deadline, shorter.lifetime_deadline)
        with self.assertRaises(errors.InvalidRequestError) as cm:
            s.extend(first.max_lifetime_s + 60)
        e = cm.exception
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", e.message)
        self.assertRegex(e.message, r"at most \d+$")
        self.assertFalse(e.dispatched)
        self.assertEqual(s.info().lifetime_deadline, shorter.lifetime_deadline)
        s.close()
        with self.assertRaises(errors.SessionEndedError) as se:
            s.extend(60)
        self.assertTrue(se.exception.ended_reason)

    def test_connect_session_continues_the_chain(self) -> None:
        s = self.open(languages=["python"])
        s.cell("x = 41", "python")
        with plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL"),
                             env("PLIMSOLL_TEST_KEY")) as elsewhere:
            again = elsewhere.connect_session(s.session_id, minimum_isolation="container")
            self.assertEqual((again.session_id, again.chain.head, len(again.chain)),
                             (s.session_id, s.chain.head, 0))
            r = again.cell("x + 1", "python")  # its record names the first: the chain holds
            self.assertEqual(r.stdout, "42\n", r.stderr)
            assert r.record is not None
            self.assertEqual(r.record.previous_digest, s.chain.head)
            again.run_snippet("print(x)", language="python")
            self.assertEqual(len(again.chain), 2)
            verify_chain(again.chain.entries, previous=s.chain.entries[-1]["record"]["digest"])
            self.assertEqual(again.info().previous_digest, again.chain.head)
        self.assertTrue(elsewhere.closed)
        # the first object did not see those calls: its next answer says so
        with self.assertRaises(ChainError) as cm:
            s.cell("x", "python")
        self.assertEqual(cm.exception.broken, "previous_digest")
        s.close()
        ended = self.client.get_session(s.session_id)
        self.assertEqual(ended.state, "ended")
        self.assertTrue(ended.ended_reason)
        assert ended.ended_time is not None
        self.assertEqual(ended.lifetime_deadline, "")
        with self.assertRaises(errors.SessionEndedError) as se:
            self.client.connect_session(s.session_id)
        self.assertEqual(se.exception.ended_reason, ended.ended_reason)

    def test_another_callers_id_is_not_found(self) -> None:
        s = self.open()
        other = self.other_client()
        unknown = "0" * 64
        for make in (lambda c, i: c.get_session(i), lambda c, i: c.extend_session(i, 60),
                     lambda c, i: c.connect_session(i)):
            with self.assertRaises(errors.NotFoundError) as theirs:
                make(other, s.session_id)
            with self.assertRaises(errors.NotFoundError) as nobodys:
                make(other, unknown)
            a, b = theirs.exception, nobodys.exception
            self.assertEqual((a.message, a.code, a.http_status, a.metadata, a.dispatched),
                             (b.message, b.code, b.http_status, b.metadata, False))
        self.assertEqual(s.info().calls, 0)


if __name__ == "__main__":
    unittest.main()
