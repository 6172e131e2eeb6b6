# SPDX-License-Identifier: Apache-2.0
"""Sessions every hosted provider keeps the same way (e2b, openshell): a
mixin for a provider's daemon class started with sessions on (idle after
2 s, output capped at 4096 bytes), which supplies TIER, d, wait_idle(name)
(until the session's sandbox is paused or stopped for being idle) and
sandbox_exists(name), with SANDBOX_FILE_READ_BYTES 65536 and
SANDBOX_FILE_LIST_ENTRIES 40.  The calls: files stay and processes do not;
cells keep state, report their exit codes and meet their deadline; an idle
pause or stop ends the interpreters; hostile cells; display outputs
(through vmcell's framed stderr: the bounds, a guest writing into that
stream, RunCellStream, Describe); the file calls
(WriteFiles, ReadFile, ListFiles) and what guest code sets up against them;
close deletes the sandbox.
Each provider's own cases stay in its folder.
"""
import base64
import json
import time
import sys

from .harness import error_info
from .payloads import sha

LOOK = ("import os\n"
        "print(open('kept.txt').read() if os.path.exists('kept.txt') else 'no file')\n"
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and\n"
        "          open('/proc/%s/cmdline' % p).read() == 'sleep\\x00600\\x00'))\n")


def project(steps, files=()):
    return {"project": {"files": [{"path": p, "content": c} for p, c in files],
                        "steps": [{"argv": a} for a in steps]}}


