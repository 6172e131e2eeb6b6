# SPDX-License-Identifier: Apache-2.0
"""Every program plimsolld sends into a sandbox, as the build embeds it
(scripts/build/embed writes each Python one beside its header, under
PLIMSOLL_BUILD_DIR/src/providers/PKG/guest/): each is linted (pyflakes3,
`node --check`), each source file under a guest/ folder is in a program,
and each runs on the host with harmless inputs, in a temp dir, where it
can.  The docker programs that need a container (bootstrap.py,
session_main.py, the session agent's launch) run in tests/api; the agent's
interpreter servers in test_cell_servers.  src/providers/wasm/guest is the
wasm32 guest, compiled, not sent as source.  And a traceback from an
assembled program names the source file and line (src/providers/guest/
lines.py)."""
import ast
import base64
import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PLIMSOLL_BUILD_DIR", os.path.join(ROOT, "build"))
PACKAGES = ("docker", "hosted", "openshell")
EMBED = os.path.join(ROOT, "scripts", "build", "embed")
LINES = os.path.join(ROOT, "src", "providers", "guest", "lines.py")


def built(pkg, name):
    """The program NAME.py of PKG as plimsolld embeds it."""
    path = os.path.join(BUILD, "src", "providers", pkg, "guest", name + ".py")
    if not os.path.exists(path):
        raise AssertionError("%s is not built (ninja -C %s)" % (path, BUILD))
    with open(path) as f:
        return f.read()


def programs():
    out = sorted(glob.glob(os.path.join(BUILD, "src", "providers", "*", "guest", "*.py")))
    if not out:
        raise AssertionError("no guest program under %s (ninja -C %s)" % (BUILD, BUILD))
    return out


def table(src):
    """The program's _PL_FILES: (first, last, path) of each source file."""
    first = src.split("\n", 1)[0]
    if not first.startswith("_PL_FILES = "):
        raise AssertionError("the program does not start with its line table: %r" % first[:80])
    return ast.literal_eval(first[len("_PL_FILES = "):])


def run(src, *args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 30)
    return subprocess.run([sys.executable, "-c", src] + list(args), **kw)


def unused_uid():
    """A uid that owns no process: what the cleanup may end is only ours."""
    used = set()
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/status" % p) as f:
                for line in f:
                    if line.startswith("Uid:"):
                        used.update(int(x) for x in line.split()[1:])
        except (OSError, ValueError):
            pass
    for uid in range(43210, 43310):
        if uid not in used:
            return uid
    raise AssertionError("no unused uid")


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        raw = f.read()
    return int(raw[raw.rfind(")") + 2:].split()[19])


