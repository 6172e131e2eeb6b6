# SPDX-License-Identifier: Apache-2.0
"""Hostile code in a session (docker, runc and runsc): what one call leaves
behind must not outlive the cleanup, the kept interpreters must not become
a way to keep other processes, one session must not see another's files,
and a session that cannot be proved clean ends instead of running the next
call.  After each class the daemon is ready, no container is left, and fd
and thread counts are back."""
import os
import re
import secrets
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.docker import DockerDaemon, ours, per_runtime, require_engine  # noqa: E402
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.hostcheck import marked_tasks  # noqa: E402
from plimsoll_test.hostile import HostileDockerDaemon  # noqa: E402
from plimsoll_test.payloads import py  # noqa: E402

COUNT_OTHERS = ("import os\n"
                "me = os.getpid()\n"
                "n = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)\n"
                "     and open('/proc/%s/comm' % p).read().strip() not in ('python3', 'node')]\n"
                "print(len(n))\n")


# Everything started after this inherits the name (comm), so the host can
# find a survivor (runc: guests are host processes).
MARK = ("import ctypes as _c\n"
        "_c.CDLL(None).prctl(15, b'%s', 0, 0, 0)\n")

COUNTER = ("import time\n"
           "def count():\n"
           "    while True:\n"
           "        open('/work/count', 'w').write(str(time.time()))\n"
           "        time.sleep(0.02)\n")

# A process left between calls that tries to take a launch's cell channel.
SURVIVOR = r"""
import os, random, re, socket, struct, time
log = open('/work/survivor.log', 'a')
log.write('started\n'); log.flush()
seen, tried, scanned, end = {}, set(), 0, time.time() + 12
def frame(t, b):
    return t + struct.pack('>I', len(b)) + b
def greet(tok):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.2)
    try:
        s.connect('/run/plimsoll/cells.sock')
        s.sendall(frame(b'H', b'javascript ' + tok))
    except OSError:
        s.close()
        return
    # Answer whatever cell comes, later, in the background.
    if os.fork() == 0:
        try:
            s.settimeout(15)
            head = s.recv(5)
            if head[:1] == b'C':
                log.write('accepted\n'); log.flush()
                s.sendall(frame(b'O', b'FORGED\n') + frame(b'X', b'0'))
                time.sleep(5)
        except OSError:
            pass
        os._exit(0)
    s.close()
def steal(pid):
    # Everything readable of a process: its environment and descriptors.
    global scanned
    paths = ['/proc/%s/environ' % pid]
    try:
        paths += ['/proc/%s/fd/%s' % (pid, fd) for fd in os.listdir('/proc/%s/fd' % pid)]
    except OSError:
        pass
    found = set()
    for path in paths:
        try:
            f = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            data = os.read(f, 65536)
            os.close(f)
        except OSError:
            continue
        scanned += 1
        found.update(re.findall(rb'[0-9a-f]{48}', data))
    return found
rounds = 0
while time.time() < end:
    rounds += 1
    # New processes first and fast: a launch's token is young.
    for pid in os.listdir('/proc'):
        # A young process is read again and again: its environment is its
        # own only once its exec is done.
        if pid.isdigit() and seen.setdefault(pid, rounds) > rounds - 300 and \
                int(pid) != os.getpid():
            try:
                with open('/proc/%s/environ' % pid, 'rb') as f:
                    toks = set(re.findall(rb'[0-9a-f]{48}', f.read())) - tried
                scanned += 1
            except OSError:
                toks = set()
            if toks:
                # Hold the token's owner still while greeting in its place.
                try:
                    os.kill(int(pid), 19)  # SIGSTOP
                except OSError:
                    pass
                for tok in toks:
                    tried.add(tok)
                    greet(tok)
                time.sleep(0.3)
                try:
                    os.kill(int(pid), 18)  # SIGCONT
                except OSError:
                    pass
    if rounds % 200 == 0:
        # Then everything readable, environments and descriptors alike.
        for pid in os.listdir('/proc'):
            if pid.isdigit() and int(pid) != os.getpid():
                for tok in steal(pid) - tried:
                    tried.add(tok)
                    greet(tok)
        greet(('%048x' % random.getrandbits(192)).encode())
        log.write('scanned %d tokens %d\n' % (scanned, len(tried)))
        log.flush()
"""


