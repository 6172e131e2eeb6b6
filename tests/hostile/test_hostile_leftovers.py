# SPDX-License-Identifier: Apache-2.0
"""A run's processes never outlive it, whatever the guest does to its own
PID 1 (issue #12, section 1), and the shipped seccomp profile refuses what a
guest does not need.

Each case runs hostile Python through the real daemon under runc and under
runsc, then checks from the host, the way an auditor would
(tests/lib/plimsoll_test/hostcheck.py): no task in any cgroup of the
daemon's instance and (runc) no host process running as the sandbox's uid.
The answer must be typed and the daemon ready.  A class repeats the worst
case with the engine's own seccomp profile
(SANDBOX_DOCKER_SECCOMP=engine-default, the explicit weaker setting),
where ptrace is allowed: the host-side kill must hold there too."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import RUN_TAG, ours, per_runtime, start_docker_daemon  # noqa: E402
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.hostcheck import cgroup_tasks, leftovers, unique_uid  # noqa: E402
from plimsoll_test.leftover_programs import (DAEMONS_THEN_EXIT, MARK, STOP_SELF,  # noqa: E402
                                             TRACE_PID1, ZOMBIE_LEADER)
from plimsoll_test.payloads import py  # noqa: E402

# Each system call the shipped profile refuses, by number (x86_64), with
# arguments that would succeed or fail differently if it were allowed.
SYSCALLS = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {
    "ptrace": (101, 16, 1, 0, 0),              # PTRACE_ATTACH to PID 1
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "process_vm_writev": (311, 1, 0, 0, 0, 0, 0),
    "io_uring_setup": (425, 8, 0),
    "userfaultfd": (323, 0),
    "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "keyctl": (250, 0, 0, 0, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0),
    "init_module": (175, 0, 0, 0),
    "finit_module": (313, 0, 0, 0),
    "delete_module": (176, 0, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "umount2": (166, 0, 0),
    "unshare": (272, 0x10000000),
    "setns": (308, 0, 0),
    "memfd_create": (319, 0, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "open_by_handle_at": (304, 0, 0, 0),
    "pidfd_getfd": (438, 0, 0, 0),
    "modify_ldt": (154, 0, 0, 0),
    "move_pages": (279, 0, 0, 0, 0, 0, 0),
}
for name, args in sorted(calls.items()):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    print(name, r, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
"""