class HostedSessions:
    TIER = None
    # What each call's answer says of its cost (docs/api.md, "Usage"): the
    # source of its usage when the provider measures ("service"), or None
    # when every answer says why it has none.
    USAGE_SOURCE = None

    def assert_usage_or_why(self, b):
        """A call's answer has its usage or why not, never both."""
        self.assertNotEqual("usage" in b, "usage_absent" in b, b)
        if "usage" in b:
            self.assertEqual(b["usage"]["source"], self.USAGE_SOURCE, b)
        else:
            self.assertTrue(b["usage_absent"], b)

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
        self.assert_usage_or_why(body)
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
        self.assert_usage_or_why(b)
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

    # ---- display outputs ---------------------------------------------------
    def test_display_outputs_come_back_in_order(self):
        from . import streaming
        sid = self.open()
        b = self.cell(sid, "python",
                      "import sys\n"
                      "class T:\n"
                      "    def _repr_html_(self): return '<i>t</i>'\n"
                      "    def __repr__(self): return 'T'\n"
                      "print('out')\nsys.stderr.write('err\\n')\ndisplay(T())\n"
                      "display({'image/png': b'\\x89PNG\\0'}, raw=True)\nT()")
        bundle = {"text/html": "<i>t</i>", "text/plain": "T"}
        self.assertEqual((b["exit_code"], b["stdout"], b["stderr"]), (0, "out\n", "err\n"), b)
        self.assertEqual(b["outputs"], [
            {"kind": "display", "data": bundle},
            {"kind": "display", "data": {"image/png": base64.b64encode(b"\x89PNG\0").decode()}},
            {"kind": "result", "data": bundle}])
        self.assertEqual(b["record"]["response_sha256"],
                         sha({k: v for k, v in b.items() if k != "record"}))
        js = self.cell(sid, "javascript", "display({a: 1}); console.error('e'); 7")
        self.assertEqual((js["stdout"], js["stderr"]), ("7\n", "e\n"), js)
        self.assertEqual(js["outputs"], [{"kind": "display", "data": {"application/json": '{"a":1}'}}])
        st = streaming.call(self.d, "RunCellStream", {"session_id": sid, "cell": {
            "language": "python", "code": "print('a', flush=True)\ndisplay('d1')\nprint('b')"}})
        self.assertEqual((st.status, st.end), (200, {}), st.frames[-1:])
        shown = [c["display"] for c in st.chunks if "display" in c]
        self.assertEqual(shown, [{"kind": "display", "data": {"text/plain": "'d1'"}}])
        self.assertEqual(st.result["outputs"], shown)
        self.assertEqual(st.joined("stdout"), b"a\nb\n")
        d = self.d.rpc("Describe", {})[1]["operations"]["display"]
        self.assertEqual((d["python"], d["javascript"]), (True, True), d)
        # matplotlib and pandas as the sandbox's Python finds them.
        found = self.cell(sid, "python", "import importlib.util as u\n"
                          "print([u.find_spec(m) is not None for m in ('matplotlib', 'pandas')])")
        self.assertEqual(found["stdout"], "%r\n" % [d["matplotlib"], d["pandas"]], d)

    def test_display_bounds_and_a_guest_writing_into_the_stream(self):
        sid = self.open()
        lim = self.d.rpc("Describe", {})[1]["limits"]["display_outputs"]
        b = self.cell(sid, "python", "for i in range(%d):\n    display(i)" % (lim + 2))
        self.assertEqual(len(b["outputs"]), lim, b.get("outputs_dropped"))
        self.assertEqual(b["outputs_dropped"], 2)
        # The cell's code holds the interpreter's uplink: messages of its
        # own there are checked like the agent's, relayed or not.
        b = self.cell(sid, "python",
                      "import os, struct\n"
                      "def f(b): os.write(3, b'D' + struct.pack('>I', len(b)) + b)\n"
                      "f(b'{\"kind\":\"display\",\"data\":{\"image/png\":\"!!\"}}')\n"
                      "f(b'{\"kind\":\"display\",\"data\":{\"text/plain\":\"ok\"}}')\n"
                      "print('on')")
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "on\n"), b)
        self.assertEqual(b["outputs"], [{"kind": "display", "data": {"text/plain": "ok"}}])
        self.assertEqual(b["outputs_dropped"], 1)
        # The interpreter's stderr is framed on the way (vmcell's fd 2).
        # vmcell is not dumpable, so the guest, of the same uid, cannot
        # open that descriptor through /proc to write into the framing.
        b = self.cell(sid, "python",
                      "import os\n"
                      "for p in os.listdir('/proc'):\n"
                      "    try:\n"
                      "        cmd = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')\n"
                      "    except OSError:\n"
                      "        continue\n"
                      "    if b'vmcell' in cmd:\n"
                      "        try:\n"
                      "            os.write(os.open('/proc/%s/fd/2' % p, os.O_WRONLY), b'Xraw')\n"
                      "            print('reached', p)\n"
                      "        except OSError as e:\n"
                      "            print('not reachable', type(e).__name__)\n"
                      "display('after')\n"
                      "import sys; _ = sys.stderr.write('tail\\n')")
        self.assertEqual((b["exit_code"], b["stdout"], b["stderr"]),
                         (0, "not reachable PermissionError\n", "tail\n"), b)
        self.assertEqual(b["outputs"], [{"kind": "display", "data": {"text/plain": "'after'"}}])
        # The session goes on, framing and all.
        b = self.cell(sid, "python", "display('again')")
        self.assertEqual(b["outputs"], [{"kind": "display", "data": {"text/plain": "'again'"}}])

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
        w = self.files_ok("WriteFiles", {"session_id": sid, "files": [
            {"path": "before-idle.txt", "content": "kept"}]})
        self.assertEqual(self.get(sid)["calls"], 3)
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
        # A file call on a session that was idle finds the file kept.
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "before-idle.txt"})
        self.assertEqual(r["content"], "kept", r)
        self.assertNotEqual(r["record"]["previous_digest"], w["record"]["digest"])

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


    # ---- the file calls (docs/sessions.md, "Session files") ---------------
    def files_ok(self, method, msg):
        status, body = self.d.rpc(method, msg)
        self.assertEqual(status, 200, body)
        return body

    def files_refused(self, method, msg, reason):
        status, body = self.d.rpc(method, msg)
        self.assertNotEqual(status, 200, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason, body)
        return body

    def guest(self, sid, code):
        b = self.call(sid, project([["python3", "-c", code]]))
        self.assertEqual(b["exit_code"], 0, b)
        return b["steps"][0]["stdout"]

    def test_a_calls_files_never_go_through_a_symlink_a_guest_left(self):
        """A session's project, cell and snippet files go in through the
        files writer as the guest's user, never the service's upload (which
        writes by path, as root on E2B): a symlink an earlier call left on
        the way, in the work directory or at the daemon's own /tmp/plimsoll,
        is refused and never followed."""
        sid = self.open()
        target = self.guest(sid, "import os, tempfile\n"
                                 "os.symlink('/etc', 'conf')\n"
                                 "t = tempfile.mkdtemp()\n"
                                 "os.symlink(t, 'mine')\n"
                                 "print(t)").strip()
        b = self.call(sid, project([["true"]], files=[("conf/plimsoll-x", "no")]))
        self.assertEqual((b["outcome"], b["steps"]), ("setup_failed", []), b)
        self.assertIn("symlink", b["detail"])
        b = self.cell(sid, "python", "1", files=[("mine/y", "no")])
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("could not be written", b["detail"])
        # The daemon's own directory swapped for a link to the guest's:
        # the next cell's and snippet's code cannot be written, and nothing
        # lands there.
        swapped = self.guest(sid, "import os, shutil\n"
                                  "try:\n"
                                  "    shutil.rmtree('/tmp/plimsoll', ignore_errors=True)\n"
                                  "    os.symlink(%r, '/tmp/plimsoll')\n"
                                  "    print('swapped')\n"
                                  "except OSError as e:\n"
                                  "    print('kept', e.errno)\n" % target).strip()
        b = self.cell(sid, "python", "print('cell ran')")
        s = self.call(sid, {"snippet": {"language": "python", "code": "print('snippet ran')"}})
        if swapped == "swapped":
            self.assertEqual((b["exit_code"], s["exit_code"]), (1, 1), (b, s))
            self.assertIn("could not be written", b["detail"])
            self.assertIn("could not be written", s["detail"])
        else:
            self.assertEqual((b["stdout"], s["stdout"]), ("cell ran\n", "snippet ran\n"))
        out = self.guest(sid, "import os\nprint(os.path.exists('/etc/plimsoll-x'), "
                              "sorted(os.listdir(%r)))" % target)
        # (Where the work directory is under /tmp/plimsoll, openshell's,
        # the step's own shell made it again through the guest's link, as
        # the guest's user: the guest's doing, in its own directory.)
        self.assertIn(out, ("False []\n", "False ['project']\n"))

    def test_file_calls_write_read_list_and_the_chain(self):
        d = self.d.rpc("Describe", {})[1]
        self.assertTrue(d["operations"]["files"]["supported"], d)
        sid = self.open()
        binary = bytes(range(256)) * 4
        w = {"files": [{"path": "notes/a.txt", "content": "hello\n"},
                       {"path": "bin/data", "content_base64": base64.b64encode(binary).decode()}]}
        b = self.files_ok("WriteFiles", dict(w, session_id=sid))
        self.assertEqual((b["files"], b["bytes"]), (2, 6 + 1024), b)
        rec = b["record"]
        self.assertEqual(rec["previous_digest"], "")
        self.assertEqual(rec["request_sha256"], sha(w))
        chain = [rec["digest"]]
        # A project's step and a cell see what was written, as the guest's user.
        out = self.guest(sid, "import os\nprint(open('notes/a.txt').read(), end='')\n"
                              "print(len(open('bin/data','rb').read()), os.stat('bin/data').st_uid"
                              " == os.getuid())")
        self.assertEqual(out, "hello\n1024 True\n")
        c = self.cell(sid, "python", "open('notes/a.txt').read()")
        self.assertEqual(c["stdout"], "'hello\\n'\n", c)
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "notes/a.txt"})
        self.assertEqual((r["content"], r["size"], r["length"], r["more"], r["offset"]),
                         ("hello\n", 6, 6, False, 0), r)
        self.assertNotIn("content_base64", r)
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "bin/data", "offset": 1000,
                                       "limit": 16})
        self.assertEqual((r["size"], r["length"], r["more"]), (1024, 16, True), r)
        self.assertEqual(base64.b64decode(r["content_base64"]), binary[1000:1016])
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "bin/data", "offset": 1020})
        self.assertEqual((base64.b64decode(r["content_base64"]), r["more"]),
                         (binary[1020:], False))
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "bin/data", "offset": 5000})
        self.assertEqual((r["length"], r["content"], r["more"]), (0, "", False))
        # Replaced, and directories made on the way.
        self.files_ok("WriteFiles", {"session_id": sid, "files": [
            {"path": "notes/a.txt", "content": "2"}, {"path": "d/e/f", "content": ""}]})
        self.assertEqual(self.files_ok("ReadFile", {"session_id": sid,
                                                    "path": "notes/a.txt"})["content"], "2")
        # A write larger than one command's arguments (staged over several),
        # read back page by page (65536 bytes a page here).
        big = bytes((i * 7) & 0xff for i in range(1 << 20)) + b"\xff\xfe"
        b = self.files_ok("WriteFiles", {"session_id": sid, "files": [
            {"path": "big.bin", "content_base64": base64.b64encode(big).decode()},
            {"path": "small", "content": "s"}]})
        self.assertEqual(b["bytes"], len(big) + 1, b)
        back, off = b"", 0
        while True:
            r = self.files_ok("ReadFile", {"session_id": sid, "path": "big.bin", "offset": off})
            back += base64.b64decode(r["content_base64"])
            off += r["length"]
            if not r["more"]:
                break
        self.assertEqual((back, r["size"]), (big, len(big)))
        self.assertEqual(self.guest(sid, "import hashlib\nprint(hashlib.sha256("
                                         "open('big.bin','rb').read()).hexdigest())"),
                         __import__("hashlib").sha256(big).hexdigest() + "\n")
        ls = self.files_ok("ListFiles", {"session_id": sid})
        self.assertEqual([(e["path"], e["type"]) for e in ls["entries"]],
                         [("big.bin", "file"), ("bin", "directory"), ("d", "directory"),
                          ("notes", "directory"), ("small", "file")])
        self.assertFalse(ls["truncated"])
        ls = self.files_ok("ListFiles", {"session_id": sid, "depth": 3})
        got = {e["path"]: e for e in ls["entries"]}
        self.assertEqual(sorted(got), ["big.bin", "bin", "bin/data", "d", "d/e", "d/e/f", "notes",
                                       "notes/a.txt", "small"])
        self.assertEqual((got["bin/data"]["type"], got["bin/data"]["size"],
                          got["bin/data"]["mode"]), ("file", 1024, 0o644))
        self.assertRegex(got["notes/a.txt"]["modified_at"], r"^\d{4}-\d\d-\d\dT.*Z$")
        ls = self.files_ok("ListFiles", {"session_id": sid, "path": "notes"})
        self.assertEqual([e["path"] for e in ls["entries"]], ["notes/a.txt"])
        # A listing stops at SANDBOX_FILE_LIST_ENTRIES (40 here) and says so.
        self.guest(sid, "import os\nfor i in range(60):\n    os.makedirs('many/d%02d' % i)\n")
        ls = self.files_ok("ListFiles", {"session_id": sid, "path": "many"})
        self.assertEqual((len(ls["entries"]), ls["truncated"]), (40, True))
        self.assertEqual(ls["entries"][0]["path"], "many/d00")
        self.files_refused("ReadFile", {"session_id": sid, "path": "nothing-here"}, "NOT_FOUND")
        self.files_refused("ReadFile", {"session_id": sid, "path": "../etc/passwd"},
                           "INVALID_REQUEST")
        # Every answer joined the chain in order; refusals made no record.
        c = self.cell(sid, "python", "1")
        g = self.get(sid)
        self.assertEqual(g["previous_digest"], c["record"]["digest"], g)
        self.assertEqual(c["record"]["previous_digest"], ls["record"]["digest"])
        # 33 answers before it: 4 writes, 5 guest steps and cells, 20 reads
        # (17 pages of big.bin), 4 listings; no refusal made a record.
        self.assertEqual(g["calls"], 34, g)

    def test_file_calls_against_what_guest_code_sets_up(self):
        sid = self.open()
        # Symlinks out, to the root, inside, in loops, to /tmp and a device.
        self.guest(sid, "import os\nos.makedirs('real')\nopen('real/in.txt','w').write('in')\n"
                        "os.symlink('/etc/passwd', 'out')\nos.symlink('/', 'root')\n"
                        "os.symlink('real', 'inside')\nos.symlink('loop', 'loop')\n"
                        "os.symlink('b', 'a')\nos.symlink('a', 'b')\n"
                        "os.symlink('/tmp', 't')\nos.symlink('/dev/zero', 'zero')\n")
        for path in ("out", "root/etc/passwd", "inside/in.txt", "loop", "a", "a/x",
                     "t/anything", "zero"):
            body = self.files_refused("ReadFile", {"session_id": sid, "path": path},
                                      "INVALID_REQUEST")
            self.assertIn("symlink", body["message"])
            self.assertNotIn("root:", json.dumps(body))
        for path in ("root", "inside", "loop", "t"):
            self.files_refused("ListFiles", {"session_id": sid, "path": path}, "INVALID_REQUEST")
        ls = self.files_ok("ListFiles", {"session_id": sid, "depth": 3})
        types = {e["path"]: e["type"] for e in ls["entries"]}
        self.assertEqual((types["root"], types["real/in.txt"]), ("symlink", "file"))
        self.assertFalse([p for p in types if p.startswith(("root/", "inside/", "t/"))], types)
        # A write through one is refused, names the rule, and lands nowhere.
        for path in ("t/evil", "inside/new", "out", "zero"):
            body = self.files_refused("WriteFiles", {"session_id": sid, "files": [
                {"path": path, "content": "x"}]}, "INVALID_REQUEST")
            self.assertEqual(body["message"], "refused file path '%s': a symlink or a file is "
                                              "in the way" % path, body)
        self.assertEqual(self.guest(sid, "import os\nprint(os.path.exists('/tmp/evil'), "
                                         "os.path.exists('real/new'), "
                                         "open('/etc/passwd').read().startswith('root:'))"),
                         "False False True\n")
        # FIFOs, sockets, directories, a device if the user can make one.
        out = self.guest(sid, "import os, socket\nos.mkfifo('fifo')\nos.makedirs('dir')\n"
                              "s = socket.socket(socket.AF_UNIX)\ns.bind('sock')\n"
                              "try:\n    os.mknod('dev', 0o600 | 0o020000, os.makedev(1, 5))\n"
                              "    print('made a device')\n"
                              "except OSError as e:\n    print('no device', e.errno)\n")
        made = out.startswith("made a device")
        for path in ("fifo", "dir", "sock") + (("dev",) if made else ()):
            body = self.files_refused("ReadFile", {"session_id": sid, "path": path},
                                      "INVALID_REQUEST")
            self.assertIn("not a regular file", body["message"])
        self.files_refused("ListFiles", {"session_id": sid, "path": "fifo"}, "INVALID_REQUEST")
        # A FIFO where WriteFiles writes: refused at once, never waited on.
        t0 = time.monotonic()
        body = self.files_refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "fifo", "content": "x"}]}, "INVALID_REQUEST")
        self.assertIn("not a regular file", body["message"])
        self.assertLess(time.monotonic() - t0, 20)
        types = {e["path"]: e["type"]
                 for e in self.files_ok("ListFiles", {"session_id": sid})["entries"]}
        self.assertEqual((types["fifo"], types["sock"], types["dir"], types.get("dev")),
                         ("fifo", "socket", "directory", "device" if made else None))
        # A hard link is the same file under another name: the guest can
        # link only what its user may (the kernel's protected_hardlinks),
        # and the calls read it as that user, so nothing comes back that
        # the guest could not read itself.
        out = self.guest(sid, "import os, errno\nopen('/tmp/mine', 'w').write('mine')\n"
                              "try:\n    os.link('/tmp/mine', 'linked')\n"
                              "except OSError:\n    os.link('real/in.txt', 'linked')\n"
                              "try:\n    os.link('/etc/shadow', 'shadow')\n    print('linked')\n"
                              "except OSError as e:\n    print(errno.errorcode[e.errno])\n"
                              "try:\n    open('/etc/shadow').read()\n    print('readable')\n"
                              "except OSError as e:\n    print(errno.errorcode[e.errno])\n")
        self.assertIn(self.files_ok("ReadFile", {"session_id": sid,
                                                 "path": "linked"})["content"], ("mine", "in"))
        linked, readable = out.split()
        if linked == "linked":
            status, body = self.d.rpc("ReadFile", {"session_id": sid, "path": "shadow"})
            self.assertEqual(status == 200, readable == "readable", (out, body))
        else:
            self.assertIn(linked, ("EPERM", "EACCES", "ENOENT", "EXDEV"), out)
        # Huge sparse files: the size, a read near the end, no more.
        self.guest(sid, "import os\nfor name, size in (('huge', 8 << 30), ('big', 3 << 30)):\n"
                        "    open(name, 'w').close()\n    os.truncate(name, size)\n")
        body = self.files_refused("ReadFile", {"session_id": sid, "path": "huge"},
                                  "INVALID_REQUEST")
        self.assertIn("4294967295", body["message"])
        r = self.files_ok("ReadFile", {"session_id": sid, "path": "big", "offset": (3 << 30) - 10})
        self.assertEqual((r["size"], r["content"], r["more"]), (3 << 30, "\x00" * 10, False))
        sizes = {e["path"]: e["size"]
                 for e in self.files_ok("ListFiles", {"session_id": sid})["entries"]}
        self.assertEqual((sizes["huge"], sizes["big"]), (4294967295, 3 << 30))
        # Names that are not UTF-8: the exact bytes in path_base64.
        self.guest(sid, "import os\nopen(b'\\xff\\xfe.txt', 'w').write('x')\n"
                        "os.makedirs(b'd\\x80')\n")
        ls = self.files_ok("ListFiles", {"session_id": sid, "depth": 2})
        odd = sorted(base64.b64decode(e["path_base64"]) for e in ls["entries"]
                     if "path_base64" in e)
        self.assertEqual(odd, [b"d\x80", b"\xff\xfe.txt"])
        self.assertIn("\ufffd\ufffd.txt", [e["path"] for e in ls["entries"]])
        # A file the user may not read.
        self.guest(sid, "import os\nopen('closed', 'w').write('x')\nos.chmod('closed', 0)\n")
        body = self.files_refused("ReadFile", {"session_id": sid, "path": "closed"},
                                  "INVALID_REQUEST")
        self.assertIn("may not read", body["message"])
        # The work directory itself swapped for a symlink (its parent is
        # the guest's): the calls follow it nowhere.
        out = self.guest(sid, "import os\nw = os.getcwd()\nos.rename(w, w + '.moved')\n"
                              "os.makedirs('/tmp/elsewhere')\n"
                              "open('/tmp/elsewhere/x', 'w').write('OUTSIDE')\n"
                              "os.symlink('/tmp/elsewhere', w)\nprint('swapped')\n")
        self.assertEqual(out, "swapped\n")
        body = self.files_refused("ReadFile", {"session_id": sid, "path": "x"}, "INVALID_REQUEST")
        self.assertIn("symlink", body["message"])
        self.files_refused("ListFiles", {"session_id": sid}, "INVALID_REQUEST")
        self.files_refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "y", "content": "x"}]}, "INVALID_REQUEST")
        self.assertEqual(self.guest(sid, "import os\nprint(sorted(os.listdir('/tmp/elsewhere')))"),
                         "['x']\n")

    def test_file_calls_against_a_kept_interpreter_that_races_them(self):
        """A kept interpreter's threads, alive between calls: one swaps a
        directory and a symlink to /etc under one name as fast as it can
        while ReadFile and ListFiles name it; another appends to every
        staged stream of WriteFiles it finds in /tmp.  Every answer is the
        directory's or a refusal, never /etc's; a tampered stream writes
        nothing (the writer checks the whole stream before its first file)
        and ends the session."""
        sid = self.open()
        self.cell(sid, "python", (
            "import os, threading\n"
            "os.makedirs('dirA'); open('dirA/passwd', 'w').write('INSIDE')\n"
            "open('dirA/inside.txt', 'w').write('INSIDE')\n"
            "os.symlink('/etc', 'linkB')\n"
            "def flip():\n"
            "    while not os.path.exists('/tmp/stop'):\n"
            "        for a in ('dirA', 'linkB'):\n"
            "            try:\n"
            "                os.rename(a, 'flip'); os.rename('flip', a)\n"
            "            except OSError:\n"
            "                pass\n"
            "threading.Thread(target=flip, daemon=True).start()\n"))
        seen = {"read": 0, "refused": 0}
        for _ in range(12):
            status, body = self.d.rpc("ReadFile", {"session_id": sid, "path": "flip/passwd"})
            self.assertNotIn("root:", json.dumps(body))
            if status == 200:
                self.assertEqual(body["content"], "INSIDE", body)
                seen["read"] += 1
            else:
                self.assertIn(error_info(body)[0]["reason"], ("INVALID_REQUEST", "NOT_FOUND"))
                seen["refused"] += 1
            status, body = self.d.rpc("ListFiles", {"session_id": sid, "depth": 3})
            self.assertEqual(status, 200, body)
            for e in body["entries"]:
                self.assertFalse(e["path"].startswith("linkB/"), e)
                if e["path"].startswith("flip/"):
                    self.assertIn(e["path"], ("flip/passwd", "flip/inside.txt"), e)
        self.assertEqual(sum(seen.values()), 12, seen)
        self.cell(sid, "python", (
            "open('/tmp/stop', 'w').close()\n"
            "def tamper():\n"
            "    while not os.path.exists('/tmp/stop2'):\n"
            "        for n in os.listdir('/tmp'):\n"
            "            if n.startswith('.plimsoll-stage-'):\n"
            "                try:\n"
            "                    open('/tmp/' + n, 'ab').write(b'X')\n"
            "                except OSError:\n"
            "                    pass\n"
            "threading.Thread(target=tamper, daemon=True).start()\n"))
        big = base64.b64encode(b"\x01" * (2 << 20)).decode()
        body = self.files_refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "first", "content": "1"}, {"path": "tampered", "content_base64": big}]},
            "INTERNAL")
        self.assertIn("nothing was written", body["message"])
        # A guest that fights plimsoll's own transport loses its session, as
        # any call whose plumbing fails does (INTERNAL ends a session).
        status, body = self.d.rpc("GetSession", {"session_id": sid})
        self.assertEqual((status, body.get("state")), (200, "ended"), body)
        self.assertIn("staged", body["ended_reason"])
