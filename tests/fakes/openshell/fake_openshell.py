# SPDX-License-Identifier: Apache-2.0
"""A test fake of NVIDIA OpenShell's gateway (gRPC service
openshell.v1.OpenShell), with real sandboxes.

    python3 fake_openshell.py --listen 127.0.0.1:0 --token TOKEN \\
        [--admin-token ADMIN] [--control-listen 127.0.0.1:0] \\
        [--control-token SECRET] [--tls-cert F --tls-key F [--client-ca F]] \\
        [--image NAME=IMAGE ...] [--max-sandboxes N] [--proto-dir DIR] \\
        [--exit-with-parent]

It prints one line, {"listening": "HOST:PORT", "control": "HOST:PORT",
"instance": "<id>"}, then serves until SIGTERM or SIGINT, when it
force-removes every container of its label and exits 0.

The gateway speaks gRPC over HTTP/2: h2c by default, TLS with --tls-cert and
--tls-key, mutual TLS when --client-ca is given too.  Every call needs
`authorization: Bearer <token>`; GetGatewayInfo needs the admin token when
there is one.  The messages are upstream's own protos (NVIDIA/OpenShell
proto/*.proto, read from <repo>/../shared/upstream/openshell, whose README
names the commit; --proto-dir to read them elsewhere), compiled with protoc
into a temporary directory at start, so the fake speaks upstream's wire
format whatever proto/openshell/openshell.proto says; nothing generated is
kept.  Requests larger
than 1 MiB (OpenShell's limit) fail RESOURCE_EXHAUSTED.

Each sandbox is a locked-down docker container (label
plimsoll-fake-openshell=<instance>, runtime runc, no network but loopback,
read-only root with a tmpfs /tmp, no capabilities, no-new-privileges, a pids
limit, CPU and memory limits from spec.template.resources) whose main
process does nothing; ExecSandbox runs real processes in it as the image's
non-root user.  Every program the sandbox user starts is non-dumpable (the
image's dynamic loader and the init are bind-mounted execute-only), so no
process of the sandbox can read another's memory, a parent's included;
an exec's processes are found by a marker variable in their environment
(read from the host's /proc, so the fake runs as root) and killed on
timeout or cancel, daemons included.

Test control is a small HTTP/1.1 JSON server on its own port (header
X-Fake-Control: <control token>): POST /misbehave, /reset, /plant,
/provider and GET /state.  docs/providers/openshell-fake.md says what each
RPC follows upstream and where the fake simplifies.

Python 3.11 with grpcio and protobuf (Debian's python3-grpcio and
python3-protobuf), protoc, and the docker CLI; every docker call is an argv
list, and values reach `sh -c` scripts only as positional arguments.
"""
import argparse
import hashlib
import importlib
import io
import json
import os
import queue
import re
import secrets
import shutil
import signal
import string
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from concurrent import futures
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    import grpc
except ImportError:                      # an interpreter without Debian's packages
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc
from google.protobuf import json_format

LABEL = "plimsoll-fake-openshell"
SERVICE = "openshell.v1.OpenShell"
FAKE_VERSION = "0.0.0-plimsoll-fake"
DEFAULT_IMAGE = "plimsoll/project:latest"
DEFAULT_IMAGES = {"base": DEFAULT_IMAGE}
MAX_MESSAGE = 1 << 20                    # OpenShell's gRPC message limit
CHUNK = 64 << 10                         # the largest stdout/stderr event
TMP_SIZE = "256m"
PIDS_LIMIT = 256
FALLBACK_USER = (65534, 65534)           # when the image's user is root
EXEC_HOME = "/tmp"
EXEC_WORKDIR = "/tmp"
MARKER_ENV = "OPENSHELL_FAKE_EXEC"
OCI_FAILED = b"OCI runtime exec failed"
DELETING_MIN_S = 0.25                    # DELETING stays visible this long
MIN_MEMORY = 6 << 20                     # docker's minimum --memory
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,17}[a-z0-9])?$")   # a DNS label, <= 19
ID_ALPHABET = string.ascii_lowercase + string.digits
INIT_PATH = "/run/openshell-fake/init"
LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1",
           "/lib/ld-musl-x86_64.so.1", "/lib/ld-musl-aarch64.so.1")
RPCS = ("Health", "GetGatewayInfo", "CreateSandbox", "GetSandbox", "ListSandboxes",
        "ListSandboxProviders", "DeleteSandbox", "ExecSandbox", "ExecSandboxInteractive",
        "GetSandboxPolicyStatus")
LIST_DEFAULT = 100
# The image's user ids and the real paths of its dynamic loaders; $@ are
# the loader paths to try.
PREP_SCRIPT = """id -u; id -g
for f in "$@"; do if [ -e "$f" ]; then readlink -f -- "$f"; fi; done
"""
DRIFT_IMAGE_SUFFIX = "-drifted"
DRIFT_LIMITS = {"limits": {"cpu": "4", "memory": "8Gi"}}
DRIFT_PROVIDER = {"name": "fake-attached", "type": "generic",
                  "credentials": {"API_KEY": "fake-attached-secret"}}


class RpcFail(Exception):
    """An answer with a gRPC status other than OK."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def fail(code_name, message):
    return RpcFail(getattr(grpc.StatusCode, code_name), message)


def docker(args, stdin=None, timeout=120):
    """Run the docker CLI with argv `args`; the CompletedProcess."""
    return subprocess.run(["docker"] + args, input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def docker_text(p):
    return (p.stderr or p.stdout).decode(errors="replace").strip()


def rfc3339(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_name():
    return "sandbox-" + "".join(secrets.choice(ID_ALPHABET) for _ in range(8))


class Messages:
    """Upstream's messages as one namespace: openshell.v1's, then
    openshell.sandbox.v1's, then openshell.datamodel.v1's (upstream spreads
    the public API over those three packages; no name is in two of them)."""

    def __init__(self, modules):
        self._modules = modules

    def __getattr__(self, name):
        for m in self._modules:
            if hasattr(m, name):
                return getattr(m, name)
        raise AttributeError(name)


def load_messages(proto_dir, out_dir):
    """Compile upstream's protos (every *.proto of proto_dir: openshell.proto
    imports datamodel, sandbox and options) with protoc into out_dir; their
    messages, as a Messages."""
    if not os.path.isfile(os.path.join(proto_dir, "openshell.proto")):
        raise RuntimeError("no openshell.proto in %s (upstream's protos: ../shared/upstream/"
                           "openshell from the repository)" % proto_dir)
    files = sorted(f for f in os.listdir(proto_dir) if f.endswith(".proto"))
    p = subprocess.run(["protoc", "-I" + proto_dir, "-I/usr/include", "--python_out=" + out_dir]
                       + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError("protoc: " + p.stderr.decode(errors="replace"))
    sys.path.insert(0, out_dir)
    try:
        return Messages([importlib.import_module(m)
                         for m in ("openshell_pb2", "sandbox_pb2", "datamodel_pb2")])
    finally:
        sys.path.remove(out_dir)


# ------------------------------------------------------ upstream's exec rules

# crates/openshell-server/src/grpc/validation.rs:31-35 (the commit in
# ../shared/upstream/README.md).
MAX_EXEC_COMMAND_ARGS = 1024
MAX_EXEC_ARG_LEN = 32 * 1024
MAX_EXEC_WORKDIR_LEN = 4096
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXEC_ALLOWED_OPENSHELL_KEYS = ("OPENSHELL_PYFUNC_B64",)


def validate_exec_request(req):
    """What upstream's gateway checks of an ExecSandboxRequest before it
    looks the sandbox up, in its order, each an INVALID_ARGUMENT with its
    message: handle_exec_sandbox (crates/openshell-server/src/grpc/
    sandbox.rs:1194-1205; the interactive start, sandbox.rs:1607-1618) and
    validate_exec_request_fields (validation.rs:45-77, with
    validate_exec_env_entries, validation.rs:393-420).  Lengths are bytes of
    UTF-8, as Rust's str::len."""
    def bad(message):
        return fail("INVALID_ARGUMENT", message)
    if not req.sandbox_id:
        raise bad("sandbox_id is required")
    if not req.command:
        raise bad("command is required")
    if any(not ENV_KEY_RE.match(k) for k in req.environment):
        raise bad("environment keys must match ^[A-Za-z_][A-Za-z0-9_]*$")
    if len(req.command) > MAX_EXEC_COMMAND_ARGS:
        raise bad("command array exceeds %d argument limit" % MAX_EXEC_COMMAND_ARGS)
    for i, arg in enumerate(req.command):
        if len(arg.encode()) > MAX_EXEC_ARG_LEN:
            raise bad("command argument %d exceeds %d byte limit" % (i, MAX_EXEC_ARG_LEN))
        if "\0" in arg:
            raise bad("command argument %d contains null bytes" % i)

    def control(value, field):
        if "\0" in value:
            raise bad("%s contains null bytes" % field)
        if "\n" in value or "\r" in value:
            raise bad("%s contains newline or carriage return characters" % field)
    for key, value in req.environment.items():
        if len(value.encode()) > MAX_EXEC_ARG_LEN:
            raise bad("environment value for '%s' exceeds %d byte limit" % (key, MAX_EXEC_ARG_LEN))
        control(value, "environment value for '%s'" % key)
    for key, value in req.environment.items():
        if not ENV_KEY_RE.match(key):
            raise bad("environment keys must match ^[A-Za-z_][A-Za-z0-9_]*$; got '%s'" % key)
        if key.startswith("OPENSHELL_") and key not in EXEC_ALLOWED_OPENSHELL_KEYS:
            raise bad("environment keys starting with OPENSHELL_ are reserved; got '%s'" % key)
        control(value, "environment value for '%s'" % key)
    if req.workdir:
        if len(req.workdir.encode()) > MAX_EXEC_WORKDIR_LEN:
            raise bad("workdir exceeds %d byte limit" % MAX_EXEC_WORKDIR_LEN)
        control(req.workdir, "workdir")


