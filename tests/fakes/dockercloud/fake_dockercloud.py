# SPDX-License-Identifier: Apache-2.0
"""A test fake of the hosted Docker Sandboxes service ("dockercloud"), with
real sandboxes.

    python3 fake_dockercloud.py --listen 127.0.0.1:0 --account ID --secret PAT \\
        [--default-image IMAGE] [--image NAME=IMAGE ...] [--token-ttl S] \\
        [--permissions p1,p2,...] [--max-sandboxes N] [--account-allow CIDR ...] \\
        [--main-user root|agent|init-agent]

It prints one line, {"listening": "HOST:PORT", "instance": "<id>"}, then
serves until SIGTERM or SIGINT, when it force-removes every container and
the network it created and exits 0.

One port serves everything: the token exchange (POST /v2/auth/token, which
in the real world is Docker's token endpoint on another host), the
management API (/v1/..., bearer access token) and every sandbox's own
endpoint (/endpoints/<uid>/v1/..., a scoped bearer from
createEndpointCredential).  Each sandbox is a locked-down docker container
(label plimsoll-fake-dockercloud=<instance>) whose main process does
nothing (as root under docker's init; with --main-user agent as the exec's
default user, itself PID 1; with init-agent as that user under docker's
init as root: the API does not say which user owns it); files
and processes really live in it, its CPU and memory limits are real, and
its network policy is enforced (no network, or iptables in its netns).
Test control (header X-Fake-Control: <secret>): POST /_fake/misbehave,
/_fake/reset, /_fake/plant, /_fake/take-violations, PUT
/_fake/account-policy, GET /_fake/state.

Every request to the API and the endpoints, and every answer to it, is
checked against the API's own OpenAPI file, read at start from
../shared/upstream/dockercloud/api.yaml beside the repository (contract.py;
the fake refuses to start without it); what breaks it is recorded as a
violation naming the operation, the field and the upstream file, listed by
/_fake/state and taken (and cleared) by /_fake/take-violations, never by
/_fake/reset.
docs/providers/dockercloud-fake.md says which operation of the "Docker
Sandboxes API v1" document each route follows and where the fake
simplifies.

The standard library, python3-yaml and python3-jsonschema (contract.py),
and the docker CLI; every docker call is an argv list,
and values reach `sh -c` scripts only as positional arguments.
"""
import argparse
import base64
import hashlib
import ipaddress
import json
import re
import secrets
import signal
import string
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from contract import Contract, ContractMissing

MAX_BODY = 64 << 20            # larger request bodies are refused 413
LABEL = "plimsoll-fake-dockercloud"
DEFAULT_IMAGE = "plimsoll/project:latest"
# The documented compute sizes (limits.md): cpus -> memoryMib.
SIZES = {1: 2048, 2: 4096, 4: 8192, 8: 16384, 16: 32768}
DEFAULT_SIZE = (2, 4096)       # "small", the documented default
PAGE_DEFAULT, PAGE_MAX = 25, 100
CRED_TTL_MIN, CRED_TTL_MAX = 1, 300
CAPTURE_LIMIT = 1 << 20        # exec's combined stdout+stderr capture
OUTPUT_RETAIN = 16 << 20       # bytes of output kept per process
REAP_EVERY_S = 0.25
CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL")
# The sandbox's users: name -> (uid, gid, home); "agent" is the default.
USERS = {"agent": (1000, 1000, "/home/agent"), "root": (0, 0, "/root")}
DEFAULT_USER = "agent"
ALL_PERMISSIONS = (
    "sandboxesRead", "sandboxesCreate", "sandboxesExec", "sandboxesFilesRead",
    "sandboxesFilesWrite", "imagesPull", "secretsWrite", "sandboxesDelete",
    "sandboxesLifecycle", "sandboxesKits", "sandboxesPorts", "sandboxesCredential",
    "sandboxesSsh", "imagesRead", "imagesWrite", "secretsRead", "networkPoliciesRead",
    "volumesRead", "volumesWrite", "snapshotsRead", "snapshotsWrite", "mcpRead",
    "mcpWrite", "credentialsExchange", "sandboxesRename", "secretsResolve", "operator")
ENDPOINT_PERMISSIONS = ("sandboxesExec", "sandboxesFilesRead", "sandboxesFilesWrite")
DEFAULT_PERMISSIONS = ("sandboxesRead", "sandboxesCreate", "sandboxesDelete",
                       "sandboxesCredential", "sandboxesExec", "sandboxesFilesRead",
                       "sandboxesFilesWrite", "networkPoliciesRead", "imagesRead")
SIGNALS = {"term": "TERM", "kill": "KILL", "int": "INT", "hup": "HUP", "quit": "QUIT",
           "usr1": "USR1", "usr2": "USR2"}
SIGNAL_NAMES = {1: "hangup", 2: "interrupt", 3: "quit", 9: "killed", 10: "user defined signal 1",
                12: "user defined signal 2", 15: "terminated"}
# The operations the endpoint serves (SandboxEndpoint.capabilities).
CAPABILITIES = ["exec", "createProcess", "listProcesses", "getProcess", "readOutput", "signal",
                "upload", "mkdir", "writeFile", "readFile"]
# ErrorCode -> HTTP status, as the document's responses pair them.
STATUS = {"invalidArgument": 400, "unauthenticated": 401, "permissionDenied": 403,
          "notFound": 404, "alreadyExists": 409, "failedPrecondition": 409,
          "resourceExhausted": 429, "internal": 500, "unimplemented": 501,
          "unavailable": 503, "deadlineExceeded": 504}
ID_ALPHABET = string.ascii_lowercase + string.digits
PID_MARKER = b"DCFAKE_PID "

# The first command of a started process: report the pid, lead its own
# process group, become the caller's argv.
START_SCRIPT = """read -r _ _ _ _ pgrp _ < /proc/$$/stat
printf 'DCFAKE_PID %s\\n' "$$" >&2
if [ "$pgrp" = "$$" ]; then exec "$@"; fi
exec setsid "$@"
"""
# $1 path, $2 mode (octal): write stdin there as the calling user, creating
# missing parents.  Exit 3: a directory or other non-regular object is there;
# 5: permission denied.
WRITE_SCRIPT = """p=$1; m=$2
if [ -e "$p" ] && [ ! -f "$p" ]; then exit 3; fi
mkdir -p -- "$(dirname -- "$p")" 2>/dev/null || exit 5
cat > "$p" 2>/dev/null || exit 5
chmod "$m" -- "$p" || exit 5
stat -c '%s %a' -- "$p"
"""
# $1 path: exit 3 not a regular file, 4 missing, 5 denied, else the bytes.
READ_SCRIPT = """[ -e "$1" ] || exit 4
[ -f "$1" ] || exit 3
[ -r "$1" ] || exit 5
exec cat -- "$1"
"""
# $1 path, $2 mode, $3 parents (1/0).  Exit 3 occupied by a non-directory,
# 4 parent missing, 5 denied; a directory already there converges.
MKDIR_SCRIPT = """if [ -d "$1" ]; then exit 0; fi
if [ -e "$1" ]; then exit 3; fi
if [ "$3" = 1 ]; then mkdir -p -- "$1" 2>/dev/null || exit 5
else [ -d "$(dirname -- "$1")" ] || exit 4; mkdir -- "$1" 2>/dev/null || exit 5; fi
chmod "$2" -- "$1"
"""
SETUP_SCRIPT = """grep -q '^[^:]*:[^:]*:1000:' /etc/passwd || echo 'agent:x:1000:1000:agent:/home/agent:/bin/sh' >> /etc/passwd
grep -q '^[^:]*:[^:]*:1000:' /etc/group || echo 'agent:x:1000:' >> /etc/group
mkdir -p /home/agent && chown 1000:1000 /home/agent
"""
# --main-user: PID 1 drops to uid $1, gid $2, then does nothing.
DROP_SCRIPT = ("import os, sys\n"
               "os.setgroups([])\n"
               "os.setgid(int(sys.argv[2]))\n"
               "os.setuid(int(sys.argv[1]))\n"
               "os.execvp('sleep', ['sleep', 'infinity'])\n")
KILL_SCRIPT = 'kill -s "$1" -- "-$2"'


class HttpError(Exception):
    """An answer other than success: status, JSON body, headers."""

    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


def api_error(code, message, details=None, status=None):
    """The document's Error: {"code", "message", "details"}."""
    return HttpError(status or STATUS[code], {"code": code, "message": message,
                                              "details": details or []})