def wait_ready(d, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if d.request("GET", "/readyz")[0] == 200:
            return True
        time.sleep(0.2)
    return False


class Leftovers:
    RUNTIME = None
    SECCOMP = None  # None: the shipped profile

    @classmethod
    def setUpClass(cls):
        cls.uid = unique_uid()
        cls.instance = "leftovers-%s-%s" % (cls.RUNTIME, cls.SECCOMP or "shipped")
        extra = {"SANDBOX_DOCKER_UID": str(cls.uid), "SANDBOX_DOCKER_WARM": "1"}
        if cls.SECCOMP:
            extra["SANDBOX_DOCKER_SECCOMP"] = cls.SECCOMP
        cls.d = start_docker_daemon(cls.RUNTIME, cls.instance, **extra)
        cls.full_instance = cls.instance + RUN_TAG

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            left = leftovers(cls.full_instance, cls.uid)
            assert left == {"cgroups": {}, "uid_processes": []}, left
            assert ours(cls.instance) == [], "containers left behind"

    def run_py(self, code, timeout_ms=None):
        import secrets
        if timeout_ms is None:
            # Enough for the program to reach its point: a loaded CI machine
            # once made 2 s too short for ten forks (runsc, then runc).
            timeout_ms = 5000
        self.marker = "plh" + secrets.token_hex(4)
        status, body = self.d.rpc("Run", py(MARK % self.marker + code, timeout_ms=timeout_ms))
        return status, body

    def assert_nothing_left(self):
        # The answer came back; the reaper deletes the container after it.
        # Whatever the guest did, the host holds no process of the run.
        left = leftovers(self.full_instance, self.uid, wait=10.0, marker=self.marker,
                         unless=self.not_warm)
        self.assertEqual(left, {"cgroups": {}, "uid_processes": [], "marked": []})
        self.assertTrue(wait_ready(self.d), "the daemon is not ready")

    def not_warm(self, left):
        # The warm container waits for the next run: it is the instance's,
        # but it runs no guest code yet; only its bootstrap may be there.
        left["cgroups"] = {k: v for k, v in left["cgroups"].items()
                           if not self.is_warm(k)}
        if self.RUNTIME == "runc":
            left["uid_processes"] = [p for p in left["uid_processes"]
                                     if not self.warm_pid(p[0])]
        else:
            left["uid_processes"] = []  # gVisor's guests are not host processes

    def warm_ids(self):
        return [c["Id"] for c in ours(self.instance)
                if c["Labels"].get("org.plimsoll.run", "").startswith("warm-")]

    def is_warm(self, cid):
        return cid in self.warm_ids()

    def warm_pid(self, pid):
        try:
            with open("/proc/%d/cgroup" % pid) as f:
                text = f.read()
        except OSError:
            return False
        return any(w in text for w in self.warm_ids())

    def typed(self, status, body):
        if status == 200:
            self.assertIn(body["outcome"], ("completed", "timed_out"), body)
        else:
            info = error_info(body)[0]
            self.assertEqual(info["reason"], "INTERNAL", body)
            self.assertEqual(info["metadata"]["dispatched"], "true", body)

    def test_main_thread_exits_alone_and_a_daemon_ignores_signals(self):
        status, body = self.run_py(ZOMBIE_LEADER)
        self.typed(status, body)
        if status == 200:
            self.assertTrue(body["timed_out"], body)
            self.assertIn("leader exits", body["stdout"])
        self.assert_nothing_left()

    def test_pid1_traced_by_its_grandchild(self):
        status, body = self.run_py(TRACE_PID1)
        self.typed(status, body)
        if self.SECCOMP is None and status == 200:
            # The shipped profile refuses ptrace: PID 1 runs on.
            self.assertIn("attach -1 errno 1\n", body["stdout"], body)
            self.assertIn("pid1 still runs", body["stdout"], body)
        self.assert_nothing_left()

    def test_processes_stop_themselves(self):
        status, body = self.run_py(STOP_SELF)
        self.typed(status, body)
        if status == 200:
            self.assertTrue(body["timed_out"], body)
            self.assertIn("children stopped", body["stdout"], body)
        self.assert_nothing_left()

    def test_double_forked_daemons_then_pid1_exits(self):
        status, body = self.run_py(DAEMONS_THEN_EXIT)
        self.typed(status, body)
        if status == 200:
            self.assertEqual(body["stdout"], "bye\n")
        self.assert_nothing_left()


    def test_an_early_end_claimed_with_the_nonce_leaves_nothing(self):
        # The run's nonce is out of the guest's reach: a warm container's
        # guest is a waiting interpreter that never saw the header, a cold
        # one a fresh interpreter, and PID 1 is not dumpable.  Were it
        # found, a claimed end would only end the stream: the host kills
        # the container's cgroup before the answer, and at the answer no
        # thread of the run is left that has not begun to exit.
        status, body = self.run_py(FORGE_END, timeout_ms=20000)
        left = leftovers(self.full_instance, self.uid, wait=0.0, marker=self.marker)
        living = cgroup_tasks(self.full_instance, living=True)
        self.assertEqual(status, 200, body)
        self.assertFalse(body["timed_out"], body)
        self.assertIn("nonce out of reach", body["stdout"], body)
        self.assertEqual(body["exit_code"], 0, body)
        self.assertEqual(left["marked"], [], left)
        self.assertEqual([k for k in living if not self.is_warm(k)], [], living)
        self.assert_nothing_left()


# The guest leaves a process running (silent: a byte after the marker would
# rightly make it no end, and the deadline would decide), then looks for the
# run's nonce up its own stack and, when found, claims the end with status 7
# and sleeps on.
FORGE_END = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    time.sleep(600)
    os._exit(0)
time.sleep(0.3)
found, f = None, sys._getframe().f_back
while f is not None and found is None:
    for v in f.f_locals.values():
        if isinstance(v, str) and len(v) == 32:
            found = v
    f = f.f_back
try:  # PID 1's memory, where the header was read
    import re
    with open("/proc/1/maps") as maps, open("/proc/1/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if found or not perms.startswith("rw"):
                continue
            a, b = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(a)
                hit = re.search(rb'"end": ?"([0-9a-f]{32})"', mem.read(b - a))
            except (OSError, ValueError, OverflowError):
                continue
            if hit:
                found = hit.group(1).decode()
except OSError:
    pass
os.write(1, b"nonce found\n" if found else b"nonce out of reach\n")
if found:
    mark = ("\x1eplimsoll-end %s 007\n" % found).encode()
    os.write(1, mark)
    os.write(2, mark)
    time.sleep(30)
"""


class ShippedProfile:
    def test_every_refused_system_call(self):
        status, body = self.run_py(SYSCALLS, timeout_ms=20000)
        self.assertEqual(status, 200, body)
        got = {}
        for line in body["stdout"].splitlines():
            name, ret, err = line.split()
            got[name] = (int(ret), err)
        for name, (ret, err) in got.items():
            self.assertEqual((ret, err), (-1, "EPERM"), name)
        self.assertEqual(len(got), 22, body)

    def test_no_user_namespace_through_clone(self):
        code = ("import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n"
                "if r == 0:\n    libc.syscall(60, 0)\n"
                "print(r, errno.errorcode.get(ctypes.get_errno()))\n"
                "r = libc.syscall(435, 0, 0)\n"
                "print(r, errno.errorcode.get(ctypes.get_errno()))\n")
        status, body = self.run_py(code, timeout_ms=10000)
        self.assertEqual(status, 200, body)
        if self.RUNTIME == "runc":
            # clone with CLONE_NEWUSER is refused; clone3 is ENOSYS (its
            # flags are out of a filter's reach; the C library falls back).
            self.assertEqual(body["stdout"], "-1 EPERM\n-1 ENOSYS\n")
        else:
            # Inside gVisor a namespace is gVisor's: clone is unfiltered there.
            self.assertNotIn("EPERM", body["stdout"].splitlines()[0])


LeftoversRunc, LeftoversRunsc = per_runtime(Leftovers, ShippedProfile)


class LeftoversRuncEngineProfile(Leftovers, unittest.TestCase):
    RUNTIME = "runc"
    SECCOMP = "engine-default"


if __name__ == "__main__":
    unittest.main()
