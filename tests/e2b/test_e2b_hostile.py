# SPDX-License-Identifier: Apache-2.0
"""Hostile guest code on the e2b provider, against the local fake whose
"VMs" are real containers: what a guest could do to the wall the vm mark
promises, to the credentials around it, and to the daemon reading it.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_hostile
"""
import base64
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_e2b_provider import E2BDaemon, Listener  # noqa: E402


def py(code, **extra):
    msg = {"snippet": {"language": "python", "code": code}}
    msg.update(extra)
    return msg


class HostileGuest(E2BDaemon):
    def test_the_api_key_never_enters_the_vm(self):
        # Everything a guest can read of its own VM's processes.
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
        self.assertNotIn(self.fake.api_key, r["stdout"])
        self.assertNotIn("X-API-Key", r["stdout"])

    def test_a_background_process_does_not_outlive_its_run(self):
        r = self.run_ok(py(
            "import subprocess\n"
            "subprocess.Popen(['sh', '-c', 'sleep 600'], start_new_session=True,\n"
            "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print('left one behind')\n"))
        self.assertEqual(r["stdout"], "left one behind\n")
        self.assert_no_vm_left()
        # Not only forgotten by the API: the machine itself is gone.
        self.assertEqual(self.fake.containers(), [])

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

    def test_bytes_that_are_not_text_arrive_exactly(self):
        r = self.run_ok(py("import sys; sys.stdout.buffer.write(bytes(range(256)))"))
        self.assertEqual(base64.b64decode(r["stdout_base64"]), bytes(range(256)))

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


if __name__ == "__main__":
    unittest.main()