# --------------------------------------------------- upstream's policy hash

def _u64(n):
    return n.to_bytes(8, "little")


def _lp(data):
    """append_canonical_bytes (policy.rs:5511-5518): a u64 little-endian
    length, then the bytes."""
    return _u64(len(data)) + data


def _sorted_message_map(label, values):
    """append_sorted_message_map (policy.rs:5524-5541)."""
    out = _lp(label) + _u64(len(values))
    for key in sorted(values):
        out += _lp(key.encode()) + _lp(values[key].SerializeToString(deterministic=True))
    return out


def _canonical_rule(rule):
    """canonical_rule_bytes (policy.rs:5544-5595)."""
    map_free = type(rule)()
    map_free.CopyFrom(rule)
    for ep in map_free.endpoints:
        ep.graphql_persisted_queries.clear()
        for r in ep.rules:
            if r.HasField("allow"):
                r.allow.query.clear()
                r.allow.params.clear()
        for d in ep.deny_rules:
            d.query.clear()
            d.params.clear()
    out = _lp(map_free.SerializeToString(deterministic=True))
    for ei, ep in enumerate(rule.endpoints):
        out += _u64(ei) + _sorted_message_map(b"graphql_persisted_queries",
                                              ep.graphql_persisted_queries)
        for ri, r in enumerate(ep.rules):
            out += _u64(ri)
            if r.HasField("allow"):
                out += _sorted_message_map(b"allow_query", r.allow.query)
                out += _sorted_message_map(b"allow_params", r.allow.params)
        for ri, d in enumerate(ep.deny_rules):
            out += _u64(ri) + _sorted_message_map(b"deny_query", d.query)
            out += _sorted_message_map(b"deny_params", d.params)
    return out


def _canonical_struct(st):
    """canonical_struct_bytes (policy.rs:5597-5611)."""
    out = _u64(len(st.fields))
    for key in sorted(st.fields):
        out += _lp(key.encode()) + _lp(_canonical_value(st.fields[key]))
    return out


def _canonical_value(v):
    """canonical_value_bytes (policy.rs:5613-5652)."""
    kind = v.WhichOneof("kind")
    if kind is None:
        return b"\0"
    if kind == "null_value":
        return b"\1" + int(v.null_value).to_bytes(4, "little", signed=True)
    if kind == "number_value":
        return b"\2" + struct.pack("<d", v.number_value)
    if kind == "string_value":
        return b"\3" + _lp(v.string_value.encode())
    if kind == "bool_value":
        return b"\4" + bytes([1 if v.bool_value else 0])
    if kind == "struct_value":
        return b"\5" + _lp(_canonical_struct(v.struct_value))
    out = b"\6" + _u64(len(v.list_value.values))
    for item in v.list_value.values:
        out += _lp(_canonical_value(item))
    return out


def _canonical_middleware(mw):
    """canonical_middleware_bytes (policy.rs:5654-5665)."""
    map_free = type(mw)()
    map_free.CopyFrom(mw)
    map_free.ClearField("config")
    out = _lp(map_free.SerializeToString(deterministic=True))
    if mw.HasField("config"):
        out += _lp(_canonical_struct(mw.config))
    return out


def deterministic_policy_hash(policy):
    """Upstream's deterministic_policy_hash (crates/openshell-server/src/grpc/
    policy.rs:5704-5706): the hex SHA-256 of canonical_policy_bytes
    (policy.rs:5667-5700), which encodes the policy without its maps and
    then each map's entries in key order.  The revision 1 a gateway records
    for a sandbox carries this hash of its spec's policy (policy.rs:2372)."""
    map_free = type(policy)()
    map_free.CopyFrom(policy)
    map_free.network_policies.clear()
    map_free.network_middlewares.clear()
    out = _lp(map_free.SerializeToString(deterministic=True))
    out += _lp(b"network_policies") + _u64(len(policy.network_policies))
    for key in sorted(policy.network_policies):
        out += _lp(key.encode()) + _lp(_canonical_rule(policy.network_policies[key]))
    out += _lp(b"network_middlewares") + _u64(len(policy.network_middlewares))
    for key in sorted(policy.network_middlewares):
        out += _lp(key.encode()) + _lp(_canonical_middleware(policy.network_middlewares[key]))
    return hashlib.sha256(out).hexdigest()


# --------------------------------------------------------------- quantities

CPU_RE = re.compile(r"^(\d+(?:\.\d+)?)(m?)$")
MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
MEMORY_UNITS = {None: 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
                "E": 10 ** 18, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
                "Pi": 1 << 50, "Ei": 1 << 60}


def parse_cpu(value, field):
    """A Kubernetes CPU quantity ("1", "0.5", "500m", or a number): cores."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        cores = float(value)
    elif isinstance(value, str) and CPU_RE.match(value):
        num, milli = CPU_RE.match(value).groups()
        cores = float(num) / (1000 if milli else 1)
    else:
        raise fail("INVALID_ARGUMENT", "%s: %r is not a CPU quantity (\"1\", \"500m\")" % (field, value))
    if cores <= 0:
        raise fail("INVALID_ARGUMENT", "%s: must be positive" % field)
    return cores


def parse_memory(value, field):
    """A Kubernetes memory quantity ("512Mi", "1Gi", "1000000", or a
    number): bytes."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        size = float(value)
    elif isinstance(value, str) and MEMORY_RE.match(value):
        num, unit = MEMORY_RE.match(value).groups()
        size = float(num) * MEMORY_UNITS[unit]
    else:
        raise fail("INVALID_ARGUMENT", "%s: %r is not a memory quantity (\"512Mi\", \"1Gi\")" % (field, value))
    if size != int(size) or size <= 0:
        raise fail("INVALID_ARGUMENT", "%s: must be a positive whole number of bytes" % field)
    return int(size)


