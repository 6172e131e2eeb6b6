# SPDX-License-Identifier: Apache-2.0
"""The TypeScript client in a real browser on another origin: Debian's
headless Chromium (plimsoll_test.browser) loads a page from a second
loopback origin (a Python http.server on 127.0.0.2) that imports the
built client (clients/typescript, npm ci and tsc here) as an ES module and
calls a wasm daemon whose PLIMSOLL_CORS_ORIGINS lists that origin: a run,
a streaming run and a refusal read through CORS, over plain HTTP/1.1 and
over TLS with HTTP/2 (Chromium trusting the test's certificate by its
key).  The same page from an origin not listed (127.0.0.3): the browser
blocks the call, the client throws a transport failure, and the daemon
ran nothing (its metrics and its log).

Run: cd tests/console && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_cors
"""
import base64
import functools
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.browser import Browser  # noqa: E402
from plimsoll_test.harness import ROOT, Daemon  # noqa: E402
from plimsoll_test.pki import make_pki, openssl  # noqa: E402

CLIENT = os.path.join(ROOT, "clients", "typescript")


def build_client():
    """npm ci when the lock changed (as clients/typescript/run-tests does),
    then tsc into dist/."""
    lock = os.path.join(CLIENT, "package-lock.json")
    stamp = os.path.join(CLIENT, "node_modules", ".package-lock.sha256")
    import hashlib
    with open(lock, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    try:
        with open(stamp) as f:
            have = f.read().strip()
    except OSError:
        have = ""
    if have != want:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT, check=True,
                       capture_output=True)
        with open(stamp, "w") as f:
            f.write(want + "\n")
    subprocess.run(["npx", "--no-install", "tsc", "-p", "."], cwd=CLIENT, check=True,
                   capture_output=True)


