# SPDX-License-Identifier: Apache-2.0
"""The plimsoll CLI against the real daemon: exit statuses a shell script
can branch on, keygen, describe, and a run's output as it comes
(RunStream)."""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import CLI, Daemon  # noqa: E402


def cli(args, env, stdin=None):
    p = subprocess.run([CLI] + args, env=env, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon().start()
        cls.env = {"PATH": os.environ.get("PATH", ""),
                   "PLIMSOLL_URL": "http://127.0.0.1:%d" % cls.d.port,
                   "PLIMSOLL_KEY": cls.d.keys["alice"]}

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_run_refused_exits_3(self):
        code, out, err = cli(["run", "console.log(1)"], self.env)
        self.assertEqual(code, 3, err)
        self.assertIn("refused: DISABLED (failed_precondition)", err)
        self.assertEqual(out, "")

    def test_run_from_file_and_stdin(self):
        f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
        f.write("print(1)\n")
        f.close()
        self.assertEqual(cli(["run", "-l", "python", "-f", f.name], self.env)[0], 3)
        self.assertEqual(cli(["run", "-"], self.env, stdin=b"console.log(1)")[0], 3)

    def test_invalid_is_refused_too(self):
        code, _, err = cli(["run", "--floor", "kernel", "-l", "cobol", "x"], self.env)
        self.assertEqual(code, 3)
        self.assertIn("INVALID_REQUEST", err)

    def test_usage_exits_2(self):
        self.assertEqual(cli([], self.env)[0], 2)
        self.assertEqual(cli(["run"], self.env)[0], 2)
        self.assertEqual(cli(["run", "--floor", "steel", "x"], self.env)[0], 2)
        self.assertEqual(cli(["frobnicate"], self.env)[0], 2)

    def test_session_usage_exits_2_and_refusals_3(self):
        for args in (["session"], ["session", "frob"], ["session", "get"],
                     ["session", "extend", "a" * 64], ["session", "extend", "a" * 64, "0"],
                     ["session", "extend", "a" * 64, "-5"], ["session", "extend", "a" * 64, "1e3"],
                     ["session", "extend", "a" * 64, "4294967296"], ["session", "get", "xyz"],
                     ["session", "close", "A" * 64], ["session", "ls", "x"],
                     ["session", "get", "a" * 64, "--json"], ["session", "ls", "-l", "python"]):
            code, out, err = cli(args, self.env)
            self.assertEqual(code, 2, (args, out, err))
        # A daemon that runs nothing refuses them before anything.
        for args in (["session", "ls"], ["session", "open"], ["session", "get", "a" * 64],
                     ["session", "extend", "a" * 64, "60"], ["session", "close", "a" * 64]):
            code, out, err = cli(args, self.env)
            self.assertEqual((code, out), (3, ""), (args, err))
            self.assertIn("refused: DISABLED", err)

    def test_unauthenticated_exits_3(self):
        env = dict(self.env, PLIMSOLL_KEY="nope")
        code, _, err = cli(["describe"], env)
        self.assertEqual(code, 3)
        self.assertIn("UNAUTHENTICATED", err)

    def test_unreachable_exits_4(self):
        env = dict(self.env, PLIMSOLL_URL="http://127.0.0.1:1")
        code, _, err = cli(["run", "1"], env)
        self.assertEqual(code, 4)
        self.assertIn("cannot reach", err)

    def test_describe(self):
        code, out, _ = cli(["describe"], self.env)
        self.assertEqual(code, 0)
        self.assertIn('"provider": "disabled"', out)

    def test_key_file(self):
        kf = tempfile.NamedTemporaryFile("w", delete=False)
        kf.write(self.d.keys["bob"] + "\n")
        kf.close()
        env = dict(self.env)
        del env["PLIMSOLL_KEY"]
        env["PLIMSOLL_KEY_FILE"] = kf.name
        self.assertEqual(cli(["describe"], env)[0], 0)
        os.unlink(kf.name)

    def test_key_file_trimmed_and_after_the_key(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as kf:
            kf.write("  %s\t\r\nnext\n" % self.d.keys["bob"])
        env = dict(self.env, PLIMSOLL_KEY_FILE=kf.name)
        del env["PLIMSOLL_KEY"]
        self.assertEqual(cli(["describe"], env)[0], 0)
        env["PLIMSOLL_KEY"] = "nope"  # the key comes first
        self.assertEqual(cli(["describe"], env)[0], 3)
        os.unlink(kf.name)

    def test_a_key_file_it_cannot_read_is_named(self):
        env = dict(self.env, PLIMSOLL_KEY_FILE="/nonexistent/.plimsoll/key")
        del env["PLIMSOLL_KEY"]
        code, _, err = cli(["run", "1"], env)
        self.assertEqual(code, 2)
        self.assertEqual(err, "plimsoll: cannot read the key file /nonexistent/.plimsoll/key: "
                              "No such file or directory\n")

    def test_no_message_holds_the_key(self):
        env = dict(self.env, PLIMSOLL_KEY="plk_sekrit-part\nrest-of-it")
        code, out, err = cli(["run", "1"], env)
        self.assertEqual(code, 2)
        self.assertIn("line break", err)
        self.assertNotIn("sekrit", err + out)
        self.assertNotIn("rest-of-it", err + out)


class Keygen(unittest.TestCase):
    def test_keygen_prints_key_and_line(self):
        code, out, _ = cli(["keygen", "ci-bot"], {})
        self.assertEqual(code, 0)
        key, line = out.splitlines()
        self.assertTrue(key.startswith("plk_"))
        principal, digest = line.split()
        self.assertEqual(principal, "ci-bot")
        self.assertEqual(digest, hashlib.sha256(key.encode()).hexdigest())

    def test_keygen_key_out_and_daemon_accepts_it(self):
        d = tempfile.mkdtemp()
        kpath = os.path.join(d, "key")
        code, out, _ = cli(["keygen", "--key-out", kpath, "carol"], {})
        self.assertEqual(code, 0)
        self.assertEqual(os.stat(kpath).st_mode & 0o777, 0o600)
        keys = os.path.join(d, "keys")
        with open(keys, "w") as f:
            f.write(out)
        daemon = Daemon(env={"PLIMSOLL_KEYS_FILE": keys}).start()
        try:
            env = {"PLIMSOLL_URL": "http://127.0.0.1:%d" % daemon.port,
                   "PLIMSOLL_KEY_FILE": kpath}
            self.assertEqual(cli(["describe"], env)[0], 0)
        finally:
            daemon.stop()

    def test_keygen_rejects_bad_principal(self):
        self.assertEqual(cli(["keygen", "bad principal!"], {})[0], 2)


def lower_stream(body):
    """A RunStream answer's envelopes with the result's isolation made
    "none", as the lowering proxy does to a unary answer."""
    out, i = b"", 0
    while i + 5 <= len(body):
        flags, n = struct.unpack_from(">BI", body, i)
        msg = body[i + 5:i + 5 + n]
        i += 5 + n
        if flags == 0:
            obj = json.loads(msg)
            if isinstance(obj.get("result"), dict) and "isolation" in obj["result"]:
                obj["result"]["isolation"] = "none"
                msg = json.dumps(obj, separators=(",", ":")).encode()
        out += struct.pack(">BI", flags, len(msg)) + msg
    return out + body[i:]


class CliChecksTheAnswer(unittest.TestCase):
    """A wasm daemon behind the clients' lowering proxy, which rewrites the
    answer's isolation to "none" (here the result of a stream's too): with
    a floor that is a mismatch (exit 5), without one the record no longer
    matches the answer (exit 6)."""

    @classmethod
    def setUpClass(cls):
        import importlib.util
        import threading
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "clients", "harness.py")
        spec = importlib.util.spec_from_file_location("clients_harness", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        LoweringProxy = mod.LoweringProxy

        class StreamLowering(mod.ProxyHandler):
            def _answer(self, status, headers, body):
                if status == 200 and self.path.endswith("Stream"):
                    body = lower_stream(body)
                super()._answer(status, headers, body)

        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        cls.proxy = LoweringProxy(cls.d.host, cls.d.port)
        cls.proxy.RequestHandlerClass = StreamLowering
        threading.Thread(target=cls.proxy.serve_forever, daemon=True).start()
        cls.env = {"PATH": os.environ.get("PATH", ""),
                   "PLIMSOLL_URL": "http://127.0.0.1:%d" % cls.proxy.server_address[1],
                   "PLIMSOLL_KEY": cls.d.keys["alice"]}

    @classmethod
    def tearDownClass(cls):
        cls.proxy.shutdown()
        cls.d.stop()

    def test_mismatch_exits_5(self):
        code, out, err = cli(["run", "--floor", "process", "console.log(1)"], self.env)
        self.assertEqual(code, 5, err)
        self.assertIn("isolation evidence mismatch", err)

    def test_record_that_does_not_check_exits_6(self):
        code, out, err = cli(["run", "console.log(1)"], self.env)
        self.assertEqual(code, 6, err)
        self.assertIn("(response_sha256)", err)

    def test_direct_answer_checks(self):
        env = dict(self.env, PLIMSOLL_URL="http://127.0.0.1:%d" % self.d.port)
        code, out, err = cli(["run", "--floor", "process", "console.log(1)"], env)
        self.assertEqual((code, out), (0, "1\n"), err)

    def test_json_mode_checks_too(self):
        code, out, err = cli(["run", "--json", "--floor", "process", "console.log(1)"], self.env)
        self.assertEqual(code, 5, err)


class CliLiveOutput(unittest.TestCase):
    """run on the wasm provider, whose snippets stream (RunStream): the
    guest's output as it comes, then the same closing lines as ever."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        cls.env = {"PATH": os.environ.get("PATH", ""),
                   "PLIMSOLL_URL": "http://127.0.0.1:%d" % cls.d.port,
                   "PLIMSOLL_KEY": cls.d.keys["alice"]}

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_lines_and_closing_lines(self):
        js = "for (let i = 0; i < 5; i++) console.log('line ' + i); console.error('warned')"
        code, out, err = cli(["run", js], self.env)
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "".join("line %d\n" % i for i in range(5)))
        self.assertEqual(err, "warned\n")
        # The whole answer says the same, once.
        code, out, err = cli(["run", "--json", js], self.env)
        self.assertEqual(code, 0, err)
        answer = json.loads(out)
        self.assertEqual(answer["stdout"], "".join("line %d\n" % i for i in range(5)))
        self.assertEqual(answer["stderr"], "warned\n")
        self.assertIn("record", answer)

    def test_nonzero_exit_prints_output_once_then_the_exit_line(self):
        js = "console.log('a'); console.log('b'); throw new Error('boom')"
        code, out, err = cli(["run", js], self.env)
        self.assertEqual(code, 1, err)
        self.assertEqual(out, "a\nb\n")
        self.assertEqual(err.count("boom"), 1, err)
        self.assertTrue(err.endswith("plimsoll: exit code 1 (isolation: process)\n"), err)

    def test_timeout_line(self):
        code, out, err = cli(["run", "--timeout", "300", "console.log('x'); for(;;){}"], self.env)
        self.assertEqual(code, 1, err)
        self.assertEqual(out, "x\n")
        self.assertIn(", timed out)", err.splitlines()[-1])

    def test_first_line_is_read_before_the_run_ends(self):
        js = ("console.log('first'); const t = Date.now(); while (Date.now() - t < 1500) {} "
              "console.log('second')")
        p = subprocess.Popen([CLI, "run", "--timeout", "20000", js], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            first = p.stdout.readline()
            # The guest prints its second line only after its busy wait: the
            # CLI cannot have exited yet if the first came as it was written.
            still_running = p.poll() is None
            rest = p.stdout.read()
            err = p.stderr.read()
            code = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(first, b"first\n")
        self.assertTrue(still_running, "the first line came only when the CLI exited")
        self.assertEqual((code, rest, err), (0, b"second\n", b""))

    def test_refusals_keep_their_exit_codes(self):
        code, out, err = cli(["run", "--floor", "vm", "console.log(1)"], self.env)
        self.assertEqual((code, out), (3, ""), err)
        self.assertIn("refused: INSUFFICIENT_ISOLATION (failed_precondition)", err)
        code, _, err = cli(["run", "-l", "cobol", "x"], self.env)
        self.assertEqual(code, 3, err)
        self.assertIn("INVALID_REQUEST", err)
        env = dict(self.env, PLIMSOLL_KEY="nope")
        code, _, err = cli(["run", "console.log(1)"], env)
        self.assertEqual(code, 3, err)
        self.assertIn("UNAUTHENTICATED", err)


if __name__ == "__main__":
    unittest.main()
