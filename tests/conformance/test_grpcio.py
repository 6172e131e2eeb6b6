# SPDX-License-Identifier: Apache-2.0
"""Conformance with Debian's python3-grpcio, which nobody here wrote: gRPC
over HTTP/2 (h2c, prior knowledge) against a real wasm plimsolld on its one
port, with messages protoc generated from proto/ at test time.  Results,
typed errors with the google.rpc.ErrorInfo inside grpc-status-details-bin,
deadlines (grpc-timeout), and many calls at once on one channel.

Run: cd tests/conformance && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_grpcio
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402
from plimsoll_test.pki import fingerprint, make_pki  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"  # the one python3-grpcio is for


def generate(gen):
    """sandbox.proto and google.rpc's status and error details, for python."""
    subprocess.run([os.path.join(HERE, "setup")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"),
                    "-I", os.path.join(HERE, "node_modules", "google-proto-files"),
                    "-I", "/usr/include", "--python_out=" + gen,
                    "plimsoll/v1/sandbox.proto", "google/rpc/status.proto",
                    "google/rpc/error_details.proto"], check=True)


class GrpcIO(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-")
        generate(cls.gen)
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_MAX_CONCURRENT": "4",
                            "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "1000"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    TLS = None

    def calls(self, calls):
        for c in calls:
            c.setdefault("key", self.d.keys["alice"])
        cfg = {"target": "%s:%d" % (self.d.host, self.d.port), "gen": self.gen, "calls": calls,
               "tls": self.TLS}
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual(len(lines), len(calls), p.stdout + p.stderr)
        return lines

    def test_describe_and_a_run(self):
        status, plain = self.d.rpc("Describe", {})
        [d, r] = self.calls([{"method": "Describe"},
                             {"method": "Run", "request": js("console.log(6 * 7)")}])
        self.assertEqual(d["ok"]["provider"], "wasm")
        self.assertEqual(d["ok"]["limits"]["max_concurrent"], plain["limits"]["max_concurrent"])
        self.assertEqual(r["ok"]["stdout"], "42\n")
        self.assertEqual(r["ok"]["isolation"], "process")
        status, plain = self.d.rpc("Run", js("console.log(6 * 7)"))
        self.assertEqual(r["ok"]["record"]["request_sha256"], plain["record"]["request_sha256"])
        grpc_runs = [x for x in self.d.log_lines() if x.get("msg") == "request"
                     and x.get("method") == "Run" and x.get("codec") == "grpc"]
        self.assertTrue(grpc_runs)

    def test_typed_refusals_with_error_info(self):
        cases = [("Run", js("1", minimum_isolation="vm"), None, "failed_precondition"),
                 ("Run", js("1", grant_profile="nope"), None, "invalid_argument"),
                 ("Run", js("1"), "not-a-key", "unauthenticated"),
                 ("RunCell", {"session_id": "0" * 64,
                              "cell": {"language": "javascript", "code": "1"}}, None, None),
                 ("ListSessions", {}, None, "unimplemented"),
                 ("GetSession", {"session_id": "0" * 64}, None, "unimplemented"),
                 ("ExtendSession", {"session_id": "0" * 64, "ends_in_s": 5}, None,
                  "unimplemented")]
        for method, req, key, code in cases:
            with self.subTest(method=method, req=req):
                status, body = self.d.rpc(method, req, key=key)
                want = error_info(body)[0]
                call = {"method": method, "request": req}
                if key:
                    call["key"] = key
                [line] = self.calls([call])
                err = line["error"]
                self.assertEqual(err["code"], body["code"])
                if code:
                    self.assertEqual(err["code"], code)
                self.assertEqual(err["message"], body["message"])
                self.assertEqual(err["details"], [want])

    def test_a_non_ascii_message_survives_percent_encoding(self):
        req = {"snippet": {"language": "javascript", "code": "1"},
               "grant_profile": "caf\u00e9 100%"}
        status, body = self.d.rpc("Run", req)
        [line] = self.calls([{"method": "Run", "request": req}])
        self.assertEqual(line["error"]["message"], body["message"])
        self.assertIn("caf\u00e9 100%", line["error"]["message"])

    def test_grpc_timeout_ends_the_run(self):
        [line] = self.calls([{"method": "Run", "timeout_s": 1.0,
                              "request": js("for(;;){}", timeout_ms=20000)}])
        self.assertEqual(line["error"]["code"], "deadline_exceeded", line)
        runs = [x for x in self.d.log_lines() if x.get("msg") == "request"
                and x.get("codec") == "grpc" and x.get("duration_ms", 0) > 500]
        # The daemon's run ended at the caller's deadline, not 20 s later.
        self.assertTrue(runs and runs[-1]["duration_ms"] < 5000, runs)

    def stream_checks(self, line):
        """A RunStream line: output messages, then one result; the chunks
        joined are the result's output; returns the result."""
        self.assertNotIn("error", line, line)
        msgs = line["stream"]
        self.assertIn("result", msgs[-1])
        self.assertTrue(all("output" in m for m in msgs[:-1]), msgs)
        res = msgs[-1]["result"]
        for name in ("stdout", "stderr"):
            joined = b"".join(base64.b64decode(m["output"].get(name, "")) for m in msgs[:-1])
            self.assertEqual(joined, res.get(name, "").encode(), name)
        return res

    def test_output_holding_nul(self):
        """NUL is UTF-8 (a JSON "\\u0000" in the answer the codec encodes):
        it crosses the binary codec, unary and streamed."""
        code = "console.log('a\\u0000b')"
        [u, st] = self.calls([{"method": "Run", "request": js(code)},
                              {"method": "RunStream", "request": js(code)}])
        self.assertIn("ok", u, u)
        self.assertEqual(u["ok"]["stdout"], "a\x00b\n")
        self.assertEqual(self.stream_checks(st)["stdout"], "a\x00b\n")

    def test_run_stream(self):
        code = "for (let i = 0; i < 3; i++) console.log('line ' + i); console.error('e')"
        [a, refused] = self.calls([
            {"method": "RunStream", "request": js(code)},
            {"method": "RunStream", "request": js("1", minimum_isolation="vm")}])
        res = self.stream_checks(a)
        self.assertEqual(res["stdout"], "line 0\nline 1\nline 2\n")
        self.assertGreater(len(a["stream"]), 1)  # output came before the result
        self.assertEqual(refused["stream"], [])
        self.assertEqual(refused["error"]["code"], "failed_precondition")
        self.assertEqual(refused["error"]["details"][0]["reason"], "INSUFFICIENT_ISOLATION")

    def test_many_calls_at_once_on_one_connection(self):
        """grpcio multiplexes: 12 runs on one channel, four slots; every
        answer is its own call's or a typed AT_CAPACITY refusal."""
        driver = """
import json, sys, concurrent.futures as cf
sys.path.insert(0, %r)
import grpc
from plimsoll.v1 import sandbox_pb2 as pb
ch = grpc.insecure_channel(%r)
run = ch.unary_unary("/plimsoll.v1.SandboxService/Run",
                     request_serializer=pb.RunRequest.SerializeToString,
                     response_deserializer=pb.RunResponse.FromString)
def one(i):
    req = pb.RunRequest(snippet=pb.Snippet(language="javascript",
                        code="let t = Date.now(); while (Date.now() - t < 300) {} console.log(%%d)" %% i))
    try:
        return ["ok", i, run(req, metadata=[("authorization", "Bearer %s")]).stdout]
    except grpc.RpcError as e:
        return ["error", i, e.code().name]
with cf.ThreadPoolExecutor(12) as ex:
    print(json.dumps(list(ex.map(one, range(12)))))
""" % (self.gen, "%s:%d" % (self.d.host, self.d.port), self.d.keys["alice"])
        p = subprocess.run([DEBIAN_PYTHON, "-c", driver], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        ok = [g for g in got if g[0] == "ok"]
        self.assertTrue(ok)
        for kind, i, v in got:
            if kind == "ok":
                self.assertEqual(v, "%d\n" % i)
            else:
                self.assertEqual(v, "RESOURCE_EXHAUSTED")


class GrpcIOOverTLS(unittest.TestCase):
    """The same calls over TLS (ALPN h2), with and without a client
    certificate mapped to a principal."""

    @classmethod
    def setUpClass(cls):
        cls.gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-tls-")
        generate(cls.gen)
        d = tempfile.mkdtemp(prefix="plimsoll-grpcio-pki-")
        cls.pki = make_pki(d)
        clients = os.path.join(d, "clients")
        with open(clients, "w") as f:
            f.write("alice %s\n" % fingerprint(cls.pki["alice"] + ".pem"))
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm",
                            "PLIMSOLL_TLS_CERT_FILE": cls.pki["server"] + ".pem",
                            "PLIMSOLL_TLS_KEY_FILE": cls.pki["server"] + ".key",
                            "PLIMSOLL_TLS_CLIENT_CERTS_FILE": clients}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def calls(self, calls, client=None):
        tls = {"ca": self.pki["ca"] + ".pem"}
        if client:
            tls.update(cert=self.pki[client] + ".pem", key=self.pki[client] + ".key")
        return self._calls(calls, tls)

    def _calls(self, calls, tls):
        cfg = {"target": "127.0.0.1:%d" % self.d.port, "gen": self.gen, "calls": calls,
               "tls": tls}
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(x) for x in p.stdout.splitlines()]

    def test_a_run_over_tls(self):
        [r, e] = self.calls([
            {"method": "Run", "request": js("console.log(6 * 7)"), "key": self.d.keys["alice"]},
            {"method": "Run", "request": js("1", minimum_isolation="vm"),
             "key": self.d.keys["alice"]}])
        self.assertEqual(r["ok"]["stdout"], "42\n")
        self.assertEqual(e["error"]["code"], "failed_precondition")
        self.assertEqual(e["error"]["details"][0]["reason"], "INSUFFICIENT_ISOLATION")

    def test_a_stream_over_tls(self):
        [a] = self.calls([{"method": "RunStream", "request": js("console.log('tls')"),
                           "key": self.d.keys["alice"]}])
        msgs = a["stream"]
        self.assertEqual(msgs[-1]["result"]["stdout"], "tls\n", a)
        out = b"".join(base64.b64decode(m["output"].get("stdout", "")) for m in msgs[:-1])
        self.assertEqual(out, b"tls\n")

    def test_a_client_certificate_instead_of_a_key(self):
        [r] = self.calls([{"method": "Run", "request": js("console.log(1)")}], client="alice")
        self.assertEqual(r["ok"]["stdout"], "1\n")
        [e] = self.calls([{"method": "Run", "request": js("1")}], client="mallory")
        self.assertEqual(e["error"]["code"], "unauthenticated")
        self.assertEqual(e["error"]["details"][0]["reason"], "UNAUTHENTICATED")
        runs = [x for x in self.d.log_lines() if x.get("msg") == "request"
                and x.get("codec") == "grpc" and x.get("principal")]
        self.assertEqual(runs[-1]["principal"], "alice")


if __name__ == "__main__":
    unittest.main()