def parse_resources(struct, host_cpus):
    """spec.template.resources ({"limits": {"cpu", "memory"}, "requests":
    {...}}): (cpus or None, memory bytes or None).  Requests are checked
    and echoed, not applied."""
    res = json_format.MessageToDict(struct) if struct is not None else {}
    for key in res:
        if key not in ("limits", "requests"):
            raise fail("INVALID_ARGUMENT", "resources: unknown key %r (limits, requests)" % key)
    cpus = memory = None
    for part in ("requests", "limits"):
        section = res.get(part, {})
        if not isinstance(section, dict):
            raise fail("INVALID_ARGUMENT", "resources.%s: must be an object" % part)
        for key in section:
            if key not in ("cpu", "memory"):
                raise fail("INVALID_ARGUMENT", "resources.%s: unknown resource %r (cpu, memory)" % (part, key))
        c = parse_cpu(section["cpu"], "resources.%s.cpu" % part) if "cpu" in section else None
        m = parse_memory(section["memory"], "resources.%s.memory" % part) if "memory" in section else None
        if part == "limits":
            cpus, memory = c, m
    if cpus is not None and not 0.01 <= cpus <= host_cpus:
        raise fail("INVALID_ARGUMENT", "resources.limits.cpu: the docker driver grants 0.01 to %d CPUs on this host"
                   % host_cpus)
    if memory is not None and memory < MIN_MEMORY:
        raise fail("INVALID_ARGUMENT", "resources.limits.memory: the docker driver's minimum is 6Mi")
    return cpus, memory


# ---------------------------------------------------------------- sandboxes

class Sandbox:
    """One sandbox: its record, its container, what it reports."""

    def __init__(self, fake, name, labels, spec, image, planted):
        self.id = str(uuid.uuid4())
        self.name = name
        self.labels = dict(labels)
        self.spec = spec                     # the SandboxSpec as asked (a copy)
        self.image = image                   # the docker image it runs
        self.planted = planted
        self.created = time.time()
        self.created_at_ms = int(self.created * 1000)
        self.container = "osfake-%s-%s" % (fake.instance, name)
        self.container_id = None
        self.phase = "PROVISIONING"
        self.reason, self.message = "Provisioning", "the container is being started"
        self.transition = self.created
        self.deleted = False                 # gone: answers NOT_FOUND
        self.deleting = False
        self.cpus = self.memory = None
        self.uid_gid = None
        self.drift = {}                      # misbehaviours fixed at create
        self.providers = list(spec.providers)
        self.started = threading.Event()     # the create thread is done
        self.execs = set()

    def set_phase(self, phase, reason, message):
        self.phase, self.reason, self.message = phase, reason, message
        self.transition = time.time()

    # -- what the gateway reports (drift applies here only)

    def reported_labels(self):
        labels = dict(self.labels)
        d = self.drift.get("drift_labels")
        if d is True:
            labels = {k: v + "-drifted" for k, v in labels.items()}
            labels["fake-drift"] = "true"
        elif isinstance(d, dict):
            labels.update(d)
        return labels

    def reported_spec(self, pb):
        spec = pb.SandboxSpec()
        spec.CopyFrom(self.spec)
        d = self.drift.get("drift_image")
        if d:
            spec.template.image = d if isinstance(d, str) else spec.template.image + DRIFT_IMAGE_SUFFIX
        d = self.drift.get("drift_limits")
        if d:
            spec.template.resources.Clear()
            spec.template.resources.update(d if isinstance(d, dict) else DRIFT_LIMITS)
        return spec

    def policy_hash(self):
        # Revision 1 carries upstream's hash of the spec's policy
        # (policy.rs:2372); a sandbox without a policy has no revision
        # upstream, here the SHA-256 of nothing.
        real = deterministic_policy_hash(self.spec.policy) if self.spec.HasField("policy") \
            else hashlib.sha256(b"").hexdigest()
        d = self.drift.get("drift_policy_hash")
        if isinstance(d, str):
            return d
        if d:
            return hashlib.sha256(("drift:" + real).encode()).hexdigest()
        return real

    def to_pb(self, pb):
        s = pb.Sandbox()
        s.metadata.id = self.id
        s.metadata.name = self.name
        s.metadata.created_at_ms = self.created_at_ms
        s.metadata.labels.update(self.reported_labels())
        s.spec.CopyFrom(self.reported_spec(pb))
        s.status.sandbox_name = self.name
        s.status.phase = getattr(pb, "SANDBOX_PHASE_" + self.phase)
        s.status.current_policy_version = 1 if self.phase in ("READY", "DELETING") else 0
        c = s.status.conditions.add()
        c.type = "Ready"
        c.status = "True" if self.phase == "READY" else "False"
        c.reason, c.message = self.reason, self.message
        c.last_transition_time = rfc3339(self.transition)
        return s

    def state_json(self):
        return {"name": self.name, "id": self.id, "phase": self.phase, "container": self.container,
                "container_id": self.container_id, "labels": self.labels, "image": self.image,
                "template_image": self.spec.template.image, "cpus": self.cpus, "memory": self.memory,
                "user": "%d:%d" % self.uid_gid if self.uid_gid else None,
                "providers": self.providers, "planted": self.planted, "deleted": self.deleted,
                "drift": self.drift, "message": self.message, "execs": len(self.execs)}


