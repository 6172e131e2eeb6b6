# SPDX-License-Identifier: Apache-2.0
"""A project's result comes over a channel guest code cannot write
(issue #12, section 2; issue #37), under runc and runsc.

The sandbox's PID 1 runs each step the daemon sends on its stdin, and when
the step ended, kills and reaps everything else before it ends both
streams with a marker holding a nonce only it and the daemon know and the
step's exit status (docs/providers/docker.md, "A project").  An earlier step
that writes forged reports into every descriptor it can open, floods its
output without a newline, tries to kill whatever reports, forges the
marker, writes step commands into PID 1's stdin, waits there to steal the
next command, or hides processes from the cleanup, cannot change what the
later steps report."""
import os
import sys
import time
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


# A step's end marker as a guest would guess it: the prefix, a nonce of
# the right shape, a status; a bare prefix; then more output.
FAKE_MARKER = r"""
import os, sys
for fd in (1, 2):
    os.write(fd, b'\x1eplimsoll-end ' + b'0' * 32 + b' 000\n')
    os.write(fd, b'\x1eplimsoll-end ')   # a prefix with nothing after
print('after the fake marker', flush=True)
"""

# The steps' runner is a step's parent: a project container's PID 1, or a
# session's runner exec.
# Step commands written into the runner's stdin (under runsc a process can open
# another's descriptors whatever its group; under runc Linux refuses),
# some framed as the daemon frames them, one with a made-up token.
INJECT = r"""
import json, os
cmd = json.dumps({"token": "0" * 32, "argv": ["sh", "-c", "echo INJECTED; touch /work/injected"],
                  "end": "1" * 32}).encode()
frame = str(len(cmd)).encode() + b"\n" + cmd
try:
    fd = os.open('/proc/%d/fd/0' % os.getppid(), os.O_WRONLY | os.O_NONBLOCK)
except OSError as e:
    print('stdin of the runner: refused', e.errno)
else:
    n = 0
    for _ in range(8):
        try:
            n += os.write(fd, frame)
        except OSError:
            break
    print('stdin of the runner: wrote', n > 0)
"""

# A reader left behind on the runner's stdin, to steal the next step's command
# (its nonce) and write it where the next step could see it.
STEAL = r"""
import os
try:
    fd = os.open('/proc/%d/fd/0' % os.getppid(), os.O_RDONLY)
except OSError as e:
    print('stdin of the runner: refused', e.errno)
else:
    print('stdin of the runner: opened', flush=True)
    if os.fork() == 0:
        os.setsid()
        data = os.read(fd, 65536)
        with open('/work/stolen', 'wb') as f:
            f.write(data)
        os.write(1, b'STOLEN ' + data)
        os._exit(0)
"""

# Processes that try to outlive their step: a subreaper with a child, a
# stopped process, a leader whose main thread exited while another runs,
# a double fork in a new session, and a fork loop racing the cleanup.
HIDE = r"""
import ctypes, os, signal, threading, time
libc = ctypes.CDLL(None)
def forever():
    while True:
        time.sleep(1)
if os.fork() == 0:                      # a subreaper with a child
    libc.prctl(36, 1, 0, 0, 0)          # PR_SET_CHILD_SUBREAPER
    if os.fork() == 0:
        forever()
    forever()
if os.fork() == 0:                      # a stopped process (in a session of
    os.setsid()                         # its own: gVisor would hang up the step's)
    os.kill(os.getpid(), signal.SIGSTOP)
    forever()
if os.fork() == 0:                      # a leader whose main thread exits alone
    threading.Thread(target=forever).start()
    libc.syscall(60, 0)                 # exit(2) of this thread only (x86-64)
if os.fork() == 0:                      # a double fork in a new session
    os.setsid()
    if os.fork() == 0:
        forever()
    os._exit(0)
if os.fork() == 0:                      # a fork loop
    os.setsid()
    while True:
        try:
            if os.fork() == 0:
                time.sleep(0.05)
                os._exit(0)
        except OSError:
            time.sleep(0.01)
time.sleep(0.5)
print('hidden')
"""

