# SPDX-License-Identifier: Apache-2.0
"""Sessions through the real daemon and the real docker engine, under runc
and under runsc: one sandbox for many calls, the cleanup between calls,
cells with kept interpreters, pause on idle, lifetime and disk-budget ends,
ownership, grants in sessions, and chained records (docs/sessions.md)."""
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, ours, per_runtime  # noqa: E402
from plimsoll_test.grants import GrantDaemon, profile, token_cred  # noqa: E402
from plimsoll_test.harness import CLI, Daemon, error_info, run_startup  # noqa: E402
from plimsoll_test.payloads import py, sha  # noqa: E402


CONFORMANCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance")


def rfc3339(t):
    """Seconds since the epoch of an RFC 3339 UTC instant with nanoseconds."""
    base, frac = t.rstrip("Z").split(".")
    return datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp() + int(frac) / 1e9


class Sessions(GrantDaemon):
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "sessions-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "3", "SANDBOX_SESSION_DISK_MB": "8",
                "SANDBOX_SESSION_IDLE": "2", "SANDBOX_SESSION_LIFETIME": "600",
                "SANDBOX_SESSION_MAX_LIFETIME": "900", "SANDBOX_DOCKER_WARM": "0"}
    START_TIMEOUT = 240

    @classmethod
    def grants(cls):
        return {
            "in-sessions": profile(cls.up.url, token_cred(), allow_in_sessions=True),
            "not-in-sessions": profile(cls.up.url, token_cred()),
        }

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.close_grants()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left

    # ---- helpers ----------------------------------------------------------
    def open(self, principal="alice", languages=None):
        msg = {"languages": languages} if languages else {}
        status, body = self.d.rpc("OpenSession", msg, principal=principal)
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.assertEqual(len(sid), 64)
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid}, principal=principal)
        return sid

    def call(self, sid, run, principal="alice"):
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run},
                                  principal=principal)
        self.assertEqual(status, 200, body)
        return body

    def cell(self, sid, language, code, principal="alice", **extra):
        m = {"session_id": sid, "cell": {"language": language, "code": code}}
        m.update(extra)
        status, body = self.d.rpc("RunCell", m, principal=principal)
        self.assertEqual(status, 200, body)
        return body

    def refused(self, method, msg, code, reason, principal="alice"):
        status, body = self.d.rpc(method, msg, principal=principal)
        self.assertNotEqual(status, 200, body)
        self.assertEqual(body["code"], code, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason, body)
        return body

    def cells_by_path(self):
        status, _, body = self.d.request(
            "GET", "/metrics", headers={"Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 200)
        out = {}
        for line in body.decode().splitlines():
            if line.startswith("plimsoll_session_cells_total{"):
                out[line.split('"')[1]] = int(line.rsplit(" ", 1)[1])
        return out

    # ---- the contract -----------------------------------------------------
    def test_cells_take_the_uplink_not_an_exec(self):
        """A kept interpreter's cells travel over its uplink (no docker exec);
        a cell with files has them written first (an exec), then goes to the
        same interpreter the same way; a timed-out cell loses the uplink with
        its interpreter, and the next one gets a fresh interpreter with an
        uplink again."""
        sid = self.open(languages=["python"])
        before = self.cells_by_path()
        b = self.cell(sid, "python", "import os\nx = os.getpid()\nx")
        self.assertEqual(b["exit_code"], 0, b)
        pid = b["stdout"]
        b = self.cell(sid, "python", "print('a' * 10); import sys; sys.stderr.write('e\\n'); 7")
        self.assertEqual((b["stdout"], b["stderr"]), ("a" * 10 + "\n7\n", "e\n"), b)
        b = self.cell(sid, "javascript", "[1, 2].map(x => x * 2)")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("[ 2, 4 ]\n", True), b)
        after = self.cells_by_path()
        self.assertEqual(after["uplink"] - before["uplink"], 3, (before, after))
        self.assertEqual(after["exec"], before["exec"])
        status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
            "language": "python", "code": "open('f.txt').read() + str(x)",
            "files": [{"path": "f.txt", "content": "pid "}]}})
        self.assertEqual((status, b["stdout"]), (200, "'pid %s'\n" % pid.strip()), b)
        self.assertEqual(self.cells_by_path()["uplink"] - after["uplink"], 1)
        self.assertEqual(self.cells_by_path()["exec"], before["exec"])
        # Output past the cap is cut on the uplink as on an exec (4096 here).
        b = self.cell(sid, "python", "print('y' * 10000)")
        self.assertTrue(b["stdout_truncated"], b)
        self.assertEqual(len(b["stdout"]), 4096)
        # The deadline ends the cell and its interpreter; the next starts fresh.
        b = self.cell(sid, "python", "while True: pass", timeout_ms=1500)
        self.assertEqual((b["exit_code"], b["timed_out"]), (124, True), b)
        n = self.cells_by_path()["uplink"]
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        self.assertEqual(self.cells_by_path()["uplink"], n + 1)

    def test_describe(self):
        status, body = self.d.rpc("Describe", {})
        self.assertTrue(body["supports_sessions"])
        self.assertEqual(sorted(body["languages"]), ["javascript", "python"])
        self.assertIn("one real session: a call's processes were ended before the next call and "
                      "its file outlived a pause and a resume; cells kept a value in python and "
                      "javascript",
                      body["startup_checks"][-1])

    def test_files_persist_and_leftovers_are_cleaned(self):
        sid = self.open()
        b = self.call(sid, py("import subprocess\n"
                              "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                              "open('/work/a.txt', 'w').write('one')\nprint('ok')"))
        self.assertEqual(b["stdout"], "ok\n", b)
        b = self.call(sid, py("import os\n"
                              "s = [p for p in os.listdir('/proc') if p.isdigit() and\n"
                              "     open('/proc/%s/comm' % p).read().strip() == 'sleep']\n"
                              "print(len(s), open('/work/a.txt').read())"))
        self.assertEqual(b["stdout"], "0 one\n", b)
        # A project step sees what the snippet wrote, and writes for the next call.
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": {"project": {
            "files": [{"path": "b.py", "content": "print(open('a.txt').read() + '+two')"}],
            "steps": [{"name": "s", "argv": ["python3", "b.py"]}]}}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["steps"][0]["stdout"], "one+two\n", body)

    def test_cells_keep_state_and_report_exit_codes(self):
        sid = self.open()
        b = self.cell(sid, "python", "import math\nx = 20")
        self.assertEqual((b["exit_code"], b["interpreter_started"]), (0, True), b)
        b = self.cell(sid, "python", "x + 22")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("42\n", False), b)
        b = self.cell(sid, "python", "round(math.pi, 2)")
        self.assertEqual(b["stdout"], "3.14\n")
        b = self.cell(sid, "python", "raise ValueError('nope')")
        self.assertEqual(b["exit_code"], 1, b)
        self.assertIn("ValueError", b["stderr"])
        b = self.cell(sid, "javascript", "let y = 40")
        self.assertTrue(b["interpreter_started"], b)
        b = self.cell(sid, "javascript", "y + 2")
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "42\n"), b)
        b = self.cell(sid, "javascript", "throw new Error('bad')")
        self.assertEqual(b["exit_code"], 1, b)
        # The deadline ends the cell and its interpreter: 124, then a fresh one.
        b = self.cell(sid, "python", "while True: pass", timeout_ms=1500)
        self.assertEqual((b["exit_code"], b["timed_out"]), (124, True), b)
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertTrue(b["interpreter_started"], b)
        self.assertEqual(b["stdout"], "False\n", b)
        # The other language's interpreter was kept.
        b = self.cell(sid, "javascript", "y")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("40\n", False), b)

    def test_cell_files_are_written_first(self):
        sid = self.open(languages=["python"])
        status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
            "language": "python", "code": "open('data/in.txt').read().upper()",
            "files": [{"path": "data/in.txt", "content": "hello"}]}})
        self.assertEqual(status, 200, b)
        self.assertEqual(b["stdout"], "'HELLO'\n", b)
        # The hint started it at open, and this first cell is its first:
        # nothing defined earlier exists, so it says so.
        self.assertTrue(b["interpreter_started"], b)

    def test_chain_of_records(self):
        sid = self.open()
        prev = ""
        for i in range(3):
            run = py("print(%d)" % i)
            b = self.call(sid, run)
            rec = b["record"]
            self.assertEqual(rec["previous_digest"], prev)
            body = dict(b)
            del body["record"]
            self.assertIn("usage", body)  # the digest covers it
            self.assertEqual(rec["response_sha256"], sha(body))
            self.assertEqual(rec["request_sha256"], sha(run))
            r2 = dict(rec)
            del r2["digest"]
            self.assertEqual(rec["digest"], sha(r2))
            prev = rec["digest"]
        b = self.cell(sid, "python", "1")
        self.assertEqual(b["record"]["previous_digest"], prev)

    def test_ownership(self):
        sid = self.open("alice")
        a = self.refused("RunInSession", {"session_id": sid, "run": py("1")}, "not_found",
                         "NOT_FOUND", principal="bob")
        b = self.refused("RunInSession", {"session_id": "0" * 64, "run": py("1")}, "not_found",
                         "NOT_FOUND", principal="bob")
        self.assertEqual(a["message"], b["message"])
        self.refused("CloseSession", {"session_id": sid}, "not_found", "NOT_FOUND",
                     principal="bob")
        self.assertEqual(self.call(sid, py("print(1)"))["stdout"], "1\n")
        self.assertNotIn(sid, self.d.log_text())

    def test_close_then_ended(self):
        sid = self.open()
        status, _ = self.d.rpc("CloseSession", {"session_id": sid})
        self.assertEqual(status, 200)
        body = self.refused("RunInSession", {"session_id": sid, "run": py("1")},
                            "failed_precondition", "SESSION_ENDED")
        self.assertIn("closed", body["message"])
        # Why it ended is metadata too (protobuf and debug copy), so a
        # client need not parse the message.
        info, debug = error_info(body)
        self.assertEqual(info["metadata"]["ended_reason"], "its owner closed it")
        self.assertEqual(debug["metadata"]["ended_reason"], "its owner closed it")
        self.assertEqual(info["metadata"]["dispatched"], "false")

    # ---- sessions a caller can see and manage ------------------------------
    def get(self, sid, principal="alice"):
        status, body = self.d.rpc("GetSession", {"session_id": sid}, principal=principal)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["session_id"], sid)
        return body

    def raw(self, method, msg, principal):
        h = {"Content-Type": "application/json",
             "Authorization": "Bearer " + self.d.keys[principal]}
        return self.d.request("POST", "/plimsoll.v1.SandboxService/" + method,
                              json.dumps(msg).encode(), h)[::2]

    def test_get_session_says_what_it_holds(self):
        sid = self.open(languages=["python"])
        g = self.get(sid)
        self.assertEqual((g["state"], g["calls"], g["calls_waiting"], g["previous_digest"],
                          g["last_call_at"], g["ended_reason"], g["ended_at"]),
                         ("ready", 0, 0, "", "", "", ""), g)
        self.assertEqual(g["languages"], ["python"])
        self.assertEqual(g["interpreters"], [{"language": "python", "alive": True}])
        self.assertEqual((g["disk_budget_kib"], g["max_lifetime_s"]), (8 << 10, 900))
        created = rfc3339(g["created_at"])
        self.assertAlmostEqual(rfc3339(g["lifetime_deadline"]) - created, 600, delta=1)
        self.assertGreaterEqual(rfc3339(g["idle_deadline"]), created + 2)
        # A call's record is the chain's head; the next call waits for the
        # cleanup, whose measure of the files GetSession then gives.
        rec = self.call(sid, py("open('/work/f', 'wb').write(b'x' * (300 << 10))"))["record"]
        g = self.get(sid)
        self.assertEqual((g["calls"], g["previous_digest"]), (1, rec["digest"]), g)
        self.assertGreaterEqual(rfc3339(g["last_call_at"]), created)
        b = self.cell(sid, "python", "x = 1")
        g = self.get(sid)
        self.assertEqual((g["calls"], g["previous_digest"]), (2, b["record"]["digest"]), g)
        self.assertGreaterEqual(g["disk_used_kib"], 300, g)
        self.assertLess(g["disk_used_kib"], 8 << 10, g)
        # A cell's deadline ends its interpreter: the cleanup after it says so.
        b = self.cell(sid, "python", "while True: pass", timeout_ms=1500)
        self.assertTrue(b["timed_out"], b)
        for _ in range(100):
            g = self.get(sid)
            if g["interpreters"] == [{"language": "python", "alive": False}]:
                break
            time.sleep(0.1)
        self.assertEqual(g["interpreters"], [{"language": "python", "alive": False}], g)
        self.cell(sid, "javascript", "1")
        self.assertEqual(self.get(sid)["interpreters"], [{"language": "python", "alive": False},
                                                         {"language": "javascript",
                                                          "alive": True}])

    def test_get_session_waits_for_no_call(self):
        sid = self.open()
        t = threading.Thread(target=self.call, args=(sid, py("import time; time.sleep(3)")))
        t.start()
        self.addCleanup(t.join)
        for _ in range(100):
            g = self.get(sid)
            if g["calls_waiting"] == 1:
                break
            time.sleep(0.05)
        self.assertEqual(g["calls_waiting"], 1, g)
        self.assertEqual(g["idle_deadline"], "", g)  # no idle pause while a call runs
        self.assertTrue(t.is_alive())  # answered while the call still ran
        t.join()
        self.assertEqual(self.get(sid)["calls"], 1)

    def test_list_sessions_gives_the_callers_own(self):
        a1 = self.open("alice")
        a2 = self.open("alice", languages=["javascript"])
        b1 = self.open("bob")
        status, body = self.d.rpc("ListSessions", {})
        self.assertEqual(status, 200, body)
        ids = [x["session_id"] for x in body["sessions"] if x["state"] != "ended"]
        self.assertEqual(ids, [a1, a2])  # oldest first; never bob's
        status, body = self.d.rpc("ListSessions", {}, principal="bob")
        self.assertEqual([x["session_id"] for x in body["sessions"] if x["state"] != "ended"],
                         [b1])
        self.assertNotIn(a1, json.dumps(body))
        self.refused("ListSessions", {"session_id": a1}, "invalid_argument", "INVALID_REQUEST")
        # A closed one stays listed a while, ended, with its reason.
        self.d.rpc("CloseSession", {"session_id": a2})
        status, body = self.d.rpc("ListSessions", {})
        got = {x["session_id"]: (x["state"], x["ended_reason"]) for x in body["sessions"]}
        self.assertEqual(got[a2], ("ended", "its owner closed it"))
        self.assertIn(got[a1], (("ready", ""), ("paused", "")))  # SANDBOX_SESSION_IDLE=2

    def test_another_callers_session_answers_as_an_unknown_one(self):
        sid = self.open("alice")
        for method, extra in (("GetSession", {}), ("ExtendSession", {"ends_in_s": 60})):
            theirs = self.raw(method, dict(extra, session_id=sid), "bob")
            unknown = self.raw(method, dict(extra, session_id="0" * 64), "bob")
            short = self.raw(method, dict(extra, session_id="x"), "bob")
            self.assertEqual(theirs, unknown)
            self.assertEqual(theirs, short)
            self.assertEqual(theirs[0], 404, theirs)
        g = self.get(sid)  # bob's tries changed nothing
        self.assertAlmostEqual(rfc3339(g["lifetime_deadline"]) - rfc3339(g["created_at"]), 600,
                               delta=1)

    def test_extend_session(self):
        sid = self.open()
        g = self.get(sid)
        created = rfc3339(g["created_at"])
        status, e = self.d.rpc("ExtendSession", {"session_id": sid, "ends_in_s": 850})
        self.assertEqual(status, 200, e)
        self.assertAlmostEqual(rfc3339(e["lifetime_deadline"]) - created, 850, delta=2)
        self.assertEqual(self.get(sid)["lifetime_deadline"], e["lifetime_deadline"])
        # Past SANDBOX_SESSION_MAX_LIFETIME (900 s from open): refused,
        # naming the setting and the most it may ask now; nothing changes.
        body = self.refused("ExtendSession", {"session_id": sid, "ends_in_s": 901},
                            "invalid_argument", "INVALID_REQUEST")
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", body["message"])
        most = int(body["message"].rsplit("at most ", 1)[1])
        self.assertTrue(880 <= most <= 900, body)
        self.assertEqual(self.get(sid)["lifetime_deadline"], e["lifetime_deadline"])
        for bad in (0, -1, "60", 2 ** 32, None):
            self.refused("ExtendSession", {"session_id": sid, "ends_in_s": bad},
                         "invalid_argument", "INVALID_REQUEST")
        self.refused("ExtendSession", {"session_id": sid}, "invalid_argument", "INVALID_REQUEST")
        # Shorter too: it ends then, with a reason that says why.
        self.cell(sid, "python", "kept = 1")
        status, e = self.d.rpc("ExtendSession", {"sessionId": sid, "endsInS": 1})
        self.assertEqual(status, 200, e)
        for _ in range(100):
            if self.get(sid)["state"] == "ended":
                break
            time.sleep(0.1)
        g = self.get(sid)
        why = "the session reached the end ExtendSession gave it"
        self.assertEqual((g["state"], g["ended_reason"], g["lifetime_deadline"]),
                         ("ended", why, ""), g)
        self.assertGreaterEqual(rfc3339(g["ended_at"]), rfc3339(e["lifetime_deadline"]))
        body = self.refused("RunInSession", {"session_id": sid, "run": py("1")},
                            "failed_precondition", "SESSION_ENDED")
        self.assertEqual(error_info(body)[0]["metadata"]["ended_reason"], why)
        body = self.refused("ExtendSession", {"session_id": sid, "ends_in_s": 60},
                            "failed_precondition", "SESSION_ENDED")
        self.assertEqual(error_info(body)[0]["metadata"]["ended_reason"], why)

    def test_the_calls_over_grpc_from_a_generated_client(self):
        """Debian's python3-grpcio with messages protoc made from proto/ at
        test time: the same SessionInfo as JSON gives, and the same
        refusals."""
        sys.path.insert(0, CONFORMANCE)
        from test_grpcio import DEBIAN_PYTHON, generate
        gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-")
        self.addCleanup(shutil.rmtree, gen, True)
        generate(gen)
        sid = self.open(languages=["python"])
        self.cell(sid, "python", "x = 1")

        def calls(*cs):
            cfg = {"target": "127.0.0.1:%d" % self.d.port, "gen": gen, "tls": None,
                   "calls": [dict(c, key=self.d.keys[c.pop("who", "alice")]) for c in cs]}
            p = subprocess.run([DEBIAN_PYTHON, os.path.join(CONFORMANCE, "grpcio_driver.py")],
                               input=json.dumps(cfg), capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            return [json.loads(x) for x in p.stdout.splitlines()]

        def nondefault(m):  # proto3 JSON leaves out a field at its default
            # (and SANDBOX_SESSION_IDLE=2 here may pause it between the two)
            return {k: v for k, v in m.items()
                    if v not in ("", 0, False, []) and k not in ("state", "idle_deadline")}

        want = nondefault(self.get(sid))
        got = calls({"method": "GetSession", "request": {"session_id": sid}},
                    {"method": "ListSessions"},
                    {"method": "ExtendSession", "request": {"session_id": sid, "ends_in_s": 650}},
                    {"method": "GetSession", "request": {"session_id": sid}, "who": "bob"},
                    {"method": "ExtendSession", "request": {"session_id": sid,
                                                            "ends_in_s": 5000}})
        self.assertEqual(nondefault(got[0]["ok"]), want)
        self.assertIn(got[0]["ok"]["state"], ("ready", "paused"))
        self.assertIn(want, [nondefault(x) for x in got[1]["ok"]["sessions"]])
        self.assertEqual(got[2]["ok"]["lifetime_deadline"], self.get(sid)["lifetime_deadline"])
        self.assertEqual(got[3]["error"]["code"], "not_found", got[3])
        self.assertEqual(got[3]["error"]["details"][0]["reason"], "NOT_FOUND")
        self.assertEqual(got[4]["error"]["code"], "invalid_argument", got[4])
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", got[4]["error"]["message"])

    def test_the_cli_manages_sessions(self):
        env = {"PATH": os.environ.get("PATH", ""),
               "PLIMSOLL_URL": "http://127.0.0.1:%d" % self.d.port,
               "PLIMSOLL_KEY": self.d.keys["alice"]}

        def cli(*args, principal="alice"):
            p = subprocess.run([CLI] + list(args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=120,
                               env=dict(env, PLIMSOLL_KEY=self.d.keys[principal]))
            return p.returncode, p.stdout.decode(), p.stderr.decode()

        code, out, err = cli("session", "open", "-l", "python", "-l", "javascript")
        self.assertEqual(code, 0, err)
        sid = out.strip()
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        self.assertEqual(self.get(sid)["languages"], ["python", "javascript"])
        self.cell(sid, "python", "1")
        code, out, err = cli("session", "ls")
        self.assertEqual(code, 0, err)
        lines = [l.split() for l in out.splitlines()]
        self.assertEqual(lines[0], ["SESSION", "STATE", "CALLS", "ENDS", "LANGUAGES"])
        mine = [l for l in lines if l[0] == sid]
        self.assertEqual(len(mine), 1, out)
        self.assertEqual((mine[0][1], mine[0][2], mine[0][-1]), ("ready", "1", "python,javascript"))
        code, out, _ = cli("session", "ls", "--json")
        self.assertIn(sid, [x["session_id"] for x in json.loads(out)["sessions"]])
        code, out, _ = cli("session", "ls", principal="bob")
        self.assertEqual(code, 0)
        self.assertNotIn(sid, out)
        code, out, err = cli("session", "get", sid)
        self.assertEqual((code, json.loads(out)["calls"]), (0, 1), err)
        code, out, err = cli("session", "extend", sid, "700")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.strip(), self.get(sid)["lifetime_deadline"])
        code, out, err = cli("session", "extend", sid, "100000")
        self.assertEqual((code, out), (3, ""), err)
        self.assertIn("refused: INVALID_REQUEST", err)
        self.assertIn("SANDBOX_SESSION_MAX_LIFETIME", err)
        code, _, err = cli("session", "get", sid, principal="bob")
        self.assertEqual(code, 3)
        self.assertIn("refused: NOT_FOUND", err)
        self.assertEqual(cli("session", "close", sid)[0], 0)
        code, out, _ = cli("session", "get", sid)
        self.assertEqual(json.loads(out)["state"], "ended")
        code, _, err = cli("session", "extend", sid, "60")
        self.assertEqual(code, 3)
        self.assertIn("refused: SESSION_ENDED", err)

    def test_run_refuses_a_cell_and_sessions_refuse_modules(self):
        self.refused("Run", {"cell": {"language": "python", "code": "1"}}, "invalid_argument",
                     "INVALID_REQUEST")
        sid = self.open()
        self.refused("RunInSession", {"session_id": sid, "run": {
            "module": {"wasm_base64": "AGFzbQEAAAA="}}}, "unimplemented", "UNSUPPORTED")

    def test_grants_in_sessions(self):
        sid = self.open()
        self.refused("RunInSession", {"session_id": sid, "run": dict(
            py("print(1)"), grant_profile="not-in-sessions")}, "invalid_argument",
            "INVALID_REQUEST")
        code = ("import http.client, os, socket\n"
                "class C(http.client.HTTPConnection):\n"
                "    def connect(self):\n"
                "        self.sock = socket.socket(socket.AF_UNIX)\n"
                "        self.sock.connect(os.environ['PLIMSOLL_BROKER_SOCKET'])\n"
                "c = C('b'); c.request('GET', '/items/1'); print(c.getresponse().status)\n")
        self.up.take()
        b = self.call(sid, dict(py(code), grant_profile="in-sessions"))
        self.assertEqual(b["stdout"], "200\n", b)
        self.assertEqual(len(self.up.take()), 1)
        # The next call without a grant has no broker.  The directory is the
        # sandbox uid's, traverse only (it cannot be listed); cells.sock is
        # the launchers' greeting socket (docs/sessions.md).
        b = self.call(sid, py("import os\n"
                              "print(os.path.exists('/run/plimsoll/cells.sock'), "
                              "os.path.exists('/run/plimsoll/call/broker.sock'))\n"
                              "try:\n    os.listdir('/run/plimsoll')\n"
                              "except PermissionError:\n    print('not listed')\n"))
        self.assertEqual(b["stdout"], "True False\nnot listed\n", b)

    def test_pause_on_idle_and_resume(self):
        sid = self.open()
        self.cell(sid, "python", "kept = 'yes'")
        tag = None
        for c in ours(self.instance):
            if "session" in c["Labels"].get("org.plimsoll.run", ""):
                tag = c
        time.sleep(3.5)  # SANDBOX_SESSION_IDLE=2
        states = [c["State"] for c in ours(self.instance)
                  if "session" in c["Labels"].get("org.plimsoll.run", "")]
        self.assertIn("paused", states)
        b = self.cell(sid, "python", "kept")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("'yes'\n", False), b)
        self.assertIsNotNone(tag)

    def test_killing_the_main_process_ends_the_session(self):
        sid = self.open()
        # SIGKILL from inside the sandbox cannot end its init; SIGTERM, which
        # the agent honours, can: no later call may run beside a dead sandbox.
        # PID 1 drops signals it neither handles nor blocks: wait until the
        # agent has blocked SIGTERM for its sigtimedwait (a loaded machine
        # may get here before its Python has started), then send it.
        self.call(sid, py("import os, signal, time\n"
                          "bit = 1 << (signal.SIGTERM - 1)\n"
                          "for _ in range(100):\n"
                          "    masks = [int(l.split()[1], 16) for l in open('/proc/1/status')\n"
                          "             if l.startswith(('SigBlk', 'SigCgt'))]\n"
                          "    if not masks:  # a kernel that does not say: give it time\n"
                          "        time.sleep(2)\n"
                          "        break\n"
                          "    if any(m & bit for m in masks):\n"
                          "        break\n"
                          "    time.sleep(0.05)\n"
                          "os.kill(1, signal.SIGTERM)\nimport time\n"
                          "time.sleep(1)"))
        body = self.refused("RunInSession", {"session_id": sid, "run": py("1")},
                            "failed_precondition", "SESSION_ENDED")
        self.assertIn("main process", body["message"])

    def test_disk_budget_ends_the_session(self):
        sid = self.open()
        b = self.call(sid, py("try:\n    open('/work/big', 'wb').write(b'x' * (20 << 20))\n"
                              "except OSError as e:\n    print('full', e.errno)"))
        self.assertIn("full", b["stdout"])
        body = self.refused("RunInSession", {"session_id": sid, "run": py("1")},
                            "failed_precondition", "SESSION_ENDED")
        self.assertIn("SANDBOX_SESSION_DISK_MB", body["message"])

    def test_calls_run_one_at_a_time_in_order(self):
        sid = self.open()
        out = []

        def one(i):
            b = self.call(sid, py("import time\nopen('/work/order', 'a').write('%d')\n"
                                  "time.sleep(0.3)" % i))
            out.append(b["exit_code"])

        ts = []
        for i in range(3):
            t = threading.Thread(target=one, args=(i,))
            t.start()
            ts.append(t)
            time.sleep(0.3)  # arrival order is the order asked for, even on a loaded machine
        for t in ts:
            t.join()
        b = self.call(sid, py("print(open('/work/order').read())"))
        self.assertEqual(b["stdout"], "012\n", b)


