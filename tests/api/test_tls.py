# SPDX-License-Identifier: Apache-2.0
"""TLS on the daemon's one port: certificates made at test time by the
openssl CLI, calls over TLS with HTTP/1.1 and HTTP/2 (ALPN) by curl and by
Python's ssl, TLS 1.1 and earlier refused, client certificates mapped to
principals (and one the file does not list mapped to nobody), plain HTTP
refused to a peer beyond loopback and kept for loopback, SIGHUP reloading
the certificate without ending a run in progress, a reload that fails
keeping the old one, a certificate removed and reloaded refused on the
connections already open, and the startup checks of the settings.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_tls
"""
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test import h2raw  # noqa: E402
from plimsoll_test.harness import Daemon, error_info, run_startup  # noqa: E402
from plimsoll_test.payloads import js  # noqa: E402
from plimsoll_test.pki import fingerprint, make_pki  # noqa: E402

SERVICE = "/plimsoll.v1.SandboxService/"


class TLS(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="plimsoll-tls-")
        cls.pki = make_pki(cls.dir)
        # The served certificate is a copy the test can replace (SIGHUP).
        cls.cert = os.path.join(cls.dir, "served.pem")
        cls.key = os.path.join(cls.dir, "served.key")
        for src, dst in ((cls.pki["server"] + ".pem", cls.cert),
                         (cls.pki["server"] + ".key", cls.key)):
            with open(src, "rb") as a, open(dst, "wb") as b:
                b.write(a.read())
        cls.clients = os.path.join(cls.dir, "client-certs")
        with open(cls.clients, "w") as f:
            f.write("# principal sha256(DER)\nalice %s\n" % fingerprint(cls.pki["alice"] + ".pem"))
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_TLS_CERT_FILE": cls.cert,
                            "PLIMSOLL_TLS_KEY_FILE": cls.key,
                            "PLIMSOLL_TLS_CLIENT_CERTS_FILE": cls.clients,
                            "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": "2000"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def context(self, client=None, alpn=("http/1.1",)):
        ctx = ssl.create_default_context(cafile=self.pki["ca"] + ".pem")
        if client:
            ctx.load_cert_chain(self.pki[client] + ".pem", self.pki[client] + ".key")
        ctx.set_alpn_protocols(list(alpn))
        return ctx

    def https(self, method, body, key="alice", client=None, headers=None):
        c = http.client.HTTPSConnection(self.d.host, self.d.port, timeout=30,
                                        context=self.context(client))
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + self.d.keys.get(key, key)
        h.update(headers or {})
        try:
            c.request("POST", SERVICE + method, body=json.dumps(body), headers=h)
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()

    def curl(self, *args):
        p = subprocess.run(["curl", "-sS", "--cacert", self.pki["ca"] + ".pem"] + list(args),
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def test_http1_and_http2_over_tls(self):
        status, body = self.https("Run", js("console.log(6 * 7)"))
        self.assertEqual((status, body["stdout"]), (200, "42\n"))
        for flag in ("--http1.1", "--http2"):
            rc, out, err = self.curl(flag, "-w", "\n%{http_version}",
                                     "-H", "Authorization: Bearer " + self.d.keys["alice"],
                                     "-H", "Content-Type: application/json",
                                     "-d", json.dumps(js("console.log(1)")),
                                     "https://127.0.0.1:%d%sRun" % (self.d.port, SERVICE))
            self.assertEqual(rc, 0, err)
            body, version = out.rsplit("\n", 1)
            self.assertEqual(json.loads(body)["stdout"], "1\n")
            self.assertEqual(version, "2" if flag == "--http2" else "1.1")

    def test_old_tls_is_refused(self):
        for proto in ("-tls1", "-tls1_1"):
            p = subprocess.run(["openssl", "s_client", proto, "-connect",
                                "127.0.0.1:%d" % self.d.port], input="", capture_output=True,
                               text=True, timeout=30)
            self.assertNotIn("BEGIN CERTIFICATE", p.stdout + p.stderr, proto)
            self.assertNotEqual(p.returncode, 0, proto)
        ctx = self.context()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection((self.d.host, self.d.port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                self.assertEqual(t.version(), "TLSv1.2")  # 1.2 is still taken

    def test_a_client_certificate_is_a_principal(self):
        # alice's certificate, no bearer key: she is alice.
        status, body = self.https("Run", js("console.log(1)"), key=None, client="alice")
        self.assertEqual(status, 200, body)
        log = [x for x in self.d.log_lines() if x.get("msg") == "request"]
        self.assertEqual(log[-1]["principal"], "alice")
        # Over HTTP/2 too.
        rc, out, err = self.curl("--http2", "--cert", self.pki["alice"] + ".pem", "--key",
                                 self.pki["alice"] + ".key", "-H",
                                 "Content-Type: application/json", "-d", "{}",
                                 "https://127.0.0.1:%d%sDescribe" % (self.d.port, SERVICE))
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["provider"], "wasm")
        # A certificate the file does not list is nobody; none at all too.
        for client in ("mallory", None):
            status, body = self.https("Run", js("1"), key=None, client=client)
            self.assertEqual(status, 401, body)
            self.assertEqual(error_info(body)[0]["reason"], "UNAUTHENTICATED")
        # A bearer key, when sent, decides: a wrong one is refused even
        # with alice's certificate.
        status, body = self.https("Run", js("1"), key="wrong", client="alice")
        self.assertEqual(status, 401, body)
        status, body = self.https("Run", js("console.log(1)"), key="bob", client="alice")
        self.assertEqual(status, 200, body)
        log = [x for x in self.d.log_lines() if x.get("msg") == "request"]
        self.assertEqual(log[-1]["principal"], "bob")

    def test_mcp_takes_a_client_certificate_as_the_api_does(self):
        """/mcp (docs/mcp.md) authenticates as every call: alice's
        certificate opens an MCP session that is hers alone; a certificate
        the file does not list is nobody."""
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}}})
        url = "https://127.0.0.1:%d/mcp" % self.d.port
        for flag in ("--http1.1", "--http2"):
            rc, out, err = self.curl(flag, "-i", "--cert", self.pki["alice"] + ".pem", "--key",
                                     self.pki["alice"] + ".key", "-H",
                                     "Content-Type: application/json", "-d", init, url)
            self.assertEqual(rc, 0, err)
            head, _, body = out.partition("\n\n")  # curl's CRLF, read as text
            self.assertIn(" 200", head.split("\n")[0], out)
            sid = [x.split(":", 1)[1].strip() for x in head.split("\n")
                   if x.lower().startswith("mcp-session-id:")][0]
            self.assertEqual(json.loads(body)["result"]["serverInfo"]["name"], "plimsolld")
            ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            rc, out, err = self.curl(flag, "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                     "Authorization: Bearer " + self.d.keys["bob"], "-H",
                                     "Content-Type: application/json", "-H",
                                     "Mcp-Session-Id: " + sid, "-d", ping, url)
            self.assertEqual(out, "404", err)  # bob's key: not his session
            rc, out, err = self.curl(flag, "-o", "/dev/null", "-w", "%{http_code}", "--cert",
                                     self.pki["mallory"] + ".pem", "--key",
                                     self.pki["mallory"] + ".key", "-H",
                                     "Content-Type: application/json", "-d", init, url)
            self.assertEqual(out, "401", err)

    def test_plain_http_is_for_loopback_alone(self):
        # From loopback: plain HTTP still answers (development, probes).
        self.assertEqual(self.d.rpc("Describe", {})[0], 200)
        # From an address beyond loopback: closed unanswered.
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
        addrs = [a for a in out if ":" not in a and not a.startswith("127.")]
        if not addrs:
            self.fail("this machine has no address beyond loopback to test from")
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_TLS_CERT_FILE": self.cert,
                        "PLIMSOLL_TLS_KEY_FILE": self.key},
                   listen="0.0.0.0:0").start()
        try:
            s = socket.create_connection((addrs[0], d.port), timeout=10)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                self.assertEqual(s.recv(100), b"")
            except ConnectionResetError:
                pass
            s.close()
            # TLS from the same address is served.
            ctx = ssl.create_default_context(cafile=self.pki["ca"] + ".pem")
            ctx.check_hostname = False
            c = http.client.HTTPSConnection(addrs[0], d.port, timeout=10, context=ctx)
            c.request("GET", "/healthz")
            self.assertEqual(c.getresponse().status, 200)
            c.close()
        finally:
            d.stop()

    def test_sighup_reloads_without_ending_a_run(self):
        results = {}

        def long_run():
            results["run"] = self.https("Run", js(
                "let t = Date.now(); while (Date.now() - t < 1500) {} console.log('done')"))
        t = threading.Thread(target=long_run)
        t.start()
        time.sleep(0.4)
        for src, dst in ((self.pki["server2"] + ".pem", self.cert),
                         (self.pki["server2"] + ".key", self.key)):
            with open(src, "rb") as a, open(dst + ".new", "wb") as b:
                b.write(a.read())
            os.replace(dst + ".new", dst)
        self.d.proc.send_signal(signal.SIGHUP)
        t.join(30)
        self.assertEqual(results["run"][0], 200)
        self.assertEqual(results["run"][1]["stdout"], "done\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any(x.get("msg") == "reloaded" for x in self.d.log_lines()):
                break
            time.sleep(0.05)
        served = ssl.get_server_certificate((self.d.host, self.d.port))
        with open(self.pki["server2"] + ".pem") as f:
            self.assertEqual(ssl.PEM_cert_to_DER_cert(served), ssl.PEM_cert_to_DER_cert(f.read()))
        # A reload that fails keeps what was served.
        with open(self.key, "w") as f:
            f.write("not a key\n")
        self.d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if any(x.get("msg") == "reload failed" for x in self.d.log_lines()):
                break
            time.sleep(0.05)
        self.assertTrue(any(x.get("msg") == "reload failed" for x in self.d.log_lines()))
        self.assertEqual(self.https("Describe", {})[0], 200)
        with open(self.pki["server2"] + ".key", "rb") as a, open(self.key, "wb") as b:
            b.write(a.read())

    def test_a_slow_or_broken_handshake(self):
        # A ClientHello's first byte, then nothing: closed at the deadline.
        s = socket.create_connection((self.d.host, self.d.port), timeout=10)
        s.sendall(b"\x16\x03\x01")
        t0 = time.monotonic()
        try:
            self.assertEqual(s.recv(100), b"")
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - t0, 8)
        s.close()
        # Garbage after it: closed, the daemon answers the next caller.
        s = socket.create_connection((self.d.host, self.d.port), timeout=10)
        s.sendall(b"\x16" + os.urandom(300))
        s.settimeout(10)
        try:
            s.recv(100)
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
        self.assertEqual(self.https("Describe", {})[0], 200)