# Counts every process of its own group but PID 1, the runner, itself and
# a later step's waiter (its command's last word is "later": plimsoll's,
# started before any step), as the next step sees them (a session's kept
# interpreters have groups of their own).
COUNT = ("import os\n"
         "me = os.getpid()\n"
         "def gid(p):\n"
         "    for line in open('/proc/%s/status' % p):\n"
         "        if line.startswith('Gid:'):\n"
         "            return int(line.split()[1])\n"
         "def waiter(p):\n"
         "    return open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[-2:] == [b'later', b'']\n"
         "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and\n"
         "             int(p) not in (1, me, os.getppid()) and gid(p) == os.getgid()\n"
         "             and not waiter(p)))")

# What a step inherits from its runner (the step's parent: PID 1, or a
# session's runner), changed from outside by an earlier step: soft limits
# and CPUs, which the runner puts back, or what only a privilege could undo.
INHERITED = ("import os, resource\n"
             "print(resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit("
             "resource.RLIMIT_STACK), os.getpriority(os.PRIO_PROCESS, 0),"
             " sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0))")
RESTORABLE = ("import os, resource\n"
              "p = os.getppid()\n"
              "hard = resource.prlimit(p, resource.RLIMIT_NOFILE)[1]\n"
              "resource.prlimit(p, resource.RLIMIT_NOFILE, (16, hard))\n"
              "resource.prlimit(p, resource.RLIMIT_CORE, (0, resource.prlimit(p, "
              "resource.RLIMIT_CORE)[1]))\n"
              "os.sched_setaffinity(p, {0})\n"
              "print('changed', resource.prlimit(p, resource.RLIMIT_NOFILE))")
