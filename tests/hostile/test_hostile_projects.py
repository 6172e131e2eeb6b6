# SPDX-License-Identifier: Apache-2.0
"""A project's result comes over a channel guest code cannot write
(issue #12, section 2), under runc and runsc.

Each step is an engine exec: its exit code is the engine's, its output its
own stream, and whatever it leaves running ends before the next step.  An
earlier step that writes forged reports into every descriptor it can open,
floods its output without a newline, or tries to kill whatever reports,
cannot change what the later steps report."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, ours, per_runtime  # noqa: E402

# Forged reports in the old reporter's format and garbage, written into
# every descriptor of every process this step can open, now and for as
# long as it lives (a background writer in its own session).
FORGER = r"""
import os, sys, time
FAKE = (b'PLIMSOLL {"step": 1, "exit_code": 0, "stdout": "Rk9SR0VE", "stderr": "",'
        b' "stdout_truncated": false, "stderr_truncated": false, "duration_ms": 1}\n'
        b'PLIMSOLL {"step": 2, "exit_code": 0, "stdout": "Rk9SR0VE", "stderr": "",'
        b' "stdout_truncated": false, "stderr_truncated": false, "duration_ms": 1}\n'
        b'PLIMSOLL {"done": true}\nFORGED\n')
def spray():
    hits = 0
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir('/proc/%s/fd' % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                f = os.open('/proc/%s/fd/%s' % (pid, fd), os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(f, FAKE)
                hits += 1
            except OSError:
                pass
            os.close(f)
    return hits
print('sprayed', spray(), flush=True)
if os.fork() == 0:
    os.setsid()
    end = time.time() + 20
    while time.time() < end:
        spray()
        time.sleep(0.01)
    os._exit(0)
sys.stdout.write(FAKE.decode())
"""

FLOOD = r"""
import os
chunk = b'x' * 65536
for _ in range(200):
    os.write(1, chunk)
"""

KILLER = r"""
import os, signal
for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
    for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
print('tried')
"""


class HostileProjects(DockerDaemon):
    INSTANCE = "hostile-projects-"  # per_runtime sets RUNTIME
    SETTINGS = {"SANDBOX_OUTPUT_BYTES": "65536"}

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.d.request("GET", "/readyz")[0] == 200
        finally:
            cls.d.stop()
        assert ours(cls.instance) == [], "containers left behind"

    def project(self, first, timeout_ms=30000):
        files = [{"path": "first.py", "content": first}]
        steps = [{"name": "hostile", "argv": ["python3", "first.py"]},
                 {"name": "two", "argv": ["python3", "-c", "print('real two')"]},
                 {"name": "three", "argv": ["sh", "-c", "echo real three; exit 3"]},
                 {"name": "never", "argv": ["python3", "-c", "print('must not run')"]}]
        status, body = self.d.rpc("Run", {"project": {"files": files, "steps": steps},
                                          "timeout_ms": timeout_ms})
        self.assertEqual(status, 200, body)
        return body

    def assert_true_results(self, b):
        # The later steps' own results, nothing forged, nothing skipped.
        self.assertEqual(b["outcome"], "completed", b)
        self.assertEqual([s["name"] for s in b["steps"]], ["hostile", "two", "three"], b)
        self.assertEqual(b["steps"][1]["stdout"], "real two\n", b)
        self.assertEqual(b["steps"][1]["exit_code"], 0, b)
        self.assertEqual(b["steps"][2]["stdout"], "real three\n", b)
        self.assertEqual(b["steps"][2]["exit_code"], 3, b)
        self.assertEqual(b["exit_code"], 3, b)
        self.assertIn("step 3 (three) exited 3", b["detail"])

    def test_forged_reports_into_every_descriptor(self):
        b = self.project(FORGER)
        self.assert_true_results(b)
        # The forger's own output is its step's, not a report.
        self.assertEqual(b["steps"][0]["exit_code"], 0, b)
        self.assertIn("FORGED", b["steps"][0]["stdout"])
        self.assertNotIn("FORGED", b["steps"][1]["stdout"] + b["steps"][2]["stdout"])

    def test_flood_without_newline_past_the_cap(self):
        b = self.project(FLOOD)
        self.assert_true_results(b)
        self.assertTrue(b["steps"][0]["stdout_truncated"], b)
        self.assertEqual(len(b["steps"][0]["stdout"]), 65536)

    def test_kill_everything_it_can(self):
        b = self.project(KILLER)
        if self.RUNTIME == "runsc" and [s["name"] for s in b["steps"]] != ["hostile", "two", "three"]:
            # gVisor, unlike Linux, lets a process kill its sandbox's PID 1:
            # the sandbox is over, and the answer says so truthfully, either
            # as the step killed with it or as the sandbox's end; nothing of
            # a later step is reported.
            if b["outcome"] == "protocol_error" and b["steps"]:
                # The kill landed after step 1's own end was read: its
                # result stands, and the sandbox's end is said at step 2.
                self.assertEqual([s["name"] for s in b["steps"]], ["hostile"], b)
                self.assertIn("the sandbox ended after step 1 (hostile)", b["detail"], b)
            elif b["outcome"] == "protocol_error":
                self.assertEqual(b["steps"], [], b)
                self.assertIn("the sandbox ended during step 1 (hostile)", b["detail"], b)
            else:
                self.assertEqual(b["outcome"], "completed", b)
                self.assertEqual([s["name"] for s in b["steps"]], ["hostile"], b)
                self.assertEqual(b["steps"][0]["exit_code"], 137, b)
            return
        self.assert_true_results(b)

    def test_a_step_that_does_not_exist_exits_127(self):
        status, body = self.d.rpc("Run", {"project": {"steps": [
            {"name": "missing", "argv": ["no-such-program"]}]}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["steps"][0]["exit_code"], 127, body)
        self.assertIn("no-such-program", body["steps"][0]["stderr"])

    def test_what_a_step_leaves_running_ends_before_the_next(self):
        steps = [{"name": "leave", "argv": ["sh", "-c", "sleep 600 > /dev/null 2>&1 &"]},
                 {"name": "look", "argv": ["python3", "-c",
                                           "import os\n"
                                           "print(sum(1 for p in os.listdir('/proc') if p.isdigit()"
                                           " and open('/proc/%s/comm' % p).read().strip() == "
                                           "'sleep'))"]}]
        status, body = self.d.rpc("Run", {"project": {"steps": steps}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["steps"][1]["stdout"], "0\n", body)


HostileProjectsRunc, HostileProjectsRunsc = per_runtime(HostileProjects)


if __name__ == "__main__":
    unittest.main()
