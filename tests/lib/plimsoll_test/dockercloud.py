# SPDX-License-Identifier: Apache-2.0
"""The Docker Sandboxes fake (tests/fakes/dockercloud/fake_dockercloud.py)
as the tests see it.

FakeDockerCloud starts one fake as a child process and speaks to it: the
token exchange (token), the management API with the access token (api),
sandbox creation that waits for running (create), deletion with the etag
(delete), endpoint credentials (credential), a sandbox's own endpoint
(endpoint, exec, upload), and the test controls (misbehave, reset, plant,
set_account_policy, state, take_violations).  stop() ends the fake with
SIGTERM and returns the containers and networks of its label still left
(none when it cleaned up); it raises ContractViolations when the fake
recorded any request or answer that breaks the API's OpenAPI file
(../shared/upstream/dockercloud/api.yaml) and no test took them.  gateway() is the host's address on the fake's bridge network, where a
test listens to probe a sandbox's egress.

    with FakeDockerCloud() as fake:
        sbx = fake.create(displayNamePrefix="run-")
        out = fake.exec(sbx, ["python3", "-c", "print(1)"])
"""
import base64
import http.client
import json
import os
import select
import subprocess
import sys
import time
import urllib.parse
import uuid

from .fakes import FakeProcess
from .e2b import bridge_gateway
from .harness import ROOT

FAKE = os.path.join(ROOT, "tests", "fakes", "dockercloud", "fake_dockercloud.py")
IMAGE = "plimsoll/project:latest"
LABEL = "plimsoll-fake-dockercloud"