class Lint(unittest.TestCase):
    """An undefined name in a guest program fails only inside a sandbox."""

    def test_pyflakes_on_every_program(self):
        if not shutil.which("pyflakes3"):
            self.fail("pyflakes3 is not installed (scripts/deps installs it)")
        files = programs()
        # A file a program holds as a constant (walls_child.py) is a
        # program of its own: it is linted alone.
        tabled = set()
        for p in files:
            with open(p) as f:
                tabled.update(path for _, _, path in table(f.read()))
        alone = [os.path.join(ROOT, s) for s in self.sources(".py") if s not in tabled]
        r = subprocess.run(["pyflakes3"] + files + alone, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_node_check_on_every_javascript_file(self):
        for js in self.sources(".js"):
            r = subprocess.run(["node", "--check", os.path.join(ROOT, js)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, js + ": " + r.stderr)

    def test_every_python_source_is_in_a_program(self):
        used = set()
        for p in programs():
            with open(p) as f:
                src = f.read()
            rows = table(src)
            self.assertEqual(rows[0][2], "src/providers/guest/lines.py", p)
            used.update(path for _, _, path in rows)
            # a constant's file: in the program as NAME = r"""...""" (embed)
            for s in self.sources(".py"):
                with open(os.path.join(ROOT, s)) as f:
                    body = f.read()
                if ' = r"""' + body + '"""' in src:
                    used.add(s)
        self.assertEqual(sorted(set(self.sources(".py")) - used), [])

    def test_every_program_starts_with_its_table_and_lines_py(self):
        with open(LINES) as f:
            lines_py = f.read()
        for p in programs():
            with open(p) as f:
                src = f.read()
            rows = table(src)
            body = src.split("\n")
            for first, last, path in rows:
                with open(os.path.join(ROOT, path)) as f:
                    self.assertEqual("\n".join(body[first - 1:last]) + "\n", f.read(),
                                     "%s: lines %d-%d" % (p, first, last))
            self.assertTrue(src.split("\n", 1)[1].startswith(lines_py), p)

    def sources(self, ext):
        out = []
        for pkg in ("guest",) + tuple("%s/guest" % p for p in PACKAGES):
            d = os.path.join(ROOT, "src", "providers", pkg)
            out += sorted("src/providers/%s/%s" % (pkg, f) for f in os.listdir(d)
                          if f.endswith(ext))
        return out


class Tracebacks(unittest.TestCase):
    """An uncaught exception names the source file and its line."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="plimsoll-tb-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def assemble(self, *parts):
        paths = []
        for i, body in enumerate(parts):
            p = os.path.join(self.work, "part%d.py" % i)
            with open(p, "w") as f:
                f.write(body)
            paths.append(p)
        out = os.path.join(self.work, "program.py")
        subprocess.run([sys.executable, EMBED, out, "x", LINES] + paths, check=True)
        with open(out) as f:
            return f.read(), paths

    def test_a_raise_across_two_files(self):
        src, (one, two) = self.assemble("def boom():\n    raise ValueError('boom')\n",
                                        "import os\n\n\nboom()\n")
        r = run(src, cwd=self.work)
        self.assertEqual(r.returncode, 1)
        self.assertIn('File "%s", line 4, in <module>' % two, r.stderr)
        self.assertIn('File "%s", line 2, in boom' % one, r.stderr)
        self.assertIn("ValueError: boom", r.stderr)
        self.assertNotIn("<string>", r.stderr)

    def test_a_chained_exception(self):
        src, (one, two) = self.assemble(
            "def boom():\n    raise ValueError('first')\n",
            "try:\n    boom()\nexcept ValueError as e:\n    raise KeyError('second') from e\n")
        r = run(src)
        self.assertIn('File "%s", line 2, in boom' % one, r.stderr)
        self.assertIn('File "%s", line 4, in <module>' % two, r.stderr)
        self.assertIn("direct cause", r.stderr)
        self.assertNotIn("<string>", r.stderr)

    def test_an_exception_it_does_not_own_is_printed_as_python_does(self):
        # code it runs (compiled under another name) keeps its own frames
        src, _ = self.assemble("exec(compile('raise ValueError(1)', 'theirs.py', 'exec'))\n")
        r = run(src)
        self.assertIn('File "theirs.py", line 1', r.stderr)

    def test_a_program_joined_from_pieces(self):
        # openshell's join_pieces.py runs a program sent in pieces
        src, (one,) = self.assemble("x = 1\n\nraise RuntimeError('in pieces')\n")
        half = len(src) // 2
        r = run(built("openshell", "join_pieces"), "2", src[:half], src[half:], "arg")
        self.assertEqual(r.returncode, 1)
        self.assertIn('File "%s", line 3, in <module>' % one, r.stderr)
        self.assertIn('File "src/providers/openshell/guest/join_pieces.py"', r.stderr)
        self.assertNotIn("<pieces>", r.stderr)

    def test_a_real_guest_program(self):
        # the relay, asked for a socket where no directory can be made
        r = run(built("openshell", "relay"), "/proc/no/such/broker.sock")
        with open(os.path.join(ROOT, "src/providers/openshell/guest/relay.py")) as f:
            line = [i for i, text in enumerate(f, 1) if "os.makedirs(" in text][0]
        self.assertIn('File "src/providers/openshell/guest/relay.py", line %d, in <module>' % line,
                      r.stderr)


class OpenshellPrograms(unittest.TestCase):

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="plimsoll-osh-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_relay_carries_a_connection_both_ways(self):
        path = os.path.join(self.work, "relay", "broker.sock")
        proc = subprocess.Popen([sys.executable, "-c", built("openshell", "relay"), path],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            def frame():
                head = proc.stdout.read(9)
                t, i, n = struct.unpack(">cII", head)
                return t, i, proc.stdout.read(n) if n else b""

            t, i, body = frame()
            self.assertEqual((t, i), (b"R", 0))
            chain = body.decode().split()
            self.assertEqual(chain[0], "%d:%d" % (proc.pid, start_time(proc.pid)))
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(10)
            c.connect(path)
            self.assertEqual(frame(), (b"O", 1, b""))
            c.sendall(b"GET / HTTP/1.1\r\n\r\n")
            got = b""
            while len(got) < 18:
                t, i, body = frame()
                self.assertEqual((t, i), (b"D", 1))
                got += body
            self.assertEqual(got, b"GET / HTTP/1.1\r\n\r\n")
            answer = b"HTTP/1.1 204 No Content\r\n\r\n"
            proc.stdin.write(struct.pack(">cII", b"D", 1, len(answer)) + answer)
            proc.stdin.write(struct.pack(">cII", b"C", 1, 0))
            proc.stdin.flush()
            back = b""
            while True:
                chunk = c.recv(4096)
                if not chunk:
                    break
                back += chunk
            self.assertEqual(back, answer)
            c.close()
            proc.stdin.close()
            self.assertEqual(proc.wait(timeout=10), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            if not proc.stdin.closed:
                proc.stdin.close()

    def test_join_pieces_runs_the_whole_with_its_arguments(self):
        prog = "import sys\nprint(sys.argv[1:])\nprint(sys.orig_argv[-2:])\n"
        r = run(built("openshell", "join_pieces"), "3", prog[:10], prog[10:30], prog[30:],
                "a", "b")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "['a', 'b']\n['a', 'b']\n")

    def test_walls_prints_its_report(self):
        # As a uid of its own (not root, which could write where a guest
        # must not), with HOME in the temp dir: one JSON line of the walls.
        # The system's python3: this one's may be where that uid cannot go.
        uid = unused_uid()
        os.chmod(self.work, 0o777)
        r = subprocess.run(["/usr/bin/python3", "-c", built("openshell", "walls")],
                           cwd=self.work, env=dict(os.environ, HOME=self.work),
                           capture_output=True, text=True, timeout=60,
                           preexec_fn=lambda: (os.setgroups([]), os.setgid(uid), os.setuid(uid)))
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["written_outside_tmp"], [])
        self.assertTrue(j["tmp_writable"])
        self.assertIn("lo", j["interfaces"])
        for k in ("memory", "cpu", "parent_memory_read_by"):
            self.assertIn(k, j)

    def test_orphans_waits_for_the_marked_processes_to_go(self):
        with open(os.path.join(ROOT, "src/providers/openshell/guest/spawn_orphans.sh")) as f:
            spawn = f.read()
        sh = subprocess.Popen(["/bin/sh", "-c", spawn], cwd=self.work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours = []
        try:
            # the three, each a descendant of this test (the host may run
            # another test's marked processes: those are not touched)
            for _ in range(200):
                ours = [int(p) for p in os.listdir("/proc") if p.isdigit() and
                        self.marked(p) and self.descends(int(p))]
                if len(ours) == 3:
                    break
                time.sleep(0.05)
            self.assertEqual(len(ours), 3)
            check = subprocess.Popen([sys.executable, "-c", built("openshell", "orphans")],
                                     stdout=subprocess.PIPE, text=True)
            time.sleep(0.3)  # it waits up to 4 s for them to go
            self.kill(ours)
            out, _ = check.communicate(timeout=30)
            self.assertEqual(check.returncode, 0)
            self.assertFalse(set(out.split()) & {str(p) for p in ours}, out)
        finally:
            self.kill(ours)
            sh.wait()

    @staticmethod
    def marked(p):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                return b"plimsoll-proof-orphan" in f.read()
        except OSError:
            return False

    @staticmethod
    def descends(pid):
        me = os.getpid()
        while pid > 1:
            if pid == me:
                return True
            try:
                with open("/proc/%d/stat" % pid) as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False

    @staticmethod
    def kill(pids):
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


class HostedPrograms(unittest.TestCase):

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="plimsoll-hosted-")
        self.children = []

    def tearDown(self):
        for c in self.children:
            if c.poll() is None:
                c.kill()
            c.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    def as_uid(self, uid):
        return subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                preexec_fn=lambda: (os.setgroups([]), os.setgid(uid),
                                                    os.setuid(uid)))

    def test_cleanup_ends_the_users_processes_but_the_kept(self):
        # A uid no process has but the two started here: only they can be
        # ended (the cleanup of "self" would end this host's own).
        uid = unused_uid()
        gone, kept = self.as_uid(uid), self.as_uid(uid)
        self.children += [gone, kept]
        time.sleep(0.1)
        token = "%d:%d" % (kept.pid, start_time(kept.pid))
        r = run(built("hosted", "end_processes"), str(uid), token, "1:1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "clean\nalive %s\n" % token)
        self.assertEqual(gone.wait(timeout=10), -signal.SIGKILL)
        self.assertIsNone(kept.poll())

    def test_cleanup_with_nothing_to_end(self):
        r = run(built("hosted", "end_processes"), str(unused_uid()))
        self.assertEqual((r.returncode, r.stdout), (0, "clean\nalive\n"), r.stderr)

    def test_own_processes_lists_the_users_but_its_own_chain(self):
        child = subprocess.Popen(["sleep", "60"])
        self.children.append(child)
        time.sleep(0.1)
        r = run(built("hosted", "own_processes"))
        self.assertEqual(r.returncode, 0, r.stderr)
        tokens = r.stdout.split()
        self.assertIn("%d:%d" % (child.pid, start_time(child.pid)), tokens)
        self.assertFalse([t for t in tokens if t.split(":")[0] == str(os.getpid())])

    def test_check_files_reads_the_project_back(self):
        os.makedirs(os.path.join(self.work, "data", "two"))
        for path, body in (("check_files.py", built("hosted", "check_files")),
                           ("data/one.txt", "one\n"), ("data/two/two.txt", "two\n")):
            with open(os.path.join(self.work, path), "w") as f:
                f.write(body)
        r = subprocess.run([sys.executable, "check_files.py"], cwd=self.work,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "%s\n%d\n" % (os.path.realpath(self.work), os.getuid()))
        with open(os.path.join(self.work, "data/one.txt"), "w") as f:
            f.write("changed\n")
        r = subprocess.run([sys.executable, "check_files.py"], cwd=self.work,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("data/one.txt: wrong content", r.stderr)

    def test_probe_egress_says_reached_or_blocked(self):
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        try:
            open_t = "127.0.0.1:%d" % ls.getsockname()[1]
            shut_t = "127.0.0.1:%d" % port
            r = run(built("hosted", "probe_egress"), open_t + "," + shut_t)
        finally:
            ls.close()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(),
                         ["reached " + open_t, "blocked %s ConnectionRefusedError" % shut_t])

    def test_whoami(self):
        r = run(built("hosted", "whoami"))
        self.assertEqual((r.returncode, r.stdout), (0, "%d\n" % os.getuid()), r.stderr)

    def test_session_look(self):
        with open(os.path.join(self.work, "kept.txt"), "w") as f:
            f.write("kept\n")
        r = run(built("hosted", "session_look"), cwd=self.work)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the host may run another test's `sleep 600`: a count, whatever it is
        kept, count = r.stdout.splitlines()
        self.assertEqual(kept, "kept")
        self.assertTrue(count.isdigit(), count)

    # guest/files.py, as hosted/files.c runs it (the rules' exit codes are
    # docker's bootstrap's; 75: the staged stream changed).
    def files(self, mode, ctl, *pieces):
        return subprocess.run([sys.executable, "-I", "-c", built("hosted", "files"), mode,
                               json.dumps(ctl)] + list(pieces), capture_output=True,
                              timeout=30)

    @staticmethod
    def stream(files):
        head = json.dumps({"files": [{"path": p, "len": len(b)} for p, b in files]}).encode()
        return b"%d\n" % len(head) + head + b"".join(b for _, b in files)

    def write(self, workdir, files, cut=None, between=None):
        """The files written as the daemon does, the stream cut in two
        commands at cut (staged in /tmp) or sent in one; between runs
        between the two.  The last command's result."""
        s = self.stream(files)
        ctl = {"workdir": workdir, "stage": os.urandom(12).hex(), "len": len(s),
               "sha256": hashlib.sha256(s).hexdigest()}
        parts = [s] if cut is None else [s[:cut], s[cut:]]
        for i, part in enumerate(parts):
            r = self.files("write", dict(ctl, first=i == 0, last=i == len(parts) - 1),
                           base64.b64encode(part).decode())
            if i == 0 and between:
                between(ctl["stage"])
        return r

    def test_files_writes_reads_and_lists_in_the_work_directory(self):
        w = os.path.join(self.work, "w", "project")
        r = self.files("list", {"workdir": w, "path": "", "depth": 1, "entries": 10})
        self.assertEqual((r.returncode, r.stdout), (0, b'PLIMSOLL {"truncated":false}\n'))
        r = self.write(w, [("a/b.txt", b"hello"), ("c", b"\xff" * 3000)], cut=100)
        self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
        r = self.files("read", {"workdir": w, "path": "a/b.txt", "offset": 1, "limit": 3})
        self.assertEqual((r.returncode, r.stdout), (0, b'PLIMSOLL {"size":5}\nell'))
        r = self.files("list", {"workdir": w, "path": "", "depth": 2, "entries": 10})
        self.assertEqual([json.loads(l)["t"] for l in r.stdout.splitlines()[:-1]],
                         ["directory", "file", "file"])
        self.assertEqual(self.files("read", {"workdir": w, "path": "nope", "offset": 0,
                                             "limit": 9}).returncode, 64)

    def test_files_refuses_what_a_guest_sets_up(self):
        w = os.path.join(self.work, "project")
        os.makedirs(w)
        os.mkfifo(os.path.join(w, "fifo"))
        os.symlink("/etc", os.path.join(w, "etc"))
        r = self.write(w, [("ok", b"1"), ("fifo", b"x")])
        self.assertEqual((r.returncode, r.stdout), (66, b"1\n"), r.stderr)
        r = self.write(w, [("etc/evil", b"x")])
        self.assertEqual((r.returncode, r.stdout), (65, b"0\n"), r.stderr)
        self.assertFalse(os.path.exists("/etc/evil"))
        # The work directory itself swapped for a symlink.
        os.rename(w, w + ".moved")
        os.symlink(w + ".moved", w)
        self.assertEqual(self.files("read", {"workdir": w, "path": "ok", "offset": 0,
                                             "limit": 9}).returncode, 65)
        self.assertEqual(self.write(w, [("new", b"x")]).returncode, 65)
        self.assertFalse(os.path.exists(w + ".moved/new"))

    def test_files_writes_nothing_from_a_staged_stream_that_changed(self):
        w = os.path.join(self.work, "project")

        staged = []

        def tamper(stage):
            staged.append("/tmp/.plimsoll-stage-" + stage)
            with open(staged[0], "ab") as f:
                f.write(b"X")

        r = self.write(w, [("one", b"1"), ("two", b"2" * 5000)], cut=60, between=tamper)
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(w, "one")))
        self.assertFalse(os.path.exists(staged[0]))  # removed all the same

    def test_node_runs(self):
        with open(os.path.join(ROOT, "src/providers/hosted/guest/node_runs.js")) as f:
            js = f.read()
        r = subprocess.run(["node", "-e", js], capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, "function\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()