class Exec:
    """One ExecSandbox call: its `docker exec`, the threads that pump its
    output into a queue, its marker, and how it ended."""

    CANCEL = object()

    def __init__(self, fake, sbx, request, inputs=None):
        self.fake, self.sbx = fake, sbx
        self.inputs = inputs     # ExecSandboxInteractive: the later messages, stdin
        self.marker = "%s-%s" % (fake.instance, secrets.token_hex(12))
        self.events = queue.Queue()
        self.timed_out = False
        self.cancelled = threading.Event()
        self.finished = False
        self.exit_code = None
        self.killed = False
        self.groups = None
        self.log = {"sandbox": sbx.name, "sandbox_id": sbx.id, "argv": list(request.command),
                    "workdir": request.workdir or EXEC_WORKDIR, "env": sorted(request.environment),
                    "timeout_seconds": request.timeout_seconds, "stdin_bytes": len(request.stdin),
                    "started": rfc3339(time.time()), "exit_code": None, "state": "running"}
        uid, gid = sbx.uid_gid
        argv = ["docker", "exec", "-i", "-u", "%d:%d" % (uid, gid), "-w", request.workdir or EXEC_WORKDIR,
                "-e", "HOME=" + EXEC_HOME]
        for k, v in sorted(request.environment.items()):
            argv += ["-e", "%s=%s" % (k, v)]
        # The marker comes last, so the caller's environment cannot replace it.
        argv += ["-e", "%s=%s" % (MARKER_ENV, self.marker), sbx.container] + list(request.command)
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
        self.stdin = bytes(request.stdin)
        readers = [threading.Thread(target=self.pump, args=(self.popen.stdout, "stdout"), daemon=True),
                   threading.Thread(target=self.pump, args=(self.popen.stderr, "stderr"), daemon=True)]
        threading.Thread(target=self.feed, daemon=True).start()
        for t in readers:
            t.start()
        threading.Thread(target=self.wait, args=(readers,), daemon=True).start()
        self.timer = None
        if request.timeout_seconds > 0:
            self.timer = threading.Timer(request.timeout_seconds, self.expire)
            self.timer.daemon = True
            self.timer.start()

    def feed(self):
        try:
            if self.stdin:
                self.popen.stdin.write(self.stdin)
                self.popen.stdin.flush()
            for msg in self.inputs or ():
                # stdin bytes as they come; a resize means nothing without
                # a terminal, and a second start is refused by the reader
                if msg.WhichOneof("payload") == "stdin" and msg.stdin:
                    self.popen.stdin.write(msg.stdin)
                    self.popen.stdin.flush()
            self.popen.stdin.close()
        except (BrokenPipeError, OSError, ValueError, grpc.RpcError):
            pass

    def pump(self, pipe, stream):
        first = True
        while True:
            data = pipe.read1(CHUNK)
            if not data:
                return
            # docker exec reports a command that cannot start (exit 126 or
            # 127) on its stdout: it is an error, so it goes to stderr.
            if first and stream == "stdout" and data.startswith(OCI_FAILED):
                self.events.put(("stderr", data))
            else:
                self.events.put((stream, data))
            first = False

    def wait(self, readers):
        for t in readers:
            t.join()
        code = self.popen.wait()
        if code < 0:                         # the fake killed the docker CLI
            code = 128 - code
        if self.timer:
            self.timer.cancel()
        if self.timed_out:
            code = 124
        self.exit_code = code
        self.log["exit_code"] = code
        self.log["state"] = "timed out" if self.timed_out else ("cancelled" if self.killed else "exited")
        self.events.put(("exit", code))

    def kill(self):
        """Kill every process of this exec (daemons included), then the
        docker CLI; under exec_kill "group", only those still in the
        command's own process group."""
        self.killed = True
        self.groups = self.fake.exec_groups(self.sbx, self.marker) \
            if self.fake.behaviour("exec_kill") == "group" else None
        self.fake.kill_marked(self.sbx, self.marker, groups=self.groups)
        if self.popen.poll() is None:
            self.popen.kill()
        # A process the engine was still starting when the CLI died starts
        # late: look again.
        threading.Thread(target=self.rekill, daemon=True).start()

    def rekill(self):
        for delay in (0.5, 1.5, 3):
            time.sleep(delay)
            self.fake.kill_marked(self.sbx, self.marker, groups=self.groups)

    def expire(self):
        if self.exit_code is None:
            self.timed_out = True
            self.kill()

    def cancel(self):
        """The call ended without the generator finishing: the client
        cancelled (or the fake is stopping)."""
        self.cancelled.set()
        if not self.finished:
            if self.exit_code is None:
                self.log["state"] = "cancelled"
            self.kill()
        self.events.put((Exec.CANCEL, None))


# --------------------------------------------------------------------- fake

