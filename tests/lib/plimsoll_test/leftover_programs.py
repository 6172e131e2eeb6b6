# SPDX-License-Identifier: Apache-2.0
"""Hostile guest programs that try to outlive their run or call (issue #12,
section 1), shared by every provider's suite: tests/hostile (docker, checked
from the host) and tests/e2b (checked inside the session's VM).  Each is
Python; MARK % marker first names every process it starts (comm), so a
survivor can be found whatever the provider.  StepLeftovers runs each as a
project's step, the next step counting survivors (COUNT_MARKED), on any
provider whose test class has run_ok."""
import secrets

# Guest code first in the cases below: deaf_daemon(then) leaves a grandchild
# in its own session (its parent exits) that ignores every catchable signal,
# calls then() if given, and sleeps for ever.
DEAF_DAEMON = r"""
import os, signal, time
def deaf_daemon(then=None):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for s in range(1, 65):
                try:
                    signal.signal(s, signal.SIG_IGN)
                except (OSError, ValueError, RuntimeError):
                    pass
            if then:
                then()
            while True:
                time.sleep(0.2)
        os._exit(0)
"""

# A PID 1 whose main thread exits alone (the raw exit system call, not
# exit_group) reads as a zombie to the runtime, which then calls the
# container stopped, while its other thread runs on; a grandchild in its own
# session ignores every catchable signal.
ZOMBIE_LEADER = DEAF_DAEMON + r"""
import ctypes, threading
libc = ctypes.CDLL(None, use_errno=True)
deaf_daemon()
def spin():
    while True:
        time.sleep(0.2)
threading.Thread(target=spin).start()
print("leader exits", flush=True)
time.sleep(0.2)
libc.syscall(60, 0)
"""

# Trace PID 1 from a grandchild (the engine's default profile allows it):
# PID 1 sits in a tracing stop; the tracer ignores every catchable signal.
TRACE_PID1 = DEAF_DAEMON + r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def attach():
    r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH
    os.write(1, b"attach %d errno %d\n" % (r, ctypes.get_errno()))
deaf_daemon(attach)
time.sleep(0.5)
print("pid1 still runs", flush=True)
time.sleep(600)
"""

STOP_SELF = r"""
import os, signal, time
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(600)
        os._exit(0)
print("children stopped", flush=True)
try:
    os.kill(1, signal.SIGSTOP)  # PID 1 itself: Linux ignores it; gVisor stops it
except OSError as e:
    print("stop pid 1 refused", e.errno)
time.sleep(600)
"""

DAEMONS_THEN_EXIT = DEAF_DAEMON + r"""
for _ in range(5):
    deaf_daemon()
print("bye")
"""

# Everything a hostile snippet starts inherits this name (comm), so the
# host can find a survivor whatever the daemon's settings.
MARK = """
import ctypes as _c
_c.CDLL(None).prctl(15, b"%s", 0, 0, 0)
"""


# The programs of this file that try to outlive their run, by name.
LEFTOVER_PROGRAMS = {"zombie_leader": ZOMBIE_LEADER, "stop_self": STOP_SELF,
                     "daemons_then_exit": DAEMONS_THEN_EXIT}

# argv[1]: a marker.  Prints how many processes named so (comm) are alive:
# a process is alive while any of its threads is.
COUNT_MARKED = ("import os, sys\n"
                "def alive(p):\n"
                "    try:\n"
                "        tids = os.listdir('/proc/%s/task' % p)\n"
                "    except OSError:\n"
                "        return False\n"
                "    for t in tids:\n"
                "        try:\n"
                "            raw = open('/proc/%s/task/%s/stat' % (p, t)).read()\n"
                "        except OSError:\n"
                "            continue\n"
                "        if raw[raw.rfind(')') + 2] not in 'ZXx':\n"
                "            return True\n"
                "    return False\n"
                "n = 0\n"
                "for p in os.listdir('/proc'):\n"
                "    try:\n"
                "        if p.isdigit() and open('/proc/%s/comm' % p).read().strip() == sys.argv[1] \\\n"
                "                and alive(p):\n"
                "            n += 1\n"
                "    except OSError:\n"
                "        pass\n"
                "print(n)\n")


class StepLeftovers:
    """Each program as a project's first step; the second step counts the
    processes it left (the cleanup between steps must leave none).  Mixed
    into a unittest class with run_ok(message) -> the Run answer."""

    def marked(self, name):
        marker = "plh" + secrets.token_hex(4)
        return marker, MARK % marker + LEFTOVER_PROGRAMS[name]

    def check_step(self, name):
        marker, code = self.marked(name)
        # The program's own process ends after 3 s at most (some sleep for
        # ever); what it started is the cleanup's, before the next step.
        r = self.run_ok({"timeout_ms": 20000, "project": {"steps": [
            {"name": "hostile", "argv": ["sh", "-c", 'timeout -s KILL 3 python3 -c "$0"; exit 0',
                                         code]},
            {"name": "look", "argv": ["python3", "-c", COUNT_MARKED, marker]}]}})
        self.assertEqual(len(r["steps"]), 2, r)
        self.assertEqual(r["steps"][1]["stdout"], "0\n", r)

    def test_programs_that_try_to_outlive_a_step(self):
        for name in LEFTOVER_PROGRAMS:
            with self.subTest(name):
                self.check_step(name)
