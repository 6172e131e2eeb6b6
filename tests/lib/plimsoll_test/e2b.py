# SPDX-License-Identifier: Apache-2.0
"""The E2B fake (tests/fakes/e2b/fake_e2b.py) as the tests see it.

FakeE2B starts one fake as a child process and speaks to it: the control
plane with the API key (api), the test controls (misbehave, reset, plant,
state), a sandbox's envd through the edge proxy's Host routing (envd), and
Process/Start's Connect stream (run).  stop() ends the fake with SIGTERM and
proves its containers and network are gone; it raises AssertionError when
the fake recorded any violation of E2B's contracts (a request the client
sent, an answer the fake gave) that no test sent on purpose
(deliberate()).  bridge_gateway(network) is a
docker bridge network's address on the host, where a test listens to probe
a sandbox's egress (FakeE2B.gateway(): the fake's own network's).

    with FakeE2B() as fake:
        status, sbx = fake.api("POST", "/sandboxes", {"templateID": "base"})
        result = fake.run(sbx["sandboxID"], "python3", ["-c", "print(1)"])
"""
import base64
import contextlib
import http.client
import json
import os
import select
import struct
import subprocess
import sys
import time
import urllib.parse

from .docker import engine
from .fakes import FakeProcess
from .harness import ROOT

FAKE = os.path.join(ROOT, "tests", "fakes", "e2b", "fake_e2b.py")
IMAGE = "plimsoll/project:latest"
LABEL = "plimsoll-fake-e2b"
ENVD_PORT = 49983


def envelope(obj, flags=0):
    """One Connect envelope: flags, big-endian length, JSON."""
    data = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def read_envelopes(data):
    """The (flags, JSON) messages of a Connect stream body."""
    out = []
    while len(data) >= 5:
        flags, length = struct.unpack(">BI", data[:5])
        out.append((flags, json.loads(data[5:5 + length])))
        data = data[5 + length:]
    return out


def basic_user(user):
    """envd's user selector: Authorization: Basic base64("<user>:")."""
    return "Basic " + base64.b64encode((user + ":").encode()).decode()


def multipart(files, boundary="e2bfakeboundary"):
    """A multipart/form-data body of "file" parts: [(filename, bytes)]."""
    body = b""
    for name, data in files:
        body += (b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                 b"Content-Type: application/octet-stream\r\n\r\n" % (boundary.encode(), name.encode()))
        body += data + b"\r\n"
    return body + b"--%s--\r\n" % boundary.encode(), "multipart/form-data; boundary=" + boundary


class Run:
    """What a Process/Start stream carried: pid, stdout, stderr, the end
    event (None if none came), the end-of-stream message and keepalives."""

    def __init__(self, messages):
        self.messages = messages
        self.pid, self.end, self.trailer = None, None, None
        self.stdout, self.stderr, self.keepalives = b"", b"", 0
        for flags, msg in messages:
            if flags & 2:
                self.trailer = msg
                continue
            event = msg["event"]
            if "start" in event:
                self.pid = event["start"]["pid"]
            elif "data" in event:
                for kind, value in event["data"].items():
                    setattr(self, kind, getattr(self, kind) + base64.b64decode(value))
            elif "keepalive" in event:
                self.keepalives += 1
            elif "end" in event:
                self.end = event["end"]


def bridge_gateway(network="bridge"):
    """A docker bridge network's gateway address: the host, as the
    containers on that network reach it."""
    status, net = engine("GET", "/networks/" + urllib.parse.quote(network))
    if status != 200:
        raise RuntimeError("docker network inspect %s: %s %r" % (network, status, net))
    return net["IPAM"]["Config"][0]["Gateway"]


