# SPDX-License-Identifier: Apache-2.0
"""The asyncio client against fake daemons: it sends what the synchronous
client sends, makes the same results and errors of the same answers, and
runs its calls at once."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import tempfile
import threading
import unittest
from typing import Any, List, Tuple

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError

from .support import FakeDaemon, connect_error, run_answer, vectors


class Sleeps(plimsoll.AsyncClient):
    """A client that records its retry sleeps instead of sleeping."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.slept: List[float] = []

        async def sleep(s: float) -> None:
            self.slept.append(s)
        self._sleep = sleep


def error_info_protobuf(reason: str, metadata: dict) -> str:
    def ld(num: int, data: bytes) -> bytes:
        return bytes([num << 3 | 2, len(data)]) + data
    msg = ld(1, reason.encode()) + ld(2, b"plimsoll")
    for k, v in metadata.items():
        msg += ld(3, ld(1, k.encode()) + ld(2, v.encode()))
    return base64.b64encode(msg).decode().rstrip("=")


class RawServer:
    """A TCP server on the test's loop that answers each connection with
    ``handler(reader, writer)``."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.server: Any = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handler, "127.0.0.1", 0)
        return "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()
        await self.server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> Tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(n)


class AsyncOffline(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = Sleeps(self.fake.url, "plk_test")

    async def test_sends_what_the_sync_client_sends(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1", "stdin": ""}}
        sync = plimsoll.Client(self.fake.url, "plk_test")
        for _ in range(2):
            self.fake.answer(200, run_answer(req))
        sync.run_snippet("1", stdin="")
        r = await self.client.run_snippet("1", stdin="")
        a, b = self.fake.received
        self.assertEqual(b["path"], "/plimsoll.v1.SandboxService/Run")
        self.assertEqual(a["path"], b["path"])
        self.assertEqual(a["body"], b["body"])
        self.assertEqual(b["body"], plimsoll.canonical(req).encode())
        for h in ("Content-Type", "Connect-Protocol-Version", "Authorization", "Accept",
                  "User-Agent", "Content-Length", "Host"):
            self.assertEqual(a["headers"][h], b["headers"][h], h)
        self.assertEqual(b["headers"]["Authorization"], "Bearer plk_test")
        self.assertEqual((r.stdout, r.record.digest if r.record else None),
                         ("ok\n", r.raw["record"]["digest"]))

    async def test_request_shapes(self) -> None:
        p = {"timeout_ms": 900, "project": {
            "files": [{"path": "a.txt", "content": "x"},
                      {"path": "b.bin", "content_base64": base64.b64encode(b"\xff").decode()}],
            "steps": [{"argv": ["cat", "a.txt"]}, {"name": "two", "argv": ["true"]}]}}
        self.fake.answer(200, run_answer(p))
        await self.client.run_project({"a.txt": "x", "b.bin": b"\xff"},
                                      [["cat", "a.txt"], {"name": "two", "argv": ["true"]}],
                                      timeout_ms=900)
        self.assertEqual(self.fake.sent(), p)
        m = {"module": {"wasm_base64": base64.b64encode(b"\0asm").decode(), "args": ["x"]}}
        self.fake.answer(200, run_answer(m))
        await self.client.run_module(b"\0asm", ["x"])
        self.assertEqual(self.fake.sent(), m)
        cell = {"cell": {"language": "python", "code": "1"}, "timeout_ms": 5}
        self.fake.answer(200, run_answer(cell))
        await self.client.run_cell("s1", cell["cell"], timeout_ms=5)
        self.assertEqual(self.fake.sent(), dict(cell, session_id="s1"))
        self.fake.answer(200, run_answer({"snippet": {"language": "javascript", "code": "1"}}))
        await self.client.run({"timeout_ms": None,
                               "snippet": {"language": "javascript", "code": "1", "stdin": None}})
        self.assertEqual(self.fake.sent(), {"snippet": {"language": "javascript", "code": "1"}})
        with self.assertRaises(ValueError):
            await self.client.run_snippet("1", timeout_ms=1.5)  # type: ignore[arg-type]
        self.assertEqual(len(self.fake.received), 4)

    async def test_every_reason_has_its_type(self) -> None:
        for entry in vectors("reasons.json")["reasons"]:
            reason = entry["reason"]
            with self.subTest(reason):
                self.fake.answer(*connect_error(reason, entry["code"], "why: " + reason,
                                                entry["http_status"], isolation="process",
                                                dispatched=str(entry["dispatched"]).lower()))
                with self.assertRaises(errors.PlimsollError) as cm:
                    await self.client.describe()
                e = cm.exception
                want = (errors.refusal_class(reason) if entry["channel"] == "refusal"
                        else errors.InfrastructureError)
                self.assertIs(type(e), want)
                self.assertEqual((e.reason, e.code, e.message, e.dispatched, e.http_status),
                                 (reason, entry["code"], "why: " + reason, entry["dispatched"],
                                  entry["http_status"]))
                self.assertEqual(e.metadata["isolation"], "process")

    async def test_unknown_reason_protobuf_detail_and_infrastructure(self) -> None:
        self.fake.answer(*connect_error("SOMETHING_NEW", "aborted"))
        with self.assertRaises(errors.RefusalError) as cm:
            await self.client.describe()
        self.assertIs(type(cm.exception), errors.RefusalError)
        value = error_info_protobuf("SESSION_ENDED", {"dispatched": "false",
                                                      "ended_reason": "closed"})
        self.fake.answer(400, {"code": "failed_precondition", "message": "session ended: closed",
                               "details": [{"type": "google.rpc.ErrorInfo", "value": value}]})
        with self.assertRaises(errors.SessionEndedError) as se:
            await self.client.close_session("x")
        self.assertEqual(se.exception.ended_reason, "closed")
        self.fake.answer(*connect_error("INTERNAL", "internal", "boom", 500, dispatched="true"))
        self.fake.answer(502, b"<html>bad gateway</html>")
        self.fake.answer(200, b"not json")
        self.fake.answer(200, b"[1]")
        self.fake.answer(500, {"code": "internal", "message": "no details"})
        for protocol in (False, True, True, True, False):
            with self.assertRaises(errors.InfrastructureError) as cm2:
                await self.client.run_snippet("1")
            self.assertTrue(cm2.exception.dispatched)
            self.assertEqual(isinstance(cm2.exception, errors.ProtocolError), protocol)

    async def test_nonzero_exit_and_record_checks(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1"}}
        self.fake.answer(200, run_answer(req, exit_code=1, stdout=""))
        self.assertEqual((await self.client.run_snippet("1")).exit_code, 1)
        a = run_answer(req)
        del a["record"]
        self.fake.answer(200, a)
        with self.assertRaises(ChainError) as cm:
            await self.client.run_snippet("1")
        self.assertEqual(cm.exception.broken, "version")
        b = run_answer(req)
        b["stdout"] = "changed on the way\n"
        self.fake.answer(200, b)
        with self.assertRaises(ChainError) as cm:
            await self.client.run_snippet("1")
        self.assertEqual(cm.exception.broken, "response_sha256")
        self.fake.answer(200, b)
        lax = plimsoll.AsyncClient(self.fake.url, "k", verify_records=False)
        self.assertEqual((await lax.run_snippet("1")).stdout, "changed on the way\n")

    async def test_tier_recheck_never_retried(self) -> None:
        req = {"minimum_isolation": "process",
               "snippet": {"language": "javascript", "code": "1"}}
        a = run_answer(req, isolation="process")
        a["isolation"] = "none"
        self.fake.answer(200, a)
        c = Sleeps(self.fake.url, "k", retry=plimsoll.RetryPolicy())
        with self.assertRaises(errors.IsolationEvidenceMismatchError) as cm:
            await c.run_snippet("1", minimum_isolation="process")
        self.assertEqual((cm.exception.code, cm.exception.dispatched, cm.exception.isolation),
                         ("data_loss", True, "none"))
        self.assertEqual((len(self.fake.received), c.slept), (1, []))
        self.fake.answer(200, run_answer(req, isolation="kernel"))
        self.assertEqual((await self.client.run(req)).isolation, "kernel")

    async def test_retry_only_capacity_and_rate(self) -> None:
        req = {"snippet": {"language": "javascript", "code": "1"}}
        c = Sleeps(self.fake.url, "k", retry=plimsoll.RetryPolicy(max_attempts=4, base_ms=100,
                                                                   cap_ms=300))
        self.fake.answer(*connect_error("AT_CAPACITY", "resource_exhausted", status=429))
        self.fake.answer(*connect_error("RATE_LIMITED", "resource_exhausted", status=429))
        self.fake.answer(200, run_answer(req))
        self.assertEqual((await c.run_snippet("1")).exit_code, 0)
        self.assertEqual(len(c.slept), 2)
        for n, s in enumerate(c.slept):
            d = min(300, 100 * 2 ** n) / 1000.0
            self.assertTrue(d / 2 <= s <= d, (n, s))
        c.slept.clear()
        for _ in range(4):
            self.fake.answer(*connect_error("RATE_LIMITED", "resource_exhausted", status=429))
        with self.assertRaises(errors.RateLimitedError):
            await c.run_snippet("1")
        self.assertEqual(len(c.slept), 3)
        for reason in ("NOT_READY", "INTERNAL", "INVALID_REQUEST"):
            with self.subTest(reason):
                c.slept.clear()
                self.fake.answers.clear()
                self.fake.answer(*connect_error(reason, "unavailable", status=503))
                with self.assertRaises(errors.PlimsollError):
                    await c.run_snippet("1")
                self.assertEqual(c.slept, [])

    async def test_session_object_keeps_its_chain(self) -> None:
        self.fake.answer(200, {"session_id": "s" * 64})
        sess = await self.client.open_session(["python"], minimum_isolation="process")
        self.assertEqual(self.fake.sent(), {"languages": ["python"]})
        c1 = {"cell": {"language": "python", "code": "x = 41"}}
        self.fake.answer(200, run_answer(c1))
        await sess.cell("x = 41", "python")
        c2 = {"cell": {"language": "python", "code": "x + 1"}, "timeout_ms": 100}
        first = sess.chain.head
        self.fake.answer(200, run_answer(c2, "42\n", previous=first))
        self.assertEqual((await sess.cell("x + 1", "python", timeout_ms=100)).stdout, "42\n")
        self.fake.answer(200, run_answer(c2, "42\n", previous=first))  # replayed
        with self.assertRaises(ChainError) as cm:
            await sess.cell("x + 1", "python", timeout_ms=100)
        self.assertEqual((cm.exception.index, cm.exception.broken), (2, "previous_digest"))
        self.assertEqual(len(sess.chain), 2)
        snip = {"minimum_isolation": "process",
                "snippet": {"language": "javascript", "code": "1"}}
        self.fake.answer(200, run_answer(snip, previous=sess.chain.head))
        await sess.run({"snippet": {"language": "javascript", "code": "1"}})
        self.assertEqual(self.fake.sent()["run"], snip)  # the session's floor is sent
        self.fake.answer(200, {})
        async with sess:
            pass
        self.assertTrue(sess.closed)
        self.assertEqual(self.fake.sent(), {"session_id": "s" * 64})
        await sess.close()  # a second close sends nothing
        self.assertEqual(len(self.fake.received), 6)
        with self.assertRaises(ValueError):
            await self.client.open_session(minimum_isolation="sideways")

    async def test_runs_at_once(self) -> None:
        """Four runs through asyncio.gather are all in flight together: the
        fake answers none until four requests wait (a barrier), so calls
        made one after the other would fail."""
        n = 4
        barrier = threading.Barrier(n, timeout=30)

        def respond(path: str, body: bytes) -> Tuple[int, Any]:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return 500, b"not all at once"
            req = json.loads(body)
            return 200, run_answer(req, stdout=req["snippet"]["code"] + "\n")
        self.fake.respond = respond
        results = await asyncio.gather(*[self.client.run_snippet("r%d" % i) for i in range(n)])
        self.assertEqual([r.stdout for r in results], ["r%d\n" % i for i in range(n)])
        self.assertEqual(len(self.fake.received), n)

    async def test_unix_socket_and_path_prefix(self) -> None:
        seen: List[bytes] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head, _ = await read_request(reader)
            seen.append(head.split(b" ")[1])
            body = json.dumps({"provider": "wasm", "isolation": "process"}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            writer.close()

        path = os.path.join(tempfile.mkdtemp(), "plimsoll.sock")
        srv = await asyncio.start_unix_server(answer, path)
        self.addAsyncCleanup(srv.wait_closed)
        self.addCleanup(srv.close)
        d = await plimsoll.AsyncClient("unix:" + path, "k").describe()
        self.assertEqual(d.isolation, "process")
        self.assertEqual(seen, [b"/plimsoll.v1.SandboxService/Describe"])
        self.fake.answer(200, {"provider": "wasm"})
        await plimsoll.AsyncClient(self.fake.url + "/gw/", "k").describe()
        self.assertEqual(self.fake.received[-1]["path"], "/gw/plimsoll.v1.SandboxService/Describe")

    async def test_framing_caps_and_transport_failures(self) -> None:
        valid = json.dumps({"provider": "wasm", "isolation": "process"}).encode()
        answers = {
            # chunked, with an extension and a trailer
            "chunked": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
                       b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                       + b"%x;x=1\r\n%s\r\n" % (len(valid[:5]), valid[:5])
                       + b"%x\r\n%s\r\n" % (len(valid[5:]), valid[5:]) + b"0\r\nT: 1\r\n\r\n",
            # no length: the body runs to the close
            "close": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + valid,
            "declared-past-cap": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 1000\r\n\r\n",
            "chunked-past-cap": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                b"Transfer-Encoding: chunked\r\n\r\n" + b"40\r\n" + b" " * 64
                                + b"\r\n" + b"40\r\n" + b" " * 64 + b"\r\n0\r\n\r\n",
            "closed-mid-body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 100\r\n\r\n{\"provider\"",
            "not-http": b"SSH-2.0-OpenSSH\r\n\r\n",
        }

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head, _ = await read_request(reader)
            name = head.split(b" ")[1].split(b"/")[1].decode()
            writer.write(answers[name])
            await writer.drain()
            writer.close()

        async with RawServer(answer) as url:
            for name in ("chunked", "close"):
                with self.subTest(name):
                    d = await plimsoll.AsyncClient(url + "/" + name, "k").describe()
                    self.assertEqual(d.provider, "wasm")
            for name in ("declared-past-cap", "chunked-past-cap"):
                with self.subTest(name):
                    with self.assertRaises(errors.ProtocolError):
                        await plimsoll.AsyncClient(url + "/" + name, "k",
                                                   max_answer_bytes=100).describe()
            for name in ("closed-mid-body", "not-http"):
                with self.subTest(name):
                    with self.assertRaises(errors.InfrastructureError) as cm:
                        await plimsoll.AsyncClient(url + "/" + name, "k").describe()
                    self.assertNotIsInstance(cm.exception, errors.ProtocolError)
                    self.assertEqual((cm.exception.code, cm.exception.dispatched),
                                     ("unavailable", True))

    async def test_timeout_dead_address_and_cancel(self) -> None:
        arrived, closed = asyncio.Event(), asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            arrived.set()
            await reader.read()  # until the client hangs up
            closed.set()
            writer.close()

        async with RawServer(silent) as url:
            c = plimsoll.AsyncClient(url, "k", timeout=0.3)
            with self.assertRaises(errors.InfrastructureError) as cm:
                await c.describe()
            self.assertEqual((cm.exception.code, cm.exception.dispatched),
                             ("deadline_exceeded", True))
            await asyncio.wait_for(closed.wait(), 30)  # the cut call's connection is closed
            arrived.clear()
            closed.clear()
            task = asyncio.ensure_future(plimsoll.AsyncClient(url, "k").describe())
            await asyncio.wait_for(arrived.wait(), 30)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            await asyncio.wait_for(closed.wait(), 30)  # cancelling closes the connection
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there
        c = plimsoll.AsyncClient("http://127.0.0.1:%d" % port, "k",
                                 retry=plimsoll.RetryPolicy())
        with self.assertRaises(errors.InfrastructureError) as cm:
            await c.describe()
        self.assertEqual((cm.exception.code, cm.exception.dispatched, cm.exception.http_status),
                         ("unavailable", True, None))
        with self.assertRaises(ValueError):
            plimsoll.AsyncClient("ftp://x", "k")


if __name__ == "__main__":
    unittest.main()
