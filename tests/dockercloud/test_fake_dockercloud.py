# SPDX-License-Identifier: Apache-2.0
"""The Docker Sandboxes fake (tests/fakes/dockercloud/fake_dockercloud.py)
does what docs/providers/dockercloud-fake.md says, with real containers:
the token exchange, the management API's rules (bearer, permissions,
unknown fields, compute pairs, etags, idempotency, paging), endpoint
credentials, exec, processes and signals, files, resource limits, network
policies that really hold, and every misbehaviour a provider test can ask
for.

    cd tests/dockercloud && PYTHONPATH=../lib python3 -m unittest -v test_fake_dockercloud

Needs the docker engine and the image plimsoll/project:latest.  One fake
serves the module; one deny-all sandbox (deny) is shared by the tests that
only read it."""
import base64
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import engine, require_engine  # noqa: E402
from plimsoll_test.dockercloud import IMAGE, FakeDockerCloud, multipart  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes", "dockercloud"))
import contract  # noqa: E402

FAKE = None
DENY_ALL = [{"mode": "denyAll"}]
PROBE_PY = ("import socket, sys\n"
            "try:\n"
            "    socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close()\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print('refused', e)\n")
LIMITS_SH = ("cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
             "echo \"$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)\"; "
             "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")


def setUpModule():
    global FAKE
    require_engine()
    if engine("GET", "/images/%s/json" % IMAGE)[0] != 200:
        raise RuntimeError("the image %s is missing: run scripts/docker-setup" % IMAGE)
    FAKE = FakeDockerCloud().start()


def tearDownModule():
    left = FAKE.stop()
    if left or FAKE.returncode != 0:
        raise RuntimeError("the fake exited %s and left %r" % (FAKE.returncode, left))


def container_of(uid):
    for s in FAKE.state()["sandboxes"]:
        if s["uid"] == uid:
            return s["container"]
    return None


def names():
    return [n.lstrip("/") for c in FAKE.containers() for n in c["Names"]]


