# SPDX-License-Identifier: Apache-2.0
"""plimsoll's MCP server against the MCP project's own conformance suite,
which nobody here wrote (@modelcontextprotocol/conformance, pinned by
package-lock.json): `conformance server --url URL --scenario S -o DIR` for
each scenario that applies to a server with plimsoll's own tools, against
a real wasm plimsolld's /mcp; every check of every scenario must be
SUCCESS (a WARNING is printed, not failed).

The suite sends no Authorization header, and the daemon serves /mcp only
with a key, so the suite talks to a small loopback forwarder (Forwarder,
below) that adds `Authorization: Bearer KEY` to each request and changes
nothing else: the request line, Host, Origin and every other header pass
as sent, the body byte for byte, and the answer comes back as the daemon
wrote it.

dns-rebinding-protection sends Host and Origin `evil.example.com` (which
must be refused with a 4xx) and then Host and Origin of the URL it was
given, the forwarder's (which must be accepted): plimsoll takes an Origin
that is the request's own (its scheme and Host) on a daemon that listens
on loopback, and refuses a Host that is not local there.

Run: cd tests/mcp && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_mcp_conformance
"""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import Daemon  # noqa: E402

CONFORMANCE = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "conformance", "dist",
                           "index.js")

# The scenarios that apply to a server with plimsoll's own tools.
SCENARIOS = ["server-initialize", "ping", "tools-list", "resources-list",
             "dns-rebinding-protection"]
# The suite's other server scenarios (0.1.13's `list --server`), and why
# none applies: each needs something of the suite's own that a server must
# be written for (its test_* tools, test:// resources and prompts), or a
# part of MCP that plimsoll does not offer (prompts, sampling, elicitation,
# logging, completions, resource templates, subscriptions, or a
# server-to-client SSE stream: /mcp answers each request with one JSON
# response and GET with 405).
NOT_APPLICABLE = {
    "logging-set-level": "logging/setLevel: plimsoll offers no logging capability",
    "completion-complete": "completion/complete: plimsoll offers no completions",
    "tools-call-simple-text": "the suite's own tool test_simple_text",
    "tools-call-image": "the suite's own tool test_image_content",
    "tools-call-audio": "the suite's own tool test_audio_content",
    "tools-call-embedded-resource": "the suite's own tool test_embedded_resource",
    "tools-call-mixed-content": "the suite's own tool test_multiple_content_types",
    "tools-call-with-logging": "the suite's own tool, sending log notifications (no logging)",
    "tools-call-error": "the suite's own tool test_error_handling",
    "tools-call-with-progress": "the suite's own tool, sending progress notifications",
    "tools-call-sampling": "the suite's own tool, asking the client for sampling",
    "tools-call-elicitation": "the suite's own tool, asking the client for elicitation",
    "json-schema-2020-12": "the suite's own tool json_schema_2020_12_tool",
    "elicitation-sep1034-defaults": "elicitation, which plimsoll never asks for",
    "elicitation-sep1330-enums": "elicitation, which plimsoll never asks for",
    "server-sse-polling": "the suite's own tool test_reconnection and an SSE stream",
    "server-sse-multiple-streams": "SSE streams: /mcp answers every POST with JSON",
    "resources-read-text": "the suite's own resource test://static-text",
    "resources-read-binary": "the suite's own resource test://static-binary",
    "resources-templates-read": "the suite's own template test://template/{id}/data "
                                "(plimsoll lists no templates)",
    "resources-subscribe": "resources/subscribe: plimsoll offers no subscriptions",
    "resources-unsubscribe": "resources/unsubscribe: plimsoll offers no subscriptions",
    "prompts-list": "prompts: plimsoll offers none",
    "prompts-get-simple": "the suite's own prompt test_simple_prompt",
    "prompts-get-with-args": "the suite's own prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "the suite's own prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "the suite's own prompt test_prompt_with_image",
}


def setup_stack():
    subprocess.run([os.path.join(HERE, "setup")], check=True, stdout=subprocess.DEVNULL)


