# SPDX-License-Identifier: Apache-2.0
"""Sessions against the docker (runc) daemon of the harness; skipped, with
a clear message, when PLIMSOLL_TEST_SESSION_URL is not set."""
from __future__ import annotations

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


if __name__ == "__main__":
    unittest.main()
