# SPDX-License-Identifier: Apache-2.0
"""RunStream and RunCellStream: live output through the real daemon, over
Connect's streaming protocol (HTTP/1.1) and gRPC-Web, on the docker provider
(runc and runsc) and on the protocol's own edges."""
import base64
import json
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test import h2raw, streaming  # noqa: E402
from plimsoll_test.docker import DockerDaemon, per_runtime  # noqa: E402
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import py, sha  # noqa: E402


def debug_of(err):
    return err["details"][0]["debug"]


def _ld(field, payload):
    return bytes([field << 3 | 2, len(payload)]) + payload


def run_request_pb(language, code):
    """RunRequest{snippet{language, code}} in protobuf's wire form (short
    fields only)."""
    return _ld(10, _ld(1, language) + _ld(2, code))


class DockerStreams:
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "test-stream-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_OUTPUT_BYTES": "4096"}

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def stream(self, method, message, **kw):
        st = streaming.call(self.d, method, message, **kw)
        self.assertEqual(st.status, 200, (st.headers, st.leftover))
        self.assertEqual(st.headers["content-type"], "application/connect+json")
        self.assertEqual(st.leftover, b"")
        return st

    def test_output_as_it_comes(self):
        # 'first' is written, then 1.5 s later 'second': unsent bytes are
        # merged into one chunk, so 'first' arriving in chunks of its own
        # shows it was sent before 'second' existed.
        req = py("import sys, time\nprint('first', flush=True)\ntime.sleep(1.5)\n"
                 "print('second', flush=True)\nprint('oops', file=sys.stderr)")
        seen = []
        st = self.stream("RunStream", req,
                         on_frame=lambda s, f, p: seen.append(json.loads(p) if f == 0 else None))
        outs = [base64.b64decode(c.get("stdout", "")) for c in st.chunks]
        at = next(i for i, o in enumerate(outs) if b"second" in o)
        self.assertEqual(b"".join(outs[:at]), b"first\n")
        # Every chunk before the result, the result before the end.
        kinds = ["output" if m and "output" in m else "result" if m else "end" for m in seen]
        self.assertEqual(kinds[-2:], ["result", "end"])
        self.assertNotIn("result", kinds[:-2])
        self.assertEqual(st.end, {})
        res = st.result
        self.assertEqual((res["exit_code"], res["outcome"]), (0, "completed"))
        self.assertEqual(st.joined("stdout"), res["stdout"].encode())
        self.assertEqual(st.joined("stderr"), res["stderr"].encode())
        self.assertEqual(res["stdout"], "first\nsecond\n")
        # The record digests the result, whose output is what was streamed.
        rec = res.pop("record")
        self.assertEqual(rec["request_sha256"], sha(req))
        self.assertEqual(rec["response_sha256"], sha(res))

    def test_cap_streams_exactly_what_is_kept(self):
        st = self.stream("RunStream",
                         py("import sys\nsys.stdout.write('x' * 10000)\nsys.stdout.flush()\n"
                            "sys.stderr.write('e' * 5000)"))
        res = st.result
        self.assertTrue(res["stdout_truncated"] and res["stderr_truncated"])
        self.assertEqual(st.joined("stdout"), b"x" * 4096)
        self.assertEqual(st.joined("stderr"), b"e" * 4096)

    def test_bytes_not_utf8_stream_exactly(self):
        st = self.stream("RunStream", py("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok')"))
        self.assertEqual(st.joined("stdout"), b"\xff\xfe ok")
        self.assertEqual(base64.b64decode(st.result["stdout_base64"]), b"\xff\xfe ok")

    def test_project_steps_are_numbered(self):
        req = {"project": {"files": [{"path": "a.py", "content": "print('one')"},
                                     {"path": "b.py", "content": "print('two')"}],
                           "steps": [{"argv": ["python3", "a.py"]}, {"argv": ["python3", "b.py"]}]}}
        st = self.stream("RunStream", req)
        res = st.result
        self.assertEqual(res["outcome"], "completed", res)
        # The whole answer in the message: a CI run once saw step 1's
        # chunk missing under runsc, and nothing more was known.
        self.assertEqual(st.joined("stdout", 1), b"one\n", (res, st.messages))
        self.assertEqual(st.joined("stdout", 2), b"two\n", (res, st.messages))
        self.assertEqual(st.joined("stdout", 0), b"")
        for i, step in enumerate(res["steps"]):
            self.assertEqual(st.joined("stdout", i + 1), step["stdout"].encode())

    def test_timeout_ends_the_stream_with_a_result(self):
        # The deadline leaves a loaded runsc sandbox time to print first
        # (1.5 s was once too short under the ASan build in CI).
        st = self.stream("RunStream", py("import time\nprint('before', flush=True)\n"
                                         "time.sleep(30)", timeout_ms=4000))
        self.assertEqual(st.joined("stdout"), b"before\n")
        self.assertTrue(st.result["timed_out"])
        self.assertEqual(st.end, {})

    def test_refusal_is_the_end_message_alone(self):
        st = self.stream("RunStream", py("print(1)", minimum_isolation="vm"))
        self.assertEqual(st.messages, [])
        err = st.error()
        self.assertEqual(err["code"], "failed_precondition")
        self.assertEqual(debug_of(err)["reason"], "INSUFFICIENT_ISOLATION")
        self.assertEqual(debug_of(err)["metadata"]["dispatched"], "false")
        info, _ = error_info(err)
        self.assertEqual(info["reason"], "INSUFFICIENT_ISOLATION")

    def test_describe_says_every_kind_streams(self):
        status, body = self.d.rpc("Describe", {})
        for kind in ("snippet", "project", "module", "session"):
            self.assertTrue(body["operations"][kind]["streams"], kind)

    def test_cell_streams(self):
        status, body = self.d.rpc("OpenSession", {"languages": ["python"]})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        try:
            st = self.stream("RunCellStream", {"session_id": sid, "cell": {
                "language": "python", "code": "x = 41\nprint('cell', x + 1)"}})
            self.assertEqual(st.joined("stdout"), b"cell 42\n")
            self.assertEqual(st.result["stdout"], "cell 42\n")
            self.assertEqual(st.end, {})
            # A later cell sees the first's state, streamed again.
            st = self.stream("RunCellStream", {"session_id": sid, "cell": {
                "language": "python", "code": "print(x)"}})
            self.assertEqual(st.joined("stdout"), b"41\n")
            self.assertFalse(st.result["interpreter_started"])
        finally:
            self.d.rpc("CloseSession", {"session_id": sid})
        # A closed session: the end message carries SESSION_ENDED.
        st = self.stream("RunCellStream", {"session_id": sid, "cell": {
            "language": "python", "code": "1"}})
        self.assertEqual(debug_of(st.error())["reason"], "SESSION_ENDED")

    def test_over_http2_two_at_once_and_a_reset(self):
        c = h2raw.Conn(self.d, timeout=60)
        try:
            key = self.d.keys["alice"]
            req = streaming.envelope(json.dumps(py(
                "import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')")).encode())
            for sid in (1, 3, 5):
                c.headers(sid, h2raw.request_headers("RunStream", key,
                                                     ctype="application/connect+json"))
                c.data(sid, req)
            # Stream 5's caller leaves at its first message.
            f, _ = c.until(lambda f: f[2] == 5 and f[0] == h2raw.DATA, timeout=60)
            c.send(h2raw.frame(h2raw.RST_STREAM, 0, 5, struct.pack(">I", 8)))
            for sid in (1, 3):
                body = c.answer(sid, timeout=60)
                frames, off = [], 0
                while off < len(body):
                    n = struct.unpack(">I", body[off + 1:off + 5])[0]
                    frames.append((body[off], json.loads(body[off + 5:off + 5 + n])))
                    off += 5 + n
                self.assertEqual(frames[-1], (2, {}))
                res = frames[-2][1]["result"]
                out = b"".join(base64.b64decode(m["output"].get("stdout", ""))
                               for _, m in frames if "output" in m)
                self.assertEqual(out, b"a\nb\n")
                self.assertEqual(res["stdout"], "a\nb\n")
            # The connection still serves.
            c.headers(7, h2raw.request_headers("Describe", key))
            c.data(7, b"{}")
            self.assertEqual(c.json_answer(7)["provider"], "docker")
        finally:
            c.close()

    def test_caller_leaving_mid_stream_frees_the_slot(self):
        # The caller reads one chunk and hangs up; the run ends on its own
        # deadline and its slot comes back (SANDBOX_MAX_CONCURRENT is 4:
        # four such calls, then a fifth run still gets a slot).
        def leave(s, f, p):
            raise ConnectionAbortedError("leaving")
        for _ in range(4):
            with self.assertRaises(ConnectionAbortedError):
                streaming.call(self.d, "RunStream",
                               py("import time\nprint('hi', flush=True)\ntime.sleep(2)",
                                  timeout_ms=4000), on_frame=leave)
        deadline = time.monotonic() + 20
        while True:
            status, body = self.d.rpc("Run", py("print('after')"))
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual((status, body.get("stdout")), (200, "after\n"), body)


