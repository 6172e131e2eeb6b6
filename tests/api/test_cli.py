# SPDX-License-Identifier: Apache-2.0
"""The plimsoll CLI against the real daemon: exit statuses a shell script
can branch on, keygen, and describe."""
import hashlib
import os
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


class CliChecksTheAnswer(unittest.TestCase):
    """A wasm daemon behind the clients' lowering proxy, which rewrites the
    answer's isolation to "none": with a floor that is a mismatch (exit 5),
    without one the record no longer matches the answer (exit 6)."""

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
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        cls.proxy = LoweringProxy(cls.d.host, cls.d.port)
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


if __name__ == "__main__":
    unittest.main()
