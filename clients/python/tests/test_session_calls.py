# SPDX-License-Identifier: Apache-2.0
"""ListSessions, GetSession, ExtendSession, connect_session and the client
as a context manager, against a fake daemon: what is sent, what is refused
before anything is sent, the typed answers, and the malformed answers that
are the client's protocol error (the style of test_hostile, with the cases
here: tests/vectors is shared by every client)."""
from __future__ import annotations

import datetime
import json
import threading
import unittest
from typing import Any, Dict, List, Tuple

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError

from .support import SESSION_ID, FakeDaemon, connect_error, run_answer, session_info

OTHER_ID = "0f" * 32
UTC = datetime.timezone.utc


def without(name: str, **fields: Any) -> Dict[str, Any]:
    """A SessionInfo with the member ``name`` left out."""
    info = session_info(**fields)
    del info[name]
    return info


#: (name, method, answer): a 200 answer the client must take for a protocol
#: error. ``method`` is the call made: list, get (of SESSION_ID), extend.
MALFORMED: List[Tuple[str, str, Any]] = [
    ("not-an-object", "get", [session_info()]),
    ("session-id-missing", "get", without("session_id")),
    ("session-id-empty", "get", session_info(session_id="")),
    ("session-id-a-number", "get", session_info(session_id=5)),
    ("session-id-upper-case", "get", session_info(session_id=SESSION_ID.upper())),
    ("session-id-short", "get", session_info(session_id=SESSION_ID[:-1])),
    ("session-id-not-hex", "get", session_info(session_id="g" * 64)),
    ("session-id-another-session", "get", session_info(session_id=OTHER_ID)),
    ("state-missing", "get", without("state")),
    ("state-unknown", "get", session_info(state="running")),
    ("state-a-number", "get", session_info(state=1)),
    ("ended-reason-a-bool", "get", session_info(ended_reason=False)),
    ("calls-a-string", "get", session_info(calls="2")),
    ("calls-negative", "get", session_info(calls=-1)),
    ("calls-past-uint32", "get", session_info(calls=2 ** 32)),
    ("calls-waiting-a-bool", "get", session_info(calls_waiting=True)),
    ("disk-used-a-float", "get", b'{"session_id": "%s", "state": "ready", '
                                 b'"disk_used_kib": 1.5}' % SESSION_ID.encode()),
    ("max-lifetime-a-string", "get", session_info(max_lifetime_s="86400")),
    ("created-at-not-a-time", "get", session_info(created_at="yesterday")),
    ("created-at-a-number", "get", session_info(created_at=1764464523)),
    ("lifetime-deadline-not-utc", "get",
     session_info(lifetime_deadline="2026-11-30T02:02:03.123456789+01:00")),
    ("ended-at-no-such-day", "get", session_info(ended_at="2026-02-30T00:00:00.000000000Z")),
    ("idle-deadline-ten-fraction-digits", "get",
     session_info(idle_deadline="2026-11-30T01:07:04.0000000000Z")),
    ("previous-digest-not-a-digest", "get", session_info(previous_digest="abc")),
    ("previous-digest-a-number", "get", session_info(previous_digest=7)),
    ("languages-not-an-array", "get", session_info(languages="python")),
    ("languages-a-number-in-it", "get", session_info(languages=[1])),
    ("interpreters-alive-a-string", "get",
     session_info(interpreters=[{"language": "python", "alive": "yes"}])),
    ("interpreters-a-null-in-it", "get", session_info(interpreters=[None])),
    ("interpreters-an-object", "get", session_info(interpreters={"python": True})),
    ("a-member-twice", "get", b'{"session_id": "%s", "state": "ready", "state": "ended"}'
                             % SESSION_ID.encode()),
    ("extend-state-unknown", "extend", session_info(state="extended")),
    ("extend-another-session", "extend", session_info(session_id=OTHER_ID)),
    ("extend-lifetime-deadline-a-number", "extend", session_info(lifetime_deadline=3600)),
    ("list-not-an-array", "list", {"sessions": session_info()}),
    ("list-a-null-in-it", "list", {"sessions": [None]}),
    ("list-an-empty-session", "list", {"sessions": [{}]}),
    ("list-the-second-bad", "list", {"sessions": [session_info(),
                                                  session_info(OTHER_ID, state="gone")]}),
    ("list-a-bad-time", "list", {"sessions": [session_info(ended_at="now")]}),
]

