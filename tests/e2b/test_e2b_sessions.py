# SPDX-License-Identifier: Apache-2.0
"""Sessions on the e2b provider, against the local fake: one VM per
session; the cleanup between calls; idle VMs paused and resumed with an
explicit timeout, keeping the sandboxID of each answer (a resume may change
it); a VM E2B says is gone ends its session with that reason; cells in
interpreters kept in the VM, which a deadline, their own end or a pause
ends (the next cell says interpreter_started); the one real session the
daemon opens at startup.  The cases every hosted provider's sessions meet
are plimsoll_test.hosted_sessions.HostedSessions's.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_sessions
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_e2b_provider import E2BDaemon  # noqa: E402  (puts tests/lib on the path)
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.hosted_sessions import HostedSessions, project  # noqa: E402


class Sessions(HostedSessions, E2BDaemon):
    TIER = "vm"
    EXTRA = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_SESSION_IDLE": "2",
             "SANDBOX_SESSION_LIFETIME": "600", "SANDBOX_OUTPUT_BYTES": "4096"}

    def wait_idle(self, vm):
        deadline = time.monotonic() + 15
        while self.vm_state(vm) != "paused" and time.monotonic() < deadline:
            time.sleep(0.3)
        self.assertEqual(self.vm_state(vm), "paused")

    def sandbox_exists(self, sandbox_id):
        return self.vm_state(sandbox_id) is not None

    def vm_state(self, sandbox_id):
        for s in self.fake.state()["sandboxes"]:
            if s["sandboxID"] == sandbox_id:
                return s["state"]
        return None

    def test_describe_and_the_startup_session(self):
        status, d = self.d.rpc("Describe", {})
        self.assertTrue(d["supports_sessions"], d)
        self.assertEqual(d["languages"], ["python", "javascript"])
        checks = " | ".join(d["startup_checks"])
        self.assertIn("one real session", checks)
        self.assertIn("cells kept a value in python and javascript", checks)

    def test_idle_pause_then_resume_with_an_explicit_timeout(self):
        sid = self.open()
        self.call(sid, project([["true"]], [("kept.txt", "kept")]))
        _, vm = self.look(sid)
        self.wait_idle(vm)
        self.fake.reset()
        out, vm2 = self.look(sid)
        self.assertEqual((out, vm2), ("kept\n0\n", vm))
        connects = [r for r in self.fake.state()["requests"] if r["path"].endswith("/connect")]
        self.assertEqual(len(connects), 1, connects)

    def test_a_resume_that_answers_a_new_sandbox_id(self):
        sid = self.open()
        self.call(sid, project([["true"]], [("kept.txt", "kept")]))
        _, vm = self.look(sid)
        self.fake.misbehave(resume_new_id=True)
        deadline = time.monotonic() + 15
        while self.vm_state(vm) != "paused" and time.monotonic() < deadline:
            time.sleep(0.3)
        out, vm2 = self.look(sid)
        self.assertEqual(out, "kept\n0\n")
        self.assertNotEqual(vm2, vm)
        out, vm3 = self.look(sid)  # and the new id is the one kept
        self.assertEqual(vm3, vm2)

    def test_a_resumed_vm_whose_detail_says_internet_open_ends_the_session(self):
        sid = self.open()
        _, vm = self.look(sid)
        self.wait_idle(vm)
        self.fake.reset()
        self.fake.misbehave(detail_internet=True)
        status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                   "run": project([["true"]])})
        self.assertNotEqual(status, 200, body)
        self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)
        self.assertFalse([r for r in self.fake.state()["requests"]
                          if "process.Process" in r["path"]], "nothing ran in the VM")
        deadline = time.monotonic() + 10
        while self.sandbox_exists(vm) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertFalse(self.sandbox_exists(vm), "the refused VM is deleted")

    def test_a_vm_gone_ends_the_session_with_the_reason(self):
        sid = self.open()
        _, vm = self.look(sid)
        status, _, _ = self.fake.api("DELETE", "/sandboxes/" + vm)
        self.assertEqual(status, 204)
        status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                   "run": project([["true"]])})
        self.assertNotEqual(status, 200, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], "SESSION_ENDED", body)
        self.assertIn("gone", body["message"])
        status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                   "run": project([["true"]])})
        self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)


if __name__ == "__main__":
    unittest.main()
