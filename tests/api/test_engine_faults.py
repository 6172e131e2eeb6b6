# SPDX-License-Identifier: Apache-2.0
"""Faults of the docker engine itself, through the real daemon: a bogus runsc
registration, the engine killed mid-run, the daemon killed mid-run.  These
stop or change the machine's engine for a moment, so they run alone (their
own meson suite, api-engine, scheduled by scripts/test with nothing beside
it), never beside another docker suite."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import RUN_TAG, docker_env, engine, ours  # noqa: E402
from plimsoll_test.harness import ROOT, Daemon, error_info, run_startup  # noqa: E402
from plimsoll_test.payloads import py  # noqa: E402

def daemon_json():
    with open("/etc/docker/daemon.json") as f:
        return f.read()


def hup_engine():
    pid = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()[0]
    os.kill(int(pid), 1)
    time.sleep(1.0)


class DockerEngineFaults(unittest.TestCase):
    """These change the machine's engine for a moment and put it back."""

    def test_bogus_runsc_registration_refused(self):
        original = daemon_json()
        cfg = json.loads(original)
        cfg["runtimes"]["runsc"]["path"] = "/bin/false"
        try:
            with open("/etc/docker/daemon.json", "w") as f:
                json.dump(cfg, f)
            hup_engine()
            code, err = run_startup(docker_env("runsc", "test-bogus"), timeout=120)
            self.assertEqual(code, 2, err)
            self.assertIn("startup proof", err)
            self.assertNotIn('"isolation":"kernel"', err)
        finally:
            with open("/etc/docker/daemon.json", "w") as f:
                f.write(original)
            hup_engine()
        self.assertEqual(ours("test-bogus"), [])

    def test_engine_killed_mid_run(self):
        d = Daemon(env=docker_env("runc", "test-kill")).start(timeout=120)
        try:
            out = []
            t = threading.Thread(target=lambda: out.append(
                d.rpc("Run", py("import time; time.sleep(30)", timeout_ms=40000))))
            t.start()
            time.sleep(2.0)
            subprocess.run(["pkill", "-9", "-x", "dockerd"], check=True)
            t.join(60)
            status, body = out[0]
            self.assertEqual(status, 500, body)
            info, _ = error_info(body)
            self.assertEqual(info["reason"], "INTERNAL")
            self.assertNotIn("stderr", body)
            time.sleep(1.2)  # past the readiness cache
            self.assertEqual(d.request("GET", "/readyz")[0], 503)
            status, body = d.rpc("Run", py("print(1)"))
            self.assertEqual(error_info(body)[0]["reason"], "NOT_READY")
            subprocess.run([os.path.join(ROOT, "scripts", "docker-setup")], check=True,
                           stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and d.request("GET", "/readyz")[0] != 200:
                time.sleep(0.5)
            self.assertEqual(d.request("GET", "/readyz")[0], 200)
            # An engine just restarted may take its time over a first
            # container (16.8 s once under CI's load, past the default 10 s
            # deadline): the run asks for a minute.
            status, body = d.rpc("Run", py("print('back')", timeout_ms=60000))
            self.assertEqual((status, body.get("stdout")), (200, "back\n"), body)
        finally:
            d.stop()
        # The container of the interrupted run is gone too (deleted at the
        # daemon's next start at the latest: start one to show it).
        d2 = Daemon(env=docker_env("runc", "test-kill")).start(timeout=120)
        d2.stop()
        self.assertEqual(ours("test-kill"), [])

    def test_daemon_killed_mid_run_and_restarted(self):
        """SIGKILL gives the daemon no chance to clean up: the next start
        with the same instance deletes what it left (the interrupted run's
        container, its warm ones, their socket directories) and touches
        nothing else: another instance's container stays."""
        other_cfg = {"Image": "plimsoll/snippet:latest", "Cmd": ["true"],
                     "Labels": {"org.plimsoll.instance": "test-sigkill-other" + RUN_TAG}}
        status, other = engine("POST", "/containers/create", json.dumps(other_cfg).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 201)
        d = Daemon(env=docker_env("runc", "test-sigkill", SANDBOX_DOCKER_WARM="1")).start(
            timeout=120)
        out = []

        def run():
            try:
                out.append(d.rpc("Run", py("import time; print('started', flush=True); "
                                           "time.sleep(45)", timeout_ms=50000)))
            except OSError as e:  # the daemon died under the call
                out.append(e)
        t = threading.Thread(target=run)
        t.start()
        try:
            deadline = time.monotonic() + 60
            # One warm container waits; the run takes it and the filler
            # starts another: two containers mean the run is under way.
            while time.monotonic() < deadline and len(ours("test-sigkill")) < 2:
                time.sleep(0.2)
            time.sleep(1.0)  # the snippet is running inside by now
            left = {c["Id"] for c in ours("test-sigkill")}
            self.assertTrue(left, "the run's container should exist")
            d.stop(sig=signal.SIGKILL)
            t.join(30)
            self.assertFalse(t.is_alive())
            self.assertIsInstance(out[0], OSError)  # no answer came back
            # The killed daemon's containers are still there...
            self.assertTrue(left & {c["Id"] for c in ours("test-sigkill")})
            d2 = Daemon(env=docker_env("runc", "test-sigkill", SANDBOX_DOCKER_WARM="1")).start(
                timeout=120)
            try:
                # ...and gone once the new one serves; it runs code at once.
                self.assertFalse(left & {c["Id"] for c in ours("test-sigkill")})
                status, body = d2.rpc("Run", py("print('after')"))
                self.assertEqual((status, body.get("stdout")), (200, "after\n"), body)
                base = os.path.join("/run/plimsoll", "test-sigkill" + RUN_TAG)
                if os.path.isdir(base):
                    self.assertEqual([n for n in os.listdir(base) if n.startswith("run-")], [])
            finally:
                d2.stop()
            self.assertEqual(ours("test-sigkill"), [])
            status, info = engine("GET", "/containers/%s/json" % other["Id"])
            self.assertEqual(status, 200, "another instance's container must be left alone")
        finally:
            engine("DELETE", "/containers/%s?force=1" % other["Id"])
            if d.proc.poll() is None:
                d.stop(sig=signal.SIGKILL)


if __name__ == "__main__":
    unittest.main()
