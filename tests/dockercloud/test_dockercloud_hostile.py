# SPDX-License-Identifier: Apache-2.0
"""Hostile guest code on the dockercloud provider, against the local fake
whose sandboxes are real containers: the shared cases that apply to a VM
(the docker suite's programs that try to outlive their step, from
plimsoll_test.leftover_programs), and what a guest could do to the
credentials around it and to the daemon reading it.

Run: cd tests/dockercloud && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_dockercloud_hostile
"""
import os
import socket
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_dockercloud_provider import DockerCloudDaemon  # noqa: E402  (puts tests/lib on the path)
from plimsoll_test.hosted_guests import HostedGuests  # noqa: E402
from plimsoll_test.leftover_programs import StepLeftovers  # noqa: E402


def py(code, **extra):
    msg = {"snippet": {"language": "python", "code": code}}
    msg.update(extra)
    return msg


class Hostile(StepLeftovers, HostedGuests, DockerCloudDaemon):
    def service_secrets(self):
        return (self.fake.secret, self.fake.account, "Bearer")

    def test_kill_everything_it_can(self):
        r = self.run_ok({"project": {"steps": [
            {"name": "kill", "argv": ["sh", "-c", "kill -9 -1; echo survived"]},
            {"name": "after", "argv": ["echo", "next"]}]}})
        self.assertEqual(r["steps"][-1]["stdout"], "next\n", r)

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



if __name__ == "__main__":
    unittest.main()