class Revocation(unittest.TestCase):
    """A client certificate removed from the file and SIGHUP sent: from the
    next request on it is nobody, on connections opened before the reload
    too (HTTP/2 and HTTP/1.1 over TLS, kept alive); put back and reloaded,
    it is its principal again on the same connections."""

    def test_a_removed_certificate_is_nobody_on_open_connections(self):
        tmp = tempfile.mkdtemp(prefix="plimsoll-tls-rev-")
        pki = make_pki(tmp)
        clients = os.path.join(tmp, "client-certs")
        listed = "alice %s\n" % fingerprint(pki["alice"] + ".pem")

        def write_clients(text):
            with open(clients + ".new", "w") as f:
                f.write("# principal sha256(DER)\n" + text)
            os.replace(clients + ".new", clients)

        def reload(times):
            d.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if sum(x.get("msg") == "reloaded" for x in d.log_lines()) >= times:
                    return
                time.sleep(0.05)
            self.fail("no reload logged")

        write_clients(listed)
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm",
                        "PLIMSOLL_TLS_CERT_FILE": pki["server"] + ".pem",
                        "PLIMSOLL_TLS_KEY_FILE": pki["server"] + ".key",
                        "PLIMSOLL_TLS_CLIENT_CERTS_FILE": clients}).start()
        ctx = ssl.create_default_context(cafile=pki["ca"] + ".pem")
        ctx.load_cert_chain(pki["alice"] + ".pem", pki["alice"] + ".key")
        h2ctx = ssl.create_default_context(cafile=pki["ca"] + ".pem")
        h2ctx.load_cert_chain(pki["alice"] + ".pem", pki["alice"] + ".key")
        h2ctx.set_alpn_protocols(["h2"])
        h1 = http.client.HTTPSConnection(d.host, d.port, timeout=30, context=ctx)
        h2 = h2raw.Conn.__new__(h2raw.Conn)
        h2.s = h2ctx.wrap_socket(socket.create_connection((d.host, d.port), timeout=10),
                                 server_hostname="127.0.0.1")
        h2.buf, h2.filed = b"", {}
        h2.send(h2raw.PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0))
        stream = [1]  # the next client stream's id

        def both():
            """(HTTP/1.1 status, HTTP/2 answer's stdout or refusal reason)."""
            h1.request("POST", SERVICE + "Run", body=json.dumps(js("console.log(1)")),
                       headers={"Content-Type": "application/json"})
            r = h1.getresponse()
            status = r.status
            r.read()
            sid = stream[0]
            stream[0] += 2
            h2.headers(sid, h2raw.request_headers("Run"))
            h2.data(sid, json.dumps(js("console.log(1)")).encode())
            answer = h2.json_answer(sid)
            return status, answer.get("stdout", error_info(answer)[0]["reason"]
                                      if "code" in answer else None)

        try:
            self.assertEqual(both(), (200, "1\n"))
            write_clients("")
            reload(1)
            self.assertEqual(both(), (401, "UNAUTHENTICATED"))
            write_clients(listed)
            reload(2)
            self.assertEqual(both(), (200, "1\n"))
        finally:
            h1.close()
            h2.close()
            d.stop()