class Forwarder:
    """127.0.0.1:port -> the daemon, adding `Authorization: Bearer KEY` to
    each request's head (after its request line) and nothing else.  One
    upstream connection per client connection: the requests on it go up
    in order (each body as its Content-Length or chunks say, byte for
    byte), and the answers' bytes come back as they came."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def start(self, upstream_port, key):
        self.upstream, self.auth = upstream_port, b"Authorization: Bearer %s\r\n" % key.encode()
        threading.Thread(target=self.accept, daemon=True).start()

    def stop(self):
        self.sock.close()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
                u = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                return
            threading.Thread(target=self.requests, args=(c, u), daemon=True).start()
            threading.Thread(target=self.answers, args=(u, c), daemon=True).start()

    def answers(self, u, c):
        try:
            while data := u.recv(65536):
                c.sendall(data)
        except OSError:
            pass
        for s in (c, u):
            s.close()

    def requests(self, c, u):
        f = c.makefile("rb")
        try:
            while line := f.readline():
                head = [line]
                while head[-1] not in (b"\r\n", b"\n", b""):
                    head.append(f.readline())
                fields = {}
                for h in head[1:-1]:
                    name, _, value = h.partition(b":")
                    fields[name.strip().lower()] = value.strip().lower()
                u.sendall(line + self.auth + b"".join(head[1:]))
                if b"chunked" in fields.get(b"transfer-encoding", b""):
                    while True:
                        size = f.readline()
                        u.sendall(size)
                        if int(size.split(b";")[0], 16) == 0:
                            break
                        u.sendall(f.read(int(size.split(b";")[0], 16) + 2))
                    while (t := f.readline()) not in (b"\r\n", b"\n", b""):
                        u.sendall(t)
                    u.sendall(t)
                else:
                    u.sendall(f.read(int(fields.get(b"content-length", b"0"))))
        except (OSError, ValueError):
            pass
        try:
            u.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Conformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        setup_stack()
        cls.fwd = Forwarder()
        origin = "http://127.0.0.1:%d" % cls.fwd.port
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        cls.fwd.start(cls.d.port, cls.d.keys["alice"])
        cls.url = origin + "/mcp"

    @classmethod
    def tearDownClass(cls):
        cls.fwd.stop()
        cls.d.stop()

    def node(self, *args, timeout=180):
        return subprocess.run(["node", CONFORMANCE] + list(args), capture_output=True, text=True,
                              timeout=timeout, cwd=HERE)

    def test_the_suite_names_these_scenarios(self):
        p = self.node("list", "--server")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = {x.strip()[2:] for x in p.stdout.splitlines() if x.strip().startswith("- ")}
        self.assertLessEqual(set(SCENARIOS), listed, p.stdout)
        # Every other scenario is one the comment above says does not apply.
        self.assertEqual(listed - set(SCENARIOS), set(NOT_APPLICABLE), p.stdout)

    def scenario(self, name):
        out = tempfile.mkdtemp(prefix="plimsoll-mcp-conformance-")
        p = self.node("server", "--url", self.url, "--scenario", name, "-o", out)
        why = "exit %d\nstdout: %s\nstderr: %s" % (p.returncode, p.stdout, p.stderr)
        files = glob.glob(os.path.join(out, "*", "checks.json"))
        self.assertEqual(len(files), 1, why)
        with open(files[0]) as f:
            checks = json.load(f)
        self.assertTrue(checks, why)
        for c in checks:
            if c["status"] == "WARNING":
                print("%s: WARNING %s: %s %s" % (name, c["id"], c.get("errorMessage", ""),
                                                  json.dumps(c.get("details"))), file=sys.stderr)
            else:
                self.assertEqual(c["status"], "SUCCESS", "%s\n%s" % (json.dumps(c, indent=1), why))
        return checks

    def test_server_initialize(self):
        self.scenario("server-initialize")

    def test_ping(self):
        self.scenario("ping")

    def test_tools_list(self):
        checks = self.scenario("tools-list")
        self.assertIn("run_code", checks[0]["details"]["tools"], checks)

    def test_resources_list(self):
        checks = self.scenario("resources-list")
        self.assertIn("plimsoll://describe", checks[0]["details"]["resources"], checks)

    def test_dns_rebinding_protection(self):
        checks = self.scenario("dns-rebinding-protection")
        by_id = {c["id"]: c for c in checks}
        self.assertEqual(set(by_id), {"localhost-host-rebinding-rejected",
                                      "localhost-host-valid-accepted"}, checks)
        # The refusal is the daemon's own 403, through the forwarder.
        self.assertEqual(by_id["localhost-host-rebinding-rejected"]["details"]["statusCode"], 403)


if __name__ == "__main__":
    unittest.main()