SessionsRunc, SessionsRunsc = per_runtime(Sessions)


class SessionPool(DockerDaemon):
    """SANDBOX_SESSION_POOL: waiting sandboxes with both interpreters up;
    per_runtime sets RUNTIME."""
    INSTANCE = "pool-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_POOL": "1",
                "SANDBOX_DOCKER_WARM": "0"}
    START_TIMEOUT = 240

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left

    def pooled(self, timeout=60, exclude=()):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ids = [c["Id"] for c in ours(self.instance)
                   if c["Labels"].get("org.plimsoll.run", "").startswith("session-pool-")
                   and c["State"] == "running" and c["Id"] not in exclude]
            if ids:
                return ids
            time.sleep(0.2)
        self.fail("no pooled sandbox appeared")

    def open_pooled(self, timeout=90):
        """Open until the session got a waiting sandbox: the filler may
        still be launching the first one's interpreters (its container is
        running before it is ready), and then the open makes its own."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.d.rpc("OpenSession", {"languages": ["python"]})
            self.assertEqual(status, 200, body)
            sid = body["session_id"]
            status, b = self.d.rpc("RunCell", {"session_id": sid,
                                               "cell": {"language": "python", "code": "1 + 1"}})
            self.assertEqual(status, 200, b)
            if "-pool-" in b["sandbox_name"]:
                return sid, b
            self.d.rpc("CloseSession", {"session_id": sid})
            self.assertLess(time.monotonic(), deadline, "no session got a pooled sandbox")
            time.sleep(1)

    def test_open_takes_a_ready_sandbox_and_the_pool_refills(self):
        before = self.pooled()
        sid, b = self.open_pooled()
        try:
            # Started by the pool, but this is the first cell it runs.
            self.assertEqual((b["stdout"], b["interpreter_started"]), ("2\n", True), b)
            status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "javascript", "code": "1 + 1"}})
            self.assertEqual(status, 200, b)
            self.assertEqual((b["stdout"], b["interpreter_started"]), ("2\n", True), b)
            self.assertIn(b["sandbox_name"][len("plimsoll-session-"):],
                          " ".join(c["Labels"].get("org.plimsoll.run", "")
                                   for c in ours(self.instance) if c["Id"] in before))
            self.pooled(exclude=before)  # the filler made a new one; ours was taken
        finally:
            self.d.rpc("CloseSession", {"session_id": sid})


    def test_pool_follows_the_hints(self):
        # Python-only callers: the filler's next sandboxes wait with a
        # Python interpreter and no Node one (which would cost its memory
        # for nothing); a JavaScript cell there still works, started fresh.
        sid, b = self.open_pooled()
        self.d.rpc("CloseSession", {"session_id": sid})
        deadline = time.monotonic() + 120
        while True:
            sid, b = self.open_pooled()
            status, r = self.d.rpc("RunInSession", {"session_id": sid, "run": {"snippet": {
                "language": "python", "code":
                    "import os\n"
                    "names = []\n"
                    "for p in os.listdir('/proc'):\n"
                    "    try:\n"
                    "        names.append(open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[0])\n"
                    "    except OSError:\n"
                    "        pass\n"
                    "print(any(n.endswith(b'node') for n in names))"}}})
            self.assertEqual(status, 200, r)
            if r["stdout"] == "False\n":
                break
            self.d.rpc("CloseSession", {"session_id": sid})
            self.assertLess(time.monotonic(), deadline, "the pool kept starting Node")
        try:
            status, b = self.d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "javascript", "code": "6 * 7"}})
            self.assertEqual((status, b["stdout"], b["interpreter_started"]), (200, "42\n", True), b)
        finally:
            self.d.rpc("CloseSession", {"session_id": sid})


SessionPoolRunc, SessionPoolRunsc = per_runtime(SessionPool)


class SessionSettings(unittest.TestCase):
    def test_pool_needs_sessions(self):
        code, err = run_startup({"SANDBOX_SESSION_POOL": "2"})
        self.assertEqual(code, 2)
        self.assertIn("SANDBOX_SESSION_POOL", err)
        code, err = run_startup({"SANDBOX_SESSION_POOL": "65"})
        self.assertEqual(code, 2)
        self.assertIn("SANDBOX_SESSION_POOL", err)

    def test_sessions_need_a_provider_that_keeps_them(self):
        code, err = run_startup({"SANDBOX_PROVIDER": "wasm", "SANDBOX_MAX_SESSIONS": "2"})
        self.assertEqual(code, 2)
        self.assertIn("SANDBOX_MAX_SESSIONS", err)

    def test_sessions_off_refuse(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        try:
            status, body = d.rpc("OpenSession", {})
            self.assertEqual(body["code"], "unimplemented", body)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
