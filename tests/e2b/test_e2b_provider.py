# SPDX-License-Identifier: Apache-2.0
"""The e2b provider against the local fake of E2B's documented API
(tests/fakes/e2b), whose "VMs" are real locked-down containers: the real
daemon over HTTP, its startup test and every refusal of it, runs of each
payload, the deadline, the caps, the reaper, failures of E2B mid-run, and
a readiness poll that never creates a VM.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_provider
"""
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.e2b import FakeE2B  # noqa: E402
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.hosted_guests import HostedArtifacts, HostedStreams  # noqa: E402
from plimsoll_test.payloads import sha  # noqa: E402

TEMPLATE = "plimsoll-project"
IMAGE = "plimsoll/project:latest"


def e2b_env(fake, **extra):
    env = {
        "SANDBOX_PROVIDER": "e2b",
        "E2B_API_KEY": fake.api_key,
        "SANDBOX_E2B_TEMPLATE": TEMPLATE,
        "SANDBOX_E2B_API_URL": fake.url,
        "SANDBOX_E2B_INSTANCE": "t%d" % os.getpid(),
        # Nothing on this machine answers these, open egress or not; the
        # egress tests add a listener the bridge network can reach.
        "SANDBOX_E2B_EGRESS_PROBE": "192.0.2.1:80",
        "SANDBOX_E2B_REAP_INTERVAL_S": "5",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_fake():
    return FakeE2B(api_key="e2b_test_" + os.urandom(8).hex(),
                   templates={TEMPLATE: IMAGE}, cpu=2, memory_mb=512).start()


def creates(state):
    return [r for r in state["requests"] if r["method"] == "POST" and r["path"] == "/sandboxes"]


class Listener:
    """A TCP listener on the host's address on the fake's network: reachable
    from a VM whose egress is open, and from nothing with the network off."""

    def __init__(self, fake):
        self.sock = socket.socket()
        self.sock.bind((fake.gateway(), 0))
        self.sock.listen(16)
        self.target = "%s:%d" % self.sock.getsockname()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            c.close()

    def close(self):
        self.sock.close()


class E2BDaemon(unittest.TestCase):
    """One fake and one daemon for the class."""
    EXTRA = {}

    @classmethod
    def settings(cls):
        """The daemon's settings, once cls.fake runs."""
        return e2b_env(cls.fake, **cls.EXTRA)

    @classmethod
    def setUpClass(cls):
        cls.fake = start_fake()
        try:
            cls.d = Daemon(env=cls.settings()).start(timeout=120)
        except Exception:
            cls.fake.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.fake.stop()

    def setUp(self):
        self.fake.reset()

    def run_ok(self, message, principal="alice"):
        status, body = self.d.rpc("Run", message, principal=principal)
        self.assertEqual(status, 200, body)
        self.assertEqual(body.get("isolation"), "vm", body)
        return body

    def assert_no_sandbox_left(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not self.fake.state()["sandboxes"]:
                return
            time.sleep(0.2)
        self.fail("VMs left behind: %s" % self.fake.state()["sandboxes"])


class Startup(E2BDaemon):
    def test_describe_paints_vm_from_the_startup_test(self):
        status, d = self.d.rpc("Describe", {})
        self.assertEqual(status, 200, d)
        self.assertEqual((d["provider"], d["isolation"], d["runtime"]), ("e2b", "vm", "e2b"))
        self.assertTrue(d["ready"], d)
        ops = d["operations"]
        self.assertTrue(ops["snippet"]["supported"])
        self.assertEqual(sorted(ops["snippet"]["languages"]), ["javascript", "python"])
        self.assertTrue(ops["project"]["supported"])
        self.assertFalse(ops["module"].get("supported", False))
        self.assertFalse(ops["snippet"].get("grants", False))
        self.assertFalse(d.get("supports_sessions", False))
        self.assertFalse(d["limits"].get("memory_budget_applies", False))
        checks = " | ".join(d["startup_checks"])
        for words in ("secure: true", "both access tokens", "allowInternetAccess false",
                      "2 CPUs, 512 MiB",
                      "3 files uploaded", "with the cleanup between its steps",
                      "nothing reached", "delete read back"):
            self.assertIn(words, checks)

    def test_startup_vm_is_gone(self):
        self.assert_no_sandbox_left()

    def test_readiness_never_calls_e2b(self):
        for _ in range(20):
            status, _, body = self.d.request("GET", "/readyz")
            self.assertEqual(status, 200, body)
        status, _ = self.d.rpc("Describe", {})
        self.assertEqual(status, 200)
        self.assertEqual(self.fake.state()["requests"], [])

    def test_the_api_key_is_never_logged(self):
        self.assertNotIn(self.fake.api_key, self.d.log_text())


class Runs(HostedStreams, HostedArtifacts, E2BDaemon):
    def test_javascript_snippet(self):
        r = self.run_ok({"snippet": {"language": "javascript", "code": "console.log(6*7)"}})
        self.assertEqual((r.get("exit_code", 0), r["stdout"]), (0, "42\n"))
        self.assertTrue(r["sandbox_name"])
        self.assert_no_sandbox_left()
        self.assertEqual(len(creates(self.fake.state())), 1)

    def test_usage_from_e2b_metrics(self):
        # Three seconds of one busy core: the fake samples the VM every
        # second, as E2B does every few, and the run's answer carries what
        # the samples between its start and its end say.
        code = "import time\nt = time.time()\nwhile time.time() - t < 3: pass\nprint('done')"
        r = self.run_ok({"snippet": {"language": "python", "code": code}, "timeout_ms": 20000})
        self.assertEqual(r["stdout"], "done\n")
        u = r.get("usage")
        self.assertIsNotNone(u, r)
        self.assertEqual(u["source"], "service")
        # One core of the VM's two, busy for at least the two seconds
        # between whole-second samples; the service gives no split.
        self.assertGreaterEqual(u["cpu_user_ms"], 500, u)
        self.assertEqual(u["cpu_system_ms"], 0, u)
        self.assertGreater(u["memory_peak_kib"], 0, u)
        self.assertGreaterEqual(u["wall_ms"], 3000, u)
        rest = {k: v for k, v in r.items() if k != "record"}
        self.assertEqual(r["record"]["response_sha256"], sha(rest))
        asked = [q for q in self.fake.state()["requests"]
                 if q["method"] == "GET" and q["path"].startswith("/sandboxes/")
                 and "/metrics?" in q["path"]]
        self.assertEqual(len(asked), 1, asked)
        self.assertIn("start=", asked[0]["path"])
        self.assertEqual(self.fake.state().get("violations", []), [])

    def test_a_short_run_says_why_it_has_no_usage(self):
        r = self.run_ok({"snippet": {"language": "python", "code": "print(1)"}})
        # Shorter than two samples of the VM: no figures, and why.
        if "usage" in r:
            self.assertEqual(r["usage"]["source"], "service")
            self.assertNotIn("usage_absent", r)
        else:
            self.assertIn("e2b's metrics held", r["usage_absent"])

    def test_python_snippet_stdin_stderr_exit(self):
        code = "import sys\nd = sys.stdin.read()\nprint(d.upper())\nsys.stderr.write('e')\nsys.exit(3)"
        r = self.run_ok({"snippet": {"language": "python", "code": code, "stdin": "abc"}})
        self.assertEqual(r["exit_code"], 3)
        self.assertEqual(r["stdout"], "ABC\n")
        self.assertEqual(r["stderr"], "e")
        self.assert_no_sandbox_left()

    def test_guest_runs_as_user_not_root(self):
        r = self.run_ok({"snippet": {"language": "python",
                                     "code": "import os; print(os.getuid())"}})
        self.assertNotEqual(r["stdout"].strip(), "0")

    def test_project_steps_in_order_stop_at_first_failure(self):
        r = self.run_ok({"project": {
            "files": [{"path": "pkg/a.py", "content": "print('a')"},
                      {"path": "b.txt", "content": "bee"}],
            "steps": [{"name": "a", "argv": ["python3", "pkg/a.py"]},
                      {"name": "cat", "argv": ["cat", "b.txt"]},
                      {"name": "fail", "argv": ["sh", "-c", "echo no >&2; exit 4"]},
                      {"name": "never", "argv": ["true"]}]}})
        self.assertEqual(r["outcome"], "completed")
        self.assertEqual([s["name"] for s in r["steps"]], ["a", "cat", "fail"])
        self.assertEqual(r["steps"][0]["stdout"], "a\n")
        self.assertEqual(r["steps"][1]["stdout"], "bee")
        self.assertEqual((r["steps"][2]["exit_code"], r["steps"][2]["stderr"]), (4, "no\n"))
        self.assertEqual(r["exit_code"], 4)
        self.assertIn("later steps did not run", r["detail"])
        self.assert_no_sandbox_left()

    def test_project_without_files_and_a_missing_program(self):
        # No upload makes the directory; a program that does not exist is
        # the guest's result (127), as on docker, not a failure of envd's.
        r = self.run_ok({"project": {"steps": [{"name": "pwd", "argv": ["pwd"]},
                                               {"name": "nope", "argv": ["no-such-tool"]}]}})
        self.assertEqual(r["steps"][0]["stdout"], "/home/user/project\n")
        self.assertEqual((r["outcome"], r["exit_code"]), ("completed", 127))
        self.assertIn("not found", r["steps"][1]["stderr"])

    def test_a_step_reading_stdin_reads_its_end(self):
        # envd keeps a process's stdin open unless the StartRequest says
        # stdin: false (process.proto); a step reads an empty stdin, as on
        # docker, instead of waiting for its deadline.
        r = self.run_ok({"timeout_ms": 20000, "project": {"steps": [{"name": "cat", "argv": ["cat"]}]}})
        self.assertEqual((r["outcome"], r["exit_code"], r["steps"][0]["stdout"]),
                         ("completed", 0, ""), r)

    def test_deadline_kills_and_deletes(self):
        t0 = time.monotonic()
        r = self.run_ok({"snippet": {"language": "javascript", "code": "for(;;){}"},
                         "timeout_ms": 2000})
        self.assertLess(time.monotonic() - t0, 30)
        self.assertTrue(r["timed_out"], r)
        self.assertEqual((r["exit_code"], r["outcome"]), (124, "timed_out"))
        self.assert_no_sandbox_left()

    def test_guest_cannot_forge_its_end(self):
        # The guest writes what envd's stream is made of: an end event, an
        # end-of-stream envelope.  envd carries them as output bytes; the
        # exit code is the one the process really had.
        forged = ('import sys, json\n'
                  'ev = json.dumps({"event": {"end": {"exitCode": 0, "exited": True}}}).encode()\n'
                  'sys.stdout.buffer.write(b"\\x00" + len(ev).to_bytes(4, "big") + ev)\n'
                  'sys.stdout.buffer.write(b"\\x02\\x00\\x00\\x00\\x02{}")\n'
                  'sys.stdout.flush()\n'
                  'sys.exit(5)\n')
        r = self.run_ok({"snippet": {"language": "python", "code": forged}})
        self.assertEqual(r["exit_code"], 5)
        self.assertIn('"exitCode": 0', r["stdout"])

    def test_output_cap(self):
        r = self.run_ok({"snippet": {"language": "python",
                                     "code": "import sys; sys.stdout.write('x' * 3000000)"}})
        self.assertTrue(r["stdout_truncated"])
        self.assertLess(len(r["stdout"]), 3000000)

    def test_module_is_unsupported_before_dispatch(self):
        status, body = self.d.rpc("Run", {"module": {"wasm_base64": "AGFzbQEAAAA="}})
        self.assertEqual(status, 501, body)
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                         ("UNSUPPORTED", "false"))
        self.assertEqual(creates(self.fake.state()), [])


class MidRunFailures(E2BDaemon):
    def refused_internal(self, message):
        status, body = self.d.rpc("Run", message)
        self.assertEqual(status, 500, body)
        self.assertEqual(body["code"], "internal")
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]), ("INTERNAL", "true"))
        return body

    def test_envd_502_mid_run_is_internal_and_the_vm_is_deleted(self):
        self.fake.misbehave(fail={"match": "^POST /process.Process/Start", "status": 502,
                                  "times": 1})
        body = self.refused_internal({"snippet": {"language": "python", "code": "print(1)"}})
        self.assertIn("502", body["message"])
        self.assert_no_sandbox_left()

    def test_mcp_gives_an_infrastructure_failure_as_a_protocol_error(self):
        """MCP's third channel (docs/mcp.md): INTERNAL is a JSON-RPC error,
        never a tool result, with the reason and whether it was dispatched."""
        h = {"Content-Type": "application/json", "Authorization": "Bearer " + self.d.keys["alice"]}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}
        status, hdrs, _ = self.d.request("POST", "/mcp", json.dumps(init), h)
        self.assertEqual(status, 200)
        h["Mcp-Session-Id"] = hdrs["mcp-session-id"]
        self.d.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0",
                                                   "method": "notifications/initialized"}), h)
        self.fake.misbehave(fail={"match": "^POST /process.Process/Start", "status": 502,
                                  "times": 1})
        status, _, body = self.d.request("POST", "/mcp", json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_code", "arguments": {"language": "python",
                                                          "code": "print(1)"}}}), h)
        body = json.loads(body)
        self.assertEqual(status, 200, body)
        self.assertNotIn("result", body)
        self.assertEqual(body["id"], 2)
        self.assertEqual(body["error"]["code"], -32603, body)
        self.assertEqual(body["error"]["data"], {"reason": "INTERNAL", "dispatched": True})
        self.assertIn("502", body["error"]["message"])
        self.assert_no_sandbox_left()

    def test_upload_refused_is_internal_and_the_vm_is_deleted(self):
        self.fake.misbehave(fail={"match": "^POST /files", "status": 500, "times": 1})
        body = self.refused_internal({"project": {"files": [{"path": "a", "content": "x"}],
                                                  "steps": [{"argv": ["cat", "a"]}]}})
        self.assertIn("uploading", body["message"])
        self.assert_no_sandbox_left()

    def test_vm_gone_mid_run_is_internal_not_guest_output(self):
        self.fake.misbehave(vanish_during_process=True)
        body = self.refused_internal({"snippet": {"language": "python",
                                                  "code": "import time; time.sleep(5)"}})
        self.assertNotIn("stdout", body)
        self.assert_no_sandbox_left()

    def test_control_plane_5xx_makes_the_daemon_not_ready_until_e2b_answers(self):
        self.fake.misbehave(fail={"match": "^POST /sandboxes$", "status": 503, "times": 1})
        self.refused_internal({"snippet": {"language": "python", "code": "print(1)"}})
        status, _, body = self.d.request("GET", "/readyz")
        self.assertEqual(status, 503, body)
        # The reaper's next pass (every 5 s while E2B looks down) hears E2B again.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, _, body = self.d.request("GET", "/readyz")
            if status == 200:
                break
            time.sleep(0.5)
        self.assertEqual(status, 200, body)
        self.run_ok({"snippet": {"language": "python", "code": "print(1)"}})