class HostileSessions(HostileDockerDaemon):
    INSTANCE = "hostile-sessions-"  # per_runtime sets RUNTIME
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_SESSION_DISK_MB": "8",
                "SANDBOX_DOCKER_WARM": "0"}
    START_TIMEOUT = 240

    def open(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def open_both(self):
        """A session whose waiting interpreters are Python's and JavaScript's."""
        status, body = self.d.rpc("OpenSession", {"languages": ["python", "javascript"]})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def call(self, sid, code, **extra):
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": py(code, **extra)})
        return status, body

    def ok(self, sid, code, **extra):
        status, body = self.call(sid, code, **extra)
        self.assertEqual(status, 200, body)
        return body

    def cell(self, sid, lang, code):
        status, body = self.d.rpc("RunCell", {"session_id": sid,
                                              "cell": {"language": lang, "code": code}})
        self.assertEqual(status, 200, body)
        return body

    def test_respawning_background_loop_is_swept(self):
        sid = self.open()
        self.ok(sid, "import subprocess\n"
                     "subprocess.Popen(['sh', '-c', 'while true; do sleep 100 & sleep 0.2; "
                     "done'], start_new_session=True)\n")
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

    def test_double_forked_daemon_is_swept(self):
        sid = self.open()
        self.ok(sid, "import os, time\n"
                     "if os.fork() == 0:\n"
                     "    os.setsid()\n"
                     "    if os.fork() == 0:\n"
                     "        time.sleep(600)\n"
                     "    os._exit(0)\n"
                     "time.sleep(0.2)\n")
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

    def test_a_process_started_by_a_kept_interpreter_is_swept(self):
        sid = self.open()
        self.cell(sid, "python", "import subprocess\n"
                                 "p = subprocess.Popen(['sleep', '600'])\n"
                                 "p.pid")
        b = self.cell(sid, "python", "p.poll()")
        self.assertEqual(b["stdout"], "-9\n", b)  # killed by the cleanup between the calls
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

    def test_an_unreaped_child_of_an_interpreter_does_not_stop_a_project(self):
        # The cleanup kills the interpreter's child; the interpreter has not
        # waited for it, so it stays a zombie (gVisor lists it to the host).
        sid = self.open()
        self.cell(sid, "python", "import subprocess\np = subprocess.Popen(['sleep', '600'])")
        status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": {"project": {
            "steps": [{"argv": ["true"]}, {"argv": ["sh", "-c", "echo two"]}]}}})
        self.assertEqual(status, 200, b)
        self.assertEqual((b["outcome"], b["steps"][1]["stdout"]), ("completed", "two\n"), b)
        self.assertEqual(self.cell(sid, "python", "p.poll()")["stdout"], "-9\n")

    def test_timed_out_call_leaves_nothing(self):
        sid = self.open()
        b = self.ok(sid, "import subprocess, time\n"
                         "subprocess.Popen(['sleep', '600'])\n"
                         "time.sleep(60)\n", timeout_ms=1500)
        self.assertEqual((b["exit_code"], b["timed_out"]), (124, True), b)
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

    def test_sessions_do_not_see_each_other(self):
        a, b = self.open(), self.open()
        self.ok(a, "open('/work/secret', 'w').write('A'); open('/tmp/secret', 'w').write('A')")
        out = self.ok(b, "import os\nprint(os.path.exists('/work/secret'), "
                         "os.path.exists('/tmp/secret'))")
        self.assertEqual(out["stdout"], "False False\n")

    # ---- the cleanup ends everything a call left running -------------------
    # Each survivor below writes a counter into /work every 20 ms; a later
    # call reads it twice, half a second apart: a counter that moved means
    # the survivor lives.  The host also looks for its name (hostcheck).

    def frozen(self, sid, path="/work/count"):
        b = self.ok(sid, "import time\n"
                         "def read():\n"
                         "    try:\n"
                         "        return open(%r).read()\n"
                         "    except OSError:\n"
                         "        return ''\n"
                         "a = read(); time.sleep(0.5); b = read()\n"
                         "print('frozen' if a == b else 'moving')\n" % path)
        return b["stdout"]

    def assert_no_marked(self, marker):
        if self.RUNTIME == "runc":  # gVisor's guests are not host processes
            self.assertEqual(marked_tasks(marker), [])

    def test_a_process_whose_main_thread_exited_alone(self):
        sid = self.open()
        marker = "plz" + secrets.token_hex(4)
        self.ok(sid, MARK % marker + COUNTER + "import ctypes, os, threading\n"
                     "if os.fork() == 0:\n"
                     "    os.setsid()\n"
                     "    threading.Thread(target=count).start()\n"
                     "    time.sleep(0.2)\n"
                     "    ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread only\n"
                     "time.sleep(0.5)\n")
        self.assertEqual(self.frozen(sid), "frozen\n")
        self.assert_no_marked(marker)

    def test_a_process_that_looks_like_a_kept_interpreter(self):
        sid = self.open()
        self.assertEqual(self.cell(sid, "python", "k = 7; k")["stdout"], "7\n")
        marker = "python3"  # the interpreters' own name: found by pid, never by name
        loop = ("import time\n"
                "while True:\n"
                "    open('/work/count', 'w').write(str(time.time())); time.sleep(0.02)\n")
        self.ok(sid, "import subprocess, time\n"
                     "subprocess.Popen(['python3', '-c', %r, 'interp', 'python'],\n"
                     "                 start_new_session=True)\n"
                     "subprocess.Popen(['node', '-e', 'setInterval(() => require(\"fs\")'\n"
                     "                  '.writeFileSync(\"/work/count2\", String(Date.now())), 20)'],\n"
                     "                 start_new_session=True)\n"
                     "time.sleep(0.5)\n" % loop)
        del marker
        self.assertEqual(self.frozen(sid), "frozen\n")
        self.assertEqual(self.frozen(sid, "/work/count2"), "frozen\n")
        b = self.cell(sid, "python", "k + 1")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("8\n", False), b)

    def test_a_process_reparented_under_an_interpreter(self):
        sid = self.open()
        marker = "plr" + secrets.token_hex(4)
        code = (COUNTER + "import ctypes, os\n"
                "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
                "if os.fork() == 0:\n"
                "    if os.fork() == 0:\n"
                "        ctypes.CDLL(None).prctl(15, b'MARKER', 0, 0, 0)\n"
                "        count()\n"
                "    os._exit(0)\n"
                "os.wait()\n"
                "time.sleep(0.3)\n"
                "kept = 'yes'\n").replace("MARKER", marker)
        b = self.cell(sid, "python", code)
        self.assertEqual(b["exit_code"], 0, b)
        self.assertEqual(self.frozen(sid), "frozen\n")
        self.assert_no_marked(marker)
        b = self.cell(sid, "python", "kept")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'yes'\n", False), b)

    def test_a_process_an_interpreters_timer_starts_lives_until_the_next_cleanup(self):
        sid = self.open()
        # The kept interpreter's timer starts a process once /work/go exists
        # and notes it in /work/started; a later call writes /work/go.
        b = self.cell(sid, "javascript",
                      "const fs = require('fs'); let spawned = false;\n"
                      "setInterval(() => { if (!spawned && fs.existsSync('/work/go')) {\n"
                      "  spawned = true; fs.appendFileSync('/work/started', 'x');\n"
                      "  require('child_process').spawn('sh', ['-c', 'while true; do "
                      "date +%s%N > /work/count; sleep 0.02; done'], "
                      "{detached: true, stdio: 'ignore'}); } }, 20); 'armed'")
        self.assertEqual(b["stdout"], "'armed'\n", b)
        self.ok(sid, "open('/work/go', 'w').write('go')")
        time.sleep(1.5)
        # It started between calls (or during that call's cleanup): it may
        # live until the next cleanup, which runs after this call...
        b = self.ok(sid, "import os\nprint(os.path.exists('/work/started'))")
        self.assertEqual(b["stdout"], "True\n", b)
        # ...and not past it.
        self.assertEqual(self.frozen(sid), "frozen\n")
        self.assertEqual(self.cell(sid, "javascript", "1 + 1")["stdout"], "2\n")

    # ---- the cell channel belongs to the interpreter the daemon launched ------

    def test_a_survivor_reads_everything_and_greets_with_what_it_found(self):
        """A process the Python interpreter's timer starts between calls
        reads every /proc/*/environ and /proc/*/fd it can, connects to the
        cell socket with every token-looking string it finds (and random
        ones), and answers any cell it gets with a forged result.  The next
        cell launches the JavaScript interpreter while it runs: the result
        comes from the real interpreter."""
        sid = self.open()
        self.assertEqual(self.cell(sid, "python", "threading_ok = 1; threading_ok")["stdout"],
                         "1\n")
        # The kept interpreter's own thread starts the survivor again
        # whenever none runs, so one is there whenever a launch happens.
        b = self.cell(sid, "python", "import subprocess, threading, time\n"
                      "def keep():\n"
                      "    p = None\n"
                      "    while True:\n"
                      "        if p is None or p.poll() is not None:\n"
                      "            p = subprocess.Popen(['python3', '-c', %r],\n"
                      "                                 start_new_session=True)\n"
                      "        time.sleep(0.05)\n"
                      "threading.Thread(target=keep, daemon=True).start()\n"
                      "'armed'" % SURVIVOR)
        self.assertEqual(b["stdout"], "'armed'\n", b)
        time.sleep(1.5)
        status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
            "language": "javascript", "code": "6 * 7"}})
        if status == 200:
            self.assertEqual((b["stdout"], b["exit_code"], b["interpreter_started"]),
                             ("42\n", 0, True), b)
            self.assertNotIn("FORGED", b["stdout"] + b["stderr"])
            # The respawner may be caught by the sweep after any call: the
            # session then ends (fail closed), which is also an answer.
            status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "javascript", "code": "globalThis.q = 5; q * 2"}})
            if status == 200:
                self.assertEqual(b["stdout"], "10\n", b)
        if status != 200:
            self.assertEqual(error_info(b)[0]["reason"], "SESSION_ENDED", b)
        # The survivor ran during the launch, and no greeting of its was taken.
        st, b = self.call(sid, "print(open('/work/survivor.log').read())")
        if st == 200:
            self.assertIn("started", b["stdout"], b)
            self.assertNotIn("accepted", b["stdout"], b)

    def test_a_kept_interpreter_writes_into_a_launchers_report(self):
        """The kept Python interpreter's own thread watches /proc for the
        JavaScript launcher; when it appears it reads its stdin, opens its
        stdout (refused under runc, open under Debian's runsc), takes a
        challenge of its own from the cell socket and writes report lines
        naming itself until the launcher is gone.  The cell is still
        answered by the interpreter the daemon launched, and the session
        goes on."""
        sid = self.open()
        b = self.cell(sid, "python", "import json, os, socket, threading, time\n"
                      "def note(w):\n"
                      "    with open('/work/attack.log', 'a') as f: f.write(w + '\\n')\n"
                      "def forge(pid):\n"
                      "    try:\n"
                      "        fd = os.open('/proc/%s/fd/0' % pid, os.O_RDONLY | os.O_NONBLOCK)\n"
                      "        note('stdin ' + repr(os.read(fd, 256)))\n"
                      "    except OSError as e:\n"
                      "        note('stdin refused %s' % e.errno)\n"
                      "    try:\n"
                      "        out = os.open('/proc/%s/fd/1' % pid, os.O_WRONLY | os.O_NONBLOCK)\n"
                      "    except OSError as e:\n"
                      "        note('stdout refused %s' % e.errno); return\n"
                      "    note('stdout opened')\n"
                      "    s = socket.socket(socket.AF_UNIX); s.settimeout(2)\n"
                      "    ch = b''\n"
                      "    try:\n"
                      "        s.connect('/run/plimsoll/cells.sock'); ch = s.recv(53)[5:]\n"
                      "    except OSError:\n"
                      "        pass\n"
                      "    line = json.dumps({'challenge': ch.decode(), 'pid': os.getpid(),\n"
                      "                       'start': 1, 'dumpable': False}).encode()\n"
                      "    while os.path.exists('/proc/%s' % pid):\n"
                      "        try:\n"
                      "            os.write(out, b'\\n' + line + b'\\n')\n"
                      "        except OSError:\n"
                      "            break\n"
                      "        time.sleep(0.001)\n"
                      "    note('wrote')\n"
                      "def watch():\n"
                      "    seen = set()\n"
                      "    while True:\n"
                      "        for p in os.listdir('/proc'):\n"
                      "            if not p.isdigit() or p in seen:\n"
                      "                continue\n"
                      "            try:\n"
                      "                cmd = open('/proc/%s/cmdline' % p, 'rb').read()\n"
                      "            except OSError:\n"
                      "                continue\n"
                      "            if b'\\0launch\\0javascript' in cmd:\n"
                      "                seen.add(p); note('found'); forge(p)\n"
                      "        time.sleep(0.0005)\n"
                      "threading.Thread(target=watch, daemon=True).start()\n"
                      "'armed'")
        self.assertEqual(b["stdout"], "'armed'\n", b)
        b = self.cell(sid, "javascript", "6 * 7")
        self.assertEqual((b["stdout"], b["exit_code"], b["interpreter_started"]),
                         ("42\n", 0, True), b)
        self.assertEqual(self.cell(sid, "javascript", "globalThis.q = 5; q * 2")["stdout"],
                         "10\n")
        # The watcher saw the launcher (so the attack ran), and under runc
        # every descriptor of it was refused.
        log = self.ok(sid, "print(open('/work/attack.log').read())")["stdout"]
        self.assertIn("found", log)
        if self.RUNTIME == "runc":
            self.assertIn("stdout refused", log)
            self.assertNotIn("stdout opened", log)
        # Nothing secret was on the launcher's stdin.
        self.assertIsNone(re.search(r"[0-9a-f]{32}", log), log)
        # An interpreter that held the launcher's stream when it stopped
        # everything was ended for it, before it wrote past the report;
        # the session answers either way.
        b = self.cell(sid, "python", "1 + 1")
        self.assertEqual(b["stdout"], "2\n", b)
        if "stdout opened" in log:
            self.assertEqual((b["interpreter_started"], "wrote" in log), (True, False), log)

    def test_what_a_call_can_read_of_the_other_roles(self):
        """A call's code (group + 0) tries every kept interpreter's and
        launcher's /proc/<pid>/environ, maps and fd/*.  Under runc the
        groups wall the roles and every one is refused; under runsc gVisor
        lets any process of the sandbox uid read them (docs/sessions.md,
        "Who can reach what"), which this pins; under both the cells that
        follow are answered by the interpreters the daemon launched."""
        sid = self.open_both()
        self.assertEqual(self.cell(sid, "python", "p = 1; p")["stdout"], "1\n")
        self.assertEqual(self.cell(sid, "javascript", "globalThis.j = 2; j")["stdout"], "2\n")
        b = self.ok(sid, "import os\n"
                         "got = set()\n"
                         "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
                         "    try:\n"
                         "        comm = open('/proc/%s/comm' % pid).read().strip()\n"
                         "    except OSError:\n"
                         "        continue\n"
                         "    if comm not in ('python3', 'node') or int(pid) == os.getpid():\n"
                         "        continue\n"
                         "    paths = [('environ', '/proc/%s/environ' % pid),\n"
                         "             ('maps', '/proc/%s/maps' % pid)]\n"
                         "    try:\n"
                         "        paths += [('fd', '/proc/%s/fd/%s' % (pid, f))\n"
                         "                  for f in os.listdir('/proc/%s/fd' % pid)]\n"
                         "    except OSError:\n"
                         "        pass\n"
                         "    for what, path in paths:\n"
                         "        try:\n"
                         "            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))\n"
                         "            got.add(what)\n"
                         "        except OSError:\n"
                         "            pass\n"
                         "print(sorted(got))\n")
        if self.RUNTIME == "runc":
            self.assertEqual(b["stdout"], "[]\n", b)
        else:
            self.assertIn("'environ'", b["stdout"], b)
        self.assertEqual(self.cell(sid, "python", "p + 1")["stdout"], "2\n")
        self.assertEqual(self.cell(sid, "javascript", "j + 1")["stdout"], "3\n")

    def test_no_credential_is_readable_by_the_calls_code(self):
        """Nothing a call can read holds a cell channel's credential: not an
        interpreter's environment, nor any descriptor a call can open."""
        sid = self.open_both()
        self.assertEqual(self.cell(sid, "javascript", "1")["stdout"], "1\n")
        b = self.ok(sid, "import os, re\n"
                         "hits, read = [], 0\n"
                         "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
                         "    paths = ['/proc/%s/environ' % pid]\n"
                         "    try:\n"
                         "        paths += ['/proc/%s/fd/%s' % (pid, f) for f in "
                         "os.listdir('/proc/%s/fd' % pid)]\n"
                         "    except OSError:\n"
                         "        pass\n"
                         "    for p in paths:\n"
                         "        try:\n"
                         "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
                         "            data = os.read(fd, 1 << 16); os.close(fd); read += 1\n"
                         "        except OSError:\n"
                         "            continue\n"
                         "        if b'PLIMSOLL_CELL_TOKEN' in data or "
                         "re.search(rb'[0-9a-f]{48}', data):\n"
                         "            hits.append(p)\n"
                         "print(read > 0, hits)\n")
        self.assertEqual(b["stdout"], "True []\n", b)

    # ---- nothing a session keeps escapes its budget -----------------------

    def test_system_v_ipc_is_refused(self):
        sid = self.open()
        b = self.ok(sid, "import ctypes, errno\n"
                         "libc = ctypes.CDLL(None, use_errno=True)\n"
                         "r = libc.shmget(0, 64 << 20, 0o1600)\n"
                         "print(r, errno.errorcode.get(ctypes.get_errno()))\n"
                         "r = libc.msgget(0, 0o1600)\n"
                         "print(r, errno.errorcode.get(ctypes.get_errno()))\n")
        self.assertEqual(b["stdout"], "-1 EPERM\n-1 EPERM\n", b)

    def test_tmp_counts_against_the_budget(self):
        sid = self.open()
        self.ok(sid, "open('/tmp/fill', 'wb').write(b'x' * (5 << 20))\n"
                     "open('/work/fill', 'wb').write(b'x' * (4 << 20))\n")
        status, b = self.call(sid, "print(1)")
        self.assertNotEqual(status, 200, b)
        info = error_info(b)[0]
        self.assertEqual(info["reason"], "SESSION_ENDED", b)
        self.assertIn("SANDBOX_SESSION_DISK_MB", b["message"])

    def test_uplink_impostors_and_a_full_backlog_are_harmless(self):
        # Guest code connects to the daemon's cell socket many times, greets
        # as an interpreter with a guessed token, and leaves the connections
        # waiting; then the interpreter ends.  The next cell still gets a
        # real, fresh interpreter with the right answer, never an impostor.
        sid = self.open()
        self.assertEqual(self.cell(sid, "python", "v = 41; v + 1")["stdout"], "42\n")
        # (Under gVisor a connect to a full backlog blocks even when asked
        # not to: the connects run in a thread the call abandons.)
        b = self.ok(sid, "import os, socket, struct, threading, time\n"
                         "held = []\n"
                         "def fill():\n"
                         "    for i in range(64):\n"
                         "        s = socket.socket(socket.AF_UNIX)\n"
                         "        s.setblocking(False)\n"
                         "        try:\n"
                         "            s.connect('/run/plimsoll/cells.sock')\n"
                         "        except OSError:\n"
                         "            return\n"
                         "        hello = b'python ' + b'0' * 48\n"
                         "        s.send(b'H' + struct.pack('>I', len(hello)) + hello)\n"
                         "        held.append(s)\n"
                         "threading.Thread(target=fill, daemon=True).start()\n"
                         "time.sleep(2)\n"
                         "print(len(held) > 0, flush=True)\n"
                         "os._exit(0)\n")
        self.assertEqual(b["stdout"].splitlines()[-1:], ["True"], b)
        # The deadline ends the kept interpreter: the next cell launches one.
        status, b = self.d.rpc("RunCell", {"session_id": sid, "timeout_ms": 1000, "cell": {
            "language": "python", "code": "while True: pass"}})
        self.assertEqual((status, b.get("exit_code")), (200, 124), b)
        b = self.cell(sid, "python", "'v' in dir(), 6 * 7")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("(False, 42)\n", True), b)
        self.assertEqual(self.cell(sid, "python", "w = 1; w + 1")["stdout"], "2\n")
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

    def test_fork_bomb_ends_the_session_or_is_swept(self):
        sid = self.open()
        status, b = self.call(sid, "import os\n"
                                   "for _ in range(400):\n"
                                   "    try:\n"
                                   "        if os.fork() == 0:\n"
                                   "            import time; time.sleep(600)\n"
                                   "    except OSError:\n"
                                   "        break\n", timeout_ms=5000)
        self.assertIn(status, (200,), b)
        status, b = self.call(sid, COUNT_OTHERS)
        if status == 200:
            self.assertEqual(b["stdout"], "0\n", b)
        else:
            self.assertEqual(error_info(b)[0]["reason"], "SESSION_ENDED", b)


    def test_a_module_left_in_work_is_never_imported_by_plimsolls_own_programs(self):
        # plimsoll's programs in the sandbox (the launchers, the cleanup,
        # the files writer, the bootstrap, under runsc each step's filter
        # installer) run as `python3 -c` in /work, where `python3 -c` would
        # look for a module first.  A call leaves a module of each name they
        # import there; each one logs who imported it.  Then one call of
        # every kind (each is followed by the cleanup); nothing was logged.
        sid = self.open_both()
        names = ("json", "signal", "socket", "struct", "base64", "ctypes", "select", "selectors",
                 "threading", "traceback", "linecache", "types", "subprocess", "ast", "errno",
                 "stat", "site", "io", "time", "asyncio")
        planted = ("import os\n"
                   "line = '%s %d %d\\n' % (__name__, os.getpid(), os.getgid())\n"
                   "open('/work/imported.log', 'a').write(line)\n")
        plant = ("for n in %r:\n"
                 "    open('/work/' + n + '.py', 'w').write(%r)\n" % (names, planted))
        self.ok(sid, plant)
        self.assertEqual(self.ok(sid, "import os\nprint(sorted(f for f in os.listdir('/work')"
                                      " if f.endswith('.py')) == sorted('%%s.py' %% n for n in "
                                      "%r))\n" % (names,))["stdout"], "True\n")
        self.assertEqual(self.cell(sid, "python", "6 * 7")["stdout"], "42\n")
        self.assertEqual(self.cell(sid, "javascript", "6 * 7")["stdout"], "42\n")
        status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": {"project": {
            "files": [{"path": "sub/x.txt", "content": "x"}],
            "steps": [{"argv": ["cat", "sub/x.txt"]}, {"argv": ["true"]}]}}})
        self.assertEqual(status, 200, b)
        self.assertEqual((b["outcome"], b["steps"][0]["stdout"]), ("completed", "x"), b)
        b = self.ok(sid, "import os\n"
                         "p = '/work/imported.log'\n"
                         "print(open(p).read() if os.path.exists(p) else 'nothing', end='')\n")
        self.assertEqual(b["stdout"], "nothing", b)

