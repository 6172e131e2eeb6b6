# SPDX-License-Identifier: Apache-2.0
"""A grant is usable only by its own run (issue #12, section 3), under runc
and runsc.

While a run with a grant is live, its broker socket is tried from outside
its container: by a host process under another uid, by a host process
under the sandbox's own uid, and by a second live run's guest (the test
hard-links the first run's socket into the second run's directory, the one
way a second guest could ever name it).  Each is refused before a byte is
read, and nothing reaches the upstream API, which records every request.
The run's own guest still gets through."""
import glob
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import RUN_TAG, ours, per_runtime  # noqa: E402
from plimsoll_test.grants import GrantDaemon  # noqa: E402
from plimsoll_test.hostcheck import unique_uid  # noqa: E402
from plimsoll_test.payloads import py  # noqa: E402

REQUEST = b"GET /items/1 HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n"

# The run's own guest: wait, then call its broker once.
OWNER = ("import os, socket, time\n"
         "time.sleep(%s)\n"
         "s = socket.socket(socket.AF_UNIX)\n"
         "s.connect(os.environ['PLIMSOLL_BROKER_SOCKET'])\n"
         "s.sendall(%r)\n"
         "print(s.recv(64).split(b'\\r\\n')[0].decode())\n")

# A second run's guest: wait for another run's socket to show up in its own
# directory, then try it.
INTRUDER = ("import os, socket, time\n"
            "p = '/run/plimsoll/other.sock'\n"
            "end = time.time() + 15\n"
            "while not os.path.exists(p) and time.time() < end:\n"
            "    time.sleep(0.05)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(p)\n"
            "    s.sendall(%r)\n"
            "    s.settimeout(5)\n"
            "    got = s.recv(64)\n"
            "    print('answered' if got else 'refused')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n")


def connect_as(path, uid, gid):
    """From a host child process under uid:gid: connect to path, send a
    request, and say what happened ("denied", "refused" or "answered")."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            try:
                s.connect(path)
            except PermissionError:
                os.write(w, b"denied")
                os._exit(0)
            try:
                s.sendall(REQUEST)
                got = s.recv(64)
            except OSError:
                got = b""
            os.write(w, b"answered" if got else b"refused")
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return out


class HostilePeers(GrantDaemon):
    """The grant "items" to the test API; the sandbox's uid is this
    process's own (unique_uid).  per_runtime sets RUNTIME."""
    INSTANCE = "hostile-peers-"

    @classmethod
    def settings(cls):
        return dict(super().settings(), SANDBOX_DOCKER_UID=str(cls.uid))

    @classmethod
    def setUpClass(cls):
        cls.uid = unique_uid()
        super().setUpClass()
        cls.base = os.path.join("/run/plimsoll", cls.instance + RUN_TAG)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
            cls.close_grants()
        finally:
            assert ours(cls.instance) == [], "containers left behind"

    def run_dirs(self):
        return set(glob.glob(os.path.join(self.base, "run-*")))

    def start_run(self, code, out):
        before = self.run_dirs()
        t = threading.Thread(target=lambda: out.append(self.d.rpc(
            "Run", py(code, "items", timeout_ms=30000))))
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            new = self.run_dirs() - before
            sock = [os.path.join(d, "broker.sock") for d in new]
            if sock and os.path.exists(sock[0]):
                return t, new.pop(), sock[0]
            time.sleep(0.02)
        self.fail("the run's broker socket never appeared")

    def test_the_directory_and_socket_are_the_sandbox_uids_alone(self):
        out = []
        t, d, sock = self.start_run(OWNER % (3, REQUEST), out)
        st_dir, st_sock = os.lstat(d), os.lstat(sock)
        self.assertEqual((st_dir.st_uid, st_dir.st_mode & 0o7777), (self.uid, 0o100))
        self.assertEqual((st_sock.st_uid, st_sock.st_mode & 0o777), (self.uid, 0o600))
        t.join(60)
        self.assertEqual(out[0][1]["stdout"], "HTTP/1.1 200 OK\n", out[0])

    def test_host_process_under_another_uid(self):
        out = []
        self.up.take()
        t, _, sock = self.start_run(OWNER % (4, REQUEST), out)
        self.assertEqual(connect_as(sock, 12345, 12345), "denied")
        self.assertEqual(self.up.take(), [])  # nothing reached the API
        t.join(60)
        self.assertEqual(out[0][1]["stdout"], "HTTP/1.1 200 OK\n", out[0])
        self.assertEqual(len(self.up.take()), 1)  # the run's own call

    def test_host_process_under_the_sandbox_uid(self):
        out = []
        self.up.take()
        t, _, sock = self.start_run(OWNER % (4, REQUEST), out)
        self.assertEqual(connect_as(sock, self.uid, self.uid), "refused")
        self.assertEqual(self.up.take(), [])
        t.join(60)
        self.assertEqual(out[0][1]["stdout"], "HTTP/1.1 200 OK\n", out[0])
        self.assertEqual(len(self.up.take()), 1)
        self.assertEqual(out[0][1]["record"]["broker_calls"], 1, out[0])

    def test_a_second_live_runs_guest(self):
        a_out, b_out = [], []
        self.up.take()
        ta, _, a_sock = self.start_run(OWNER % (6, REQUEST), a_out)
        tb, b_dir, _ = self.start_run(INTRUDER % REQUEST, b_out)
        os.link(a_sock, os.path.join(b_dir, "other.sock"))
        tb.join(60)
        self.assertEqual(b_out[0][0], 200, b_out[0])
        self.assertTrue(b_out[0][1]["stdout"].startswith("refused"), b_out[0])
        ta.join(60)
        self.assertEqual(a_out[0][1]["stdout"], "HTTP/1.1 200 OK\n", a_out[0])
        got = self.up.take()
        self.assertEqual(len(got), 1, got)  # A's own call, nothing of B's
        self.assertEqual(b_out[0][1]["record"]["broker_calls"], 0, b_out[0])


HostilePeersRunc, HostilePeersRunsc = per_runtime(HostilePeers)


if __name__ == "__main__":
    unittest.main()
