"""Hostile code in a session (docker, runc and runsc): what one call leaves
behind must not outlive the cleanup, the kept interpreters must not become
a way to keep other processes, one session must not see another's files,
and a session that cannot be proved clean ends instead of running the next
call.  After each class the daemon is ready, no container is left, and fd
and thread counts are back."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "api"))
from harness import Daemon, error_info  # noqa: E402
from test_docker import docker_env, engine_up, ours  # noqa: E402
from test_hostile import Hostile, proc_counts  # noqa: E402

COUNT_OTHERS = ("import os\n"
                "me = os.getpid()\n"
                "n = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)\n"
                "     and open('/proc/%s/comm' % p).read().strip() not in ('python3', 'node')]\n"
                "print(len(n))\n")


class HostileSessions(Hostile):
    RUNTIME = None

    @classmethod
    def setUpClass(cls):
        if not engine_up():
            raise RuntimeError("the docker engine is not running: run scripts/docker-setup")
        cls.instance = "hostile-sessions-" + cls.RUNTIME
        cls.d = Daemon(env=docker_env(cls.RUNTIME, cls.instance, SANDBOX_MAX_SESSIONS="4",
                                      SANDBOX_DOCKER_WARM="0")).start(timeout=240)
        cls.fds0, cls.threads0 = proc_counts(cls.d.proc.pid)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert ours(cls.instance) == [], "containers left behind"

    def open(self):
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def call(self, sid, code, **extra):
        run = {"snippet": {"language": "python", "code": code}}
        run.update(extra)
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
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

    def test_interpreter_socket_squatting_is_harmless(self):
        # A call replaces the interpreter's socket with its own listener; the
        # cleanup ends the impostor, and the next cell gets a real interpreter.
        sid = self.open()
        self.cell(sid, "python", "v = 1")
        self.ok(sid, "import os, socket, subprocess\n"
                     "p = '/tmp/.plimsoll/cell-python.sock'\n"
                     "code = ('import socket, os, time\\n'\n"
                     "        's = socket.socket(socket.AF_UNIX)\\n'\n"
                     "        'try: os.unlink(%r)\\n'\n"
                     "        'except OSError: pass\\n'\n"
                     "        's.bind(%r); s.listen(1); time.sleep(600)\\n') % (p, p)\n"
                     "subprocess.Popen(['python3', '-c', code], start_new_session=True)\n"
                     "import time; time.sleep(0.5)\n")
        b = self.cell(sid, "python", "'v' in dir()")
        # Either the kept interpreter still answered, or a fresh one started;
        # never the impostor (which would hang or answer garbage).
        self.assertIn(b["stdout"], ("True\n", "False\n"), b)
        self.assertEqual(b["exit_code"], 0, b)
        self.assertEqual(self.ok(sid, COUNT_OTHERS)["stdout"], "0\n")

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


class HostileSessionsRunc(HostileSessions, unittest.TestCase):
    RUNTIME = "runc"


class HostileSessionsRunsc(HostileSessions, unittest.TestCase):
    RUNTIME = "runsc"


if __name__ == "__main__":
    unittest.main()