class Fake:
    """The fake gateway's state: settings, sandboxes, providers,
    misbehaviours and the call log."""

    MISBEHAVIOURS = {"driver": (str,), "driver_denied": (bool,), "gateway_status": (str,),
                     "drift_labels": (bool, dict),
                     "drift_image": (bool, str), "drift_limits": (bool, dict),
                     "drift_policy_hash": (bool, str), "attach_provider": (bool, str, dict),
                     "exec_hang_after_exit": (bool,), "exec_withhold_exit": (str,),
                     "exec_kill": (str,),
                     "stuck_error": (bool,), "fail_next": (dict,)}
    DRIFTS = ("drift_labels", "drift_image", "drift_limits", "drift_policy_hash", "attach_provider")

    def __init__(self, args, pb, workdir):
        self.pb = pb
        self.workdir = workdir
        self.instance = secrets.token_hex(6)
        self.token, self.admin_token = args.token, args.admin_token
        self.control_token = args.control_token or args.token
        self.images = dict(DEFAULT_IMAGES)
        self.images.update(dict(i.split("=", 1) for i in args.image))
        self.max_sandboxes = args.max_sandboxes
        self.host_cpus = os.cpu_count() or 1
        self.lock = threading.RLock()
        self.sandboxes = {}                  # name -> Sandbox (not yet gone)
        self.by_id = {}
        self.gone = []                       # deleted sandboxes, for /state
        self.providers = {}                  # name -> {id, name, type, credentials, config}
        self.misbehaviour = {}
        self.fail_next = {}                  # rpc -> [code, count]
        self.calls = {}                      # rpc -> {"count", "authorization": [...]}
        self.execs = []                      # Exec.log of every exec started
        self.live_execs = set()
        self.image_info = {}                 # docker image -> (uid, gid, [(loader, host copy)])
        self.image_locks = {}
        self.known_images = set()
        self.stopping = threading.Event()
        self.events_proc = None
        self.init_copy = None
        self.driver_version = ""

    # -- start and stop

    def prepare(self):
        p = docker(["version", "--format", "{{.Server.Version}}"], timeout=30)
        if p.returncode != 0:
            raise RuntimeError("docker version: " + docker_text(p))
        self.driver_version = p.stdout.decode().strip()
        init = shutil.which("docker-init") or shutil.which("tini")
        if init:
            self.init_copy = os.path.join(self.workdir, "init")
            shutil.copyfile(init, self.init_copy)
            os.chmod(self.init_copy, 0o711)
        self.events_proc = subprocess.Popen(
            ["docker", "events", "--filter", "label=%s=%s" % (LABEL, self.instance), "--filter",
             "type=container", "--filter", "event=die", "--format", "{{json .}}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        threading.Thread(target=self.watch_events, daemon=True).start()

    def watch_events(self):
        """A container that dies while its sandbox is not being deleted puts
        the sandbox in ERROR for good (its main process is gone)."""
        for line in self.events_proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            cid = ev.get("id") or ev.get("Actor", {}).get("ID", "")
            with self.lock:
                for sbx in self.sandboxes.values():
                    if sbx.container_id == cid and not sbx.deleting and sbx.phase in ("READY", "PROVISIONING"):
                        code = ev.get("Actor", {}).get("Attributes", {}).get("exitCode", "?")
                        sbx.set_phase("ERROR", "ContainerExited",
                                      "the sandbox's main process exited (status %s)" % code)

    def shutdown(self):
        self.stopping.set()
        with self.lock:
            execs = list(self.live_execs)
        for ex in execs:
            ex.cancel()
        # A `docker run` still in flight (a create just before the signal)
        # makes its container after the first sweep: sweep until none is
        # left, or ten seconds have passed.
        for _ in range(20):
            p = docker(["ps", "-aq", "--filter", "label=%s=%s" % (LABEL, self.instance)],
                       timeout=60)
            ids = p.stdout.decode().split()
            if not ids:
                break
            docker(["rm", "-f"] + ids, timeout=120)
            time.sleep(0.5)
        if self.events_proc and self.events_proc.poll() is None:
            self.events_proc.kill()
            self.events_proc.wait()

    # -- calls, auth, misbehaviours

    def authorize(self, rpc, context, admin=False):
        """Log the call; UNAUTHENTICATED without a valid bearer,
        PERMISSION_DENIED for an admin call with a non-admin token; then an
        injected failure (fail_next) if one is due."""
        header = None
        for key, value in context.invocation_metadata():
            if key == "authorization":
                header = value
        token = header[7:] if isinstance(header, str) and header.startswith("Bearer ") else None
        is_user = token is not None and secrets.compare_digest(token.encode(), self.token.encode())
        is_admin = token is not None and self.admin_token is not None and \
            secrets.compare_digest(token.encode(), self.admin_token.encode())
        with self.lock:
            entry = self.calls.setdefault(rpc, {"count": 0, "authorization": []})
            entry["count"] += 1
            entry["authorization"].append("ok" if (is_user or is_admin) else "bad")
        if not (is_user or is_admin):
            raise fail("UNAUTHENTICATED", "a valid bearer token is required" if header
                       else "the authorization header is missing")
        if admin and self.admin_token is not None and not is_admin:
            raise fail("PERMISSION_DENIED", "%s needs the gateway's admin token" % rpc)
        with self.lock:
            due = self.fail_next.get(rpc)
            if due:
                due[1] -= 1
                if due[1] <= 0:
                    del self.fail_next[rpc]
                raise fail(due[0], "failure injected by the fake")

    def behaviour(self, key, default=None):
        with self.lock:
            return self.misbehaviour.get(key, default)

    def misbehave(self, body):
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        for key, value in body.items():
            if key not in self.MISBEHAVIOURS:
                raise ValueError("unknown misbehaviour %r" % key)
            if value is not None and not isinstance(value, self.MISBEHAVIOURS[key]):
                raise ValueError("%s: wrong type" % key)
        if body.get("exec_kill") not in (None, "all", "group"):
            raise ValueError("exec_kill: all or group")
        if body.get("gateway_status") not in (None, "UNSPECIFIED", "HEALTHY", "DEGRADED",
                                               "UNHEALTHY"):
            raise ValueError("gateway_status: UNSPECIFIED, HEALTHY, DEGRADED or UNHEALTHY")
        if isinstance(body.get("drift_labels"), dict) and \
                not all(isinstance(v, str) for v in body["drift_labels"].values()):
            raise ValueError("drift_labels: values must be strings")
        if "fail_next" in body and body["fail_next"] is not None:
            f = body["fail_next"]
            if f.get("rpc") not in RPCS:
                raise ValueError("fail_next.rpc: one of %s" % ", ".join(RPCS))
            code = f.get("code", "UNAVAILABLE")
            if not isinstance(code, str) or code == "OK" or not hasattr(grpc.StatusCode, code):
                raise ValueError("fail_next.code: a gRPC status name such as UNAVAILABLE")
            count = f.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError("fail_next.count: a positive integer")
        ap = body.get("attach_provider")
        if isinstance(ap, str) and ap not in self.providers:
            raise ValueError("attach_provider: no provider record %r" % ap)
        if isinstance(ap, dict):
            self.add_provider(ap)
        with self.lock:
            for key, value in body.items():
                if key == "fail_next":
                    if value:
                        self.fail_next[value["rpc"]] = [value.get("code", "UNAVAILABLE"), value.get("count", 1)]
                elif value is None or value is False:
                    self.misbehaviour.pop(key, None)
                else:
                    self.misbehaviour[key] = value
        return self.behaviour_all()

    def drift_now(self, body):
        """A sandbox that already runs changes under its holder (an
        operator's edit on the gateway): {"name": ..., and drift misbehaviours}."""
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise ValueError("name: the sandbox's name")
        drift = {k: v for k, v in body.items() if k != "name"}
        for key, value in drift.items():
            if key not in self.DRIFTS or key == "attach_provider":
                raise ValueError("%s: one of %s but attach_provider" % (key, ", ".join(self.DRIFTS)))
            if not isinstance(value, self.MISBEHAVIOURS[key]):
                raise ValueError("%s: wrong type" % key)
        with self.lock:
            sbx = self.sandboxes.get(body["name"])
            if sbx is None or sbx.deleted:
                raise fail("NOT_FOUND", "sandbox %r not found" % body["name"])
            sbx.drift.update(drift)
            return {"drift": sbx.drift}

    def behaviour_all(self):
        with self.lock:
            out = json.loads(json.dumps(self.misbehaviour))
            if self.fail_next:
                out["fail_next"] = {rpc: {"code": c, "count": n} for rpc, (c, n) in self.fail_next.items()}
            return out

    def reset(self):
        with self.lock:
            self.misbehaviour.clear()
            self.fail_next.clear()
            self.calls.clear()
            self.execs = []

    def add_provider(self, body):
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("name: a non-empty string")
        creds = body.get("credentials", {})
        config = body.get("config", {})
        for field, value in (("credentials", creds), ("config", config)):
            if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in value.items()):
                raise ValueError("%s: an object of strings" % field)
        ptype = body.get("type", "generic")
        if not isinstance(ptype, str):
            raise ValueError("type: a string")
        with self.lock:
            rec = self.providers.get(name)
            if rec is None:
                rec = {"id": str(uuid.uuid4()), "name": name}
                self.providers[name] = rec
            rec.update({"type": ptype, "credentials": dict(creds), "config": dict(config)})
            return dict(rec)

    # -- images

    def resolve_image(self, name):
        """spec.template.image: a name of the --image map, or a local docker
        image.  The docker image, or INVALID_ARGUMENT."""
        image = self.images.get(name, name)
        with self.lock:
            if image in self.known_images:
                return image
        p = docker(["image", "inspect", "--format", "{{.Id}}", image], timeout=60)
        if p.returncode != 0:
            raise fail("INVALID_ARGUMENT", "unknown image %r: neither a configured name (%s) nor a local image"
                       % (name, ", ".join(sorted(self.images))))
        with self.lock:
            self.known_images.add(image)
        return image

    def image_setup(self, image):
        """Once per image: its user (the fallback when that is root) and
        execute-only copies of its dynamic loaders, for the bind mounts."""
        with self.lock:
            lock = self.image_locks.setdefault(image, threading.Lock())
        with lock:
            if image in self.image_info:
                return self.image_info[image]
            p = docker(["create", "--label", "%s=%s" % (LABEL, self.instance), "--network", "none",
                        "--entrypoint", "sh", image, "-c", PREP_SCRIPT, "sh"] + list(LOADERS), timeout=60)
            if p.returncode != 0:
                raise RuntimeError("docker create: " + docker_text(p))
            cid = p.stdout.decode().strip()
            try:
                p = docker(["start", "-a", cid], timeout=60)
                lines = p.stdout.decode().split()
                if p.returncode != 0 or len(lines) < 2 or not lines[0].isdigit() or not lines[1].isdigit():
                    raise RuntimeError("the image %s has no sh/id: %s" % (image, docker_text(p)))
                uid, gid = int(lines[0]), int(lines[1])
                if uid == 0:
                    uid, gid = FALLBACK_USER
                loaders = []
                folder = os.path.join(self.workdir, "img-%d" % len(self.image_info))
                os.makedirs(folder, exist_ok=True)
                for i, path in enumerate(dict.fromkeys(lines[2:])):
                    p = docker(["cp", "%s:%s" % (cid, path), "-"], timeout=60)
                    if p.returncode != 0:
                        raise RuntimeError("docker cp %s: %s" % (path, docker_text(p)))
                    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
                        member = next(m for m in tar.getmembers() if m.isfile())
                        data = tar.extractfile(member).read()
                    copy = os.path.join(folder, "loader%d" % i)
                    with open(copy, "wb") as f:
                        f.write(data)
                    os.chmod(copy, 0o711)
                    loaders.append((path, copy))
            finally:
                docker(["rm", "-f", cid], timeout=60)
            self.image_info[image] = (uid, gid, loaders)
            return self.image_info[image]

    # -- sandboxes

    def live(self):
        return [s for s in self.sandboxes.values() if s.phase in ("PROVISIONING", "READY")]

    def create(self, name, labels, spec, planted=False):
        """Admit a sandbox (PROVISIONING) and start its container in the
        background."""
        pb = self.pb
        if name and not NAME_RE.match(name):
            raise fail("INVALID_ARGUMENT", "name %r: a DNS label of at most 19 characters "
                       "(lowercase letters, digits and '-', starting and ending alphanumeric)" % name)
        for k in labels:
            if not k:
                raise fail("INVALID_ARGUMENT", "labels: an empty key")
        if not spec.template.image:
            raise fail("INVALID_ARGUMENT", "spec.template.image is required")
        for k in spec.environment:
            if not k or "=" in k or "\0" in k:
                raise fail("INVALID_ARGUMENT", "spec.environment: invalid name %r" % k)
        cpus, memory = parse_resources(spec.template.resources if spec.template.HasField("resources")
                                       else None, self.host_cpus)
        image = self.resolve_image(spec.template.image)
        with self.lock:
            missing = [p for p in spec.providers if p not in self.providers]
        if missing:
            raise fail("FAILED_PRECONDITION", "no provider record named %s" % ", ".join(missing))
        copy = pb.SandboxSpec()
        copy.CopyFrom(spec)
        with self.lock:
            if self.stopping.is_set():
                raise fail("UNAVAILABLE", "the gateway is stopping")
            if name and name in self.sandboxes:
                raise fail("ALREADY_EXISTS", "sandbox %r already exists" % name)
            while not name or name in self.sandboxes:
                name = new_name()
            if len(self.live()) >= self.max_sandboxes:
                raise fail("RESOURCE_EXHAUSTED", "the gateway runs at most %d sandboxes" % self.max_sandboxes)
            sbx = Sandbox(self, name, labels, copy, image, planted)
            sbx.cpus, sbx.memory = cpus, memory
            stuck = False
            if not planted:
                sbx.drift = {k: self.misbehaviour[k] for k in self.DRIFTS if k in self.misbehaviour}
                stuck = self.misbehaviour.get("stuck_error", False)
                ap = sbx.drift.get("attach_provider")
                if ap is not None:
                    if ap is True:
                        if DRIFT_PROVIDER["name"] not in self.providers:
                            self.add_provider(DRIFT_PROVIDER)
                        ap = DRIFT_PROVIDER["name"]
                    elif isinstance(ap, dict):
                        ap = ap["name"]
                    sbx.drift["attach_provider"] = ap
            self.sandboxes[name] = sbx
            self.by_id[sbx.id] = sbx
        threading.Thread(target=self.start_sandbox, args=(sbx, stuck), daemon=True).start()
        return sbx

    def start_sandbox(self, sbx, stuck):
        try:
            if stuck:
                time.sleep(0.1)
                with self.lock:
                    if not sbx.deleting:
                        sbx.set_phase("ERROR", "ProvisioningFailed",
                                      "the sandbox failed to start (stuck_error, injected by the fake)")
                return
            try:
                uid, gid, loaders = self.image_setup(sbx.image)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                with self.lock:
                    sbx.set_phase("ERROR", "ImageSetupFailed", str(e))
                return
            sbx.uid_gid = (uid, gid)
            p = docker(self.run_argv(sbx, loaders), timeout=120)
            with self.lock:
                if p.returncode != 0:
                    sbx.set_phase("ERROR", "ContainerFailed", "docker run: " + docker_text(p))
                    return
                sbx.container_id = p.stdout.decode().strip()
            # The main process may already have died (events came first).
            p = docker(["inspect", "-f", "{{.State.Running}}", sbx.container], timeout=60)
            with self.lock:
                if sbx.phase == "PROVISIONING":
                    if p.stdout.decode().strip() == "true":
                        sbx.set_phase("READY", "ContainerRunning", "the sandbox is running")
                    else:
                        sbx.set_phase("ERROR", "ContainerExited", "the sandbox's main process exited")
        finally:
            sbx.started.set()

    def run_argv(self, sbx, loaders):
        uid, gid = sbx.uid_gid
        argv = ["run", "-d", "--pull", "never", "--runtime", "runc", "--name", sbx.container,
                "--label", "%s=%s" % (LABEL, self.instance), "--label", "openshell-sandbox-id=" + sbx.id,
                "--label", "openshell-sandbox-name=" + sbx.name,
                "--user", "%d:%d" % (uid, gid), "--network", "none", "--ipc", "none", "--read-only",
                "--tmpfs", "/tmp:rw,exec,nosuid,nodev,size=%s,mode=1777" % TMP_SIZE,
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--pids-limit", str(PIDS_LIMIT)]
        if sbx.cpus is not None:
            argv += ["--cpus", "%g" % sbx.cpus]
        if sbx.memory is not None:
            argv += ["--memory", str(sbx.memory), "--memory-swap", str(sbx.memory)]
        for path, copy in loaders:
            argv += ["--mount", "type=bind,src=%s,dst=%s,readonly" % (copy, path)]
        for k, v in sorted(sbx.spec.environment.items()):
            argv += ["-e", "%s=%s" % (k, v)]
        if self.init_copy:
            argv += ["--mount", "type=bind,src=%s,dst=%s,readonly" % (self.init_copy, INIT_PATH),
                     "--entrypoint", INIT_PATH, sbx.image, "--", "sleep", "infinity"]
        else:
            argv += ["--init", "--entrypoint", "sleep", sbx.image, "infinity"]
        return argv

    def find(self, name):
        with self.lock:
            sbx = self.sandboxes.get(name)
        if sbx is None:
            raise fail("NOT_FOUND", "sandbox %r not found" % name)
        return sbx

    def delete(self, name):
        with self.lock:
            sbx = self.find(name)
            if sbx.deleting:
                return sbx
            sbx.deleting = True
            sbx.set_phase("DELETING", "Deleting", "the sandbox is being deleted")
        threading.Thread(target=self.remove, args=(sbx,), daemon=True).start()
        return sbx

    def remove(self, sbx):
        t0 = time.monotonic()
        sbx.started.wait(120)
        with self.lock:
            execs = [e for e in self.live_execs if e.sbx is sbx]
        for ex in execs:
            if ex.popen.poll() is None:
                ex.popen.kill()
        docker(["rm", "-f", sbx.container], timeout=120)
        left = DELETING_MIN_S - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        with self.lock:
            sbx.deleted = True
            if self.sandboxes.get(sbx.name) is sbx:
                del self.sandboxes[sbx.name]
            self.by_id.pop(sbx.id, None)
            self.gone.append(sbx)

    def list(self, selector):
        terms = []
        for term in filter(None, (t.strip() for t in selector.split(","))):
            key, eq, value = term.partition("=")
            if not eq or not key.strip():
                raise fail("INVALID_ARGUMENT", "label_selector: %r is not key=value" % term)
            terms.append((key.strip(), value.strip()))
        with self.lock:
            rows = sorted(self.sandboxes.values(), key=lambda s: (s.created, s.name))
            return [s for s in rows if all(s.reported_labels().get(k) == v for k, v in terms)]

    def sandbox_providers(self, sbx):
        with self.lock:
            names = list(sbx.providers)
            if sbx.drift.get("attach_provider") and sbx.drift["attach_provider"] not in names:
                names.append(sbx.drift["attach_provider"])
            return [dict(self.providers[n]) for n in names if n in self.providers]

    # -- exec processes

    def container_pids(self, sbx):
        """The host pids of the sandbox's processes (by their cgroup)."""
        if not sbx.container_id:
            return []
        needle = sbx.container_id.encode()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/cgroup" % entry, "rb") as f:
                    if needle in f.read():
                        pids.append(int(entry))
            except OSError:
                pass
        return pids

    def marked(self, sbx, marker):
        """The exec's processes: those whose environment holds its marker,
        and their descendants (a process that dropped its environment
        still descends from one that had it, unless it was orphaned)."""
        needle = b"\0%s=%s\0" % (MARKER_ENV.encode(), marker.encode())
        parents, found = {}, set()
        for pid in self.container_pids(sbx):
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    if needle in b"\0" + f.read():
                        found.add(pid)
                with open("/proc/%d/stat" % pid, "rb") as f:
                    parents[pid] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
        grew = True
        while grew:
            grew = False
            for pid, ppid in parents.items():
                if ppid in found and pid not in found:
                    found.add(pid)
                    grew = True
        return found

    @staticmethod
    def stat_of(pid):
        """(ppid, pgid) of a host pid, or None once it is gone."""
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
            return int(rest[1]), int(rest[2])
        except (OSError, ValueError, IndexError):
            return None

    def exec_groups(self, sbx, marker):
        """The process group of the exec's command: that of its process
        whose parent is outside the sandbox (what docker exec started; an
        orphan's parent is the sandbox's init)."""
        inside = set(self.container_pids(sbx))
        groups = set()
        for pid in self.marked(sbx, marker):
            st = self.stat_of(pid)
            if st and st[0] not in inside:
                groups.add(st[1])
        return groups

    def kill_marked(self, sbx, marker, rounds=200, groups=None):
        """SIGKILL the exec's processes until none is left (with groups,
        only those in one of those process groups)."""
        for _ in range(rounds):
            pids = self.marked(sbx, marker)
            if groups is not None:
                pids = {p for p in pids if (self.stat_of(p) or (0, None))[1] in groups}
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        return False

    def start_exec(self, request, inputs=None):
        validate_exec_request(request)
        sbx = None
        with self.lock:
            sbx = self.by_id.get(request.sandbox_id)
            if sbx is None or sbx.deleted:
                raise fail("NOT_FOUND", "no sandbox with id %r" % request.sandbox_id)
            if sbx.phase != "READY":
                raise fail("FAILED_PRECONDITION", "sandbox %s is %s, not READY" % (sbx.name, sbx.phase))
        if request.workdir and not request.workdir.startswith("/"):
            raise fail("INVALID_ARGUMENT", "workdir must be an absolute path")
        ex = Exec(self, sbx, request, inputs)
        with self.lock:
            self.execs.append(ex.log)
            self.live_execs.add(ex)
            sbx.execs.add(ex.marker)
        return ex

    def end_exec(self, ex):
        with self.lock:
            self.live_execs.discard(ex)

    def state(self):
        with self.lock:
            return {"instance": self.instance,
                    "sandboxes": [s.state_json() for s in list(self.sandboxes.values()) + self.gone],
                    "providers": [dict(p) for p in self.providers.values()],
                    "execs": [dict(e) for e in self.execs], "exec_count": len(self.execs),
                    "calls": json.loads(json.dumps(self.calls)),
                    "misbehaviour": self.behaviour_all()}


# ------------------------------------------------------------------ service

class Service:
    """The RPCs of openshell.v1.OpenShell."""

    def __init__(self, fake):
        self.fake, self.pb = fake, fake.pb

    def Health(self, request, context):
        return self.pb.HealthResponse(status=self.pb.SERVICE_STATUS_HEALTHY, version=FAKE_VERSION)

    def GetGatewayInfo(self, request, context):
        if self.fake.behaviour("driver_denied"):
            raise fail("PERMISSION_DENIED", "the compute drivers are not visible to this token")
        name = self.fake.behaviour("driver") or "docker"
        version = self.fake.driver_version if name == "docker" else "v0.0.0-fake"
        # Upstream's answer: HEALTHY, its version, its drivers
        # (crates/openshell-server/src/grpc/mod.rs:243-265).
        status = self.fake.behaviour("gateway_status") or "HEALTHY"
        out = self.pb.GetGatewayInfoResponse(status=getattr(self.pb, "SERVICE_STATUS_" + status),
                                             gateway_version=FAKE_VERSION)
        d = out.compute_drivers.add()
        d.name = name
        d.capabilities.driver_name = name
        d.capabilities.driver_version = version
        return out

    def CreateSandbox(self, request, context):
        sbx = self.fake.create(request.name, dict(request.labels), request.spec)
        return self.pb.SandboxResponse(sandbox=sbx.to_pb(self.pb))

    def GetSandbox(self, request, context):
        with self.fake.lock:
            return self.pb.SandboxResponse(sandbox=self.fake.find(request.name).to_pb(self.pb))

    def ListSandboxes(self, request, context):
        rows = self.fake.list(request.label_selector)
        limit = request.limit or LIST_DEFAULT
        out = self.pb.ListSandboxesResponse()
        with self.fake.lock:
            for sbx in rows[request.offset:request.offset + limit]:
                out.sandboxes.append(sbx.to_pb(self.pb))
        return out

    def ListSandboxProviders(self, request, context):
        sbx = self.fake.find(request.sandbox_name)
        out = self.pb.ListSandboxProvidersResponse()
        for rec in self.fake.sandbox_providers(sbx):
            p = out.providers.add()
            p.metadata.id, p.metadata.name, p.type = rec["id"], rec["name"], rec["type"]
            p.credentials.update(rec["credentials"])
            p.config.update(rec["config"])
        return out

    def DeleteSandbox(self, request, context):
        self.fake.delete(request.name)
        return self.pb.DeleteSandboxResponse(deleted=True)

    def GetSandboxPolicyStatus(self, request, context):
        sbx = self.fake.find(request.name)
        if request.version not in (0, 1):
            raise fail("NOT_FOUND", "sandbox %s has no policy revision %d" % (sbx.name, request.version))
        with self.fake.lock:
            loaded = sbx.phase in ("READY", "DELETING")
            out = self.pb.GetSandboxPolicyStatusResponse(active_version=1 if loaded else 0)
            out.revision.version = 1
            out.revision.policy_hash = sbx.policy_hash()
            out.revision.status = self.pb.POLICY_STATUS_LOADED if loaded else self.pb.POLICY_STATUS_PENDING
        return out

    def ExecSandboxInteractive(self, inputs, context):
        """Bidirectional: the first message must be `start` (an
        ExecSandboxRequest), the later ones stdin bytes, written to the
        command as they come; the client's half-close closes its stdin.
        The answer is ExecSandbox's stream."""
        try:
            first = next(inputs)
        except StopIteration:
            raise fail("INVALID_ARGUMENT", "the stream ended before its start message")
        if first.WhichOneof("payload") != "start":
            raise fail("INVALID_ARGUMENT", "the first message must carry start")
        yield from self.ExecSandbox(first.start, context, inputs)

    def ExecSandbox(self, request, context, inputs=None):
        """Server streaming: stdout/stderr chunks as they come, then one
        exit.  A cancelled call kills the exec's processes."""
        pb = self.pb
        ex = self.fake.start_exec(request, inputs)
        context.add_callback(ex.cancel)
        try:
            while True:
                kind, data = ex.events.get()
                if kind is Exec.CANCEL:
                    return
                withhold = self.fake.behaviour("exec_withhold_exit")
                if kind == "exit" and withhold and withhold in " ".join(ex.log["argv"]):
                    # A loaded gateway: the exit never comes, and the call
                    # ends at its deadline (grpc-timeout) or the client's.
                    ex.log["state"] = "withholding"
                    while not ex.cancelled.wait(0.2) and not self.fake.stopping.is_set():
                        if context.time_remaining() is not None and context.time_remaining() <= 0:
                            break
                    context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
                if kind == "exit":
                    # The command has ended: a client that cancels once it
                    # has the exit (as it may) ends nothing it left behind.
                    ex.finished = True
                    yield pb.ExecSandboxEvent(exit=pb.ExecSandboxExit(exit_code=data))
                    break
                if kind == "stdout":
                    yield pb.ExecSandboxEvent(stdout=pb.ExecSandboxStdout(data=data))
                else:
                    yield pb.ExecSandboxEvent(stderr=pb.ExecSandboxStderr(data=data))
            if self.fake.behaviour("exec_hang_after_exit"):
                ex.log["state"] = "hanging"
                while not ex.cancelled.wait(0.5) and not self.fake.stopping.is_set():
                    pass
                return
            ex.finished = True
        finally:
            self.fake.end_exec(ex)


TYPES = {"Health": ("HealthRequest", "HealthResponse"),
         "GetGatewayInfo": ("GetGatewayInfoRequest", "GetGatewayInfoResponse"),
         "CreateSandbox": ("CreateSandboxRequest", "SandboxResponse"),
         "GetSandbox": ("GetSandboxRequest", "SandboxResponse"),
         "ListSandboxes": ("ListSandboxesRequest", "ListSandboxesResponse"),
         "ListSandboxProviders": ("ListSandboxProvidersRequest", "ListSandboxProvidersResponse"),
         "DeleteSandbox": ("DeleteSandboxRequest", "DeleteSandboxResponse"),
         "ExecSandbox": ("ExecSandboxRequest", "ExecSandboxEvent"),
         "ExecSandboxInteractive": ("ExecSandboxInput", "ExecSandboxEvent"),
         "GetSandboxPolicyStatus": ("GetSandboxPolicyStatusRequest", "GetSandboxPolicyStatusResponse")}


def handlers(fake):
    """The generic handler of the service: each method authorizes, then
    runs; an RpcFail becomes its status."""
    service = Service(fake)
    methods = {}
    for rpc, (req_name, resp_name) in TYPES.items():
        req, resp = getattr(fake.pb, req_name), getattr(fake.pb, resp_name)
        fn = getattr(service, rpc)
        admin = rpc == "GetGatewayInfo"
        if rpc in ("ExecSandbox", "ExecSandboxInteractive"):
            def stream(request, context, rpc=rpc, fn=fn):
                try:
                    fake.authorize(rpc, context)
                    yield from fn(request, context)
                except RpcFail as e:
                    context.abort(e.code, e.message)
            make = grpc.unary_stream_rpc_method_handler if rpc == "ExecSandbox" \
                else grpc.stream_stream_rpc_method_handler
            methods[rpc] = make(
                stream, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
        else:
            def unary(request, context, rpc=rpc, fn=fn, admin=admin):
                try:
                    fake.authorize(rpc, context, admin=admin)
                    return fn(request, context)
                except RpcFail as e:
                    context.abort(e.code, e.message)
            methods[rpc] = grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=req.FromString, response_serializer=resp.SerializeToString)
    return grpc.method_handlers_generic_handler(SERVICE, methods)


# ------------------------------------------------------------------ control

class Control(BaseHTTPRequestHandler):
    """POST /misbehave, /reset, /plant, /provider; GET /state."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw.strip() else {}

    def handle_any(self):
        fake = self.server.fake
        try:
            body = self.read_json()
        except ValueError:
            return self.send_json(400, {"error": "the body is not JSON"})
        given = self.headers.get("X-Fake-Control") or ""
        if not secrets.compare_digest(given.encode(), fake.control_token.encode()):
            return self.send_json(401, {"error": "X-Fake-Control is missing or wrong"})
        route = (self.command, self.path.split("?", 1)[0])
        try:
            if route == ("POST", "/misbehave"):
                return self.send_json(200, fake.misbehave(body))
            if route == ("POST", "/reset"):
                fake.reset()
                return self.send_json(200, {})
            if route == ("POST", "/provider"):
                return self.send_json(200, fake.add_provider(body))
            if route == ("POST", "/plant"):
                return self.plant(fake, body)
            if route == ("POST", "/drift"):
                return self.send_json(200, fake.drift_now(body))
            if route == ("GET", "/state"):
                return self.send_json(200, fake.state())
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})
        except RpcFail as e:
            return self.send_json(400, {"error": e.message, "code": e.code.name})
        self.send_json(404, {"error": "no route %s %s" % route})

    def plant(self, fake, body):
        """A sandbox nobody asked for, with the given metadata labels; the
        answer comes once it runs."""
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        labels = body.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise ValueError("labels: an object of strings")
        name = body.get("name", "")
        if not isinstance(name, str):
            raise ValueError("name: a string")
        spec = fake.pb.SandboxSpec()
        spec.template.image = body.get("image", "base")
        sbx = fake.create(name, labels, spec, planted=True)
        sbx.started.wait(120)
        with fake.lock:
            return self.send_json(200, {"name": sbx.name, "id": sbx.id, "phase": sbx.phase,
                                        "container": sbx.container})

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


# --------------------------------------------------------------------- main

def split_hostport(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description="A fake of OpenShell's gateway for tests.")
    p.add_argument("--listen", default="127.0.0.1:0", help="gRPC HOST:PORT (port 0: any)")
    p.add_argument("--token", required=True, help="the bearer token every RPC needs")
    p.add_argument("--admin-token", help="the bearer GetGatewayInfo needs (default: --token)")
    p.add_argument("--control-listen", default="127.0.0.1:0", help="the test control's HOST:PORT")
    p.add_argument("--control-token", help="X-Fake-Control's value (default: --token)")
    p.add_argument("--tls-cert", help="PEM certificate: serve TLS")
    p.add_argument("--tls-key", help="PEM key of --tls-cert")
    p.add_argument("--client-ca", help="PEM CA bundle: require client certificates it signed")
    p.add_argument("--image", action="append", default=[], help="NAME=IMAGE (repeatable; base=%s built in)"
                   % DEFAULT_IMAGE)
    p.add_argument("--max-sandboxes", type=int, default=10, help="live sandboxes at most")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop (and clean up) when the process that started the fake ends")
    p.add_argument("--proto-dir",
                   default=os.path.normpath(os.path.join(here, "..", "..", "..", "..", "shared",
                                                         "upstream", "openshell")),
                   help="the folder of upstream's protos (compiled at start; default "
                   "<repo>/../shared/upstream/openshell)")
    args = p.parse_args(argv)
    if any("=" not in i or i.startswith("=") or i.endswith("=") for i in args.image):
        p.error("--image is NAME=IMAGE")
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        p.error("--client-ca needs --tls-cert and --tls-key")
    if not args.token:
        p.error("--token must not be empty")
    return args


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main(argv):
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("fake_openshell: needs root (it reads the sandboxes' /proc/<pid>/environ)", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="fake-openshell-")
    os.chmod(workdir, 0o755)
    try:
        pb = load_messages(os.path.abspath(args.proto_dir), workdir)
        fake = Fake(args, pb, workdir)
        fake.prepare()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print("fake_openshell: %s" % e, file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        return 1
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                  ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handlers(fake),))
    host, port = split_hostport(args.listen)
    target = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
    if args.tls_cert:
        creds = grpc.ssl_server_credentials([(read(args.tls_key), read(args.tls_cert))],
                                            root_certificates=read(args.client_ca) if args.client_ca else None,
                                            require_client_auth=bool(args.client_ca))
        bound = server.add_secure_port(target, creds)
    else:
        bound = server.add_insecure_port(target)
    if not bound:
        print("fake_openshell: cannot listen on %s" % args.listen, file=sys.stderr)
        fake.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
        return 1
    chost, cport = split_hostport(args.control_listen)
    control = ThreadingHTTPServer((chost, cport), Control)
    control.daemon_threads = True
    control.fake = fake
    stop = threading.Event()
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    server.start()
    threading.Thread(target=control.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    shown = "[%s]" % host if ":" in host else host
    cshown = control.server_address[0]
    print(json.dumps({"listening": "%s:%d" % (shown, bound),
                      "control": "%s:%d" % (cshown, control.server_address[1]),
                      "instance": fake.instance}), flush=True)
    try:
        while not stop.wait(0.5):
            if args.exit_with_parent and os.getppid() != parent:
                break
    finally:
        fake.stopping.set()
        control.shutdown()
        control.server_close()
        server.stop(grace=0)
        fake.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
