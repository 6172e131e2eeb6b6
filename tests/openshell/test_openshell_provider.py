# SPDX-License-Identifier: Apache-2.0
"""The openshell provider against the local fake OpenShell gateway
(tests/fakes/openshell), a real gRPC server whose sandboxes are real
locked-down containers: the real daemon over HTTP, its startup test and
every refusal of it, runs of each payload, the read-back before every run
(each way the gateway can report a sandbox other than the one asked for),
the deadline, the caps, the upload in chunks, the reaper, readiness, and
the gateway misbehaving (a stream that hangs after the exit, a sandbox
stuck in ERROR, a failed call).

Run: cd tests/openshell && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_openshell_provider
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.grants import TOKEN, GrantFiles, grant_env, profile, token_cred  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402
from plimsoll_test.hosted_guests import HostedArtifacts, HostedRuns, HostedStreams  # noqa: E402
from plimsoll_test.openshell import FakeOpenShell  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

IMAGE = "plimsoll/project:latest"
INSTANCE = "t%d" % os.getpid()


def osh_env(fake, **extra):
    env = {
        "SANDBOX_PROVIDER": "openshell",
        "SANDBOX_OPENSHELL_URL": "http://" + fake.address,
        "SANDBOX_OPENSHELL_TOKEN": fake.admin_token,
        "SANDBOX_OPENSHELL_IMAGE": IMAGE,
        "SANDBOX_OPENSHELL_INSTANCE": INSTANCE,
        "SANDBOX_OPENSHELL_CPU": "500m",
        "SANDBOX_OPENSHELL_MEMORY_MIB": "256",
        # Nothing on this machine answers it, open egress or not.
        "SANDBOX_OPENSHELL_EGRESS_PROBE": "192.0.2.1:80",
        "SANDBOX_OPENSHELL_REAP_INTERVAL_S": "5",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def py(code, **extra):
    msg = {"snippet": {"language": "python", "code": code}}
    msg.update(extra)
    return msg


class OpenShellDaemon(HostedRuns, unittest.TestCase):
    """One fake and one daemon for the class."""
    TIER = "container"
    EXTRA = {}
    MISBEHAVE = {}   # set on the fake before the daemon starts

    @classmethod
    def setUpClass(cls):
        # A grant profile the daemon knows (test_openshell_grants drives grants).
        cls.grants_dir = tempfile.mkdtemp(prefix="plimsoll-osh-grants-")
        path = os.path.join(cls.grants_dir, "grants.json")
        with open(path, "w") as f:
            json.dump({"profiles": {"items": profile("http://127.0.0.1:9", token_cred())}}, f)
        cls.fake = FakeOpenShell().start()
        try:
            if cls.MISBEHAVE:
                cls.fake.misbehave(**cls.MISBEHAVE)
            cls.d = Daemon(env=osh_env(cls.fake, PLIMSOLL_GRANTS_FILE=path, ITEMS_TOKEN=TOKEN,
                                       **cls.EXTRA)).start(timeout=180)
        except Exception:
            cls.fake.stop()
            shutil.rmtree(cls.grants_dir, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            shutil.rmtree(cls.grants_dir, ignore_errors=True)
            left = cls.fake.stop()
            assert left == [], left

    def setUp(self):
        self.fake.reset()

    def live(self):
        return [s for s in self.fake.state()["sandboxes"] if not s["deleted"]]


class Runs(HostedStreams, HostedArtifacts, OpenShellDaemon):
    def test_describe(self):
        status, d = self.d.rpc("Describe", {})
        self.assertEqual((status, d["provider"], d["isolation"]), (200, "openshell", "container"), d)
        self.assertFalse(d.get("supports_sessions", False), d)
        self.assertFalse(d.get("supports_modules", False), d)
        self.assertTrue(d["operations"]["snippet"]["grants"], d)  # test_openshell_grants
        self.assertFalse(d["operations"]["module"].get("supported", False), d)
        self.assertEqual(sorted(d["operations"]["snippet"]["languages"]), ["javascript", "python"])
        self.assertFalse(d["limits"].get("memory_budget_applies", False), d)
        checks = " | ".join(d["startup_checks"])
        for phrase in ("one compute driver, docker", "read back as asked", "not root",
                       "writes land only under /tmp", "loopback is the only interface",
                       "cgroup holds the memory and CPU limits",
                       "a child cannot read its parent's memory",
                       "after plimsoll's cleanup none of its processes was left",
                       "the gateway's hash of the policy sent", "delete read back"):
            self.assertIn(phrase, checks)

    def test_snippets_of_each_language(self):
        b = self.run_ok(py("import sys; print(sys.stdin.read().upper())",
                           **{"snippet": {"language": "python", "stdin": "hi",
                                          "code": "import sys; print(sys.stdin.read().upper())"}}))
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "HI\n"), b)
        b = self.run_ok({"snippet": {"language": "javascript",
                                     "code": "console.error('e'); process.exit(3)"}})
        self.assertEqual((b["exit_code"], b["stderr"]), (3, "e\n"), b)
        # Nothing measures what a run cost here, and the answer says so.
        self.assertNotIn("usage", b)
        self.assertTrue(b["usage_absent"].startswith("openshell reports no per-run usage"), b)
        self.assert_no_sandbox_left()

    def test_the_sandbox_is_labelled_and_limited_as_asked(self):
        b = self.run_ok(py(
            "import os\n"
            "def rd(p):\n"
            "    try:\n"
            "        return open(p).read().strip()\n"
            "    except OSError:\n"
            "        return None\n"
            "print(rd('/sys/fs/cgroup/memory.max') or rd('/sys/fs/cgroup/memory/memory.limit_in_bytes'))\n"
            "print(os.getuid() != 0)\n", timeout_ms=9000))
        self.assertEqual(b["stdout"], "%d\nTrue\n" % (256 << 20), b)
        made = [s for s in self.fake.state()["sandboxes"] if s["name"] == b["sandbox_name"]]
        self.assertEqual(len(made), 1, made)
        labels = made[0]["labels"]
        self.assertEqual(sorted(labels), ["plimsoll", "plimsoll.deadline", "plimsoll.instance",
                                          "plimsoll.run"], labels)
        self.assertEqual((labels["plimsoll"], labels["plimsoll.instance"]), ("1", INSTANCE))
        # The declared lifetime: the run's deadline, in Unix seconds.
        self.assertLessEqual(abs(int(labels["plimsoll.deadline"]) - (time.time() + 9)), 15, labels)
        self.assertTrue(b["sandbox_name"].startswith("pl-") and len(b["sandbox_name"]) == 19, b)

    def test_project_steps_files_and_a_failing_step(self):
        b = self.run_ok({"project": {
            "files": [{"path": "src/a.py", "content": "print('a')"},
                      {"path": "data/x.txt", "content": "xyz"}],
            "steps": [{"name": "one", "argv": ["python3", "src/a.py"]},
                      {"name": "two", "argv": ["sh", "-c", "cat data/x.txt; pwd; exit 4"]},
                      {"name": "three", "argv": ["true"]}]}})
        self.assertEqual([s["name"] for s in b["steps"]], ["one", "two"], b)
        self.assertEqual(b["steps"][0]["stdout"], "a\n")
        self.assertEqual(b["steps"][1]["stdout"], "xyz/tmp/plimsoll/project\n")
        self.assertEqual(b["exit_code"], 4, b)
        self.assert_no_sandbox_left()

    def test_a_large_upload_goes_in_chunks(self):
        # Above the 768 KiB chunk and the gateway's 1 MiB message: chunked.
        blob = os.urandom(1200 * 1024).hex()
        digest = hashlib.sha256(blob.encode()).hexdigest()
        b = self.run_ok({"timeout_ms": 60000, "project": {
            "files": [{"path": "big.txt", "content": blob}],
            "steps": [{"name": "sum", "argv": ["sha256sum", "big.txt"]},
                      {"name": "left", "argv": ["sh", "-c", "ls -a /tmp | grep -c plimsoll-upload"]}]}})
        self.assertEqual(b["steps"][0]["stdout"].split()[0], digest, b)
        self.assertEqual(b["steps"][1]["stdout"], "0\n", b)
        chunks = [e["stdin_bytes"] for e in self.fake.state()["execs"] if e["stdin_bytes"]]
        self.assertGreaterEqual(len(chunks), 4, chunks)
        self.assertLess(max(chunks), 1 << 20, chunks)

    def test_deadline_ends_the_run_and_deletes(self):
        t = time.monotonic()
        # 5 s: the sandbox must be ready inside the deadline for the loop to
        # start (a slow CI day made 2 s too short for the fake's container).
        b = self.run_ok({"timeout_ms": 5000,
                         "snippet": {"language": "javascript", "code": "for(;;){}"}})
        self.assertEqual((b["outcome"], b["exit_code"], b["timed_out"]), ("timed_out", 124, True), b)
        self.assertLess(time.monotonic() - t, 15)
        self.assert_no_sandbox_left()

    def test_output_is_capped(self):
        b = self.run_ok(py("import sys; sys.stdout.write('x' * 3000000)"))
        self.assertTrue(b["stdout_truncated"], {k: v for k, v in b.items() if k != "stdout"})
        self.assertLessEqual(len(b["stdout"]), 1 << 20)

    def test_modules_are_refused_before_dispatch(self):
        before = self.fake.state()["calls"].get("CreateSandbox", {}).get("count", 0)
        self.refusal({"module": {"wasm_base64": "AGFzbQEAAAA="}}, "UNSUPPORTED", False)
        self.assertEqual(self.fake.state()["calls"].get("CreateSandbox", {}).get("count", 0), before)

    def test_a_grant_whose_relay_cannot_start_is_infrastructure(self):
        # The gateway refuses the relay's exec: nothing of the guest's ran,
        # the sandbox is deleted, and the next run is fine.
        self.fake.misbehave(fail_next={"rpc": "ExecSandboxInteractive", "code": "UNAVAILABLE",
                                       "count": 1})
        body = self.refusal(py("print(1)", grant_profile="items"), "INTERNAL", True)
        self.assertIn("the grant's relay did not start", body["message"])
        self.assertIn("UNAVAILABLE", body["message"])
        self.assert_no_sandbox_left()
        self.run_ok(py("print(2)"))

    def test_readyz_asks_the_gateway_at_most_every_5_seconds(self):
        health = lambda: self.fake.state()["calls"].get("Health", {}).get("count", 0)  # noqa: E731
        time.sleep(5.2)  # past the startup's answer
        before = health()
        for _ in range(30):
            status, _, _ = self.d.request("GET", "/readyz")
            self.assertEqual(status, 200)
        self.assertLessEqual(health() - before, 1)
        self.assertEqual(self.live(), [])  # and it created nothing

    def test_a_hanging_exec_stream_does_not_hold_the_run(self):
        self.fake.misbehave(exec_hang_after_exit=True)
        t = time.monotonic()
        b = self.run_ok(py("print('done')", timeout_ms=20000))
        self.assertEqual((b["stdout"], b["exit_code"]), ("done\n", 0), b)
        self.assertLess(time.monotonic() - t, 10, b)
        self.assert_no_sandbox_left()

    def test_an_exit_that_never_comes_is_the_deadline(self):
        # The gateway ends the call at the deadline plimsoll sent
        # (DEADLINE_EXCEEDED) before any exit: the command met its deadline.
        self.fake.misbehave(exec_withhold_exit="main.py")  # the snippet's exec, not the upload
        b = self.run_ok(py("print(1)", timeout_ms=5000))  # as above: the sandbox first
        self.assertEqual((b["exit_code"], b["timed_out"], b["outcome"]), (124, True, "timed_out"), b)
        self.fake.reset()
        self.assert_no_sandbox_left()

    def test_a_sandbox_stuck_in_error_is_infrastructure(self):
        self.fake.misbehave(stuck_error=True)
        body = self.refusal(py("print(1)"), "INTERNAL", True)
        self.assertIn("ERROR", str(body))
        self.assert_no_sandbox_left()

    def test_a_failed_create_is_infrastructure_and_readiness_recovers(self):
        self.fake.misbehave(fail_next={"rpc": "CreateSandbox", "code": "UNAVAILABLE", "count": 1})
        body = self.refusal(py("print(1)"), "INTERNAL", True)
        self.assertIn("UNAVAILABLE", str(body))
        self.run_ok(py("print(1)"))


class ReadBack(OpenShellDaemon):
    """Each way a gateway can report a sandbox other than the one asked for:
    refused, typed, nothing dispatched, nothing run in it, and deleted."""

    def drifted(self, **misbehaviour):
        self.fake.misbehave(**misbehaviour)
        execs_before = self.fake.state()["exec_count"]
        body = self.refusal(py("print('ran')"), "NOT_READY", False)
        self.assertIn("not what plimsoll asked for", str(body))
        self.assertEqual(self.fake.state()["exec_count"], execs_before, "something ran in it")
        self.assert_no_sandbox_left()
        self.fake.reset()
        self.run_ok(py("print(1)"))  # and the next run is fine
        return str(body)

    def test_labels(self):
        self.assertIn("labels", self.drifted(drift_labels=True))

    def test_image(self):
        self.assertIn("image", self.drifted(drift_image=True))

    def test_limits(self):
        self.assertIn("resources", self.drifted(drift_limits=True))

    def test_policy_hash(self):
        self.assertIn("hash", self.drifted(drift_policy_hash=True))

    def test_attached_credentials(self):
        self.fake.provider("leaky", credentials={"API_KEY": "sk-secret"})
        self.assertIn("provider credentials", self.drifted(attach_provider="leaky"))


class Reaper(OpenShellDaemon):
    def test_ours_now_anothers_after_its_lifetime_and_never_the_unlabelled(self):
        now = int(time.time())
        ours = self.fake.plant(labels={"plimsoll": "1", "plimsoll.instance": INSTANCE,
                                       "plimsoll.run": "r1", "plimsoll.deadline": str(now + 3600)})
        live = self.fake.plant(labels={"plimsoll": "1", "plimsoll.instance": "other",
                                       "plimsoll.run": "r2", "plimsoll.deadline": str(now + 60)})
        # Past its deadline, but not past the 5 minutes' grace.
        grace = self.fake.plant(labels={"plimsoll": "1", "plimsoll.instance": "other",
                                        "plimsoll.run": "r3", "plimsoll.deadline": str(now - 200)})
        dead = self.fake.plant(labels={"plimsoll": "1", "plimsoll.instance": "other",
                                       "plimsoll.run": "r4", "plimsoll.deadline": str(now - 400)})
        nolife = self.fake.plant(labels={"plimsoll": "1", "plimsoll.instance": "other",
                                         "plimsoll.run": "r5"})
        mine_not = self.fake.plant(labels={"app": "someone-else"})
        gone = {ours["name"], dead["name"], nolife["name"]}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            names = {s["name"] for s in self.live()}
            if not names & gone:
                break
            time.sleep(0.5)
        names = {s["name"] for s in self.live()}
        self.assertEqual(names & gone, set())
        self.assertEqual(names, {live["name"], grace["name"], mine_not["name"]})
        for s in (live, grace, mine_not):
            self.fake.delete(s["name"])


class Tls(unittest.TestCase):
    """The gateway over TLS with client certificates (mutual TLS): the
    daemon verifies the gateway's certificate against the CA it was given
    and presents its own; without either, nothing starts."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="plimsoll-osh-tls-")
        for name, extra in (("server", ["-addext", "subjectAltName=IP:127.0.0.1"]),
                            ("client", []), ("stranger", [])):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                            "/CN=" + name, "-keyout", cls.path(name + ".key"),
                            "-out", cls.path(name + ".pem")] + extra,
                           check=True, capture_output=True)
        cls.fake = FakeOpenShell(tls_cert=cls.path("server.pem"), tls_key=cls.path("server.key"),
                                 client_ca=cls.path("client.pem"),
                                 client_cert=cls.path("client.pem"),
                                 client_key=cls.path("client.key")).start()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    @classmethod
    def tearDownClass(cls):
        left = cls.fake.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert left == [], left

    def env(self, **extra):
        env = osh_env(self.fake, SANDBOX_OPENSHELL_URL="https://" + self.fake.address,
                      SANDBOX_OPENSHELL_CA_FILE=self.path("server.pem"),
                      SANDBOX_OPENSHELL_CERT_FILE=self.path("client.pem"),
                      SANDBOX_OPENSHELL_KEY_FILE=self.path("client.key"))
        env.update(extra)
        return env

    def test_a_run_and_a_grant_over_mutual_tls(self):
        # The grant's relay holds its own bidirectional stream (nghttp2 on
        # libcurl's TLS connection): the same CA, certificate and ALPN.
        files, up = GrantFiles(), Upstream(Check(token=TOKEN))
        files.write({"items": profile(up.url, token_cred())})
        d = Daemon(env=self.env(**grant_env(files.path))).start(timeout=180)
        try:
            status, b = d.rpc("Run", py("print(6 * 7)"))
            self.assertEqual((status, b.get("stdout"), b.get("isolation")), (200, "42\n", "container"), b)
            status, b = d.rpc("Run", py(
                "import http.client, os, socket\n"
                "class C(http.client.HTTPConnection):\n"
                "    def connect(self):\n"
                "        self.sock = socket.socket(socket.AF_UNIX)\n"
                "        self.sock.connect(os.environ['PLIMSOLL_BROKER_SOCKET'])\n"
                "c = C('b'); c.request('GET', '/items/8'); print(c.getresponse().status)\n",
                grant_profile="items"))
            self.assertEqual((status, b.get("stdout")), (200, "200\n"), b)
            self.assertEqual([e["path"] for e in up.take()], ["/items/8"])
        finally:
            d.stop()
            up.close()
            files.close()

    def test_no_start_without_the_gateways_ca_or_a_client_certificate(self):
        for what, extra in (("the wrong CA", {"SANDBOX_OPENSHELL_CA_FILE": self.path("stranger.pem")}),
                            ("another client certificate",
                             {"SANDBOX_OPENSHELL_CERT_FILE": self.path("stranger.pem"),
                              "SANDBOX_OPENSHELL_KEY_FILE": self.path("stranger.key")}),
                            ("h2c to a TLS gateway",
                             {"SANDBOX_OPENSHELL_URL": "http://" + self.fake.address,
                              "SANDBOX_OPENSHELL_CA_FILE": "", "SANDBOX_OPENSHELL_CERT_FILE": "",
                              "SANDBOX_OPENSHELL_KEY_FILE": ""})):
            with self.subTest(what):
                with self.assertRaises(RuntimeError) as cm:
                    Daemon(env=self.env(**extra)).start(timeout=60)
                self.assertIn("Health", str(cm.exception))
        # Nothing was made (the positive test's last sandbox may still be going).
        self.assertEqual(self.fake.state()["calls"].get("CreateSandbox", {}).get("count", 0),
                         self.creates_before)

    def setUp(self):
        self.creates_before = self.fake.state()["calls"].get("CreateSandbox", {}).get("count", 0)


