# SPDX-License-Identifier: Apache-2.0
"""Sessions behind a proxy (README.md, "Sessions behind a proxy (fleets)"): a
session object sends its route as the Plimsoll-Route header with every
later call, the client's calls by id take ``route=``, a route is checked
before anything is sent, and WRONG_ROUTE is WrongRouteError. Against a
fake daemon (both clients), then the harness's session daemon
(PLIMSOLL_INSTANCE=clients-docker; skipped without it)."""
from __future__ import annotations

import os
import sys
import unittest
from typing import Any, Callable, List, Optional, Tuple

import plimsoll
from plimsoll import errors

from .support import SESSION_ID, FakeDaemon, connect_error, env, session_info

HEADER = "Plimsoll-Route"
#: Every call a session object makes, in the order :func:`every_call` makes them.
SESSION_METHODS = ["RunInSession", "RunCell", "RunCellStream", "WriteFiles", "ReadFile",
                   "ListFiles", "GetSession", "ExtendSession", "CloseSession"]
BAD_ROUTES = ["has space", "a/b", "x\r\nInjected: 1", "r" * 64, "\u00e9", "a:b"]


def responder(route: Optional[str]) -> Callable[[str, bytes], Tuple[int, Any]]:
    """OpenSession answers ``route`` (none when None), GetSession and
    ExtendSession a SessionInfo of it, every other call NOT_FOUND: what is
    sent is what these tests look at."""
    def respond(path: str, body: bytes) -> Tuple[int, Any]:
        method = path.rsplit("/", 1)[-1]
        extra = {} if route is None else {"route": route}
        if method == "OpenSession":
            return 200, dict({"session_id": SESSION_ID}, **extra)
        if method in ("GetSession", "ExtendSession"):
            return 200, session_info(**extra)
        return connect_error("NOT_FOUND", "not_found", status=404)
    return respond


def every_call(s: plimsoll.Session) -> None:
    """Each call of ``s`` once; their errors are the fake's NOT_FOUND."""
    for f in (lambda: s.run_snippet("1", language="python"),
              lambda: s.cell("1", "python"),
              lambda: s.cell_stream("1", "python"),
              lambda: s.write_text("a.txt", "a"),
              lambda: s.read_file("a.txt"),
              lambda: s.list_files()):
        try:
            f()
        except errors.NotFoundError:
            pass
    s.info()
    s.extend(60)
    try:
        s.close()
    except errors.NotFoundError:
        pass


class Received:
    """The fake daemon's view, shared by the sync and async cases."""
    fake: FakeDaemon

    def routes(self, start: int = 0) -> List[Tuple[str, Optional[str]]]:
        """(method, the header sent or None) of each call received from ``start``."""
        return [(r["path"].rsplit("/", 1)[-1], r["headers"].get(HEADER))
                for r in self.fake.received[start:]]