def multipart(files, boundary="dcfakeboundary"):
    """An upload body: metadata/content pairs for [(path, bytes[, mode])]."""
    body = b""
    for item in files:
        path, data = item[0], item[1]
        meta = {"path": path}
        if len(item) > 2:
            meta["mode"] = item[2]
        body += (b"--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                 b"Content-Type: application/json\r\n\r\n%s\r\n" % (boundary.encode(), json.dumps(meta).encode()))
        body += (b"--%s\r\nContent-Disposition: form-data; name=\"content\"\r\n"
                 b"Content-Type: application/octet-stream\r\n\r\n" % boundary.encode()) + data + b"\r\n"
    return body + b"--%s--\r\n" % boundary.encode(), "multipart/form-data; boundary=" + boundary


class ContractViolations(AssertionError):
    """Requests or answers that break the Docker Sandboxes API's OpenAPI
    file, as the fake recorded them."""


class FakeDockerCloud(FakeProcess):
    """One fake Docker Sandboxes service. Use as a context manager."""
    LABEL = LABEL

    def __init__(self, account="plimsoll-test", secret="dckr_pat_fake", images=None,
                 default_image=IMAGE, permissions=None, token_ttl=600, max_sandboxes=10,
                 account_allow=(), main_user="root"):
        self.account, self.secret = account, secret
        self.images = images or {"project": IMAGE}
        self.default_image = default_image
        self.permissions = permissions
        self.token_ttl, self.max_sandboxes = token_ttl, max_sandboxes
        self.account_allow = list(account_allow)
        self.main_user = main_user
        self.proc = None
        self.port = self.url = self.auth_url = self.instance = None
        self.access_token = None
        self.returncode = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self, timeout=30):
        argv = [sys.executable, FAKE, "--listen", "127.0.0.1:0", "--account", self.account,
                "--secret", self.secret, "--default-image", self.default_image,
                "--token-ttl", str(self.token_ttl), "--max-sandboxes", str(self.max_sandboxes)]
        for name, image in self.images.items():
            argv += ["--image", "%s=%s" % (name, image)]
        if self.permissions is not None:
            argv += ["--permissions", ",".join(self.permissions)]
        argv += ["--main-user", self.main_user]
        for net in self.account_allow:
            argv += ["--account-allow", net]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the Docker Sandboxes fake did not start (exit %s)" % self.proc.returncode)
        hello = json.loads(line)
        self.port = int(hello["listening"].rpartition(":")[2])
        self.url = self.auth_url = "http://127.0.0.1:%d" % self.port
        self.instance = hello["instance"]
        return self

    def gateway(self):
        return bridge_gateway(self.state()["network"])

    # -- HTTP

    def request(self, method, path, body=None, headers=None, timeout=120):
        """One request: (status, headers, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=dict(headers or {}))
            r = c.getresponse()
            return r.status, r.headers, r.read()
        finally:
            c.close()

    def json_request(self, method, path, body=None, headers=None):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = None if body is None else json.dumps(body).encode()
        status, rh, raw = self.request(method, path, data, h)
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            answer = raw
        return status, answer, rh

    def token(self, identifier=None, secret=None):
        """POST /v2/auth/token; the new access token (also kept as
        .access_token)."""
        status, body, _ = self.json_request("POST", "/v2/auth/token", {
            "identifier": self.account if identifier is None else identifier,
            "secret": self.secret if secret is None else secret})
        if status != 200:
            raise RuntimeError("token exchange: %s %r" % (status, body))
        self.access_token = body["access_token"]
        return self.access_token

    def api(self, method, path, body=None, headers=None, token=True):
        """A management call (token=True: the current access token, False:
        none, a string: that one): (status, JSON or None, headers)."""
        h = {}
        if token is True:
            h["Authorization"] = "Bearer " + (self.access_token or self.token())
        elif token:
            h["Authorization"] = "Bearer " + token
        h.update(headers or {})
        return self.json_request(method, path, body, h)

    def get(self, sandbox):
        return self.api("GET", "/v1/" + self.name_of(sandbox))

    @staticmethod
    def name_of(sandbox):
        return sandbox["name"] if isinstance(sandbox, dict) else "sandboxes/" + sandbox

    def create(self, wait=True, headers=None, **body):
        """POST /v1/sandboxes (imageRef defaults to the default image); with
        wait, reads it until it is no longer creating.  The sandbox."""
        if "image" not in body:
            body.setdefault("imageRef", self.default_image)
        status, sbx, _ = self.api("POST", "/v1/sandboxes", body, headers)
        if status not in (201, 202):
            raise RuntimeError("create %r: %s %r" % (body, status, sbx))
        if wait and sbx["core"]["status"] == "creating":
            sbx = self.wait_for(lambda: (lambda g: g[1] if g[0] == 200 and g[1]["core"]["status"] != "creating"
                                         else None)(self.get(sbx)), timeout=60)
        return sbx

    def delete(self, sandbox, wait=True):
        """DELETE with the sandbox's current etag; with wait, reads until
        404.  The delete's status."""
        status, current, headers = self.get(sandbox)
        if status == 404:
            return 404
        status, body, _ = self.api("DELETE", "/v1/" + self.name_of(sandbox), headers={"If-Match": headers["ETag"]})
        if wait and status == 202:
            self.wait_for(lambda: self.get(sandbox)[0] == 404, timeout=60)
        return status

    def credential(self, sandbox, permissions=("sandboxesExec", "sandboxesFilesRead", "sandboxesFilesWrite"),
                   ttl=None):
        body = {"permissions": list(permissions)}
        if ttl is not None:
            body["ttl"] = ttl
        status, cred, _ = self.api("POST", "/v1/%s/endpoint-credentials" % self.name_of(sandbox), body)
        if status != 200:
            raise RuntimeError("endpoint credential: %s %r" % (status, cred))
        return cred["token"]

    def endpoint(self, sandbox, method, path, body=None, headers=None, token=None, timeout=120):
        """A request to the sandbox's endpoint (core.endpoint.uri + path)
        with a scoped token (token=None: a fresh full one; False: none):
        (status, headers, body bytes)."""
        uri = urllib.parse.urlsplit(sandbox["core"]["endpoint"]["uri"])
        h = dict(headers or {})
        if body is not None and not any(k.lower() == "content-type" for k in h):
            # What the document's operation takes: raw bytes for a file's
            # content, JSON for every other body.
            h["Content-Type"] = ("application/octet-stream" if path.startswith("/v1/files/content")
                                 else "application/json")
        if token is None:
            token = self.credential(sandbox)
        if token:
            h["Authorization"] = "Bearer " + token
        return self.request(method, uri.path + path, body, h, timeout=timeout)

    def exec(self, sandbox, cmd, token=None, **request):
        """POST /v1/processes/exec; the ExecResponse with stdout and stderr
        decoded to bytes."""
        request["cmd"] = list(cmd)
        status, _, raw = self.endpoint(sandbox, "POST", "/v1/processes/exec", json.dumps(request).encode(),
                                       {"Content-Type": "application/json"}, token=token)
        if status != 200:
            raise RuntimeError("exec: %s %r" % (status, raw))
        out = json.loads(raw)
        out["stdout"] = base64.b64decode(out.get("stdout", ""))
        out["stderr"] = base64.b64decode(out.get("stderr", ""))
        return out

    def upload(self, sandbox, files, token=None):
        body, ctype = multipart(files)
        return self.endpoint(sandbox, "POST", "/v1/files/upload", body, {"Content-Type": ctype}, token=token)

    # -- test control

    def control(self, method, path, body=None):
        return self.json_request(method, path, body, {"X-Fake-Control": self.secret})

    def misbehave(self, **kw):
        status, body, _ = self.control("POST", "/_fake/misbehave", kw)
        if status != 200:
            raise RuntimeError("misbehave %r: %s %r" % (kw, status, body))
        return body

    def reset(self):
        self.control("POST", "/_fake/reset", {})

    def set_account_policy(self, mode="denyAll", allow=(), deny=()):
        status, body, _ = self.control("PUT", "/_fake/account-policy", {
            "mode": mode, "allowNetworks": list(allow), "denyNetworks": list(deny)})
        if status != 200:
            raise RuntimeError("account policy: %s %r" % (status, body))
        return body

    def plant(self, display_name_prefix="plimsoll-", **extra):
        """A real sandbox nobody asked for (a lost create answer): its uid."""
        extra.setdefault("displayNamePrefix", display_name_prefix)
        status, body, _ = self.control("POST", "/_fake/plant", extra)
        if status != 201:
            raise RuntimeError("plant: %s %r" % (status, body))
        return body["uid"]

    def state(self):
        return self.control("GET", "/_fake/state")[1]

    def take_violations(self):
        """The contract violations recorded since the last take (each
        {operation, field, message, upstream, line, request}), cleared."""
        status, body, _ = self.control("POST", "/_fake/take-violations")
        if status != 200:
            raise RuntimeError("take-violations: %s %r" % (status, body))
        return body["violations"]

    def stop(self, timeout=60):
        """As FakeProcess.stop; raises ContractViolations (after the fake
        is stopped and its containers removed) when any were recorded."""
        violations = []
        if self.proc and self.proc.poll() is None:
            violations = self.take_violations()
        left = super().stop(timeout)
        if violations:
            raise ContractViolations("the Docker Sandboxes fake saw %d breaches of %s: %s"
                                     % (len(violations), violations[0]["upstream"],
                                        json.dumps(violations[:10], indent=1)))
        return left

    @staticmethod
    def idempotency_key():
        return str(uuid.uuid4())

    def wait_for(self, predicate, timeout=20, step=0.1):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(step)