HostileSessionsRunc, HostileSessionsRunsc = per_runtime(HostileSessions)


class SessionIpcCleanup(DockerDaemon):
    """With a seccomp profile of the operator's that allows System V IPC,
    the cleanup between calls removes what a call made: a 64 MiB shared
    memory segment, a semaphore set and a message queue (Linux lists them;
    gVisor does not, and the cleanup probes their ids)."""
    INSTANCE = "hostile-ipc-"  # per_runtime sets RUNTIME
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_DISK_MB": "8",
                "SANDBOX_DOCKER_WARM": "0"}
    START_TIMEOUT = 240

    @classmethod
    def settings(cls):
        return dict(super().settings(), SANDBOX_DOCKER_SECCOMP=cls.tmp.name)

    @classmethod
    def setUpClass(cls):
        require_engine()
        import json
        import tempfile
        name = "plimsoll.json" if cls.RUNTIME == "runc" else "plimsoll-runsc.json"
        with open(os.path.join(os.path.dirname(HERE), "..", "seccomp", name)) as f:
            prof = json.load(f)
        prof["syscalls"].append({"names": ["shmget", "shmat", "shmdt", "shmctl", "semget",
                                           "semctl", "semop", "msgget", "msgctl", "msgsnd"],
                                 "action": "SCMP_ACT_ALLOW"})
        cls.tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(prof, cls.tmp)
        cls.tmp.close()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            os.unlink(cls.tmp.name)
            assert ours(cls.instance) == [], "containers left behind"

    def test_ipc_objects_do_not_outlive_the_call(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})

        def call(code):
            status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": py(code)})
            self.assertEqual(status, 200, b)
            return b["stdout"]
        made = call("import ctypes\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "libc.shmat.restype = ctypes.c_void_p\n"
                    "ids = []\n"
                    "for _ in range(3):\n"
                    "    i = libc.shmget(0, 64 << 20, 0o1600)\n"
                    "    a = libc.shmat(i, None, 0)\n"
                    "    ctypes.memset(a, 1, 64 << 20)\n"
                    "    libc.shmdt(ctypes.c_void_p(a))\n"
                    "    ids.append(i)\n"
                    "print(ids, libc.semget(0, 4, 0o1600), libc.msgget(0, 0o1600))\n")
        ids = made.strip()
        self.assertNotIn("-1", ids, made)
        left = call("import ctypes\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "buf = ctypes.create_string_buffer(512)\n"
                    "line = %r.split()\n"
                    "shm = [int(x) for x in ' '.join(line[:-2]).strip('[]').split(',')]\n"
                    "sem, msg = int(line[-2]), int(line[-1])\n"
                    "print([libc.shmctl(i, 2, buf) for i in shm], libc.semctl(sem, 0, 2, buf),"
                    " libc.msgctl(msg, 2, buf))\n" % ids)
        # IPC_STAT (2) of each: -1, the object is gone.
        self.assertEqual(left, "[-1, -1, -1] -1 -1\n", (made, left))


SessionIpcCleanupRunc, SessionIpcCleanupRunsc = per_runtime(SessionIpcCleanup)


if __name__ == "__main__":
    unittest.main()
