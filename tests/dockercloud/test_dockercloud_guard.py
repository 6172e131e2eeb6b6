# SPDX-License-Identifier: Apache-2.0
"""Grants on the dockercloud provider through the guard, against the local
fake: a sandbox with a grant is created deny-all allowing the guard's
address alone, and its policy read back must say exactly that; the guest
presents its own run's token; the guard hands the request to that run's
broker.  Refusals: no token, a wrong one, one of a run that ended; a run
without a grant reaches not even the guard; an account policy that does not
let the guard's address through leaves a grant's sandbox without it, and
the run is refused before any code.

Run: cd tests/dockercloud && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_dockercloud_guard
"""
import json
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_dockercloud_provider import DockerCloudDaemon, dc_env  # noqa: E402  (tests/lib on the path)
from plimsoll_test.dockercloud import FakeDockerCloud  # noqa: E402
from plimsoll_test.grants import (GUARD_CALL as CALL, TOKEN, GrantFiles, free_port,  # noqa: E402
                                  grant_env, profile, token_cred)
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

class Guard(DockerCloudDaemon):
    @classmethod
    def setUpClass(cls):
        cls.files = GrantFiles()
        cls.up = Upstream(Check(token=TOKEN))
        cls.files.write({"items": profile(cls.up.url, token_cred())})
        cls.fake = FakeDockerCloud(secret="dckr_pat_" + os.urandom(8).hex()).start()
        try:
            gw = cls.fake.gateway()
            cls.guard = "http://%s:%d" % (gw, free_port(gw))
            # The account lets the guard's address through, and nothing else.
            cls.fake.set_account_policy(allow=["%s/32" % gw])
            env = dc_env(cls.fake, SANDBOX_DOCKERCLOUD_GUARD_URL=cls.guard,
                         SANDBOX_DOCKERCLOUD_GUARD_LISTEN=gw)
            env.update(grant_env(cls.files.path))
            cls.d = Daemon(env=env).start(timeout=120)
        except Exception:
            cls.fake.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.up.close()
            cls.files.close()

    def setUp(self):
        super().setUp()
        self.fake.set_account_policy(allow=["%s/32" % self.fake.gateway()])

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
        seen = [e for e in self.up.received if e["path"] == "/items/1"]
        self.assertTrue(seen)
        self.assertNotIn("x-plimsoll-guard", seen[-1]["headers"])
        self.assert_no_sandbox_left()

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

    def test_a_run_without_a_grant_reaches_not_even_the_guard(self):
        host, port = self.guard[len("http://"):].rsplit(":", 1)
        r = self.run_ok({"snippet": {"language": "python", "code": (
            "import os, socket\n"
            "print(sorted(k for k in os.environ if k.startswith('PLIMSOLL_GUARD')))\n"
            "try:\n"
            "    socket.create_connection((%r, %s), timeout=3).close()\n"
            "    print('reached')\n"
            "except OSError as e:\n"
            "    print('blocked', type(e).__name__)\n" % (host, port))}})
        self.assertEqual(r["stdout"].splitlines()[0], "[]", r)
        self.assertTrue(r["stdout"].splitlines()[1].startswith("blocked"), r)

    def test_a_grant_whose_sandbox_allows_more_is_refused(self):
        gw = self.fake.gateway()
        self.fake.set_account_policy(allow=["%s/32" % gw, "198.51.100.0/24"])
        self.fake.misbehave(policy_allow=["198.51.100.7/32"])
        status, body = self.d.rpc("Run", {"grant_profile": "items",
                                          "snippet": {"language": "python", "code": CALL}})
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]), ("NOT_READY", "false"),
                         body)
        self.assertIn("198.51.100.7", body["message"])
        self.assert_no_sandbox_left()

    def test_an_account_that_does_not_let_the_guard_through(self):
        self.fake.set_account_policy()
        status, body = self.d.rpc("Run", {"grant_profile": "items",
                                          "snippet": {"language": "python", "code": CALL}})
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]), ("NOT_READY", "false"),
                         body)
        self.assertIn("but the guard's", body["message"])
        self.assert_no_sandbox_left()


if __name__ == "__main__":
    unittest.main()