class Listener:
    """A TCP listener on the fake network's gateway, counting connections."""

    def __init__(self, test):
        self.host = FAKE.gateway()
        self.sock = socket.create_server((self.host, 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        test.addCleanup(self.sock.close)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


class FakeDockerCloudTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.deny = FAKE.create(displayNamePrefix="shared-", networkPolicies=DENY_ALL,
                               labels={"suite": "fake"}, environment={"FAKE_VAR": "from-create"})

    @classmethod
    def tearDownClass(cls):
        FAKE.reset()
        FAKE.delete(cls.deny)

    def setUp(self):
        FAKE.reset()
        self.wrong_on_purpose = ()

    def tearDown(self):
        FAKE.reset()
        # Every request and answer kept to the API's OpenAPI file but the
        # ones a test sent wrong on purpose (by operation and field).
        seen = FAKE.take_violations()
        self.assertEqual([v for v in seen
                          if (v["operation"], v["field"]) not in self.wrong_on_purpose], [], seen)

    def new_sandbox(self, **body):
        body.setdefault("networkPolicies", DENY_ALL)
        sbx = FAKE.create(**body)
        self.addCleanup(FAKE.delete, sbx)
        return sbx

    def assertError(self, status, body, http_status, code, reason=None):
        self.assertEqual(status, http_status, body)
        self.assertEqual(body["code"], code, body)
        self.assertIsInstance(body["message"], str)
        self.assertIsInstance(body["details"], list)
        if reason:
            self.assertTrue(body["message"].startswith(reason), body)

    def probe(self, sbx, listener, host=None):
        out = FAKE.exec(sbx, ["python3", "-c", PROBE_PY, host or listener.host, str(listener.port)])
        return out["stdout"].startswith(b"connected")

    # -- credentials and management rules

    def test_token_exchange_and_bearer(self):
        self.wrong_on_purpose = {("GET /v1/no-such-route", "path")}
        status, body, _ = FAKE.json_request("POST", "/v2/auth/token", {"identifier": FAKE.account,
                                                                      "secret": "wrong"})
        self.assertEqual(status, 401, body)
        token = FAKE.token()
        self.assertTrue(token.startswith("dcfake_at_"))
        scoped = FAKE.credential(self.deny)
        for bearer in (False, "not-a-token", scoped):
            with self.subTest(bearer=bearer):
                self.assertError(*FAKE.api("GET", "/v1/sandboxes", token=bearer)[:2], 401, "unauthenticated")
        self.assertEqual(FAKE.api("GET", "/v1/sandboxes", token=token)[0], 200)
        self.assertError(*FAKE.api("GET", "/v1/no-such-route")[:2], 404, "notFound")

    def test_create_refusals_start_nothing(self):
        self.wrong_on_purpose = {("createSandbox", f) for f in ("body", "body.resources", "body.displayName", "body.networkPolicies[0].mode", "body.networkPolicies[0]", "body.features.timeouts.timeout")}
        before = len(FAKE.containers())
        ref = {"imageRef": IMAGE}
        cases = [(dict(ref, colour="red"), 400, "invalidArgument"),
                 (dict(ref, resources={"cpus": 1, "memoryMib": 1024}), 400, "invalidArgument"),
                 (dict(ref, resources={"cpus": 2}), 400, "invalidArgument"),
                 (dict(ref, resources={"cpus": 2, "memoryMib": 4096, "gpus": 1}), 400, "invalidArgument"),
                 (dict(ref, displayName="a", displayNamePrefix="b"), 400, "invalidArgument"),
                 (dict(ref, displayName="bad name!"), 400, "invalidArgument"),
                 ({"displayName": "x"}, 400, "invalidArgument"),
                 ({"image": "images/nope"}, 404, "notFound"),
                 (dict(ref, networkPolicies=[{"mode": "allowAll"}]), 400, "invalidArgument"),
                 (dict(ref, networkPolicies=[{"mode": "denyAll", "extra": 1}]), 400, "invalidArgument"),
                 (dict(ref, networkPolicies=[{"mode": "denyAll", "allowNetworks": ["example.com"]}]),
                  501, "unimplemented"),
                 (dict(ref, kits=[]), 501, "unimplemented"),
                 (dict(ref, features={"timeouts": {"timeout": "ten"}}), 400, "invalidArgument")]
        for body, status, code in cases:
            with self.subTest(body=body):
                self.assertError(*FAKE.api("POST", "/v1/sandboxes", body)[:2], status, code)
        self.assertEqual(len(FAKE.containers()), before)

    def test_sandbox_shape_get_and_etag(self):
        sbx = self.deny
        self.assertEqual(sbx["name"], "sandboxes/" + sbx["uid"])
        self.assertRegex(sbx["displayName"], r"^shared-[a-z0-9]{6}$")
        core = sbx["core"]
        self.assertEqual((core["status"], core["resources"]), ("running", {"cpus": 2, "memoryMib": "4096"}))
        self.assertEqual((core["labels"], core["imageRef"]), ({"suite": "fake"}, IMAGE))
        self.assertRegex(core["etag"], r'^"[^"]+"$')
        ep = core["endpoint"]
        self.assertEqual(ep["uri"], "%s/endpoints/%s" % (FAKE.url, sbx["uid"]))
        self.assertEqual((ep["sandbox"], ep["apiVersion"], ep["authentication"]["scheme"]),
                         (sbx["name"], "v1", "scopedBearer"))
        status, got, headers = FAKE.get(sbx)
        self.assertEqual(status, 200)
        self.assertEqual(headers["ETag"], got["core"]["etag"])
        self.assertEqual(FAKE.api("GET", "/v1/" + sbx["name"], headers={"If-None-Match": headers["ETag"]})[0], 304)
        self.assertError(*FAKE.api("GET", "/v1/sandboxes/nosuchsandbox")[:2], 404, "notFound")

    def test_list_pages_and_filters(self):
        a = self.new_sandbox(displayName="listed-a")
        self.new_sandbox(displayName="listed-b")
        status, body, _ = FAKE.api("GET", "/v1/sandboxes?filter=display_name=listed-a")
        self.assertEqual([s["uid"] for s in body["sandboxes"]], [a["uid"]])
        self.assertEqual(body["nextPageToken"], "")
        seen, token = [], ""
        for _ in range(10):
            status, body, _ = FAKE.api("GET", "/v1/sandboxes?pageSize=1&filter=status=running"
                                       + ("&pageToken=" + token if token else ""))
            self.assertEqual(status, 200, body)
            self.assertLessEqual(len(body["sandboxes"]), 1)
            seen += [s["uid"] for s in body["sandboxes"]]
            token = body["nextPageToken"]
            if not token:
                break
        self.assertEqual(len(seen), len(set(seen)))
        self.assertGreaterEqual(len(seen), 3)
        for query in ("pageSize=101", "filter=colour=red", "orderBy=size", "pageToken=garbage",
                      "pageSize=2&pageToken=" + FAKE.api("GET", "/v1/sandboxes?pageSize=1")[1]["nextPageToken"]):
            with self.subTest(query=query):
                self.assertError(*FAKE.api("GET", "/v1/sandboxes?" + query)[:2], 400, "invalidArgument")

    def test_delete_needs_the_current_etag(self):
        self.wrong_on_purpose = {("deleteSandbox", "header.If-Match")}
        sbx = FAKE.create(networkPolicies=DENY_ALL)
        container = container_of(sbx["uid"])
        path = "/v1/" + sbx["name"]
        self.assertError(*FAKE.api("DELETE", path)[:2], 428, "failedPrecondition", "etag_required")
        status, body, _ = FAKE.api("DELETE", path, headers={"If-Match": '"stale-0"'})
        self.assertError(status, body, 412, "failedPrecondition", "etag_mismatch")
        self.assertEqual(body["details"][0]["currentEtag"], sbx["core"]["etag"])
        self.assertIn(container, names())
        self.assertEqual(FAKE.api("DELETE", path, headers={"If-Match": sbx["core"]["etag"]})[0], 204)
        self.assertNotIn(container, names())
        self.assertError(*FAKE.get(sbx)[:2], 404, "notFound")
        self.assertEqual(FAKE.api("DELETE", path, headers={"If-Match": sbx["core"]["etag"]})[0], 204)

    def test_idempotency_key(self):
        key = FAKE.idempotency_key()
        body = {"imageRef": IMAGE, "displayName": "idem", "networkPolicies": DENY_ALL}
        before = len(FAKE.containers())
        first = FAKE.create(headers={"Idempotency-Key": key}, **body)
        self.addCleanup(FAKE.delete, first)
        again = FAKE.create(headers={"Idempotency-Key": key}, **body)
        self.assertEqual(again["uid"], first["uid"])
        self.assertEqual(len(FAKE.containers()), before + 1)
        status, answer, _ = FAKE.api("POST", "/v1/sandboxes", dict(body, displayName="other"),
                                     {"Idempotency-Key": key})
        self.assertError(status, answer, 409, "failedPrecondition")
        self.assertEqual(len(FAKE.containers()), before + 1)

    def test_endpoint_credentials(self):
        self.wrong_on_purpose = {("createEndpointCredential", f) for f in ("body.permissions[0]", "body.permissions", "body")}
        other = self.new_sandbox()
        status, cred, headers = FAKE.api("POST", "/v1/%s/endpoint-credentials" % self.deny["name"],
                                         {"permissions": ["sandboxesFilesRead"], "ttl": "900s"})
        self.assertEqual(status, 200, cred)
        self.assertEqual(headers["Cache-Control"], "no-store")
        self.assertEqual((cred["sandbox"], cred["permissions"]), (self.deny["name"], ["sandboxesFilesRead"]))
        self.assertTrue(cred["audience"])
        for body in ({"permissions": ["sandboxesDelete"]}, {"permissions": []}, {"permissions": ["sandboxesExec"],
                                                                                  "scope": "x"}):
            with self.subTest(body=body):
                self.assertError(*FAKE.api("POST", "/v1/%s/endpoint-credentials" % self.deny["name"], body)[:2],
                                 400, "invalidArgument")
        short = FAKE.credential(self.deny, ttl="0.5s")
        exec_body = json.dumps({"cmd": ["true"]}).encode()

        def call(token):
            status, _, raw = FAKE.endpoint(self.deny, "POST", "/v1/processes/exec", exec_body, token=token)
            return status, json.loads(raw)

        self.assertEqual(call(short)[0], 200)
        cases = [(False, 401, "unauthenticated"), (FAKE.access_token, 401, "unauthenticated"),
                 ("garbage", 401, "unauthenticated"), (cred["token"], 403, "permissionDenied"),
                 (FAKE.credential(other), 404, "notFound")]
        for token, status, code in cases:
            with self.subTest(token=str(token)[:14]):
                self.assertError(*call(token), status, code)
        time.sleep(1.2)
        self.assertError(*call(short), 401, "unauthenticated")

    # -- the upstream contract

    def test_a_request_that_breaks_the_contract_is_named(self):
        # The fake's own rules aside (it may accept what the document
        # refuses), every request is checked against api.yaml: a wrong
        # type, a field the document does not have, a query parameter the
        # operation does not take, a missing required header.
        self.wrong_on_purpose = {("createSandbox", "body.resources.cpus"),
                                 ("createSandbox", "body"), ("listSandboxes", "query.page"),
                                 ("deleteSandbox", "header.If-Match")}
        FAKE.api("POST", "/v1/sandboxes", {"imageRef": IMAGE, "resources": {"cpus": "2", "memoryMib": 4096}})
        FAKE.api("GET", "/v1/sandboxes?page=2")
        FAKE.api("DELETE", "/v1/sandboxes/" + self.deny["uid"])
        got = {(v["operation"], v["field"]): v for v in FAKE.state()["violations"]}
        for key in self.wrong_on_purpose - {("createSandbox", "body")}:
            self.assertIn(key, got, got)
        with open(contract.UPSTREAM) as f:
            lines = f.read().splitlines()
        for (op, field), v in got.items():
            self.assertEqual(v["upstream"], "dockercloud/api.yaml", v)
            # The line of the operation in the upstream file.
            self.assertEqual(lines[v["line"] - 1].strip(), "operationId: " + op, v)
        self.assertIn("integer", got[("createSandbox", "body.resources.cpus")]["message"])
        self.assertEqual(FAKE.get(self.deny)[0], 200)  # the delete was refused (428)

    def test_an_answer_that_breaks_the_contract_is_named(self):
        # The answers are checked the same way (here a fake's answer as it
        # would be without the sandbox's required fields).
        c = contract.Contract.load()
        good = json.dumps(FAKE.get(self.deny)[1]).encode()
        self.assertEqual(c.check("GET", "/v1/sandboxes/x", {}, {}, b"", None, 200, good,
                                 "application/json"), [])
        bad = json.loads(good)
        del bad["core"]["status"]
        bad["uid"] = ""
        found = c.check("GET", "/v1/sandboxes/x", {}, {}, b"", None, 200, json.dumps(bad).encode(),
                        "application/json")
        self.assertEqual(sorted(v["field"] for v in found), ["answer(200).core", "answer(200).uid"], found)
        self.assertEqual({v["operation"] for v in found}, {"getSandbox"})
        found = c.check("DELETE", "/v1/sandboxes/x", {}, {"If-Match": '"a"'}, b"", None, 200, b"{}",
                        "application/json")
        self.assertEqual([v["field"] for v in found], ["answer.status"], found)
        # And the permissions the fake checks are the ones the operation
        # declares (every exchange passes them; here a wrong one).
        self.assertEqual(c.check("GET", "/v1/sandboxes/x", {}, {}, b"", None, 200, good,
                                 "application/json", ("sandboxesRead",)), [])
        found = c.check("GET", "/v1/sandboxes/x", {}, {}, b"", None, 200, good, "application/json",
                        ("sandboxesExec",))
        self.assertEqual([v["field"] for v in found], ["x-sbx-required-permissions"], found)

    def test_the_contract_is_read_from_upstream_or_nothing_runs(self):
        self.assertTrue(os.path.isfile(contract.UPSTREAM), contract.UPSTREAM)
        with self.assertRaises(contract.ContractMissing):
            contract.Contract.load(contract.UPSTREAM + ".absent")

    # -- the sandbox endpoint

    def test_exec_user_env_workdir_and_exit_code(self):
        self.wrong_on_purpose = {("exec", "body")}
        out = FAKE.exec(self.deny, ["sh", "-c", 'id -u; pwd; echo "$FAKE_VAR $PER_RUN"; echo oops >&2; exit 7'],
                        env={"PER_RUN": "yes"})
        self.assertEqual(out["exitCode"], 7)
        self.assertEqual(out["stdout"], b"1000\n/home/agent\nfrom-create yes\n")
        self.assertEqual((out["stderr"], out["incomplete"]), (b"oops\n", False))
        out = FAKE.exec(self.deny, ["sh", "-c", "id -u; pwd; echo x > /root/x && cat /root/x"], user="root",
                        workingDir="/tmp")
        self.assertEqual((out["exitCode"], out["stdout"]), (0, b"0\n/tmp\nx\n"))
        out = FAKE.exec(self.deny, ["sh", "-c", "echo x > /root/y"])
        self.assertNotEqual(out["exitCode"], 0)
        self.assertIn(b"Permission denied", out["stderr"])
        out = FAKE.exec(self.deny, ["head", "-c", str(3 << 20), "/dev/zero"])
        self.assertEqual((out["exitCode"], out["incomplete"], len(out["stdout"])), (0, True, 1 << 20))
        status, _, raw = FAKE.endpoint(self.deny, "POST", "/v1/processes/exec",
                                       json.dumps({"cmd": ["true"], "timeout": 5}).encode())
        self.assertEqual(status, 400, raw)

    def test_files(self):
        self.wrong_on_purpose = {("upload", "body")}
        sbx = self.deny
        status, _, raw = FAKE.upload(sbx, [("/home/agent/proj/main.py", b"print('hi')\n", 0o600),
                                           ("/home/agent/proj/empty", b"")])
        self.assertEqual((status, json.loads(raw)), (200, {"filesWritten": 2}))
        out = FAKE.exec(sbx, ["stat", "-c", "%a %u %s %n", "/home/agent/proj/main.py", "/home/agent/proj/empty"])
        self.assertEqual(out["stdout"], b"600 1000 12 /home/agent/proj/main.py\n644 1000 0 /home/agent/proj/empty\n")
        status, _, raw = FAKE.endpoint(sbx, "GET", "/v1/files/content?path=/home/agent/proj/main.py")
        self.assertEqual((status, raw), (200, b"print('hi')\n"))
        status, _, raw = FAKE.endpoint(sbx, "PUT", "/v1/files/content?path=/home/agent/w.txt&mode=416", b"abc")
        self.assertEqual(status, 200, raw)
        self.assertEqual(json.loads(raw)["info"]["mode"], 0o640)

        def mkdir(body):
            return FAKE.endpoint(sbx, "PUT", "/v1/files/directories", json.dumps(body).encode())

        self.assertEqual(mkdir({"path": "/home/agent/a/b", "parents": False})[0], 404)
        self.assertEqual(mkdir({"path": "/home/agent/a/b", "parents": True})[0], 200)
        self.assertEqual(mkdir({"path": "/home/agent/a/b"})[0], 200, "a repeated mkdir converges")
        self.assertEqual(FAKE.exec(sbx, ["test", "-d", "/home/agent/a/b"])["exitCode"], 0)
        cases = [("GET", "/v1/files/content?path=/home/agent/nope", None, 404, "notFound"),
                 ("GET", "/v1/files/content?path=/home/agent/a", None, 409, "failedPrecondition"),
                 ("GET", "/v1/files/content?path=relative", None, 400, "invalidArgument"),
                 ("PUT", "/v1/files/content?path=/root/x", b"x", 403, "permissionDenied")]
        for method, path, body, status, code in cases:
            with self.subTest(path=path):
                st, _, raw = FAKE.endpoint(sbx, method, path, body)
                self.assertError(st, json.loads(raw), status, code)
        bad = b'--b\r\nContent-Disposition: form-data; name="content"\r\n\r\nx\r\n--b--\r\n'
        st, _, raw = FAKE.endpoint(sbx, "POST", "/v1/files/upload", bad,
                                   {"Content-Type": "multipart/form-data; boundary=b"})
        self.assertError(st, json.loads(raw), 400, "invalidArgument")
        body, ctype = multipart([("/home/agent/t.txt", b"x")])
        st, _, raw = FAKE.endpoint(sbx, "POST", "/v1/files/upload", body[:-4], {"Content-Type": ctype})
        self.assertEqual(st, 400, "no closing delimiter")
        read_only = FAKE.credential(sbx, ["sandboxesFilesRead"])
        self.assertEqual(FAKE.upload(sbx, [("/home/agent/t.txt", b"x")], token=read_only)[0], 403)

    def test_process_output_and_signal(self):
        self.wrong_on_purpose = {("signal", "body.signal")}
        sbx = self.deny
        status, _, raw = FAKE.endpoint(sbx, "POST", "/v1/processes",
                                       json.dumps({"cmd": ["sh", "-c", "echo started; sleep 303 & sleep 303"]}).encode())
        self.assertEqual(status, 201, raw)
        proc = json.loads(raw)
        self.assertEqual((proc["state"], proc["receiptKind"]), ("running", "fresh"))
        self.assertIsInstance(proc["pid"], int)
        base = "/v1/" + proc["name"]
        token = FAKE.credential(sbx, ["sandboxesExec"])

        def output(resume=0):
            return json.loads(FAKE.endpoint(sbx, "GET", "%s/output?resumeFrom=%d" % (base, resume), token=token)[2])

        got = FAKE.wait_for(lambda: output()["chunks"])
        self.assertEqual(base64.b64decode(got[0]["data"]), b"started\n")
        self.assertEqual((got[0]["stream"], got[0]["streamSequence"]), ("stdout", "1"))
        self.assertNotIn("exited", output(1))
        container = container_of(sbx["uid"])
        self.assertTrue(FAKE.wait_for(lambda: sum(r[-1] == "sleep 303" for r in
                                                  engine("GET", "/containers/%s/top" % container)[1]["Processes"]) == 2))
        status, _, raw = FAKE.endpoint(sbx, "POST", base + "/signal", json.dumps({"signal": "bogus"}).encode(),
                                       token=token)
        self.assertEqual(status, 400, raw)
        status, _, raw = FAKE.endpoint(sbx, "POST", base + "/signal", json.dumps({"signal": "kill"}).encode(),
                                       token=token)
        self.assertEqual((status, json.loads(raw)), (200, {}))
        done = FAKE.wait_for(lambda: output(1).get("exited"))
        self.assertEqual(done["exitCode"], 137, done)
        got = json.loads(FAKE.endpoint(sbx, "GET", base, token=token)[2])
        self.assertEqual((got["state"], got["exitCode"]), ("exited", 137))
        self.assertTrue(FAKE.wait_for(lambda: not any("sleep 303" in r[-1] for r in
                                                      engine("GET", "/containers/%s/top" % container)[1]["Processes"])),
                        "the whole process group is killed")
        self.assertEqual(FAKE.endpoint(sbx, "GET", "/v1/processes/nosuch", token=token)[0], 404)

    def test_resources_are_really_applied(self):
        sbx = self.new_sandbox(resources={"cpus": 1, "memoryMib": "2048"})
        self.assertEqual(sbx["core"]["resources"], {"cpus": 1, "memoryMib": "2048"})
        quota, period, memory = FAKE.exec(sbx, ["sh", "-c", LIMITS_SH])["stdout"].split()
        self.assertEqual((int(quota) / int(period), int(memory)), (1.0, 2048 << 20))
        quota, period, memory = FAKE.exec(self.deny, ["sh", "-c", LIMITS_SH])["stdout"].split()
        self.assertEqual(int(memory), 4096 << 20)

    # -- network policy

    def test_deny_all_has_only_loopback(self):
        self.assertEqual(FAKE.exec(self.deny, ["ls", "/sys/class/net"])["stdout"], b"lo\n")
        listener = Listener(self)
        self.assertFalse(self.probe(self.deny, listener))
        status, pol, _ = FAKE.api("GET", "/v1/%s/network-policies" % self.deny["name"])
        self.assertEqual(pol["effective"], {"mode": "denyAll", "allowNetworks": [], "denyNetworks": []})
        self.assertEqual(pol["exact"]["nodes"][-1]["constant"], "false")
        status, account, _ = FAKE.api("GET", "/v1/network-policies")
        self.assertEqual(account["effective"]["mode"], "denyAll")

    def test_allowed_network_is_reached_only_when_the_account_allows_it(self):
        listener = Listener(self)
        allow = [{"mode": "denyAll", "allowNetworks": [listener.host + "/32"]}]
        dropped = self.new_sandbox(networkPolicies=allow)
        pol = FAKE.api("GET", "/v1/%s/network-policies" % dropped["name"])[1]
        self.assertEqual(pol["effective"]["allowNetworks"], [], "the account's deny-all wins")
        self.assertFalse(self.probe(dropped, listener))
        FAKE.set_account_policy("denyAll", allow=[listener.host + "/16"])
        sbx = self.new_sandbox(networkPolicies=allow)
        pol = FAKE.api("GET", "/v1/%s/network-policies" % sbx["name"])[1]
        self.assertEqual(pol["effective"]["allowNetworks"], [{"network": listener.host + "/32", "layer": "attached"}])
        self.assertTrue(self.probe(sbx, listener))
        self.assertFalse(self.probe(sbx, listener, "192.0.2.1"), "anything else is rejected")

    # -- misbehaviours

    def test_policy_open_and_policy_allow(self):
        listener = Listener(self)
        FAKE.misbehave(policy_open=True)
        opened = self.new_sandbox()
        FAKE.reset()
        FAKE.misbehave(policy_allow=[listener.host + "/32"])
        leaky = self.new_sandbox()
        pols = {k: FAKE.api("GET", "/v1/%s/network-policies" % s["name"])[1]["effective"]
                for k, s in (("open", opened), ("leaky", leaky))}
        self.assertEqual(pols["open"]["mode"], "allowAll")
        self.assertEqual(pols["leaky"], {"mode": "denyAll", "denyNetworks": [],
                                         "allowNetworks": [{"network": listener.host + "/32", "layer": "owner"}]})
        self.assertTrue(self.probe(opened, listener))
        self.assertTrue(self.probe(leaky, listener))

    def test_drop_permission(self):
        FAKE.misbehave(drop_permission=["sandboxesDelete", "sandboxesExec"])
        status, sbx, headers = FAKE.get(self.deny)
        self.assertEqual(status, 200)
        self.assertError(*FAKE.api("DELETE", "/v1/" + self.deny["name"], headers={"If-Match": headers["ETag"]})[:2],
                         403, "permissionDenied")
        self.assertError(*FAKE.api("POST", "/v1/%s/endpoint-credentials" % self.deny["name"],
                                   {"permissions": ["sandboxesExec"]})[:2], 403, "permissionDenied")
        FAKE.reset()
        self.assertEqual(FAKE.get(self.deny)[0], 200)

    def test_stale_etag(self):
        sbx = FAKE.create(networkPolicies=DENY_ALL)
        self.addCleanup(FAKE.delete, sbx)
        FAKE.misbehave(stale_etag=1)
        status, body, _ = FAKE.api("DELETE", "/v1/" + sbx["name"], headers={"If-Match": sbx["core"]["etag"]})
        self.assertError(status, body, 412, "failedPrecondition", "etag_mismatch")
        status, now, headers = FAKE.get(sbx)
        self.assertNotEqual(headers["ETag"], sbx["core"]["etag"])
        self.assertEqual(body["details"][0]["currentEtag"], headers["ETag"])
        self.assertEqual(FAKE.api("DELETE", "/v1/" + sbx["name"], headers={"If-Match": headers["ETag"]})[0], 204)

    def test_fail_start(self):
        before = len(FAKE.containers())
        FAKE.misbehave(fail_start=True)
        status, sbx, _ = FAKE.api("POST", "/v1/sandboxes", {"imageRef": IMAGE, "networkPolicies": DENY_ALL})
        self.addCleanup(FAKE.delete, sbx)
        self.assertEqual((status, sbx["core"]["status"]), (201, "failed"), sbx)
        self.assertEqual(sbx["failure"]["code"], "unavailable")
        self.assertNotIn("endpoint", sbx["core"])
        self.assertEqual(len(FAKE.containers()), before)
        self.assertError(*FAKE.api("POST", "/v1/%s/endpoint-credentials" % sbx["name"],
                                   {"permissions": ["sandboxesExec"]})[:2], 409, "failedPrecondition")

    def test_202_needs_polling(self):
        FAKE.misbehave(create_polls=2, delete_polls=2)
        status, sbx, _ = FAKE.api("POST", "/v1/sandboxes", {"imageRef": IMAGE, "networkPolicies": DENY_ALL})
        self.assertEqual((status, sbx["core"]["status"]), (202, "creating"))
        self.addCleanup(FAKE.delete, sbx)
        seen = [FAKE.get(sbx)[1]["core"]["status"] for _ in range(3)]
        self.assertEqual(seen, ["creating", "creating", "running"])
        status, current, headers = FAKE.get(sbx)
        status, body, _ = FAKE.api("DELETE", "/v1/" + sbx["name"], headers={"If-Match": headers["ETag"]})
        self.assertEqual((status, body["core"]["status"]), (202, "deleting"))
        seen = [FAKE.get(sbx)[0] for _ in range(3)]
        self.assertEqual(seen, [200, 200, 404])

    def test_expired_token(self):
        self.assertEqual(FAKE.get(self.deny)[0], 200)
        old = FAKE.access_token
        FAKE.misbehave(expire_token=True)
        for _ in range(2):
            self.assertError(*FAKE.get(self.deny)[:2], 401, "unauthenticated")
        self.assertNotEqual(FAKE.token(), old)
        self.assertEqual(FAKE.get(self.deny)[0], 200)

    def test_fail_and_create_delay(self):
        FAKE.misbehave(fail={"match": "^GET /v1/sandboxes\\?", "status": 503, "times": 2})
        statuses = [FAKE.api("GET", "/v1/sandboxes?pageSize=1")[0] for _ in range(3)]
        self.assertEqual(statuses, [503, 503, 200])
        FAKE.misbehave(create_delay_ms=1200)
        started = time.monotonic()
        self.new_sandbox()
        self.assertGreaterEqual(time.monotonic() - started, 1.2)

    def test_plant_and_state(self):
        uid = FAKE.plant("plimsoll-lost-", labels={"x": "y"})
        self.addCleanup(FAKE.delete, uid)
        FAKE.reset()
        listed = FAKE.api("GET", "/v1/sandboxes?pageSize=100")[1]["sandboxes"]
        mine = [s for s in listed if s["uid"] == uid]
        self.assertEqual(len(mine), 1)
        self.assertTrue(mine[0]["displayName"].startswith("plimsoll-lost-"))
        self.assertEqual(mine[0]["core"]["status"], "running")
        state = FAKE.state()
        planted = [s for s in state["sandboxes"] if s["uid"] == uid][0]
        self.assertEqual((planted["networkMode"], planted["labels"]), ("none", {"x": "y"}))
        self.assertIn(planted["container"], names())
        self.assertEqual([(r["method"], r["path"]) for r in state["requests"]],
                         [("GET", "/v1/sandboxes?pageSize=100")])

    def test_timeout_feature_deletes(self):
        sbx = FAKE.create(networkPolicies=DENY_ALL, features={"timeouts": {"timeout": "1.5s"}})
        container = container_of(sbx["uid"])
        self.assertEqual(sbx["effectiveFeatures"]["timeouts"]["onTimeout"], "delete")
        self.assertTrue(FAKE.wait_for(lambda: FAKE.get(sbx)[0] == 404, timeout=15))
        self.assertNotIn(container, names())

    def test_sigterm_removes_everything(self):
        other = FakeDockerCloud().start()
        try:
            other.create(networkPolicies=DENY_ALL)
            other.plant()
            self.assertEqual((len(other.containers()), len(other.networks())), (2, 1))
        finally:
            left = other.stop()
        self.assertEqual((left, other.returncode), ([], 0))


if __name__ == "__main__":
    unittest.main()
