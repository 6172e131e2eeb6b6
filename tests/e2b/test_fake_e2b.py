# SPDX-License-Identifier: Apache-2.0
"""The E2B fake (tests/fakes/e2b/fake_e2b.py) does what
docs/providers/e2b-fake.md says, with real containers: the control plane's
rules, the TTL, pause and connect, envd's tokens, files and processes (as
the default user and as root, with deadlines and signals), egress, and
every misbehaviour a provider test can ask for, and its check of every
request and answer against E2B's published contracts (a test that sends
one against them on purpose does it inside FAKE.deliberate(); any other
violation fails the test that caused it, and the module).

    cd tests/e2b && PYTHONPATH=../lib python3 -m unittest -v test_fake_e2b

Needs the docker engine and the image plimsoll/project:latest.  One fake
serves the module; three sandboxes are shared by the tests that only read
them (open: the defaults; deny: secure, private, no internet; mis: made
while the resources and egress_open misbehaviours were in force)."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import engine, require_engine  # noqa: E402
from plimsoll_test.e2b import (FAKE as FAKE_PY, IMAGE, FakeE2B, basic_user, envelope,  # noqa: E402
                               multipart, read_envelopes)
sys.path.insert(0, os.path.dirname(FAKE_PY))
import contract  # noqa: E402  (tests/fakes/e2b/contract.py)

TAG = "e2bfake-%d" % os.getpid()
FAKE = None

MAIN_PY = b"""import sys
import helper
print(helper.greet())
print("to stderr", file=sys.stderr)
sys.exit(3)
"""
HELPER_PY = b"""def greet():
    return "hello from helper"