def bad_request(field, description):
    """invalidArgument with a google.rpc.BadRequest detail."""
    return api_error("invalidArgument", "%s: %s" % (field, description), [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": field, "description": description}]}])


def not_found(what="The target is absent or not visible within the caller's scope."):
    return api_error("notFound", what)


def now():
    return time.time()


def rfc3339(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(n=20):
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(n))


def docker(args, stdin=None, timeout=120):
    """Run the docker CLI with argv `args`; the CompletedProcess."""
    return subprocess.run(["docker"] + args, input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def docker_ok(args, stdin=None, timeout=120):
    p = docker(args, stdin=stdin, timeout=timeout)
    if p.returncode != 0:
        raise api_error("internal", "docker %s failed: %s" % (args[0], p.stderr.decode(errors="replace").strip()))
    return p


# ---------------------------------------------------------------- requests

def require_type(value, kind, field):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(field, "has the wrong type")
    return value


def require_keys(obj, allowed, field):
    """Unknown fields are rejected (additionalProperties: false)."""
    require_type(obj, dict, field or "body")
    for k in obj:
        if k not in allowed:
            raise bad_request(("%s.%s" % (field, k)) if field else k, "unknown field")
    return obj


def string_map(value, field):
    require_type(value, dict, field)
    for k, v in value.items():
        require_type(v, str, "%s.%s" % (field, k))
    return dict(value)


def int64(value, field):
    """A 64-bit integer given as a number or a string."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value):
        return int(value)
    return require_type(value, int, field)


def duration(value, field):
    """A Duration: seconds with a trailing s ("30s", "1.5s")."""
    if not isinstance(value, str) or not re.fullmatch(r"-?\d+(\.\d{1,9})?s", value):
        raise bad_request(field, "must be a duration such as 30s")
    return float(value[:-1])


def fmt_duration(seconds):
    return ("%d" % seconds if seconds == int(seconds) else ("%.9f" % seconds).rstrip("0")) + "s"


def network_literal(text, field):
    """An allow/deny entry: the fake serves IPs and CIDRs only."""
    require_type(text, str, field)
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise api_error("unimplemented", "%s: the fake serves IP and CIDR networks only, not %r"
                        % (field, text)) from None
    return "ip" if "/" not in text else "cidr", str(net) if "/" in text else text


def parse_policy(value, field, modes=("denyAll",)):
    """One NetworkPolicy document: {mode, allowNetworks, denyNetworks}."""
    require_keys(value, ("mode", "allowNetworks", "denyNetworks"), field)
    mode = value.get("mode")
    if mode not in modes:
        raise bad_request(field + ".mode", "must be one of %s" % ", ".join(modes))
    out = {"mode": mode, "allowNetworks": [], "denyNetworks": []}
    for key in ("allowNetworks", "denyNetworks"):
        for i, net in enumerate(require_type(value.get(key, []), list, "%s.%s" % (field, key))):
            network_literal(net, "%s.%s[%d]" % (field, key, i))
            out[key].append(net)
    return out


CREATE_FIELDS = ("agent", "displayName", "displayNamePrefix", "environment", "resources",
                 "pullPolicy", "kits", "mcp", "networkPolicies", "policyIds", "platform",
                 "startupExecution", "labels", "features", "image", "imageRef")


class CreateSpec:
    """A validated CreateSandboxRequest, as far as the fake serves it."""

    def __init__(self, body, fake):
        require_keys(body, CREATE_FIELDS, "")
        for key in ("kits", "mcp", "policyIds", "startupExecution"):
            if key in body:
                raise api_error("unimplemented", "%s is not served by the fake" % key)
        if body.get("agent"):
            raise api_error("unimplemented", "agent profiles are not served by the fake")
        if body.get("pullPolicy") not in (None, "unspecified", "always"):
            raise bad_request("pullPolicy", "must be unspecified or always")
        if "displayName" in body and "displayNamePrefix" in body:
            raise bad_request("displayName", "displayName and displayNamePrefix are mutually exclusive")
        self.display_name = require_type(body.get("displayName", ""), str, "displayName")
        if len(self.display_name) > 64 or not re.fullmatch(r"[a-zA-Z0-9_-]*", self.display_name):
            raise bad_request("displayName", "must match ^[a-zA-Z0-9_-]*$, at most 64 characters")
        prefix = require_type(body.get("displayNamePrefix", ""), str, "displayNamePrefix")
        if len(prefix) > 57 or not re.fullmatch(r"[a-zA-Z0-9_-]*", prefix):
            raise bad_request("displayNamePrefix", "must match ^[a-zA-Z0-9_-]*$, at most 57 characters")
        if "displayNamePrefix" in body:
            self.display_name = prefix + "".join(secrets.choice(ID_ALPHABET) for _ in range(6))
        self.environment = string_map(body.get("environment", {}), "environment")
        for k in self.environment:
            if not k or "=" in k:
                raise bad_request("environment", "invalid name %r" % k)
        self.labels = string_map(body.get("labels", {}), "labels")
        if len(self.labels) > 64:
            raise bad_request("labels", "at most 64 labels")
        if "platform" in body:
            plat = require_keys(body["platform"], ("os", "architecture"), "platform")
            if plat.get("os") != "linux" or plat.get("architecture") != fake.arch:
                raise api_error("unimplemented", "platform %r is not served" % plat)
        if "image" in body and "imageRef" in body:
            raise bad_request("image", "at most one of image, imageRef is set")
        self.image_name = self.image_ref = None
        if "image" in body:
            self.image_name = require_type(body["image"], str, "image")
            if not re.fullmatch(r"images/[^/]+", self.image_name):
                raise bad_request("image", "must be images/{image}")
            if self.image_name.split("/", 1)[1] not in fake.images:
                raise not_found("image %s not found" % self.image_name)
            if "resources" in body:
                raise bad_request("resources", "omit resources when image supplies them")
            self.docker_image = fake.images[self.image_name.split("/", 1)[1]]
        elif "imageRef" in body:
            self.image_ref = require_type(body["imageRef"], str, "imageRef")
            if not self.image_ref:
                raise bad_request("imageRef", "must not be empty")
            self.docker_image = self.image_ref
        else:
            raise bad_request("imageRef", "one of image, imageRef is required")
        self.cpus, self.memory_mib = DEFAULT_SIZE
        if "resources" in body:
            res = require_keys(body["resources"], ("cpus", "memoryMib"), "resources")
            if res.get("cpus") is None or res.get("memoryMib") is None:
                raise bad_request("resources", "supply both cpus and memoryMib")
            cpus = require_type(res["cpus"], int, "resources.cpus")
            mib = int64(res["memoryMib"], "resources.memoryMib")
            if SIZES.get(cpus) != mib:
                raise bad_request("resources", "%d CPUs with %d MiB is not a supported pair" % (cpus, mib))
            self.cpus, self.memory_mib = cpus, mib
        self.policies = []
        for i, pol in enumerate(require_type(body.get("networkPolicies", []), list, "networkPolicies")):
            self.policies.append(parse_policy(pol, "networkPolicies[%d]" % i))
        self.timeout = self.on_timeout = None
        features = require_keys(body.get("features", {}), ("managedVolumes", "timeouts", "storedSecrets"),
                                "features")
        for key in ("managedVolumes", "storedSecrets"):
            if key in features:
                raise api_error("unimplemented", "features.%s is not served by the fake" % key)
        if "timeouts" in features:
            t = require_keys(features["timeouts"], ("timeout", "onTimeout", "autoResume"), "features.timeouts")
            self.on_timeout = t.get("onTimeout") or "delete"
            if self.on_timeout not in ("delete", "stop"):
                if self.on_timeout in ("keep", "restart"):
                    raise api_error("unimplemented", "onTimeout %s is not served by the fake" % self.on_timeout)
                raise bad_request("features.timeouts.onTimeout", "must be delete, stop, keep or restart")
            self.timeout = duration(t.get("timeout", "3600s"), "features.timeouts.timeout")
            if self.timeout <= 0:
                raise bad_request("features.timeouts.timeout", "must be positive")


# --------------------------------------------------------------- sandboxes

class Sandbox:
    """One sandbox: its container, its policy, its lifecycle."""

    def __init__(self, spec, fake, policy):
        self.uid = new_id()
        self.name = "sandboxes/" + self.uid
        self.spec = spec
        self.container = "dcfake-%s-%s" % (fake.instance, self.uid)
        self.created_at = now()
        self.status = "creating"
        self.version = 1
        self.failure = None
        self.policy = policy               # the effective policy (see Fake.effective)
        self.network_mode = "none"
        self.polls_left = 0                # GETs before a 202'd change settles
        self.pending = None                # the status it settles to
        self.expires_at = now() + spec.timeout if spec.timeout else None
        self.processes = {}                # uid -> Proc
        self.labels_seen = set()
        self.lock = threading.Lock()

    @property
    def etag(self):
        return '"%s-%d"' % (self.uid[:8], self.version)

    def bump(self):
        self.version += 1

    def json(self, fake):
        core = {"status": self.status,
                "resources": {"cpus": self.spec.cpus, "memoryMib": str(self.spec.memory_mib)},
                "platform": {"os": "linux", "architecture": fake.arch},
                "createdAt": rfc3339(self.created_at), "etag": self.etag}
        if self.spec.environment:
            core["environment"] = self.spec.environment
        if self.spec.labels:
            core["labels"] = self.spec.labels
        if self.spec.image_name:
            core["image"] = self.spec.image_name
        else:
            core["imageRef"] = self.spec.image_ref
        if self.status == "running":
            core["endpoint"] = {
                "uri": "%s/endpoints/%s" % (fake.base_url, self.uid), "protocol": "http",
                "credentialAudience": fake.audience(self), "sandbox": self.name,
                "sandboxUid": self.uid, "apiVersion": "v1", "capabilities": list(CAPABILITIES),
                "authentication": {"scheme": "scopedBearer", "defaultTtl": "300s", "maxTtl": "300s",
                                   "credentialTransports": ["authorizationHeader"]}}
        out = {"name": self.name, "uid": self.uid, "displayName": self.spec.display_name,
               "core": core,
               "effectiveFeatures": {"lifecycle": {"stopMemoryOutcome": "discard"},
                                     "outputRetention": {"minBytes": str(OUTPUT_RETAIN)}}}
        if self.spec.timeout:
            timeouts = {"onTimeout": self.spec.on_timeout, "autoResume": False,
                        "initialTimeout": fmt_duration(self.spec.timeout)}
            if self.expires_at and self.status == "running":
                timeouts["expiresAt"] = rfc3339(self.expires_at)
            out["effectiveFeatures"]["timeouts"] = timeouts
        if self.status == "failed" and self.failure:
            out["failure"] = self.failure
        return out

    def state_json(self):
        return {"uid": self.uid, "name": self.name, "displayName": self.spec.display_name,
                "container": self.container, "status": self.status, "etag": self.etag,
                "networkMode": self.network_mode, "policy": self.policy,
                "cpus": self.spec.cpus, "memoryMib": self.spec.memory_mib,
                "labels": self.spec.labels, "processes": sorted(self.processes)}


class Proc:
    """One started process: its `docker exec`, in-container pid (leader of
    its process group), retained output chunks and exit status."""

    def __init__(self, sandbox, argv, label, session):
        self.sandbox = sandbox
        self.uid = new_id(16)
        self.created = time.monotonic()
        self.label, self.session = label, session
        self.pid = None
        self.chunks = []                   # [seq, stream, bytes]
        self.retained = 0
        self.seq = 0
        self.exit_code = None
        self.reason = ""
        self.failure = b""
        self.cond = threading.Condition()
        self.started = threading.Event()
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
        pumps = [threading.Thread(target=self.pump, args=(self.popen.stdout, "stdout"), daemon=True),
                 threading.Thread(target=self.pump_stderr, daemon=True)]
        for t in pumps:
            t.start()
        threading.Thread(target=self.wait, args=(pumps,), daemon=True).start()

    def add(self, stream, data):
        with self.cond:
            self.seq += 1
            self.chunks.append([self.seq, stream, data])
            self.retained += len(data)
            while self.retained > OUTPUT_RETAIN and len(self.chunks) > 1:
                self.retained -= len(self.chunks.pop(0)[2])
            self.cond.notify_all()

    def pump(self, pipe, stream):
        while True:
            data = pipe.read1(65536)
            if not data:
                return
            self.add(stream, data)

    def pump_stderr(self):
        head = b""
        while b"\n" not in head and len(head) < 4096:
            data = self.popen.stderr.read1(4096)
            if not data:
                break
            head += data
        line, _, rest = head.partition(b"\n")
        if line.startswith(PID_MARKER) and line[len(PID_MARKER):].isdigit():
            self.pid = int(line[len(PID_MARKER):])
            self.started.set()
            if rest:
                self.add("stderr", rest)
            self.pump(self.popen.stderr, "stderr")
        else:
            self.failure = head + self.popen.stderr.read(65536)
            self.started.set()

    def wait(self, pumps):
        for t in pumps:
            t.join()
        status = self.popen.wait()
        with self.cond:
            self.exit_code = status
            if 128 < status <= 128 + 64:
                self.reason = "signal: " + SIGNAL_NAMES.get(status - 128, str(status - 128))
            else:
                self.reason = "exit status %d" % status
            self.cond.notify_all()

    def signal(self, name):
        if self.popen.poll() is not None or self.pid is None:
            return True
        return docker(["exec", "-u", "0", self.sandbox.container, "sh", "-c", KILL_SCRIPT, "sh",
                       name, str(self.pid)], timeout=30).returncode == 0

    def json(self):
        with self.cond:
            out = {"uid": self.uid, "name": "processes/" + self.uid, "label": self.label,
                   "session": self.session, "lastStreamSequence": str(self.seq),
                   "receiptKind": "unspecified",
                   "state": "running" if self.exit_code is None else "exited"}
            if self.pid is not None:
                out["pid"] = self.pid
            if self.exit_code is not None:
                out["exitCode"] = self.exit_code
        return out


# ------------------------------------------------------------------- state

class Fake:
    """The fake's state: settings, tokens, sandboxes, misbehaviours, log."""

    def __init__(self, args):
        self.account, self.secret = args.account, args.secret
        self.default_image = args.default_image
        self.images = dict(i.split("=", 1) for i in args.image)
        self.token_ttl = args.token_ttl
        self.permissions = set(args.permissions.split(",")) if args.permissions else set(DEFAULT_PERMISSIONS)
        self.max_sandboxes = args.max_sandboxes
        self.main_user = args.main_user
        self.instance = secrets.token_hex(6)
        self.network = "dcfake-" + self.instance
        self.base_url = ""                                 # set once bound
        self.arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(
            subprocess.run(["uname", "-m"], stdout=subprocess.PIPE).stdout.decode().strip(), "amd64")
        self.start_account_policy = {"mode": "denyAll", "allowNetworks": list(args.account_allow),
                                     "denyNetworks": []}
        self.account_policy = json.loads(json.dumps(self.start_account_policy))
        self.policy_revision = 1
        self.lock = threading.Lock()
        self.tokens = {}          # access token -> expiry
        self.credentials = {}     # scoped token -> {sandbox, permissions, expiry, audience}
        self.sandboxes = {}
        self.idempotency = {}     # (operation, path, key) -> (fingerprint, status, body, headers)
        self.misbehaviour = {}
        self.requests = []
        self.contract = Contract.load()
        self.violations = []      # what broke the upstream contract (contract.py)
        self.stopping = threading.Event()
        self.busy = 0
        self.idle = threading.Condition(self.lock)
        self.host_cpus = int(subprocess.run(["nproc"], stdout=subprocess.PIPE).stdout.decode().strip() or 1)

    # -- log and misbehaviours

    def log_request(self, method, path):
        entry = {"method": method, "path": path, "time": rfc3339(now())}
        with self.lock:
            self.requests.append(entry)
        return entry

    MISBEHAVIOURS = {"policy_open": bool, "policy_allow": list, "drop_permission": list,
                     "stale_etag": int, "fail_start": bool, "create_polls": int,
                     "delete_polls": int, "expire_token": bool, "fail": dict,
                     "create_delay_ms": int}

    def misbehave(self, body):
        require_type(body, dict, "body")
        for key, value in body.items():
            if key not in self.MISBEHAVIOURS:
                raise bad_request(key, "unknown misbehaviour")
            require_type(value, self.MISBEHAVIOURS[key], key)
            if self.MISBEHAVIOURS[key] is int and value < 0:
                raise bad_request(key, "must not be negative")
        for net in body.get("policy_allow", []):
            network_literal(net, "policy_allow")
        for perm in body.get("drop_permission", []):
            if perm not in ALL_PERMISSIONS:
                raise bad_request("drop_permission", "unknown permission %r" % perm)
        if "fail" in body:
            fail = body["fail"]
            try:
                re.compile(require_type(fail.get("match"), str, "fail.match"))
            except re.error as e:
                raise bad_request("fail.match", str(e)) from None
            require_type(fail.get("status"), int, "fail.status")
            require_type(fail.setdefault("times", 1), int, "fail.times")
        with self.lock:
            if body.pop("expire_token", False):
                for token in self.tokens:
                    self.tokens[token] = 0
            self.misbehaviour.update(body)

    def record_violations(self, request_line, found):
        with self.lock:
            for v in found:
                if len(self.violations) < 1000:
                    self.violations.append(dict(v, request=request_line))

    def take_violations(self):
        with self.lock:
            out, self.violations = self.violations, []
        return out

    def reset(self):
        with self.lock:
            self.misbehaviour.clear()
            self.requests.clear()
            self.account_policy = json.loads(json.dumps(self.start_account_policy))
            self.policy_revision += 1

    def behaviour(self, key, default=None):
        with self.lock:
            return self.misbehaviour.get(key, default)

    def behaviour_all(self):
        with self.lock:
            return json.loads(json.dumps(self.misbehaviour))

    def take_count(self, key):
        """Use up one of a counted misbehaviour; True when one was left."""
        with self.lock:
            if self.misbehaviour.get(key, 0) > 0:
                self.misbehaviour[key] -= 1
                return True
            return False

    def take_failure(self, request_line):
        with self.lock:
            fail = self.misbehaviour.get("fail")
            if not fail or fail["times"] <= 0 or not re.search(fail["match"], request_line):
                return None
            fail["times"] -= 1
            return fail["status"]

    # -- credentials

    def exchange(self, identifier, secret):
        if not (secrets.compare_digest(identifier.encode(), self.account.encode())
                and secrets.compare_digest(secret.encode(), self.secret.encode())):
            return None
        token = "dcfake_at_" + secrets.token_urlsafe(32)
        with self.lock:
            self.tokens[token] = now() + self.token_ttl
        return token

    def check_access(self, header, needed):
        """A management call's bearer must be a live access token whose
        account holds `needed`."""
        token = bearer(header)
        with self.lock:
            expiry = self.tokens.get(token) if token else None
            held = self.permissions - set(self.misbehaviour.get("drop_permission", []))
        if token is None:
            raise api_error("unauthenticated", "a bearer credential is required")
        if expiry is None:
            if token in self.credentials:
                raise api_error("unauthenticated", "sandbox endpoint credentials are not accepted here")
            raise api_error("unauthenticated", "the credential is invalid")
        if expiry <= now():
            raise api_error("unauthenticated", "the credential has expired")
        missing = [p for p in needed if p not in held]
        if missing:
            raise api_error("permissionDenied", "the credential lacks %s" % ", ".join(missing))
        return held

    def audience(self, sbx):
        return "%s/endpoints/%s" % (self.base_url, sbx.uid)

    def issue_credential(self, sbx, permissions, ttl):
        token = "dcfake_ep_" + secrets.token_urlsafe(32)
        expiry = now() + ttl
        with self.lock:
            self.credentials[token] = {"sandbox": sbx.uid, "permissions": list(permissions),
                                       "expiry": expiry}
        return {"token": token, "expireTime": rfc3339(expiry), "permissions": list(permissions),
                "sandbox": sbx.name, "audience": self.audience(sbx)}

    def check_endpoint(self, header, sbx_uid, needed):
        token = bearer(header)
        with self.lock:
            cred = self.credentials.get(token) if token else None
            management = token in self.tokens
        if token is None:
            raise api_error("unauthenticated", "a scoped endpoint credential is required")
        if cred is None:
            if management:
                raise api_error("unauthenticated", "management credentials are not accepted by a sandbox endpoint")
            raise api_error("unauthenticated", "the credential is invalid")
        if cred["expiry"] <= now():
            raise api_error("unauthenticated", "the endpoint credential has expired")
        if cred["sandbox"] != sbx_uid:
            raise not_found("the scoped credential does not address this sandbox endpoint")
        if needed not in cred["permissions"]:
            raise api_error("permissionDenied", "the credential does not grant %s" % needed)

    # -- sandboxes

    def get(self, uid):
        with self.lock:
            return self.sandboxes.get(uid)

    def must_get(self, uid):
        sbx = self.get(uid)
        if sbx is None:
            raise not_found()
        return sbx

    def all(self):
        with self.lock:
            return list(self.sandboxes.values())

    def effective(self, spec):
        """The effective policy of a new sandbox: every layer must allow a
        destination (attached policies cannot grant what the account
        denies).  {mode, allow: [(net, layer)], deny: [(net, layer)]}."""
        with self.lock:
            owner = json.loads(json.dumps(self.account_policy))
            extra = list(self.misbehaviour.get("policy_allow", []))
            opened = self.misbehaviour.get("policy_open", False)
        if opened:
            return {"mode": "allowAll", "allow": [], "deny": []}
        deny = [(n, "owner") for n in owner["denyNetworks"]]
        deny += [(n, "attached") for p in spec.policies for n in p["denyNetworks"]]
        modes = [owner["mode"]] + [p["mode"] for p in spec.policies]
        if "denyAll" not in modes:
            return {"mode": "allowAll", "allow": [], "deny": deny}

        def covered(net, layer_allows):
            a = ipaddress.ip_network(net, strict=False)
            return any(a.version == b.version and a.subnet_of(b)
                       for b in (ipaddress.ip_network(x, strict=False) for x in layer_allows))

        if spec.policies:
            allow = []
            for p in spec.policies:
                for n in p["allowNetworks"]:
                    others_ok = all(covered(n, q["allowNetworks"]) for q in spec.policies)
                    owner_ok = owner["mode"] == "allowAll" or covered(n, owner["allowNetworks"])
                    if others_ok and owner_ok and (n, "attached") not in allow:
                        allow.append((n, "attached"))
        else:
            allow = [(n, "owner") for n in owner["allowNetworks"]] if owner["mode"] == "denyAll" else []
        allow += [(n, "owner") for n in extra]
        return {"mode": "denyAll", "allow": allow, "deny": deny}

    def create(self, spec, planted=False):
        """Admit a sandbox: (status, Sandbox).  Its container is started
        before the answer unless a 202 was asked for (create_polls)."""
        with self.lock:
            if self.stopping.is_set():
                raise api_error("unavailable", "the fake is stopping")
            live = [s for s in self.sandboxes.values() if s.status in ("creating", "running", "starting")]
            if len(live) >= self.max_sandboxes:
                raise api_error("resourceExhausted", "the account's concurrent sandbox quota (%d) is used"
                                % self.max_sandboxes, [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                                                        "violations": [{"subject": "concurrentSandboxes",
                                                                        "description": "quota exceeded"}]}])
            self.busy += 1
        try:
            time.sleep(self.behaviour("create_delay_ms", 0) / 1000)
            sbx = Sandbox(spec, self, self.effective(spec))
            polls = 0 if planted else self.behaviour("create_polls", 0)
            fail = not planted and self.behaviour("fail_start", False)
            with self.lock:
                self.sandboxes[sbx.uid] = sbx
            self.start_sandbox(sbx, fail)
            if polls:
                sbx.pending, sbx.status, sbx.polls_left = sbx.status, "creating", polls
                return 202, sbx
            return 201, sbx
        finally:
            with self.lock:
                self.busy -= 1
                self.idle.notify_all()

    def start_sandbox(self, sbx, fail):
        """Start the container (status running) or fail it (failed)."""
        if fail:
            sbx.status, sbx.failure = "failed", {
                "code": "unavailable", "message": "the sandbox failed to start (injected by the fake)",
                "details": []}
            sbx.bump()
            return
        pol = sbx.policy
        sbx.network_mode = "none" if pol["mode"] == "denyAll" and not pol["allow"] else self.network
        try:
            docker_ok(self.run_argv(sbx))
            self.firewall(sbx)
            docker_ok(["exec", "-u", "0", sbx.container, "sh", "-c", SETUP_SCRIPT])
            sbx.status = "running"
        except HttpError as e:
            docker(["rm", "-f", sbx.container])
            sbx.status, sbx.failure = "failed", e.body
        sbx.bump()

    def run_argv(self, sbx):
        cpus = min(sbx.spec.cpus, self.host_cpus)
        argv = ["run", "-d", "--pull", "never", "--name", sbx.container,
                "--label", "%s=%s" % (LABEL, self.instance), "--label", "dockercloud-sandbox=" + sbx.uid,
                "--cpus", str(cpus),
                "--memory", "%dm" % sbx.spec.memory_mib, "--memory-swap", "%dm" % sbx.spec.memory_mib,
                "--pids-limit", "512", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--network", sbx.network_mode]
        for cap in CAPS:
            argv += ["--cap-add", cap]
        argv += ["--user", "0"]
        if self.main_user != "agent":
            argv += ["--init"]
        for k, v in sbx.spec.environment.items():
            argv += ["-e", "%s=%s" % (k, v)]
        if self.main_user != "root":
            # The main process becomes the user before it does nothing (the
            # container stays root's, so a root exec keeps its capabilities).
            uid, gid, _ = USERS["agent"]
            return argv + ["--entrypoint", "python3", sbx.spec.docker_image, "-c", DROP_SCRIPT,
                           str(uid), str(gid)]
        return argv + ["--entrypoint", "sleep", sbx.spec.docker_image, "infinity"]

    def firewall(self, sbx):
        """Inside the container's netns (its processes lack NET_ADMIN):
        denyAll with allows = loopback and the allowed networks pass and
        every other packet out is rejected; deny rules come first."""
        pol = sbx.policy
        if sbx.network_mode == "none":
            return
        rules = [["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"]]
        rules += [["-A", "OUTPUT", "-d", n, "-j", "REJECT"] for n, _ in pol["deny"]
                  if ipaddress.ip_network(n, strict=False).version == 4]
        if pol["mode"] == "denyAll":
            rules += [["-A", "OUTPUT", "-d", n, "-j", "ACCEPT"] for n, _ in pol["allow"]
                      if ipaddress.ip_network(n, strict=False).version == 4]
            rules += [["-A", "OUTPUT", "-j", "REJECT"]]
        if len(rules) == 1:
            return
        pid = docker_ok(["inspect", "-f", "{{.State.Pid}}", sbx.container]).stdout.decode().strip()
        for r in rules:
            p = subprocess.run(["nsenter", "-t", pid, "-n", "iptables"] + r,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if p.returncode != 0:
                raise api_error("internal", "firewall: %s" % p.stderr.decode(errors="replace"))

    def settle(self, sbx):
        """A read of a sandbox with a 202'd change under way: one poll less;
        the change lands when none are left."""
        with sbx.lock:
            if sbx.pending is None:
                return
            if sbx.polls_left > 0:
                sbx.polls_left -= 1
                return
            final, sbx.pending = sbx.pending, None
            if final == "gone":
                with self.lock:
                    self.sandboxes.pop(sbx.uid, None)
            else:
                sbx.status = final
                sbx.bump()

    def delete(self, sbx):
        """Remove the container now; (204, None), or (202, sandbox) that
        reads as deleting for delete_polls more GETs."""
        polls = self.behaviour("delete_polls", 0)
        with sbx.lock:
            docker(["rm", "-f", sbx.container])
            for proc in list(sbx.processes.values()):
                proc.popen.poll()
            if polls:
                sbx.status, sbx.pending, sbx.polls_left = "deleting", "gone", polls
                sbx.bump()
                return 202, sbx
        with self.lock:
            self.sandboxes.pop(sbx.uid, None)
        return 204, None

    def reap(self):
        """features.timeouts: an expired running sandbox is deleted or stopped."""
        while not self.stopping.wait(REAP_EVERY_S):
            t = now()
            for sbx in self.all():
                if sbx.status != "running" or not sbx.expires_at or sbx.expires_at > t:
                    continue
                if sbx.spec.on_timeout == "stop":
                    docker(["stop", "-t", "1", sbx.container])
                    sbx.status, sbx.expires_at = "stopped", None
                    sbx.bump()
                else:
                    docker(["rm", "-f", sbx.container])
                    with self.lock:
                        self.sandboxes.pop(sbx.uid, None)

    def create_network(self):
        docker_ok(["network", "create", "--driver", "bridge",
                   "--label", "%s=%s" % (LABEL, self.instance), self.network])

    def remove_all(self):
        with self.lock:
            self.idle.wait_for(lambda: self.busy == 0, timeout=120)
        p = docker(["ps", "-aq", "--filter", "label=%s=%s" % (LABEL, self.instance)])
        ids = p.stdout.decode().split()
        if ids:
            docker(["rm", "-f"] + ids)
        docker(["network", "rm", self.network])

    # -- work inside the containers

    @staticmethod
    def user_of(value):
        """ExecRequest.user: "agent" (default), "root", or a numeric uid."""
        if value in (None, ""):
            value = DEFAULT_USER
        require_type(value, str, "user")
        if value in USERS:
            return USERS[value]
        if value.isdigit():
            uid = int(value)
            return (uid, uid, "/root" if uid == 0 else "/")
        raise bad_request("user", "unknown user %r" % value)

    def exec_argv(self, sbx, request, script=None):
        """`docker exec` of an Exec/CreateProcess request."""
        cmd = require_type(request.get("cmd"), list, "cmd")
        if not cmd or not all(isinstance(a, str) for a in cmd) or not cmd[0]:
            raise bad_request("cmd", "must be a non-empty argv of strings")
        env = string_map(request.get("env", {}), "env")
        for k in env:
            if not k or "=" in k:
                raise bad_request("env", "invalid name %r" % k)
        uid, gid, home = self.user_of(request.get("user"))
        cwd = require_type(request.get("workingDir", ""), str, "workingDir") or home
        if not cwd.startswith("/"):
            raise bad_request("workingDir", "must be absolute")
        argv = ["docker", "exec", "-u", "%d:%d" % (uid, gid), "-w", cwd, "-e", "HOME=" + home]
        for k, v in env.items():
            argv += ["-e", "%s=%s" % (k, v)]
        argv.append(sbx.container)
        if script:
            argv += ["sh", "-c", script, "dcfake"]
        return argv + cmd

    def run_exec(self, sbx, request):
        argv = self.exec_argv(sbx, request)
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = {"stdout": bytearray(), "stderr": bytearray()}
        lost = [False]
        lock = threading.Lock()

        def pump(pipe, key):
            while True:
                data = pipe.read1(65536)
                if not data:
                    return
                with lock:
                    room = CAPTURE_LIMIT - len(out["stdout"]) - len(out["stderr"])
                    if len(data) > room:
                        lost[0] = True
                    out[key] += data[:max(room, 0)]

        threads = [threading.Thread(target=pump, args=(p.stdout, "stdout"), daemon=True),
                   threading.Thread(target=pump, args=(p.stderr, "stderr"), daemon=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        code = p.wait()
        return {"exitCode": code, "stdout": base64.b64encode(bytes(out["stdout"])).decode(),
                "stderr": base64.b64encode(bytes(out["stderr"])).decode(), "incomplete": lost[0]}

    def start_process(self, sbx, request):
        label = request.get("label")
        if label is not None and (not isinstance(label, str) or not label):
            raise bad_request("label", "must be a non-empty string")
        session = require_type(request.get("session", ""), str, "session")
        if request.get("pty") is not None:
            raise api_error("unimplemented", "pty is not served by the fake")
        with sbx.lock:
            label = label or "process-%d" % (len(sbx.labels_seen) + 1)
            if label in sbx.labels_seen:
                raise api_error("alreadyExists", "label %r is already used in this sandbox" % label)
            sbx.labels_seen.add(label)
        proc = Proc(sbx, self.exec_argv(sbx, request, START_SCRIPT), label, session)
        if not proc.started.wait(60) or proc.pid is None:
            proc.started.wait(5)
            raise api_error("failedPrecondition", "the process did not start: %s"
                            % proc.failure.decode(errors="replace").strip())
        sbx.processes[proc.uid] = proc
        return proc

    def write_file(self, sbx, path, mode, data):
        uid, gid, _ = USERS[DEFAULT_USER]
        p = docker(["exec", "-i", "-u", "%d:%d" % (uid, gid), sbx.container, "sh", "-c", WRITE_SCRIPT,
                    "sh", path, "%o" % mode], stdin=data)
        self.file_status(p, path)
        size, _, bits = p.stdout.decode().strip().partition(" ")
        return {"path": path, "size": size, "mode": int(bits or "0", 8), "isDir": False, "type": "regular"}

    def read_file(self, sbx, path):
        uid, gid, _ = USERS[DEFAULT_USER]
        p = docker(["exec", "-u", "%d:%d" % (uid, gid), sbx.container, "sh", "-c", READ_SCRIPT, "sh", path])
        self.file_status(p, path)
        return p.stdout

    def mkdir(self, sbx, path, mode, parents):
        uid, gid, _ = USERS[DEFAULT_USER]
        p = docker(["exec", "-u", "%d:%d" % (uid, gid), sbx.container, "sh", "-c", MKDIR_SCRIPT, "sh",
                    path, "%o" % mode, "1" if parents else "0"])
        self.file_status(p, path)

    @staticmethod
    def file_status(p, path):
        if p.returncode == 0:
            return
        if p.returncode == 3:
            raise api_error("failedPrecondition", "path_authority_nonregular_object: %s is not a regular "
                            "file where one is required" % path)
        if p.returncode == 4:
            raise not_found("%s does not exist" % path)
        if p.returncode == 5:
            raise api_error("permissionDenied", "%s: permission denied" % path)
        raise api_error("internal", "file operation failed: %s" % p.stderr.decode(errors="replace").strip())


def bearer(header):
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# -------------------------------------------------------------------- HTTP

def parse_multipart(body, content_type):
    m = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', content_type)
    if not m:
        raise bad_request("body", "multipart boundary missing")
    delimiter = b"--" + (m.group(1) or m.group(2)).encode()
    chunks = body.split(delimiter)
    if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
        raise bad_request("body", "a clean closing multipart delimiter is required")
    parts = []
    for chunk in chunks[1:-1]:
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise bad_request("body", "malformed multipart part")
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        parts.append((headers, data[:-2] if data.endswith(b"\r\n") else data))
    return parts


def part_name(headers):
    m = re.search(r'(?:^|;)\s*name="?([^";]+)"?', headers.get("content-disposition", ""))
    return m.group(1) if m else None


def check_path(path, field="path"):
    if not isinstance(path, str) or not path:
        raise bad_request(field, "is required")
    if not path.startswith("/") or "\0" in path:
        raise bad_request(field, "must be an absolute path")
    return path


def parse_mode(value, default, field="mode"):
    mode = 0 if value in (None, "") else value
    if isinstance(mode, str):
        if not mode.isdigit():
            raise bad_request(field, "must be an integer")
        mode = int(mode)
    require_type(mode, int, field)
    return (mode & 0o777) or default


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-dockercloud"

    def log_message(self, format, *args):
        """Quiet: GET /_fake/state is the request log."""

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    @property
    def fake(self):
        return self.server.fake

    # -- plumbing

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        self.route = url.path
        self.query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        entry, t0 = None, time.monotonic()
        self.entry = None
        self.raw_body, self.body_read, self.answered = b"", False, False
        self.checked = None       # the permissions checked for this request
        try:
            if url.path.startswith("/_fake/"):
                self.check_control()
                return self.serve_control()
            entry = self.entry = self.fake.log_request(self.command, self.path)
            # The preconditions a client sent, for the tests to read back
            # (never a credential).
            for header, key in (("Idempotency-Key", "idempotencyKey"), ("If-Match", "ifMatch")):
                if self.headers.get(header) is not None:
                    entry[key] = self.headers.get(header)
            status = self.fake.take_failure("%s %s" % (self.command, self.path))
            if status is not None:
                self.drain_body()
                code = {401: "unauthenticated", 403: "permissionDenied", 404: "notFound",
                        429: "resourceExhausted", 501: "unimplemented", 503: "unavailable",
                        504: "deadlineExceeded"}.get(status, "internal" if status >= 500 else "invalidArgument")
                raise api_error(code, "failure injected by the fake", status=status)
            if url.path == "/v2/auth/token":
                return self.serve_token()
            m = re.match(r"^/endpoints/([a-z0-9]+)(/.*)$", url.path)
            if m:
                return self.serve_endpoint(m.group(1), m.group(2))
            return self.serve_api()
        except HttpError as e:
            self.send_json(e.status, e.body, e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            if entry is not None:
                entry["ms"] = round((time.monotonic() - t0) * 1000, 3)

    def read_body(self):
        self.body_read = True
        self.raw_body = self._read_body()
        return self.raw_body

    def _read_body(self):
        length = self.headers.get("Content-Length", "0").strip() or "0"
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self.read_chunked()
        if not length.isdigit():
            self.close_connection = True
            raise bad_request("Content-Length", "bad value")
        if int(length) > MAX_BODY:
            self.close_connection = True
            raise api_error("resourceExhausted", "request body over %d bytes" % MAX_BODY, status=413)
        return self.rfile.read(int(length))

    def read_chunked(self):
        body = bytearray()
        while True:
            try:
                size = int(self.rfile.readline(1024).split(b";")[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise bad_request("body", "bad chunked body") from None
            if len(body) + size > MAX_BODY:
                self.close_connection = True
                raise api_error("resourceExhausted", "request body over %d bytes" % MAX_BODY, status=413)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline(1024)

    def drain_body(self):
        try:
            self.read_body()
        except HttpError:
            self.close_connection = True

    def read_json(self, required=True):
        body = self.read_body()
        if not body and not required:
            return {}
        try:
            return json.loads(body or b"null")
        except ValueError as e:
            raise bad_request("body", "not JSON: %s" % e) from None

    def check_contract(self, status, data, content_type):
        """The request and this answer against the API's OpenAPI file (not
        the token exchange, which is Docker's other service, nor the test
        controls)."""
        if self.entry is None or self.answered or self.route.startswith("/v2/"):
            return
        self.answered = True
        if not self.body_read:
            self.drain_body()
        path = re.sub(r"^/endpoints/[^/]+(?=/)", "", self.route)
        found = self.fake.contract.check(self.command, path, self.query, self.headers, self.raw_body,
                                         self.headers.get("Content-Type"), status,
                                         data if status not in (204, 304) else b"",
                                         content_type if status not in (204, 304) else None,
                                         self.checked)
        if found:
            self.fake.record_violations("%s %s" % (self.command, self.path), found)

    def send_bytes(self, status, data, content_type, headers=None):
        self.check_contract(status, data, content_type)
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status not in (204, 304):
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if status not in (204, 304):
            self.wfile.write(data)

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, json.dumps(obj).encode(), "application/json", headers)

    def query_one(self, name):
        values = self.query.get(name)
        return values[0] if values else None

    def check_control(self):
        key = self.headers.get("X-Fake-Control", "")
        if not secrets.compare_digest(key.encode(), self.fake.secret.encode()):
            self.drain_body()
            raise api_error("unauthenticated", "X-Fake-Control must carry the account secret")

    # -- Docker's token endpoint

    def serve_token(self):
        if self.command != "POST":
            self.drain_body()
            raise not_found("no route %s %s" % (self.command, self.route))
        body = self.read_json()
        if not isinstance(body, dict) or not isinstance(body.get("identifier"), str) \
                or not isinstance(body.get("secret"), str):
            raise HttpError(400, {"message": "identifier and secret are required"})
        token = self.fake.exchange(body["identifier"], body["secret"])
        if token is None:
            raise HttpError(401, {"message": "incorrect username or password"})
        self.send_json(200, {"access_token": token})

    # -- management

    def serve_api(self):
        route, method = self.route, self.command
        m = re.match(r"^/v1/sandboxes/([^/]+)(/endpoint-credentials|/network-policies)?$", route)
        if route == "/v1/sandboxes" and method == "GET":
            return self.api_list()
        if route == "/v1/sandboxes" and method == "POST":
            return self.api_create()
        if route == "/v1/network-policies" and method == "GET":
            return self.api_account_policy()
        if m:
            uid = urllib.parse.unquote(m.group(1))
            handlers = {("GET", None): self.api_get, ("DELETE", None): self.api_delete,
                        ("POST", "/endpoint-credentials"): self.api_credential,
                        ("GET", "/network-policies"): self.api_policy}
            if (method, m.group(2)) in handlers:
                return handlers[(method, m.group(2))](uid)
        self.drain_body()
        self.fake.check_access(self.headers.get("Authorization"), ())
        raise not_found("no route %s %s" % (method, route))

    def access(self, *needed):
        self.checked = needed
        try:
            return self.fake.check_access(self.headers.get("Authorization"), needed)
        except HttpError:
            self.drain_body()
            raise

    def idempotent(self, operation, body, run):
        """Idempotency-Key: the same key and payload answer the first result;
        another payload under the key is 409 failedPrecondition."""
        key = self.headers.get("Idempotency-Key")
        if key is None:
            return run()
        fingerprint = hashlib.sha256(json.dumps([self.route, body], sort_keys=True).encode()).hexdigest()
        slot = (operation, self.route, key)
        with self.fake.lock:
            seen = self.fake.idempotency.get(slot)
        if seen is not None:
            if seen[0] != fingerprint:
                raise api_error("failedPrecondition", "The Idempotency-Key was already used with a different payload.")
            return seen[1:]
        answer = run()
        with self.fake.lock:
            self.fake.idempotency.setdefault(slot, (fingerprint,) + answer)
            return self.fake.idempotency[slot][1:]

    def api_create(self):
        self.access("sandboxesCreate")
        body = self.read_json()

        def run():
            spec = CreateSpec(body, self.fake)
            status, sbx = self.fake.create(spec)
            return status, sbx.json(self.fake), {"ETag": sbx.etag}

        status, answer, headers = self.idempotent("createSandbox", body, run)
        self.send_json(status, answer, headers)

    def api_get(self, uid):
        self.access("sandboxesRead")
        self.drain_body()
        sbx = self.fake.must_get(uid)
        self.fake.settle(sbx)
        if self.fake.get(uid) is None:
            raise not_found()
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            tags = [t.strip() for t in inm.split(",")]
            if "*" in tags or sbx.etag in tags or "W/" + sbx.etag in tags:
                return self.send_bytes(304, b"", "", {"ETag": sbx.etag})
        self.send_json(200, sbx.json(self.fake), {"ETag": sbx.etag})

    def check_if_match(self, sbx):
        """Every change of an existing resource needs its current etag."""
        tag = self.headers.get("If-Match")
        if tag is None:
            raise api_error("failedPrecondition", "etag_required: No precondition was sent.", status=428)
        if self.fake.take_count("stale_etag"):
            sbx.bump()                # as if someone changed it meanwhile
        if tag.strip() != sbx.etag:
            raise api_error("failedPrecondition", "etag_mismatch: The precondition is not the resource's "
                            "current etag.", [{"@type": "type.googleapis.com/docker.sandboxes.v1.EtagMismatch",
                                               "currentEtag": sbx.etag}], status=412)

    def api_delete(self, uid):
        self.access("sandboxesDelete")
        self.drain_body()
        force = self.query_one("force")
        if force not in (None, "true", "false"):
            raise bad_request("force", "must be true or false")

        def run():
            sbx = self.fake.get(uid)
            if self.headers.get("If-Match") is None:
                raise api_error("failedPrecondition", "etag_required: No precondition was sent.", status=428)
            if sbx is None:
                return 204, None, {}
            self.check_if_match(sbx)
            if sbx.status == "deleting":
                return 202, sbx.json(self.fake), {"ETag": sbx.etag}
            status, sbx = self.fake.delete(sbx)
            if status == 202:
                return 202, sbx.json(self.fake), {"ETag": sbx.etag}
            return 204, None, {}

        status, answer, headers = self.idempotent("deleteSandbox", {"ifMatch": self.headers.get("If-Match")}, run)
        if status == 204:
            return self.send_bytes(204, b"", "", headers)
        self.send_json(status, answer, headers)

    def api_credential(self, uid):
        held = self.access("sandboxesCredential")
        body = require_keys(self.read_json(), ("permissions", "ttl"), "")
        perms = require_type(body.get("permissions"), list, "permissions")
        if not perms or len(set(map(str, perms))) != len(perms):
            raise bad_request("permissions", "at least one, each once")
        for p in perms:
            if p not in ENDPOINT_PERMISSIONS:
                raise bad_request("permissions", "%r is not an endpoint permission" % (p,))
        missing = [p for p in perms if p not in held]
        if missing:
            raise api_error("permissionDenied", "the caller does not hold %s" % ", ".join(missing))
        ttl = CRED_TTL_MAX
        if "ttl" in body:
            ttl = min(max(duration(body["ttl"], "ttl"), CRED_TTL_MIN), CRED_TTL_MAX)
        sbx = self.fake.must_get(uid)
        if sbx.status != "running":
            raise api_error("failedPrecondition", "the sandbox is %s, not running" % sbx.status)
        self.send_json(200, self.fake.issue_credential(sbx, perms, ttl), {"Cache-Control": "no-store"})

    def policy_json(self, mode, allow, deny, source):
        """GetNetworkPoliciesResponse: effective rules with their layers, and
        the exact view of the same generation as one node graph."""
        nodes = []

        def leaf(net, layer):
            kind, value = network_literal(net, "network")
            origin = {"owner": "owner", "attached": "attached"}.get(layer, "default")
            nodes.append({"source": {"origin": origin, "id": "%s-%s" % (origin, source)},
                          "destination": {"kind": kind, "value": value}})
            return len(nodes) - 1

        def any_of(idx):
            if len(idx) == 1:
                return idx[0]
            nodes.append({"any": {"nodes": idx}})
            return len(nodes) - 1

        deny_idx = [leaf(n, layer) for n, layer in deny]
        if mode == "denyAll":
            allow_idx = [leaf(n, layer) for n, layer in allow]
            if allow_idx:
                root = any_of(allow_idx)
            else:
                nodes.append({"source": {"origin": "default", "id": "default-" + source}, "constant": "false"})
                root = len(nodes) - 1
        else:
            nodes.append({"source": {"origin": "default", "id": "default-" + source}, "constant": "true"})
            root = len(nodes) - 1
        if deny_idx:
            nodes.append({"not": any_of(deny_idx)})
            nodes.append({"all": {"nodes": [root, len(nodes) - 1]}})
        return {"effective": {"mode": mode,
                              "allowNetworks": [{"network": n, "layer": layer} for n, layer in allow],
                              "denyNetworks": [{"network": n, "layer": layer} for n, layer in deny]},
                "exact": {"revision": "%s-%d" % (source, self.fake.policy_revision),
                          "selectorVersion": "destination.v1", "nodes": nodes}}

    def api_policy(self, uid):
        self.access("networkPoliciesRead")
        self.drain_body()
        sbx = self.fake.must_get(uid)
        pol = sbx.policy
        self.send_json(200, self.policy_json(pol["mode"], pol["allow"], pol["deny"], sbx.uid[:8]))

    def api_account_policy(self):
        self.access("networkPoliciesRead")
        self.drain_body()
        with self.fake.lock:
            pol = json.loads(json.dumps(self.fake.account_policy))
        self.send_json(200, self.policy_json(pol["mode"], [(n, "owner") for n in pol["allowNetworks"]],
                                             [(n, "owner") for n in pol["denyNetworks"]], "account"))

    LIST_FIELDS = {"name": lambda s: s.name, "display_name": lambda s: s.spec.display_name,
                   "uid": lambda s: s.uid, "status": lambda s: s.status, "agent": lambda s: ""}

    def api_list(self):
        """listSandboxes: filter (comma-separated field=value, exact),
        orderBy (created_at or name, optional " desc"), pageSize/pageToken."""
        self.access("sandboxesRead")
        self.drain_body()
        size = self.query_one("pageSize") or "0"
        if not size.isdigit() or int(size) > PAGE_MAX:
            raise bad_request("pageSize", "must be 0 to %d" % PAGE_MAX)
        size = int(size) or PAGE_DEFAULT
        terms = []
        filt = self.query_one("filter") or ""
        for term in filter(None, (t.strip() for t in filt.split(","))):
            field, eq, value = term.partition("=")
            if not eq or field.strip() not in self.LIST_FIELDS:
                raise bad_request("filter", "unsupported term %r" % term)
            terms.append((field.strip(), value.strip().strip('"')))
        order = (self.query_one("orderBy") or "created_at").split()
        if not order or order[0] not in ("created_at", "name") or len(order) > 2 \
                or (len(order) == 2 and order[1] not in ("asc", "desc")):
            raise bad_request("orderBy", "created_at or name, optionally asc or desc")
        context = hashlib.sha256(json.dumps([filt, order, size]).encode()).hexdigest()[:16]
        offset = 0
        token = self.query_one("pageToken")
        if token:
            try:
                ctx, off = base64.urlsafe_b64decode(token.encode()).decode().split(":")
                offset = int(off)
            except (ValueError, UnicodeDecodeError):
                raise bad_request("pageToken", "invalid") from None
            if ctx != context:
                raise bad_request("pageToken", "does not belong to this filter, ordering and page size")
        for sbx in self.fake.all():
            if sbx.pending is not None:
                self.fake.settle(sbx)
        rows = [s for s in self.fake.all() if all(self.LIST_FIELDS[f](s) == v for f, v in terms)]
        key = (lambda s: (s.created_at, s.uid)) if order[0] == "created_at" else (lambda s: s.name)
        rows.sort(key=key, reverse=len(order) == 2 and order[1] == "desc")
        page = rows[offset:offset + size]
        next_token = ""
        if offset + size < len(rows):
            next_token = base64.urlsafe_b64encode(("%s:%d" % (context, offset + size)).encode()).decode()
        self.send_json(200, {"sandboxes": [s.json(self.fake) for s in page], "nextPageToken": next_token})

    # -- the sandbox endpoint

    def serve_endpoint(self, uid, route):
        method = self.command
        sbx = self.fake.get(uid)
        routes = {("POST", "/v1/processes/exec"): ("sandboxesExec", self.ep_exec),
                  ("POST", "/v1/processes"): ("sandboxesExec", self.ep_create_process),
                  ("GET", "/v1/processes"): ("sandboxesExec", self.ep_list_processes),
                  ("POST", "/v1/files/upload"): ("sandboxesFilesWrite", self.ep_upload),
                  ("PUT", "/v1/files/directories"): ("sandboxesFilesWrite", self.ep_mkdir),
                  ("PUT", "/v1/files/content"): ("sandboxesFilesWrite", self.ep_write),
                  ("GET", "/v1/files/content"): ("sandboxesFilesRead", self.ep_read)}
        m = re.match(r"^/v1/processes/([a-z0-9]+)(/output|/signal)?$", route)
        handler = routes.get((method, route))
        arg = None
        if handler is None and m and (method, m.group(2)) in (("GET", None), ("GET", "/output"),
                                                               ("POST", "/signal")):
            handler = ("sandboxesExec", {None: self.ep_get_process, "/output": self.ep_output,
                                         "/signal": self.ep_signal}[m.group(2)])
            arg = m.group(1)
        if handler is not None:
            self.checked = (handler[0],)
        try:
            if sbx is None:
                raise not_found("no sandbox endpoint %s" % uid)
            self.fake.check_endpoint(self.headers.get("Authorization"), uid,
                                     handler[0] if handler else "sandboxesExec")
            if handler is None:
                raise not_found("no route %s %s" % (method, route))
            if sbx.status != "running":
                raise api_error("unavailable", "the sandbox is %s" % sbx.status)
        except HttpError:
            self.drain_body()
            raise
        if arg is None:
            return handler[1](sbx)
        proc = sbx.processes.get(arg)
        if proc is None:
            self.drain_body()
            raise not_found()
        return handler[1](sbx, proc)

    def log_user(self, request):
        """The user a process was asked to run as (None: the default),
        for the tests to read back."""
        if self.entry is not None and isinstance(request, dict):
            self.entry["user"] = request.get("user")

    def ep_exec(self, sbx):
        request = require_keys(self.read_json(), ("cmd", "env", "workingDir", "user"), "")
        self.log_user(request)
        self.send_json(200, self.fake.run_exec(sbx, request))

    def ep_create_process(self, sbx):
        request = require_keys(self.read_json(), ("cmd", "env", "workingDir", "user", "pty", "session", "label"), "")
        self.log_user(request)
        proc = self.fake.start_process(sbx, request)
        out = proc.json()
        out["receiptKind"] = "fresh"
        self.send_json(201, out)

    def ep_list_processes(self, sbx):
        self.drain_body()
        procs = sorted(sbx.processes.values(), key=lambda p: p.created)
        self.send_json(200, {"processes": [p.json() for p in procs], "nextPageToken": ""})

    def ep_get_process(self, sbx, proc):
        self.drain_body()
        self.send_json(200, proc.json())

    def ep_output(self, sbx, proc):
        """readOutput: chunks after resumeFrom, whole chunks up to maxBytes
        (the first always fits); exited once nothing follows."""
        self.drain_body()
        resume = self.query_one("resumeFrom") or "0"
        limit = self.query_one("maxBytes") or "0"
        if not resume.isdigit() or not limit.isdigit():
            raise bad_request("resumeFrom", "resumeFrom and maxBytes are non-negative integers")
        resume, limit = int(resume), int(limit) or (1 << 20)
        with proc.cond:
            if proc.chunks and resume < proc.chunks[0][0] - 1:
                raise api_error("failedPrecondition", "output after %d is no longer retained" % resume)
            chunks, total = [], 0
            for seq, stream, data in proc.chunks:
                if seq <= resume:
                    continue
                if chunks and total + len(data) > limit:
                    break
                chunks.append({"stream": stream, "data": base64.b64encode(data).decode(),
                               "streamSequence": str(seq)})
                total += len(data)
            nxt = int(chunks[-1]["streamSequence"]) if chunks else resume
            out = {"chunks": chunks, "nextResumeFrom": str(nxt)}
            if proc.exit_code is not None and nxt >= proc.seq:
                out["exited"] = {"exitCode": proc.exit_code, "reason": proc.reason}
        self.send_json(200, out)

    def ep_signal(self, sbx, proc):
        body = require_keys(self.read_json(), ("signal",), "")
        name = SIGNALS.get(body.get("signal"))
        if name is None:
            raise bad_request("signal", "must be one of %s" % ", ".join(SIGNALS))
        if not proc.signal(name):
            raise api_error("internal", "the signal could not be sent")
        self.send_json(200, {})

    def ep_upload(self, sbx):
        ctype = self.headers.get("Content-Type", "")
        if not ctype.lower().startswith("multipart/form-data"):
            self.drain_body()
            raise bad_request("Content-Type", "must be multipart/form-data")
        parts = parse_multipart(self.read_body(), ctype)
        if len(parts) % 2:
            raise bad_request("body", "metadata and content parts come in pairs")
        items = []
        for i in range(0, len(parts), 2):
            (mh, meta), (ch, data) = parts[i], parts[i + 1]
            if "content-transfer-encoding" in mh or "content-transfer-encoding" in ch:
                raise bad_request("body", "Content-Transfer-Encoding is refused")
            if part_name(mh) != "metadata" or part_name(ch) != "content":
                raise bad_request("body[%d]" % (i // 2), "expected a metadata part then a content part")
            try:
                header = json.loads(meta)
            except ValueError:
                raise bad_request("body[%d].metadata" % (i // 2), "not JSON") from None
            require_keys(header, ("path", "mode"), "metadata")
            path = check_path(header.get("path"), "body[%d].metadata.path" % (i // 2))
            items.append((path, parse_mode(header.get("mode"), 0o644), data))
        written = 0
        for path, mode, data in items:
            self.fake.write_file(sbx, path, mode, data)
            written += 1
        self.send_json(200, {"filesWritten": written})

    def ep_mkdir(self, sbx):
        body = require_keys(self.read_json(), ("path", "mode", "parents"), "")
        path = check_path(body.get("path"))
        parents = require_type(body.get("parents", False), bool, "parents")
        self.fake.mkdir(sbx, path, parse_mode(body.get("mode"), 0o755), parents)
        self.send_json(200, {})

    def ep_write(self, sbx):
        path = check_path(self.query_one("path"))
        mode = parse_mode(self.query_one("mode"), 0o644)
        info = self.fake.write_file(sbx, path, mode, self.read_body())
        self.send_json(200, {"info": info})

    def ep_read(self, sbx):
        self.drain_body()
        path = check_path(self.query_one("path"))
        self.send_bytes(200, self.fake.read_file(sbx, path), "application/octet-stream")

    # -- test control

    def serve_control(self):
        route, method = self.route, self.command
        if route == "/_fake/misbehave" and method == "POST":
            self.fake.misbehave(self.read_json())
            return self.send_json(200, self.fake.behaviour_all())
        if route == "/_fake/reset" and method == "POST":
            self.drain_body()
            self.fake.reset()
            return self.send_json(200, {})
        if route == "/_fake/account-policy" and method == "PUT":
            pol = parse_policy(self.read_json(), "policy", ("denyAll", "allowAll"))
            with self.fake.lock:
                self.fake.account_policy = pol
                self.fake.policy_revision += 1
            return self.send_json(200, pol)
        if route == "/_fake/plant" and method == "POST":
            body = self.read_json(required=False) or {}
            require_type(body, dict, "body")
            if "image" not in body:
                body.setdefault("imageRef", self.fake.default_image)
            body.setdefault("networkPolicies", [{"mode": "denyAll"}])
            status, sbx = self.fake.create(CreateSpec(body, self.fake), planted=True)
            return self.send_json(201, {"name": sbx.name, "uid": sbx.uid, "displayName": sbx.spec.display_name})
        if route == "/_fake/take-violations" and method == "POST":
            self.drain_body()
            return self.send_json(200, {"violations": self.fake.take_violations()})
        if route == "/_fake/state" and method == "GET":
            with self.fake.lock:
                requests = list(self.fake.requests)
                account = json.loads(json.dumps(self.fake.account_policy))
            return self.send_json(200, {"instance": self.fake.instance, "network": self.fake.network,
                                        "sandboxes": [s.state_json() for s in self.fake.all()],
                                        "accountPolicy": account,
                                        "misbehaviour": self.fake.behaviour_all(),
                                        "violations": list(self.fake.violations),
                                        "requests": requests})
        self.drain_body()
        raise not_found("no route %s %s" % (method, route))


# -------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description="A fake of the hosted Docker Sandboxes service for tests.")
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any)")
    p.add_argument("--account", required=True, help="the Docker ID the token exchange accepts")
    p.add_argument("--secret", required=True, help="the access token (PAT) the exchange accepts")
    p.add_argument("--default-image", default=DEFAULT_IMAGE, help="plant's image")
    p.add_argument("--image", action="append", default=[], help="NAME=IMAGE: images/NAME (repeatable)")
    p.add_argument("--token-ttl", type=float, default=600, help="access token lifetime (s)")
    p.add_argument("--permissions", default="", help="the account's permissions, comma-separated")
    p.add_argument("--max-sandboxes", type=int, default=10, help="concurrent sandbox quota")
    p.add_argument("--account-allow", action="append", default=[],
                   help="an IP/CIDR the account's deny-all policy allows (repeatable)")
    p.add_argument("--main-user", default="root", choices=("root", "agent", "init-agent"),
                   help="the user the sandbox's main process (PID 1) runs as")
    args = p.parse_args(argv)
    if any("=" not in i or i.startswith("=") or i.endswith("=") for i in args.image):
        p.error("--image is NAME=IMAGE")
    for perm in filter(None, args.permissions.split(",")):
        if perm not in ALL_PERMISSIONS:
            p.error("unknown permission %r" % perm)
    for net in args.account_allow:
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            p.error("--account-allow %r is not an IP or CIDR" % net)
    return args


def main(argv):
    args = parse_args(argv)
    try:
        fake = Fake(args)
    except ContractMissing as e:
        print("fake_dockercloud: %s" % e, file=sys.stderr)
        return 1
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)
    server.daemon_threads = True
    server.fake = fake
    bound_host, bound_port = server.server_address[:2]
    fake.base_url = "http://%s:%d" % (bound_host, bound_port)
    try:
        fake.create_network()
    except HttpError as e:
        print("fake_dockercloud: %s" % e.body["message"], file=sys.stderr)
        server.server_close()
        return 1

    def stop(signum, frame):
        fake.stopping.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=fake.reap, daemon=True).start()
    print(json.dumps({"listening": "%s:%d" % (bound_host, bound_port), "instance": fake.instance}),
          flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        fake.stopping.set()
        server.server_close()
        fake.remove_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
