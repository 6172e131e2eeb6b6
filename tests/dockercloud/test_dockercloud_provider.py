# SPDX-License-Identifier: Apache-2.0
"""The dockercloud provider against the local fake of the Docker Sandboxes
API v1 (tests/fakes/dockercloud), whose sandboxes are real locked-down
containers: the real daemon over HTTP, its startup test and every refusal
of it, runs of each payload, the seal read back before every run, the
deadline, the caps, the reaper, and the service misbehaving mid-run (a
stale etag, a 202 to poll, an expired access token, a 502).

Run: cd tests/dockercloud && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_dockercloud_provider
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.dockercloud import FakeDockerCloud  # noqa: E402
from plimsoll_test.grants import free_port  # noqa: E402
from plimsoll_test.harness import Daemon, error_info  # noqa: E402
from plimsoll_test.hosted_guests import HostedArtifacts, HostedRuns, HostedStreams  # noqa: E402

IMAGE = "plimsoll/project:latest"


def dc_env(fake, **extra):
    env = {
        "SANDBOX_PROVIDER": "dockercloud",
        "SANDBOX_DOCKERCLOUD_ACCOUNT": fake.account,
        "SANDBOX_DOCKERCLOUD_TOKEN": fake.secret,
        "SANDBOX_DOCKERCLOUD_AUTH_URL": fake.auth_url + "/v2/auth/token",
        "SANDBOX_DOCKERCLOUD_API_URL": fake.url,
        "SANDBOX_DOCKERCLOUD_IMAGE": IMAGE,
        "SANDBOX_DOCKERCLOUD_INSTANCE": "t%d" % os.getpid(),
        # Nothing on this machine answers it, open egress or not.
        "SANDBOX_DOCKERCLOUD_EGRESS_PROBE": "192.0.2.1:80",
        "SANDBOX_DOCKERCLOUD_REAP_INTERVAL_S": "5",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


def requests_of(fake, method, path_start, exact=False):
    return [r for r in fake.state()["requests"]
            if r["method"] == method and (r["path"].split("?")[0] == path_start if exact else
                                          r["path"].split("?")[0].startswith(path_start))]


class DockerCloudDaemon(HostedRuns, unittest.TestCase):
    """One fake and one daemon for the class."""
    TIER = "vm"
    EXTRA = {}
    FAKE = {}   # the fake's variant (FakeDockerCloud's keywords)

    @classmethod
    def setUpClass(cls):
        cls.fake = FakeDockerCloud(secret="dckr_pat_" + os.urandom(8).hex(), **cls.FAKE).start()
        try:
            cls.d = Daemon(env=dc_env(cls.fake, **cls.EXTRA)).start(timeout=120)
        except Exception:
            cls.fake.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.d.stop()
        finally:
            left = cls.fake.stop()
            assert left == [], left

    def setUp(self):
        self.fake.reset()

    def live(self):
        return self.fake.state()["sandboxes"]


class Runs(HostedStreams, HostedArtifacts, DockerCloudDaemon):
    def test_describe(self):
        status, d = self.d.rpc("Describe", {})
        self.assertEqual((status, d["provider"], d["isolation"]), (200, "dockercloud", "vm"), d)
        self.assertFalse(d.get("supports_sessions", False), d)
        self.assertFalse(d.get("supports_modules", False), d)
        self.assertFalse(d["operations"]["snippet"].get("grants", False), d)
        self.assertFalse(d["operations"]["module"].get("supported", False), d)
        self.assertEqual(sorted(d["operations"]["snippet"]["languages"]), ["javascript", "python"])
        # The run count applies; the memory budget does not (Docker's machines).
        self.assertFalse(d["limits"].get("memory_budget_applies", False), d)
        checks = " | ".join(d["startup_checks"])
        for phrase in ("read, network-policy-read and delete", "deny-all with nothing allowed",
                       "with the cleanup between its steps", "not root", "nothing reached",
                       "delete read back"):
            self.assertIn(phrase, checks)

    def test_snippets_of_each_language(self):
        b = self.run_ok({"snippet": {"language": "python",
                                     "code": "import sys; print(sys.stdin.read().upper())",
                                     "stdin": "hi"}})
        self.assertEqual((b["exit_code"], b["stdout"]), (0, "HI\n"), b)
        b = self.run_ok({"snippet": {"language": "javascript",
                                     "code": "console.error('e'); process.exit(3)"}})
        self.assertEqual((b["exit_code"], b["stderr"]), (3, "e\n"), b)
        # Nothing measures what a run cost here, and the answer says so.
        self.assertNotIn("usage", b)
        self.assertTrue(b["usage_absent"].startswith("dockercloud reports no per-run usage"), b)
        self.assert_no_sandbox_left()

    def test_project_steps_files_and_a_failing_step(self):
        b = self.run_ok({"project": {
            "files": [{"path": "src/a.py", "content": "print(open('data.txt').read())"},
                      {"path": "data.txt", "content": "hello"}],
            "steps": [{"name": "run", "argv": ["python3", "src/a.py"]},
                      {"name": "pwd", "argv": ["pwd"]},
                      {"name": "missing", "argv": ["no-such-program"]},
                      {"name": "never", "argv": ["true"]}]}})
        self.assertEqual([s["name"] for s in b["steps"]], ["run", "pwd", "missing"], b)
        self.assertEqual(b["steps"][0]["stdout"], "hello\n")
        self.assertEqual(b["steps"][1]["stdout"], "/tmp/plimsoll/project\n")
        self.assertEqual((b["steps"][2]["exit_code"], b["exit_code"]), (127, 127), b)

    def test_deadline_kills_and_deletes(self):
        t0 = time.monotonic()
        # 10 s: the process must start before the deadline for the kill to
        # be what is shown.  4 s was too short once on a loaded CI: the
        # sandbox and the upload (1.75 s alone) took it all, and the run
        # rightly ended as timed out with no process to kill.
        b = self.run_ok({"snippet": {"language": "python", "code": "import time; time.sleep(60)"},
                         "timeout_ms": 10000})
        self.assertLess(time.monotonic() - t0, 40)
        self.assertEqual((b["exit_code"], b["timed_out"], b["outcome"]), (124, True, "timed_out"))
        calls = requests_of(self.fake, "POST", "/endpoints/")
        self.assertTrue(any(r["path"].endswith("/v1/processes") for r in calls),
                        ("no process started inside the deadline", calls))
        self.assertTrue(any(r["path"].endswith("/signal") for r in calls), calls)
        self.assert_no_sandbox_left()

    def test_output_is_capped(self):
        b = self.run_ok({"snippet": {"language": "python",
                                     "code": "print('x' * 3000000)"}})
        self.assertTrue(b["stdout_truncated"], {k: v for k, v in b.items() if k != "stdout"})
        self.assertEqual(len(b["stdout"]), 1048576)

    def test_modules_are_unsupported_and_readyz_creates_nothing(self):
        status, body = self.d.rpc("Run", {"module": {"wasm_base64": "AGFzbQEAAAA="}})
        self.assertEqual(error_info(body)[0]["reason"], "UNSUPPORTED", body)
        for _ in range(5):
            self.assertEqual(self.d.request("GET", "/readyz")[0], 200)
        self.assertEqual(requests_of(self.fake, "POST", "/v1/sandboxes", exact=True), [])

    def test_every_sandbox_is_named_with_the_instance_prefix(self):
        seen = []
        done = threading.Event()

        def watch():
            while not done.is_set():
                seen.extend(self.fake.state()["sandboxes"])
                time.sleep(0.1)
        t = threading.Thread(target=watch)
        t.start()
        try:
            self.run_ok({"snippet": {"language": "python", "code": "import time; time.sleep(1)"}})
        finally:
            done.set()
            t.join()
        self.assertTrue(seen)
        for sbx in seen:
            self.assertTrue(sbx["displayName"].startswith("pl-t%d-" % os.getpid()), sbx)
            self.assertEqual(sbx["labels"].get("plimsoll-instance"), "t%d" % os.getpid(), sbx)
            self.assertEqual((sbx["cpus"], sbx["memoryMib"]), (2, 4096), sbx)
        creates = requests_of(self.fake, "POST", "/v1/sandboxes", exact=True)
        self.assertEqual(len(creates), 1)
        # The create is retry-safe; the delete names the etag just read.
        self.assertGreaterEqual(len(creates[0].get("idempotencyKey", "")), 16, creates)
        deletes = requests_of(self.fake, "DELETE", "/v1/sandboxes/")
        self.assertEqual(len(deletes), 1, deletes)
        self.assertTrue(deletes[0].get("ifMatch", "").startswith('"'), deletes)


class MainProcessAsGuest(DockerCloudDaemon):
    """A service whose sandbox's main process (PID 1) runs as the exec's
    user, which the API allows (it says nothing of that process's user):
    the cleanup between steps spares it and ends the rest."""
    FAKE = {"main_user": "agent"}

    def test_the_main_process_is_the_guests(self):
        b = self.run_ok({"snippet": {"language": "python", "code": (
            "import os\n"
            "uid = [l.split()[1] for l in open('/proc/1/status') if l.startswith('Uid:')][0]\n"
            "print(uid == str(os.getuid()))\n")}})
        self.assertEqual(b["stdout"], "True\n", b)

    def test_a_three_step_project(self):
        b = self.run_ok({"project": {"steps": [
            {"name": "leave", "argv": ["python3", "-c", (
                "import subprocess\n"
                "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
                "print('left')\n")]},
            {"name": "look", "argv": ["python3", "-c", (
                "import os\n"
                "left = [p for p in os.listdir('/proc') if p.isdigit() and\n"
                "        open('/proc/%s/cmdline' % p, 'rb').read() == b'sleep\\x00600\\x00']\n"
                "print(left or 'none')\n")]},
            {"name": "third", "argv": ["python3", "-c", "import os; print(os.getuid())"]}]}})
        self.assertEqual([(s["name"], s["exit_code"], s["stdout"]) for s in b["steps"]],
                         [("leave", 0, "left\n"), ("look", 0, "none\n"), ("third", 0, "1000\n")],
                         b)
        self.assertEqual((b["outcome"], b["exit_code"]), ("completed", 0), b)
        self.assert_no_sandbox_left()


class MainProcessAsGuestUnderInit(MainProcessAsGuest):
    """The same, the main process of the guest's user under an init of
    root's (PID 1): the cleanup spares what the sandbox ran before any
    code, and the main process outlives every step."""
    FAKE = {"main_user": "init-agent"}

    def test_the_main_process_is_the_guests(self):
        b = self.run_ok({"snippet": {"language": "python", "code": (
            "import os\n"
            "kids = open('/proc/1/task/1/children').read().split()\n"
            "uids = [[l.split()[1] for l in open('/proc/%s/status' % k) if l.startswith('Uid:')][0]\n"
            "        for k in kids]\n"
            "print(str(os.getuid()) in uids)\n")}})
        self.assertEqual(b["stdout"], "True\n", b)


class Seal(DockerCloudDaemon):
    def test_an_open_policy_is_refused_before_any_code(self):
        self.fake.misbehave(policy_open=True)
        body = self.refusal({"snippet": {"language": "python", "code": "print('ran')"}},
                            "NOT_READY", False)
        self.assertIn("not deny-all", body["message"])
        # Nothing ran in it, and it is gone.
        self.assertEqual(requests_of(self.fake, "POST", "/endpoints/"), [])
        self.assert_no_sandbox_left()

    def test_a_policy_that_allows_one_network_is_refused(self):
        self.fake.set_account_policy(allow=["198.51.100.0/24"])
        try:
            self.fake.misbehave(policy_allow=["198.51.100.7/32"])
            body = self.refusal({"snippet": {"language": "python", "code": "print('ran')"}},
                                "NOT_READY", False)
            self.assertIn("198.51.100.7", body["message"])
            self.assert_no_sandbox_left()
        finally:
            self.fake.set_account_policy()


class Misbehaviour(DockerCloudDaemon):
    def test_a_stale_etag_is_read_again(self):
        self.fake.misbehave(stale_etag=1)
        self.run_ok({"snippet": {"language": "python", "code": "print(1)"}})
        deletes = requests_of(self.fake, "DELETE", "/v1/sandboxes/")
        self.assertEqual(len(deletes), 2, deletes)  # 412, then the fresh etag
        self.assert_no_sandbox_left()

    def test_a_202_is_polled_to_the_end(self):
        self.fake.misbehave(create_polls=3, delete_polls=2)
        b = self.run_ok({"snippet": {"language": "python", "code": "print(2)"}})
        self.assertEqual(b["stdout"], "2\n")
        gets = [r for r in requests_of(self.fake, "GET", "/v1/sandboxes/")
                if r["path"].count("/") == 3]
        self.assertGreaterEqual(len(gets), 3, gets)
        self.assert_no_sandbox_left()

    def test_an_expired_access_token_is_exchanged_again(self):
        before = len(requests_of(self.fake, "POST", "/v2/auth/token"))
        self.fake.misbehave(expire_token=True)
        b = self.run_ok({"snippet": {"language": "python", "code": "print(3)"}})
        self.assertEqual(b["stdout"], "3\n")
        self.assertEqual(len(requests_of(self.fake, "POST", "/v2/auth/token")), before + 1)
        self.assert_no_sandbox_left()

    def test_a_502_mid_run_is_infrastructure_and_deletes(self):
        self.fake.misbehave(fail={"match": "^GET /endpoints/.*/output", "status": 502, "times": 1})
        body = self.refusal({"snippet": {"language": "python", "code": "print(4)"}},
                            "INTERNAL", True)
        self.assertIn("502", body["message"])
        self.assert_no_sandbox_left()

    def test_a_sandbox_that_fails_to_start(self):
        self.fake.misbehave(fail_start=True)
        body = self.refusal({"snippet": {"language": "python", "code": "print(5)"}},
                            "INTERNAL", True)
        self.assertIn("did not start", body["message"])
        self.assert_no_sandbox_left()

    def test_the_reaper_deletes_ours_and_spares_another_instance(self):
        ours = self.fake.plant("pl-t%d-" % os.getpid())
        theirs = self.fake.plant("pl-someone-else-")
        deadline = time.monotonic() + 20
        uids = lambda: [s["uid"] for s in self.fake.state()["sandboxes"]]  # noqa: E731
        while ours in uids() and time.monotonic() < deadline:
            time.sleep(0.3)
        self.assertNotIn(ours, uids())
        self.assertIn(theirs, uids())
        self.fake.delete(theirs)


class Startup(unittest.TestCase):
    """Each refusal of the startup test: the daemon serves nothing and says
    which check failed."""

    @classmethod
    def setUpClass(cls):
        cls.fake = FakeDockerCloud(secret="dckr_pat_" + os.urandom(8).hex()).start()

    @classmethod
    def tearDownClass(cls):
        left = cls.fake.stop()
        assert left == [], left

    def setUp(self):
        self.fake.reset()
        self.fake.set_account_policy()

    def refused(self, phrase, **extra):
        d = Daemon(env=dc_env(self.fake, **extra))
        with self.assertRaises(RuntimeError) as cm:
            d.start(timeout=120)
        self.assertIn(phrase, str(cm.exception))
        # Whatever the test created is gone.
        deadline = time.monotonic() + 10
        while self.fake.state()["sandboxes"] and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.fake.state()["sandboxes"], [])

    def test_settings(self):
        self.refused("SANDBOX_DOCKERCLOUD_TOKEN: required", SANDBOX_DOCKERCLOUD_TOKEN="")
        self.refused("SANDBOX_DOCKERCLOUD_AUTH_URL: required", SANDBOX_DOCKERCLOUD_AUTH_URL="")
        self.refused("not a documented size", SANDBOX_DOCKERCLOUD_MEMORY_MIB="8192")
        self.refused("plain http is allowed only to this machine",
                     SANDBOX_DOCKERCLOUD_API_URL="http://example.com/sandboxes")
        self.refused("must be http://IPv4:port",
                     SANDBOX_DOCKERCLOUD_GUARD_URL="http://localhost:9")
        self.assertEqual(self.fake.state()["requests"], [])

    def test_a_wrong_secret(self):
        self.refused("without a usable access_token", SANDBOX_DOCKERCLOUD_TOKEN="wrong")

    def test_a_token_missing_a_permission(self):
        for perm in ("sandboxesRead", "networkPoliciesRead", "sandboxesCreate",
                     "sandboxesCredential", "sandboxesExec"):
            with self.subTest(perm):
                self.fake.misbehave(drop_permission=[perm])
                self.refused("403" if perm not in ("sandboxesRead", "networkPoliciesRead")
                             else "lacks the %s permission" % perm)
                self.fake.reset()

    def test_a_token_without_the_delete_permission_creates_nothing(self):
        # DeleteSandbox needs sandboxesDelete: refused before any create,
        # naming the permission (not a sandbox "still there after its
        # delete", left until its own timeout).
        self.fake.misbehave(drop_permission=["sandboxesDelete"])
        self.refused("lacks the sandboxesDelete permission")
        self.assertEqual(requests_of(self.fake, "POST", "/v1/sandboxes", exact=True), [])
        deletes = requests_of(self.fake, "DELETE", "/v1/sandboxes/")
        self.assertEqual(len(deletes), 1, deletes)

    def test_a_refused_delete_of_the_startup_sandbox_refuses_the_startup(self):
        # The permission held at the probe, then the sandbox's own delete
        # refused 403 (the fake's ids are 20 characters, the probe's 32):
        # the refusal names it rather than a sandbox "still there".
        self.fake.misbehave(fail={"match": "^DELETE /v1/sandboxes/[a-z0-9]{20}$", "status": 403,
                                  "times": 3})
        d = Daemon(env=dc_env(self.fake))
        with self.assertRaises(RuntimeError) as cm:
            d.start(timeout=120)
        self.assertIn("deleting the startup sandbox", str(cm.exception))
        self.assertIn("lacks the sandboxesDelete permission", str(cm.exception))
        left = self.fake.state()["sandboxes"]
        self.assertEqual(len(left), 1, left)
        self.fake.reset()
        self.fake.delete(left[0]["uid"])

    def test_the_proof_runs_the_cleanup_between_its_steps(self):
        # Exactly a project step's path: the guest's uid is learned first
        # (one step, nothing after it), then, as for every project of
        # several steps, the sandbox's own processes are listed and the
        # test project's three steps run with the cleanup, as root, between
        # each two.
        d = Daemon(env=dc_env(self.fake)).start(timeout=120)
        try:
            procs = requests_of(self.fake, "POST", "/endpoints/")
        finally:
            d.stop()
        procs = [r for r in procs if r["path"].split("?")[0].endswith("/v1/processes")]
        self.assertEqual([r.get("user") for r in procs],
                         [None, None, None, "root", None, "root", None], procs)

    def test_an_account_policy_that_is_not_deny_all(self):
        self.fake.set_account_policy(mode="allowAll")
        self.refused("the account's policy must default to deny-all")
        self.fake.set_account_policy(allow=["203.0.113.0/24"])
        self.refused("allowing 203.0.113.0/24")
        # With a guard, its address alone may be allowed; another is refused.
        self.refused("but the guard's 127.0.0.1/32",
                     SANDBOX_DOCKERCLOUD_GUARD_URL="http://127.0.0.1:%d" % free_port("127.0.0.1"),
                     SANDBOX_DOCKERCLOUD_GUARD_LISTEN="127.0.0.1")

    def test_open_egress_is_refused(self):
        self.fake.misbehave(policy_open=True)
        self.refused("not deny-all")


if __name__ == "__main__":
    unittest.main()
