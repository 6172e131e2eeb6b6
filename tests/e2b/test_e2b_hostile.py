# SPDX-License-Identifier: Apache-2.0
"""Hostile guest code on the e2b provider, against the local fake whose
"VMs" are real containers: what a guest could do to the wall the vm mark
promises, to the credentials around it, and to the daemon reading it.

The programs that try to outlive their run are the docker suite's own
(plimsoll_test.leftover_programs): here they run as a project's step, with
the next step looking for a survivor, and as a session's call next to kept
interpreters, with the VM searched from outside (as root, through the
engine) after the call.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_hostile
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_e2b_provider import E2BDaemon, Listener  # noqa: E402  (puts tests/lib on the path)
from plimsoll_test.hosted_guests import HostedGuests  # noqa: E402
from plimsoll_test.hostile import Hostile  # noqa: E402
from plimsoll_test.leftover_programs import (COUNT_MARKED, LEFTOVER_PROGRAMS,  # noqa: E402
                                             StepLeftovers)


def py(code, **extra):
    msg = {"snippet": {"language": "python", "code": code}}
    msg.update(extra)
    return msg


class HostileGuest(HostedGuests, E2BDaemon):
    def service_secrets(self):
        return (self.fake.api_key, "X-API-Key")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        Hostile.baseline.__func__(cls)

    @classmethod
    def tearDownClass(cls):
        # The daemon's descriptors and threads come back, and it is ready
        # (the hostile suite's own check), then the fake goes too.
        try:
            Hostile.tearDownClass.__func__(cls)
        finally:
            cls.fake.stop()

    def test_what_a_step_leaves_running_ends_before_the_next(self):
        # A detached sleep, and one that made itself non-dumpable (so its
        # /proc entry is root's): neither reaches the next step.
        leave = ("import ctypes, os, subprocess\n"
                 "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                 "if os.fork() == 0:\n"
                 "    os.setsid()\n"
                 "    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n"
                 "    os.execvp('sleep', ['sleep', '601'])\n")
        look = ("import os\n"
                "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
                "          open('/proc/%s/cmdline' % p).read() in\n"
                "          ('sleep\\x00600\\x00', 'sleep\\x00601\\x00')))\n")
        r = self.run_ok({"project": {"steps": [
            {"name": "leave", "argv": ["python3", "-c", leave]},
            {"name": "look", "argv": ["python3", "-c", look]}]}})
        self.assertEqual(r["steps"][1]["stdout"], "0\n", r)

    def test_kill_everything_it_can(self):
        r = self.run_ok({"project": {"steps": [
            {"name": "kill", "argv": ["sh", "-c", "kill -9 -1; echo survived"]},
            {"name": "after", "argv": ["echo", "next"]}]}})
        # Whatever the guest could signal was its own; the run goes on.
        self.assertEqual(r["steps"][-1]["stdout"], "next\n", r)

    def test_closed_output_then_sleep_past_the_deadline(self):
        r = self.run_ok(py("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)",
                           timeout_ms=2000))
        self.assertTrue(r["timed_out"], r)
        self.assert_no_sandbox_left()

    def test_udp_and_dns_out(self):
        r = self.run_ok(py(
            "import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try:\n"
            "    s.sendto(b'x', ('192.0.2.1', 53))\n"
            "    print('sent')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n"
            "try:\n"
            "    socket.getaddrinfo('example.com', 443)\n"
            "    print('resolved')\n"
            "except OSError as e:\n"
            "    print('no dns', e.errno)\n"))
        self.assertIn("no dns", r["stdout"])
        self.assertNotIn("resolved", r["stdout"])

    def test_a_run_reaches_nothing_outside(self):
        lst = Listener(self.fake)
        try:
            r = self.run_ok(py(
                "import socket\n"
                "host, port = %r, %d\n"
                "try:\n"
                "    socket.create_connection((host, port), timeout=3).close()\n"
                "    print('reached')\n"
                "except OSError as e:\n"
                "    print('blocked', type(e).__name__)\n"
                % tuple([lst.target.rsplit(":", 1)[0], int(lst.target.rsplit(":", 1)[1])])))
            self.assertTrue(r["stdout"].startswith("blocked"), r["stdout"])
            self.assertEqual(lst.accepted, 0)
        finally:
            lst.close()

    def test_a_flood_of_small_writes_is_capped_and_counted(self):
        t0 = time.monotonic()
        r = self.run_ok(py(
            "import sys\n"
            "for i in range(200000):\n"
            "    sys.stdout.write('%d\\n' % i)\n"
            "    sys.stdout.flush() if i % 1000 == 0 else None\n"
            "sys.stderr.write('e' * 2000000)\n"))
        self.assertLess(time.monotonic() - t0, 60)
        self.assertEqual(r.get("exit_code", 0), 0)
        self.assertTrue(r["stdout_truncated"] or len(r["stdout"]) >= 1000000, len(r["stdout"]))
        self.assertTrue(r["stderr_truncated"])
        status, _, _ = self.d.request("GET", "/readyz")
        self.assertEqual(status, 200)

    def test_the_guest_cannot_write_outside_what_its_user_owns(self):
        r = self.run_ok(py(
            "import os\n"
            "for p in ('/etc/plimsoll-owned', '/root/x', '/usr/bin/x'):\n"
            "    try:\n"
            "        open(p, 'w').write('x')\n"
            "        print('wrote', p)\n"
            "    except OSError as e:\n"
            "        print('refused', p, e.errno)\n"))
        self.assertNotIn("wrote", r["stdout"])


class Leftovers(StepLeftovers, E2BDaemon):
    """The docker suite's leftover programs against the e2b cleanup:
    between a project's steps (StepLeftovers) and after a session's call,
    next to kept interpreters."""
    EXTRA = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_LIFETIME": "600"}

    def count_in_vm(self, sandbox_id, marker):
        """From outside the guest's reach: root in the VM, through the engine."""
        for s in self.fake.state()["sandboxes"]:
            if s["sandboxID"] == sandbox_id:
                p = subprocess.run(["docker", "exec", "-u", "0", s["container"], "python3", "-c",
                                    COUNT_MARKED, marker], capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                return int(p.stdout)
        ended = [l for l in self.d.log_text().splitlines() if '"session ended"' in l]
        self.fail("no VM %s; the daemon's last session ends: %s" % (sandbox_id, ended[-2:]))

    def check_session(self, name):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        try:
            self.session_calls(sid, name)
        finally:
            self.d.rpc("CloseSession", {"session_id": sid})

    def session_calls(self, sid, name):
        status, b = self.d.rpc("RunCell", {"session_id": sid,
                                           "cell": {"language": "python", "code": "kept = 7"}})
        self.assertEqual((status, b.get("exit_code", 0)), (200, 0), b)
        marker, code = self.marked(name)
        status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": {
            "snippet": {"language": "python", "code": code}, "timeout_ms": 2000}})
        self.assertEqual(status, 200, b)
        self.assertIn(b["outcome"], ("completed", "timed_out"), b)
        vm = b["sandbox_name"]
        # The cleanup runs after the answer; the next call waits for it.
        # The kept interpreter was spared, and still answers.
        status, b = self.d.rpc("RunCell", {"session_id": sid,
                                           "cell": {"language": "python", "code": "kept"}})
        self.assertEqual((status, b["stdout"], b.get("interpreter_started", False)),
                         (200, "7\n", False), b)
        self.assertEqual(self.count_in_vm(vm, marker), 0)

    def test_programs_that_try_to_outlive_a_session_call(self):
        for name in LEFTOVER_PROGRAMS:
            with self.subTest(name):
                self.check_session(name)

if __name__ == "__main__":
    unittest.main()