class GroupKill(OpenShellDaemon):
    """A gateway that ends only a timed-out or cancelled command's process
    group (upstream documents only the 124, not what else it ends): the
    daemon starts, its startup proof ending the rest with plimsoll's own
    cleanup, and runs and sessions work."""
    EXTRA = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_IDLE": "30"}
    MISBEHAVE = {"exec_kill": "group"}

    def setUp(self):
        self.fake.reset()
        self.fake.misbehave(**self.MISBEHAVE)

    def test_started_and_runs(self):
        status, d = self.d.rpc("Describe", {})
        self.assertIn("after plimsoll's cleanup none of its processes was left",
                      " | ".join(d["startup_checks"]))
        self.assertTrue(d["supports_sessions"], d)
        self.assertEqual(self.run_ok(py("print(6 * 7)"))["stdout"], "42\n")
        status, body = self.d.rpc("OpenSession", {})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        try:
            status, body = self.d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "python", "code": "print(6 * 7)"}})
            self.assertEqual(status, 200, body)
            self.assertIn("42", json.dumps(body))
        finally:
            self.d.rpc("CloseSession", {"session_id": sid})


class Startup(unittest.TestCase):
    """The startup test refuses each gateway it cannot trust."""

    def refuse(self, fake, phrase, **extra):
        d = Daemon(env=osh_env(fake, **extra))
        with self.assertRaises(RuntimeError) as cm:
            d.start(timeout=120)
        self.assertIn(phrase, str(cm.exception))
        deadline = time.monotonic() + 10
        while [s for s in fake.state()["sandboxes"] if not s["deleted"]] and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual([s["name"] for s in fake.state()["sandboxes"] if not s["deleted"]], [])
        return str(cm.exception)

    def test_refusals(self):
        with FakeOpenShell() as fake:
            with self.subTest("another compute driver"):
                fake.misbehave(driver="kubernetes")
                self.refuse(fake, "compute driver must be docker")
                fake.reset()
            with self.subTest("GetGatewayInfo's own status is not healthy"):
                fake.misbehave(gateway_status="DEGRADED")
                self.refuse(fake, "GetGatewayInfo reports it degraded, not healthy")
                fake.reset()
            with self.subTest("the driver may not be read"):
                fake.misbehave(driver_denied=True)
                self.refuse(fake, "PERMISSION_DENIED")
                fake.reset()
            with self.subTest("a token that is not an admin's"):
                self.refuse(fake, "PERMISSION_DENIED", SANDBOX_OPENSHELL_TOKEN=fake.token)
            with self.subTest("a wrong token"):
                msg = self.refuse(fake, "UNAUTHENTICATED", SANDBOX_OPENSHELL_TOKEN="wrong-token-x")
                self.assertNotIn(fake.admin_token, msg)
            with self.subTest("a sandbox stuck in ERROR"):
                fake.misbehave(stuck_error=True)
                self.refuse(fake, "went to ERROR")
                fake.reset()
            with self.subTest("a startup sandbox whose policy hash is not upstream's"):
                # Not the hash upstream's gateway computes of the policy sent
                # (policy.rs:5704): refused, not taken as the one to match.
                fake.misbehave(drift_policy_hash=True)
                self.refuse(fake, "its policy's hash is")
                fake.reset()
            with self.subTest("a startup sandbox read back otherwise"):
                fake.misbehave(drift_image=True)
                self.refuse(fake, "not what plimsoll asked for")
                fake.reset()
            with self.subTest("nothing listens there"):
                self.refuse(fake, "SANDBOX_PROVIDER=openshell",
                            SANDBOX_OPENSHELL_URL="http://127.0.0.1:1")
            with self.subTest("settings"):
                self.refuse(fake, "SANDBOX_OPENSHELL_CPU", SANDBOX_OPENSHELL_CPU="half")
            self.assertEqual(fake.stop(), [])


if __name__ == "__main__":
    unittest.main()
