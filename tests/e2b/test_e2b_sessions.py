# SPDX-License-Identifier: Apache-2.0
"""Sessions on the e2b provider, against the local fake: one VM per
session; the cleanup between calls; idle VMs paused and resumed with an
explicit timeout, keeping the sandboxID of each answer (a resume may change
it); a VM E2B says is gone ends its session with that reason; cells are
refused before dispatch (no cell language yet); the one real session the
daemon opens at startup.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_sessions
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_e2b_provider import E2BDaemon  # noqa: E402  (puts tests/lib on the path)
from plimsoll_test.harness import error_info  # noqa: E402

LOOK = ("import os\n"
        "print(open('kept.txt').read() if os.path.exists('kept.txt') else 'no file')\n"
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
        "          open('/proc/%s/cmdline' % p).read() == 'sleep\\x00600\\x00'))\n")


def project(steps, files=()):
    return {"project": {"files": [{"path": p, "content": c} for p, c in files],
                        "steps": [{"argv": a} for a in steps]}}


class Sessions(E2BDaemon):
    EXTRA = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_SESSION_IDLE": "2",
             "SANDBOX_SESSION_LIFETIME": "600"}

    def open(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def call(self, sid, run):
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["isolation"], "vm", body)
        return body

    def look(self, sid):
        b = self.call(sid, project([["python3", "-c", LOOK]]))
        return b["steps"][0]["stdout"], b["sandbox_name"]

    def vm_state(self, sandbox_id):
        for s in self.fake.state()["sandboxes"]:
            if s["sandboxID"] == sandbox_id:
                return s["state"]
        return None

    def test_describe_and_the_startup_session(self):
        status, d = self.d.rpc("Describe", {})
        self.assertTrue(d["supports_sessions"], d)
        self.assertEqual(d.get("languages", []), [])
        self.assertIn("one real session", " | ".join(d["startup_checks"]))

    def test_files_stay_processes_do_not(self):
        sid = self.open()
        self.call(sid, project([["sh", "-c", "sleep 600 > /dev/null 2>&1 &"]],
                               [("kept.txt", "kept")]))
        out, _ = self.look(sid)
        self.assertEqual(out, "kept\n0\n")

    def test_idle_pause_then_resume_with_an_explicit_timeout(self):
        sid = self.open()
        self.call(sid, project([["true"]], [("kept.txt", "kept")]))
        _, vm = self.look(sid)
        deadline = time.monotonic() + 15
        while self.vm_state(vm) != "paused" and time.monotonic() < deadline:
            time.sleep(0.3)
        self.assertEqual(self.vm_state(vm), "paused")
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

    def test_cells_are_refused_before_dispatch(self):
        sid = self.open()
        self.fake.reset()
        status, body = self.d.rpc("RunCell", {"session_id": sid,
                                              "cell": {"language": "python", "code": "1"}})
        self.assertEqual(status, 501, body)
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                         ("UNSUPPORTED", "false"))
        self.assertEqual(self.fake.state()["requests"], [])

    def test_close_deletes_the_vm(self):
        status, body = self.d.rpc("OpenSession", {})
        sid = body["session_id"]
        _, vm = self.look(sid)
        status, body = self.d.rpc("CloseSession", {"session_id": sid})
        self.assertEqual(status, 200, body)
        deadline = time.monotonic() + 10
        while self.vm_state(vm) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertIsNone(self.vm_state(vm))


if __name__ == "__main__":
    unittest.main()
