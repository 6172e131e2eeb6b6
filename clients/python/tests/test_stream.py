# SPDX-License-Identifier: Apache-2.0
"""RunStream and RunCellStream against a fake daemon that writes the bytes
each case says (Connect server streaming, application/connect+json): what
the client sends, the chunks it gives, and every way a stream can be
wrong. Each case runs through the synchronous and the asyncio client."""
from __future__ import annotations

import asyncio
import base64
import json
import socket
import struct
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple

import plimsoll
from plimsoll import errors
from plimsoll.record import Chain, ChainError

from .support import make_record, run_answer, vectors

REQUEST = {"snippet": {"language": "javascript", "code": "console.log(1)"}}
STREAM = "application/connect+json"


def env_(flags: int, payload: Any) -> bytes:
    if not isinstance(payload, bytes):
        payload = json.dumps(payload).encode()
    return struct.pack(">BI", flags, len(payload)) + payload


def out(stdout: bytes = b"", stderr: bytes = b"", step: int = 0) -> bytes:
    o: Dict[str, Any] = {}
    if stdout:
        o["stdout"] = base64.b64encode(stdout).decode()
    if stderr:
        o["stderr"] = base64.b64encode(stderr).decode()
    if step:
        o["step"] = step
    return env_(0, {"output": o})


def result(answer: Dict[str, Any]) -> bytes:
    return env_(0, {"result": answer})


def end(error: Optional[Dict[str, Any]] = None) -> bytes:
    return env_(2, {"error": error} if error else {})


def refusal(reason: str, code: str, **metadata: str) -> Dict[str, Any]:
    md = dict({"dispatched": "false", "isolation": "process"}, **metadata)
    return {"code": code, "message": "refused: " + reason,
            "details": [{"type": "google.rpc.ErrorInfo", "value": "",
                         "debug": {"reason": reason, "domain": "plimsoll", "metadata": md}}]}


def answer_with(request: Any, stdout: str, stderr: str = "",
                steps: Optional[List[Dict[str, Any]]] = None,
                isolation: str = "process") -> Dict[str, Any]:
    resp = run_answer(request, stdout=stdout, isolation=isolation)
    del resp["record"]
    resp["stderr"] = stderr
    if steps is not None:
        resp["steps"] = steps
    resp["record"] = make_record(request, resp, isolation=isolation)
    return resp


