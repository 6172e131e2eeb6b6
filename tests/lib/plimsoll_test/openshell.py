# SPDX-License-Identifier: Apache-2.0
"""The OpenShell gateway fake (tests/fakes/openshell/fake_openshell.py) as
the tests see it.

FakeOpenShell starts one fake as a child process and speaks to it: a gRPC
channel to the gateway with upstream's messages, the ones the fake serves
(../shared/upstream/openshell, compiled with protoc into a temporary
folder, never kept), one method per
RPC (call, or the helpers health, info, create, get, list, delete,
providers, policy_status, exec, exec_stream), and the test controls
(misbehave, reset, plant, provider, state).  stop() ends the fake with
SIGTERM and returns the containers of its label still left (none when it
cleaned up), removing them.

    with FakeOpenShell() as fake:
        sbx = fake.create(labels={"app": "x"})
        out = fake.exec(sbx.metadata.id, ["python3", "-c", "print(1)"])

grpcio and protobuf are Debian's (python3-grpcio, python3-protobuf): an
interpreter without them (pyenv's python3) borrows Debian's dist-packages.
"""
import http.client
import importlib
import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import grpc
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc

from .docker import engine
from .fakes import FakeProcess
from .harness import ROOT

FAKE = os.path.join(ROOT, "tests", "fakes", "openshell", "fake_openshell.py")
# Upstream's protos, which the fake serves (../shared/upstream's README).
UPSTREAM_DIR = os.path.normpath(os.path.join(ROOT, "..", "shared", "upstream", "openshell"))
IMAGE = "plimsoll/project:latest"
LABEL = "plimsoll-fake-openshell"
SERVICE = "openshell.v1.OpenShell"
RPCS = {"Health": ("HealthRequest", "HealthResponse", False),
        "GetGatewayInfo": ("GetGatewayInfoRequest", "GetGatewayInfoResponse", False),
        "CreateSandbox": ("CreateSandboxRequest", "SandboxResponse", False),
        "GetSandbox": ("GetSandboxRequest", "SandboxResponse", False),
        "ListSandboxes": ("ListSandboxesRequest", "ListSandboxesResponse", False),
        "ListSandboxProviders": ("ListSandboxProvidersRequest", "ListSandboxProvidersResponse", False),
        "DeleteSandbox": ("DeleteSandboxRequest", "DeleteSandboxResponse", False),
        "ExecSandbox": ("ExecSandboxRequest", "ExecSandboxEvent", True),
        "ExecSandboxInteractive": ("ExecSandboxInput", "ExecSandboxEvent", "duplex"),
        "GetSandboxPolicyStatus": ("GetSandboxPolicyStatusRequest", "GetSandboxPolicyStatusResponse", False)}

_PB = {}