class FakeE2B(FakeProcess):
    """One fake E2B service. Use as a context manager."""
    LABEL = LABEL

    def __init__(self, templates=None, api_key="e2b_test_key", cpu=2, memory_mb=512,
                 domain="localhost"):
        self.templates = templates or {"base": IMAGE}
        self.api_key, self.cpu, self.memory_mb, self.domain = api_key, cpu, memory_mb, domain
        self.proc = None
        self.port = self.url = self.instance = None
        self.returncode = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self, timeout=30):
        argv = [sys.executable, FAKE, "--listen", "127.0.0.1:0", "--api-key", self.api_key,
                "--cpu", str(self.cpu), "--memory-mb", str(self.memory_mb), "--domain", self.domain]
        for name, image in self.templates.items():
            argv += ["--template", "%s=%s" % (name, image)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the E2B fake did not start (exit %s)" % self.proc.returncode)
        hello = json.loads(line)
        self.port = int(hello["listening"].rpartition(":")[2])
        self.url = "http://127.0.0.1:%d" % self.port
        self.instance = hello["instance"]
        return self

    def stop(self, timeout=60):
        """Ends the fake (FakeProcess.stop); raises AssertionError, once it
        is gone, when E2B's contracts were broken."""
        found = []
        if self.proc and self.proc.poll() is None:
            try:
                found = self.violations()
            except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
                found = [{"problem": "the violations could not be read: %s" % e}]
        left = super().stop(timeout)
        if found:
            raise AssertionError("E2B's contract was broken %d times:\n%s" % (
                len(found), "\n".join(json.dumps(v) for v in found)))
        return left

    def gateway(self):
        """The host's address on the fake's network (egress probes)."""
        return bridge_gateway(self.state()["network"])

    # -- HTTP

    def request(self, method, path, body=None, headers=None, host=None, timeout=120):
        """One request to the fake: (status, headers, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = dict(headers or {})
            if host:
                h["Host"] = host
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.headers, r.read()
        finally:
            c.close()

    def api(self, method, path, body=None, headers=None, key=True):
        """A control-plane call with the API key (key=False: without it,
        key="x": with that key): (status, JSON or None, headers)."""
        h = {"Content-Type": "application/json"}
        if key:
            h["X-API-Key"] = self.api_key if key is True else key
        h.update(headers or {})
        data = None if body is None else json.dumps(body).encode()
        status, rh, raw = self.request(method, path, data, h)
        return status, (json.loads(raw) if raw else None), rh

    def misbehave(self, **kw):
        status, body, _ = self.api("POST", "/_fake/misbehave", kw)
        if status != 200:
            raise RuntimeError("misbehave %r: %s %r" % (kw, status, body))
        return body

    def reset(self):
        self.api("POST", "/_fake/reset", {})

    def plant(self, metadata, **extra):
        """A sandbox nobody asked for (a lost create answer): its id."""
        status, body, _ = self.api("POST", "/_fake/plant", dict(extra, metadata=metadata))
        if status != 201:
            raise RuntimeError("plant: %s %r" % (status, body))
        return body["sandboxID"]

    def state(self):
        return self.api("GET", "/_fake/state")[1]

    def violations(self):
        """The contract violations recorded so far."""
        return self.state()["violations"]

    @contextlib.contextmanager
    def deliberate(self):
        """Requests sent on purpose against the contract: the violations
        recorded inside the block are the block's (the list it yields),
        not the suite's failure."""
        got = []
        status, body, _ = self.api("POST", "/_fake/expect", {"on": True})
        if status != 200:
            raise RuntimeError("expect: %s %r" % (status, body))
        try:
            yield got
        finally:
            got.extend(self.api("POST", "/_fake/expect", {"on": False})[1]["violations"])

    def envd_host(self, sandbox_id, port=ENVD_PORT):
        return "%d-%s.%s:%d" % (port, sandbox_id, self.domain, self.port)

    def envd(self, sandbox_id, method, path, body=None, headers=None, timeout=120):
        """A request to a sandbox's envd: (status, headers, body bytes)."""
        return self.request(method, path, body, headers, host=self.envd_host(sandbox_id),
                            timeout=timeout)

    def run(self, sandbox_id, cmd, args=(), envs=None, cwd=None, headers=None, timeout=120):
        """Process/Start to the end of its stream: a Run.  Raises
        http.client.IncompleteRead when the stream breaks."""
        process = {"cmd": cmd, "args": list(args)}
        if envs:
            process["envs"] = envs
        if cwd:
            process["cwd"] = cwd
        h = {"Content-Type": "application/connect+json"}
        h.update(headers or {})
        status, rh, raw = self.envd(sandbox_id, "POST", "/process.Process/Start",
                                    envelope({"process": process}), h, timeout=timeout)
        if status != 200:
            raise RuntimeError("Process/Start: %s %r" % (status, raw))
        return Run(read_envelopes(raw))

    def wait_for(self, predicate, timeout=20, step=0.2):
        """Poll predicate() until true; its last value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(step)