#: Answers that are what the protocol allows though not what this daemon
#: sends: proto3 JSON leaves defaults out (or sends null), and a member
#: the client does not know is ignored.
ALLOWED: List[Tuple[str, str, Any]] = [
    ("only-id-and-state", "get", {"session_id": SESSION_ID, "state": "paused"}),
    ("nulls-are-defaults", "get", session_info(calls=None, languages=None,
                                               interpreters=None, created_at=None)),
    ("an-unknown-member", "get", session_info(something_new={"x": [1]})),
    ("fraction-free-time", "get", session_info(created_at="2026-11-30T01:02:03Z")),
    ("list-empty-object", "list", {}),
    ("list-empty", "list", {"sessions": []}),
]


def call(client: plimsoll.Client, method: str) -> Any:
    if method == "list":
        return client.list_sessions()
    if method == "get":
        return client.get_session(SESSION_ID)
    return client.extend_session(SESSION_ID, 60)


async def aio_call(client: plimsoll.AsyncClient, method: str) -> Any:
    if method == "list":
        return await client.list_sessions()
    if method == "get":
        return await client.get_session(SESSION_ID)
    return await client.extend_session(SESSION_ID, 60)


#: Arguments refused before anything is sent: (what, call, the error type).
BAD_IDS: List[Tuple[Any, type]] = [
    (None, TypeError), (5, TypeError), (SESSION_ID.encode(), TypeError), ("", ValueError),
    (SESSION_ID.upper(), ValueError), (SESSION_ID[:-1], ValueError),
    (SESSION_ID + "0", ValueError), (" " + SESSION_ID[1:], ValueError),
    ("z" * 64, ValueError), (SESSION_ID[:-1] + "\n", ValueError),
]
BAD_ENDS_IN: List[Tuple[Any, type]] = [
    (0, ValueError), (-1, ValueError), (2 ** 32, ValueError), (1.5, ValueError),
    (60.0, ValueError), ("60", TypeError), (True, TypeError), (None, TypeError),
]


