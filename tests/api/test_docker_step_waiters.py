# SPDX-License-Identifier: Apache-2.0
"""The steps' waiters of a pooled project container (bootstrap.py,
step_wait.py; docs/providers/docker.md, "The steps wait"): a step run by
the first step's waiter or by a later step's runs as the same step run in
a cold container, which has no waiters and starts python3 fresh: what
the program sees of itself (argv, sys.path, flags, modules, __main__,
environment, signals, descriptors, streams, limits, a user site an
earlier step made) and what it leaves (output, tracebacks, exit codes),
for each form a waiter takes (`python3 -c`, `python3 FILE`,
`python3 -m`) and for the commands it execs instead.  Python itself is
the reference.  Under runc and runsc."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, per_runtime  # noqa: E402

# What a Python program sees of itself, as JSON on one line.  The stack's
# depth is the one thing that tells the two apart (the waiter's two frames
# are outermost): it is reported apart.
PROBE = r"""
import json, os, resource, signal, sys, traceback
g = globals()
seen = {
    "argv": sys.argv, "orig_argv": [a if len(a) < 80 else len(a) for a in sys.orig_argv], "path": sys.path, "flags": list(sys.flags), "modules": sorted(sys.modules),
    "main": sorted(g), "file": g.get("__file__"), "cached": g.get("__cached__", "absent"),
    "loader": getattr(__loader__, "__name__", type(__loader__).__name__),
    "spec": None if __spec__ is None else __spec__.name, "name": __name__,
    "executable": sys.executable, "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k != "HOSTNAME"},  # the container's
    "session": os.getsid(0) == os.getpid(), "group": os.getpgid(0) == os.getpid(),
    "mask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "handlers": {int(s): str(signal.getsignal(s)) for s in signal.valid_signals()
                 if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "fds": sorted(os.listdir("/proc/self/fd")), "stdin": os.readlink("/proc/self/fd/0"),
    "streams": [[type(f).__name__, type(f.buffer).__name__, f.line_buffering, f.write_through,
                 f.encoding, f.errors] for f in (sys.stdin, sys.stdout, sys.stderr)],
    "bytecode": sys.dont_write_bytecode, "recursion": sys.getrecursionlimit(),
    "limits": [resource.getrlimit(getattr(resource, k)) for k in sorted(dir(resource))
               if k.startswith("RLIMIT_")],
    "nice": os.getpriority(os.PRIO_PROCESS, 0), "warnings": sys.warnoptions,
    "umask": os.umask(0o22),
}
print(json.dumps(seen, sort_keys=True))
print("depth", len(traceback.extract_stack()))
"""

# Commands whose output and exit code must be the same either way.
SAME = [
    ["python3", "-c", "1/0"],
    ["python3", "-c", "import sys; sys.exit('bye')"],
    ["python3", "-c", "def f(:\n    pass"],
    ["python3", "-c", "raise KeyboardInterrupt"],
    ["python3", "-c", "import atexit, threading, time\natexit.register(print, 'at exit')\n"
                      "threading.Thread(target=lambda: (time.sleep(0.3), print('thread'))).start()\n"
                      "print('main')"],
    ["python3", "-c", "import calendar; print(calendar.month(2026, 1))"],  # /work's shadows
    ["python3", "fails.py", "x"],
    ["python3", "missing.py"],
    ["python3", "-m", "fails", "y"],
    ["python3", "-m", "no_such_module"],
    ["python3", "-u", "-c", "import sys; print(sys.flags.unbuffered)"],
    ["sh", "-c", "echo from sh; exit 4"],
    ["no-such-program"],
]

FILES = [
    {"path": "probe.py", "content": PROBE},
    {"path": "probemod.py", "content": PROBE},
    {"path": "calendar.py", "content": "def month(y, m):\n    return 'shadowed'\n"},
    {"path": "fails.py", "content": "import sys\ndef f():\n    raise ValueError(sys.argv)\nf()\n"},
]


class StepWaiters(DockerDaemon):
    INSTANCE = "step-waiters-"

    def pool_full(self):
        """Wait until the runs pool has its target waiting, so the next
        project takes a pooled container (and so its first step's waiter)."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            status, desc = self.d.rpc("Describe", {})
            runs = [p for p in desc.get("pools", []) if p["name"] == "runs"]
            if runs and runs[0]["waiting"] >= runs[0]["target"]:
                return
            time.sleep(0.2)
        self.fail("the runs pool did not fill")

    def last_step(self, steps, cold=False):
        """A project's last step; cold: in a container of its own made for
        it (another memory size: no pool, no waiter), else a pooled one."""
        if not cold:
            self.pool_full()
            if len(steps) > 1:
                time.sleep(1.5)  # and its later waiters started (else killed unused)
        msg = {"project": {"files": FILES, "steps": steps}}
        if cold:
            msg["memory_mb"] = 128
        status, b = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, b)
        self.assertEqual(b["steps"][-1]["name"], "it", b)
        return b["steps"][-1]

    def all_three(self, argv, before=("true",)):
        """(the step as a pooled project's first, as a later step after
        before (a later step's waiter), the same later step in a cold
        container: a fresh python3); the first is None when before is not
        `true` (the step needs what before made)."""
        it = {"name": "it", "argv": argv}
        ahead = {"name": "before", "argv": list(before)}
        first = self.last_step([it]) if before == ("true",) else None
        return (first, self.last_step([ahead, it]), self.last_step([ahead, it], cold=True))

    def probe(self, argv, before=("true",)):
        got = [s for s in self.all_three(argv, before) if s is not None]
        self.assertEqual([s["exit_code"] for s in got], [0] * len(got), got)
        seen = [json.loads(s["stdout"].split("\n")[0]) for s in got]
        depth = [int(s["stdout"].split("\n")[1].split()[1]) for s in got]
        # The waiters' runs: two frames more than the fresh one's.
        self.assertEqual(depth, [depth[-1] + 2] * (len(got) - 1) + [depth[-1]])
        for i in range(len(got) - 1):
            for key in sorted(seen[-1]):
                self.assertEqual(seen[i][key], seen[-1][key], "%s differs for %r" % (key, argv))
            self.assertEqual(seen[i], seen[-1])
        return seen[-1]

    def test_python_c_sees_what_a_fresh_python_sees(self):
        seen = self.probe(["python3", "-c", PROBE, "one", "two"])
        self.assertEqual((seen["argv"], seen["path"][0]), (["-c", "one", "two"], ""))

    def test_python_file_sees_what_a_fresh_python_sees(self):
        seen = self.probe(["python3", "probe.py", "one"])
        self.assertEqual((seen["argv"], seen["path"][0], seen["file"]),
                         (["probe.py", "one"], "/work", "/work/probe.py"))

    def test_python_m_sees_what_a_fresh_python_sees(self):
        seen = self.probe(["python3", "-m", "probemod", "one"])
        self.assertEqual((seen["argv"], seen["path"][0], seen["spec"]),
                         (["/work/probemod.py", "one"], "/work", "probemod"))

    def test_a_user_site_made_by_an_earlier_step_is_seen(self):
        # site adds ~/.local's site-packages at a start when it exists: a
        # later step's waiter started before it did, and adds it then, .pth
        # files and usercustomize included.
        usp = "/tmp/.local/lib/python3.11/site-packages"
        make = ("mkdir -p %s /tmp/extra && echo /tmp/extra > %s/extra.pth && "
                "echo 'import sys; sys.usercustomized = 1' > %s/usercustomize.py"
                % (usp, usp, usp))
        seen = self.probe(["python3", "-c", PROBE.replace("g = globals()", "g = globals()\n"
                                                         "assert sys.usercustomized")],
                          before=("sh", "-c", make))
        self.assertIn(usp, seen["path"])
        self.assertIn("/tmp/extra", seen["path"])


StepWaitersRunc, StepWaitersRunsc = per_runtime(StepWaiters)


def same_output(self):
    """What Python prints and exits with is the waiter's own doing, alike
    under both runtimes: compared under runc (the probes above compare the
    process itself under both)."""
    for argv in SAME:
        with self.subTest(argv=argv):
            got = self.all_three(argv)
            for key in ("exit_code", "stdout", "stderr"):
                self.assertEqual(got[0][key], got[2][key], "first: %s of %r" % (key, argv))
                self.assertEqual(got[1][key], got[2][key], "later: %s of %r" % (key, argv))


StepWaitersRunc.test_output_and_exit_codes_are_a_fresh_pythons = same_output

if __name__ == "__main__":
    unittest.main()
