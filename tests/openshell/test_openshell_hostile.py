# SPDX-License-Identifier: Apache-2.0
"""Hostile code on the openshell provider (against the fake gateway, whose
sandboxes are real locked-down containers): the programs that try to
outlive a step (shared with docker, e2b and dockercloud), the guests every
hosted provider meets (plimsoll_test/hosted_guests.py: a background
process, floods, raw bytes), a leftover that fights the cleanup (it runs
as the guest's own user here), a guest that kills its sandbox's main
process, no gateway credential inside, writes outside /tmp, a fork bomb,
and reaching outside.

Run: cd tests/openshell && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_openshell_hostile
"""
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from plimsoll_test.hosted_guests import HostedGuests  # noqa: E402
from plimsoll_test.leftover_programs import StepLeftovers  # noqa: E402
from test_openshell_provider import OpenShellDaemon, py  # noqa: E402


class Hostile(StepLeftovers, HostedGuests, OpenShellDaemon):
    def service_secrets(self):
        return (self.fake.token, self.fake.admin_token, "Bearer")

    def test_a_leftover_that_kills_the_cleanup_fails_the_run_never_passes_it(self):
        # It runs as the guest's user, as the cleanup does: it may kill it.
        # The run must then fail as infrastructure, never see step two run
        # beside the leftover.
        killer = ("import os, signal, time\n"
                  "if os.fork():\n"
                  "    os._exit(0)\n"
                  "os.setsid()\n"
                  "me = os.getpid()\n"
                  # Spelt in two: the word itself in this source would match
                  # the plant's own parent, which a slow day once killed
                  # before it exited (step one 137, step two never ran).
                  "word = b'cle' + b'an'\n"
                  "while True:\n"
                  "    for p in os.listdir('/proc'):\n"
                  "        try:\n"
                  "            if int(p) != me and "
                  "word in open('/proc/%s/cmdline' % p, 'rb').read():\n"
                  "                os.kill(int(p), signal.SIGKILL)\n"
                  "        except (OSError, ValueError):\n"
                  "            pass\n"
                  "    time.sleep(0.001)\n")
        status, body = self.d.rpc("Run", {"timeout_ms": 20000, "project": {"steps": [
            {"name": "plant", "argv": ["python3", "-c", killer]},
            {"name": "two", "argv": ["echo", "ran beside it"]}]}})
        print("the cleanup %s" % ("won" if status == 200 else "was killed"), file=sys.stderr)
        if status == 200:
            # The cleanup won the race: step two ran alone.
            self.assertEqual(body["steps"][-1]["stdout"], "ran beside it\n", body)
        else:
            self.assertIn("could not be ended", str(body))
        self.assert_no_sandbox_left()

    def test_killing_the_sandboxs_main_process(self):
        status, body = self.d.rpc("Run", {"project": {"steps": [
            {"name": "kill", "argv": ["sh", "-c", "kill -9 -1; echo survived"]},
            {"name": "after", "argv": ["echo", "next"]}]}})
        # The sandbox survives (its main process is not the guest's) and
        # step two runs; or the guest killed its own exec's chain (a fake's
        # exec may have a parent of the guest's user), and the project ends
        # at that step, 137; or the sandbox is gone and the run fails as
        # such.  Never anything else, and the next run is fine.
        if status == 200:
            last = body["steps"][-1]
            if last["name"] == "after":
                self.assertEqual(last["stdout"], "next\n", body)
            else:
                self.assertEqual((last["name"], last["exit_code"], body["exit_code"]),
                                 ("kill", 137, 137), body)
        else:
            self.assertIn("INTERNAL", str(body))
        self.assert_no_sandbox_left()
        self.run_ok(py("print(1)"))

    def test_a_run_reaches_nothing_outside(self):
        lst = socket.socket()
        lst.bind(("0.0.0.0", 0))
        lst.listen(4)
        lst.settimeout(5)
        try:
            port = lst.getsockname()[1]
            r = self.run_ok(py(
                "import socket\n"
                "out = []\n"
                "for host in ('172.17.0.1', '10.0.2.2', '192.168.0.1', '1.1.1.1'):\n"
                "    try:\n"
                "        socket.create_connection((host, %d), timeout=2).close()\n"
                "        out.append('reached ' + host)\n"
                "    except OSError as e:\n"
                "        out.append('blocked')\n"
                "print(sorted(set(out)))\n"
                "print(sorted(n for _, n in socket.if_nameindex()))\n" % port))
            self.assertEqual(r["stdout"], "['blocked']\n['lo']\n", r)
        finally:
            lst.close()

    def test_writes_outside_tmp_fail(self):
        r = self.run_ok(py(
            "import os\n"
            "for d in ('/', '/etc', '/usr/local', '/var/tmp', '/opt'):\n"
            "    try:\n"
            "        open(os.path.join(d, 'x'), 'w').write('x')\n"
            "        print('wrote', d)\n"
            "    except OSError:\n"
            "        pass\n"
            "print('done')\n"))
        self.assertEqual(r["stdout"], "done\n", r)

    def test_a_fork_bomb_is_contained(self):
        r = self.run_ok(py(
            "import os\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(5000):\n"
            "        if os.fork() == 0:\n"
            "            import time; time.sleep(30); os._exit(0)\n"
            "        n += 1\n"
            "except OSError:\n"
            "    pass\n"
            "print(n < 5000)\n", timeout_ms=15000))
        self.assertEqual(r["stdout"], "True\n", r)
        self.assert_no_sandbox_left()
        self.assertEqual(self.d.request("GET", "/readyz")[0], 200)



if __name__ == "__main__":
    unittest.main()
