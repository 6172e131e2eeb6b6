# SPDX-License-Identifier: Apache-2.0
"""The one real session an openshell daemon opens at startup when sessions
are on, against the local fake gateway: its exec limits, and a shutdown
that waits for its cleanup.  (A module of its own beside
test_openshell_sessions, so the two run at once.)

Run: cd tests/openshell && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_openshell_startup_session
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_openshell_provider import osh_env  # noqa: E402  (tests/lib on the path)
from plimsoll_test.harness import Daemon  # noqa: E402
from plimsoll_test.openshell import FakeOpenShell  # noqa: E402
from plimsoll_test.hosted_sessions import project  # noqa: E402


class StartupSession(unittest.TestCase):
    """The daemon's startup with sessions on, against a fake that holds
    every exec to upstream's limits (validation.rs:45-77: at most 1024
    arguments, each at most 32 KiB): it starts, and every command it sent
    was within them, the session agent (~37 KB) as python3 -c pieces."""

    def test_the_startup_session_keeps_to_the_exec_limits(self):
        with FakeOpenShell() as fake:
            d = Daemon(env=osh_env(fake, SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_IDLE="2",
                                   SANDBOX_SESSION_LIFETIME="600")).start(timeout=180)
            try:
                status, desc = d.rpc("Describe", {})
                self.assertTrue(desc["supports_sessions"], desc)
                execs = fake.state()["execs"]
            finally:
                d.stop()
            self.assertTrue(execs)
            for e in execs:
                self.assertLessEqual(len(e["argv"]), 1024)
                self.assertLessEqual(max(len(a.encode()) for a in e["argv"]), 32 << 10)
            launched = [e["argv"] for e in execs if "vmlaunch" in e["argv"]]
            self.assertTrue(launched, "no interpreter was launched")
            for argv in launched:
                i = argv.index("-c", argv.index("python3"))
                n = int(argv[i + 2])
                self.assertGreaterEqual(n, 2)
                self.assertEqual(argv[i + 3 + n], "vmlaunch")
            self.assertEqual(fake.stop(), [])

    def test_the_shutdown_waits_for_a_cleanup_and_ends_it(self):
        # A call's cleanup the gateway holds up (its exit withheld) when the
        # daemon is told to stop: the stop waits for it (no thread outlives
        # its session; a sanitizer's report fails stop()), the sandbox goes,
        # and the daemon exits 0.
        with FakeOpenShell() as fake:
            d = Daemon(env=osh_env(fake, SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_IDLE="60",
                                   SANDBOX_SESSION_LIFETIME="600")).start(timeout=180)
            try:
                status, body = d.rpc("OpenSession", {})
                self.assertEqual(status, 200, body)
                fake.misbehave(exec_withhold_exit="def spared(p)")
                status, body = d.rpc("RunInSession", {"session_id": body["session_id"],
                                                      "run": project([["true"]])})
                self.assertEqual(status, 200, body)
                deadline = time.monotonic() + 10
                while not any(e["state"] == "withholding" for e in fake.state()["execs"]) and \
                        time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertTrue(any(e["state"] == "withholding" for e in fake.state()["execs"]))
            finally:
                t0 = time.monotonic()
                rc = d.stop()
            self.assertEqual(rc, 0)
            self.assertLess(time.monotonic() - t0, 25)
            self.assertEqual([s["phase"] for s in fake.state()["sandboxes"] if not s["deleted"]
                              and s["phase"] != "DELETING"], [])
            self.assertEqual(fake.stop(), [])


if __name__ == "__main__":
    unittest.main()