LASTING = ("import os, resource\n"
           "p = os.getppid()\n"
           "resource.prlimit(p, resource.RLIMIT_STACK, (65536, 65536))\n"
           "os.setpriority(os.PRIO_PROCESS, p, 19)\n"
           "print('changed', resource.prlimit(p, resource.RLIMIT_STACK))")


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

    def run_project(self, body):
        return self.d.rpc("Run", body)

    def project(self, first, timeout_ms=30000):
        files = [{"path": "first.py", "content": first}]
        steps = [{"name": "hostile", "argv": ["python3", "first.py"]},
                 {"name": "two", "argv": ["python3", "-c", "print('real two')"]},
                 {"name": "three", "argv": ["sh", "-c", "echo real three; exit 3"]},
                 {"name": "never", "argv": ["python3", "-c", "print('must not run')"]}]
        status, body = self.run_project({"project": {"files": files, "steps": steps},
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
        status, body = self.run_project({"project": {"steps": [
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
        status, body = self.run_project({"project": {"steps": steps}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["steps"][1]["stdout"], "0\n", body)

    def test_a_forged_end_marker_is_output(self):
        b = self.project(FAKE_MARKER)
        self.assert_true_results(b)
        one = b["steps"][0]
        self.assertEqual(one["exit_code"], 0, b)
        self.assertIn("after the fake marker", one["stdout"], b)
        self.assertIn("\x1eplimsoll-end " + "0" * 32 + " 000\n", one["stdout"], b)
        self.assertTrue(one["stderr"].endswith("\x1eplimsoll-end "), b)

    def test_commands_written_into_pid1s_stdin_do_not_run(self):
        b = self.project(INJECT)
        self.assert_true_results(b)
        said = b["steps"][0]["stdout"]
        if self.RUNTIME == "runc":
            self.assertIn("stdin of the runner: refused", said, b)
        self.assertNotIn("INJECTED", "".join(s["stdout"] + s["stderr"] for s in b["steps"]), b)

    def test_a_reader_left_on_pid1s_stdin_steals_nothing(self):
        files = [{"path": "first.py", "content": STEAL}]
        steps = [{"name": "steal", "argv": ["python3", "first.py"]},
                 {"name": "look", "argv": ["python3", "-c",
                                           "import os; print(sorted(os.listdir('/work')))"]}]
        status, b = self.run_project({"project": {"files": files, "steps": steps}})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["outcome"], "completed", b)
        self.assertEqual(b["steps"][1]["stdout"], "['first.py']\n", b)
        self.assertNotIn("STOLEN", b["steps"][0]["stdout"] + b["steps"][1]["stdout"], b)
        if self.RUNTIME == "runc":
            self.assertIn("stdin of the runner: refused", b["steps"][0]["stdout"], b)

    def test_nothing_hides_from_the_cleanup_between_steps(self):
        files = [{"path": "first.py", "content": HIDE}]
        steps = [{"name": "hide", "argv": ["python3", "first.py"]},
                 {"name": "count", "argv": ["python3", "-c", COUNT]}]
        status, b = self.run_project({"project": {"files": files, "steps": steps},
                                       "timeout_ms": 60000})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["outcome"], "completed", b)
        self.assertEqual(b["steps"][0]["stdout"], "hidden\n", b)
        self.assertEqual(b["steps"][1]["stdout"], "[]\n", b)

    def test_what_a_step_changes_of_its_runner_reaches_no_later_step(self):
        steps = [{"name": "before", "argv": ["python3", "-c", INHERITED]},
                 {"name": "change", "argv": ["python3", "-c", RESTORABLE]},
                 {"name": "after", "argv": ["python3", "-c", INHERITED]},
                 {"name": "lasting", "argv": ["python3", "-c", LASTING]},
                 {"name": "refused", "argv": ["python3", "-c", "print('must not run')"]},
                 {"name": "never", "argv": ["true"]}]
        status, b = self.run_project({"project": {"steps": steps}})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["outcome"], "completed", b)
        got = [(s["name"], s["exit_code"]) for s in b["steps"]]
        self.assertEqual(got, [("before", 0), ("change", 0), ("after", 0), ("lasting", 0),
                               ("refused", 126)], b)
        self.assertEqual(b["steps"][1]["stdout"], "changed (16, 1024)\n", b)
        # The soft limits and CPUs were put back: the next step inherits
        # what the first did.
        self.assertEqual(b["steps"][2]["stdout"], b["steps"][0]["stdout"], b)
        # A lowered hard limit and a raised nice value cannot be put back
        # unprivileged: the next step is not run, and says why.
        self.assertEqual(b["steps"][3]["stdout"], "changed (65536, 65536)\n", b)
        refused = b["steps"][4]
        self.assertEqual(refused["stdout"], "", b)
        self.assertIn("an earlier step changed what every step inherits", refused["stderr"], b)
        # (gVisor lets the runner lower its nice value again: put back.)
        self.assertRegex(refused["stderr"], r"\(RLIMIT_STACK(, nice value)?\)", b)
        if self.RUNTIME == "runc":
            self.assertIn("(RLIMIT_STACK, nice value)", refused["stderr"], b)
        self.assertIn("step 5 (refused) exited 126", b["detail"], b)


HostileProjectsRunc, HostileProjectsRunsc = per_runtime(HostileProjects)

# A step against every other process it can see but PID 1: in a pooled
# container, the later python3 steps' waiters (docs/providers/docker.md,
# "The steps wait").  It opens what /proc lets it, writes a forged answer
# and a forged step into what opened, and then stops, signals, kills or
# changes the limits, nice value and CPUs of each, as argv[1] says.
ATTACK = r"""
import os, resource, signal, sys
mode, me = sys.argv[1], os.getpid()
others = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)]
def fds(p):
    try:
        return ['fd/' + f for f in os.listdir('/proc/%d/fd' % p)]
    except OSError:
        return ['fd/%d' % n for n in range(8)]
opened = set()
for p in others:
    for name in ['mem', 'environ'] + fds(p):
        for how in (os.O_RDWR, os.O_WRONLY, os.O_RDONLY):
            try:
                fd = os.open('/proc/%d/%s' % (p, name), how | os.O_NONBLOCK)
            except OSError:
                continue
            opened.add(name)
            try:
                os.write(fd, b'!1\0python3\0-c\0print("FORGED")')
            except OSError:
                pass
            os.close(fd)
            break
for p in others:
    try:
        if mode == 'stop':
            os.kill(p, signal.SIGSTOP)
        elif mode == 'pending':
            os.kill(p, signal.SIGSTOP)
            os.kill(p, signal.SIGUSR1)
        elif mode in ('kill', 'int'):
            os.kill(p, signal.SIGKILL if mode == 'kill' else signal.SIGINT)
        elif mode == 'limits':
            resource.prlimit(p, resource.RLIMIT_NOFILE, (16, 16))
            os.setpriority(os.PRIO_PROCESS, p, 19)
            os.sched_setaffinity(p, {0})
    except OSError as e:
        print('refused', mode, e.errno)
print('others', len(others), 'opened', sorted(n for n in opened if n.startswith('fd/') and
                                               n not in ('fd/0', 'fd/1', 'fd/2')) + sorted(
      n for n in opened if n == 'mem'))
"""
# What a step inherits and whether it ran in a waiter (its stack's depth).
REPORT = ("import os, resource, traceback\n"
          "print(len(traceback.extract_stack()), resource.getrlimit(resource.RLIMIT_NOFILE),"
          " os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)))")


class HostileStepWaiters(DockerDaemon):
    """The later steps' waiters a pooled project container keeps beside the
    steps: an earlier step that reaches for them changes nothing of a
    later step's result or of what it inherits; a waiter that was stopped
    is continued and used, one that was killed, signalled or changed is
    not used (the step starts fresh)."""
    INSTANCE = "hostile-waiters-"

    def attacked(self, mode):
        """(step 1's output, the two later steps' REPORTs, their depths)."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # a pooled container: waiters
            desc = self.d.rpc("Describe", {})[1]
            runs = [p for p in desc.get("pools", []) if p["name"] == "runs"]
            if runs and runs[0]["waiting"] >= runs[0]["target"]:
                break
            time.sleep(0.2)
        time.sleep(1.5)  # and its waiters started
        steps = [{"name": "attack", "argv": ["python3", "attack.py", mode]},
                 {"name": "two", "argv": ["python3", "-c", REPORT]},
                 {"name": "three", "argv": ["python3", "-c", REPORT]}]
        status, b = self.d.rpc("Run", {"project": {
            "files": [{"path": "attack.py", "content": ATTACK}], "steps": steps}})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["outcome"], "completed", b)
        self.assertEqual([s["exit_code"] for s in b["steps"]], [0, 0, 0], b)
        # (What it wrote into a waiter's stdout and stderr, the container's
        # own under runsc, is its own output.)
        for s in b["steps"][1:]:
            self.assertNotIn("FORGED", s["stdout"] + s["stderr"], b)
        for s in b["steps"]:
            self.assertNotIn("Traceback", s["stderr"], b)
        later = [s["stdout"].split(" ", 1) for s in b["steps"][1:]]
        # What the later steps inherit is the sandbox's, whatever was done.
        self.assertEqual([r for _, r in later], [BASE_REPORT[self.RUNTIME]] * 2, b)
        return b["steps"][0]["stdout"], [int(d) for d, _ in later]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        status, b = cls.d.rpc("Run", {"memory_mb": 128, "project": {"steps": [
            {"name": "base", "argv": ["python3", "-c", REPORT]}]}})
        assert status == 200 and b["steps"][0]["exit_code"] == 0, b
        depth, BASE_REPORT[cls.RUNTIME] = b["steps"][0]["stdout"].split(" ", 1)
        cls.fresh = int(depth)

    def test_what_a_step_can_open_of_a_waiter_lets_it_forge_nothing(self):
        said, depths = self.attacked("look")
        self.assertIn("others 2 opened []", said)  # no channel, no memory
        self.assertEqual(depths, [self.fresh + 2] * 2)  # both waiters used

    def test_a_stopped_waiter_is_continued_and_used(self):
        said, depths = self.attacked("stop")
        self.assertEqual(depths, [self.fresh + 2] * 2)

    def test_a_waiter_killed_or_signalled_is_not_used(self):
        for mode in ("kill", "int", "pending"):
            with self.subTest(mode=mode):
                said, depths = self.attacked(mode)
                self.assertIn("others 2", said)
                self.assertEqual(depths, [self.fresh] * 2)

    def test_a_waiter_whose_limits_or_scheduling_changed_is_not_used(self):
        said, depths = self.attacked("limits")
        self.assertNotIn("refused", said)
        self.assertEqual(depths, [self.fresh] * 2)


BASE_REPORT = {}
HostileStepWaitersRunc, HostileStepWaitersRunsc = per_runtime(HostileStepWaiters)


def watch_fds(match):
    """The middle of a cell that leaves a thread watching the step runner:
    for each process but PID 1 and itself for which match (Python, of p)
    holds, it opens the process's fds 0, 1 and 2 (f), each in a try."""
    return ("        for p in os.listdir('/proc'):\n"
            "            if not p.isdigit() or int(p) in (1, os.getpid()):\n"
            "                continue\n"
            "            try:\n"
            "                if not (%s):\n"
            "                    continue\n"
            "            except OSError:\n"
            "                continue\n"
            "            for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):\n"
            "                try:\n"
            "                    f = os.open('/proc/%%s/fd/%%d' %% (p, fd), mode | os.O_NONBLOCK)\n"
            % match)


# The end of that cell: what it opened is closed, and it looks again every
# millisecond.
WATCH_END = ("                except OSError:\n"
             "                    pass\n"
             "                os.close(f)\n"
             "        time.sleep(0.001)\n"
             "threading.Thread(target=watch, daemon=True).start()\n")


class HostileSessionProjectsRunc(HostileProjects, unittest.TestCase):
    """The same steps as a session's project call, where one exec of the
    step runner runs them beside the kept interpreters (docs/sessions.md,
    "A project call"), and what those interpreters can do to it."""
    INSTANCE = "hostile-session-projects-"
    RUNTIME = "runc"
    SETTINGS = {"SANDBOX_OUTPUT_BYTES": "65536", "SANDBOX_MAX_SESSIONS": "4",
                "SANDBOX_DOCKER_WARM": "0"}

    def run_project(self, body):
        status, s = self.d.rpc("OpenSession", {"languages": ["python", "javascript"]})
        self.assertEqual(status, 200, s)
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": s["session_id"]})
        self.sid = s["session_id"]
        return self.d.rpc("RunInSession", {"session_id": self.sid, "run": body})

    def cell(self, code):
        status, b = self.d.rpc("RunCell", {"session_id": self.sid,
                                           "cell": {"language": "python", "code": code}})
        self.assertEqual(status, 200, b)
        return b

    def test_kill_everything_it_can(self):
        # The runner is an exec of the calls' uid: the step can kill it (and
        # the kept interpreters), and its SIGTERM ends the session's PID 1
        # (which takes SIGTERM as the engine's stop).  The answer says the
        # runner or the sandbox ended; nothing of a later step is reported;
        # the next call runs or is refused as SESSION_ENDED.
        b = self.project(KILLER)
        self.assertEqual((b["outcome"], b["steps"]), ("protocol_error", []), b)
        self.assertRegex(b["detail"], r"the (session's step runner|sandbox) ended during step 1 "
                                      r"\(hostile\)", b)
        status, again = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {
            "project": {"steps": [{"argv": ["sh", "-c", "echo again"]}]}}})
        if status == 200:
            self.assertEqual(again["steps"][0]["stdout"], "again\n", again)
        else:
            self.assertEqual((status, again["details"][0]["debug"]["reason"]),
                             (400, "SESSION_ENDED"), again)

    def two_steps_watched(self):
        # Two steps, while what a cell left in the kept interpreter watches.
        steps = [{"name": "one", "argv": ["sh", "-c", "sleep 0.3; echo real one"]},
                 {"name": "two", "argv": ["sh", "-c", "echo real two; exit 3"]}]
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {
            "project": {"steps": steps}}})
        self.assertEqual(status, 200, b)
        return b

    def test_a_kept_interpreter_cannot_reach_the_runner(self):
        # A cell leaves a thread in the kept Python interpreter that, while
        # the next call's steps run, opens every descriptor of every process
        # of another group it finds (the runner's stdin, to steal the next
        # step's nonce; its stdout, to forge a marker).  Under runc Linux
        # refuses them all: the runner is not dumpable and its group differs.
        self.run_project({"project": {"steps": [{"argv": ["true"]}]}})
        self.cell("import os, threading, time\n"
                  "seen = {}\n"
                  "def watch():\n"
                  "    end = time.time() + 20\n"
                  "    while time.time() < end:\n"
                  + watch_fds("b'steps' in open('/proc/%s/cmdline' % p, 'rb').read()") +
                  "                except OSError:\n"
                  "                    seen[(p, fd)] = 'refused'\n"
                  "                    continue\n"
                  "                seen[(p, fd)] = 'opened'\n"
                  "                try:\n"
                  "                    os.read(f, 65536) if fd == 0 else os.write(f, b'\\x1eplimsoll-end ')\n"
                  + WATCH_END)
        b = self.two_steps_watched()
        self.assertEqual([(s["stdout"], s["exit_code"]) for s in b["steps"]],
                         [("real one\n", 0), ("real two\n", 3)], b)
        seen = self.cell("sorted(set(seen.values()))")["stdout"]
        self.assertEqual(seen, "['refused']\n")


    RUNNERS = ("import os\n"
               "r = []\n"
               "for p in os.listdir('/proc'):\n"
               "    try:\n"
               "        if b'/run/plimsoll/steps.sock\\0' in open('/proc/%s/cmdline' % p, 'rb').read():\n"
               "            r.append(int(p))\n"
               "    except (OSError, ValueError):\n"
               "        pass\n"
               "print(sorted(r))\n")

    def runners(self):
        """The step runners the sandbox shows, as a cell sees them."""
        return eval(self.cell(self.RUNNERS)["stdout"])

    def test_a_runner_waits_for_the_next_call_and_ends_with_it(self):
        # After a project call the cleanup leaves one runner waiting; it is
        # spared by the cleanups after the calls that do not use it (a
        # process a cell left is not), and the project call that takes it
        # ends it: the next waits in its place.
        self.run_project({"project": {"steps": [{"argv": ["true"]}]}})
        first = self.runners()
        self.assertEqual(len(first), 1, first)
        self.cell("import subprocess\n"
                  "left = subprocess.Popen(['sleep', '1000'], start_new_session=True).pid\n")
        self.assertEqual(self.runners(), first)
        # Killed by the cleanup: gone, or a zombie its interpreter has not
        # reaped.
        self.assertEqual(self.cell("try:\n"
                                   "    st = open('/proc/%d/stat' % left).read()\n"
                                   "    print(st[st.rfind(')') + 2] in 'ZX')\n"
                                   "except OSError:\n"
                                   "    print(True)\n")["stdout"], "True\n")
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"project": {
            "steps": [{"argv": ["sh", "-c", "echo one"]}, {"argv": ["sh", "-c", "echo two"]}]}}})
        self.assertEqual(status, 200, b)
        self.assertEqual([s["stdout"] for s in b["steps"]], ["one\n", "two\n"], b)
        second = self.runners()
        self.assertEqual(len(second), 1, second)
        self.assertNotEqual(second, first)

    def test_a_runner_a_cell_killed_is_replaced(self):
        # A kept interpreter shares the runner's uid and may kill it while
        # it waits: the next project call finds its socket ended and starts
        # one of its own.
        self.run_project({"project": {"steps": [{"argv": ["true"]}]}})
        pids = self.runners()
        self.assertEqual(len(pids), 1, pids)
        self.cell("import os, signal\nos.kill(%d, signal.SIGKILL)\n" % pids[0])
        for steps in (1, 3):
            status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"project": {
                "steps": [{"argv": ["sh", "-c", "echo ran"]}] * steps}}})
            self.assertEqual(status, 200, b)
            self.assertEqual((b["outcome"], [s["stdout"] for s in b["steps"]]),
                             ("completed", ["ran\n"] * steps), b)
            self.cell("import os, signal\n"
                      "for p in %s:\n"
                      "    os.kill(p, signal.SIGKILL)\n" % self.runners())

    WAITERS = ("import os\n"
               "w = []\n"
               "for p in os.listdir('/proc'):\n"
               "    try:\n"
               "        c = open('/proc/%s/cmdline' % p, 'rb').read()\n"
               "    except (OSError, ValueError):\n"
               "        continue\n"
               "    if c.startswith(b'python3\\0-c\\0') and c.endswith(b'\\0later\\0'):\n"
               "        w.append(int(p))\n"
               "print(sorted(w))\n")
    # A python3 step that says its open-files limit and whether a waiter
    # ran it (a waiter's /proc/self/cmdline is its own command).
    LOOK = {"argv": ["python3", "-c", "import resource; print(resource.getrlimit("
                     "resource.RLIMIT_NOFILE)[0], open('/proc/self/cmdline', 'rb').read()"
                     ".endswith(b'later\\0'))"]}

    def test_waiters_a_call_tampered_with(self):
        # A waiting runner starts as many python3 steps' waiters as a call
        # before had python3 steps (three at most).  A snippet call runs as
        # their group: it lowers one's open-files limit and stops another
        # while they wait (a kept interpreter, another group, may only
        # signal them).  The lowered one takes no step (it is not what the
        # runner holds: that step starts fresh), the stopped one is
        # continued and used, and every step sees the limit a fresh
        # process has.
        status, b = self.run_project({"project": {"steps": [self.LOOK] * 3}})
        self.assertEqual((status, b["outcome"]), (200, "completed"), b)
        limit = b["steps"][0]["stdout"].split()[0]
        waiters = eval(self.cell(self.WAITERS)["stdout"])
        self.assertEqual(len(waiters), 3, waiters)
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"snippet": {
            "language": "python",
            "code": "import os, resource, signal\n"
                    "resource.prlimit(%d, resource.RLIMIT_NOFILE, (64, resource.getrlimit("
                    "resource.RLIMIT_NOFILE)[1]))\n"
                    "print(resource.prlimit(%d, resource.RLIMIT_NOFILE)[0])\n"
                    "os.kill(%d, signal.SIGSTOP)\n" % (waiters[0], waiters[0], waiters[1])}}})
        self.assertEqual((status, b["stdout"]), (200, "64\n"), b)
        self.assertEqual(self.runners() and eval(self.cell(self.WAITERS)["stdout"]), waiters)
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"project": {
            "steps": [self.LOOK] * 3}}})
        self.assertEqual((status, b["outcome"]), (200, "completed"), b)
        said = sorted(s["stdout"].split()[1] for s in b["steps"])
        self.assertEqual([s["stdout"].split()[0] for s in b["steps"]], [limit] * 3, b)
        self.assertEqual(said, ["False", "True", "True"], b)

    def test_no_process_of_a_call_can_stand_in_for_the_runner(self):
        # A snippet call runs as the calls' group, the runner's: while a
        # runner waits, the steps' socket is not there to connect to, and
        # what the call leaves is ended by the cleanup, which spares the
        # runner alone (by its pid and start time, which it said on its
        # socket).
        self.run_project({"project": {"steps": [{"argv": ["true"]}]}})
        pids = self.runners()
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"snippet": {
            "language": "python",
            "code": "import os, socket, subprocess\n"
                    "c = socket.socket(socket.AF_UNIX)\n"
                    "try:\n"
                    "    c.connect('/run/plimsoll/steps.sock')\n"
                    "    print('connected')\n"
                    "except OSError as e:\n"
                    "    print(type(e).__name__)\n"
                    "subprocess.Popen(['python3', '-c', 'import time; time.sleep(1000)', "
                    "'/run/plimsoll/steps.sock'], start_new_session=True)\n"}}})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["stdout"], "FileNotFoundError\n", b)
        self.assertEqual(self.runners(), pids)
        status, b = self.d.rpc("RunInSession", {"session_id": self.sid, "run": {"project": {
            "steps": [{"argv": ["sh", "-c", "echo ran"]}]}}})
        self.assertEqual((b["outcome"], b["steps"][0]["stdout"]), ("completed", "ran\n"), b)