def http(body: bytes, status: int = 200, ctype: str = STREAM, framing: str = "chunked",
         pieces: int = 3) -> List[bytes]:
    """An answer's bytes: the head, then the body in ``pieces`` parts (chunked,
    with a Content-Length, or to the close)."""
    head = ["HTTP/1.1 %d X" % status, "Content-Type: " + ctype, "Connection: close"]
    if framing == "chunked":
        head.append("Transfer-Encoding: chunked")
    elif framing == "length":
        head.append("Content-Length: %d" % len(body))
    parts = [("\r\n".join(head) + "\r\n\r\n").encode()]
    step = max(1, len(body) // pieces + 1)
    for i in range(0, len(body), step):
        piece = body[i:i + step]
        parts.append(b"%x\r\n%s\r\n" % (len(piece), piece) if framing == "chunked" else piece)
    if framing == "chunked":
        parts.append(b"0\r\n\r\n")
    return parts


Respond = Callable[[str, Dict[str, str], bytes], List[Any]]


class StreamFake:
    """A local server that answers each POST with the parts ``respond``
    returns: bytes are written as they are, a float is a pause (seconds),
    None hangs up at once; then the connection is closed."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.received: List[Dict[str, Any]] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.stopping = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            head, body = data.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(":") for line in lines[1:])}
            n = int(headers.get("content-length", "0"))
            while len(body) < n:
                got = conn.recv(65536)
                if not got:
                    return
                body += got
            path = lines[0].split()[1]
            self.received.append({"path": path, "headers": headers, "body": body})
            for part in self.respond(path, headers, body):
                if part is None:
                    break
                if isinstance(part, float):
                    if self.stopping.wait(part):
                        break
                    continue
                conn.sendall(part)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.sock.close()


Outcome = Tuple[List[plimsoll.OutputChunk], Any]


class Base(unittest.TestCase):
    def serve(self, respond: Respond) -> StreamFake:
        fake = StreamFake(respond)
        self.addCleanup(fake.close)
        return fake

    def both(self, respond: Respond, call: str = "run_stream", *args: Any,
             **client_kw: Any) -> List[Outcome]:
        """The chunks and the result (or the exception) of the call through
        each client, against the same answer."""
        fake = self.serve(respond)
        client_kw.setdefault("timeout", 10.0)
        outcomes: List[Outcome] = []
        chunks: List[plimsoll.OutputChunk] = []
        sync = plimsoll.Client(fake.url, "plk_stream", **client_kw)
        try:
            outcomes.append((chunks, getattr(sync, call)(*(args or (REQUEST,)),
                                                         on_output=chunks.append)))
        except Exception as e:  # noqa: BLE001 - the outcome under test
            outcomes.append((chunks, e))
        achunks: List[plimsoll.OutputChunk] = []

        async def go() -> Any:
            c = plimsoll.AsyncClient(fake.url, "plk_stream", **client_kw)

            async def on(chunk: plimsoll.OutputChunk) -> None:
                await asyncio.sleep(0)
                achunks.append(chunk)
            return await getattr(c, call)(*(args or (REQUEST,)), on_output=on)
        try:
            outcomes.append((achunks, asyncio.run(go())))
        except Exception as e:  # noqa: BLE001
            outcomes.append((achunks, e))
        self.fake = fake
        return outcomes

    def raises(self, respond: Respond, cls: type, match: str = "",
               **client_kw: Any) -> List[Outcome]:
        outcomes = self.both(respond, **client_kw)
        for i, (_, e) in enumerate(outcomes):
            with self.subTest(client=("sync", "async")[i]):
                self.assertIsInstance(e, cls, repr(e))
                self.assertIn(match, str(e))
        return outcomes


class Streams(Base):
    def test_chunks_then_the_checked_result(self) -> None:
        ans = answer_with(REQUEST, "a\nb\n", "e\n")
        body = out(b"a\n") + out(stderr=b"e\n") + out(b"b\n") + result(ans) + end()
        for chunks, r in self.both(lambda p, h, b: http(body, pieces=7)):
            self.assertIsInstance(r, plimsoll.RunResult, repr(r))
            self.assertEqual([(c.stdout, c.stderr, c.step) for c in chunks],
                             [(b"a\n", b"", 0), (b"", b"e\n", 0), (b"b\n", b"", 0)])
            self.assertEqual((r.stdout, r.stderr), ("a\nb\n", "e\n"))
            self.assertEqual(r.record.digest, ans["record"]["digest"])  # type: ignore
        sent = self.fake.received[-1]
        self.assertEqual(sent["path"], "/plimsoll.v1.SandboxService/RunStream")
        self.assertEqual(sent["headers"]["content-type"], STREAM)
        self.assertEqual(sent["headers"]["authorization"], "Bearer plk_stream")
        self.assertEqual(sent["headers"]["connect-protocol-version"], "1")
        want = plimsoll.canonical(REQUEST).encode()
        self.assertEqual(sent["body"], struct.pack(">BI", 0, len(want)) + want)

    def test_every_framing_and_one_byte_at_a_time(self) -> None:
        ans = answer_with(REQUEST, "xy")
        body = out(b"x") + out(b"y") + result(ans) + end()
        for framing in ("chunked", "length", "close"):
            with self.subTest(framing):
                for chunks, r in self.both(
                        lambda p, h, b: http(body, framing=framing, pieces=len(body))):
                    self.assertIsInstance(r, plimsoll.RunResult, repr(r))
                    self.assertEqual(b"".join(c.stdout for c in chunks), b"xy")

    def test_a_kind_that_does_not_stream_sends_only_the_result(self) -> None:
        body = result(answer_with(REQUEST, "all\n")) + end()
        for chunks, r in self.both(lambda p, h, b: http(body)):
            self.assertEqual((chunks, r.stdout), ([], "all\n"))

    def test_project_chunks_by_step(self) -> None:
        req = {"project": {"files": [], "steps": [{"argv": ["a"]}, {"argv": ["b"]}]}}
        steps = [{"name": "step-1", "exit_code": 0, "stdout": "one\n"},
                 {"name": "step-2", "exit_code": 0, "stdout": "", "stderr": "two\n"}]
        ans = answer_with(req, "", steps=steps)
        body = out(b"one\n", step=1) + out(stderr=b"two\n", step=2) + result(ans) + end()
        for chunks, r in self.both(lambda p, h, b: http(body), "run_stream", req):
            self.assertIsInstance(r, plimsoll.RunResult, repr(r))
            self.assertEqual([c.step for c in chunks], [1, 2])
        bad = out(b"one\n", step=1) + out(b"x", step=3) + result(ans) + end()
        for _, e in self.both(lambda p, h, b: http(bad), "run_stream", req):
            self.assertIsInstance(e, errors.ProtocolError, repr(e))
            self.assertIn("step 3", str(e))
        missing = out(b"one\n", step=1) + result(ans) + end()  # step 2's stderr never came
        for _, e in self.both(lambda p, h, b: http(missing), "run_stream", req):
            self.assertIsInstance(e, errors.ProtocolError, repr(e))

    def test_exact_bytes_through_base64(self) -> None:
        req = dict(REQUEST)
        ans = run_answer(req, stdout="\ufffd")
        del ans["record"]
        ans["stdout_base64"] = base64.b64encode(b"\xff").decode()
        ans["record"] = make_record(req, ans)
        body = env_(0, {"output": {"stdout": "_w"}}) + result(ans) + end()  # URL-safe, unpadded
        for chunks, r in self.both(lambda p, h, b: http(body)):
            self.assertIsInstance(r, plimsoll.RunResult, repr(r))
            self.assertEqual(chunks[0].stdout, b"\xff")
            self.assertEqual(r.stdout_bytes(), b"\xff")

    def test_a_cell_stream_extends_the_chain(self) -> None:
        cell = {"language": "python", "code": "print(1)"}
        hashed = {"cell": cell}
        ans = run_answer(hashed, stdout="1\n")
        body = out(b"1\n") + result(ans) + end()
        fake = self.serve(lambda p, h, b: http(body))
        chain = Chain()
        got: List[plimsoll.OutputChunk] = []
        r = plimsoll.Client(fake.url, "k").run_cell_stream("s1", cell, got.append, chain=chain)
        self.assertEqual((r.stdout, len(got), chain.head), ("1\n", 1, ans["record"]["digest"]))
        self.assertEqual(fake.received[0]["path"], "/plimsoll.v1.SandboxService/RunCellStream")
        sent = fake.received[0]["body"][5:]
        self.assertEqual(json.loads(sent), {"session_id": "s1", "cell": cell})
        # the next answer must name this one: the same record again breaks the chain
        with self.assertRaises(ChainError):
            plimsoll.Client(fake.url, "k").run_cell_stream("s1", cell, chain=chain)

    def test_a_session_cell_stream(self) -> None:
        cell = {"language": "python", "code": "x"}
        ans = run_answer({"cell": cell, "timeout_ms": 900}, stdout="")
        fake = self.serve(lambda p, h, b: http(result(ans) + end()))
        s = plimsoll.Session(plimsoll.Client(fake.url, "k"), "s9")
        r = s.cell_stream("x", "python", timeout_ms=900)
        self.assertEqual((r.stdout, len(s.chain)), ("", 1))

        async def go() -> None:
            a = plimsoll.AsyncSession(plimsoll.AsyncClient(fake.url, "k"), "s9")
            r = await a.cell_stream("x", "python", timeout_ms=900)
            self.assertEqual((r.stdout, len(a.chain)), ("", 1))
        asyncio.run(go())


class Refusals(Base):
    def test_a_refusal_is_the_end_of_the_stream_alone(self) -> None:
        body = end(refusal("INSUFFICIENT_ISOLATION", "failed_precondition"))
        for chunks, e in self.raises(lambda p, h, b: http(body),
                                     errors.InsufficientIsolationError):
            self.assertEqual((e.reason, e.code, e.dispatched, e.http_status),
                             ("INSUFFICIENT_ISOLATION", "failed_precondition", False, 200))
            self.assertEqual(e.metadata["isolation"], "process")
            self.assertEqual(chunks, [])

    def test_every_reason_of_the_file(self) -> None:
        for entry in vectors("reasons.json")["reasons"]:
            reason = entry["reason"]
            md = {"dispatched": "true" if entry["dispatched"] else "false"}
            body = end(refusal(reason, entry["code"], **md))
            with self.subTest(reason):
                for _, e in self.both(lambda p, h, b: http(body)):
                    self.assertIsInstance(e, errors.PlimsollError, repr(e))
                    if entry["channel"] == "refusal":
                        self.assertIs(type(e), errors.refusal_class(reason))
                    else:
                        self.assertIs(type(e), errors.InfrastructureError)
                    self.assertEqual((e.reason, e.code, e.dispatched, e.http_status),
                                     (reason, entry["code"], entry["dispatched"], 200))

    def test_an_error_after_some_chunks(self) -> None:
        body = out(b"partial\n") + end(refusal("INTERNAL", "internal", dispatched="true"))
        for chunks, e in self.raises(lambda p, h, b: http(body), errors.InfrastructureError):
            self.assertNotIsInstance(e, errors.ProtocolError)
            self.assertEqual((e.reason, e.dispatched), ("INTERNAL", True))
            self.assertEqual([c.stdout for c in chunks], [b"partial\n"])

    def test_an_error_after_the_result(self) -> None:
        body = result(answer_with(REQUEST, "")) + end(refusal("INTERNAL", "internal",
                                                              dispatched="true"))
        self.raises(lambda p, h, b: http(body), errors.InfrastructureError, "INTERNAL")

    def test_a_non_200_text_answer_is_a_protocol_error(self) -> None:
        for status in (404, 415, 502):
            with self.subTest(status):
                for _, e in self.raises(
                        lambda p, h, b: http(b"no such method\n", status=status,
                                             ctype="text/plain", framing="length"),
                        errors.ProtocolError):
                    self.assertEqual(e.http_status, status)

    def test_a_non_200_connect_error_is_typed(self) -> None:
        body = json.dumps(refusal("UNAUTHENTICATED", "unauthenticated")).encode()
        for _, e in self.raises(lambda p, h, b: http(body, 401, "application/json", "length"),
                                errors.UnauthenticatedError):
            self.assertEqual((e.http_status, e.dispatched), (401, False))

    def test_retry_only_before_any_chunk(self) -> None:
        ans = answer_with(REQUEST, "ok\n")
        n = {"calls": 0}

        def respond(p: str, h: Dict[str, str], b: bytes) -> List[Any]:
            n["calls"] += 1
            if n["calls"] % 2:
                return http(end(refusal("AT_CAPACITY", "resource_exhausted")))
            return http(out(b"ok\n") + result(ans) + end())
        policy = plimsoll.RetryPolicy(max_attempts=2, base_ms=1, cap_ms=1)
        for chunks, r in self.both(respond, retry=policy):
            self.assertIsInstance(r, plimsoll.RunResult, repr(r))
            self.assertEqual(len(chunks), 1)
        self.assertEqual(n["calls"], 4)
        # after a chunk was given, a refusal is raised, never retried
        late = out(b"x") + end(refusal("AT_CAPACITY", "resource_exhausted"))
        self.raises(lambda p, h, b: http(late), errors.AtCapacityError, retry=policy)
        self.assertEqual(len(self.fake.received), 2)


class Broken(Base):
    def test_a_truncated_envelope(self) -> None:
        ans = result(answer_with(REQUEST, "a"))
        self.raises(lambda p, h, b: http(out(b"a") + ans[:40]), errors.ProtocolError,
                    "ends inside an envelope")

    def test_a_stream_cut_inside_an_http_chunk(self) -> None:
        for _, e in self.both(lambda p, h, b: http(out(b"a"))[:2] + [b"40\r\nabc", None]):
            self.assertIsInstance(e, errors.InfrastructureError, repr(e))
            self.assertTrue(e.dispatched)

    def test_no_result(self) -> None:
        self.raises(lambda p, h, b: http(out(b"a") + end()), errors.ProtocolError,
                    "without a result")

    def test_no_end_of_stream(self) -> None:
        body = out(b"a") + result(answer_with(REQUEST, "a"))
        self.raises(lambda p, h, b: http(body), errors.ProtocolError,
                    "without its end-of-stream")
        self.raises(lambda p, h, b: http(b""), errors.ProtocolError)

    def test_an_oversize_envelope_is_refused_from_its_header(self) -> None:
        # the header alone, then a long pause: the client must not wait for the bytes
        big = struct.pack(">BI", 0, (16 << 20) + 1)
        t0 = time.monotonic()
        self.raises(lambda p, h, b: http(big, pieces=1)[:2] + [30.0], errors.ProtocolError,
                    "max_message_bytes")
        self.assertLess(time.monotonic() - t0, 8)
        self.assertEqual(plimsoll.DEFAULT_MAX_MESSAGE_BYTES, 16 << 20)
        body = out(b"a" * 100) + result(answer_with(REQUEST, "a" * 100)) + end()
        self.raises(lambda p, h, b: http(body), errors.ProtocolError, "max_message_bytes",
                    max_message_bytes=64)

    def test_garbage_flags(self) -> None:
        for flags in (0x01, 0x04, 0x80, 0xFF):
            with self.subTest(flags):
                body = env_(flags, {"output": {}}) + result(answer_with(REQUEST, "")) + end()
                self.raises(lambda p, h, b: http(body), errors.ProtocolError, "flags")

    def test_bytes_that_do_not_frame(self) -> None:
        self.raises(lambda p, h, b: http(b"not an envelope at all"), errors.ProtocolError)

    def test_messages_out_of_order(self) -> None:
        ans = result(answer_with(REQUEST, ""))
        cases = {
            "after its result": ans + out(b"x") + end(),
            "after its end": ans + end() + out(b"x"),
            "after its end-of-stream": ans + end() + b"\0",
            "both": env_(0, {"output": {}, "result": {}}) + end(),
        }
        for match, body in cases.items():
            with self.subTest(match):
                self.raises(lambda p, h, b: http(body), errors.ProtocolError, match)

    def test_messages_that_are_not_run_stream_responses(self) -> None:
        tail = result(answer_with(REQUEST, "")) + end()
        for bad in (b"[1]", b"{\"output\": {\"stdout\": 5}}", b"{\"output\": {\"step\": -1}}",
                    b"{\"output\": {\"stdout\": \"!!\"}}", b"{\"result\": {\"exit_code\": 1.5}}",
                    b"\xff", b"{\"a\":1,\"a\":2}"):
            with self.subTest(bad):
                self.raises(lambda p, h, b: http(env_(0, bad) + tail), errors.ProtocolError)
        self.raises(lambda p, h, b: http(result(answer_with(REQUEST, "")) + env_(2, b"[]")),
                    errors.ProtocolError)
        self.raises(lambda p, h, b: http(env_(2, {"error": {"message": "no code"}})),
                    errors.ProtocolError)

    def test_unknown_members_and_messages_are_skipped(self) -> None:
        body = (env_(0, {"progress": {"x": 1}}) + env_(0, {"output": {"stdout": "YQ==",
                                                                       "later": True}})
                + result(answer_with(REQUEST, "a")) + env_(2, {"metadata": {"k": ["v"]}}))
        for chunks, r in self.both(lambda p, h, b: http(body)):
            self.assertIsInstance(r, plimsoll.RunResult, repr(r))
            self.assertEqual(len(chunks), 1)

    def test_output_that_is_not_the_results(self) -> None:
        ans = result(answer_with(REQUEST, "ab"))
        for body in (out(b"a") + ans + end(), out(b"ab") + out(b"c") + ans + end(),
                     out(b"ab") + out(stderr=b"e") + ans + end()):
            self.raises(lambda p, h, b: http(body), errors.ProtocolError, "not the result's")

    def test_a_200_that_is_not_a_stream(self) -> None:
        body = json.dumps(answer_with(REQUEST, "")).encode()
        self.raises(lambda p, h, b: http(body, ctype="application/json", framing="length"),
                    errors.ProtocolError, "Content-Type")

    def test_the_stream_is_capped_as_an_answer(self) -> None:
        body = out(b"a" * 4000) + out(b"b" * 4000) + result(answer_with(REQUEST, "")) + end()
        self.raises(lambda p, h, b: http(body), errors.ProtocolError, "max_answer_bytes",
                    max_answer_bytes=5000)

    def test_the_record_and_the_tier_are_checked(self) -> None:
        ans = answer_with(REQUEST, "a")
        ans["stdout"] = "b"
        self.raises(lambda p, h, b: http(out(b"b") + result(ans) + end()), ChainError)
        low = answer_with(dict(REQUEST, minimum_isolation="process"), "", isolation="none")
        fake = self.serve(lambda p, h, b: http(result(low) + end()))
        with self.assertRaises(errors.IsolationEvidenceMismatchError):
            plimsoll.Client(fake.url, "k").run_stream(dict(REQUEST, minimum_isolation="process"))

    def test_the_timeout_bounds_the_whole_stream(self) -> None:
        def respond(p: str, h: Dict[str, str], b: bytes) -> List[Any]:
            parts = http(out(b"x") * 50, pieces=50)
            return parts[:1] + [x for part in parts[1:] for x in (part, 0.2)]
        t0 = time.monotonic()
        for chunks, e in self.raises(respond, errors.InfrastructureError, timeout=1.0):
            self.assertEqual(e.code, "deadline_exceeded")
            self.assertGreater(len(chunks), 0)
        self.assertLess(time.monotonic() - t0, 6)

    def test_the_deadline_cuts_a_slow_async_callback(self) -> None:
        ans = answer_with(REQUEST, "ab")
        fake = self.serve(lambda p, h, b: http(out(b"a") + out(b"b") + result(ans) + end()))

        async def go() -> None:
            async def slow(chunk: plimsoll.OutputChunk) -> None:
                await asyncio.sleep(30)
            await plimsoll.AsyncClient(fake.url, "k", timeout=0.5).run_stream(REQUEST, slow)
        t0 = time.monotonic()
        with self.assertRaises(errors.InfrastructureError) as cm:
            asyncio.run(go())
        self.assertEqual(cm.exception.code, "deadline_exceeded")
        self.assertLess(time.monotonic() - t0, 5)

        async def cancelled() -> None:
            async def slow(chunk: plimsoll.OutputChunk) -> None:
                await asyncio.sleep(30)
            task = asyncio.ensure_future(plimsoll.AsyncClient(fake.url, "k").run_stream(REQUEST, slow))
            await asyncio.sleep(0.3)
            task.cancel()
            await task
        with self.assertRaises(asyncio.CancelledError):
            asyncio.run(cancelled())

    def test_what_the_callback_raises_is_raised_as_it_is(self) -> None:
        ans = answer_with(REQUEST, "ab")
        fake = self.serve(lambda p, h, b: http(out(b"a") + out(b"b") + result(ans) + end()))

        def boom(chunk: plimsoll.OutputChunk) -> None:
            raise OSError("the caller's own disk is full")
        with self.assertRaises(OSError) as cm:
            plimsoll.Client(fake.url, "k").run_stream(REQUEST, boom)
        self.assertNotIsInstance(cm.exception, errors.PlimsollError)

        async def go() -> None:
            async def aboom(chunk: plimsoll.OutputChunk) -> None:
                raise KeyError("mine")
            await plimsoll.AsyncClient(fake.url, "k").run_stream(REQUEST, aboom)
        with self.assertRaises(KeyError):
            asyncio.run(go())


if __name__ == "__main__":
    unittest.main()
