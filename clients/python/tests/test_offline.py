# SPDX-License-Identifier: Apache-2.0
"""The client against a fake daemon: what it sends, how it maps answers to
results and errors, the tier re-check and the retry policy."""
from __future__ import annotations

import base64
import json
import random
import unittest
from typing import List

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError

from .support import FakeDaemon, connect_error, run_answer

REASONS = {
    "INVALID_REQUEST": ("invalid_argument", 400, errors.InvalidRequestError),
    "UNAUTHENTICATED": ("unauthenticated", 401, errors.UnauthenticatedError),
    "DISABLED": ("failed_precondition", 400, errors.DisabledError),
    "INSUFFICIENT_ISOLATION": ("failed_precondition", 400, errors.InsufficientIsolationError),
    "UNSUPPORTED": ("unimplemented", 501, errors.UnsupportedError),
    "CALLER_NOT_ALLOWED": ("permission_denied", 403, errors.CallerNotAllowedError),
    "NOT_READY": ("unavailable", 503, errors.NotReadyError),
    "SHUTTING_DOWN": ("unavailable", 503, errors.ShuttingDownError),
    "RATE_LIMITED": ("resource_exhausted", 429, errors.RateLimitedError),
    "AT_CAPACITY": ("resource_exhausted", 429, errors.AtCapacityError),
    "SESSION_ENDED": ("failed_precondition", 400, errors.SessionEndedError),
    "NOT_FOUND": ("not_found", 404, errors.NotFoundError),
}


def error_info_protobuf(reason: str, metadata: dict) -> str:
    def ld(num: int, data: bytes) -> bytes:
        assert len(data) < 128
        return bytes([num << 3 | 2, len(data)]) + data
    msg = ld(1, reason.encode()) + ld(2, b"plimsoll")
    for k, v in metadata.items():
        msg += ld(3, ld(1, k.encode()) + ld(2, v.encode()))
    return base64.b64encode(msg).decode().rstrip("=")


class Sleeps(plimsoll.Client):
    """A client that records its retry sleeps instead of sleeping."""

    def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*a, **kw)
        self.slept: List[float] = []
        self._sleep = self.slept.append


