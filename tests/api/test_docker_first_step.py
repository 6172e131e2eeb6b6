# SPDX-License-Identifier: Apache-2.0
"""A project's first step, waiting in a pooled container (bootstrap.py,
step_wait.py; docs/providers/docker.md, "The first step waits"), runs as
the same command run as a later step does, which the bootstrap starts
fresh: what the program sees of itself (argv, sys.path, flags, modules,
__main__, environment, signals, descriptors, streams, limits) and what it
leaves (output, tracebacks, exit codes), for each form the waiter takes
(`python3 -c`, `python3 FILE`, `python3 -m`) and for the commands it execs
instead.  Python itself is the reference: the later step is an ordinary
`posix_spawn` of `python3`.  Under runc and runsc."""
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
    ["python3", "-c", "import sys; print(sys.argv)", "a", "-c", "b"],
    ["python3", "-c", "import calendar; print(calendar.month(2026, 1))"],  # /work's shadows
    ["python3", "fails.py", "x"],
    ["python3", "sub/broken.py"],
    ["python3", "missing.py"],
    ["python3", "-m", "fails", "y"],
    ["python3", "-m", "no_such_module"],
    ["python3", "-u", "-c", "import sys; print(sys.flags.unbuffered)"],
    ["python3", "sub"],
    ["sh", "-c", "echo from sh; exit 4"],
    ["no-such-program"],
]

FILES = [
    {"path": "probe.py", "content": PROBE},
    {"path": "probemod.py", "content": PROBE},
    {"path": "calendar.py", "content": "def month(y, m):\n    return 'shadowed'\n"},
    {"path": "fails.py", "content": "import sys\ndef f():\n    raise ValueError(sys.argv)\nf()\n"},
    {"path": "sub/broken.py", "content": "x = (\n"},
]


class FirstStep(DockerDaemon):
    INSTANCE = "first-step-"

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

    def both(self, argv):
        """(the step as a pooled project's first, the same as a second
        step after `true`)."""
        got = []
        for steps in ([{"name": "it", "argv": argv}],
                      [{"name": "before", "argv": ["true"]}, {"name": "it", "argv": argv}]):
            if len(steps) == 1:
                self.pool_full()
            status, b = self.d.rpc("Run", {"project": {"files": FILES, "steps": steps}})
            self.assertEqual(status, 200, b)
            self.assertEqual(b["steps"][-1]["name"], "it", b)
            got.append(b["steps"][-1])
        return got

    def probe(self, argv):
        first, later = self.both(argv)
        self.assertEqual((first["exit_code"], later["exit_code"]), (0, 0), (first, later))
        seen = [json.loads(s["stdout"].split("\n")[0]) for s in (first, later)]
        depth = [s["stdout"].split("\n")[1] for s in (first, later)]
        # The first step ran in the waiter: two frames more.
        self.assertEqual(depth, ["depth %d" % (int(depth[1].split()[1]) + 2), depth[1]])
        for key in sorted(seen[1]):
            self.assertEqual(seen[0][key], seen[1][key], "%s differs for %r" % (key, argv))
        self.assertEqual(seen[0], seen[1])
        return seen[0]

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

    def test_output_and_exit_codes_are_a_fresh_pythons(self):
        for argv in SAME:
            with self.subTest(argv=argv):
                first, later = self.both(argv)
                for key in ("exit_code", "stdout", "stderr"):
                    self.assertEqual(first[key], later[key], "%s of %r" % (key, argv))


FirstStepRunc, FirstStepRunsc = per_runtime(FirstStep)

if __name__ == "__main__":
    unittest.main()