def messages():
    """Upstream's messages (the fake's load_messages over UPSTREAM_DIR:
    openshell.v1's, sandbox.v1's and datamodel.v1's as one namespace),
    compiled once per process into a temporary folder, removed right after
    the import."""
    if "pb" not in _PB:
        spec = importlib.util.spec_from_file_location("fake_openshell_messages", FAKE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out = tempfile.mkdtemp(prefix="openshell-pb-")
        try:
            _PB["pb"] = mod.load_messages(UPSTREAM_DIR, out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return _PB["pb"]


class ExecResult:
    """An ExecSandbox stream read to its end: the events in order, stdout
    and stderr joined, and the exit code (None when none came)."""

    def __init__(self, events):
        self.events = events
        self.stdout = b"".join(e.stdout.data for e in events if e.WhichOneof("payload") == "stdout")
        self.stderr = b"".join(e.stderr.data for e in events if e.WhichOneof("payload") == "stderr")
        exits = [e.exit.exit_code for e in events if e.WhichOneof("payload") == "exit"]
        self.exit_code = exits[-1] if exits else None

    def __repr__(self):
        return "ExecResult(exit=%r, stdout=%r, stderr=%r)" % (self.exit_code, self.stdout[:200], self.stderr[:200])


class FakeOpenShell(FakeProcess):
    """One fake OpenShell gateway. Use as a context manager."""
    LABEL = LABEL

    def __init__(self, token="fake-openshell-token", admin_token="fake-openshell-admin", images=None,
                 max_sandboxes=10, tls_cert=None, tls_key=None, client_ca=None,
                 client_cert=None, client_key=None):
        self.token, self.admin_token = token, admin_token
        self.images = images or {}
        self.max_sandboxes = max_sandboxes
        self.tls_cert, self.tls_key, self.client_ca = tls_cert, tls_key, client_ca
        self.client_cert, self.client_key = client_cert, client_key
        self.proc = None
        self.address = self.control_address = self.instance = None
        self.channel = None
        self.pb = messages()
        self.returncode = None
        self._methods = {}

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def argv(self):
        argv = [sys.executable, FAKE, "--listen", "127.0.0.1:0", "--token", self.token,
                "--control-listen", "127.0.0.1:0", "--max-sandboxes", str(self.max_sandboxes),
                "--exit-with-parent"]
        if self.admin_token:
            argv += ["--admin-token", self.admin_token]
        for name, image in self.images.items():
            argv += ["--image", "%s=%s" % (name, image)]
        if self.tls_cert:
            argv += ["--tls-cert", self.tls_cert, "--tls-key", self.tls_key]
        if self.client_ca:
            argv += ["--client-ca", self.client_ca]
        return argv

    def start(self, timeout=60):
        env = dict(os.environ)
        env.setdefault("GRPC_VERBOSITY", "NONE")   # refused TLS handshakes are expected
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env)
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("the OpenShell fake did not start (exit %s)" % self.proc.returncode)
        hello = json.loads(line)
        self.address, self.control_address = hello["listening"], hello["control"]
        self.instance = hello["instance"]
        self.channel = self.open_channel()
        return self

    def open_channel(self, cert=True, root=True):
        """A channel to the gateway: h2c, or TLS trusting the fake's
        certificate (root) with the client certificate (cert) if any."""
        if not self.tls_cert:
            return grpc.insecure_channel(self.address)
        creds = grpc.ssl_channel_credentials(
            root_certificates=self._read(self.tls_cert) if root else None,
            private_key=self._read(self.client_key) if cert and self.client_key else None,
            certificate_chain=self._read(self.client_cert) if cert and self.client_cert else None)
        return grpc.secure_channel(self.address, creds)

    @staticmethod
    def _read(path):
        with open(path, "rb") as f:
            return f.read()

    def stop(self, timeout=60):
        if self.channel:
            self.channel.close()
            self.channel = None
        return super().stop(timeout)

    def inspect(self, container):
        return engine("GET", "/containers/%s/json" % container)

    # -- gRPC

    def method(self, rpc, channel=None):
        req, resp, streaming = RPCS[rpc]
        channel = channel or self.channel
        key = (rpc, id(channel))
        if key not in self._methods:
            make = channel.stream_stream if streaming == "duplex" else \
                channel.unary_stream if streaming else channel.unary_unary
            self._methods[key] = make("/%s/%s" % (SERVICE, rpc),
                                      request_serializer=getattr(self.pb, req).SerializeToString,
                                      response_deserializer=getattr(self.pb, resp).FromString)
        return self._methods[key]

    def metadata(self, token):
        """token True: the plain token; "admin": the admin token; False or
        None: no header; any other string: that bearer."""
        if token is True:
            return (("authorization", "Bearer " + self.token),)
        if token == "admin":
            return (("authorization", "Bearer " + (self.admin_token or self.token)),)
        if not token:
            return ()
        return (("authorization", "Bearer " + token),)

    def call(self, rpc, request=None, token=True, timeout=60, channel=None):
        """One call; the answer (a unary call's message, or a streaming
        call's iterator/future).  Failures raise grpc.RpcError."""
        req = request if request is not None else getattr(self.pb, RPCS[rpc][0])()
        return self.method(rpc, channel)(req, metadata=self.metadata(token), timeout=timeout)

    def health(self, **kw):
        return self.call("Health", **kw)

    def info(self, token="admin", **kw):
        return self.call("GetGatewayInfo", token=token, **kw)

    def spec(self, image="base", template_labels=None, resources=None, environment=None,
             providers=(), policy=None):
        spec = self.pb.SandboxSpec()
        spec.template.image = image
        spec.template.labels.update(template_labels or {})
        if resources is not None:
            spec.template.resources.update(resources)
        spec.environment.update(environment or {})
        spec.providers.extend(providers)
        if policy is not None:
            spec.policy.CopyFrom(policy)
        return spec

    def create(self, name="", labels=None, wait=True, token=True, **spec):
        """CreateSandbox; with wait, reads it until it leaves PROVISIONING.
        The Sandbox message."""
        req = self.pb.CreateSandboxRequest(name=name, spec=self.spec(**spec))
        req.labels.update(labels or {})
        sbx = self.call("CreateSandbox", req, token=token).sandbox
        if wait:
            sbx = self.wait_phase(sbx.metadata.name)
        return sbx

    def wait_phase(self, name, leave=("PROVISIONING",), timeout=60):
        pb = self.pb
        waiting = {getattr(pb, "SANDBOX_PHASE_" + p) for p in leave}
        deadline = time.monotonic() + timeout
        while True:
            sbx = self.get(name)
            if sbx.status.phase not in waiting or time.monotonic() > deadline:
                return sbx
            time.sleep(0.05)

    def get(self, name, **kw):
        return self.call("GetSandbox", self.pb.GetSandboxRequest(name=name), **kw).sandbox

    def list(self, label_selector="", limit=0, offset=0, **kw):
        return list(self.call("ListSandboxes", self.pb.ListSandboxesRequest(
            label_selector=label_selector, limit=limit, offset=offset), **kw).sandboxes)

    def providers(self, name, **kw):
        return list(self.call("ListSandboxProviders",
                              self.pb.ListSandboxProvidersRequest(sandbox_name=name), **kw).providers)

    def policy_status(self, name, version=0, **kw):
        return self.call("GetSandboxPolicyStatus",
                         self.pb.GetSandboxPolicyStatusRequest(name=name, version=version), **kw)

    def delete(self, name, wait=True, **kw):
        """DeleteSandbox; with wait, reads until NOT_FOUND.  The answer."""
        out = self.call("DeleteSandbox", self.pb.DeleteSandboxRequest(name=name), **kw)
        if wait:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    self.get(name)
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.NOT_FOUND:
                        break
                    raise
                time.sleep(0.05)
        return out

    def exec_request(self, sandbox_id, command, stdin=b"", environment=None, workdir="", timeout_seconds=0):
        req = self.pb.ExecSandboxRequest(sandbox_id=sandbox_id, command=list(command), workdir=workdir,
                                         timeout_seconds=timeout_seconds, stdin=stdin)
        req.environment.update(environment or {})
        return req

    def exec_stream(self, sandbox_id, command, token=True, timeout=120, **kw):
        """ExecSandbox: the streaming call (iterate it; cancel() it)."""
        return self.call("ExecSandbox", self.exec_request(sandbox_id, command, **kw), token=token,
                         timeout=timeout)

    def exec_interactive(self, inputs, token=True, timeout=120):
        """ExecSandboxInteractive: inputs is an iterator of ExecSandboxInput
        (the first one's start made by exec_request); the answer stream."""
        return self.method("ExecSandboxInteractive")(inputs, metadata=self.metadata(token),
                                                     timeout=timeout)

    def exec(self, sandbox_id, command, **kw):
        """ExecSandbox read to its end: an ExecResult."""
        return ExecResult(list(self.exec_stream(sandbox_id, command, **kw)))

    # -- test control

    def control(self, method, path, body=None, secret=None):
        host, _, port = self.control_address.rpartition(":")
        c = http.client.HTTPConnection(host, int(port), timeout=180)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"}
            if secret is not False:
                headers["X-Fake-Control"] = secret or self.token
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
        finally:
            c.close()

    def _ok(self, method, path, body=None):
        status, answer = self.control(method, path, body)
        if status != 200:
            raise RuntimeError("%s %s: %s %r" % (method, path, status, answer))
        return answer

    def misbehave(self, **kw):
        return self._ok("POST", "/misbehave", kw)

    def reset(self):
        return self._ok("POST", "/reset", {})

    def drift_now(self, name, **drift):
        """Make a running sandbox report otherwise from now on."""
        return self._ok("POST", "/drift", dict(drift, name=name))

    def plant(self, name="", labels=None, image=None):
        """A running sandbox nobody asked for: {"name", "id", "phase",
        "container"}."""
        body = {"name": name, "labels": labels or {}}
        if image:
            body["image"] = image
        return self._ok("POST", "/plant", body)

    def provider(self, name, credentials=None, type="generic", config=None):
        return self._ok("POST", "/provider", {"name": name, "credentials": credentials or {},
                                              "type": type, "config": config or {}})

    def state(self):
        return self._ok("GET", "/state")

    def sandbox_state(self, name):
        for s in self.state()["sandboxes"]:
            if s["name"] == name and not s["deleted"]:
                return s
        return None

    @staticmethod
    def wait_for(predicate, timeout=20, step=0.1):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(step)