class Pages:
    """A static site on one loopback address: index.html and the built
    client under /client/."""

    def __init__(self, host, root):
        handler = functools.partial(Quiet, directory=root)
        self.server = http.server.ThreadingHTTPServer((host, 0), handler)
        self.origin = "http://%s:%d" % (host, self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Watching(Browser):
    """Also keeps each answer's URL and protocol ("http/1.1", "h2")."""

    def __init__(self, **kw):
        self.protocols = []
        super().__init__(**kw)

    def _event(self, m):
        if m.get("method") == "Network.responseReceived":
            r = m["params"]["response"]
            self.protocols.append((r["url"], r.get("protocol")))
        super()._event(m)


CALLS = """(async () => {
  const m = await import(%(origin)s + "/client/index.js");
  const c = new m.Client({ url: %(daemon)s, apiKey: %(key)s, timeoutMs: 30000 });
  const out = {};
  try {
    const r = await c.runSnippet({ language: "javascript", code: "console.log(6 * 7)" });
    out.run = { stdout: r.stdout, isolation: r.isolation, digest: r.record && r.record.digest };
    const chunks = [];
    const code = "for (let i = 0; i < 3; i++) console.log('line ' + i)";
    const s = await c.runStream({ snippet: { language: "javascript", code } },
                                (ch) => { chunks.push(new TextDecoder().decode(ch.stdout)); });
    out.stream = { stdout: s.stdout, chunks: chunks.join(""), n: chunks.length };
    try {
      await new m.Client({ url: %(daemon)s, apiKey: "plk_not_a_key" }).describe();
    } catch (e) {
      out.refusal = { name: e.constructor.name, reason: e.reason, status: e.httpStatus };
    }
  } catch (e) {
    out.error = { name: e.constructor.name, code: e.code, dispatched: e.dispatched,
                  infrastructure: e instanceof m.InfrastructureError,
                  refusal: e instanceof m.RefusalError, message: String(e.message) };
  }
  return out;
})()"""


class CrossOrigin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build_client()
        cls.dir = tempfile.mkdtemp(prefix="plimsoll-cors-")
        site = os.path.join(cls.dir, "site")
        os.mkdir(site)
        with open(os.path.join(site, "index.html"), "w") as f:
            f.write("<!doctype html><meta charset=utf-8><title>another origin</title>\n")
        os.symlink(os.path.join(CLIENT, "dist"), os.path.join(site, "client"))
        cls.listed = Pages("127.0.0.2", site)
        cls.unlisted = Pages("127.0.0.3", site)
        pki = make_pki(cls.dir)
        # Chromium trusts the daemon's certificate by its key's SHA-256.
        openssl("x509", "-in", pki["server"] + ".pem", "-pubkey", "-noout", "-out", "server.pub",
                cwd=cls.dir)
        openssl("pkey", "-pubin", "-in", "server.pub", "-outform", "DER", "-out", "server.spki",
                cwd=cls.dir)
        with open(os.path.join(cls.dir, "server.spki"), "rb") as f:
            import hashlib
            spki = base64.b64encode(hashlib.sha256(f.read()).digest()).decode()
        # One port: TLS (HTTP/2 by ALPN) and, from loopback, plain HTTP/1.1.
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm",
                            "PLIMSOLL_CORS_ORIGINS": cls.listed.origin,
                            "PLIMSOLL_TLS_CERT_FILE": pki["server"] + ".pem",
                            "PLIMSOLL_TLS_KEY_FILE": pki["server"] + ".key"}).start()
        try:
            cls.b = Watching(args=["--ignore-certificate-errors-spki-list=" + spki])
        except Exception:
            cls.d.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.b.close()
        cls.d.stop()
        cls.listed.close()
        cls.unlisted.close()

    def calls(self, page, daemon):
        self.b.goto(page.origin + "/index.html")
        return self.b.eval(CALLS % {"origin": json.dumps(page.origin), "daemon": json.dumps(daemon),
                                    "key": json.dumps(self.d.keys["alice"])})

    def runs(self):
        """Runs the daemon answered, from its metrics."""
        status, _, text = self.d.request("GET", "/metrics", headers={
            "Authorization": "Bearer " + self.d.keys["bob"]})
        self.assertEqual(status, 200)
        return sum(int(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines()
                   if line.startswith("plimsoll_runs_total{"))

    def check_listed(self, daemon, protocol):
        before = len(self.b.protocols)
        out = self.calls(self.listed, daemon)
        self.assertNotIn("error", out, out)
        self.assertEqual(out["run"]["stdout"], "42\n")
        self.assertEqual(out["run"]["isolation"], "process")
        self.assertRegex(out["run"]["digest"], "^[0-9a-f]{64}$")
        self.assertEqual(out["stream"]["stdout"], "line 0\nline 1\nline 2\n")
        self.assertEqual(out["stream"]["chunks"], out["stream"]["stdout"])
        # A refusal is read, not blocked: its answer carries the grant too.
        self.assertEqual(out["refusal"], {"name": "UnauthenticatedError",
                                          "reason": "UNAUTHENTICATED", "status": 401})
        seen = [p for u, p in self.b.protocols[before:] if u.startswith(daemon)]
        self.assertTrue(seen)
        self.assertEqual(set(seen), {protocol})

    def test_listed_origin_over_http1(self):
        self.check_listed("http://%s:%d" % (self.d.host, self.d.port), "http/1.1")

    def test_listed_origin_over_tls_and_http2(self):
        self.check_listed("https://%s:%d" % (self.d.host, self.d.port), "h2")

    def test_unlisted_origin_is_blocked_and_nothing_runs(self):
        for daemon in ("http://%s:%d" % (self.d.host, self.d.port),
                       "https://%s:%d" % (self.d.host, self.d.port)):
            with self.subTest(daemon=daemon):
                runs = self.runs()
                self.b.errors.clear()
                out = self.calls(self.unlisted, daemon)
                self.assertEqual(set(out), {"error"}, out)
                self.assertTrue(out["error"]["infrastructure"], out)
                self.assertFalse(out["error"]["refusal"], out)
                self.assertTrue(any("CORS policy" in e for e in self.b.errors), self.b.errors)
                time.sleep(0.2)  # the log line is written after the answer
                self.assertEqual(self.runs(), runs)
                refused = [l for l in self.d.log_lines() if l.get("method") == "preflight"
                           and l.get("cors") == "an origin not in PLIMSOLL_CORS_ORIGINS"]
                self.assertTrue(refused)


if __name__ == "__main__":
    unittest.main()
