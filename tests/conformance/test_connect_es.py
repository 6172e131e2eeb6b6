# SPDX-License-Identifier: Apache-2.0
"""Conformance with the Connect TypeScript stack, which nobody here wrote:
@bufbuild/protoc-gen-es generates the messages from proto/ at test time,
and @connectrpc/connect-node calls a real wasm plimsolld with every
protocol of the family on the one port: Connect with both codecs, binary
(the library's default) and JSON, over HTTP/1.1; gRPC-Web over HTTP/1.1;
gRPC and Connect over HTTP/2 (h2c, prior knowledge).  Each case checks the
answer or the typed error as the library decoded it (code, message,
google.rpc.ErrorInfo), against what the daemon answers a plain JSON
caller; and the caller's deadline (Connect-Timeout-Ms, grpc-timeout).

Run: cd tests/conformance && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_connect_es
"""
import base64
import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402

MODES = ("binary", "json", "grpc-web", "grpc", "connect-h2")


def setup_stack():
    subprocess.run([os.path.join(HERE, "setup")], check=True, stdout=subprocess.DEVNULL)


def drop_defaults(v):
    """proto3 JSON as a library writes it: fields at their default left out."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = drop_defaults(x)
            if x not in (0, "", False, [], None) or isinstance(x, dict):
                out[k] = x
        return out
    if isinstance(v, list):
        return [drop_defaults(x) for x in v]
    return v


class ConnectES(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        setup_stack()
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_MAX_CONCURRENT": "1",
                            "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "1000"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def calls(self, calls):
        """Each call through connect-node; its lines, in order."""
        for c in calls:
            c.setdefault("key", self.d.keys["alice"])
        payload = {"base_url": "http://%s:%d" % (self.d.host, self.d.port), "calls": calls}
        p = subprocess.run(["node", os.path.join(HERE, "connect_es.mjs")],
                           input=json.dumps(payload), capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual(len(lines), len(calls), p.stdout)
        return lines

    def each_mode(self, method, request, **kw):
        return dict(zip(MODES, self.calls([dict(mode=m, method=method, request=request, **kw)
                                           for m in MODES])))

    def plain_error(self, method, request, **kw):
        """The daemon's error to a plain JSON caller, as the library states it."""
        status, body = self.d.rpc(method, request, **kw)
        self.assertNotEqual(status, 200, body)
        info = error_info(body)[0]
        return {"code": body["code"], "message": body["message"], "details": [info]}

    def test_describe_in_both_codecs_is_the_daemon_s_describe(self):
        status, plain = self.d.rpc("Describe", {})
        self.assertEqual(status, 200)
        got = self.each_mode("Describe", {})
        for mode in MODES:
            self.assertEqual(got[mode]["ok"], drop_defaults(plain), mode)

    def test_a_run_in_both_codecs(self):
        req = js("console.log('hello ' + (6 * 7)); console.error('e')")
        got = self.each_mode("Run", req)
        status, plain = self.d.rpc("Run", req)
        self.assertEqual(status, 200, plain)
        runs = [x["codec"] for x in self.d.log_lines()
                if x.get("msg") == "request" and x.get("method") == "Run"]
        # Each protocol really was that protocol (the plain call last).
        self.assertEqual(runs[-6:], ["proto", "json", "grpc-web", "grpc", "proto", "json"])
        for mode in MODES:
            r = got[mode]["ok"]
            self.assertEqual(r["stdout"], "hello 42\n", mode)
            self.assertEqual(r["stderr"], "e\n", mode)
            self.assertEqual(r["isolation"], "process", mode)
            self.assertEqual(r["outcome"], "completed", mode)
            self.assertNotIn("exit_code", r, mode)  # 0, proto3's default
            # The record digests the canonical request: the same for a
            # binary, a library's JSON and a plain JSON caller.
            self.assertEqual(r["record"]["request_sha256"], plain["record"]["request_sha256"])
            self.assertEqual(len(r["record"]["digest"]), 64)

    def test_run_stream_in_every_mode(self):
        """Server streaming through each of the library's transports: the
        output as messages, then one result, in order; the chunks joined
        are the result's output."""
        code = "for (let i = 0; i < 3; i++) console.log('line ' + i); console.error('e')"
        got = self.each_mode("RunStream", js(code))
        for mode in MODES:
            line = got[mode]
            self.assertNotIn("error", line, (mode, line))
            msgs = line["stream"]
            self.assertIn("result", msgs[-1], mode)
            self.assertTrue(all("output" in m for m in msgs[:-1]), (mode, msgs))
            self.assertGreater(len(msgs), 1, mode)
            res = msgs[-1]["result"]
            self.assertEqual(res["stdout"], "line 0\nline 1\nline 2\n", mode)
            for name in ("stdout", "stderr"):
                joined = b"".join(base64.b64decode(m["output"].get(name, ""))
                                  for m in msgs[:-1])
                self.assertEqual(joined, res[name].encode(), (mode, name))
            self.assertEqual(len(res["record"]["digest"]), 64)

    def test_run_stream_refusals_are_typed(self):
        want = self.plain_error("Run", js("1", minimum_isolation="vm"))
        got = self.each_mode("RunStream", js("1", minimum_isolation="vm"))
        for mode in MODES:
            self.assertEqual(got[mode].get("stream"), [], mode)
            e = got[mode]["error"]
            self.assertEqual((e["code"], e["details"]), (want["code"], want["details"]), (mode, e))
        got = self.each_mode("RunStream", js("1"), key="wrong")
        for mode in MODES:
            self.assertEqual(got[mode]["error"]["code"], "unauthenticated", mode)

    def test_a_guest_s_failure_is_an_answer(self):
        req = js("console.log('\\u00e9t\\u00e9'); throw new TypeError('bad')")
        got = self.each_mode("Run", req)
        for mode in MODES:
            r = got[mode]["ok"]
            self.assertEqual(r["exit_code"], 1, mode)
            self.assertEqual(r["stdout"], "\u00e9t\u00e9\n", mode)
            self.assertIn("TypeError: bad", r["stderr"], mode)

    def test_refusals_are_typed_with_their_error_info(self):
        cases = [
            ("Run", js("1", minimum_isolation="vm"), {}),
            ("Run", js("1", grant_profile="nope"), {}),
            ("Run", {"snippet": {"language": "cobol", "code": "x"}}, {}),
            ("Run", js("1", timeout_ms=99999999), {}),
            ("RunCell", {"session_id": "0" * 64, "cell": {"language": "javascript", "code": "1"}}, {}),
            ("Run", js("1"), {"key": "not-a-key"}),
        ]
        for method, req, kw in cases:
            with self.subTest(method=method, req=req):
                want = self.plain_error(method, req, key=kw.get("key"))
                got = self.each_mode(method, req, **kw)
                for mode in MODES:
                    self.assertEqual(got[mode]["error"], want, mode)
                    self.assertEqual(want["details"][0]["domain"], "plimsoll")
                    self.assertEqual(want["details"][0]["metadata"]["dispatched"], "false")

    def test_explain_answers_its_map_in_both_codecs(self):
        req = {"run": js("1", minimum_isolation="vm")}
        status, plain = self.d.rpc("Explain", req)
        self.assertEqual(status, 200, plain)
        got = self.each_mode("Explain", req)
        for mode in MODES:
            self.assertEqual(got[mode]["ok"], drop_defaults(plain), mode)
        refusal = got["binary"]["ok"]["checks"][-1]["refusal"]
        self.assertEqual(refusal["metadata"]["dispatched"], "false")
        self.assertEqual(refusal["reason"], "INSUFFICIENT_ISOLATION")

    def test_the_caller_s_deadline_ends_the_run(self):
        """connect-node sends Connect-Timeout-Ms; the run's 20 s timeout
        gives way to it, so the daemon's one slot is free again long
        before 20 s (a later call is not refused AT_CAPACITY)."""
        for mode in MODES:
            with self.subTest(mode=mode):
                t0 = time.monotonic()
                [line] = self.calls([{"mode": mode, "method": "Run", "timeout_ms": 1500,
                                      "request": js("for(;;){}", timeout_ms=20000)}])
                self.assertEqual(line["error"]["code"], "deadline_exceeded", line)
                # The slot comes back once the run's shortened deadline
                # ends it; poll for it, well short of the 20 s asked for.
                status = None
                while time.monotonic() - t0 < 12:
                    status, body = self.d.rpc("Run", js("console.log(1)"))
                    if status == 200:
                        break
                    self.assertEqual(error_info(body)[0]["reason"], "AT_CAPACITY", body)
                    time.sleep(0.2)
                self.assertEqual(status, 200, "the slot stayed taken past the caller's deadline")
                ended = [x for x in self.d.log_lines() if x.get("msg") == "request"
                         and x.get("method") == "Run" and x.get("duration_ms", 0) > 1000]
                self.assertTrue(ended and ended[-1]["duration_ms"] < 10000, ended)