class Settings(unittest.TestCase):
    def test_startup_checks(self):
        d = tempfile.mkdtemp(prefix="plimsoll-tls-set-")
        pki = make_pki(d)
        bad_clients = os.path.join(d, "bad-clients")
        with open(bad_clients, "w") as f:
            f.write("alice not-a-fingerprint\n")
        cases = [
            ({"PLIMSOLL_TLS_CERT_FILE": pki["server"] + ".pem"}, "set both or neither"),
            ({"PLIMSOLL_TLS_KEY_FILE": pki["server"] + ".key"}, "set both or neither"),
            ({"PLIMSOLL_TLS_CLIENT_CERTS_FILE": bad_clients}, "needs PLIMSOLL_TLS_CERT_FILE"),
            ({"PLIMSOLL_TLS_CERT_FILE": pki["server"] + ".pem",
              "PLIMSOLL_TLS_KEY_FILE": pki["alice"] + ".key"}, "not the certificate's key"),
            ({"PLIMSOLL_TLS_CERT_FILE": os.path.join(d, "missing.pem"),
              "PLIMSOLL_TLS_KEY_FILE": pki["server"] + ".key"}, "PLIMSOLL_TLS_CERT_FILE"),
            ({"PLIMSOLL_TLS_CERT_FILE": pki["server"] + ".pem",
              "PLIMSOLL_TLS_KEY_FILE": pki["server"] + ".key",
              "PLIMSOLL_TLS_CLIENT_CERTS_FILE": bad_clients}, "line 1"),
        ]
        for env, says in cases:
            with self.subTest(env=env):
                rc, text = run_startup(dict(env, SANDBOX_PROVIDER="wasm"))
                self.assertNotEqual(rc, 0)
                self.assertIn(says, text)

    def test_plain_http_beyond_loopback_is_warned_about(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}, listen="0.0.0.0:0").start()
        try:
            warned = [x for x in d.log_lines() if x.get("msg") == "plain HTTP"]
            self.assertTrue(warned)
            self.assertIn("TLS", warned[0]["detail"])
        finally:
            d.stop()
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        try:
            self.assertFalse([x for x in d.log_lines() if x.get("msg") == "plain HTTP"])
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
