# SPDX-License-Identifier: Apache-2.0
"""The session's two interpreter servers on the host, as a launch starts
them in the sandbox: the Node cell server (cell_server.js, `node -e`) and
the Python one (`python3 -c <agent> interp python`), each with the uplink on
fd 3 and the ready pipe on fd 4, assembled by scripts/build/embed exactly as
plimsolld embeds them.  The uplink's framing both ways: "C" code in; "O",
"E" output, "D" display outputs and "X" the status out
(docs/sessions.md)."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import base64
import json

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUEST = os.path.join(ROOT, "src", "providers", "docker", "guest")
LINES = os.path.join(ROOT, "src", "providers", "guest", "lines.py")  # first in each


def assemble(out, *inputs):
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build", "embed"), out, "x",
                    LINES] + list(inputs), check=True)
    with open(out) as f:
        return f.read()


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Server:
    """One interpreter server with its uplink."""

    def __init__(self, argv, work):
        self.sock, theirs = socket.socketpair()
        rr, rw = os.pipe()
        env = dict(os.environ, PLIMSOLL_WORK_DIR=work)
        env.pop("PLIMSOLL_SECCOMP_BPF", None)

        def fds():
            os.dup2(theirs.fileno(), 3)
            os.dup2(rw, 4)

        self.proc = subprocess.Popen(argv, env=env, cwd=work, preexec_fn=fds, pass_fds=(3, 4),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=True)
        theirs.close()
        os.close(rw)
        self.sock.settimeout(20)
        ready = os.read(rr, 1)
        os.close(rr)
        if ready != b"1":
            raise AssertionError("the server did not say it was ready")

    def cell(self, code):
        """Send one cell; return (stdout, stderr, status).  Its display
        outputs, parsed, are in self.displays."""
        data = code.encode()
        self.sock.sendall(b"C" + struct.pack(">I", len(data)) + data)
        out, err = b"", b""
        self.displays = []
        while True:
            head = recv_exact(self.sock, 5)
            if head is None:
                raise AssertionError("the uplink closed mid-cell")
            n = struct.unpack(">I", head[1:])[0]
            body = recv_exact(self.sock, n) if n else b""
            if head[:1] == b"O":
                out += body
            elif head[:1] == b"E":
                err += body
            elif head[:1] == b"D":
                self.displays.append(json.loads(body))
            elif head[:1] == b"X":
                return out.decode(), err.decode(), body.decode()
            else:
                raise AssertionError("unknown frame type %r" % head[:1])

    def close(self):
        self.sock.close()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the server did not end when its uplink closed")


class CellServer:
    """What both servers promise."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="plimsoll-cells-")
        self.server = Server(self.argv(), self.work)

    def tearDown(self):
        if self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait()
        self.server.sock.close()
        shutil.rmtree(self.work, ignore_errors=True)

    def test_output_and_status(self):
        out, err, st = self.server.cell(self.PRINT_SUM)
        self.assertEqual((out, st), ("3\n", "0"), err)

    def test_state_is_kept_between_cells(self):
        self.assertEqual(self.server.cell(self.SET_X)[2], "0")
        out, err, st = self.server.cell(self.SHOW_X)
        self.assertEqual((out, st), ("41\n", "0"), err)

    def test_an_error_is_status_1_with_stderr(self):
        out, err, st = self.server.cell(self.RAISE)
        self.assertEqual(st, "1")
        self.assertIn("boom", err)
        # and the interpreter goes on
        self.assertEqual(self.server.cell(self.PRINT_SUM)[:1], ("3\n",))

    def test_a_syntax_error_is_status_1(self):
        out, err, st = self.server.cell("this is ) not code")
        self.assertEqual(st, "1")
        self.assertIn("SyntaxError", err)

    def test_top_level_await(self):
        out, err, st = self.server.cell(self.AWAIT)
        self.assertEqual((out, st), ("7\n", "0"), err)

    def test_work_directory(self):
        with open(os.path.join(self.work, "f.txt"), "w") as f:
            f.write("from the host")
        out, err, st = self.server.cell(self.READ_FILE)
        self.assertEqual((out, st), ("from the host\n", "0"), err)

    def test_big_output_arrives_whole(self):
        out, err, st = self.server.cell(self.BIG)
        self.assertEqual(st, "0", err)
        self.assertEqual(len(out), 1 << 20 | 1)

    def test_closing_the_uplink_ends_the_server(self):
        self.assertEqual(self.server.close(), 0)

    def test_a_frame_that_is_not_code_ends_the_server(self):
        self.server.sock.sendall(b"Q" + struct.pack(">I", 1) + b"x")
        self.assertIsNone(recv_exact(self.server.sock, 1))
        self.assertEqual(self.server.proc.wait(timeout=10), 0)

    def test_an_oversized_frame_ends_the_server(self):
        self.server.sock.sendall(b"C" + struct.pack(">I", (64 << 20) + 1))
        self.assertIsNone(recv_exact(self.server.sock, 1))
        self.assertEqual(self.server.proc.wait(timeout=10), 0)