class SessionCalls(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = plimsoll.Client(self.fake.url, "plk_test")

    def path(self, i: int = -1) -> str:
        return self.fake.received[i]["path"].rsplit("/", 1)[1]

    def test_what_is_sent_and_the_typed_answers(self) -> None:
        ended = session_info(OTHER_ID, state="ended", ended_reason="closed by its caller",
                             lifetime_deadline="", idle_deadline="", interpreters=[],
                             ended_at="2026-11-30T01:09:00.000000001Z", previous_digest="")
        self.fake.answer(200, {"sessions": [session_info(), ended]})
        got = self.client.list_sessions()
        self.assertEqual((self.path(), self.fake.sent()), ("ListSessions", {}))
        self.assertEqual([type(i) for i in got], [plimsoll.SessionInfo] * 2)
        one, two = got
        self.assertEqual((one.session_id, one.state, one.calls, one.calls_waiting,
                          one.previous_digest, one.languages, one.disk_used_kib,
                          one.disk_budget_kib, one.max_lifetime_s, one.ended),
                         (SESSION_ID, "ready", 2, 0, "ab" * 32, ["python"], 12, 8192, 86400,
                          False))
        self.assertEqual(one.interpreters, [plimsoll.SessionInterpreter("python", True)])
        self.assertEqual(one.created_at, "2026-11-30T01:02:03.123456789Z")
        self.assertEqual(one.created_time,
                         datetime.datetime(2026, 11, 30, 1, 2, 3, 123456, tzinfo=UTC))
        self.assertEqual(one.lifetime_deadline_time - one.created_time,
                         datetime.timedelta(hours=1))
        self.assertEqual(one.last_call_time,
                         datetime.datetime(2026, 11, 30, 1, 2, 4, tzinfo=UTC))
        self.assertEqual(one.idle_deadline_time,
                         datetime.datetime(2026, 11, 30, 1, 7, 4, tzinfo=UTC))
        self.assertIsNone(one.ended_time)
        self.assertEqual(one.raw, session_info())
        self.assertEqual((two.state, two.ended, two.ended_reason, two.interpreters),
                         ("ended", True, "closed by its caller", []))
        self.assertEqual(two.ended_time,
                         datetime.datetime(2026, 11, 30, 1, 9, 0, tzinfo=UTC))
        self.assertIsNone(two.lifetime_deadline_time)
        self.assertIsNone(two.idle_deadline_time)

        self.fake.answer(200, session_info(calls_waiting=1))
        info = self.client.get_session(SESSION_ID)
        self.assertEqual((self.path(), self.fake.sent()),
                         ("GetSession", {"session_id": SESSION_ID}))
        self.assertEqual((info.session_id, info.calls_waiting), (SESSION_ID, 1))

        self.fake.answer(200, session_info(lifetime_deadline="2026-11-30T03:00:00.000000000Z"))
        info = self.client.extend_session(SESSION_ID, 7200)
        self.assertEqual((self.path(), self.fake.sent()),
                         ("ExtendSession", {"session_id": SESSION_ID, "ends_in_s": 7200}))
        self.assertEqual(self.fake.received[-1]["body"],
                         plimsoll.canonical({"session_id": SESSION_ID,
                                             "ends_in_s": 7200}).encode())
        self.assertEqual(info.lifetime_deadline_time,
                         datetime.datetime(2026, 11, 30, 3, 0, tzinfo=UTC))
        self.fake.answer(200, session_info())
        self.client.extend_session(SESSION_ID, 2 ** 32 - 1)  # the largest uint32
        self.assertEqual(self.fake.sent()["ends_in_s"], 2 ** 32 - 1)

    def test_arguments_refused_before_anything_is_sent(self) -> None:
        for bad, cls in BAD_IDS:
            with self.subTest(session_id=bad):
                with self.assertRaises(cls) as cm:
                    self.client.get_session(bad)
                self.assertIn("session_id", str(cm.exception))
                with self.assertRaises(cls):
                    self.client.extend_session(bad, 60)
                with self.assertRaises(cls):
                    self.client.connect_session(bad)
        for bad, cls in BAD_ENDS_IN:
            with self.subTest(ends_in_s=bad):
                with self.assertRaises(cls) as cm:
                    self.client.extend_session(SESSION_ID, bad)
                self.assertIn("ends_in_s", str(cm.exception))
        with self.assertRaises(TypeError):
            self.client.extend_session(SESSION_ID)  # type: ignore[call-arg]
        with self.assertRaises(ValueError):
            self.client.connect_session(SESSION_ID, minimum_isolation="sandboxed")
        self.assertEqual(self.fake.received, [])

    def test_malformed_answers_are_protocol_errors(self) -> None:
        for name, method, answer in MALFORMED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                with self.assertRaises(errors.ProtocolError) as cm:
                    call(self.client, method)
                e = cm.exception
                self.assertEqual((e.code, e.dispatched, e.http_status), ("unknown", True, 200))
        self.assertEqual(len(self.fake.received), len(MALFORMED))

    def test_allowed_answers(self) -> None:
        for name, method, answer in ALLOWED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                got = call(self.client, method)
                if method == "list":
                    self.assertEqual(got, [])
                else:
                    self.assertEqual(got.session_id, SESSION_ID)
        self.fake.answer(200, {"session_id": SESSION_ID, "state": "ready"})
        bare = self.client.get_session(SESSION_ID)
        self.assertEqual((bare.calls, bare.languages, bare.interpreters, bare.created_time,
                          bare.previous_digest), (0, [], [], None, ""))

    def test_refusals_are_the_typed_errors(self) -> None:
        self.fake.answer(*connect_error("NOT_FOUND", "not_found", "no such session", 404))
        with self.assertRaises(errors.NotFoundError):
            self.client.get_session(SESSION_ID)
        self.fake.answer(*connect_error("SESSION_ENDED", "failed_precondition",
                                        "session ended", ended_reason="closed by its caller"))
        with self.assertRaises(errors.SessionEndedError) as se:
            self.client.extend_session(SESSION_ID, 60)
        self.assertEqual(se.exception.ended_reason, "closed by its caller")
        self.fake.answer(*connect_error(
            "INVALID_REQUEST", "invalid_argument",
            "ends_in_s: 90000 s from now is past this daemon's SANDBOX_SESSION_MAX_LIFETIME "
            "(86400 s from the session's open); at most 86390"))
        with self.assertRaises(errors.InvalidRequestError) as ir:
            self.client.extend_session(SESSION_ID, 90000)
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", ir.exception.message)
        self.fake.answer(*connect_error("UNSUPPORTED", "unimplemented", "sessions are off", 501))
        with self.assertRaises(errors.UnsupportedError):
            self.client.list_sessions()
        self.assertFalse(se.exception.dispatched)

    def test_connect_session_continues_the_chain(self) -> None:
        head = "cd" * 32
        self.fake.answer(200, session_info(previous_digest=head, calls=3))
        s = self.client.connect_session(SESSION_ID, minimum_isolation="process")
        self.assertIsInstance(s, plimsoll.Session)
        self.assertEqual((self.path(), self.fake.sent()),
                         ("GetSession", {"session_id": SESSION_ID}))
        self.assertEqual((s.session_id, s.chain.head, len(s.chain), s.closed,
                          s.minimum_isolation), (SESSION_ID, head, 0, False, "process"))
        c1 = {"cell": {"language": "python", "code": "x + 1"}}
        self.fake.answer(200, run_answer(c1, "42\n", previous=head))
        r = s.cell("x + 1", "python")
        self.assertEqual((self.path(), r.stdout), ("RunCell", "42\n"))
        self.assertEqual(s.chain.head, r.record.digest)
        self.assertEqual(s.chain.entries[0]["record"]["previous_digest"], head)
        # a record that starts a chain afresh is not this session's next one
        self.fake.answer(200, run_answer(c1, "42\n", previous=""))
        with self.assertRaises(ChainError) as cm:
            s.cell("x + 1", "python")
        self.assertEqual((cm.exception.index, cm.exception.broken), (1, "previous_digest"))
        # a session with no call yet: its chain starts at ""
        self.fake.answer(200, session_info(previous_digest="", calls=0))
        self.assertEqual(self.client.connect_session(SESSION_ID).chain.head, "")

    def test_connect_session_refuses_an_ended_one(self) -> None:
        self.fake.answer(200, session_info(state="ended", ended_reason="the session reached "
                                           "SANDBOX_SESSION_LIFETIME", lifetime_deadline="",
                                           ended_at="2026-11-30T02:02:03.123456789Z"))
        with self.assertRaises(errors.SessionEndedError) as cm:
            self.client.connect_session(SESSION_ID)
        e = cm.exception
        self.assertEqual((e.reason, e.code, e.dispatched, e.ended_reason),
                         ("SESSION_ENDED", "failed_precondition", False,
                          "the session reached SANDBOX_SESSION_LIFETIME"))
        self.assertEqual(e.metadata["ended_reason"], e.ended_reason)
        self.fake.answer(200, session_info(state="ended"))  # no reason given
        with self.assertRaises(errors.SessionEndedError) as cm:
            self.client.connect_session(SESSION_ID)
        self.assertTrue(cm.exception.ended_reason)
        self.fake.answer(*connect_error("NOT_FOUND", "not_found", "no such session", 404))
        with self.assertRaises(errors.NotFoundError):
            self.client.connect_session(SESSION_ID)
        self.fake.answer(200, session_info(session_id=OTHER_ID))
        with self.assertRaises(errors.ProtocolError):
            self.client.connect_session(SESSION_ID)
        self.assertEqual([self.path(i) for i in range(4)], ["GetSession"] * 4)

    def test_session_info_and_extend(self) -> None:
        self.fake.answer(200, {"session_id": SESSION_ID})
        s = self.client.open_session()
        self.fake.answer(200, session_info(calls_waiting=1))
        done = threading.Event()
        got: List[Any] = []

        def info() -> None:
            got.append(s.info())
            done.set()

        with s._lock:  # a call of the object's in progress: info() waits for none
            threading.Thread(target=info, daemon=True).start()
            self.assertTrue(done.wait(10), "info() waited for the session's lock")
        self.assertEqual(got[0].calls_waiting, 1)
        self.assertEqual((self.path(), self.fake.sent()),
                         ("GetSession", {"session_id": SESSION_ID}))
        self.fake.answer(200, session_info())
        self.assertIsInstance(s.extend(30), plimsoll.SessionInfo)
        self.assertEqual((self.path(), self.fake.sent()),
                         ("ExtendSession", {"session_id": SESSION_ID, "ends_in_s": 30}))
        with self.assertRaises(ValueError):
            s.extend(0)
        self.assertEqual(len(self.fake.received), 3)

    def test_the_client_as_a_context_manager(self) -> None:
        self.fake.answer(200, {"provider": "wasm"})
        with plimsoll.Client(self.fake.url, "k") as c:
            self.assertFalse(c.closed)
            self.assertEqual(c.describe().provider, "wasm")
        self.assertTrue(c.closed)
        for make in (c.describe, c.list_sessions, lambda: c.get_session(SESSION_ID),
                     lambda: c.run_snippet("1"), lambda: c.run_stream({"snippet": {}})):
            with self.assertRaises(RuntimeError):
                make()
        c.close()  # again: nothing
        self.assertEqual(len(self.fake.received), 1)
        # an exception inside goes through, the client closed all the same
        with self.assertRaises(KeyError):
            with plimsoll.Client(self.fake.url, "k") as c2:
                raise KeyError("x")
        self.assertTrue(c2.closed)
        # its sessions are the daemon's: closing the client closes none
        self.fake.answer(200, {"session_id": SESSION_ID})
        with plimsoll.Client(self.fake.url, "k") as c3:
            c3.open_session()
        self.assertEqual([self.path(i) for i in range(len(self.fake.received))],
                         ["Describe", "OpenSession"])


class AsyncSessionCalls(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = plimsoll.AsyncClient(self.fake.url, "plk_test")

    def path(self, i: int = -1) -> str:
        return self.fake.received[i]["path"].rsplit("/", 1)[1]

    async def test_what_is_sent_and_the_typed_answers(self) -> None:
        sync = plimsoll.Client(self.fake.url, "plk_test")
        for method in ("list", "get", "extend"):
            with self.subTest(method):
                answer = {"sessions": [session_info()]} if method == "list" else session_info()
                self.fake.answer(200, answer)
                self.fake.answer(200, answer)
                want = call(sync, method)
                got = await aio_call(self.client, method)
                self.assertEqual(got, want)
                self.assertEqual(self.fake.received[-1]["body"],
                                 self.fake.received[-2]["body"])
                self.assertEqual(self.fake.received[-1]["path"],
                                 self.fake.received[-2]["path"])
        self.fake.answer(200, session_info())
        info = await self.client.get_session(SESSION_ID)
        self.assertEqual(info.created_time,
                         datetime.datetime(2026, 11, 30, 1, 2, 3, 123456, tzinfo=UTC))

    async def test_arguments_refused_before_anything_is_sent(self) -> None:
        for bad, cls in BAD_IDS:
            with self.subTest(session_id=bad):
                with self.assertRaises(cls):
                    await self.client.get_session(bad)
                with self.assertRaises(cls):
                    await self.client.extend_session(bad, 60)
                with self.assertRaises(cls):
                    await self.client.connect_session(bad)
        for bad, cls in BAD_ENDS_IN:
            with self.subTest(ends_in_s=bad):
                with self.assertRaises(cls):
                    await self.client.extend_session(SESSION_ID, bad)
        self.assertEqual(self.fake.received, [])

    async def test_malformed_answers_are_protocol_errors(self) -> None:
        for name, method, answer in MALFORMED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                with self.assertRaises(errors.ProtocolError) as cm:
                    await aio_call(self.client, method)
                self.assertEqual((cm.exception.code, cm.exception.dispatched),
                                 ("unknown", True))
        for name, method, answer in ALLOWED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                await aio_call(self.client, method)

    async def test_connect_session(self) -> None:
        head = "cd" * 32
        self.fake.answer(200, session_info(previous_digest=head))
        s = await self.client.connect_session(SESSION_ID)
        self.assertIsInstance(s, plimsoll.AsyncSession)
        self.assertEqual((s.chain.head, len(s.chain)), (head, 0))
        c1 = {"cell": {"language": "python", "code": "1"}}
        self.fake.answer(200, run_answer(c1, "1\n", previous=head))
        r = await s.cell("1", "python")
        self.assertEqual(s.chain.head, r.record.digest)
        self.fake.answer(200, session_info(calls_waiting=1))
        async with s._lock:  # info() waits for none of the object's calls
            self.assertEqual((await s.info()).calls_waiting, 1)
        self.fake.answer(200, session_info())
        await s.extend(45)
        self.assertEqual(self.fake.sent(), {"session_id": SESSION_ID, "ends_in_s": 45})
        self.fake.answer(200, session_info(state="ended", ended_reason="closed"))
        with self.assertRaises(errors.SessionEndedError) as cm:
            await self.client.connect_session(SESSION_ID)
        self.assertEqual(cm.exception.ended_reason, "closed")
        self.assertEqual([self.path(i) for i in range(len(self.fake.received))],
                         ["GetSession", "RunCell", "GetSession", "ExtendSession",
                          "GetSession"])

    async def test_the_client_as_a_context_manager(self) -> None:
        self.fake.answer(200, {"provider": "wasm"})
        async with plimsoll.AsyncClient(self.fake.url, "k") as c:
            self.assertEqual((await c.describe()).provider, "wasm")
        self.assertTrue(c.closed)
        with self.assertRaises(RuntimeError):
            await c.list_sessions()
        with self.assertRaises(RuntimeError):
            await c.run_stream({"snippet": {"language": "javascript", "code": "1"}})
        await c.close()
        self.assertEqual(len(self.fake.received), 1)
        self.assertEqual(json.loads(self.fake.received[0]["body"]), {})


if __name__ == "__main__":
    unittest.main()