"""
PROBE_PY = ("import socket, sys\n"
            "socket.create_connection((sys.argv[1], int(sys.argv[2])), 3).close()\n"
            "print('connected')\n")


def setUpModule():
    global FAKE
    require_engine()
    if engine("GET", "/images/%s/json" % IMAGE)[0] != 200:
        raise RuntimeError("the image %s is missing: run scripts/docker-setup" % IMAGE)
    FAKE = FakeE2B().start()


def tearDownModule():
    left = FAKE.stop()
    if left or FAKE.returncode != 0:
        raise RuntimeError("the fake exited %s and left %r" % (FAKE.returncode, left))


def metadata_query(pairs):
    """GET /v2/sandboxes?metadata=: "k=v&..." with k and v encoded, then
    the whole value encoded as one query parameter."""
    inner = "&".join("%s=%s" % (urllib.parse.quote(k, safe=""), urllib.parse.quote(v, safe=""))
                     for k, v in pairs.items())
    return urllib.parse.quote(inner, safe="")


def container_of(sandbox_id):
    for s in FAKE.state()["sandboxes"]:
        if s["sandboxID"] == sandbox_id:
            return s["container"]
    return None


def commands(container):
    """The command lines of every process in a container (docker top)."""
    status, top = engine("GET", "/containers/%s/top" % container)
    if status != 200:
        raise RuntimeError("docker top %s: %s %r" % (container, status, top))
    return [row[-1] for row in top["Processes"]]


def create(**body):
    """POST /sandboxes from the base template; the 201 answer."""
    body.setdefault("templateID", "base")
    status, answer, _ = FAKE.api("POST", "/sandboxes", body)
    if status != 201:
        raise AssertionError("create %r: %s %r" % (body, status, answer))
    return answer


def kill(sandbox_id):
    FAKE.api("DELETE", "/sandboxes/" + sandbox_id)


class FakeE2BTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.open = create(timeout=600, metadata={"suite": TAG, "kind": "a", "odd": "x y/z"},
                          envVars={"FAKE_VAR": "from-create"})
        cls.deny = create(timeout=600, secure=True, allow_internet_access=False,
                          network={"allowPublicTraffic": False}, metadata={"suite": TAG, "kind": "b"})
        cls.deny_headers = {"X-Access-Token": cls.deny["envdAccessToken"],
                            "e2b-traffic-access-token": cls.deny["trafficAccessToken"]}
        FAKE.misbehave(resources={"cpuCount": 1, "memoryMB": 256}, egress_open=True)
        try:
            cls.mis = create(timeout=600, allow_internet_access=False, metadata={"suite": TAG, "kind": "c"})
        finally:
            FAKE.reset()

    def setUp(self):
        self.violations_before = len(FAKE.violations())

    def tearDown(self):
        FAKE.reset()
        self.assertEqual(FAKE.violations()[self.violations_before:], [],
                         "this test broke E2B's contract outside FAKE.deliberate()")

    def new_sandbox(self, **body):
        """A sandbox of this test alone, killed when it ends."""
        sbx = create(**body)
        self.addCleanup(kill, sbx["sandboxID"])
        return sbx

    def assertError(self, status, body, code):
        self.assertEqual(status, code, body)
        self.assertEqual(body["code"], code, body)
        self.assertIsInstance(body["message"], str)

    # -- control plane

    def test_api_key_is_required(self):
        before = len(FAKE.containers())
        calls = [("POST", "/sandboxes", {"templateID": "base"}), ("GET", "/v2/sandboxes", None),
                 ("GET", "/sandboxes", None), ("GET", "/sandboxes/" + self.open["sandboxID"], None),
                 ("POST", "/_fake/reset", {})]
        for key in (False, "wrong-key"):
            for method, path, body in calls:
                with self.subTest(key=key, call=path), FAKE.deliberate():
                    status, answer, _ = FAKE.api(method, path, body, key=key)
                    self.assertError(status, answer, 401)
        self.assertEqual(len(FAKE.containers()), before)

    def test_create_refusals_start_nothing(self):
        before = len(FAKE.containers())
        cases = [({}, 400), ({"templateID": "no-such-template"}, 404),
                 ({"templateID": "base", "timeout": 0}, 400),
                 ({"templateID": "base", "timeout": -5}, 400),
                 ({"templateID": "base", "timeout": 24 * 3600 + 1}, 400),
                 ({"templateID": "base", "timeout": "60"}, 400),
                 ({"templateID": "base", "network": {"allowPublicTraffic": False}}, 400),
                 ({"templateID": "base", "network": {"denyOut": ["not-a-cidr"]}}, 400),
                 ({"templateID": "base", "network": {"allowOut": ["example.com"]}}, 400),
                 ({"templateID": "base", "metadata": {"n": 1}}, 400)]
        for body, code in cases:
            with self.subTest(body=body), FAKE.deliberate():
                status, answer, _ = FAKE.api("POST", "/sandboxes", body)
                self.assertError(status, answer, code)
        with FAKE.deliberate() as got:
            status, _, raw = FAKE.request("POST", "/sandboxes", b"{not json",
                                          {"X-API-Key": FAKE.api_key,
                                           "Content-Type": "application/json"})
        self.assertIn("body", [v["field"] for v in got])
        self.assertEqual(status, 400, raw)
        self.assertEqual(len(FAKE.containers()), before)

    def test_create_answer_carries_tokens_only_when_asked(self):
        self.assertEqual(set(self.open), {"templateID", "sandboxID", "clientID", "envdVersion", "domain"})
        self.assertEqual(self.open["domain"], "localhost")
        self.assertEqual(self.open["templateID"], "base")
        self.assertTrue(self.deny["envdAccessToken"] and self.deny["trafficAccessToken"])
        with FAKE.deliberate() as got:   # NewSandbox has no cpuCount, no memoryMB
            secure = self.new_sandbox(timeout=60, secure=True, cpuCount=1, memoryMB=128)
        self.assertEqual(sorted(v["field"] for v in got), ["body.cpuCount", "body.memoryMB"])
        self.assertIn("envdAccessToken", secure)
        self.assertNotIn("trafficAccessToken", secure)
        status, detail, _ = FAKE.api("GET", "/sandboxes/" + secure["sandboxID"])
        self.assertEqual((detail["cpuCount"], detail["memoryMB"]), (2, 512), "resources come from the template")
        self.assertEqual(detail["envdAccessToken"], secure["envdAccessToken"])

    def test_detail(self):
        status, d, _ = FAKE.api("GET", "/sandboxes/" + self.open["sandboxID"])
        self.assertEqual(status, 200, d)
        for field in ("templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount",
                      "memoryMB", "diskSizeMB", "envdVersion", "domain", "metadata", "state"):
            self.assertIn(field, d)
        self.assertEqual((d["state"], d["cpuCount"], d["memoryMB"]), ("running", 2, 512))
        self.assertEqual(d["metadata"]["kind"], "a")
        self.assertNotIn("envdAccessToken", d)
        self.assertRegex(d["startedAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertLess(d["startedAt"], d["endAt"])
        status, d, _ = FAKE.api("GET", "/sandboxes/" + self.deny["sandboxID"])
        self.assertEqual(d["envdAccessToken"], self.deny["envdAccessToken"])
        self.assertIs(d["allowInternetAccess"], False)
        self.assertIs(d["network"]["allowPublicTraffic"], False)
        status, body, _ = FAKE.api("GET", "/sandboxes/inosuchsandbox000000")
        self.assertError(status, body, 404)

    def test_list_filters_metadata_and_pages(self):
        ids = {s["sandboxID"] for s in (self.open, self.deny, self.mis)}

        def listed(query):
            status, body, headers = FAKE.api("GET", "/v2/sandboxes?" + query)
            self.assertEqual(status, 200, body)
            return body, headers

        body, _ = listed("metadata=" + metadata_query({"suite": TAG, "kind": "a"}))
        self.assertEqual([s["sandboxID"] for s in body], [self.open["sandboxID"]])
        self.assertEqual(body[0]["metadata"]["odd"], "x y/z")
        body, _ = listed("metadata=" + metadata_query({"odd": "x y/z"}))
        self.assertEqual([s["sandboxID"] for s in body], [self.open["sandboxID"]])
        # As in infra, the whole value is unescaped before it is split: a
        # value holding "&" reads as more pairs (here kind=a and odd=x y/z).
        body, _ = listed("metadata=" + metadata_query({"kind": "a&odd=x y/z"}))
        self.assertEqual([s["sandboxID"] for s in body], [self.open["sandboxID"]])
        everything, headers = listed("metadata=" + metadata_query({"suite": TAG}))
        self.assertEqual({s["sandboxID"] for s in everything}, ids)
        self.assertNotIn("X-Next-Token", headers)
        starts = [s["startedAt"] for s in everything]
        self.assertEqual(starts, sorted(starts, reverse=True), "newest first")
        paged, token = [], None
        for _ in range(10):
            query = "limit=1&metadata=" + metadata_query({"suite": TAG})
            if token:
                query += "&nextToken=" + urllib.parse.quote(token)
            page, headers = listed(query)
            self.assertEqual(len(page), 1)
            paged += page
            token = headers.get("X-Next-Token")
            if not token:
                break
        self.assertEqual([s["sandboxID"] for s in paged], [s["sandboxID"] for s in everything])
        body, _ = listed("state=paused&metadata=" + metadata_query({"suite": TAG}))
        self.assertEqual(body, [])
        status, body, _ = FAKE.api("GET", "/sandboxes?metadata=" + metadata_query({"suite": TAG}))
        self.assertEqual({s["sandboxID"] for s in body}, ids)
        for bad in ("limit=0", "limit=101", "nextToken=bm9wZQ", "state=sleeping", "metadata=novalue"):
            with self.subTest(query=bad), FAKE.deliberate():
                status, body, _ = FAKE.api("GET", "/v2/sandboxes?" + bad)
                self.assertError(status, body, 400)

    def test_delete_removes_the_container(self):
        sid = create(timeout=60)["sandboxID"]
        container = container_of(sid)
        self.assertEqual(len(commands(container)) > 0, True)
        status, body, _ = FAKE.api("DELETE", "/sandboxes/" + sid)
        self.assertEqual(status, 204, body)
        self.assertNotIn(container, [n.lstrip("/") for c in FAKE.containers() for n in c["Names"]])
        status, body, _ = FAKE.api("GET", "/sandboxes/" + sid)
        self.assertError(status, body, 404)
        status, body, _ = FAKE.api("DELETE", "/sandboxes/" + sid)
        self.assertError(status, body, 404)

    def test_pause_keeps_files_ends_processes_and_connect_resumes(self):
        sbx = self.new_sandbox(timeout=120, secure=True)
        sid, headers = sbx["sandboxID"], {"X-Access-Token": sbx["envdAccessToken"]}
        body, ctype = multipart([("/home/user/keep.txt", b"kept")])
        status, _, raw = FAKE.envd(sid, "POST", "/files", body, dict(headers, **{"Content-Type": ctype}))
        self.assertEqual(status, 200, raw)
        run = FAKE.run(sid, "sh", ["-c", "sleep 301 >/dev/null 2>&1 & echo started"], headers=headers)
        self.assertEqual(run.stdout, b"started\n")
        self.assertTrue(any("sleep 301" in c for c in commands(container_of(sid))))
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/pause" % sid)
        self.assertEqual(status, 204, body)
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/pause" % sid)
        self.assertError(status, body, 409)
        status, _, raw = FAKE.envd(sid, "GET", "/health", headers=headers)
        self.assertEqual(status, 502)
        self.assertEqual(json.loads(raw)["sandboxId"], sid)
        self.assertEqual(FAKE.api("GET", "/sandboxes/" + sid)[1]["state"], "paused")
        paused = FAKE.api("GET", "/v2/sandboxes?state=paused")[1]
        self.assertIn(sid, [s["sandboxID"] for s in paused])
        self.assertNotIn(sid, [s["sandboxID"] for s in FAKE.api("GET", "/sandboxes")[1]])
        with FAKE.deliberate():
            status, body, _ = FAKE.api("POST", "/sandboxes/%s/connect" % sid, {})
        self.assertError(status, body, 400)
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        self.assertEqual((status, body["sandboxID"]), (201, sid), body)
        self.assertEqual(body["envdAccessToken"], sbx["envdAccessToken"])
        status, _, raw = FAKE.envd(sid, "GET", "/files?path=/home/user/keep.txt", headers=headers)
        self.assertEqual((status, raw), (200, b"kept"))
        self.assertFalse(any("sleep 301" in c for c in commands(container_of(sid))))
        end_at = FAKE.api("GET", "/sandboxes/" + sid)[1]["endAt"]
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 1})
        self.assertEqual((status, body["sandboxID"]), (200, sid), body)
        self.assertEqual(FAKE.api("GET", "/sandboxes/" + sid)[1]["endAt"], end_at, "connect never shortens")

        FAKE.misbehave(resume_new_id=True)
        self.assertEqual(FAKE.api("POST", "/sandboxes/%s/pause" % sid)[0], 204)
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/connect" % sid, {"timeout": 60})
        self.assertEqual(status, 201, body)
        new_id = body["sandboxID"]
        self.addCleanup(kill, new_id)
        self.assertNotEqual(new_id, sid)
        self.assertEqual(FAKE.api("GET", "/sandboxes/" + sid)[0], 404)
        self.assertEqual(FAKE.api("GET", "/sandboxes/" + new_id)[1]["state"], "running")
        status, _, raw = FAKE.envd(new_id, "GET", "/files?path=keep.txt", headers=headers)
        self.assertEqual((status, raw), (200, b"kept"))

    def test_ttl_kills_or_pauses(self):
        doomed = self.new_sandbox(timeout=2)["sandboxID"]
        doomed_container = container_of(doomed)
        sleeper = self.new_sandbox(timeout=600, autoPause=True)["sandboxID"]
        status, body, _ = FAKE.api("POST", "/sandboxes/%s/timeout" % sleeper, {"timeout": 1})
        self.assertEqual(status, 204, body)
        with FAKE.deliberate():
            self.assertError(*FAKE.api("POST", "/sandboxes/%s/timeout" % sleeper, {})[:2], 400)
        self.assertError(*FAKE.api("POST", "/sandboxes/inosuch/timeout", {"timeout": 5})[:2], 404)

        def expired():
            gone = FAKE.api("GET", "/sandboxes/" + doomed)[0] == 404
            return gone and FAKE.api("GET", "/sandboxes/" + sleeper)[1]["state"] == "paused"

        self.assertTrue(FAKE.wait_for(expired, timeout=20))
        names = [n.lstrip("/") for c in FAKE.containers() for n in c["Names"]]
        self.assertNotIn(doomed_container, names)
        self.assertIn(container_of(sleeper), names)

    def test_body_limit(self):
        with socket.create_connection(("127.0.0.1", FAKE.port), timeout=10) as s, \
                FAKE.deliberate():   # the body never sent
            s.sendall(b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                      % (FAKE.api_key.encode(), (64 << 20) + 1))
            answer = s.recv(4096)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer)

    # -- envd

    def test_envd_tokens(self):
        sid, good = self.deny["sandboxID"], self.deny_headers
        traffic_only = {"e2b-traffic-access-token": good["e2b-traffic-access-token"]}
        cases = [({}, "GET", "/health", 403), ({"e2b-traffic-access-token": "bad"}, "GET", "/health", 403),
                 (traffic_only, "GET", "/health", 204), (traffic_only, "GET", "/metrics", 401),
                 (dict(traffic_only, **{"X-Access-Token": "bad"}), "GET", "/metrics", 401),
                 (traffic_only, "GET", "/files?path=/etc/hostname", 401),
                 (traffic_only, "POST", "/process.Process/Start", 401),
                 (good, "GET", "/metrics", 200)]
        for headers, method, path, code in cases:
            # (Start without its request, on purpose: refused for its token first.)
            with self.subTest(headers=sorted(headers), path=path), FAKE.deliberate():
                status, _, raw = FAKE.envd(sid, method, path, headers=headers)
                self.assertEqual(status, code, raw)
                if code in (401, 403):
                    self.assertEqual(json.loads(raw)["code"], code)
        status, _, raw = FAKE.envd("inosuchsandbox000000", "GET", "/health")
        self.assertEqual(status, 502)
        self.assertEqual(json.loads(raw)["message"], "The sandbox was not found")

    def test_files_and_processes(self):
        sid = self.open["sandboxID"]
        body, ctype = multipart([("/home/user/proj/main.py", MAIN_PY), ("proj/helper.py", HELPER_PY)])
        status, _, raw = FAKE.envd(sid, "POST", "/files?username=user", body, {"Content-Type": ctype})
        self.assertEqual(status, 200, raw)
        self.assertEqual(json.loads(raw), [
            {"path": "/home/user/proj/main.py", "name": "main.py", "type": "file"},
            {"path": "/home/user/proj/helper.py", "name": "helper.py", "type": "file"}])
        body, ctype = multipart([("ignored-name", b"by query\n")])
        status, _, raw = FAKE.envd(sid, "POST", "/files?path=/tmp/deep/er/q.txt", body, {"Content-Type": ctype})
        self.assertEqual(json.loads(raw)[0]["path"], "/tmp/deep/er/q.txt")
        for path, data in (("/home/user/proj/main.py", MAIN_PY), ("proj/helper.py", HELPER_PY),
                           ("/tmp/deep/er/q.txt", b"by query\n")):
            status, _, raw = FAKE.envd(sid, "GET", "/files?path=" + urllib.parse.quote(path))
            self.assertEqual((status, raw), (200, data))
        self.assertEqual(FAKE.envd(sid, "GET", "/files?path=/home/user/nope")[0], 404)
        self.assertEqual(FAKE.envd(sid, "GET", "/files?path=/home/user/proj")[0], 400)

        run = FAKE.run(sid, "python3", ["main.py"], cwd="/home/user/proj")
        self.assertIsInstance(run.pid, int)
        self.assertEqual((run.stdout, run.stderr), (b"hello from helper\n", b"to stderr\n"))
        self.assertEqual(run.end, {"exitCode": 3, "exited": True, "status": "exit status 3"})
        self.assertEqual(run.trailer, {})
        run = FAKE.run(sid, "python3", ["-c", "import os; print(os.getuid(), os.getcwd(), "
                                        "os.environ['FAKE_VAR'], os.environ['PER_RUN'])"],
                       envs={"PER_RUN": "yes"})
        self.assertEqual(run.stdout, b"1000 /home/user from-create yes\n", run.stderr)
        self.assertEqual(run.end, {"exited": True, "status": "exit status 0"}, "exitCode 0 is left out")
        run = FAKE.run(sid, "stat", ["-c", "%u:%g", "/home/user/proj", "/home/user/proj/main.py"])
        self.assertEqual(run.stdout, b"1000:1000\n1000:1000\n")
        for cmd, cwd in (("no-such-command", None), ("true", "/no/such/dir")):
            with self.subTest(cmd=cmd, cwd=cwd):
                run = FAKE.run(sid, cmd, cwd=cwd)
                self.assertEqual((run.pid, run.trailer["error"]["code"]), (None, "invalid_argument"))

    def test_default_user_cannot_write_root_and_root_can(self):
        sid = self.open["sandboxID"]
        run = FAKE.run(sid, "sh", ["-c", "id -u; echo x > /root/x"])
        self.assertEqual(run.stdout, b"1000\n")
        self.assertIn(b"Permission denied", run.stderr)
        self.assertTrue(run.end["exited"] and run.end["exitCode"] != 0, run.end)
        run = FAKE.run(sid, "sh", ["-c", "id -u; echo x > /root/x && cat /root/x"],
                       headers={"Authorization": basic_user("root")})
        self.assertEqual(run.stdout, b"0\nx\n")
        run = FAKE.run(sid, "id", ["-u"], headers={"Authorization": basic_user("nobody")})
        self.assertEqual(run.trailer["error"]["code"], "unauthenticated")

    def test_connect_timeout_kills_the_process(self):
        sid = self.open["sandboxID"]
        started = time.monotonic()
        run = FAKE.run(sid, "sleep", ["61"], headers={"Connect-Timeout-Ms": "1500"})
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(run.trailer["error"]["code"], "deadline_exceeded")
        self.assertIsNone(run.end)
        container = container_of(sid)
        self.assertTrue(FAKE.wait_for(lambda: not any("sleep 61" in c for c in commands(container))))

    def test_send_signal_kills_the_group_of_a_process_that_outlived_its_client(self):
        sid = self.open["sandboxID"]
        c = http.client.HTTPConnection("127.0.0.1", FAKE.port, timeout=30)
        c.request("POST", "/process.Process/Start",
                  envelope({"process": {"cmd": "sh", "args": ["-c", "sleep 302 & sleep 302 & wait"]}}),
                  {"Host": FAKE.envd_host(sid), "Content-Type": "application/connect+json"})
        r = c.getresponse()
        head = r.read(5)
        start = json.loads(r.read(int.from_bytes(head[1:], "big")))
        pid = start["event"]["start"]["pid"]
        c.close()
        container = container_of(sid)
        self.assertTrue(FAKE.wait_for(lambda: commands(container).count("sleep 302") == 2))

        def signal(body):
            status, _, raw = FAKE.envd(sid, "POST", "/process.Process/SendSignal",
                                       json.dumps(body).encode(), {"Content-Type": "application/json"})
            return status, json.loads(raw)

        status, body = signal({"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
        self.assertEqual((status, body["code"]), (404, "not_found"))
        status, body = signal({"process": {"pid": pid}, "signal": "SIGNAL_UNSPECIFIED"})
        self.assertEqual((status, body["code"]), (501, "unimplemented"))
        self.assertEqual(signal({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}), (200, {}))
        self.assertTrue(FAKE.wait_for(lambda: not any("sleep 302" in x for x in commands(container))))

    def test_deny_vm_has_only_loopback(self):
        run = FAKE.run(self.deny["sandboxID"], "ls", ["/sys/class/net"], headers=self.deny_headers)
        self.assertEqual(run.stdout, b"lo\n")
        run = FAKE.run(self.open["sandboxID"], "ls", ["/sys/class/net"])
        self.assertIn(b"eth0", run.stdout)

    def test_egress_reaches_the_bridge_only_when_open(self):
        gateway = FAKE.gateway()
        listener = socket.create_server((gateway, 0))
        self.addCleanup(listener.close)
        port = listener.getsockname()[1]
        threading.Thread(target=lambda: [listener.accept()[0].close() for _ in range(2)], daemon=True).start()
        probes = [(self.open, {}, True), (self.deny, self.deny_headers, False), (self.mis, {}, True)]
        for sbx, headers, reaches in probes:
            with self.subTest(sandbox=sbx["sandboxID"]):
                run = FAKE.run(sbx["sandboxID"], "python3", ["-c", PROBE_PY, gateway, str(port)], headers=headers)
                self.assertEqual(run.stdout == b"connected\n", reaches, run.stderr)
        state = FAKE.state()
        modes = {s["sandboxID"]: s["network_mode"] for s in state["sandboxes"]}
        self.assertEqual((modes[self.deny["sandboxID"]], modes[self.mis["sandboxID"]]),
                         ("none", state["network"]))
        self.assertIs(FAKE.api("GET", "/sandboxes/" + self.mis["sandboxID"])[1]["allowInternetAccess"], False,
                      "egress_open still reports the deny it ignored")

    def test_network_report_misbehaviours(self):
        gateway = FAKE.gateway()
        listener = socket.create_server((gateway, 0))
        self.addCleanup(listener.close)
        port = listener.getsockname()[1]
        threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
        locked = dict(timeout=60, secure=True, allow_internet_access=False,
                      network={"allowPublicTraffic": False, "denyOut": ["0.0.0.0/0"]})
        # internet_open: the deny is ignored, the VM reaches out, and its
        # detail says so (allowInternetAccess true, no denyOut).
        FAKE.misbehave(internet_open=True)
        sbx = self.new_sandbox(**locked)
        headers = {"X-Access-Token": sbx["envdAccessToken"],
                   "e2b-traffic-access-token": sbx["trafficAccessToken"]}
        run = FAKE.run(sbx["sandboxID"], "python3", ["-c", PROBE_PY, gateway, str(port)], headers=headers)
        self.assertEqual(run.stdout, b"connected\n", run.stderr)
        d = FAKE.api("GET", "/sandboxes/" + sbx["sandboxID"])[1]
        self.assertEqual((d["allowInternetAccess"], d["network"]), (True, {"allowPublicTraffic": False}))
        # detail_internet, detail_network: only the report changes.
        FAKE.reset()
        FAKE.misbehave(detail_internet=None, detail_network={"denyOut": ["10.0.0.0/8"]})
        sbx = self.new_sandbox(**locked)
        self.assertEqual([s["network_mode"] for s in FAKE.state()["sandboxes"]
                          if s["sandboxID"] == sbx["sandboxID"]], ["none"])
        d = FAKE.api("GET", "/sandboxes/" + sbx["sandboxID"])[1]
        self.assertEqual((d["allowInternetAccess"], d["network"]), (None, {"denyOut": ["10.0.0.0/8"]}))
        FAKE.reset()
        d = FAKE.api("GET", "/sandboxes/" + sbx["sandboxID"])[1]
        self.assertEqual(d["network"], {"denyOut": ["10.0.0.0/8"]}, "stamped at the create")
        status, body, _ = FAKE.api("POST", "/_fake/misbehave", {"detail_internet": "yes"})
        self.assertEqual(status, 400, body)

    def test_metrics_read_the_container_limits(self):
        for sbx, headers, cpus, mib in ((self.open, {}, 2, 512), (self.mis, {}, 1, 256)):
            with self.subTest(sandbox=sbx["sandboxID"]):
                detail = FAKE.api("GET", "/sandboxes/" + sbx["sandboxID"])[1]
                self.assertEqual((detail["cpuCount"], detail["memoryMB"]), (cpus, mib))
                status, _, raw = FAKE.envd(sbx["sandboxID"], "GET", "/metrics", headers=headers)
                metrics = json.loads(raw)
                self.assertEqual((metrics["cpu_count"], metrics["mem_total_mib"]), (cpus, mib), metrics)
                self.assertEqual(metrics["mem_total"], mib << 20)

    def test_sandbox_metrics_sample_its_cgroup(self):
        # A sandbox busy on one core for 3 s: its samples (one a second)
        # show the CPU and the memory its container used, and the window
        # chooses them; an unknown sandbox is 404, a bad bound 400.
        sbx = self.new_sandbox(timeout=600)
        t0 = int(time.time())
        run = FAKE.run(sbx["sandboxID"], "python3",
                       ["-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass\n"
                              "print(time.process_time())"])
        used = float(run.stdout)
        time.sleep(1.5)
        status, samples, _ = FAKE.api("GET", "/sandboxes/%s/metrics?start=%d" % (sbx["sandboxID"], t0))
        self.assertEqual(status, 200, samples)
        self.assertGreaterEqual(len(samples), 3, samples)
        for m in samples:
            self.assertGreaterEqual(m["timestampUnix"], t0)
            self.assertEqual((m["cpuCount"], m["memTotal"]), (2, 512 << 20), m)
            self.assertGreater(m["memUsed"], 0, m)
        # What the samples add up to is the CPU the loop got (all of one
        # core of two on an idle machine, less on a busy one), within a
        # second's sample at each end.
        shown = sum(m["cpuUsedPct"] / 100 * m["cpuCount"] for m in samples[1:])
        self.assertGreaterEqual(shown, used * 0.5, (used, samples))
        self.assertLessEqual(shown, used + 1.5, (used, samples))
        last = samples[-1]["timestampUnix"]
        status, none, _ = FAKE.api("GET", "/sandboxes/%s/metrics?start=%d" % (sbx["sandboxID"], last + 60))
        self.assertEqual((status, none), (200, []))
        status, body, _ = FAKE.api("GET", "/sandboxes/nosuchsandbox/metrics")
        self.assertError(status, body, 404)
        with FAKE.deliberate():
            status, body, _ = FAKE.api("GET", "/sandboxes/%s/metrics?start=x" % sbx["sandboxID"])
        self.assertError(status, body, 400)

    # -- misbehaviours

    def test_fail_misbehaviour(self):
        sid = self.open["sandboxID"]
        FAKE.misbehave(fail={"match": "^POST /process.Process/Start", "status": 502, "times": 1})
        with self.assertRaisesRegex(RuntimeError, "502"):
            FAKE.run(sid, "true")
        self.assertEqual(FAKE.run(sid, "true").end, {"exited": True, "status": "exit status 0"})
        FAKE.misbehave(fail={"match": "^GET /v2/sandboxes", "status": 503, "times": 2})
        statuses = [FAKE.api("GET", "/v2/sandboxes")[0] for _ in range(3)]
        self.assertEqual(statuses, [503, 503, 200])

    def test_vanish_during_process(self):
        sid = self.new_sandbox(timeout=120)["sandboxID"]
        container = container_of(sid)
        FAKE.misbehave(vanish_during_process=True)
        started = time.monotonic()
        with self.assertRaises((http.client.IncompleteRead, http.client.RemoteDisconnected,
                                ConnectionError)):
            FAKE.run(sid, "sleep", ["30"])
        self.assertLess(time.monotonic() - started, 20)
        self.assertTrue(FAKE.wait_for(lambda: FAKE.api("GET", "/sandboxes/" + sid)[0] == 404))
        self.assertNotIn(container, [n.lstrip("/") for c in FAKE.containers() for n in c["Names"]])

    def test_create_delay(self):
        FAKE.misbehave(create_delay_ms=1500)
        started = time.monotonic()
        self.new_sandbox(timeout=30)
        self.assertGreaterEqual(time.monotonic() - started, 1.5)

    def test_delay_root_process(self):
        # A root process (the provider's cleanup) runs its command only
        # after the delay; the guest's user's processes are not delayed.
        sid = self.new_sandbox(timeout=60)["sandboxID"]
        FAKE.misbehave(delay_root_process_ms=1500)
        started = time.monotonic()
        run = FAKE.run(sid, "id", ["-u"], headers={"Authorization": basic_user("root")})
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        self.assertEqual(run.stdout, b"0\n")
        started = time.monotonic()
        run = FAKE.run(sid, "id", ["-u"])
        self.assertLess(time.monotonic() - started, 1.5)
        self.assertEqual(run.stdout, b"1000\n")

    def test_omit_misbehaviour_garbles_the_answer_not_the_sandbox(self):
        for field in ("envdAccessToken", "trafficAccessToken"):
            with self.subTest(field=field):
                FAKE.misbehave(omit=field)
                sbx = self.new_sandbox(timeout=60, secure=True, network={"allowPublicTraffic": False},
                                       metadata={"suite": TAG + "-omit", "field": field})
                self.assertNotIn(field, sbx)
                listed = FAKE.api("GET", "/v2/sandboxes?metadata=" +
                                  metadata_query({"suite": TAG + "-omit", "field": field}))[1]
                self.assertEqual([s["sandboxID"] for s in listed], [sbx["sandboxID"]])

    def test_plant_and_state(self):
        FAKE.reset()
        sid = FAKE.plant({"suite": TAG + "-plant"})
        self.addCleanup(kill, sid)
        query = "/v2/sandboxes?metadata=" + metadata_query({"suite": TAG + "-plant"})
        listed = FAKE.api("GET", query)[1]
        self.assertEqual([s["sandboxID"] for s in listed], [sid])
        state = FAKE.state()
        mine = [s for s in state["sandboxes"] if s["sandboxID"] == sid][0]
        self.assertEqual((mine["state"], mine["network_mode"], mine["metadata"]),
                         ("running", state["network"], {"suite": TAG + "-plant"}))
        self.assertTrue(mine["container"])
        self.assertEqual([(r["method"], r["path"]) for r in state["requests"]], [("GET", query)])

    def test_sigterm_removes_every_container(self):
        other = FakeE2B().start()
        try:
            status, sbx, _ = other.api("POST", "/sandboxes", {"templateID": "base", "timeout": 60})
            self.assertEqual(status, 201, sbx)
            self.assertEqual(other.api("POST", "/sandboxes/%s/pause" % sbx["sandboxID"])[0], 204)
            other.plant({"x": "y"})
            self.assertEqual((len(other.containers()), len(other.networks())), (2, 1))
        finally:
            left = other.stop()
        self.assertEqual(left, [])
        self.assertEqual(other.returncode, 0)


class ContractCheck(unittest.TestCase):
    """The fake's check of what it is sent and what it answers against
    E2B's own documents (tests/fakes/e2b/contract.py)."""

    def setUp(self):
        self.violations_before = len(FAKE.violations())

    def tearDown(self):
        self.assertEqual(FAKE.violations()[self.violations_before:], [])

    def test_a_misspelt_create_field_is_named(self):
        # E2B's server ignores a field it does not declare: the VM is made,
        # with its internet open.  The check names the field.
        with FAKE.deliberate() as got:
            status, sbx, _ = FAKE.api("POST", "/sandboxes", {"templateID": "base", "timeout": 30,
                                                             "allow_internet_acess": False})
        self.assertEqual(status, 201, sbx)
        kill(sbx["sandboxID"])
        self.assertEqual([(v["operation"], v["field"], v["direction"]) for v in got],
                         [("POST /sandboxes", "body.allow_internet_acess", "request")], got)
        self.assertRegex(got[0]["file"], r"^e2b/openapi\.yml:\d+$")

    def test_wrong_types_query_and_path(self):
        with FAKE.deliberate() as got:
            FAKE.api("POST", "/sandboxes", {"templateID": "base", "timeout": "30",
                                            "network": {"denyOut": "0.0.0.0/0"}})
            FAKE.api("GET", "/v2/sandboxes?states=running&limit=500")
            FAKE.api("POST", "/sandboxes/x")
            FAKE.api("GET", "/v1/nothing")
        fields = sorted(v["field"] for v in got)
        self.assertEqual(fields, ["body.network.denyOut", "body.timeout", "method", "path",
                                  "query.limit", "query.states"], got)

    def test_a_process_request_is_checked_against_process_proto(self):
        sbx = create(timeout=60)
        self.addCleanup(kill, sbx["sandboxID"])
        with FAKE.deliberate() as got:
            _, _, started = FAKE.envd(sbx["sandboxID"], "POST", "/process.Process/Start",
                                      envelope({"process": {"cmd": "true", "environment": {"A": "b"}},
                                                "stdin": 1}),
                                      {"Content-Type": "application/connect+json"})
            status, _, signalled = FAKE.envd(sbx["sandboxID"], "POST", "/process.Process/SendSignal",
                                             json.dumps({"process": {"pid": 1}, "signal": "SIGKILL"}).encode(),
                                             {"Content-Type": "application/json"})
        # envd's Connect handler refuses JSON that does not read as the
        # message (stdin is a bool, SIGKILL no Signal), and drops fields it
        # does not know (environment: recorded, not refused).
        (flags, trailer), = read_envelopes(started)
        self.assertEqual((flags, trailer["error"]["code"]), (2, "invalid_argument"), trailer)
        self.assertIn("body.stdin", trailer["error"]["message"])
        self.assertEqual((status, json.loads(signalled)["code"]), (400, "invalid_argument"))
        self.assertEqual(sorted((v["field"], v["file"].split(":")[0]) for v in got),
                         [("body.process.environment", "e2b/process.proto"),
                          ("body.signal", "e2b/process.proto"),
                          ("body.stdin", "e2b/process.proto")], got)
        # What the fake streams back is checked too (and holds).
        run = FAKE.run(sbx["sandboxID"], "sh", ["-c", "echo hi; exit 3"])
        self.assertEqual((run.stdout, run.end.get("exitCode")), (b"hi\n", 3))

    def test_answers_are_checked_against_the_response_schemas(self):
        c = contract.Contract(os.path.join(os.path.dirname(FAKE_PY), "..", "..", "..", "..",
                                           "shared", "upstream", "e2b"))
        op, _ = c.api.operation("GET", "/sandboxes/i123")
        detail = {"templateID": "t", "sandboxID": "i123", "clientID": "c", "cpuCount": "2",
                  "memoryMB": 512, "diskSizeMB": 1, "state": "running", "envdVersion": "0.4.0",
                  "startedAt": "now", "allowInternetAccess": None, "network": {"denyOut": []}}
        found = op.check_response(200, "application/json", json.dumps(detail).encode())
        self.assertEqual(sorted(v["field"] for v in found),
                         ["response.200.cpuCount", "response.200.endAt", "response.200.startedAt"])
        self.assertEqual(op.check_response(204, "", b"")[0]["field"], "response")
        found = c.process.check("StartResponse", {"event": {"end": {"exitCode": "x"}, "exit": {}}},
                                "Start")
        self.assertEqual(sorted(v["field"] for v in found),
                         ["message.event.end.exitCode", "message.event.exit"])

    def test_the_api_refuses_what_its_document_does_not_admit(self):
        # E2B's API validates each request against openapi.yml before any
        # handler (400, "validation error: ..."); a field it does not
        # declare passes (and the check records it).
        cases = [({"timeout": 60}, "body.templateID"),
                 ({"templateID": "base", "timeout": "60"}, "body.timeout"),
                 ({"templateID": "base", "secure": "yes"}, "body.secure"),
                 ({"templateID": "base", "network": {"denyOut": "0.0.0.0/0"}}, "body.network.denyOut"),
                 ({"templateID": "base", "autoPause": 1}, "body.autoPause")]
        for body, field in cases:
            with self.subTest(body=body), FAKE.deliberate():
                status, answer, _ = FAKE.api("POST", "/sandboxes", body)
                self.assertEqual(status, 400, answer)
                self.assertTrue(answer["message"].startswith("validation error: "), answer)
                self.assertIn(field, answer["message"])
        with FAKE.deliberate():
            status, answer, _ = FAKE.api("GET", "/v2/sandboxes?state=sleeping")
        self.assertEqual(status, 400, answer)
        self.assertIn("query.state", answer["message"])
        with FAKE.deliberate():
            status, answer, _ = FAKE.api("POST", "/sandboxes/inosuch/connect", {})
        self.assertIn("body.timeout", answer["message"])
        # The key comes first: no key is 401 before the body is looked at.
        with FAKE.deliberate():
            status, answer, _ = FAKE.api("POST", "/sandboxes", {"timeout": "x"}, key=False)
        self.assertEqual(status, 401, answer)
        with FAKE.deliberate() as got:
            status, sbx, _ = FAKE.api("POST", "/sandboxes", {"templateID": "base", "timeout": 30,
                                                             "unknownField": 1})
        self.assertEqual(status, 201, sbx)
        kill(sbx["sandboxID"])
        self.assertEqual([v["field"] for v in got], ["body.unknownField"])

    def test_the_fake_does_not_start_without_the_contracts(self):
        p = subprocess.run([sys.executable, FAKE_PY, "--api-key", "k", "--template", "b=x",
                            "--upstream", "/nonexistent/e2b"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"openapi.yml is missing", p.stderr)
        self.assertEqual(p.stdout, b"")


if __name__ == "__main__":
    unittest.main()
