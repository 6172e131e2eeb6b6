# SPDX-License-Identifier: Apache-2.0
"""Grants on the e2b provider through the guard, against the local fake:
a VM's only allowed egress is the guard's address; the guest presents its
own run's token; the guard hands the request to that run's broker (the
routes, limits and counts of docker's broker).  Refusals: no token, a
wrong one, one of a run that ended; the VM reaches nothing else.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_guard
"""
import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_e2b_provider import E2BDaemon  # noqa: E402  (tests/lib on the path)
from plimsoll_test.grants import (GUARD_CALL as CALL, TOKEN, GrantFiles, free_port,  # noqa: E402
                                  grant_env, profile, token_cred)
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

class GuardDaemon(E2BDaemon):
    """E2BDaemon with the guard, a test API and a grants file to it."""

    @classmethod
    def settings(cls):
        gw = cls.fake.gateway()
        cls.guard = "http://%s:%d" % (gw, free_port(gw))
        env = super().settings()
        env.update(E2B_GUARD_URL=cls.guard, SANDBOX_E2B_GUARD_LISTEN=gw)
        env.update(grant_env(cls.files.path))
        return env

    @classmethod
    def setUpClass(cls):
        cls.files = GrantFiles()
        cls.up = Upstream(Check(token=TOKEN))
        cls.files.write({"items": profile(cls.up.url, token_cred())})
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.up.close()
        cls.files.close()


