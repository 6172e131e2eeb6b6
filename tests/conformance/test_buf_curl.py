# SPDX-License-Identifier: Apache-2.0
"""buf curl (npm's @bufbuild/buf, pinned by package-lock.json), which
nobody here wrote, against a real wasm plimsolld with NO schema: it learns
every method from the daemon's server reflection (connect-go's grpcreflect
client, v1 first, then v1alpha), over h2c and over TLS, lists the services
and methods, and calls Describe, Run and health's Check from what it
learned.  In buf's default protocol, Connect (reflection a Connect
bidirectional stream), and in gRPC's and gRPC-Web's; the daemon's log
says which protocol each reflection stream spoke.  Without a key,
reflection refuses (PLIMSOLL_REFLECTION=key, the default).

Run: cd tests/conformance && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_buf_curl
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import Daemon  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402
from plimsoll_test.pki import make_pki  # noqa: E402

BUF = os.path.join(HERE, "node_modules", ".bin", "buf")
WASM = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "100000",
        "SANDBOX_RATE_BURST": "1000"}


def setUpModule():
    subprocess.run([os.path.join(HERE, "setup")], check=True, stdout=subprocess.DEVNULL)


class BufCurl(unittest.TestCase):
    """h2c: buf curl --http2-prior-knowledge, in its default protocol (Connect)."""
    base_args = ["--http2-prior-knowledge"]
    scheme = "http"
    codec = "connect+proto"  # the log's name for what reflection spoke

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env=WASM).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def url(self, path=""):
        return "%s://127.0.0.1:%d%s" % (self.scheme, self.d.port, path)

    def buf(self, *args, key="alice", reflect_key="alice"):
        argv = [BUF, "curl"] + self.base_args
        if key:
            argv += ["-H", "Authorization: Bearer " + self.d.keys[key]]
        if reflect_key:
            argv += ["--reflect-header", "Authorization: Bearer " + self.d.keys[reflect_key]]
        p = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, HOME=tempfile.mkdtemp()))
        return p.returncode, p.stdout, p.stderr

    def assert_reflection_spoke(self):
        codecs = {x.get("codec") for x in self.d.log_lines() if x.get("method") == "reflection"}
        self.assertEqual(codecs, {self.codec})

    def test_lists_services_and_methods(self):
        code, out, err = self.buf("--list-services", self.url(), key=None)
        self.assertEqual(code, 0, err)
        self.assert_reflection_spoke()
        self.assertEqual(out.split(), ["grpc.health.v1.Health",
                                       "grpc.reflection.v1.ServerReflection",
                                       "grpc.reflection.v1alpha.ServerReflection",
                                       "plimsoll.v1.SandboxService"])
        code, out, err = self.buf("--list-methods", self.url(), key=None)
        self.assertEqual(code, 0, err)
        for m in ("Describe", "Run", "RunStream", "OpenSession", "RunInSession", "RunCell",
                  "RunCellStream", "CloseSession", "ListSessions", "GetSession",
                  "ExtendSession", "Explain"):
            self.assertIn("plimsoll.v1.SandboxService/" + m, out.split())

    def test_v1alpha_alone(self):
        code, out, err = self.buf("--reflect-protocol", "grpc-v1alpha", "--list-services",
                                  self.url(), key=None)
        self.assertEqual(code, 0, err)
        self.assertIn("plimsoll.v1.SandboxService", out.split())
        self.assert_reflection_spoke()

    def test_describe_and_run_with_no_schema(self):
        code, out, err = self.buf(self.url("/plimsoll.v1.SandboxService/Describe"))
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["provider"], "wasm")
        code, out, err = self.buf("-d", json.dumps(js("console.log(6 * 7)")),
                                  self.url("/plimsoll.v1.SandboxService/Run"))
        self.assertEqual(code, 0, err)
        r = json.loads(out)
        self.assertEqual((r["stdout"], r["isolation"]), ("42\n", "process"))

    def test_health_check_with_no_schema(self):
        code, out, err = self.buf(self.url("/grpc.health.v1.Health/Check"), key=None)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out), {"status": "SERVING"})

    def test_reflection_without_a_key_is_refused(self):
        code, out, err = self.buf("--list-services", self.url(), key=None, reflect_key=None)
        self.assertNotEqual(code, 0)
        self.assertIn("not authenticated", err)  # buf's words for UNAUTHENTICATED
        self.assertNotIn("SandboxService", out + err)


class BufCurlOverTLS(BufCurl):
    """TLS: ALPN h2, the daemon's certificate checked against the test CA;
    Connect."""
    scheme = "https"
    protocol = []

    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp(prefix="plimsoll-buf-tls-")
        cls.pki = make_pki(d)
        cls.base_args = cls.protocol + ["--cacert", cls.pki["ca"] + ".pem"]
        cls.d = Daemon(env=dict(WASM, PLIMSOLL_TLS_CERT_FILE=cls.pki["server"] + ".pem",
                                PLIMSOLL_TLS_KEY_FILE=cls.pki["server"] + ".key")).start()


class BufCurlGrpcOverTLS(BufCurlOverTLS):
    """TLS, --protocol grpc."""
    protocol = ["--protocol", "grpc"]
    codec = "grpc"


class BufCurlGrpcWeb(BufCurl):
    """h2c, --protocol grpcweb: reflection a gRPC-Web stream over HTTP/2."""
    base_args = ["--protocol", "grpcweb", "--http2-prior-knowledge"]
    codec = "grpc-web"


if __name__ == "__main__":
    unittest.main()
