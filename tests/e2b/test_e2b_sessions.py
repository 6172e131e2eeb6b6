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
    USAGE_SOURCE = "service"
    EXTRA = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_SESSION_IDLE": "2",
             "SANDBOX_SESSION_LIFETIME": "600", "SANDBOX_OUTPUT_BYTES": "4096",
             "SANDBOX_FILE_READ_BYTES": "65536", "SANDBOX_FILE_LIST_ENTRIES": "40"}

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


class CleanupAfterTheAnswer(E2BDaemon):
    """The cleanup between calls runs after the answer has gone back, so
    the next call waits for it and the caller does not (the spec's session
    contract); the fake's root processes, the cleanup, hang for longer than
    the 10 s the cleanup has."""
    EXTRA = Sessions.EXTRA
    HANG_MS = 30000

    def open(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def run_call(self, sid):
        t0 = time.monotonic()
        run = dict(project([["true"]]), timeout_ms=5000)
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
        return status, body, time.monotonic() - t0

    def answered_at_once(self, sid):
        """A call whose cleanup hangs: its answer does not wait for it."""
        status, body, took = self.run_call(sid)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        self.assertLess(took, 3.0, "the answer waited for the cleanup")
        return body["sandbox_name"]

    def refused_naming_the_cleanup(self, sid):
        status, body, took = self.run_call(sid)
        self.assertNotEqual(status, 200, body)
        self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)
        self.assertIn("the cleanup after the last call failed", body["message"])
        self.assertIn("the cleanup timed out", body["message"])
        return took

    def vm_state(self, sandbox_id):
        for s in self.fake.state()["sandboxes"]:
            if s["sandboxID"] == sandbox_id:
                return s["state"]
        return None

    def cleanup_ended_since(self, first):
        """Wait until the root processes started since request `first` (the
        cleanup after a call, which runs after its answer) have all ended:
        a misbehaviour set before then would reach that cleanup too."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            roots = [r for r in self.fake.state()["requests"][first:]
                     if r.get("user") == "root"]
            if roots and all("ms" in r for r in roots):
                return
            time.sleep(0.1)
        self.fail("the cleanup after the first call did not end")

    def test_the_next_call_waits_for_the_cleanup_and_is_refused_when_it_failed(self):
        sid = self.open()
        first = len(self.fake.state()["requests"])
        self.answered_at_once(sid)   # a cleanup that works first
        self.cleanup_ended_since(first)
        self.fake.misbehave(delay_root_process_ms=self.HANG_MS)
        self.answered_at_once(sid)
        took = self.refused_naming_the_cleanup(sid)
        self.assertGreater(took, 4.0, "the next call did not wait for the cleanup")
        self.assertLess(took, 20.0)

    def test_a_close_waits_for_the_cleanup_then_deletes_the_vm(self):
        sid = self.open()
        self.fake.misbehave(delay_root_process_ms=self.HANG_MS)
        vm = self.answered_at_once(sid)
        status, body = self.d.rpc("CloseSession", {"session_id": sid})
        self.assertEqual(status, 200, body)
        deadline = time.monotonic() + 20
        while self.vm_state(vm) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertIsNone(self.vm_state(vm), "the closed session's VM is deleted")

    def test_an_idle_pause_waits_for_the_cleanup_and_the_resume_is_refused(self):
        sid = self.open()
        self.fake.misbehave(delay_root_process_ms=self.HANG_MS)
        vm = self.answered_at_once(sid)
        deadline = time.monotonic() + 25
        while self.vm_state(vm) != "paused" and time.monotonic() < deadline:
            time.sleep(0.3)
        self.assertEqual(self.vm_state(vm), "paused")
        self.refused_naming_the_cleanup(sid)
        self.assertFalse([r for r in self.fake.state()["requests"]
                          if r["path"].endswith("/connect")], "a session ending is not resumed")


if __name__ == "__main__":
    unittest.main()