StreamsRunc, StreamsRunsc = per_runtime(DockerStreams, DockerDaemon)


class Protocol(unittest.TestCase):
    """The streaming protocol's edges, on a daemon that runs nothing."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_unauthenticated_is_an_end_message(self):
        st = streaming.call(self.d, "RunStream", py("1"), key="wrong")
        self.assertEqual(st.status, 200)
        self.assertEqual(st.messages, [])
        self.assertEqual(debug_of(st.error())["reason"], "UNAUTHENTICATED")

    def test_disabled_is_an_end_message(self):
        st = streaming.call(self.d, "RunStream", py("1"))
        self.assertEqual(debug_of(st.error())["reason"], "DISABLED")
        self.assertEqual(st.frames[-1][0], 2)
        # Counted under its own method in /metrics.
        status, _, body = self.d.request("GET", "/metrics", headers={
            "Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertIn(b'method="RunStream",code="failed_precondition"', body)

    def test_a_body_announced_past_the_limit_is_an_end_message(self):
        c = self.d.connection()
        try:
            c.putrequest("POST", "/plimsoll.v1.SandboxService/RunStream")
            c.putheader("Content-Type", "application/connect+json")
            c.putheader("Authorization", "Bearer " + self.d.keys["alice"])
            c.putheader("Content-Length", str(64 << 20))
            c.endheaders()
            r = c.getresponse()
            body = r.read()
        finally:
            c.close()
        self.assertEqual(r.status, 200)
        self.assertEqual(body[0], 2)
        end = json.loads(body[5:])
        self.assertEqual(debug_of(end["error"])["reason"], "INVALID_REQUEST")

    def test_unary_content_type_on_a_streaming_method_is_415(self):
        status, _, body = self.d.request("POST", "/plimsoll.v1.SandboxService/RunStream",
                                         json.dumps(py("1")).encode(),
                                         {"Content-Type": "application/json",
                                          "Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 415)
        self.assertIn(b"application/connect+json", body)

    def test_streaming_content_type_on_a_unary_method_is_415(self):
        st = streaming.call(self.d, "Run", py("1"))
        self.assertEqual(st.status, 415)
        self.assertIn(b"server-streaming", st.leftover)

    def test_request_envelope_refusals(self):
        good = json.dumps(py("1")).encode()
        for raw, why in ((b"", "none"), (b"\x01" + struct.pack(">I", len(good)) + good, "compressed"),
                         (streaming.envelope(good) * 2, "two messages"),
                         (streaming.envelope(good)[:-1], "short"),
                         (b"\x00\x00\x00\x00\x05{}", "length past the end")):
            st = streaming.call(self.d, "RunStream", raw=raw)
            self.assertEqual(st.status, 200, why)
            self.assertEqual(debug_of(st.error())["reason"], "INVALID_REQUEST", why)

    def test_invalid_json_inside_the_envelope(self):
        st = streaming.call(self.d, "RunStream", raw=streaming.envelope(b"{not json"))
        self.assertEqual(debug_of(st.error())["reason"], "INVALID_REQUEST")

    def test_grpc_web_refusal_is_trailers_only(self):
        status, headers, body = self.d.request(
            "POST", "/plimsoll.v1.SandboxService/RunStream",
            streaming.envelope(run_request_pb(b"python", b"1")),
            {"Content-Type": "application/grpc-web+proto",
             "Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 200)
        self.assertEqual(headers["grpc-status"], "9")  # FAILED_PRECONDITION: DISABLED
        self.assertIn("grpc-status-details-bin", headers)


class GrpcWebDocker(DockerDaemon, unittest.TestCase):
    """gRPC-Web over HTTP/1.1: the messages, then the trailer frame."""
    RUNTIME = "runc"
    INSTANCE = "test-stream-web-"

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_messages_then_trailer_frame(self):
        msg = run_request_pb(b"python", b"print('web')")
        st = streaming.call(self.d, "RunStream", raw=streaming.envelope(msg),
                            ctype="application/grpc-web+proto")
        self.assertEqual(st.status, 200)
        self.assertEqual(st.headers["content-type"], "application/grpc-web+proto")
        flags = [f for f, _, _ in st.frames]
        self.assertEqual(flags[-1], 0x80)
        self.assertTrue(all(f == 0 for f in flags[:-1]))
        self.assertEqual(st.frames[-1][1], b"grpc-status:0\r\n")
        # RunStreamResponse{output(1){stdout(1)}}: the chunk's bytes appear.
        self.assertIn(b"web\n", b"".join(p for f, p, _ in st.frames[:-2]))
        # The last message is the result: field 2.
        self.assertEqual(st.frames[-2][1][0], 2 << 3 | 2)


if __name__ == "__main__":
    unittest.main()
