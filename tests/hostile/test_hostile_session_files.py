# SPDX-License-Identifier: Apache-2.0
"""A session's file calls (WriteFiles, ReadFile, ListFiles) through the real
daemon and the real docker engine, under runc and under runsc: what they
do, their bounds and typed refusals, their records in the session's chain,
and what guest code can set up against them: symlinks out, in loops and
swapped in while the daemon reads, FIFOs, sockets, devices, hard links,
huge sparse files, names that are not UTF-8, files the calls' user may not
read (docs/sessions.md, "Session files")."""
import base64
import hashlib
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
from plimsoll_test.harness import CLI, error_info  # noqa: E402
from plimsoll_test.payloads import py, sha  # noqa: E402


class SessionFiles(DockerDaemon):
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "sfiles-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "3", "SANDBOX_SESSION_DISK_MB": "8",
                "SANDBOX_SESSION_IDLE": "600", "SANDBOX_DOCKER_WARM": "0",
                "SANDBOX_FILE_READ_BYTES": "65536", "SANDBOX_FILE_LIST_ENTRIES": "40"}
    START_TIMEOUT = 240

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left

    # ---- helpers ----------------------------------------------------------
    def open(self, principal="alice", languages=None):
        status, body = self.d.rpc("OpenSession", {"languages": languages or []},
                                  principal=principal)
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid}, principal=principal)
        return sid

    def ok(self, method, msg, principal="alice"):
        status, body = self.d.rpc(method, msg, principal=principal)
        self.assertEqual(status, 200, body)
        return body

    def refused(self, method, msg, reason, principal="alice"):
        status, body = self.d.rpc(method, msg, principal=principal)
        self.assertNotEqual(status, 200, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason, body)
        return body

    def guest(self, sid, code):
        b = self.ok("RunInSession", {"session_id": sid, "run": py(code)})
        self.assertEqual(b["exit_code"], 0, b)
        return b["stdout"]

    def read(self, sid, path, **kw):
        return self.ok("ReadFile", dict(kw, session_id=sid, path=path))

    def still_usable(self, sid):
        self.assertEqual(self.guest(sid, "print('alive')"), "alive\n")

    # ---- what they do -----------------------------------------------------
    def test_write_read_list_and_the_chain(self):
        sid = self.open()
        binary = bytes(range(256)) * 4
        w = {"files": [{"path": "notes/a.txt", "content": "hello\n"},
                       {"path": "bin/data", "content_base64": base64.b64encode(binary).decode()}]}
        b = self.ok("WriteFiles", dict(w, session_id=sid))
        self.assertEqual((b["files"], b["bytes"]), (2, 6 + 1024), b)
        rec = b["record"]
        self.assertEqual(rec["previous_digest"], "")
        self.assertEqual(rec["request_sha256"], sha(w))  # the message without session_id
        self.assertEqual(rec["response_sha256"], sha({k: v for k, v in b.items()
                                                      if k != "record"}))
        # Guest code sees what was written, as the calls' user.
        out = self.guest(sid, "import os\nprint(open('notes/a.txt').read(), end='')\n"
                              "print(len(open('bin/data','rb').read()), os.stat('bin/data').st_uid"
                              " == os.getuid())")
        self.assertEqual(out, "hello\n1024 True\n")
        r = self.read(sid, "notes/a.txt")
        self.assertEqual((r["content"], r["size"], r["length"], r["more"], r["offset"]),
                         ("hello\n", 6, 6, False, 0), r)
        self.assertNotIn("content_base64", r)
        r = self.read(sid, "bin/data", offset=1000, limit=16)
        self.assertEqual((r["size"], r["length"], r["more"]), (1024, 16, True), r)
        self.assertEqual(base64.b64decode(r["content_base64"]), binary[1000:1016])
        r = self.read(sid, "bin/data", offset=1020)
        self.assertEqual((base64.b64decode(r["content_base64"]), r["more"]),
                         (binary[1020:], False))
        r = self.read(sid, "bin/data", offset=5000)
        self.assertEqual((r["length"], r["content"], r["more"]), (0, "", False))
        ls = self.ok("ListFiles", {"session_id": sid})
        self.assertEqual([(e["path"], e["type"]) for e in ls["entries"]],
                         [("bin", "directory"), ("notes", "directory")])
        self.assertFalse(ls["truncated"])
        ls = self.ok("ListFiles", {"session_id": sid, "depth": 2})
        got = {e["path"]: e for e in ls["entries"]}
        self.assertEqual(sorted(got), ["bin", "bin/data", "notes", "notes/a.txt"])
        self.assertEqual((got["bin/data"]["type"], got["bin/data"]["size"],
                          got["bin/data"]["mode"]), ("file", 1024, 0o644))
        self.assertRegex(got["notes/a.txt"]["modified_at"], r"^\d{4}-\d\d-\d\dT.*Z$")
        ls = self.ok("ListFiles", {"session_id": sid, "path": "notes"})
        self.assertEqual([e["path"] for e in ls["entries"]], ["notes/a.txt"])
        # Every answer joined the chain, in order, and the next call's names it.
        c = self.ok("RunCell", {"session_id": sid, "cell": {"language": "python", "code": "1"}})
        self.assertEqual(c["record"]["previous_digest"], ls["record"]["digest"])
        g = self.ok("GetSession", {"session_id": sid})
        self.assertEqual((g["calls"], g["previous_digest"]), (10, c["record"]["digest"]), g)

    def test_writes_replace_and_make_directories(self):
        sid = self.open()
        self.ok("WriteFiles", {"session_id": sid, "files": [{"path": "x", "content": "one"}]})
        self.ok("WriteFiles", {"session_id": sid, "files": [{"path": "x", "content": "2"},
                                                            {"path": "d/e/f", "content": ""}]})
        self.assertEqual(self.guest(sid, "print(open('x').read(), open('d/e/f').read() == '')"),
                         "2 True\n")

    def test_bounds_refused_before_dispatch(self):
        sid = self.open()
        for path in ("", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "x\u0000y",
                     "a" * 257, "a\nb"):
            body = self.refused("ReadFile", {"session_id": sid, "path": path}, "INVALID_REQUEST")
            self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false")
        for path in ("/", "..", "../work", "/work"):
            self.refused("ListFiles", {"session_id": sid, "path": path}, "INVALID_REQUEST")
        body = self.refused("ReadFile", {"session_id": sid, "path": "a", "limit": 65537},
                            "INVALID_REQUEST")
        self.assertIn("SANDBOX_FILE_READ_BYTES", body["message"])
        self.refused("ReadFile", {"session_id": sid, "path": "a", "offset": -1},
                     "INVALID_REQUEST")
        self.refused("ListFiles", {"session_id": sid, "depth": 17}, "INVALID_REQUEST")
        self.refused("WriteFiles", {"session_id": sid, "files": []}, "INVALID_REQUEST")
        self.refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "f%d" % i, "content": ""} for i in range(257)]}, "INVALID_REQUEST")
        self.refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "big", "content": "x" * ((4 << 20) + 1)}]}, "INVALID_REQUEST")
        self.refused("WriteFiles", {"session_id": sid, "files": [{"path": "a", "content": "1"}],
                                    "extra": 1}, "INVALID_REQUEST")
        self.refused("ReadFile", {"session_id": sid, "path": "nothing-here"}, "NOT_FOUND")
        self.still_usable(sid)
        g = self.ok("GetSession", {"session_id": sid})
        self.assertEqual(g["calls"], 1)  # no refusal made a record

    def test_a_listing_is_bounded(self):
        sid = self.open()
        self.guest(sid, "import os\nfor i in range(60):\n"
                        "    os.makedirs('many/d%02d' % i)\n")
        ls = self.ok("ListFiles", {"session_id": sid, "path": "many"})
        self.assertEqual((len(ls["entries"]), ls["truncated"]), (40, True))
        self.assertEqual(ls["entries"][0]["path"], "many/d00")
        ls = self.ok("ListFiles", {"session_id": sid, "path": "many/d01"})
        self.assertEqual((ls["entries"], ls["truncated"]), ([], False))
        # depth 16 of a deep tree stops at 16 levels
        self.guest(sid, "import os\nos.makedirs('/'.join(['deep'] + ['d'] * 20))")
        ls = self.ok("ListFiles", {"session_id": sid, "path": "deep", "depth": 16})
        self.assertEqual(max(e["path"].count("/") for e in ls["entries"]), 16)

    def test_writes_past_the_disk_budget_are_refused(self):
        sid = self.open()
        four = base64.b64encode(os.urandom(4 << 20)).decode()
        self.ok("WriteFiles", {"session_id": sid, "files": [{"path": "a", "content_base64": four}]})
        self.ok("GetSession", {"session_id": sid})
        self.guest(sid, "print(1)")  # its cleanup measured the 4 MiB
        g = self.ok("GetSession", {"session_id": sid})
        self.assertGreaterEqual(g["disk_used_kib"], 4096, g)
        body = self.refused("WriteFiles", {"session_id": sid, "files": [
            {"path": "b", "content_base64": four}]}, "INVALID_REQUEST")
        self.assertIn("SANDBOX_SESSION_DISK_MB", body["message"])
        self.assertEqual(self.guest(sid, "import os\nprint(os.path.exists('b'))"), "False\n")

    def test_another_callers_session_answers_as_an_unknown_one(self):
        sid = self.open()
        self.ok("WriteFiles", {"session_id": sid, "files": [{"path": "s", "content": "secret"}]})
        for method, extra in (("ReadFile", {"path": "s"}), ("ListFiles", {}),
                              ("WriteFiles", {"files": [{"path": "s", "content": "x"}]})):
            h = {"Content-Type": "application/json",
                 "Authorization": "Bearer " + self.d.keys["bob"]}
            theirs = self.d.request("POST", "/plimsoll.v1.SandboxService/" + method,
                                    json.dumps(dict(extra, session_id=sid)).encode(), h)[::2]
            unknown = self.d.request("POST", "/plimsoll.v1.SandboxService/" + method,
                                     json.dumps(dict(extra, session_id="0" * 64)).encode(),
                                     h)[::2]
            self.assertEqual(theirs, unknown)
            self.assertEqual(theirs[0], 404)
        self.assertEqual(self.read(sid, "s")["content"], "secret")

    def test_explain_covers_the_file_calls(self):
        sid = self.open()
        b = self.ok("Explain", {"session_id": sid, "read_file": {"path": "a"}})
        self.assertTrue(b["dispatch"], b)
        self.assertEqual([c["check"] for c in b["checks"]][-1], "admission")
        b = self.ok("Explain", {"session_id": sid, "list_files": {"depth": 99}})
        self.assertFalse(b["dispatch"])
        self.assertEqual(b["checks"][0]["refusal"]["reason"], "INVALID_REQUEST")
        b = self.ok("Explain", {"session_id": "0" * 64, "write_files": {"files": [
            {"path": "a", "content": "1"}]}})
        self.assertEqual(b["checks"][-1]["refusal"]["reason"], "NOT_FOUND")
        self.refused("Explain", {"session_id": sid, "read_file": {"path": "a",
                                                                  "session_id": sid}},
                     "INVALID_REQUEST")
        self.refused("Explain", {"read_file": {"path": "a"}}, "INVALID_REQUEST")
        self.refused("Explain", {"session_id": sid, "read_file": {"path": "a"},
                                 "list_files": {}}, "INVALID_REQUEST")

    def test_describe_says_so(self):
        d = self.ok("Describe", {})
        self.assertTrue(d["operations"]["files"]["supported"], d)
        self.assertEqual((d["limits"]["file_read_bytes"], d["limits"]["file_list_entries"]),
                         (65536, 40))

    def test_the_calls_over_grpc_from_a_generated_client(self):
        """Debian's python3-grpcio, messages protoc made from proto/ at test
        time: the same answers as JSON gives, bytes included."""
        conformance = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                   "conformance")
        sys.path.insert(0, conformance)
        from test_grpcio import DEBIAN_PYTHON, generate
        gen = tempfile.mkdtemp(prefix="plimsoll-grpcio-")
        self.addCleanup(shutil.rmtree, gen, True)
        generate(gen)
        sid = self.open()
        files = [{"path": "g/t.txt", "content": "text"},
                 {"path": "g/b", "content_base64": base64.b64encode(b"\xff\x00").decode()}]
        cfg = {"target": "127.0.0.1:%d" % self.d.port, "gen": gen, "tls": None, "calls": [
            {"method": "WriteFiles", "request": {"session_id": sid, "files": files}},
            {"method": "ReadFile", "request": {"session_id": sid, "path": "g/b"}},
            {"method": "ListFiles", "request": {"session_id": sid, "path": "g"}},
            {"method": "ReadFile", "request": {"session_id": sid, "path": "g/none"}}]}
        for c in cfg["calls"]:
            c["key"] = self.d.keys["alice"]
        p = subprocess.run([DEBIAN_PYTHON, os.path.join(conformance, "grpcio_driver.py")],
                           input=json.dumps(cfg), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        w, r, ls, missing = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual((w["ok"]["files"], w["ok"]["bytes"]), (2, 6), w)
        self.assertIn("ok", r, r)
        self.assertEqual(base64.b64decode(r["ok"]["content_base64"]), b"\xff\x00")
        self.assertEqual((r["ok"]["size"], r["ok"]["length"]), (2, 2))
        self.assertEqual([e["path"] for e in ls["ok"]["entries"]], ["g/b", "g/t.txt"])
        self.assertEqual(missing["error"]["code"], "not_found", missing)
        # The chain over gRPC is the same chain.
        self.assertEqual(r["ok"]["record"]["previous_digest"], w["ok"]["record"]["digest"])
        self.assertEqual(ls["ok"]["record"]["previous_digest"], r["ok"]["record"]["digest"])

    def test_the_cli_reads_and_writes_files(self):
        sid = self.open()

        def cli(*args, principal="alice"):
            p = subprocess.run([CLI] + list(args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=120,
                               env={"PATH": os.environ.get("PATH", ""),
                                    "PLIMSOLL_URL": "http://127.0.0.1:%d" % self.d.port,
                                    "PLIMSOLL_KEY": self.d.keys[principal]})
            return p.returncode, p.stdout, p.stderr.decode()

        tmp = tempfile.mkdtemp(prefix="plimsoll-cli-")
        self.addCleanup(shutil.rmtree, tmp, True)
        data = bytes(range(256)) * 100 + b"\xff\xfe"
        with open(os.path.join(tmp, "in.bin"), "wb") as f:
            f.write(data)
        code, _, err = cli("files", "put", sid, os.path.join(tmp, "in.bin"), "d/in.bin")
        self.assertEqual(code, 0, err)
        # 200 KB the guest wrote come back page by page (65536 bytes a page here).
        self.guest(sid, "open('d/big', 'wb').write(bytes(range(251)) * 800)")
        code, out, err = cli("files", "get", sid, "d/big")
        self.assertEqual((code, out), (0, bytes(range(251)) * 800), err)
        code, out, err = cli("files", "get", sid, "d/in.bin", "-o", os.path.join(tmp, "back"))
        self.assertEqual((code, out), (0, b""), err)
        with open(os.path.join(tmp, "back"), "rb") as f:
            self.assertEqual(f.read(), data)
        code, out, err = cli("files", "ls", sid, "d")
        self.assertEqual(code, 0, err)
        self.assertEqual([l.split() for l in out.decode().splitlines()],
                         [["file", "200800", "0644", "d/big"],
                          ["file", str(len(data)), "0644", "d/in.bin"]])
        code, out, err = cli("files", "ls", sid, "--depth", "2", "--json")
        self.assertEqual(len(json.loads(out)["entries"]), 3)
        code, out, err = cli("files", "get", sid, "d/none")
        self.assertEqual((code, out), (3, b""))
        self.assertIn("refused: NOT_FOUND", err)
        code, _, err = cli("files", "get", sid, "d/big", principal="bob")
        self.assertEqual(code, 3)
        self.assertIn("no such session", err)
        for args in (("files", "get", "xyz", "a"), ("files", "ls"), ("files", "put", sid, "a"),
                     ("files", "ls", sid, "--depth", "17"), ("files", "frob", sid),
                     ("files", "put", sid, os.path.join(tmp, "missing"), "x")):
            self.assertEqual(cli(*args)[0], 2, args)
        # The session's chain is the daemon's: the CLI's calls are in it.
        g = self.ok("GetSession", {"session_id": sid})
        self.assertEqual(g["calls"], 9, g)  # put, run, 4 pages, 1 page, 2 listings

    def test_the_cli_puts_a_directory(self):
        """files put of a directory: the tree under PATH/<its name>, in as
        many WriteFiles calls as 256 files and 4 MiB a call need; a symlink
        in it is refused before anything is sent."""
        sid = self.open()
        env = {"PATH": os.environ.get("PATH", ""),
               "PLIMSOLL_URL": "http://127.0.0.1:%d" % self.d.port,
               "PLIMSOLL_KEY": self.d.keys["alice"]}

        def cli(*args):
            p = subprocess.run([CLI] + list(args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=120, env=env)
            return p.returncode, p.stdout, p.stderr.decode()

        tmp = tempfile.mkdtemp(prefix="plimsoll-cli-dir-")
        self.addCleanup(shutil.rmtree, tmp, True)
        proj = os.path.join(tmp, "proj")
        os.makedirs(os.path.join(proj, "big"))
        os.makedirs(os.path.join(proj, "many"))
        big = bytes(range(256)) * (2100 * 1024 // 256)  # two of them pass 4 MiB
        for name in ("a.bin", "b.bin"):
            with open(os.path.join(proj, "big", name), "wb") as f:
                f.write(big)
        for i in range(300):
            with open(os.path.join(proj, "many", "%03d" % i), "w") as f:
                f.write("%03d" % i)
        with open(os.path.join(proj, "top.txt"), "w") as f:
            f.write("top")
        calls = self.ok("GetSession", {"session_id": sid})["calls"]
        code, _, err = cli("files", "put", sid, proj, "in")
        self.assertEqual(code, 0, err)
        # a.bin; b.bin and 255 of many; the rest: three calls
        self.assertEqual(self.ok("GetSession", {"session_id": sid})["calls"], calls + 3)
        # (more files than this daemon's ListFiles gives, and its output
        # keeps: the guest lists them and prints their digest)
        want = ["in/proj/top.txt", "in/proj/big/a.bin", "in/proj/big/b.bin"] + [
            "in/proj/many/%03d" % i for i in range(300)]
        got = self.guest(sid, "import hashlib, os\n"
                              "ps = [os.path.join(r, n) for r, _, ns in sorted(os.walk('in'))"
                              " for n in sorted(ns)]\n"
                              "print(len(ps), hashlib.sha256('\\n'.join(ps).encode()).hexdigest())\n")
        self.assertEqual(got, "%d %s\n" % (len(want),
                                            hashlib.sha256("\n".join(want).encode()).hexdigest()))
        self.assertEqual(cli("files", "get", sid, "in/proj/big/b.bin")[1], big)
        self.assertEqual(cli("files", "get", sid, "in/proj/many/299")[1], b"299")
        # "." is the work directory
        small = os.path.join(tmp, "small")
        os.makedirs(small)
        with open(os.path.join(small, "s.txt"), "w") as f:
            f.write("s")
        self.assertEqual(cli("files", "put", sid, small, ".")[0], 0)
        self.assertEqual(cli("files", "get", sid, "small/s.txt")[1], b"s")
        # a symlink anywhere in the tree: refused, nothing sent
        os.symlink("/etc/passwd", os.path.join(proj, "many", "zz-link"))
        calls = self.ok("GetSession", {"session_id": sid})["calls"]
        code, _, err = cli("files", "put", sid, proj, "again")
        self.assertEqual(code, 2, err)
        self.assertIn("symlink", err)
        self.assertIn("nothing was sent", err)
        self.assertEqual(self.ok("GetSession", {"session_id": sid})["calls"], calls)

    # ---- what guest code can set up ----------------------------------------
    def test_symlinks_are_never_followed(self):
        sid = self.open()
        self.guest(sid, "import os\nos.makedirs('real')\nopen('real/in.txt','w').write('in')\n"
                        "os.symlink('/etc/passwd', 'out')\nos.symlink('/', 'root')\n"
                        "os.symlink('real', 'inside')\nos.symlink('loop', 'loop')\n"
                        "os.symlink('b', 'a')\nos.symlink('a', 'b')\n"
                        "os.symlink('/tmp', 't')\nos.symlink('/dev/zero', 'zero')\n")
        for path in ("out", "root/etc/passwd", "inside/in.txt", "loop", "a", "a/x",
                     "t/anything", "zero"):
            body = self.refused("ReadFile", {"session_id": sid, "path": path}, "INVALID_REQUEST")
            self.assertIn("symlink", body["message"])
            self.assertNotIn("root:", json.dumps(body))
        for path in ("root", "inside", "loop", "t"):
            self.refused("ListFiles", {"session_id": sid, "path": path}, "INVALID_REQUEST")
        ls = self.ok("ListFiles", {"session_id": sid, "depth": 3})
        types = {e["path"]: e["type"] for e in ls["entries"]}
        self.assertEqual(types["root"], "symlink")
        self.assertEqual(types["real/in.txt"], "file")
        self.assertFalse([p for p in types if p.startswith(("root/", "inside/", "t/"))], types)
        # A write through one is refused and lands nowhere.
        for path in ("t/evil", "inside/new", "out"):
            self.refused("WriteFiles", {"session_id": sid, "files": [
                {"path": path, "content": "x"}]}, "INVALID_REQUEST")
        self.assertEqual(self.guest(sid, "import os\nprint(os.path.exists('/tmp/evil'), "
                                         "os.path.exists('real/new'), "
                                         "open('/etc/passwd').read().startswith('root:'))"),
                         "False False True\n")
        self.assertEqual(self.read(sid, "real/in.txt")["content"], "in")

    def test_fifos_sockets_directories_and_devices(self):
        sid = self.open()
        out = self.guest(sid, "import os, socket\nos.mkfifo('fifo')\nos.makedirs('dir')\n"
                              "s = socket.socket(socket.AF_UNIX)\ns.bind('sock')\n"
                              "try:\n    os.mknod('dev', 0o600 | 0o020000, os.makedev(1, 5))\n"
                              "    print('made a device')\n"
                              "except OSError as e:\n    print('no device', e.errno)\n")
        # runc: no CAP_MKNOD; gVisor makes the node in its own tmpfs (its
        # own device, not the host's): either way the calls never read one.
        made = out.startswith("made a device")
        self.assertEqual(made, self.RUNTIME == "runsc", out)
        for path in ("fifo", "dir", "sock") + (("dev",) if made else ()):
            body = self.refused("ReadFile", {"session_id": sid, "path": path}, "INVALID_REQUEST")
            self.assertIn("not a regular file", body["message"])
        self.refused("ListFiles", {"session_id": sid, "path": "fifo"}, "INVALID_REQUEST")
        types = {e["path"]: e["type"] for e in self.ok("ListFiles", {"session_id": sid})["entries"]}
        self.assertEqual((types["fifo"], types["sock"], types["dir"], types.get("dev")),
                         ("fifo", "socket", "directory", "device" if made else None))
        self.still_usable(sid)

    def test_hard_links_cannot_reach_outside(self):
        sid = self.open()
        out = self.guest(sid, "import os, errno\nopen('mine', 'w').write('mine')\n"
                              "for src in ('/etc/passwd', '/tmp/x'):\n"
                              "    if src == '/tmp/x':\n        open(src, 'w').write('tmp')\n"
                              "    try:\n        os.link(src, os.path.basename(src))\n"
                              "        print('linked', src)\n"
                              "    except OSError as e:\n        print(errno.errorcode[e.errno])\n"
                              "os.link('mine', 'also')\n")
        # /work is a filesystem of its own: nothing outside can be linked in.
        self.assertEqual(len(out.split()), 2, out)
        for line in out.split():
            self.assertIn(line, ("EXDEV", "EPERM"), out)
        self.assertEqual(self.read(sid, "also")["content"], "mine")

    def test_huge_sparse_files(self):
        sid = self.open()
        self.guest(sid, "import os\nfor name, size in (('huge', 8 << 30), ('big', 3 << 30)):\n"
                        "    open(name, 'w').close()\n    os.truncate(name, size)\n")
        body = self.refused("ReadFile", {"session_id": sid, "path": "huge"}, "INVALID_REQUEST")
        self.assertIn("4294967295", body["message"])
        r = self.read(sid, "big", offset=(3 << 30) - 10)
        self.assertEqual((r["size"], r["content"], r["more"]), (3 << 30, "\x00" * 10, False))
        sizes = {e["path"]: e["size"] for e in self.ok("ListFiles", {"session_id": sid})["entries"]}
        self.assertEqual((sizes["huge"], sizes["big"]), (4294967295, 3 << 30))

    def test_names_that_are_not_utf8(self):
        sid = self.open()
        self.guest(sid, "import os\nopen(b'\\xff\\xfe.txt', 'w').write('x')\n"
                        "os.makedirs(b'd\\x80')\n")
        ls = self.ok("ListFiles", {"session_id": sid, "depth": 2})
        odd = sorted(base64.b64decode(e["path_base64"]) for e in ls["entries"]
                     if "path_base64" in e)
        self.assertEqual(odd, [b"d\x80", b"\xff\xfe.txt"])
        self.assertIn("\ufffd\ufffd.txt", [e["path"] for e in ls["entries"]])

    def test_a_file_the_calls_user_may_not_read(self):
        sid = self.open()
        self.guest(sid, "import os\nopen('closed', 'w').write('x')\nos.chmod('closed', 0)\n"
                        "os.makedirs('shut/in')\nos.chmod('shut', 0)\n")
        body = self.refused("ReadFile", {"session_id": sid, "path": "closed"}, "INVALID_REQUEST")
        self.assertIn("may not read", body["message"])
        self.refused("ListFiles", {"session_id": sid, "path": "shut"}, "INVALID_REQUEST")
        self.refused("ReadFile", {"session_id": sid, "path": "shut/in"}, "INVALID_REQUEST")
        self.still_usable(sid)

    def test_a_path_swapped_while_the_daemon_reads(self):
        """A kept interpreter's thread swaps a directory and a symlink to /etc
        under one name as fast as it can while ReadFile and ListFiles name
        it: every answer is the directory's or a refusal, never /etc's."""
        sid = self.open(languages=["python"])
        self.ok("RunCell", {"session_id": sid, "cell": {"language": "python", "code": (
            "import os, threading\n"
            "os.makedirs('dirA'); open('dirA/passwd', 'w').write('INSIDE')\n"
            "open('dirA/inside.txt', 'w').write('INSIDE')\n"
            "os.symlink('/etc', 'linkB')\n"
            "def flip():\n"
            "    while True:\n"
            "        for a in ('dirA', 'linkB'):\n"
            "            try:\n"
            "                os.rename(a, 'flip'); os.rename('flip', a)\n"
            "            except OSError:\n"
            "                pass\n"
            "threading.Thread(target=flip, daemon=True).start()\n")}})
        seen = {"read": 0, "refused": 0}
        for i in range(40):
            status, body = self.d.rpc("ReadFile", {"session_id": sid, "path": "flip/passwd"})
            self.assertNotIn("root:", json.dumps(body))
            if status == 200:
                self.assertEqual(body["content"], "INSIDE", body)
                seen["read"] += 1
            else:
                self.assertIn(error_info(body)[0]["reason"], ("INVALID_REQUEST", "NOT_FOUND"))
                seen["refused"] += 1
            status, body = self.d.rpc("ListFiles", {"session_id": sid, "path": "flip"})
            if status == 200:
                self.assertEqual(sorted(e["path"] for e in body["entries"]),
                                 ["flip/inside.txt", "flip/passwd"], body)
            status, body = self.d.rpc("ListFiles", {"session_id": sid, "depth": 3})
            self.assertEqual(status, 200, body)
            for e in body["entries"]:
                self.assertFalse(e["path"].startswith("linkB/"), e)
                if e["path"].startswith("flip/"):
                    self.assertIn(e["path"], ("flip/passwd", "flip/inside.txt"), e)
        self.assertEqual(sum(seen.values()), 40, seen)
        self.still_usable(sid)

    def test_file_calls_wait_their_turn(self):
        sid = self.open()
        t = threading.Thread(target=self.guest,
                             args=(sid, "import time\ntime.sleep(2)\nopen('late','w').write('1')"))
        t.start()
        self.addCleanup(t.join)
        # The run has its turn first (GetSession sees it in progress) ...
        for _ in range(200):
            if self.ok("GetSession", {"session_id": sid})["calls_waiting"] == 1:
                break
            time.sleep(0.05)
        r = self.read(sid, "late")  # ... and the read waits for it
        self.assertEqual(r["content"], "1")


SessionFilesRunc, SessionFilesRunsc = per_runtime(SessionFiles)


if __name__ == "__main__":
    unittest.main()