class NodeCellServer(CellServer, unittest.TestCase):
    PRINT_SUM = "console.log(1 + 2)"
    SET_X = "globalThis.x = 41"
    SHOW_X = "console.log(x)"
    RAISE = "throw new Error('boom')"
    AWAIT = "const v = await Promise.resolve(7); console.log(v)"
    READ_FILE = "console.log(require('fs').readFileSync('f.txt', 'utf8'))"
    BIG = "void process.stdout.write('y'.repeat(1 << 20) + '\\n')"

    def argv(self):
        with open(os.path.join(GUEST, "cell_server.js")) as f:
            return ["node", "-e", f.read()]

    def test_the_file_is_valid_javascript(self):
        r = subprocess.run(["node", "--check", os.path.join(GUEST, "cell_server.js")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_completion_value_is_shown(self):
        out, err, st = self.server.cell("6 * 7")
        self.assertEqual((out, st), ("42\n", "0"), err)

    def test_display_text_json_and_bytes(self):
        out, err, st = self.server.cell(
            "console.log('a'); display('<b>x</b>', 'text/html'); display({n: [1, 2]});"
            "display(Buffer.from([0x89, 0x50, 0x4e, 0x47]), 'image/png');"
            "display(new Uint8Array([1, 2, 3]).buffer, 'application/octet-stream');"
            "display('plain'); console.log('b')")
        self.assertEqual((out, st), ("a\nb\n", "0"), err)
        d = self.server.displays
        self.assertEqual([x["kind"] for x in d], ["display"] * 5)
        self.assertEqual(d[0]["data"], {"text/html": "<b>x</b>"})
        self.assertEqual(json.loads(d[1]["data"]["application/json"]), {"n": [1, 2]})
        self.assertEqual(base64.b64decode(d[2]["data"]["image/png"]), b"\x89PNG")
        self.assertEqual(base64.b64decode(d[3]["data"]["application/octet-stream"]), b"\1\2\3")
        self.assertEqual(d[4]["data"], {"text/plain": "plain"})

    def test_display_refuses_what_it_cannot_say(self):
        for code in ("display(new Uint8Array([1]))", "display('x', 'Image/PNG')",
                     "display('not base64!', 'image/png')", "display(undefined, 'application/json')"):
            out, err, st = self.server.cell(code)
            self.assertEqual(st, "1", code)
            self.assertIn("TypeError", err)
            self.assertEqual(self.server.displays, [])


class PythonCellServer(CellServer, unittest.TestCase):
    PRINT_SUM = "print(1 + 2)"
    SET_X = "x = 41"
    SHOW_X = "print(x)"
    RAISE = "raise ValueError('boom')"
    AWAIT = "import asyncio\nasync def f():\n    return 7\nprint(await f())"
    READ_FILE = "print(open('f.txt').read())"
    BIG = "import sys; _ = sys.stdout.write('y' * (1 << 20) + '\\n')"

    def argv(self):
        src = assemble(os.path.join(self.work, "agent.py"), os.path.join(GUEST, "common.py"),
                       "NODE_SERVER=" + os.path.join(GUEST, "cell_server.js"),
                       os.path.join(GUEST, "session_agent.py"))
        return [sys.executable, "-c", src, "interp", "python"]

    def test_the_last_expression_is_shown(self):
        out, err, st = self.server.cell("6 * 7")
        self.assertEqual((out, st), ("42\n", "0"), err)

    def test_output_of_a_child_process_reaches_the_cell(self):
        out, err, st = self.server.cell("import os; _ = os.system('echo from-a-child')")
        self.assertEqual((out, st), ("from-a-child\n", "0"), err)

    def test_display_and_rich_values(self):
        out, err, st = self.server.cell(
            "class T:\n"
            "    def _repr_html_(self): return '<table><td>1</td></table>'\n"
            "    def _repr_png_(self): return b'\\x89PNG'\n"
            "    def __repr__(self): return 'T()'\n"
            "class Bad:\n"
            "    def _repr_html_(self): raise ValueError('no')\n"
            "print('a'); display(T(), 42); display(Bad())\n"
            "display({'text/csv': 'a,b'}, raw=True)\n"
            "T()")
        self.assertEqual((out, st), ("a\n", "0"), err)
        self.assertIn("_repr_html_ raised", err)
        d = self.server.displays
        self.assertEqual([x["kind"] for x in d], ["display"] * 4 + ["result"])
        self.assertEqual(d[0]["data"]["text/html"], "<table><td>1</td></table>")
        self.assertEqual(base64.b64decode(d[0]["data"]["image/png"]), b"\x89PNG")
        self.assertEqual(d[0]["data"]["text/plain"], "T()")
        self.assertEqual(d[1]["data"], {"text/plain": "42"})
        self.assertEqual(set(d[2]["data"]), {"text/plain"})
        self.assertEqual(d[3]["data"], {"text/csv": "a,b"})
        self.assertEqual(d[4]["data"], d[0]["data"])
        # a plain last value is still printed, not displayed
        out, err, st = self.server.cell("[1, 2]")
        self.assertEqual((out, st, self.server.displays), ("[1, 2]\n", "0", []), err)

    def test_system_exit(self):
        self.assertEqual(self.server.cell("raise SystemExit(0)")[2], "0")
        out, err, st = self.server.cell("raise SystemExit(3)")
        self.assertEqual(st, "1")
        self.assertIn("3", err)


class GuestScriptsLint(unittest.TestCase):
    """The Python guest scripts as plimsolld embeds them (the build's copies,
    lines.py and common.py first), through pyflakes: an undefined name
    there fails only inside a sandbox (test_guest_programs lints every
    guest program)."""

    def test_pyflakes(self):
        if not shutil.which("pyflakes3"):
            self.fail("pyflakes3 is not installed (scripts/deps installs it)")
        build = os.environ.get("PLIMSOLL_BUILD_DIR", os.path.join(ROOT, "build"))
        built = [os.path.join(build, "src", "providers", "docker", "guest", name)
                 for name in ("bootstrap.py", "session_agent.py")]
        for path in built:
            self.assertTrue(os.path.exists(path), "%s is not built" % path)
        r = subprocess.run(["pyflakes3"] + built, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