class Guard(GuardDaemon):
    def test_describe_says_grants(self):
        status, d = self.d.rpc("Describe", {})
        self.assertTrue(d["operations"]["snippet"]["grants"], d)

    def test_a_grant_through_the_guard(self):
        r = self.run_ok({"grant_profile": "items",
                         "snippet": {"language": "python", "code": CALL}})
        out = json.loads(r["stdout"])
        self.assertEqual(out["ok"][0], 200, out)
        self.assertEqual(json.loads(out["ok"][1])["path"], "/items/1")
        self.assertEqual(out["route"][0], 403, out)     # the broker's own refusal
        self.assertEqual(out["none"][0], 401, out)      # no token: no broker
        self.assertEqual(out["wrong"][0], 401, out)
        self.assertEqual(out["env"], ["PLIMSOLL_GUARD_TOKEN", "PLIMSOLL_GUARD_URL"])
        self.assertEqual(r["record"]["broker_calls"], 1, r["record"])
        self.assertNotIn(TOKEN, r["stdout"])
        # The API saw the credential; the guest's token did not travel on.
        seen = [e for e in self.up.received if e["path"] == "/items/1"]
        self.assertTrue(seen)
        self.assertNotIn("x-plimsoll-guard", seen[-1]["headers"])

    def test_a_token_dies_with_its_run(self):
        r = self.run_ok({"grant_profile": "items", "snippet": {"language": "python", "code":
                        "import os; print(os.environ['PLIMSOLL_GUARD_TOKEN'])"}})
        token = r["stdout"].strip()
        host, port = self.guard[len("http://"):].rsplit(":", 1)
        c = socket.create_connection((host, int(port)), timeout=10)
        c.sendall(("GET /items/1 HTTP/1.1\r\nHost: g\r\nX-Plimsoll-Guard: %s\r\n\r\n"
                   % token).encode())
        answer = c.recv(4096).decode()
        c.close()
        self.assertTrue(answer.startswith("HTTP/1.1 401"), answer)

    def test_a_vm_with_a_grant_reaches_only_the_guard(self):
        # Another address of this host, on a listener that would answer: the
        # VM's firewall lets the guard's address through, not this one.
        gw = self.fake.gateway()
        other = [a for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                                           check=True).stdout.split()
                 if "." in a and a != gw]
        self.assertTrue(other, "this host has no other IPv4 address")
        srv = socket.socket()
        srv.bind(("0.0.0.0", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
        try:
            r = self.run_ok({"grant_profile": "items", "snippet": {"language": "python", "code":
                            "import socket\n"
                            "try:\n"
                            "    socket.create_connection((%r, %d), timeout=3).close()\n"
                            "    print('reached')\n"
                            "except OSError:\n"
                            "    print('blocked')\n" % (other[0], port)}})
        finally:
            srv.close()
        self.assertEqual(r["stdout"].strip(), "blocked", r)

    def test_without_a_grant_the_vm_reaches_nothing(self):
        r = self.run_ok({"snippet": {"language": "python", "code":
                         "import socket\n"
                         "try:\n"
                         "    socket.create_connection((%r, %d), timeout=3).close()\n"
                         "    print('reached')\n"
                         "except OSError:\n"
                         "    print('blocked')\n" % tuple(
                             [self.guard[7:].rsplit(':', 1)[0],
                              int(self.guard[7:].rsplit(':', 1)[1])])}})
        self.assertEqual(r["stdout"].strip(), "blocked")

    def test_a_vm_whose_detail_allows_more_than_the_guard_is_refused(self):
        # A grant's VM is created with allowOut [guard/32]; its own detail
        # must say exactly that.
        self.fake.misbehave(detail_network={"allowPublicTraffic": False,
                                            "denyOut": ["0.0.0.0/0"],
                                            "allowOut": [self.guard[7:].rsplit(":", 1)[0] + "/32",
                                                         "203.0.113.7/32"]})
        status, body = self.d.rpc("Run", {"grant_profile": "items",
                                          "snippet": {"language": "python", "code": "print(1)"}})
        self.assertEqual(status, 500, body)
        self.assertIn("network.allowOut is not the guard's address alone", body["message"])
        self.assertFalse([r for r in self.fake.state()["requests"]
                          if "process.Process" in r["path"]], "nothing ran in the VM")
        self.fake.reset()
        self.assertEqual(self.run_ok({"grant_profile": "items", "snippet": {
            "language": "python", "code": "print(2)"}})["stdout"], "2\n")

    def test_a_caller_not_allowed_is_refused_before_dispatch(self):
        status, body = self.d.rpc("Run", {"grant_profile": "items",
                                          "snippet": {"language": "python", "code": "1"}},
                                  principal="bob")
        self.assertEqual(status, 200, body)  # bob is allowed in the profile
        status, body = self.d.rpc("Run", {"grant_profile": "nope",
                                          "snippet": {"language": "python", "code": "1"}})
        self.assertNotEqual(status, 200, body)
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false")


class GuardHostile(GuardDaemon):
    """What a guest (or anyone who can reach the guard's port) can send."""

    def raw(self, data, wait=10):
        host, port = self.guard[len("http://"):].rsplit(":", 1)
        c = socket.create_connection((host, int(port)), timeout=wait)
        try:
            if data:
                c.sendall(data)
            return c.recv(4096).decode("latin-1")
        finally:
            c.close()

    def test_garbage_is_a_400(self):
        self.assertTrue(self.raw(b"\x00\x01 nonsense\r\n\r\n").startswith("HTTP/1.1 400"))

    def test_a_head_past_its_bound_is_refused(self):
        big = b"GET /items/1 HTTP/1.1\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n"
        self.assertTrue(self.raw(big).startswith("HTTP/1.1 431"))

    def test_a_slow_request_is_cut_at_the_deadline(self):
        t0 = time.monotonic()
        answer = self.raw(b"GET /items/1 HTTP/1.1\r\n", wait=20)
        self.assertTrue(answer.startswith("HTTP/1.1 408"), answer)
        self.assertLess(time.monotonic() - t0, 15)

    def test_the_connection_cap_then_recovery(self):
        host, port = self.guard[len("http://"):].rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(64)]
        try:
            time.sleep(0.5)
            self.assertTrue(self.raw(None).startswith("HTTP/1.1 503"))
        finally:
            for c in held:
                c.close()
        time.sleep(0.5)
        self.assertTrue(self.raw(b"GET /items/1 HTTP/1.1\r\nX-Plimsoll-Guard: " + b"0" * 64 +
                                 b"\r\n\r\n").startswith("HTTP/1.1 401"))


if __name__ == "__main__":
    unittest.main()