class RunNetwork(E2BDaemon):
    """Every run's VM is read back, not only the startup VM."""

    def refused(self, words):
        status, body = self.d.rpc("Run", {"snippet": {"language": "python", "code": "print(1)"}})
        self.assertEqual(status, 500, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], "INTERNAL", body)
        self.assertIn(words, body["message"])
        requests = self.fake.state()["requests"]
        self.assertEqual(len(creates(self.fake.state())), 1, requests)
        self.assertFalse([r for r in requests if "process.Process" in r["path"] or
                          r["path"].startswith("/files")], "nothing ran in the VM")
        self.assert_no_sandbox_left()

    def test_a_run_vm_reported_open_is_refused_before_anything_runs(self):
        self.fake.misbehave(internet_open=True)
        self.refused("allowInternetAccess is not false")
        self.fake.reset()
        self.run_ok({"snippet": {"language": "python", "code": "print(1)"}})

    def test_a_run_vm_with_other_egress_rules_is_refused(self):
        self.fake.misbehave(detail_network={"allowPublicTraffic": False,
                                            "denyOut": ["0.0.0.0/0", "10.0.0.0/8"]})
        self.refused("network.denyOut is not")


class Reaper(E2BDaemon):
    def test_untracked_vm_of_this_instance_is_deleted_others_kept(self):
        inst = e2b_env(self.fake)["SANDBOX_E2B_INSTANCE"]
        ours = self.fake.plant({"plimsoll-instance": inst, "plimsoll-run": "lost"})
        theirs = self.fake.plant({"plimsoll-instance": inst + "-other", "plimsoll-run": "x"})
        deadline = time.monotonic() + 30
        ids = None
        while time.monotonic() < deadline:
            ids = [s["sandboxID"] for s in self.fake.state()["sandboxes"]]
            if ours not in ids:
                break
            time.sleep(0.5)
        self.assertNotIn(ours, ids)
        self.assertIn(theirs, ids)
        self.assertIn("reaped an untracked VM", self.d.log_text())

    def test_slow_create_is_not_reaped_while_in_flight(self):
        # Longer than a reaper interval: a pass sees the VM before the run
        # knows its id, and must spare it.
        self.fake.misbehave(create_delay_ms=7000)
        # The deadline leaves room for the 7 s create and the run after it.
        r = self.run_ok({"timeout_ms": 30000,
                         "snippet": {"language": "python", "code": "print('slow')"}})
        self.assertEqual(r["stdout"], "slow\n", r)


