# SPDX-License-Identifier: Apache-2.0
"""scripts/quickstart's modes, each in a fresh copy of the repository's
layout (tests/docs/test_docs.py's make_workdir: its own .plimsoll/) with the
build under test used as it is (PLIMSOLL_BUILD_DIR), nothing installed
(PLIMSOLL_SKIP_DEPS), a free port (PLIMSOLL_LISTEN) and its own docker
instance label; `scripts/quickstart stop` always runs after.

`scripts/quickstart docker` starts the docker provider under runc with
sessions on, and docs/sessions.md's session example runs against it as
written, with the environment the script prints; `stop` stops it."""
import json
import os
import shutil
import signal
import subprocess
import unittest
import urllib.request

import test_docs
from plimsoll_test import docker as pdocker


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Quickstart(unittest.TestCase):
    def setUp(self):
        self.work = test_docs.make_workdir()
        self.port = test_docs.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.env = test_docs.block_env()
        self.env.update(PLIMSOLL_SKIP_DEPS="1",
                        PLIMSOLL_BUILD_DIR=os.path.abspath(test_docs.BUILD),
                        PLIMSOLL_LISTEN="127.0.0.1:%d" % self.port,
                        SANDBOX_DOCKER_INSTANCE="docs-qs" + pdocker.RUN_TAG)
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        self.addCleanup(self.stop_anyway)

    def quickstart(self, *args):
        return subprocess.run(["scripts/quickstart"] + list(args), cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=300)

    def pid(self):
        with open(os.path.join(self.work, ".plimsoll", "plimsolld.pid")) as f:
            return int(f.read())

    def stop_anyway(self):
        """A test that failed half way still leaves no daemon behind."""
        pidfile = os.path.join(self.work, ".plimsoll", "plimsolld.pid")
        self.quickstart("stop")
        if os.path.exists(pidfile):
            pid = self.pid()
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)

    def describe(self):
        with open(os.path.join(self.work, ".plimsoll", "key")) as f:
            key = f.read().strip()
        req = urllib.request.Request(self.url + "/plimsoll.v1.SandboxService/Describe", data=b"{}",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + key})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def assert_stops(self):
        pid = self.pid()
        p = self.quickstart("stop")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plimsolld stopped", p.stdout)
        self.assertFalse(pid_alive(pid), "plimsolld %d still runs after stop" % pid)
        self.assertFalse(os.path.exists(os.path.join(self.work, ".plimsoll", "plimsolld.pid")))
        with self.assertRaises(OSError):
            urllib.request.urlopen(self.url + "/healthz", timeout=5)

    def test_docker_mode_has_sessions_and_runs_the_session_example(self):
        pdocker.require_engine()
        p = self.quickstart("docker")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("provider: docker, runtime runc, sessions on (4)", p.stdout)
        self.assertIn("hello from plimsoll\n(exit status 0", p.stdout)
        self.assertIn("export PLIMSOLL_URL=%s PLIMSOLL_KEY_FILE=.plimsoll/key" % self.url, p.stdout)
        d = self.describe()
        self.assertEqual((d["provider"], d["isolation"], d["runtime"], d["supports_sessions"]),
                         ("docker", "container", "runc", True), d)
        # docs/sessions.md's example, as written, with the environment the
        # script printed
        blocks = [b for b in test_docs.BLOCKS
                  if b.path == os.path.join("docs", "sessions.md") and b.kind == "run"
                  and b.daemon_kind == "docker-sessions"]
        self.assertTrue(blocks, "docs/sessions.md has a session example")
        env = test_docs.block_env(self.url)
        for b in blocks:
            r = test_docs.run_text(b, self.work, env)
            self.assertEqual(r.returncode, 0, "%s: %s%s" % (b, r.stdout, r.stderr))
            for c in b.checks:
                if c.kind == "output":
                    self.assertIsNone(test_docs.output_matches(c.text, r.stdout))
        self.assert_stops()

    def test_default_mode_is_wasm_and_stops(self):
        p = self.quickstart()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("(provider: wasm)", p.stdout)
        d = self.describe()
        self.assertEqual((d["provider"], d["supports_sessions"]), ("wasm", False), d)
        self.assert_stops()

    def test_an_unknown_mode_is_a_usage_error(self):
        p = self.quickstart("dockr")
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage: scripts/quickstart [docker|stop]", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, ".plimsoll")))


if __name__ == "__main__":
    unittest.main()