def field(num, payload):
    """A length-delimited protobuf field, by hand."""
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out
    return varint(num << 3 | 2) + varint(len(payload)) + payload


SNIPPET = field(10, field(1, b"javascript") + field(2, b"console.log(7)"))


class BinaryByHand(unittest.TestCase):
    """application/proto bytes a hostile caller writes: refused with a typed
    JSON error (Connect's errors are JSON on every codec), nothing lost."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_REQUEST_BYTES": "65536"}
                       ).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def post(self, method, raw, ctype="application/proto"):
        h = {"Content-Type": ctype, "Authorization": "Bearer " + self.d.keys["alice"]}
        return self.d.request("POST", "/plimsoll.v1.SandboxService/" + method, raw, h)

    def refused(self, method, raw, says, status=400, reason="INVALID_REQUEST"):
        got, headers, data = self.post(method, raw)
        self.assertEqual(got, status, data)
        self.assertTrue(headers["content-type"].startswith("application/json"), headers)
        body = json.loads(data)
        self.assertEqual(error_info(body)[0]["reason"], reason, body)
        self.assertIn(says, body["message"])

    def test_a_binary_run_answers_binary(self):
        status, headers, data = self.post("Run", SNIPPET)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers["content-type"], "application/proto")
        self.assertIn(field(2, b"7\n"), data)  # RunResponse.stdout
        status, headers, data = self.post("Describe", b"")
        self.assertEqual(status, 200, data)
        self.assertIn(field(2, b"wasm"), data)  # DescribeResponse.provider

    def test_a_oneof_keeps_its_last_member(self):
        module = field(12, field(1, b"AGFzbQEAAAA="))
        status, _, data = self.post("Run", module + SNIPPET)
        self.assertEqual(status, 200, data)
        self.assertIn(field(2, b"7\n"), data)

    def test_bytes_that_are_not_a_request(self):
        self.refused("Run", b"\xa8\x06\x01", "field number 101 is not in plimsoll.v1.RunRequest")
        self.refused("Run", field(10, b"\x48\x01"), "not in plimsoll.v1.Snippet")
        self.refused("Run", field(1, b"\xc3\x28"), "not UTF-8")
        self.refused("Run", SNIPPET[:-3], "a length past the end")
        self.refused("Run", b"\x18\x80", "a broken varint")
        self.refused("Run", b"\x0b\x0c", "a wire type")
        self.refused("Describe", field(1, b"x"), "not in plimsoll.v1.DescribeRequest")
        # What the JSON decoder refuses, the binary one is refused too.
        self.refused("Run", field(10, field(1, b"cobol")), "snippet.language", status=400,
                     reason="INVALID_REQUEST")

    def test_a_body_past_the_limit_and_other_codecs(self):
        self.refused("Run", field(10, field(2, b"x" * 70000)), "PLIMSOLL_MAX_REQUEST_BYTES")
        for ctype in ("application/protobuf", "application/grpc", "application/x-protobuf",
                      "application/grpc-web-text"):
            status, _, data = self.post("Run", SNIPPET, ctype=ctype)
            self.assertEqual(status, 415, (ctype, data))
            self.assertIn(b"HTTP/2" if ctype == "application/grpc" else b"application/proto", data)
        status, _, data = self.post("Run", SNIPPET, ctype="application/proto; charset=binary")
        self.assertEqual(status, 200, data)
        # The daemon still answers after all of it.
        status, _, data = self.post("Run", SNIPPET)
        self.assertEqual(status, 200, data)


class Deadline(unittest.TestCase):
    """Connect-Timeout-Ms by hand: the header's grammar (1 to 10 digits),
    and a deadline that only shortens (a long one is not a refusal)."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_the_header_s_grammar(self):
        for bad in ("0", "-1", "1.5", "12345678901", "", "1 ", "0x10", "1e3"):
            with self.subTest(header=bad):
                status, body = self.d.rpc("Run", js("1"),
                                          headers={"Connect-Timeout-Ms": bad})
                self.assertEqual(status, 400, body)
                self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")
                self.assertIn("Connect-Timeout-Ms", body["message"])
        for good in ("1", "9999999999", "0001500"):
            with self.subTest(header=good):
                status, body = self.d.rpc("Run", js("console.log(1)"),
                                          headers={"Connect-Timeout-Ms": good})
                self.assertEqual(status, 200, body)  # 1 ms: the run's whole deadline
                if good != "1":
                    self.assertEqual(body["stdout"], "1\n")

    def test_a_deadline_shortens_the_run_and_explain_says_so(self):
        status, body = self.d.rpc("Run", js("for(;;){}", timeout_ms=30000),
                                  headers={"Connect-Timeout-Ms": "700"})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["timed_out"], body)
        self.assertLess(body["duration_ms"], 5000, body)
        status, body = self.d.rpc("Explain", {"run": js("1")},
                                  headers={"Connect-Timeout-Ms": "700"})
        self.assertEqual(status, 200, body)
        [t] = [c for c in body["checks"] if c["check"] == "timeout"]
        self.assertIn("the caller's deadline", t["value"])


if __name__ == "__main__":
    unittest.main()