class Routed(Received, unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = plimsoll.Client(self.fake.url, "plk_test")

    def test_a_session_sends_its_route_with_every_later_call(self) -> None:
        self.fake.respond = responder("daemon-1.eu_west")
        s = self.client.open_session(languages=["python"])
        self.assertEqual(s.route, "daemon-1.eu_west")
        self.assertIn("daemon-1.eu_west", repr(s))
        with self.assertRaises(AttributeError):
            s.route = "elsewhere"  # type: ignore[misc]
        every_call(s)
        got = self.routes()
        self.assertEqual(got[0], ("OpenSession", None))  # the open goes anywhere
        self.assertEqual(got[1:], [(m, "daemon-1.eu_west") for m in SESSION_METHODS])

    def test_a_daemon_without_routes_gets_no_header(self) -> None:
        self.fake.respond = responder(None)
        s = self.client.open_session()
        self.assertEqual(s.route, "")
        every_call(s)
        self.assertEqual(self.routes(1), [(m, None) for m in SESSION_METHODS])
        self.assertEqual(self.client.get_session(SESSION_ID).route, "")

    def test_the_calls_by_id_take_a_route(self) -> None:
        self.fake.respond = responder("d1")
        c, r = self.client, "other-daemon"
        self.assertEqual(c.get_session(SESSION_ID, route=r).route, "d1")
        c.extend_session(SESSION_ID, 60, route=r)
        for f in (lambda: c.run_in_session(SESSION_ID, {"snippet": {"code": "1"}}, route=r),
                  lambda: c.run_cell(SESSION_ID, {"language": "python", "code": "1"}, route=r),
                  lambda: c.run_cell_stream(SESSION_ID, {"language": "python", "code": "1"},
                                            route=r),
                  lambda: c.write_files(SESSION_ID, {"a": "a"}, route=r),
                  lambda: c.read_file(SESSION_ID, "a", route=r),
                  lambda: c.list_files(SESSION_ID, route=r),
                  lambda: c.close_session(SESSION_ID, route=r)):
            with self.assertRaises(errors.NotFoundError):
                f()
        self.assertEqual(self.routes(), [(m, r) for m in (
            "GetSession", "ExtendSession", "RunInSession", "RunCell", "RunCellStream",
            "WriteFiles", "ReadFile", "ListFiles", "CloseSession")])
        # None or "": no header.
        c.get_session(SESSION_ID)
        c.get_session(SESSION_ID, route="")
        self.assertEqual(self.routes(9), [("GetSession", None)] * 2)

    def test_connect_session_takes_a_route(self) -> None:
        self.fake.respond = responder("answered")
        s = self.client.connect_session(SESSION_ID, route="given")
        self.assertEqual(s.route, "given")
        s.info()
        self.assertEqual(self.routes(), [("GetSession", "given")] * 2)
        # Without one, the object takes the route GetSession answers.
        s = self.client.connect_session(SESSION_ID)
        self.assertEqual(s.route, "answered")
        s.info()
        self.assertEqual(self.routes(2), [("GetSession", None), ("GetSession", "answered")])

    def test_an_invalid_route_is_refused_before_anything_is_sent(self) -> None:
        self.fake.respond = responder("d1")
        c = self.client
        for bad in BAD_ROUTES + [7, b"d1"]:
            with self.subTest(bad=bad):
                kind = ValueError if isinstance(bad, str) else TypeError
                for f in (lambda: c.get_session(SESSION_ID, route=bad),
                          lambda: c.connect_session(SESSION_ID, route=bad),
                          lambda: c.run_cell(SESSION_ID, {"language": "python", "code": "1"},
                                             route=bad),
                          lambda: c.run_cell_stream(SESSION_ID,
                                                    {"language": "python", "code": "1"},
                                                    route=bad),
                          lambda: c.write_files(SESSION_ID, {"a": "a"}, route=bad),
                          lambda: c.close_session(SESSION_ID, route=bad),
                          lambda: plimsoll.Session(c, SESSION_ID, route=bad)):
                    with self.assertRaises(kind) as cm:
                        f()
                    self.assertIn("route", str(cm.exception))
        self.assertEqual(self.fake.received, [])
        c.get_session(SESSION_ID, route="r" * 63)  # the longest is fine

    def test_a_route_the_daemon_answers_is_checked(self) -> None:
        for bad in ("bad route", "r" * 64, 7):
            with self.subTest(bad=bad):
                self.fake.respond = responder(bad)  # type: ignore[arg-type]
                with self.assertRaises(errors.ProtocolError):
                    self.client.open_session()
                with self.assertRaises(errors.ProtocolError):
                    self.client.get_session(SESSION_ID)
                with self.assertRaises(errors.ProtocolError):
                    self.client.extend_session(SESSION_ID, 60)

    def test_wrong_route_is_typed_and_never_retried(self) -> None:
        self.fake.respond = lambda path, body: connect_error(
            "WRONG_ROUTE", "unavailable", "the call names route 'gone'", status=503)
        c = plimsoll.Client(self.fake.url, "plk_test", retry=plimsoll.RetryPolicy())
        s = plimsoll.Session(c, SESSION_ID, route="gone")
        with self.assertRaises(plimsoll.WrongRouteError) as cm:
            s.cell("1", "python")
        e = cm.exception
        self.assertIsInstance(e, errors.RefusalError)
        self.assertEqual((e.reason, e.code, e.http_status, e.dispatched),
                         ("WRONG_ROUTE", "unavailable", 503, False))
        self.assertIn("gone", str(e))
        self.assertEqual(len(self.fake.received), 1)
        self.assertEqual(len(s.chain), 0)


class AsyncRouted(Received, unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = plimsoll.AsyncClient(self.fake.url, "plk_test")

    async def test_a_session_sends_its_route_with_every_later_call(self) -> None:
        self.fake.respond = responder("d-2")
        s = await self.client.open_session()
        self.assertEqual(s.route, "d-2")
        for f in (lambda: s.run_snippet("1", language="python"),
                  lambda: s.cell("1", "python"),
                  lambda: s.cell_stream("1", "python"),
                  lambda: s.write_text("a.txt", "a"),
                  lambda: s.read_file("a.txt"),
                  lambda: s.list_files()):
            with self.assertRaises(errors.NotFoundError):
                await f()
        await s.info()
        await s.extend(60)
        with self.assertRaises(errors.NotFoundError):
            await s.close()
        self.assertEqual(self.routes(), [("OpenSession", None)]
                         + [(m, "d-2") for m in SESSION_METHODS])

    async def test_connect_calls_by_id_and_invalid_routes(self) -> None:
        self.fake.respond = responder("answered")
        c = self.client
        for bad in BAD_ROUTES:
            with self.assertRaises(ValueError):
                await c.connect_session(SESSION_ID, route=bad)
            with self.assertRaises(ValueError):
                await c.run_cell(SESSION_ID, {"language": "python", "code": "1"}, route=bad)
        self.assertEqual(self.fake.received, [])
        s = await c.connect_session(SESSION_ID, route="given")
        self.assertEqual(s.route, "given")
        s = await c.connect_session(SESSION_ID)
        self.assertEqual(s.route, "answered")
        with self.assertRaises(errors.NotFoundError):
            await c.run_cell_stream(SESSION_ID, {"language": "python", "code": "1"},
                                    route="r.1")
        self.assertEqual(self.routes(), [("GetSession", "given"), ("GetSession", None),
                                         ("RunCellStream", "r.1")])

    async def test_wrong_route(self) -> None:
        self.fake.respond = lambda path, body: connect_error("WRONG_ROUTE", "unavailable",
                                                             status=503)
        with self.assertRaises(plimsoll.WrongRouteError) as cm:
            await self.client.get_session(SESSION_ID, route="gone")
        self.assertFalse(cm.exception.dispatched)


NO_SESSIONS = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
               "--no-sessions, or no harness): the live route tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_routes: %s\n" % NO_SESSIONS)

PRINT_X = {"language": "python", "code": "print(x)"}


class LiveRoutes(unittest.TestCase):
    """Against the harness's session daemon, PLIMSOLL_INSTANCE=clients-docker."""

    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                      env("PLIMSOLL_TEST_KEY"))
        self.route = env("PLIMSOLL_TEST_SESSION_ROUTE")

    def test_routes(self) -> None:
        c = self.client
        s = c.open_session(languages=["python"])
        self.addCleanup(s.__exit__, None, None, None)
        self.assertEqual(s.route, self.route)
        # Its later calls carry it, and the daemon takes them.
        self.assertEqual(s.cell("x = 41", "python").exit_code, 0)
        s.write_text("r.txt", "r")
        info = s.info()
        self.assertEqual((info.route, info.calls), (self.route, 2))
        self.assertIn(self.route, [i.route for i in c.list_sessions()])

        # Elsewhere: the daemon reached is not the session's; nothing runs.
        with self.assertRaises(plimsoll.WrongRouteError) as cm:
            c.run_cell(s.session_id, {"language": "python", "code": "x = 0"},
                       route="elsewhere")
        e = cm.exception
        self.assertEqual((e.reason, e.code, e.http_status, e.dispatched),
                         ("WRONG_ROUTE", "unavailable", 503, False))
        with self.assertRaises(plimsoll.WrongRouteError):
            c.connect_session(s.session_id, route="elsewhere")
        with self.assertRaises(plimsoll.WrongRouteError):
            c.write_files(s.session_id, {"r.txt": "no"}, route="elsewhere")
        info = c.get_session(s.session_id, route=self.route)
        self.assertEqual((info.calls, info.previous_digest), (2, s.chain.head))

        # The right route: a working object, its chain going on.
        r = c.connect_session(s.session_id, route=self.route)
        self.assertEqual(r.route, self.route)
        self.assertEqual(r.cell("print(x + 1)", "python").stdout, "42\n")
        self.assertEqual(r.read_text("r.txt"), "r")
        self.assertEqual(c.run_cell(s.session_id, PRINT_X, route=self.route).stdout, "41\n")

        # A route no daemon may have: refused before sending.
        with self.assertRaises(ValueError):
            c.run_cell(s.session_id, PRINT_X, route="no such/route")
        self.assertEqual(r.info().calls, 5)


class AsyncLiveRoutes(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.client = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                           env("PLIMSOLL_TEST_KEY"))
        self.route = env("PLIMSOLL_TEST_SESSION_ROUTE")

    async def test_routes(self) -> None:
        c = self.client
        s = await c.open_session(languages=["python"])
        self.addAsyncCleanup(s.__aexit__, None, None, None)
        self.assertEqual(s.route, self.route)
        self.assertEqual((await s.cell("x = 41", "python")).exit_code, 0)
        with self.assertRaises(plimsoll.WrongRouteError):
            await c.connect_session(s.session_id, route="elsewhere")
        with self.assertRaises(plimsoll.WrongRouteError):
            await c.run_cell_stream(s.session_id, PRINT_X, route="elsewhere")
        r = await c.connect_session(s.session_id, route=self.route)
        self.assertEqual((await r.cell_stream("print(x + 1)", "python")).stdout, "42\n")
        self.assertEqual((await r.info()).calls, 2)


if __name__ == "__main__":
    unittest.main()
