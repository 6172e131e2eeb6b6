# SPDX-License-Identifier: Apache-2.0
"""What a run brings back besides its output, through the real daemon and the
real docker engine, under runc and under runsc.  A cell's display outputs
(docs/sessions.md, "Display outputs"): Python's display() and rich values,
JavaScript's display(), their bounds, frames a guest forges on its own
uplink, RunCellStream and gRPC.  A project's artifacts (collect globs): what comes back and in which
order, the bounds and their flags, the refusals before anything runs, the
records, and what guest code can set up against the reader: symlinks out
and in loops, a directory symlink under "**", FIFOs and sockets, hard links,
huge sparse files, unreadable files, names that are not UTF-8, a snippet's
own files beside its exit status, and (in a session, where a kept
interpreter lives on) a name swapped between a file
and a symlink to /etc while the reader works (docs/api.md, "Artifacts")."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, ours, per_runtime  # noqa: E402
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.payloads import sha  # noqa: E402


def project(script, collect, files=None, **extra):
    """A project of one python3 step running script in /work."""
    p = {"steps": [{"name": "make", "argv": ["python3", "-c", script]}], "collect": collect}
    if files:
        p["files"] = files
    return dict(extra, project=p)


class Artifacts(DockerDaemon):
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "artif-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_IDLE": "600",
                "SANDBOX_DOCKER_WARM": "0", "SANDBOX_COLLECT_FILES": "6",
                "SANDBOX_COLLECT_BYTES": "8192", "SANDBOX_DISPLAY_OUTPUTS": "4",
                "SANDBOX_DISPLAY_OUTPUT_BYTES": "65536", "SANDBOX_DISPLAY_BYTES": "131072"}
    START_TIMEOUT = 240

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left

    def run_ok(self, msg):
        status, body = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, body)
        return body

    def refused(self, msg, reason):
        status, body = self.d.rpc("Run", msg)
        self.assertNotEqual(status, 200, body)
        self.assertEqual(error_info(body)[0]["reason"], reason, body)
        return body

    def content(self, a):
        if "content_base64" in a:
            return base64.b64decode(a["content_base64"])
        return a["content"].encode()

    # ---- what comes back ---------------------------------------------------
    def test_matched_files_come_back_in_walk_order(self):
        binary = bytes(range(256))
        b = self.run_ok(project(
            "import os\n"
            "os.makedirs('dist'); os.makedirs('sub/deep'); os.makedirs('skip')\n"
            "open('dist/p-1.whl', 'wb').write(bytes(range(256)))\n"
            "open('dist/p-1.tar.gz', 'w').write('not asked for')\n"
            "open('report.csv', 'w').write('a,b\\n1,2\\n')\n"
            "open('sub/deep/x.csv', 'w').write('deep')\n"
            "open('.hidden.csv', 'w').write('dot')\n"
            "open('skip/y.txt', 'w').write('no')\n"
            "print('built')\n",
            ["dist/*.whl", "**/*.csv", "input.txt"],
            files=[{"path": "input.txt", "content": "given"}]))
        self.assertEqual((b["exit_code"], b["steps"][0]["stdout"]), (0, "built\n"), b)
        got = [(a["path"], a["size"], self.content(a), a["truncated"]) for a in b["artifacts"]]
        self.assertEqual(got, [(".hidden.csv", 3, b"dot", False),
                               ("dist/p-1.whl", 256, binary, False),
                               ("input.txt", 5, b"given", False),
                               ("report.csv", 8, b"a,b\n1,2\n", False),
                               ("sub/deep/x.csv", 4, b"deep", False)])
        self.assertNotIn("content_base64", b["artifacts"][0])  # text stays text
        self.assertFalse(b["artifacts_truncated"])
        # The record's response digest covers them as the rest of the answer.
        self.assertEqual(b["record"]["response_sha256"],
                         sha({k: v for k, v in b.items() if k != "record"}))
        # Globs that match nothing: an empty list, said so.
        b = self.run_ok(project("print(1)", ["nothing/*"]))
        self.assertEqual((b["artifacts"], b["artifacts_truncated"]), ([], False), b)
        # Without collect, no artifacts member at all.
        b = self.run_ok({"project": {"steps": [{"argv": ["true"]}]}})
        self.assertNotIn("artifacts", b)

    def test_a_failed_step_still_brings_its_files(self):
        b = self.run_ok(project("open('log.txt', 'w').write('why it failed')\n"
                                "raise SystemExit(3)\n", ["*.txt"]))
        self.assertEqual(b["exit_code"], 3, b)
        self.assertEqual([(a["path"], a["content"]) for a in b["artifacts"]],
                         [("log.txt", "why it failed")])

    def test_bounds_and_their_flags(self):
        # Eight files of 2000 bytes: six come (SANDBOX_COLLECT_FILES), with
        # 8192 bytes in all (SANDBOX_COLLECT_BYTES): four whole, the fifth
        # cut, the sixth empty; the list says more matched.
        b = self.run_ok(project("for i in range(8):\n"
                                "    open('f%d.bin' % i, 'wb').write(bytes([65 + i]) * 2000)\n",
                                ["*.bin"]))
        got = [(a["path"], a["size"], len(self.content(a)), a["truncated"])
               for a in b["artifacts"]]
        self.assertEqual(got, [("f0.bin", 2000, 2000, False), ("f1.bin", 2000, 2000, False),
                               ("f2.bin", 2000, 2000, False), ("f3.bin", 2000, 2000, False),
                               ("f4.bin", 2000, 192, True), ("f5.bin", 2000, 0, True)])
        self.assertEqual(self.content(b["artifacts"][4]), b"E" * 192)
        self.assertTrue(b["artifacts_truncated"])
        # A huge sparse file: its size (capped as ListFiles caps it), and only
        # the budget's bytes read.
        b = self.run_ok(project("import os\n"
                                "with open('huge.img', 'wb') as f:\n"
                                "    f.truncate(1 << 40)\n"
                                "open('after.txt', 'w').write('x')\n",
                                ["huge.img", "after.txt"]))
        got = [(a["path"], a["size"], len(self.content(a)), a["truncated"])
               for a in b["artifacts"]]
        self.assertEqual(got, [("after.txt", 1, 1, False), ("huge.img", 4294967295, 8191, True)])
        self.assertFalse(b["artifacts_truncated"])

    def test_refused_before_anything_runs(self):
        for globs, what in ((["../etc/passwd"], "project.collect[0]"),
                            (["/etc/*"], "project.collect[0]"),
                            (["a//b"], "project.collect[0]"),
                            (["ok", "./x"], "project.collect[1]"),
                            (["x" * 257], "project.collect[0]"),
                            (["g%d" % i for i in range(17)], "more than 16 globs"),
                            ([7], "collect")):
            body = self.refused(project("print(1)", globs), "INVALID_REQUEST")
            self.assertIn(what, body["message"], body)
            self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false")
        body = self.refused({"snippet": {"language": "python", "code": "1",
                                         "collect": ["../x"]}}, "INVALID_REQUEST")
        self.assertIn("snippet.collect[0]", body["message"])

    def test_setup_failed_and_timed_out_bring_none(self):
        b = self.run_ok(project("print(1)", ["*"], files=[{"path": "a", "content": "1"},
                                                           {"path": "a/b", "content": "2"}]))
        self.assertEqual(b["outcome"], "setup_failed", b)
        self.assertNotIn("artifacts", b)
        b = self.run_ok(project("import time\nopen('t.txt','w').write('1')\ntime.sleep(30)",
                                ["*"], timeout_ms=1500))
        self.assertEqual(b["outcome"], "timed_out", b)
        self.assertNotIn("artifacts", b)

    def test_a_snippets_files(self):
        # The guest's exit status stands beside its files; the end of its
        # other processes comes before the reader (a child still writing is
        # gone by then).
        b = self.run_ok({"snippet": {"language": "python", "code": (
            "import os, subprocess, sys\n"
            "open('chart.svg', 'w').write('<svg/>')\n"
            "subprocess.Popen(['sh', '-c', 'sleep 0.3; echo late > late.txt'])\n"
            "print('drawn')\n"
            "sys.exit(3)\n"), "collect": ["*.svg", "*.txt"]}})
        self.assertEqual((b["exit_code"], b["stdout"]), (3, "drawn\n"), b)
        self.assertEqual([(a["path"], a["content"]) for a in b["artifacts"]],
                         [("chart.svg", "<svg/>")], b)
        b = self.run_ok({"snippet": {"language": "javascript", "code": (
            "require('fs').writeFileSync('out.json', JSON.stringify({n: 1}));"
            "console.log('ok')"), "collect": ["out.json"]}})
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "ok\n"), b)
        self.assertEqual([(a["path"], a["content"]) for a in b["artifacts"]],
                         [("out.json", '{"n":1}')], b)
        # A guest killed (SIGKILL: its status is the engine's word) or out of
        # its time brings none; the daemon waits for neither.
        b = self.run_ok({"snippet": {"language": "python", "code": (
            "import os, signal\nopen('a.txt', 'w').write('1')\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n"), "collect": ["*"]}})
        self.assertEqual(b["exit_code"], 137, b)
        self.assertNotIn("artifacts", b)
        b = self.run_ok({"snippet": {"language": "python", "code": (
            "import time\nopen('a.txt', 'w').write('1')\ntime.sleep(30)\n"),
            "collect": ["*"]}, "timeout_ms": 1500})
        self.assertTrue(b["timed_out"], b)
        self.assertNotIn("artifacts", b)
        self.assertLess(b["duration_ms"], 15000, b)

    def test_run_stream_ends_with_them(self):
        from plimsoll_test import streaming
        st = streaming.call(self.d, "RunStream", {"snippet": {
            "language": "python", "code": "open('a.txt', 'w').write('A')\nprint('x')",
            "collect": ["a.txt"]}})
        self.assertEqual((st.status, st.end, st.leftover), (200, {}, b""), st.frames[-1:])
        self.assertEqual(st.joined("stdout"), b"x\n")
        self.assertEqual([(a["path"], a["content"]) for a in st.result["artifacts"]],
                         [("a.txt", "A")])
        self.assertEqual(st.result["record"]["response_sha256"],
                         sha({k: v for k, v in st.result.items() if k != "record"}))

    def test_describe_and_explain_say_so(self):
        d = self.d.rpc("Describe", {})[1]
        self.assertEqual(d["operations"]["artifacts"], {"project": True, "snippet": True})
        self.assertEqual((d["limits"]["collect_files"], d["limits"]["collect_bytes"]), (6, 8192))
        status, t = self.d.rpc("Explain", {"run": project("print(1)", ["*.csv"])})
        self.assertEqual(status, 200, t)
        self.assertTrue(t["dispatch"], t)

    # ---- what a guest can set up against the reader ------------------------
    def test_links_fifos_sockets_and_odd_names(self):
        b = self.run_ok(project(
            "import os, socket, stat\n"
            "os.makedirs('out/real')\n"
            "open('out/real/kept.txt', 'w').write('inside')\n"
            "os.symlink('/etc/passwd', 'out/passwd.txt')\n"
            "os.symlink('/etc', 'out/etc')\n"
            "os.symlink('/', 'out/root')\n"
            "os.symlink('loop.txt', 'out/loop.txt')\n"
            "os.mkfifo('out/fifo.txt')\n"
            "s = socket.socket(socket.AF_UNIX); s.bind('out/sock.txt')\n"
            "open(b'out/\\xff\\xfe.txt', 'wb').write(b'odd')\n"
            "open('out/secret.txt', 'w').write('no'); os.chmod('out/secret.txt', 0)\n"
            "try:\n"
            "    os.link('/etc/hostname', 'out/hard.txt')\n"
            "    print('linked')\n"
            "except OSError as e:\n"
            "    print('link refused', e.errno)\n"
            "os.link('out/real/kept.txt', 'out/hard2.txt')\n",
            ["out/**", "out/**/*.txt", "**/passwd"], timeout_ms=20000))
        self.assertEqual(b["exit_code"], 0, b)
        # /etc and / are other filesystems: a hard link across is refused.
        self.assertTrue(b["steps"][0]["stdout"].startswith("link refused"), b)
        text = json.dumps(b)
        self.assertNotIn("root:", text)
        got = {}
        for a in b["artifacts"]:
            path = base64.b64decode(a["path_base64"]) if "path_base64" in a else a["path"]
            got[path] = self.content(a)
        # Regular files only, reached without a symlink; the unreadable one
        # is left out (the reader runs as the calls' user).
        self.assertEqual(got, {"out/hard2.txt": b"inside", "out/real/kept.txt": b"inside",
                               b"out/\xff\xfe.txt": b"odd"})
        odd = [a for a in b["artifacts"] if "path_base64" in a][0]
        self.assertEqual(odd["path"], "out/\ufffd\ufffd.txt")
        self.assertFalse(b["artifacts_truncated"])

    def test_a_deep_or_wide_tree_is_bounded(self):
        # 40 levels of directories: the walk goes 16 deep, and says nothing
        # of what is further.
        b = self.run_ok(project("import os\n"
                                "p = '/'.join('d' for _ in range(40))\n"
                                "os.makedirs(p)\n"
                                "for i in (5, 15, 16, 30):\n"
                                "    open('/'.join('d' for _ in range(i)) + '/f.txt', 'w')"
                                ".write(str(i))\n",
                                ["**/f.txt"]))
        # Depth first: "d" sorts before "f.txt".
        self.assertEqual([a["content"] for a in b["artifacts"]], ["15", "5"], b)

    def test_a_session_project_and_a_name_swapped_under_the_reader(self):
        status, o = self.d.rpc("OpenSession", {"languages": ["python"]})
        self.assertEqual(status, 200, o)
        sid = o["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        # A kept interpreter's thread swaps out/f.txt between a file and a
        # symlink to /etc/passwd as fast as it can while project calls collect.
        status, c = self.d.rpc("RunCell", {"session_id": sid, "cell": {
            "language": "python", "code": (
                "import os, threading\n"
                "os.makedirs('out')\n"
                "open('real', 'w').write('INSIDE')\n"
                "os.symlink('/etc/passwd', 'link')\n"
                "def flip():\n"
                "    while True:\n"
                "        for a in ('real', 'link'):\n"
                "            try:\n"
                "                os.rename(a, 'out/f.txt'); os.rename('out/f.txt', a)\n"
                "            except OSError:\n"
                "                pass\n"
                "threading.Thread(target=flip, daemon=True).start()\n")}})
        self.assertEqual(status, 200, c)
        seen = 0
        for _ in range(12):
            run = (project("open('made.txt', 'w').write('step')", ["out/*", "made.txt"])
                   if _ % 2 else
                   {"snippet": {"language": "python", "code": "open('made.txt', 'w').write('step')",
                                "collect": ["out/*", "made.txt"]}})
            status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
            self.assertEqual(status, 200, b)
            self.assertNotIn("root:", json.dumps(b))
            for a in b["artifacts"]:
                if a["path"] == "out/f.txt":
                    self.assertEqual(a["content"], "INSIDE", a)
                    seen += 1
            self.assertIn(("made.txt", "step"), [(a["path"], a["content"])
                                                 for a in b["artifacts"]])
        # The session goes on, and its chain holds every call.
        g = self.d.rpc("GetSession", {"session_id": sid})[1]
        self.assertEqual((g["state"], g["calls"]), ("ready", 13), g)

    def test_over_grpc_from_a_generated_client(self):
        """Debian's python3-grpcio, messages protoc made from proto/ at test
        time: the artifacts' bytes as JSON gives them."""
        conformance = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                   "conformance")
        sys.path.insert(0, conformance)
        from test_grpcio import DEBIAN_PYTHON, generate
        gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-")
        self.addCleanup(shutil.rmtree, gen, True)
        generate(gen)
        msg = project("open('b.bin', 'wb').write(b'\\xff\\x00')\nopen('t.txt', 'w').write('t')",
                      ["*"])
        cfg = {"target": "127.0.0.1:%d" % self.d.port, "gen": gen, "tls": None,
               "calls": [{"method": "Run", "request": msg, "key": self.d.keys["alice"]}]}
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(conformance, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout.splitlines()[0])["ok"]
        got = [(a["path"], a.get("content"), a.get("content_base64")) for a in r["artifacts"]]
        self.assertEqual(got, [("b.bin", "\ufffd\x00", base64.b64encode(b"\xff\x00").decode()),
                               ("t.txt", "t", None)])


    # ---- a cell's display outputs -------------------------------------------
    def session(self):
        status, o = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, o)
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": o["session_id"]})
        return o["session_id"]

    def cell(self, sid, lang, code, **extra):
        status, b = self.d.rpc("RunCell", dict(extra, session_id=sid,
                                               cell={"language": lang, "code": code}))
        self.assertEqual(status, 200, b)
        return b

    def test_display_outputs_of_python_and_javascript_cells(self):
        sid = self.session()
        b = self.cell(sid, "python",
                      "class T:\n"
                      "    def _repr_html_(self): return '<i>t</i>'\n"
                      "    def __repr__(self): return 'T'\n"
                      "print('before')\ndisplay(T())\nprint('after')\nT()")
        bundle = {"text/html": "<i>t</i>", "text/plain": "T"}
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "before\nafter\n"), b)
        self.assertEqual(b["outputs"], [{"kind": "display", "data": bundle},
                                        {"kind": "result", "data": bundle}])
        self.assertNotIn("outputs_dropped", b)
        self.assertEqual(b["record"]["response_sha256"],
                         sha({k: v for k, v in b.items() if k != "record"}))
        js = self.cell(sid, "javascript",
                       "display({a: 1}); display(Buffer.from([0, 255]), 'application/octet-stream');"
                       "display('<b>b</b>', 'text/html'); 6 * 7")
        self.assertEqual((js["exit_code"], js["stdout"]), (0, "42\n"), js)
        self.assertEqual([o["data"] for o in js["outputs"]],
                         [{"application/json": '{"a":1}'},
                          {"application/octet-stream": base64.b64encode(b"\0\xff").decode()},
                          {"text/html": "<b>b</b>"}])
        # A cell that shows nothing says nothing of outputs.
        plain = self.cell(sid, "python", "[1, 2]")
        self.assertEqual(plain["stdout"], "[1, 2]\n", plain)
        self.assertNotIn("outputs", plain)

    def test_display_bounds_drop_whole_outputs(self):
        sid = self.session()
        # SANDBOX_DISPLAY_OUTPUTS=4: the fifth and sixth are left out.
        b = self.cell(sid, "python",
                      "for i in range(6):\n    display({'text/plain': str(i)}, raw=True)")
        self.assertEqual([o["data"]["text/plain"] for o in b["outputs"]], ["0", "1", "2", "3"])
        self.assertEqual(b["outputs_dropped"], 2, b)
        # SANDBOX_DISPLAY_OUTPUT_BYTES=65536: a 70000-byte image (93 KB of
        # base64) is left out whole, the small one after it comes.
        b = self.cell(sid, "python",
                      "display({'image/png': bytes(range(256)) * 274}, raw=True)\n"
                      "display({'text/plain': 'small'}, raw=True)")
        self.assertEqual([o["data"] for o in b["outputs"]], [{"text/plain": "small"}], b)
        self.assertEqual(b["outputs_dropped"], 1, b)
        # SANDBOX_DISPLAY_BYTES=131072: two 60 KB outputs fit, the third not.
        blob = bytes(range(256)) * 175
        b = self.cell(sid, "python",
                      "for i in range(3):\n"
                      "    display({'application/octet-stream': bytes(range(256)) * 175}, raw=True)")
        self.assertEqual(len(b["outputs"]), 2, b["outputs_dropped"])
        self.assertEqual(b["outputs_dropped"], 1)
        for o in b["outputs"]:
            self.assertEqual(base64.b64decode(o["data"]["application/octet-stream"]), blob)

    def test_frames_a_guest_forges_on_its_uplink(self):
        """The cell's code holds the interpreter's uplink (fd 3): what it
        writes there is checked like the agent's own frames."""
        sid = self.session()
        b = self.cell(sid, "python",
                      "import os, struct\n"
                      "def f(b): os.write(3, b'D' + struct.pack('>I', len(b)) + b)\n"
                      "f(b'{\"kind\":\"display\",\"data\":{\"image/png\":\"!!\"}}')\n"
                      "f(b'not json at all')\n"
                      "f(b'{\"kind\":\"display\",\"data\":{\"text/plain\":\"a\\\\u0000\"}}')\n"
                      "f(b'{\"kind\":\"display\",\"data\":{\"text/plain\":\"forged, well formed\"}}')\n"
                      "print('on')")
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "on\n"), b)
        self.assertEqual(b["outputs"], [{"kind": "display",
                                         "data": {"text/plain": "forged, well formed"}}])
        self.assertEqual(b["outputs_dropped"], 3)
        # A frame that says 2 GiB and never comes: the cell's own deadline
        # ends it (and its interpreter); nothing was kept for it.
        t = self.cell(sid, "python",
                      "import os, struct\nos.write(3, b'D' + struct.pack('>I', 1 << 31))\n"
                      "import time\ntime.sleep(30)", timeout_ms=3000)
        self.assertEqual((t["exit_code"], t["timed_out"]), (124, True), t)
        self.assertNotIn("outputs", t)
        n = self.cell(sid, "python", "print(1)")
        self.assertEqual((n["stdout"], n["interpreter_started"]), ("1\n", True), n)

    def test_run_cell_stream_sends_them_as_they_come(self):
        from plimsoll_test import streaming
        sid = self.session()
        st = streaming.call(self.d, "RunCellStream", {"session_id": sid, "cell": {
            "language": "python",
            "code": "import time\nprint('a', flush=True)\n"
                    "display({'text/plain': 'd1'}, raw=True)\ntime.sleep(0.2)\nprint('b')"}})
        self.assertEqual((st.status, st.end, st.leftover), (200, {}, b""), st.frames[-1:])
        kinds = [("display" if "display" in c else "out") for c in st.chunks]
        self.assertIn("display", kinds)
        at = kinds.index("display")
        self.assertEqual(st.chunks[at]["display"], {"kind": "display",
                                                    "data": {"text/plain": "d1"}})
        before = b"".join(base64.b64decode(c.get("stdout", "")) for c in st.chunks[:at])
        self.assertEqual(before, b"a\n")
        self.assertEqual(st.joined("stdout"), b"a\nb\n")
        self.assertEqual(st.result["outputs"], [st.chunks[at]["display"]])

    def test_display_over_grpc_from_a_generated_client(self):
        """Debian's python3-grpcio with messages generated from proto/: the
        outputs' map and the stream's display chunk in protobuf."""
        conformance = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                   "conformance")
        sys.path.insert(0, conformance)
        from test_grpcio import DEBIAN_PYTHON, generate
        gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-")
        self.addCleanup(shutil.rmtree, gen, True)
        generate(gen)
        sid = self.session()
        cell = {"session_id": sid, "cell": {"language": "python", "code":
                "display({'image/png': b'\\x89PNG', 'text/plain': 'p'}, raw=True)"}}
        key = self.d.keys["alice"]
        cfg = {"target": "127.0.0.1:%d" % self.d.port, "gen": gen, "tls": None,
               "calls": [{"method": "RunCell", "request": cell, "key": key},
                         {"method": "RunCellStream", "request": cell, "key": key}]}
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(conformance, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        want = {"kind": "display", "data": {"image/png": base64.b64encode(b"\x89PNG").decode(),
                                            "text/plain": "p"}}
        self.assertEqual(lines[0]["ok"]["outputs"], [want], lines[0])
        stream = lines[1]["stream"]
        self.assertEqual([m["output"]["display"] for m in stream if "display" in
                          m.get("output", {})], [want], stream)
        self.assertEqual(stream[-1]["result"]["outputs"], [want])

    def test_describe_states_the_display_bounds(self):
        lim = self.d.rpc("Describe", {})[1]["limits"]
        self.assertEqual((lim["display_outputs"], lim["display_output_bytes"],
                          lim["display_bytes"]), (4, 65536, 131072), lim)


ArtifactsRunc, ArtifactsRunsc = per_runtime(Artifacts)


if __name__ == "__main__":
    unittest.main()