class HostileSessionProjectsRunsc(HostileSessionProjectsRunc):
    """Under runsc, where any process of the sandbox's uid can open another's
    pipes, the runner's commands come on a socket that only the calls'
    group may connect to, listened on while the runner starts."""
    INSTANCE = "hostile-session-projects-runsc-"
    RUNTIME = "runsc"

    def test_a_kept_interpreter_cannot_reach_the_runner(self):
        # A thread a cell left in the kept Python interpreter, while the
        # next call starts its runner and runs its steps (an interpreter
        # that writes into the other execs' output too, the files writer's
        # or the cleanup's, ends its session: their reports are exact), connects to
        # the commands' socket whenever it exists, opens the runner's stdin
        # to read the next nonce, and writes forged end markers into the
        # runner's output (gVisor lets it open the pipes).  The socket
        # refuses its group, stdin is that socket (gVisor reopens no socket
        # through /proc), and a marker without the nonce is output.
        self.run_project({"project": {"steps": [{"argv": ["true"]}]}})
        self.cell("import os, socket, threading, time\n"
                  "seen = {}\n"
                  "def watch():\n"
                  "    end = time.time() + 20\n"
                  "    while time.time() < end:\n"
                  "        c = socket.socket(socket.AF_UNIX)\n"
                  "        try:\n"
                  "            c.connect('/run/plimsoll/steps.sock')\n"
                  "            seen['connect'] = 'connected'\n"
                  "        except PermissionError:\n"
                  "            seen.setdefault('connect', 'refused')\n"
                  "        except OSError:\n"
                  "            pass\n"
                  "        c.close()\n"
                  + watch_fds("b'steps.sock\\0' in open('/proc/%s/cmdline' % p, 'rb').read()") +
                  "                except OSError:\n"
                  "                    seen[(fd, 'refused')] = 1\n"
                  "                    continue\n"
                  "                seen[(fd, 'opened')] = 1\n"
                  "                try:\n"
                  "                    if fd == 0 and os.read(f, 65536):\n"
                  "                        seen[(fd, 'read data')] = 1\n"
                  "                    elif fd:\n"
                  "                        os.write(f, b'\\x1eplimsoll-end ' + b'0' * 32 + b' 000\\n')\n"
                  + WATCH_END)
        b = self.two_steps_watched()
        # Each step reported is the real one.  A forged marker written
        # after a real one is output after the end: the call stops there as
        # protocol_error, as when the interpreter kills the runner.
        real = [("one", 0, "real one\n"), ("two", 3, "real two\n")]
        self.assertLessEqual(len(b["steps"]), 2, b)
        for got, (name, code, out) in zip(b["steps"], real):
            self.assertEqual((got["name"], got["exit_code"]), (name, code), b)
            self.assertIn(out, got["stdout"], b)
        if len(b["steps"]) < 2:
            self.assertEqual(b["outcome"], "protocol_error", b)
            self.assertIn("ended with a broken end marker, or output after it", b["detail"], b)
        seen = self.cell("sorted(seen.items(), key=str)")["stdout"]
        # The socket was there and refused the interpreter's group; the
        # runner's stdin opened only while it was the exec's pipe, which
        # carries nothing, and not once it was the socket; the output pipes
        # opened, and what was written there is a step's output, not its end.
        self.assertIn("('connect', 'refused')", seen)
        self.assertIn("((0, 'refused'), 1)", seen)
        self.assertNotIn("connected", seen)
        self.assertNotIn("read data", seen)
        self.assertIn("((1, 'opened'), 1)", seen)


if __name__ == "__main__":
    unittest.main()