class Offline(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = Sleeps(self.fake.url, "plk_test")

    def test_sends_proto_names_no_nulls_and_the_headers(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1", "stdin": ""}}
        self.fake.answer(200, run_answer(req))
        r = self.client.run_snippet("1", stdin="")
        got = self.fake.received[0]
        self.assertEqual(got["path"], "/plimsoll.v1.SandboxService/Run")
        self.assertEqual(got["headers"]["Content-Type"], "application/json")
        self.assertEqual(got["headers"]["Connect-Protocol-Version"], "1")
        self.assertEqual(got["headers"]["Authorization"], "Bearer plk_test")
        self.assertEqual(got["body"], plimsoll.canonical(req).encode())
        self.assertEqual(r.stdout, "ok\n")
        self.assertEqual(r.record.digest, r.raw["record"]["digest"])

    def test_request_shapes(self) -> None:
        p = {"timeout_ms": 900, "project": {
            "files": [{"path": "a.txt", "content": "x"},
                      {"path": "b.bin", "content_base64": base64.b64encode(b"\xff").decode()}],
            "steps": [{"argv": ["cat", "a.txt"]}, {"name": "two", "argv": ["true"]}]}}
        self.fake.answer(200, run_answer(p))
        self.client.run_project({"a.txt": "x", "b.bin": b"\xff"},
                                [["cat", "a.txt"], {"name": "two", "argv": ["true"]}],
                                timeout_ms=900)
        self.assertEqual(self.fake.sent(), p)
        m = {"module": {"wasm_base64": base64.b64encode(b"\0asm").decode(), "args": ["x"]}}
        self.fake.answer(200, run_answer(m))
        self.client.run_module(b"\0asm", ["x"])
        self.assertEqual(self.fake.sent(), m)
        cell = {"cell": {"language": "python", "code": "1"}, "timeout_ms": 5}
        self.fake.answer(200, run_answer(cell))
        self.client.run_cell("s1", cell["cell"], timeout_ms=5)
        self.assertEqual(self.fake.sent(), dict(cell, session_id="s1"))
        raw = {"timeout_ms": None, "snippet": {"language": "javascript", "code": "1",
                                               "stdin": None}}
        self.fake.answer(200, run_answer({"snippet": {"language": "javascript", "code": "1"}}))
        self.client.run(raw)  # nulls are never sent, so the record still checks
        self.assertEqual(self.fake.sent(), {"snippet": {"language": "javascript", "code": "1"}})
        with self.assertRaises(ValueError):
            self.client.run_snippet("1", timeout_ms=1.5)  # type: ignore[arg-type]
        self.assertEqual(len(self.fake.received), 4)

    def test_every_reason_has_its_type(self) -> None:
        for reason, (code, status, cls) in REASONS.items():
            with self.subTest(reason):
                self.fake.answer(*connect_error(reason, code, "why: " + reason, status,
                                                isolation="process"))
                with self.assertRaises(cls) as cm:
                    self.client.describe()
                e = cm.exception
                self.assertIsInstance(e, errors.RefusalError)
                self.assertEqual((e.reason, e.code, e.message, e.dispatched, e.http_status),
                                 (reason, code, "why: " + reason, False, status))
                self.assertEqual(e.metadata["isolation"], "process")

    def test_unknown_reason_and_protobuf_only_detail(self) -> None:
        self.fake.answer(*connect_error("SOMETHING_NEW", "aborted"))
        with self.assertRaises(errors.RefusalError) as cm:
            self.client.describe()
        self.assertIs(type(cm.exception), errors.RefusalError)
        self.assertEqual(cm.exception.reason, "SOMETHING_NEW")
        value = error_info_protobuf("SESSION_ENDED", {"dispatched": "false",
                                                      "ended_reason": "closed"})
        self.fake.answer(400, {"code": "failed_precondition", "message": "session ended: closed",
                               "details": [{"type": "google.rpc.ErrorInfo", "value": value}]})
        with self.assertRaises(errors.SessionEndedError) as se:
            self.client.close_session("x")
        self.assertEqual(se.exception.ended_reason, "closed")
        self.assertFalse(se.exception.dispatched)

    def test_session_ended_falls_back_to_the_message(self) -> None:
        self.fake.answer(*connect_error("SESSION_ENDED", "failed_precondition",
                                        "the session's lifetime ran out"))
        with self.assertRaises(errors.SessionEndedError) as cm:
            self.client.close_session("x")
        self.assertEqual(cm.exception.ended_reason, "the session's lifetime ran out")

    def test_infrastructure_channel(self) -> None:
        self.fake.answer(*connect_error("INTERNAL", "internal", "boom", 500, dispatched="true"))
        self.fake.answer(502, b"<html>bad gateway</html>")
        self.fake.answer(200, b"not json")
        self.fake.answer(200, b"[1]")
        self.fake.answer(500, {"code": "internal", "message": "no details"})
        for protocol in (False, True, True, True, False):
            with self.assertRaises(errors.InfrastructureError) as cm:
                self.client.run_snippet("1")
            self.assertTrue(cm.exception.dispatched)
            self.assertEqual(isinstance(cm.exception, errors.ProtocolError), protocol)
        self.assertEqual(len(self.fake.received), 5)

    def test_nonzero_exit_is_a_result(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "throw 1"}}
        self.fake.answer(200, run_answer(req, exit_code=1, stdout=""))
        self.assertEqual(self.client.run_snippet("throw 1").exit_code, 1)

    def test_record_checks(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1"}}
        a = run_answer(req)
        del a["record"]
        self.fake.answer(200, a)
        with self.assertRaises(ChainError) as cm:
            self.client.run_snippet("1")
        self.assertEqual(cm.exception.broken, "version")
        b = run_answer(req)
        b["stdout"] = "changed on the way\n"
        self.fake.answer(200, b)
        with self.assertRaises(ChainError) as cm:
            self.client.run_snippet("1")
        self.assertEqual(cm.exception.broken, "response_sha256")
        self.fake.answer(200, b)
        lax = plimsoll.Client(self.fake.url, "k", verify_records=False)
        self.assertEqual(lax.run_snippet("1").stdout, "changed on the way\n")

    def test_tier_recheck_before_the_record_and_never_retried(self) -> None:
        req = {"minimum_isolation": "process",
               "snippet": {"language": "javascript", "code": "1"}}
        for answer_tier, record_tier in (("none", "process"), ("process", "none"),
                                         ("vm-ish", "process")):
            with self.subTest(answer=answer_tier, record=record_tier):
                a = run_answer(req, isolation=record_tier)
                a["isolation"] = answer_tier  # also breaks response_sha256
                self.fake.answer(200, a)
                c = Sleeps(self.fake.url, "k", retry=plimsoll.RetryPolicy())
                before = len(self.fake.received)
                with self.assertRaises(errors.IsolationEvidenceMismatchError) as cm:
                    c.run_snippet("1", minimum_isolation="process")
                e = cm.exception
                self.assertEqual((e.code, e.dispatched, e.floor), ("data_loss", True, "process"))
                self.assertEqual(len(self.fake.received), before + 1)
                self.assertEqual(c.slept, [])
        bare = run_answer(req)
        del bare["record"]  # no record: its tier is unknown, below every floor
        self.fake.answer(200, bare)
        with self.assertRaises(errors.IsolationEvidenceMismatchError):
            self.client.run(req)
        ok = run_answer(req, isolation="kernel")
        self.fake.answer(200, ok)
        self.assertEqual(self.client.run(req).isolation, "kernel")

    def test_retry_only_capacity_and_rate(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1"}}
        c = Sleeps(self.fake.url, "k", retry=plimsoll.RetryPolicy(max_attempts=4, base_ms=100,
                                                                   cap_ms=300))
        self.fake.answer(*connect_error("AT_CAPACITY", "resource_exhausted", status=429))
        self.fake.answer(*connect_error("RATE_LIMITED", "resource_exhausted", status=429))
        self.fake.answer(*connect_error("AT_CAPACITY", "resource_exhausted", status=429))
        self.fake.answer(200, run_answer(req))
        self.assertEqual(c.run_snippet("1").exit_code, 0)
        self.assertEqual(len(c.slept), 3)
        for n, s in enumerate(c.slept):
            d = min(300, 100 * 2 ** n) / 1000.0
            self.assertTrue(d / 2 <= s <= d, (n, s))
        # max_attempts in all, then the refusal
        c.slept.clear()
        for _ in range(4):
            self.fake.answer(*connect_error("RATE_LIMITED", "resource_exhausted", status=429))
        with self.assertRaises(errors.RateLimitedError):
            c.run_snippet("1")
        self.assertEqual(len(c.slept), 3)
        # nothing else is retried
        for reason in ("NOT_READY", "INTERNAL", "INVALID_REQUEST"):
            with self.subTest(reason):
                c.slept.clear()
                self.fake.answer(*connect_error(reason, "unavailable", status=503))
                self.fake.answer(200, run_answer(req))
                with self.assertRaises(errors.PlimsollError):
                    c.run_snippet("1")
                self.assertEqual(c.slept, [])
                self.fake.answers.clear()

    def test_equal_jitter_bounds(self) -> None:
        p = plimsoll.RetryPolicy()
        self.assertEqual((p.max_attempts, p.base_ms, p.cap_ms), (4, 100, 2000))
        rng = random.Random(7)
        for n in range(8):
            d = min(2000, 100 * 2 ** n)
            self.assertEqual(p.delay_ms(n, lambda a, b: a), d / 2)
            self.assertEqual(p.delay_ms(n, lambda a, b: b), d)
            self.assertTrue(d / 2 <= p.delay_ms(n, rng.uniform) <= d)
        with self.assertRaises(ValueError):
            plimsoll.RetryPolicy(max_attempts=0)

    def test_session_object_keeps_its_chain(self) -> None:
        self.fake.answer(200, {"session_id": "s" * 64})
        sess = self.client.open_session(["python"])
        self.assertEqual(self.fake.sent(), {"languages": ["python"]})
        c1 = {"cell": {"language": "python", "code": "x = 41"}}
        self.fake.answer(200, run_answer(c1))
        sess.cell("x = 41", "python")
        c2 = {"cell": {"language": "python", "code": "x + 1"}, "timeout_ms": 100}
        first = sess.chain.head
        self.fake.answer(200, run_answer(c2, "42\n", previous=first))
        self.assertEqual(sess.cell("x + 1", "python", timeout_ms=100).stdout, "42\n")
        self.fake.answer(200, run_answer(c2, "42\n", previous=first))  # replayed
        with self.assertRaises(ChainError) as cm:
            sess.cell("x + 1", "python", timeout_ms=100)
        self.assertEqual((cm.exception.index, cm.exception.broken), (2, "previous_digest"))
        self.assertEqual(len(sess.chain), 2)
        self.fake.answer(200, {})
        with sess:
            pass
        self.assertTrue(sess.closed)
        self.assertEqual(json.loads(self.fake.received[-1]["body"]), {"session_id": "s" * 64})
        sess.close()  # a second close sends nothing
        self.assertEqual(self.fake.received[-1]["path"],
                         "/plimsoll.v1.SandboxService/CloseSession")
        self.assertEqual(len(self.fake.received), 5)

    def test_unix_socket_and_path_prefix(self) -> None:
        import http.server
        import os
        import socketserver
        import tempfile
        import threading

        seen: List[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def address_string(self) -> str:
                return "unix"

            def do_POST(self) -> None:
                seen.append(self.path)
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps({"provider": "wasm", "isolation": "process"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        path = os.path.join(tempfile.mkdtemp(), "plimsoll.sock")
        srv = Server(path, Handler)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        self.assertEqual(plimsoll.Client("unix:" + path, "k").describe().isolation, "process")
        self.assertEqual(seen, ["/plimsoll.v1.SandboxService/Describe"])
        self.fake.answer(200, {"provider": "wasm"})
        plimsoll.Client(self.fake.url + "/gw/", "k").describe()
        self.assertEqual(self.fake.received[-1]["path"], "/gw/plimsoll.v1.SandboxService/Describe")

    def test_transport_failure_and_timeout(self) -> None:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # accepts, never answers
        self.addCleanup(s.close)
        c = plimsoll.Client("http://127.0.0.1:%d" % s.getsockname()[1], "k", timeout=0.3)
        with self.assertRaises(errors.InfrastructureError) as cm:
            c.describe()
        self.assertTrue(cm.exception.dispatched)
        self.assertEqual(cm.exception.code, "deadline_exceeded")
        with self.assertRaises(ValueError):
            plimsoll.Client("ftp://x", "k")


if __name__ == "__main__":
    unittest.main()