class StartupRefusals(unittest.TestCase):
    """The daemon serves nothing when its startup test fails, names the
    check, and deletes the VM it made."""

    @classmethod
    def setUpClass(cls):
        cls.fake = start_fake()

    @classmethod
    def tearDownClass(cls):
        cls.fake.stop()

    def setUp(self):
        self.fake.reset()

    def refused(self, words, **extra):
        d = Daemon(env=e2b_env(self.fake, **extra))
        with self.assertRaises(RuntimeError) as cm:
            d.start(timeout=120)
        d.stop()
        self.assertIn(words, str(cm.exception))
        self.assertIn("startup refused", str(cm.exception))
        deadline = time.monotonic() + 10
        while self.fake.state()["sandboxes"] and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.fake.state()["sandboxes"], [])
        return str(cm.exception)

    def test_answer_without_envd_token(self):
        self.fake.misbehave(omit="envdAccessToken")
        self.refused("lacks envdAccessToken")

    def test_answer_without_traffic_token(self):
        self.fake.misbehave(omit="trafficAccessToken")
        self.refused("lacks trafficAccessToken")

    def test_other_resources(self):
        self.fake.misbehave(resources={"cpuCount": 1, "memoryMB": 1024})
        self.refused("the settings expect 2 and 512")

    def test_open_egress(self):
        lst = Listener(self.fake)
        try:
            self.fake.misbehave(egress_open=True)
            self.refused("egress is open", SANDBOX_E2B_EGRESS_PROBE=lst.target)
            self.assertGreater(lst.accepted, 0)
        finally:
            lst.close()

    def test_closed_egress_passes_with_the_same_probe(self):
        lst = Listener(self.fake)
        try:
            with Daemon(env=e2b_env(self.fake, SANDBOX_E2B_EGRESS_PROBE=lst.target)) as d:
                status, desc = d.rpc("Describe", {})
                self.assertIn(lst.target, " ".join(desc["startup_checks"]))
            self.assertEqual(lst.accepted, 0)
        finally:
            lst.close()

    def test_the_proof_runs_the_cleanup_between_its_steps(self):
        # Exactly a project step's path: the guest's uid is learned first
        # (one step, nothing after it), then the test project's three
        # steps with the cleanup, as root, between each two.
        d = Daemon(env=e2b_env(self.fake)).start(timeout=120)
        try:
            starts = [r for r in self.fake.state()["requests"]
                      if r["path"] == "/process.Process/Start"]
        finally:
            d.stop()
        self.assertEqual([r.get("user") for r in starts],
                         ["user", "user", "root", "user", "root", "user"], starts)

    # The VM's own detail must report the network the create sent; the live
    # probe (192.0.2.1:80, which nothing answers) cannot tell.
    def test_detail_says_the_internet_is_open(self):
        self.fake.misbehave(internet_open=True)
        self.refused("allowInternetAccess is not false")

    def test_detail_says_nothing_of_the_internet(self):
        self.fake.misbehave(detail_internet=None)
        self.refused("allowInternetAccess is not set")

    def test_detail_denies_less_than_all(self):
        self.fake.misbehave(detail_network={"allowPublicTraffic": False,
                                            "denyOut": ["10.0.0.0/8"]})
        self.refused("network.denyOut is not")

    def test_detail_allows_an_address_out(self):
        self.fake.misbehave(detail_network={"allowPublicTraffic": False,
                                            "denyOut": ["0.0.0.0/0"], "allowOut": ["8.8.8.8/32"]})
        self.refused("network.allowOut is not empty")

    def test_detail_without_a_network(self):
        self.fake.misbehave(detail_network=None)
        self.refused("it reports no network")

    def test_detail_with_public_traffic(self):
        self.fake.misbehave(detail_network={"denyOut": ["0.0.0.0/0"]})
        self.refused("network.allowPublicTraffic is not false")

    def test_detail_with_transform_rules(self):
        self.fake.misbehave(detail_network={"allowPublicTraffic": False, "denyOut": ["0.0.0.0/0"],
                                            "rules": {"example.com": [{"transform": {}}]}})
        self.refused("network.rules is not empty")

    def test_wrong_key(self):
        text = self.refused("401", E2B_API_KEY="e2b_wrong")
        self.assertNotIn("e2b_wrong", text)

    def test_unknown_template(self):
        self.refused("refused the create", SANDBOX_E2B_TEMPLATE="no-such-template")


if __name__ == "__main__":
    unittest.main()
