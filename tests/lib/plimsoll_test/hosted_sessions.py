# SPDX-License-Identifier: Apache-2.0
"""Sessions every hosted provider keeps the same way (e2b, openshell): a
mixin for a provider's daemon class started with sessions on (idle after
2 s, output capped at 4096 bytes), which supplies TIER, d, wait_idle(name)
(until the session's sandbox is paused or stopped for being idle) and
sandbox_exists(name).  The calls: files stay and processes do not; cells
keep state, report their exit codes and meet their deadline; an idle pause
or stop ends the interpreters; hostile cells; close deletes the sandbox.
Each provider's own cases stay in its folder.
"""
import time

from .harness import error_info

LOOK = ("import os\n"
        "print(open('kept.txt').read() if os.path.exists('kept.txt') else 'no file')\n"
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
        "          open('/proc/%s/cmdline' % p).read() == 'sleep\\x00600\\x00'))\n")


def project(steps, files=()):
    return {"project": {"files": [{"path": p, "content": c} for p, c in files],
                        "steps": [{"argv": a} for a in steps]}}


class HostedSessions:
    TIER = None

    def open(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def get(self, sid):
        status, body = self.d.rpc("GetSession", {"session_id": sid})
        self.assertEqual(status, 200, body)
        return body

    def call(self, sid, run):
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["isolation"], self.TIER, body)
        return body

    def cell(self, sid, lang, code, timeout_ms=None, files=()):
        body = {"session_id": sid, "cell": {"language": lang, "code": code}}
        if files:
            body["cell"]["files"] = [{"path": p, "content": c} for p, c in files]
        if timeout_ms:
            body["timeout_ms"] = timeout_ms
        status, b = self.d.rpc("RunCell", body)
        self.assertEqual(status, 200, b)
        self.assertEqual(b["isolation"], self.TIER, b)
        return b

    def look(self, sid):
        b = self.call(sid, project([["python3", "-c", LOOK]]))
        return b["steps"][0]["stdout"], b["sandbox_name"]

    def test_cells_stream(self):
        from . import streaming
        sid = self.open()
        self.cell(sid, "python", "x = 41")
        for lang, code, want in (("python", "import sys\nprint(x + 1)\nprint('e', file=sys.stderr)",
                                  (b"42\n", b"e\n")),
                                 ("javascript", "console.log('js')", (b"js\n", b""))):
            st = streaming.call(self.d, "RunCellStream",
                                {"session_id": sid, "cell": {"language": lang, "code": code}})
            self.assertEqual((st.status, st.end), (200, {}), st.frames[-1:])
            self.assertEqual((st.joined("stdout"), st.joined("stderr")), want)
            self.assertEqual((st.result["stdout"].encode(), st.result["stderr"].encode()), want)

    def test_files_stay_processes_do_not(self):
        sid = self.open()
        self.call(sid, project([["sh", "-c", "sleep 600 > /dev/null 2>&1 &"]],
                               [("kept.txt", "kept")]))
        out, _ = self.look(sid)
        self.assertEqual(out, "kept\n0\n")

    def test_a_module_left_behind_is_never_imported_by_plimsolls_programs(self):
        # plimsoll's programs in the sandbox (the cleanup, often as root,
        # the launchers, the relays) run as `python3 -c`, which would look
        # in the working directory for a module first.  A call leaves a
        # module of each name they import in its working directory and in
        # /tmp; each logs who imported it.  Then cells of both languages and
        # a project (a cleanup after each step and call): nothing logged.
        names = ("json", "signal", "socket", "struct", "base64", "ctypes", "select", "selectors",
                 "threading", "traceback", "linecache", "types", "subprocess", "ast", "errno",
                 "stat", "site", "io", "time", "asyncio", "shlex", "tempfile")
        planted = ("import os\n"
                   "line = '%s %d %d %s\\n' % (__name__, os.getpid(), os.getuid(), os.getcwd())\n"
                   "open('/tmp/imported.log', 'a').write(line)\n")
        plant = ("import os\n"
                 "for d in ('.', '/tmp'):\n"
                 "    for n in %r:\n"
                 "        open(os.path.join(d, n + '.py'), 'w').write(%r)\n" % (names, planted))
        sid = self.open()
        self.call(sid, project([["python3", "-c", plant]]))
        self.assertEqual(self.cell(sid, "python", "6 * 7")["stdout"], "42\n")
        self.assertEqual(self.cell(sid, "javascript", "6 * 7")["stdout"], "42\n")
        b = self.call(sid, project([["cat", "x.txt"], ["true"]], [("x.txt", "x")]))
        self.assertEqual((b["outcome"], b["steps"][0]["stdout"]), ("completed", "x"), b)
        look = ("import os\n"
                "p = '/tmp/imported.log'\n"
                "print(open(p).read() if os.path.exists(p) else 'nothing', end='')\n")
        b = self.call(sid, project([["python3", "-I", "-c", look]]))
        self.assertEqual(b["steps"][0]["stdout"], "nothing", b)

    # ---- cells ------------------------------------------------------------
    def test_cells_keep_state_and_report_exit_codes(self):
        sid = self.open()
        b = self.cell(sid, "python", "import math\nx = 20")
        self.assertEqual((b["exit_code"], b["interpreter_started"]), (0, True), b)
        b = self.cell(sid, "python", "x + 22")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("42\n", False), b)
        b = self.cell(sid, "python", "print('a'); import sys; sys.stderr.write('e\\n'); round(math.pi, 2)")
        self.assertEqual((b["stdout"], b["stderr"]), ("a\n3.14\n", "e\n"), b)
        b = self.cell(sid, "python", "raise ValueError('nope')")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("ValueError: nope", b["stderr"])
        b = self.cell(sid, "javascript", "let y = 40")
        self.assertTrue(b["interpreter_started"], b)
        b = self.cell(sid, "javascript", "y + 2")
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "42\n"), b)
        b = self.cell(sid, "javascript", "throw new Error('bad')")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("Error: bad", b["stderr"])
        # The deadline ends the cell and its interpreter: 124, then a fresh one.
        b = self.cell(sid, "python", "while True: pass", timeout_ms=1500)
        self.assertEqual((b["exit_code"], b["timed_out"]), (124, True), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        # The other language's interpreter was kept.
        b = self.cell(sid, "javascript", "y")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("40\n", False), b)

    def test_cell_files_are_written_first_and_output_is_capped(self):
        sid = self.open()
        b = self.cell(sid, "python", "open('data/in.txt').read().upper()",
                      files=[("data/in.txt", "hello")])
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "'HELLO'\n"), b)
        # A project step sees the cell's work directory, and the cell the step's.
        b = self.call(sid, project([["cat", "data/in.txt"]]))
        self.assertEqual(b["steps"][0]["stdout"], "hello", b)
        b = self.cell(sid, "python", "print('y' * 10000)")
        self.assertTrue(b["stdout_truncated"], b)
        self.assertEqual(len(b["stdout"]), 4096)
        b = self.cell(sid, "javascript", "require('fs').readFileSync('data/in.txt', 'utf8')")
        self.assertEqual(b["stdout"], "'hello'\n", b)

    def test_an_idle_pause_or_stop_ends_the_interpreters(self):
        sid = self.open()
        b = self.cell(sid, "python", "x = 1")
        name = b["sandbox_name"]
        self.cell(sid, "javascript", "var z = 1")
        g = self.get(sid)
        self.assertEqual((g["state"], g["calls"], g["interpreters"]),
                         ("ready", 2, [{"language": "python", "alive": True},
                                       {"language": "javascript", "alive": True}]), g)
        self.assertEqual((g["disk_used_kib"], g["disk_budget_kib"]), (0, 0), g)  # not reported
        # No file calls here (Describe says so): refused before anything runs.
        self.assertFalse(self.d.rpc("Describe", {})[1]["operations"]["files"]["supported"])
        status, body = self.d.rpc("ReadFile", {"session_id": sid, "path": "a"})
        self.assertEqual((status, error_info(body)[0]["reason"]), (501, "UNSUPPORTED"), body)
        self.assertEqual(self.get(sid)["calls"], 2)
        self.wait_idle(name)
        # GetSession says so, and waking nothing: it is still paused after.
        for _ in range(50):
            g = self.get(sid)
            if g["state"] == "paused":
                break
            time.sleep(0.1)
        self.assertEqual((g["state"], g["idle_deadline"], g["interpreters"]),
                         ("paused", "", [{"language": "python", "alive": False},
                                         {"language": "javascript", "alive": False}]), g)
        self.assertEqual(self.get(sid)["state"], "paused")
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        self.assertEqual(self.get(sid)["state"], "ready")
        b = self.cell(sid, "javascript", "typeof z")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'undefined'\n", True), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertFalse(b.get("interpreter_started", False), b)

    # ---- hostile cells ----------------------------------------------------
    def test_a_cell_that_ends_its_interpreter(self):
        sid = self.open()
        self.cell(sid, "python", "x = 1")
        b = self.cell(sid, "python", "import os\nprint('bye', flush=True)\nos._exit(0)")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("ended during the cell", b.get("detail", "") + b.get("outcome", ""), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)

    def test_a_cell_that_kills_its_relay_or_the_other_interpreter(self):
        sid = self.open()
        self.cell(sid, "javascript", "var k = 1")
        self.cell(sid, "python", "x = 1")
        # Everything of the user's may be signalled by the user's code: the
        # relay and the Node interpreter die; the next cells notice.
        b = self.cell(sid, "python", (
            "import os, signal\n"
            "me = os.getpid()\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit() and int(p) != me:\n"
            "        try:\n"
            "            c = open('/proc/%s/cmdline' % p, 'rb').read()\n"
            "        except OSError:\n"
            "            continue\n"
            "        if c.startswith(b'node\\x00') or b'vmlaunch\\x00javascript' in c:\n"
            "            os.kill(int(p), signal.SIGKILL)\n"
            "'done'"))
        self.assertEqual(b["stdout"], "'done'\n", b)
        b = self.cell(sid, "javascript", "typeof k")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'undefined'\n", True), b)
        b = self.cell(sid, "python", "x")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("1\n", False), b)

    def test_what_a_cell_leaves_running_is_ended_after_it(self):
        sid = self.open()
        b = self.cell(sid, "python", (
            "import subprocess\n"
            "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            "x = 5"))
        self.assertEqual(b["exit_code"], 0, b)
        out, _ = self.look(sid)
        self.assertEqual(out, "no file\n0\n")
        b = self.cell(sid, "python", "x")
        self.assertEqual((b["stdout"], b.get("interpreter_started", False)), ("5\n", False), b)

    def test_a_leader_that_exited_alone_is_no_hiding_place(self):
        """A process whose main thread exited while another runs reads as a
        zombie; the cleanup still ends it, even next to kept interpreters:
        the user's live processes after it are those before it (the kept
        interpreter, its relay, and the sandbox's own)."""
        sid = self.open()
        self.cell(sid, "python", "x = 1")
        count = ("import os\n"
                 "def alive(p):\n"
                 "    for t in os.listdir('/proc/%s/task' % p):\n"
                 "        raw = open('/proc/%s/task/%s/stat' % (p, t)).read()\n"
                 "        if raw[raw.rfind(')') + 2] not in 'ZX':\n"
                 "            return True\n"
                 "    return False\n"
                 "n = 0\n"
                 "for p in os.listdir('/proc'):\n"
                 "    try:\n"
                 "        if p.isdigit() and int(p) != os.getpid() and os.stat('/proc/' + p).st_uid == os.getuid() and alive(p):\n"
                 "            n += 1\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "print(n)\n")
        before = self.call(sid, project([["python3", "-c", count]]))["steps"][0]["stdout"]
        leave = ("import ctypes, os, threading, time\n"
                 "threading.Thread(target=time.sleep, args=(600,)).start()\n"
                 "ctypes.CDLL(None).syscall(60 if os.uname().machine == 'x86_64' else 93, 0)\n")
        b = self.call(sid, project([["sh", "-c", 'python3 -c "$0" > /dev/null 2>&1 & '
                                     'sleep 0.5; python3 -c "$1"', leave, count]]))
        self.assertEqual(b["exit_code"], 0, b)
        # within the call, the leader's threads live on (beside the step's shell)
        self.assertGreater(int(b["steps"][0]["stdout"]), int(before), b)
        b = self.call(sid, project([["python3", "-c", count]]))
        self.assertEqual(b["steps"][0]["stdout"], before, b)
        b = self.cell(sid, "python", "x")
        self.assertEqual(b["stdout"], "1\n", b)

    def test_a_cell_is_refused_outside_a_session_and_with_an_unknown_language(self):
        status, body = self.d.rpc("RunInSession", {"session_id": self.open(), "run": {
            "cell": {"language": "ruby", "code": "1"}}})
        self.assertNotEqual(status, 200, body)
        status, body = self.d.rpc("RunCell", {"session_id": self.open(),
                                              "cell": {"language": "ruby", "code": "1"}})
        self.assertEqual(status, 400, body)
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false", body)

    def test_close_deletes_the_sandbox(self):
        status, body = self.d.rpc("OpenSession", {})
        sid = body["session_id"]
        _, name = self.look(sid)
        status, body = self.d.rpc("CloseSession", {"session_id": sid})
        self.assertEqual(status, 200, body)
        deadline = time.monotonic() + 10
        while self.sandbox_exists(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertFalse(self.sandbox_exists(name))

