# SPDX-License-Identifier: Apache-2.0
"""Sessions on the e2b provider, against the local fake: one VM per
session; the cleanup between calls; idle VMs paused and resumed with an
explicit timeout, keeping the sandboxID of each answer (a resume may change
it); a VM E2B says is gone ends its session with that reason; cells in
interpreters kept in the VM, which a deadline, their own end or a pause
ends (the next cell says interpreter_started); the one real session the
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
             "SANDBOX_SESSION_LIFETIME": "600", "SANDBOX_OUTPUT_BYTES": "4096"}

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

    def cell(self, sid, lang, code, timeout_ms=None, files=()):
        body = {"session_id": sid, "cell": {"language": lang, "code": code}}
        if files:
            body["cell"]["files"] = [{"path": p, "content": c} for p, c in files]
        if timeout_ms:
            body["timeout_ms"] = timeout_ms
        status, b = self.d.rpc("RunCell", body)
        self.assertEqual(status, 200, b)
        self.assertEqual(b["isolation"], "vm", b)
        return b

    def wait_paused(self, vm):
        deadline = time.monotonic() + 15
        while self.vm_state(vm) != "paused" and time.monotonic() < deadline:
            time.sleep(0.3)
        self.assertEqual(self.vm_state(vm), "paused")

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
        self.assertEqual(d["languages"], ["python", "javascript"])
        checks = " | ".join(d["startup_checks"])
        self.assertIn("one real session", checks)
        self.assertIn("cells kept a value in python and javascript", checks)

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

    # ---- cells ------------------------------------------------------------
    def test_cells_keep_state_and_report_exit_codes(self):
        sid = self.open()
        b = self.cell(sid, "python", "import math\nx = 20")
        self.assertEqual((b["exit_code"], b["interpreter_started"]), (0, True), b)
        b = self.cell(sid, "python", "x + 22")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("42\n", False), b)
        b = self.cell(sid, "python", "print('a'); import sys; sys.stderr.write('e\\n'); round(math.pi, 2)")
        self.assertEqual((b["stdout"], b["stderr"]), ("a\n3.14\n", "e\n"), b)
        b = self.cell(sid, "python", "raise ValueError('nope')")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("ValueError: nope", b["stderr"])
        b = self.cell(sid, "javascript", "let y = 40")
        self.assertTrue(b["interpreter_started"], b)
        b = self.cell(sid, "javascript", "y + 2")
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "42\n"), b)
        b = self.cell(sid, "javascript", "throw new Error('bad')")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("Error: bad", b["stderr"])
        # The deadline ends the cell and its interpreter: 124, then a fresh one.
        b = self.cell(sid, "python", "while True: pass", timeout_ms=1500)
        self.assertEqual((b["exit_code"], b["timed_out"]), (124, True), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        # The other language's interpreter was kept.
        b = self.cell(sid, "javascript", "y")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("40\n", False), b)

    def test_cell_files_are_written_first_and_output_is_capped(self):
        sid = self.open()
        b = self.cell(sid, "python", "open('data/in.txt').read().upper()",
                      files=[("data/in.txt", "hello")])
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "'HELLO'\n"), b)
        # A project step sees the cell's work directory, and the cell the step's.
        b = self.call(sid, project([["cat", "data/in.txt"]]))
        self.assertEqual(b["steps"][0]["stdout"], "hello", b)
        b = self.cell(sid, "python", "print('y' * 10000)")
        self.assertTrue(b["stdout_truncated"], b)
        self.assertEqual(len(b["stdout"]), 4096)
        b = self.cell(sid, "javascript", "require('fs').readFileSync('data/in.txt', 'utf8')")
        self.assertEqual(b["stdout"], "'hello'\n", b)

    def test_a_pause_ends_the_interpreters(self):
        sid = self.open()
        b = self.cell(sid, "python", "x = 1")
        vm = b["sandbox_name"]
        self.cell(sid, "javascript", "var z = 1")
        self.wait_paused(vm)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        b = self.cell(sid, "javascript", "typeof z")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'undefined'\n", True), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertFalse(b.get("interpreter_started", False), b)

    # ---- hostile cells ----------------------------------------------------
    def test_a_cell_that_ends_its_interpreter(self):
        sid = self.open()
        self.cell(sid, "python", "x = 1")
        b = self.cell(sid, "python", "import os\nprint('bye', flush=True)\nos._exit(0)")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("ended during the cell", b.get("detail", "") + b.get("outcome", ""), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)

    def test_a_cell_that_kills_its_relay_or_the_other_interpreter(self):
        sid = self.open()
        self.cell(sid, "javascript", "var k = 1")
        self.cell(sid, "python", "x = 1")
        # Everything of the user's may be signalled by the user's code: the
        # relay and the Node interpreter die; the next cells notice.
        b = self.cell(sid, "python", (
            "import os, signal\n"
            "me = os.getpid()\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit() and int(p) != me:\n"
            "        try:\n"
            "            c = open('/proc/%s/cmdline' % p, 'rb').read()\n"
            "        except OSError:\n"
            "            continue\n"
            "        if c.startswith(b'node\\x00') or b'vmlaunch\\x00javascript' in c:\n"
            "            os.kill(int(p), signal.SIGKILL)\n"
            "'done'"))
        self.assertEqual(b["stdout"], "'done'\n", b)
        b = self.cell(sid, "javascript", "typeof k")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'undefined'\n", True), b)
        b = self.cell(sid, "python", "x")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("1\n", False), b)

    def test_what_a_cell_leaves_running_is_ended_after_it(self):
        sid = self.open()
        b = self.cell(sid, "python", (
            "import subprocess\n"
            "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            "x = 5"))
        self.assertEqual(b["exit_code"], 0, b)
        out, _ = self.look(sid)
        self.assertEqual(out, "no file\n0\n")
        b = self.cell(sid, "python", "x")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("5\n", False), b)

    def test_a_leader_that_exited_alone_is_no_hiding_place(self):
        """A process whose main thread exited while another runs reads as a
        zombie; the cleanup still ends it, even next to kept interpreters."""
        sid = self.open()
        self.cell(sid, "python", "x = 1")
        leave = ("import ctypes, os, threading, time\n"
                 "threading.Thread(target=time.sleep, args=(600,)).start()\n"
                 "ctypes.CDLL(None).syscall(60 if os.uname().machine == 'x86_64' else 93, 0)\n")
        b = self.call(sid, project([["sh", "-c", 'python3 -c "$0" > /dev/null 2>&1 &', leave],
                                    ["sleep", "0.5"]]))
        self.assertEqual(b["exit_code"], 0, b)
        count = ("import os\n"
                 "def alive(p):\n"
                 "    for t in os.listdir('/proc/%s/task' % p):\n"
                 "        raw = open('/proc/%s/task/%s/stat' % (p, t)).read()\n"
                 "        if raw[raw.rfind(')') + 2] not in 'ZX':\n"
                 "            return True\n"
                 "    return False\n"
                 "n = 0\n"
                 "for p in os.listdir('/proc'):\n"
                 "    try:\n"
                 "        if p.isdigit() and int(p) != os.getpid() and os.stat('/proc/' + p).st_uid == os.getuid() and alive(p):\n"
                 "            n += 1\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "print(n)\n")
        # Only the kept interpreter and its relay live on.
        b = self.call(sid, project([["python3", "-c", count]]))
        self.assertEqual(b["steps"][0]["stdout"], "2\n", b)
        b = self.cell(sid, "python", "x")
        self.assertEqual(b["stdout"], "1\n", b)

    def test_a_cell_is_refused_outside_a_session_and_with_an_unknown_language(self):
        status, body = self.d.rpc("RunInSession", {"session_id": self.open(), "run": {
            "cell": {"language": "ruby", "code": "1"}}})
        self.assertNotEqual(status, 200, body)
        status, body = self.d.rpc("RunCell", {"session_id": self.open(),
                                              "cell": {"language": "ruby", "code": "1"}})
        self.assertEqual(status, 400, body)
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false", body)

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
