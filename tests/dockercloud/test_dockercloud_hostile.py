# SPDX-License-Identifier: Apache-2.0
"""Hostile guest code on the dockercloud provider, against the local fake
whose sandboxes are real containers: the shared cases that apply to a VM
(the docker suite's programs that try to outlive their step, from
plimsoll_test.leftover_programs), and what a guest could do to the
credentials around it and to the daemon reading it.

Run: cd tests/dockercloud && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_dockercloud_hostile
"""
import base64
import os
import socket
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_dockercloud_provider import DockerCloudDaemon  # noqa: E402  (puts tests/lib on the path)
from plimsoll_test.leftover_programs import StepLeftovers  # noqa: E402


def py(code, **extra):
    msg = {"snippet": {"language": "python", "code": code}}
    msg.update(extra)
    return msg


class Hostile(StepLeftovers, DockerCloudDaemon):
    def test_no_credential_enters_the_sandbox(self):
        # Everything a guest can read of its own sandbox's processes.
        r = self.run_ok(py(
            "import os\n"
            "print(dict(os.environ))\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit():\n"
            "        for f in ('environ', 'cmdline'):\n"
            "            try:\n"
            "                print(open('/proc/%s/%s' % (p, f), 'rb').read())\n"
            "            except OSError:\n"
            "                pass\n"))
        for secret in (self.fake.secret, self.fake.account, "Bearer"):
            self.assertNotIn(secret, r["stdout"])

    def test_kill_everything_it_can(self):
        r = self.run_ok({"project": {"steps": [
            {"name": "kill", "argv": ["sh", "-c", "kill -9 -1; echo survived"]},
            {"name": "after", "argv": ["echo", "next"]}]}})
        self.assertEqual(r["steps"][-1]["stdout"], "next\n", r)

    def test_a_background_process_does_not_outlive_its_run(self):
        r = self.run_ok(py(
            "import subprocess\n"
            "subprocess.Popen(['sh', '-c', 'sleep 600'], start_new_session=True,\n"
            "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print('left one behind')\n"))
        self.assertEqual(r["stdout"], "left one behind\n")
        self.assert_no_sandbox_left()
        self.assertEqual(self.fake.containers(), [])

    def test_a_run_reaches_nothing_outside(self):
        lst = socket.socket()
        lst.bind((self.fake.gateway(), 0))
        lst.listen(4)
        lst.settimeout(0.2)
        accepted = []

        def serve():
            while True:
                try:
                    accepted.append(lst.accept()[0])
                except socket.timeout:
                    continue
                except OSError:
                    return
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            host, port = lst.getsockname()
            r = self.run_ok(py(
                "import socket\n"
                "try:\n"
                "    socket.create_connection((%r, %d), timeout=3).close()\n"
                "    print('reached')\n"
                "except OSError as e:\n"
                "    print('blocked', type(e).__name__)\n" % (host, port)))
            self.assertTrue(r["stdout"].startswith("blocked"), r["stdout"])
            self.assertEqual(accepted, [])
        finally:
            lst.close()

    def test_a_flood_is_capped_and_the_daemon_stays_ready(self):
        r = self.run_ok(py(
            "import sys\n"
            "for i in range(200000):\n"
            "    sys.stdout.write('%d\\n' % i)\n"
            "sys.stderr.write('e' * 2000000)\n"))
        self.assertTrue(r["stderr_truncated"])
        self.assertEqual(self.d.request("GET", "/readyz")[0], 200)

    def test_bytes_that_are_not_text_arrive_exactly(self):
        r = self.run_ok(py("import sys; sys.stdout.buffer.write(bytes(range(256)))"))
        self.assertEqual(base64.b64decode(r["stdout_base64"]), bytes(range(256)))


if __name__ == "__main__":
    unittest.main()
