# SPDX-License-Identifier: Apache-2.0
"""A test fake of the hosted E2B sandbox service, with real "VMs".

    python3 fake_e2b.py --listen 127.0.0.1:0 --api-key KEY \\
        --template NAME=IMAGE [--template ...] --cpu 2 --memory-mb 512 \\
        [--domain localhost]

It prints one line, {"listening": "HOST:PORT", "instance": "<id>"}, then
serves until SIGTERM or SIGINT, when it force-removes every container it
created and exits 0.

One port serves everything, routed by the Host header as E2B's edge proxy
routes: "49983-<sandboxID>.<domain>[:port]" reaches that sandbox's agent
(envd), anything else the control plane.  Each sandbox is a locked-down
docker container of its template's image (label plimsoll-fake-e2b=<instance>)
whose PID 1 does nothing; files and processes really live in it.

Control plane (header X-API-Key): POST /sandboxes, GET /sandboxes,
GET /v2/sandboxes, GET and DELETE /sandboxes/{id}, GET
/sandboxes/{id}/metrics (each running sandbox sampled every
--metrics-interval seconds from its container's cgroup on the host), POST
/sandboxes/{id}/timeout, /pause and /connect.  envd: GET /health, GET
/metrics, GET and POST /files, POST /process.Process/Start (Connect server
streaming) and /process.Process/SendSignal (Connect unary).  Test control
(same key): POST /_fake/misbehave, /_fake/reset, /_fake/plant, /_fake/expect and GET
/_fake/state.  docs/providers/e2b-fake.md says which E2B document each
route follows and where the fake simplifies.

Every request it is sent and every answer it gives is checked against
E2B's published contracts, read at start from ../shared/upstream/e2b of the
worktree (--upstream; contract.py): a violation is recorded with the
operation, the field and the upstream file, and listed by GET /_fake/state
("violations"); the fake does not start without the contracts.

The standard library, Debian's python3-jsonschema and python3-yaml (for
contract.py), and the docker CLI; every docker call is an argv list, and
values reach `sh -c` scripts only as positional arguments.
"""
import argparse
import base64
import ipaddress
import json
import math
import os
import queue
import re
import secrets
import signal
import string
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import contract

MAX_BODY = 64 << 20          # larger request bodies are refused 413
ENVD_PORT = 49983
ENVD_VERSION = "0.4.0"
CLIENT_ID = "6532622b"       # E2B answers a fixed clientID (deprecated field)
DEFAULT_TIMEOUT_S = 15       # NewSandbox.timeout default (openapi.yml)
MAX_TIMEOUT_S = 24 * 3600    # the Pro team limit (MaxLengthHours 24)
DISK_SIZE_MB = 1024          # reported, not enforced
KEEPALIVE_S = 5              # without a Keepalive-Ping-Interval header
REAP_EVERY_S = 0.25
LABEL = "plimsoll-fake-e2b"
CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL")
# envd's users: name -> (uid, gid, home).  "user" is the default, as the
# orchestrator hands envd the template's default user at /init.
USERS = {"user": (1000, 1000, "/home/user"), "root": (0, 0, "/root")}
DEFAULT_USER = "user"
ID_ALPHABET = string.ascii_lowercase + string.digits
ENVD_HOST = re.compile(r"^(\d+)-([a-z0-9]+)\.(.+)$")
PID_MARKER = b"E2BFAKE_PID "
# Go's names of the signals (ProcessState.String() says "signal: <name>").
SIGNAL_NAMES = {1: "hangup", 2: "interrupt", 3: "quit", 4: "illegal instruction",
                5: "trace/breakpoint trap", 6: "aborted", 7: "bus error",
                8: "floating point exception", 9: "killed", 10: "user defined signal 1",
                11: "segmentation fault", 12: "user defined signal 2", 13: "broken pipe",
                14: "alarm clock", 15: "terminated"}
SIGNALS = {"SIGNAL_SIGKILL": "KILL", "SIGNAL_SIGTERM": "TERM", 9: "KILL", 15: "TERM"}
# Connect error codes -> HTTP statuses (the Connect protocol's table).
CONNECT_STATUS = {"invalid_argument": 400, "unauthenticated": 401, "not_found": 404,
                  "unimplemented": 501, "internal": 500}

# Run as the process's first command inside the container: refuse a command
# that is not there (as envd's Start does), report the pid, make it the
# leader of its own process group (exec'd processes may already be one, and
# setsid would then fork), then become the caller's command.
START_SCRIPT = """if ! command -v "$1" >/dev/null 2>&1; then
  printf 'exec: "%s": executable file not found in $PATH\\n' "$1" >&2; exit 127
fi
read -r _ _ _ _ pgrp _ < /proc/$$/stat
printf 'E2BFAKE_PID %s\\n' "$$" >&2
if [ "$pgrp" = "$$" ]; then exec "$@"; fi
exec setsid "$@"
"""
# $1 path, $2 uid:gid.  Parents are created and handed to the user (envd's
# EnsureDirs); a directory at the path is refused (exit 3).
WRITE_SCRIPT = """set -e
dir=$(dirname -- "$1")
new=""
d=$dir
while [ ! -d "$d" ]; do new="$d
$new"; d=$(dirname -- "$d"); done
mkdir -p -- "$dir"
printf '%s' "$new" | while IFS= read -r m; do [ -z "$m" ] || chown "$2" "$m"; done
if [ -d "$1" ]; then exit 3; fi
cat > "$1"
chown "$2" "$1"
"""
# $1 path: exit 3 for a directory, 4 when missing, else the bytes.
READ_SCRIPT = """if [ -d "$1" ]; then exit 3; fi
[ -e "$1" ] || exit 4
exec cat -- "$1"
"""
# The container's own limits, as its cgroup (v2, else v1) states them.
METRICS_SCRIPT = """c2=/sys/fs/cgroup; c1m=/sys/fs/cgroup/memory; c1c=/sys/fs/cgroup/cpu
echo "cpu_max $(cat $c2/cpu.max 2>/dev/null || echo "$(cat $c1c/cpu.cfs_quota_us) $(cat $c1c/cpu.cfs_period_us)")"
echo "mem_max $(cat $c2/memory.max 2>/dev/null || cat $c1m/memory.limit_in_bytes)"
echo "mem_cur $(cat $c2/memory.current 2>/dev/null || cat $c1m/memory.usage_in_bytes)"
echo "nproc $(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "meminfo $(sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/\\1/p' /proc/meminfo)"
echo "disk $(df -Pk / | tail -n 1)"
"""
KILL_SCRIPT = 'kill -s "$1" -- "-$2"'
# E2B's contracts: ../shared/upstream/e2b beside the repository.
UPSTREAM = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                         "..", "..", "shared", "upstream", "e2b"))
# The Connect protocol's error codes (connectrpc.com/docs/protocol).
CONNECT_CODES = {"canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
                 "already_exists", "permission_denied", "resource_exhausted",
                 "failed_precondition", "aborted", "out_of_range", "unimplemented", "internal",
                 "unavailable", "data_loss", "unauthenticated"}
HOME_SCRIPT = 'mkdir -p /home/user && chown 1000:1000 /home/user'


class HttpError(Exception):
    """An answer other than success: status and JSON body."""

    def __init__(self, status, body, proxy=False):
        super().__init__(status)
        self.status, self.body = status, body
        self.proxy = proxy   # the edge proxy's answer, not the API's or envd's


def api_error(status, message):
    """The control plane's and envd's error: {"code": int, "message"}."""
    return HttpError(status, {"code": status, "message": message})


def proxy_error(status, sandbox_id, message):
    """The edge proxy's JSON error for non-browser clients."""
    return HttpError(status, {"sandboxId": sandbox_id, "message": message, "code": status},
                     proxy=True)


class ConnectError(Exception):
    """A Connect RPC error: code (e.g. "not_found") and message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message

    def body(self):
        return {"code": self.code, "message": self.message}


def now_us():
    return time.time_ns() // 1000


def rfc3339(us):
    """Microseconds since the epoch as RFC 3339 UTC."""
    return datetime.fromtimestamp(us / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text):
    """The inverse of rfc3339 (ValueError when malformed)."""
    dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def new_sandbox_id():
    return "i" + "".join(secrets.choice(ID_ALPHABET) for _ in range(19))


def docker(args, stdin=None, timeout=120):
    """Run the docker CLI with argv `args`; the CompletedProcess."""
    return subprocess.run(["docker"] + args, input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def docker_ok(args, stdin=None, timeout=120):
    """docker_ok runs docker and raises a 500 error when it fails."""
    p = docker(args, stdin=stdin, timeout=timeout)
    if p.returncode != 0:
        raise api_error(500, "docker %s failed: %s" % (args[0], p.stderr.decode(errors="replace").strip()))
    return p


# ---------------------------------------------------------------- requests

def require_type(value, kind, what):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise api_error(400, "Error when parsing request: %s has the wrong type" % what)
    return value


def string_map(value, what):
    """A JSON object of strings (SandboxMetadata, EnvVars)."""
    require_type(value, dict, what)
    for k, v in value.items():
        require_type(v, str, "%s.%s" % (what, k))
    return dict(value)


def is_ip_or_cidr(text):
    try:
        ipaddress.ip_network(text, strict=False)
        return True
    except ValueError:
        return False


class CreateSpec:
    """A validated NewSandbox (openapi.yml) with infra's create rules."""

    def __init__(self, body, templates):
        require_type(body, dict, "body")
        self.template_id = body.get("templateID")
        if not isinstance(self.template_id, str) or not self.template_id:
            raise api_error(400, "Error when parsing request: templateID is required")
        if self.template_id not in templates:
            raise api_error(404, "template '%s' not found" % self.template_id)
        self.image = templates[self.template_id]
        self.timeout = parse_timeout(body.get("timeout", DEFAULT_TIMEOUT_S))
        self.auto_pause = require_type(body.get("autoPause", False), bool, "autoPause")
        self.secure = require_type(body.get("secure", False), bool, "secure")
        self.allow_internet = body.get("allow_internet_access")
        if self.allow_internet is not None:
            require_type(self.allow_internet, bool, "allow_internet_access")
        self.metadata = string_map(body["metadata"], "metadata") if "metadata" in body else None
        self.env_vars = string_map(body.get("envVars", {}), "envVars")
        for k in self.env_vars:
            if not k or "=" in k:
                raise api_error(400, "Error when parsing request: invalid envVars name %r" % k)
        self.network = parse_network(body.get("network"), self.secure)

    @property
    def allow_public(self):
        return (self.network or {}).get("allowPublicTraffic", True)

    @property
    def egress_denied(self):
        """allow_internet_access false is denyOut ["0.0.0.0/0"]."""
        return self.allow_internet is False or "0.0.0.0/0" in (self.network or {}).get("denyOut", [])


def parse_timeout(value):
    """A TTL in seconds: more than 0, at most the team's limit."""
    require_type(value, int, "timeout")
    if value <= 0:
        raise api_error(400, "Timeout must be greater than 0")
    if value > MAX_TIMEOUT_S:
        raise api_error(400, "Timeout cannot be greater than %d hours" % (MAX_TIMEOUT_S // 3600))
    return value


def parse_network(value, secure):
    """SandboxNetworkConfig, checked as infra's validateNetworkConfig."""
    if value is None:
        return None
    require_type(value, dict, "network")
    out = {}
    if "allowPublicTraffic" in value:
        out["allowPublicTraffic"] = require_type(value["allowPublicTraffic"], bool,
                                                 "network.allowPublicTraffic")
    for key in ("allowOut", "denyOut"):
        if key in value:
            out[key] = [require_type(v, str, "network." + key) for v in require_type(value[key], list, "network." + key)]
    for cidr in out.get("denyOut", []):
        if not is_ip_or_cidr(cidr):
            raise api_error(400, "invalid denied CIDR %s" % cidr)
    domains = [a for a in out.get("allowOut", []) if not is_ip_or_cidr(a)]
    if domains and "0.0.0.0/0" not in out.get("denyOut", []):
        raise api_error(400, "When specifying allowed domains in allow out, you must include "
                             "'ALL_TRAFFIC' in deny out to block all other traffic.")
    if out.get("allowPublicTraffic", True) is False and not secure:
        raise api_error(400, "You cannot create a sandbox without public access unless you "
                             "enable secure envd access via 'secure' flag.")
    return out


def parse_metadata_filter(text):
    """GET /v2/sandboxes?metadata=: one value "k=v&k2=v2" whose keys and
    values are URL-encoded once more (infra's parseFilters)."""
    filters = {}
    for pair in urllib.parse.unquote(text).split("&"):
        parts = pair.split("=")
        if len(parts) != 2:
            raise api_error(400, "Error parsing metadata")
        filters[urllib.parse.unquote(parts[0])] = urllib.parse.unquote(parts[1])
    return filters


def parse_next_token(token):
    """base64url("<RFC 3339 time>__<sandboxID>") -> (microseconds, id)."""
    try:
        when, sandbox_id = base64.urlsafe_b64decode(token.encode()).decode().split("__")
        return parse_rfc3339(when), sandbox_id
    except (ValueError, UnicodeDecodeError):
        raise api_error(400, "Invalid next token") from None


def make_next_token(us, sandbox_id):
    return base64.urlsafe_b64encode(("%s__%s" % (rfc3339(us), sandbox_id)).encode()).decode()


# --------------------------------------------------------------- sandboxes

class Sandbox:
    """One sandbox: its container, what the create asked, its lifecycle."""

    def __init__(self, spec, instance, cpu, memory_mb, network_mode):
        self.id = new_sandbox_id()
        self.spec = spec
        self.container = "e2bfake-%s-%s" % (instance, self.id)
        self.cpu, self.memory_mb, self.network_mode = cpu, memory_mb, network_mode
        self.envd_token = secrets.token_urlsafe(24) if spec.secure else None
        self.traffic_token = secrets.token_urlsafe(24) if spec.allow_public is False else None
        self.started_at = now_us()
        self.end_at = self.started_at + spec.timeout * 1_000_000
        self.state = "running"
        # What the detail reports of its network: what the create asked,
        # unless a misbehaviour says otherwise (Fake.start_sandbox).
        self.report_internet = ("allowInternetAccess", spec.allow_internet) \
            if spec.allow_internet is not None else None
        self.report_network = spec.network
        self.processes = {}          # in-container pid -> Proc
        self.lock = threading.Lock()  # serializes pause, resume and removal
        # Its container's cgroup files on the host (Fake.find_cgroup), and
        # the SandboxMetric samples taken of it (Fake.sample).
        self.cgroup = None
        self.samples = []
        self.last_cpu = None          # (monotonic s, CPU ns) of the last sample

    def sandbox_json(self, domain, omit=()):
        """The Sandbox schema: the create, connect and resume answer."""
        out = {"templateID": self.spec.template_id, "sandboxID": self.id, "clientID": CLIENT_ID,
               "envdVersion": ENVD_VERSION, "domain": domain}
        if self.envd_token:
            out["envdAccessToken"] = self.envd_token
        if self.traffic_token:
            out["trafficAccessToken"] = self.traffic_token
        for field in omit:
            out.pop(field, None)
        return out

    def listed_json(self):
        """The ListedSandbox schema."""
        out = {"templateID": self.spec.template_id, "sandboxID": self.id, "clientID": CLIENT_ID,
               "startedAt": rfc3339(self.started_at), "endAt": rfc3339(self.end_at),
               "cpuCount": self.cpu, "memoryMB": self.memory_mb, "diskSizeMB": DISK_SIZE_MB,
               "state": self.state, "envdVersion": ENVD_VERSION}
        if self.spec.metadata is not None:
            out["metadata"] = self.spec.metadata
        return out

    def detail_json(self, domain):
        """SandboxDetail, with the network settings infra's detail adds."""
        out = self.listed_json()
        out["domain"] = domain
        if self.envd_token:
            out["envdAccessToken"] = self.envd_token
        if self.report_internet is not None:
            out["allowInternetAccess"] = self.report_internet[1]
        if self.report_network is not None:
            out["network"] = self.report_network
        return out

    def state_json(self):
        """What GET /_fake/state says of the sandbox."""
        return {"sandboxID": self.id, "container": self.container, "state": self.state,
                "templateID": self.spec.template_id, "metadata": self.spec.metadata,
                "network_mode": self.network_mode, "egress_denied": self.spec.egress_denied,
                "cpuCount": self.cpu, "memoryMB": self.memory_mb, "secure": self.spec.secure,
                "endAt": rfc3339(self.end_at), "processes": sorted(self.processes)}


class Proc:
    """One process of Process/Start: the `docker exec` running it, its
    in-container pid (the leader of its process group), its events.

    The events queue carries ("stdout"|"stderr", bytes) and then ("end",
    exit status of docker exec).  A detached process (its client went away
    or its deadline passed) keeps running and its output is dropped."""

    def __init__(self, sandbox, argv, stdin_open=False):
        self.sandbox = sandbox
        self.events = queue.Queue(maxsize=256)
        self.pid = None
        self.failure = b""
        self.vanished = False
        self.attached = True
        self.started = threading.Event()
        self.timer = None
        # StartRequest.stdin (process.proto: "We default to true"): an open
        # pipe nobody writes to (SendInput is not served), else nothing.
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_open else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
        pumps = [threading.Thread(target=self.pump, args=(self.popen.stdout, "stdout"), daemon=True),
                 threading.Thread(target=self.pump_stderr, daemon=True)]
        for t in pumps:
            t.start()
        threading.Thread(target=self.wait, args=(pumps,), daemon=True).start()

    def put(self, kind, data):
        """Queue an event, waiting for room while a client reads."""
        while self.attached:
            try:
                self.events.put((kind, data), timeout=0.5)
                return
            except queue.Full:
                continue

    def pump(self, pipe, kind):
        while True:
            data = pipe.read1(65536)
            if not data:
                return
            self.put(kind, data)

    def pump_stderr(self):
        """The first stderr line is START_SCRIPT's pid; the rest is output."""
        head = b""
        while b"\n" not in head and len(head) < 4096:
            data = self.popen.stderr.read1(4096)
            if not data:
                break
            head += data
        line, _, rest = head.partition(b"\n")
        if line.startswith(PID_MARKER) and line[len(PID_MARKER):].isdigit():
            self.pid = int(line[len(PID_MARKER):])
            self.sandbox.processes[self.pid] = self
            self.started.set()
            if rest:
                self.put("stderr", rest)
            self.pump(self.popen.stderr, "stderr")
        else:
            self.failure = head + self.popen.stderr.read(65536)
            self.started.set()

    def wait(self, pumps):
        for t in pumps:
            t.join()
        status = self.popen.wait()
        if self.timer:
            self.timer.cancel()
        self.sandbox.processes.pop(self.pid, None)
        self.put("end", status)

    def signal(self, name):
        """Send signal `name` (KILL, TERM) to the process's group; a no-op
        once the process has ended (its pid may be another's by then)."""
        if self.popen.poll() is not None:
            return True
        return docker(["exec", "-u", "0", self.sandbox.container, "sh", "-c", KILL_SCRIPT, "sh",
                       name, str(self.pid)], timeout=30).returncode == 0

    def detach(self):
        self.attached = False


def end_event(status):
    """ProcessEvent.EndEvent from docker exec's status, in proto3 JSON
    (zero values left out).  docker exec reports a process killed by
    signal N as 128+N, so such statuses are read as signals."""
    if 128 < status <= 128 + 64:
        signum = status - 128
        return {"exitCode": -1, "status": "signal: " + SIGNAL_NAMES.get(signum, str(signum))}
    end = {"exited": True, "status": "exit status %d" % status}
    if status:
        end["exitCode"] = status
    return end


# ------------------------------------------------------------------- state

class Fake:
    """The fake's state: settings, sandboxes, misbehaviours, request log."""

    def __init__(self, args):
        self.api_key = args.api_key
        self.templates = dict(t.split("=", 1) for t in args.template)
        self.cpu, self.memory_mb, self.domain = args.cpu, args.memory_mb, args.domain
        self.instance = secrets.token_hex(6)
        self.network = "e2bfake-" + self.instance   # the open sandboxes' bridge
        self.lock = threading.Lock()
        self.sandboxes = {}
        self.misbehaviour = {}
        self.requests = []
        self.stopping = threading.Event()
        self.creating = 0                    # creates under way
        self.idle = threading.Condition(self.lock)
        self.contract = contract.Contract(args.upstream)
        self.violations = []                 # of the contracts, as recorded
        self.expected = None                 # a list while a test sends them on purpose
        self.metrics_interval = args.metrics_interval

    # -- the contract check

    def record(self, found, direction):
        """Violations of the contract: every one is kept (and printed)."""
        if not found:
            return
        with self.lock:
            for v in found:
                v = dict(v, direction=direction)
                (self.expected if self.expected is not None else self.violations).append(v)
                if self.expected is None:
                    print("fake_e2b: contract violation: %s" % json.dumps(v), file=sys.stderr,
                          flush=True)

    # -- log and misbehaviours

    def log_request(self, method, path, host):
        """Log a request; the caller sets the entry's "ms" (the time the fake
        spent on it) when it is answered, so a benchmark can tell the fake's
        time from its client's."""
        entry = {"method": method, "path": path, "host": host, "time": rfc3339(now_us())}
        with self.lock:
            self.requests.append(entry)
        return entry

    def misbehave(self, body):
        """Set the misbehaviours of body (see docs/providers/e2b-fake.md)."""
        require_type(body, dict, "body")
        allowed = {"omit": str, "resources": dict, "egress_open": bool, "fail": dict,
                   "vanish_during_process": bool, "resume_new_id": bool, "create_delay_ms": int,
                   "internet_open": bool, "delay_root_process_ms": int}
        for key, value in body.items():
            if key in ("detail_internet", "detail_network"):
                if value is not None:   # null: reported null / no network at all
                    require_type(value, bool if key == "detail_internet" else dict, key)
                continue
            if key not in allowed:
                raise api_error(400, "unknown misbehaviour %r" % key)
            require_type(value, allowed[key], key)
        if "omit" in body and body["omit"] not in ("envdAccessToken", "trafficAccessToken"):
            raise api_error(400, "omit is envdAccessToken or trafficAccessToken")
        if "resources" in body:
            for key in ("cpuCount", "memoryMB"):
                if require_type(body["resources"].get(key), int, "resources." + key) <= 0:
                    raise api_error(400, "resources.%s must be positive" % key)
        for key in ("create_delay_ms", "delay_root_process_ms"):
            if body.get(key, 0) < 0:
                raise api_error(400, "%s must not be negative" % key)
        if "fail" in body:
            fail = body["fail"]
            try:
                re.compile(require_type(fail.get("match"), str, "fail.match"))
            except re.error as e:
                raise api_error(400, "fail.match: %s" % e) from None
            require_type(fail.get("status"), int, "fail.status")
            require_type(fail.setdefault("times", 1), int, "fail.times")
        with self.lock:
            self.misbehaviour.update(body)

    def reset(self):
        with self.lock:
            self.misbehaviour.clear()
            self.requests.clear()

    def behaviour(self, key, default=None):
        with self.lock:
            return self.misbehaviour.get(key, default)

    def behaviour_all(self):
        """The misbehaviours in force (a copy)."""
        with self.lock:
            return json.loads(json.dumps(self.misbehaviour))

    def take_failure(self, request_line):
        """The status to fail this request with (fail misbehaviour), or None."""
        with self.lock:
            fail = self.misbehaviour.get("fail")
            if not fail or fail["times"] <= 0 or not re.search(fail["match"], request_line):
                return None
            fail["times"] -= 1
            return fail["status"]

    def take_vanish(self):
        with self.lock:
            return self.misbehaviour.pop("vanish_during_process", False)

    # -- sandboxes

    def get(self, sandbox_id):
        """The sandbox of an id (a "-<clientID>" suffix is ignored) or None."""
        with self.lock:
            return self.sandboxes.get(sandbox_id.split("-")[0])

    def must_get(self, sandbox_id):
        sbx = self.get(sandbox_id)
        if sbx is None:
            raise api_error(404, "Sandbox \"%s\" doesn't exist or you don't have access to it" % sandbox_id)
        return sbx

    def all(self):
        with self.lock:
            return list(self.sandboxes.values())

    def create(self, spec):
        """Start a sandbox's container; the Sandbox."""
        with self.lock:
            if self.stopping.is_set():
                raise api_error(503, "the fake is stopping")
            self.creating += 1
        try:
            return self.start_sandbox(spec)
        finally:
            with self.lock:
                self.creating -= 1
                self.idle.notify_all()

    def start_sandbox(self, spec):
        time.sleep(self.behaviour("create_delay_ms", 0) / 1000)
        resources = self.behaviour("resources") or {}
        cpu = resources.get("cpuCount", self.cpu)
        memory_mb = resources.get("memoryMB", self.memory_mb)
        # internet_open: a service that ignores allow_internet_access and
        # denyOut, and says so in the detail; egress_open: one that opens
        # the network and still reports the deny it was asked for.
        internet_open = self.behaviour("internet_open", False)
        egress_open = self.behaviour("egress_open", False) or internet_open
        allowed = self.allowed_out(spec) if not egress_open else []
        network_mode = ("none" if spec.egress_denied and not egress_open and not allowed
                        else self.network)
        sbx = Sandbox(spec, self.instance, cpu, memory_mb, network_mode)
        if internet_open:
            sbx.report_internet = ("allowInternetAccess", True)
            sbx.report_network = {k: v for k, v in (spec.network or {}).items() if k != "denyOut"}
        self.stamp_report(sbx)
        try:
            docker_ok(self.run_argv(sbx))
            self.firewall(sbx, allowed)
            docker_ok(["exec", "-u", "0", sbx.container, "sh", "-c", HOME_SCRIPT])
        except HttpError:
            docker(["rm", "-f", sbx.container])
            raise
        sbx.cgroup = self.find_cgroup(sbx)
        with self.lock:
            self.sandboxes[sbx.id] = sbx
        return sbx

    @staticmethod
    def find_cgroup(sbx):
        """{"cpu": file, "mem": file, "v2": bool} of the sandbox's container's
        cgroup on the host (its PID 1's /proc/<pid>/cgroup), or None."""
        p = docker(["inspect", "-f", "{{.State.Pid}}", sbx.container])
        pid = p.stdout.decode().strip()
        if p.returncode != 0 or not pid.isdigit():
            return None
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                lines = [ln.rstrip("\n").split(":", 2) for ln in f]
        except OSError:
            return None
        paths = {}
        for _, ctrls, path in (ln for ln in lines if len(ln) == 3):
            for c in ctrls.split(",") if ctrls else [""]:
                paths[c] = path
        if "cpuacct" in paths and "memory" in paths:
            return {"v2": False,
                    "cpu": "/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % paths["cpuacct"],
                    "mem": "/sys/fs/cgroup/memory%s/memory.usage_in_bytes" % paths["memory"]}
        if "" in paths:
            return {"v2": True, "cpu": "/sys/fs/cgroup%s/cpu.stat" % paths[""],
                    "mem": "/sys/fs/cgroup%s/memory.current" % paths[""]}
        return None

    def sample(self):
        """Every --metrics-interval seconds, one SandboxMetric per running
        sandbox: the CPU its container used since the last sample, in
        percent of its cores, and its memory in use (E2B samples its VMs
        the same way, every few seconds)."""
        while not self.stopping.wait(self.metrics_interval):
            for sbx in self.all():
                if sbx.state != "running" or not sbx.cgroup:
                    continue
                try:
                    with open(sbx.cgroup["cpu"]) as f:
                        text = f.read()
                    with open(sbx.cgroup["mem"]) as f:
                        mem = int(f.read().strip())
                except (OSError, ValueError):
                    continue
                if sbx.cgroup["v2"]:
                    stat = dict(ln.split(" ", 1) for ln in text.splitlines() if " " in ln)
                    cpu_ns = int(stat.get("usage_usec", "0")) * 1000
                else:
                    cpu_ns = int(text.strip() or 0)
                t = time.monotonic()
                last, sbx.last_cpu = sbx.last_cpu, (t, cpu_ns)
                if last is None or t <= last[0]:
                    continue
                pct = 100.0 * (cpu_ns - last[1]) / ((t - last[0]) * 1e9 * sbx.cpu)
                us = now_us()
                with self.lock:
                    sbx.samples.append({
                        "timestamp": rfc3339(us), "timestampUnix": us // 1_000_000,
                        "cpuCount": sbx.cpu, "cpuUsedPct": round(min(max(pct, 0.0), 100.0), 2),
                        "memUsed": mem, "memTotal": sbx.memory_mb << 20, "memCache": 0,
                        "diskUsed": 0, "diskTotal": 0})
                    del sbx.samples[:-1000]

    def stamp_report(self, sbx):
        """detail_internet, detail_network: what a new (or resumed) sandbox's
        detail reports of its network, whatever it was created with."""
        with self.lock:
            if "detail_internet" in self.misbehaviour:
                sbx.report_internet = ("allowInternetAccess", self.misbehaviour["detail_internet"])
            if "detail_network" in self.misbehaviour:   # None: the detail has no network
                sbx.report_network = json.loads(json.dumps(self.misbehaviour["detail_network"]))

    @staticmethod
    def allowed_out(spec):
        """The addresses a deny-all VM may still reach (allowOut wins over
        denyOut, as in E2B); [] when its egress is not denied."""
        if not spec.egress_denied:
            return []
        return [a for a in (spec.network or {}).get("allowOut", []) if is_ip_or_cidr(a)]

    def firewall(self, sbx, allowed):
        """A deny-all VM with allowOut: inside its network namespace (the
        engine runs without iptables), loopback and the allowed addresses
        pass, every other packet out is rejected.  E2B enforces the same
        rule outside the VM; here it is the container's own netns, which
        its processes (no NET_ADMIN) cannot change."""
        if not allowed:
            return
        pid = docker_ok(["inspect", "-f", "{{.State.Pid}}", sbx.container]).stdout.decode().strip()
        rules = [["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"]]
        rules += [["-A", "OUTPUT", "-d", a, "-j", "ACCEPT"] for a in allowed]
        rules += [["-A", "OUTPUT", "-j", "REJECT"]]
        for r in rules:
            p = subprocess.run(["nsenter", "-t", pid, "-n", "iptables"] + r,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if p.returncode != 0:
                raise api_error(500, "firewall: %s" % p.stderr.decode(errors="replace"))
        sbx.allowed_out = allowed

    def run_argv(self, sbx):
        """`docker run` of a sandbox: locked down, PID 1 doing nothing."""
        argv = ["run", "-d", "--name", sbx.container,
                "--label", "%s=%s" % (LABEL, self.instance), "--label", "e2b-sandbox=" + sbx.id,
                "--user", "0", "--init", "--cpus", str(sbx.cpu),
                "--memory", "%dm" % sbx.memory_mb, "--memory-swap", "%dm" % sbx.memory_mb,
                "--pids-limit", "512", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--network", sbx.network_mode]
        for cap in CAPS:
            argv += ["--cap-add", cap]
        for k, v in sbx.spec.env_vars.items():
            argv += ["-e", "%s=%s" % (k, v)]
        return argv + ["--entrypoint", "sleep", sbx.spec.image, "infinity"]

    def remove(self, sbx):
        """Kill a sandbox: its container goes, then its id is forgotten
        (so an id that answers 404 has no container left)."""
        with sbx.lock:
            with self.lock:
                if self.sandboxes.get(sbx.id) is not sbx:
                    return False
            docker(["rm", "-f", sbx.container])
            with self.lock:
                del self.sandboxes[sbx.id]
            return True

    def pause(self, sbx):
        """Pause: files stay, every process ends (docker stop)."""
        with sbx.lock:
            if sbx.state == "paused":
                raise api_error(409, "Error pausing sandbox - sandbox '%s' is already paused" % sbx.id)
            docker_ok(["stop", "-t", "1", sbx.container])
            sbx.state, sbx.end_at = "paused", now_us()
            sbx.processes.clear()

    def connect(self, sbx, timeout):
        """POST /connect: (status, sandbox) -- 200 when running (the TTL
        only grows), 201 when it was paused and is now resumed."""
        with sbx.lock:
            deadline = now_us() + timeout * 1_000_000
            if sbx.state == "running":
                sbx.end_at = max(sbx.end_at, deadline)
                return 200, sbx
            docker_ok(["start", sbx.container])
            self.firewall(sbx, getattr(sbx, "allowed_out", []))  # a new netns
            sbx.cgroup, sbx.last_cpu = self.find_cgroup(sbx), None  # its counters start again
            sbx.state, sbx.end_at = "running", deadline
            self.stamp_report(sbx)   # a resume is a new VM from the snapshot
            if self.behaviour("resume_new_id", False):
                with self.lock:
                    del self.sandboxes[sbx.id]
                    sbx.id = new_sandbox_id()
                    self.sandboxes[sbx.id] = sbx
            return 201, sbx

    def vanish(self, sbx, proc):
        """vanish_during_process: the container goes under a running stream."""
        proc.vanished = True
        self.remove(sbx)

    def reap(self):
        """The TTL: expired running sandboxes are killed (or paused)."""
        while not self.stopping.wait(REAP_EVERY_S):
            now = now_us()
            for sbx in self.all():
                if sbx.state != "running" or sbx.end_at > now:
                    continue
                try:
                    if sbx.spec.auto_pause:
                        self.pause(sbx)
                    else:
                        self.remove(sbx)
                except HttpError as e:
                    print("fake_e2b: reaping %s: %s" % (sbx.id, e.body), file=sys.stderr)

    def create_network(self):
        """The instance's own bridge network, for the sandboxes with egress
        (the engine's default bridge may be switched off)."""
        docker_ok(["network", "create", "--driver", "bridge",
                   "--label", "%s=%s" % (LABEL, self.instance), self.network])

    def remove_all(self):
        """Force-remove every container of this instance, once the creates
        under way have ended, and its network."""
        with self.lock:
            self.idle.wait_for(lambda: self.creating == 0, timeout=120)
        p = docker(["ps", "-aq", "--filter", "label=%s=%s" % (LABEL, self.instance)])
        ids = p.stdout.decode().split()
        if ids:
            docker(["rm", "-f"] + ids)
        docker(["network", "rm", self.network])

    # -- envd work inside the containers

    def start_process(self, sbx, user, request, timeout_s):
        """Start request's process as `user`; the started Proc."""
        proc_cfg = request.get("process")
        if not isinstance(proc_cfg, dict) or not isinstance(proc_cfg.get("cmd"), str) or not proc_cfg["cmd"]:
            raise ConnectError("invalid_argument", "process.cmd is required")
        if request.get("pty") is not None:
            raise ConnectError("unimplemented", "pty is not served by the fake")
        args = proc_cfg.get("args", [])
        envs = proc_cfg.get("envs", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConnectError("invalid_argument", "process.args must be strings")
        if not isinstance(envs, dict) or not all(isinstance(v, str) and k and "=" not in k
                                                 for k, v in envs.items()):
            raise ConnectError("invalid_argument", "process.envs must map names to strings")
        stdin_open = request.get("stdin") is not False
        cmd = proc_cfg["cmd"]
        delay_ms = self.behaviour("delay_root_process_ms", 0) if user == "root" else 0
        if delay_ms:
            # A root process (the cleanup between steps and calls) that
            # hangs: its command runs only after the delay, in its group.
            args = ["-c", 'sleep "$0" && exec "$@"', "%.3f" % (delay_ms / 1000), cmd] + args
            cmd = "sh"
        uid, gid, home = USERS[user]
        cwd = proc_cfg.get("cwd") or home
        argv = ["docker", "exec"] + (["-i"] if stdin_open else []) + [
                "-u", "%d:%d" % (uid, gid), "-w", cwd,
                "-e", "HOME=" + home, "-e", "USER=" + user, "-e", "LOGNAME=" + user]
        for k, v in envs.items():
            argv += ["-e", "%s=%s" % (k, v)]
        argv += [sbx.container, "sh", "-c", START_SCRIPT, "e2bfake", cmd] + args
        proc = Proc(sbx, argv, stdin_open)
        if not proc.started.wait(60) or proc.pid is None:
            proc.detach()
            raise ConnectError("invalid_argument", proc.failure.decode(errors="replace").strip()
                               or "the process did not start")
        if timeout_s:
            proc.timer = threading.Timer(timeout_s, proc.signal, ("KILL",))
            proc.timer.daemon = True
            proc.timer.start()
        return proc

    def write_file(self, sbx, path, data, user):
        uid, gid, _ = USERS[user]
        p = docker(["exec", "-i", "-u", "0", sbx.container, "sh", "-c", WRITE_SCRIPT, "sh", path,
                    "%d:%d" % (uid, gid)], stdin=data)
        if p.returncode == 3:
            raise api_error(400, "path is a directory: %s" % path)
        if p.returncode != 0:
            raise api_error(500, "error writing file: %s" % p.stderr.decode(errors="replace").strip())

    def read_file(self, sbx, path):
        p = docker(["exec", "-u", "0", sbx.container, "sh", "-c", READ_SCRIPT, "sh", path])
        if p.returncode == 3:
            raise api_error(400, "path '%s' is a directory" % path)
        if p.returncode == 4:
            raise api_error(404, "path '%s' does not exist" % path)
        if p.returncode != 0:
            raise api_error(500, "error reading file: %s" % p.stderr.decode(errors="replace").strip())
        return p.stdout

    def metrics(self, sbx):
        """envd's Metrics from the container's cgroup limits."""
        p = docker_ok(["exec", "-u", "0", sbx.container, "sh", "-c", METRICS_SCRIPT])
        facts = dict(line.split(" ", 1) for line in p.stdout.decode().splitlines() if " " in line)
        nproc = int(facts.get("nproc", "1") or 1)
        quota, _, period = facts.get("cpu_max", "").partition(" ")
        cpus = nproc
        if quota.isdigit() and period.strip().isdigit() and int(period) > 0:
            cpus = min(nproc, max(1, math.ceil(int(quota) / int(period))))
        mem_total = int(facts.get("meminfo") or 0) * 1024
        if facts.get("mem_max", "").strip().isdigit():
            mem_total = min(mem_total or 1 << 62, int(facts["mem_max"]))
        mem_used = int(facts["mem_cur"]) if facts.get("mem_cur", "").strip().isdigit() else 0
        disk = facts.get("disk", "").split()
        disk_total = int(disk[1]) * 1024 if len(disk) > 3 and disk[1].isdigit() else 0
        disk_used = int(disk[2]) * 1024 if len(disk) > 3 and disk[2].isdigit() else 0
        return {"ts": int(time.time()), "cpu_count": cpus, "cpu_used_pct": 0.0,
                "mem_total_mib": mem_total >> 20, "mem_used_mib": mem_used >> 20,
                "mem_total": mem_total, "mem_used": mem_used,
                "disk_total": disk_total, "disk_used": disk_used}


# -------------------------------------------------------------------- HTTP

def parse_multipart(body, content_type):
    """The parts of a multipart/form-data body: [(headers, data)]."""
    m = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', content_type)
    if not m:
        raise api_error(400, "multipart boundary missing")
    delimiter = b"--" + (m.group(1) or m.group(2)).encode()
    parts = []
    for chunk in body.split(delimiter)[1:]:
        if chunk.startswith(b"--"):
            break
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise api_error(400, "malformed multipart part")
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        parts.append((headers, data[:-2] if data.endswith(b"\r\n") else data))
    return parts


def disposition_param(disposition, name):
    m = re.search(r'(?:^|;)\s*%s="((?:[^"\\]|\\.)*)"' % name, disposition)
    if m:
        return re.sub(r"\\(.)", r"\1", m.group(1))
    m = re.search(r'(?:^|;)\s*%s=([^;\s]+)' % name, disposition)
    return m.group(1) if m else None


def resolve_path(path, home):
    """envd's ExpandAndResolve: "~" and relative paths from the user's home."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = home + "/" + path
    return path


def connect_error_violations(error, operation, field):
    """A Connect error ({"code", "message", "details"}) against the protocol."""
    if not isinstance(error, dict):
        return [contract.violation("Connect protocol", operation, field, "not an object")]
    found = [contract.violation("Connect protocol", operation, "%s.%s" % (field, k), "not a field")
             for k in error if k not in ("code", "message", "details")]
    if error.get("code") not in CONNECT_CODES:
        found.append(contract.violation("Connect protocol", operation, field + ".code",
                                        "%r is not a Connect code" % (error.get("code"),)))
    return found


def envelope(obj, flags=0):
    data = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">BI", flags, len(data)) + data


class Handler(BaseHTTPRequestHandler):
    """One connection: routes each request to the control plane or envd."""
    protocol_version = "HTTP/1.1"
    server_version = "fake-e2b"

    def log_message(self, format, *args):
        """Quiet: GET /_fake/state is the request log."""

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    @property
    def fake(self):
        return self.server.fake

    # -- plumbing

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        self.route = url.path
        self.query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        host = self.headers.get("Host", "")
        entry, t0 = None, time.monotonic()
        self.entry = None
        self.raw_body, self.checked, self.op, self.rpc = None, True, None, None
        self.body_cache = None
        self.unchecked_answer = False
        try:
            if url.path.startswith("/_fake/"):
                self.check_api_key()
                self.serve_control()
                return
            entry = self.entry = self.fake.log_request(self.command, self.path, host)
            target = self.envd_target(host)
            self.find_operation(target)
            status = self.fake.take_failure("%s %s" % (self.command, self.path))
            if status is not None:
                self.drain_body()
                self.unchecked_answer = True   # a fault of the fake's making
                raise api_error(status, "failure injected by the fake")
            if target:
                self.serve_envd(*target)
            else:
                self.check_api_key()
                self.validate_request()
                self.serve_api()
        except HttpError as e:
            self.unchecked_answer = self.unchecked_answer or e.proxy
            self.send_json(e.status, e.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            if entry is not None:
                entry["ms"] = round((time.monotonic() - t0) * 1000, 3)

    def find_operation(self, target):
        """The contract's operation of this request (self.op: OpenAPI;
        self.rpc: a Process RPC), or a violation when it has none."""
        c, method = self.fake.contract, self.command
        self.checked = False
        if target and target[0] != ENVD_PORT:
            self.checked = True   # another port of the VM: not envd's
            return
        if target and self.route.startswith("/process.Process/"):
            self.rpc = c.rpc(self.route)
            if self.rpc is None:
                self.fake.record([contract.violation(contract.PROCESS_FILE, "%s %s" % (method, self.route),
                                                     "path", "not an RPC of service Process")], "request")
            elif method != "POST":
                self.fake.record([contract.violation(contract.PROCESS_FILE, self.route, "method",
                                                     "Connect RPCs are POST")], "request")
            return
        self.op, v = (c.envd if target else c.api).operation(method, self.route)
        if v:
            self.fake.record([v], "request")

    def validate_request(self):
        """What E2B's API refuses before any handler: a request its OpenAPI
        document does not admit is 400 (e2b-dev/infra packages/api/main.go:
        OapiRequestValidatorWithOptions; utils/error.go's message)."""
        if self.op is None:
            return
        body = self.read_body()
        self.body_cache = body
        problem = self.op.refusal(self.query, body, self.headers.get("Content-Type"))
        if problem:
            raise api_error(400, "validation error: error in openapi3filter.RequestError: %s: %s"
                                 % (problem["field"], problem["problem"]))

    def check_request_once(self):
        """The request against the contract, once its body is read (at the
        first byte of the answer, so a violation is recorded before the
        client has its answer)."""
        if self.checked:
            return
        self.checked = True
        body = self.raw_body or b""
        if self.op is not None:
            found = self.op.check_request(self.query, self.headers, body,
                                          self.headers.get("Content-Type"))
        elif self.rpc is not None:
            found = self.check_rpc_request(body)
        else:
            return
        self.fake.record(found, "request")

    def check_rpc_request(self, body):
        rpc, c = self.rpc, self.fake.contract
        name = self.route
        media = self.headers.get("Content-Type", "").split(";")[0].strip()
        want = "application/connect+json" if rpc["server_stream"] or rpc["client_stream"] \
            else "application/json"
        if media != want:
            return [contract.violation(contract.PROCESS_FILE, name, "headers.Content-Type",
                                       "%r: the provider speaks Connect's JSON, %s" % (media, want))]
        if want == "application/connect+json":
            if len(body) < 5 or struct.unpack(">I", body[1:5])[0] != len(body) - 5:
                return [contract.violation(contract.PROCESS_FILE, name, "body",
                                           "not one Connect envelope")]
            body = body[5:]
        try:
            message = json.loads(body)
        except ValueError as e:
            return [contract.violation(contract.PROCESS_FILE, name, "body", "not JSON: %s" % e)]
        return c.process.check(rpc["request"], message, name, "body")

    def check_answer(self, status, content_type, data):
        """An answer (not a stream's) against the contract."""
        self.check_request_once()
        if self.unchecked_answer:
            return
        if self.op is not None:
            self.fake.record(self.op.check_response(status, content_type, data), "response")
        elif self.rpc is not None:
            try:
                message = json.loads(data or b"null")
            except ValueError as e:
                return self.fake.record([contract.violation(contract.PROCESS_FILE, self.route,
                                                            "response", "not JSON: %s" % e)], "response")
            if status == 200:
                self.fake.record(self.fake.contract.process.check(self.rpc["response"], message,
                                                                  self.route, "response"), "response")
            else:
                self.fake.record(connect_error_violations(message, self.route, "response"),
                                 "response")

    def check_stream_message(self, flags, message):
        """One message of a Process stream against the contract."""
        if self.rpc is None or self.unchecked_answer:
            return
        if flags & 2:
            found = [contract.violation("Connect protocol", self.route, "end-stream." + k,
                                        "not a field of the end-of-stream message")
                     for k in message if k not in ("error", "metadata")]
            if "error" in message:
                found += connect_error_violations(message["error"], self.route, "end-stream.error")
        else:
            found = self.fake.contract.process.check(self.rpc["response"], message, self.route,
                                                     "stream")
        self.fake.record(found, "response")

    def envd_target(self, host):
        """(port, sandbox id) when the Host names a sandbox's port, else None."""
        m = ENVD_HOST.match(re.sub(r":\d+$", "", host.lower()))
        if m and m.group(3) == self.fake.domain.lower():
            return int(m.group(1)), m.group(2)
        return None

    def read_body(self):
        """The request body (Content-Length or chunked), at most MAX_BODY;
        kept for the contract check."""
        if self.body_cache is not None:   # read already (validate_request)
            body, self.body_cache = self.body_cache, None
            return body
        body = self.read_body_raw()
        self.raw_body = (self.raw_body or b"") + body
        return body

    def read_body_raw(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self.read_chunked()
        length = self.headers.get("Content-Length", "0").strip() or "0"
        if not length.isdigit():
            self.close_connection = True
            raise api_error(400, "bad Content-Length")
        if int(length) > MAX_BODY:
            self.close_connection = True
            raise api_error(413, "request body over %d bytes" % MAX_BODY)
        return self.rfile.read(int(length))

    def read_chunked(self):
        body = bytearray()
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                self.close_connection = True
                raise api_error(400, "bad chunked body") from None
            if len(body) + size > MAX_BODY:
                self.close_connection = True
                raise api_error(413, "request body over %d bytes" % MAX_BODY)
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

    def read_json(self):
        body = self.read_body()
        try:
            return json.loads(body or b"null")
        except ValueError as e:
            raise api_error(400, "Error when parsing request: %s" % e) from None

    def send_bytes(self, status, data, content_type, headers=None):
        self.check_answer(status, content_type if status != 204 else "", data if status != 204 else b"")
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status != 204:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, json.dumps(obj).encode(), "application/json", headers)

    def query_one(self, name):
        values = self.query.get(name)
        return values[0] if values else None

    def check_api_key(self):
        key = self.headers.get("X-API-Key")
        if not key or not secrets.compare_digest(key.encode(), self.fake.api_key.encode()):
            self.drain_body()
            raise api_error(401, "Invalid API key")

    # -- control plane

    SANDBOX_PATH = re.compile(r"^/sandboxes/([^/]+)(/timeout|/pause|/connect|/metrics)?$")

    def serve_api(self):
        route, method = self.route, self.command
        if route == "/sandboxes" and method == "POST":
            return self.api_create()
        if route == "/sandboxes" and method == "GET":
            return self.api_list_running()
        if route == "/v2/sandboxes" and method == "GET":
            return self.api_list()
        if route == "/health" and method == "GET":
            return self.send_bytes(204, b"", "")   # openapi.yml: 204, no body
        m = self.SANDBOX_PATH.match(route)
        if m:
            action = (method, m.group(2))
            handlers = {("GET", None): self.api_detail, ("DELETE", None): self.api_kill,
                        ("POST", "/timeout"): self.api_timeout, ("POST", "/pause"): self.api_pause,
                        ("POST", "/connect"): self.api_connect, ("GET", "/metrics"): self.api_metrics}
            if action in handlers:
                return handlers[action](urllib.parse.unquote(m.group(1)))
        self.drain_body()
        raise api_error(404, "no route %s %s" % (method, route))

    def api_create(self):
        spec = CreateSpec(self.read_json(), self.fake.templates)
        sbx = self.fake.create(spec)
        omit = self.fake.behaviour("omit")
        self.send_json(201, sbx.sandbox_json(self.fake.domain, omit=[omit] if omit else []))

    def api_list_running(self):
        sandboxes = [s for s in self.fake.all() if s.state == "running"]
        metadata = self.query_one("metadata")
        if metadata is not None:
            sandboxes = self.match_metadata(sandboxes, parse_metadata_filter(metadata))
        sandboxes.sort(key=lambda s: (-s.started_at, s.id))
        self.send_json(200, [s.listed_json() for s in sandboxes])

    @staticmethod
    def match_metadata(sandboxes, filters):
        return [s for s in sandboxes
                if s.spec.metadata is not None
                and all(s.spec.metadata.get(k) == v for k, v in filters.items())]

    def api_list(self):
        """GET /v2/sandboxes: newest first, paged by nextToken/limit."""
        states = ["running", "paused"]
        if self.query_one("state") is not None:
            states = [s for v in self.query["state"] for s in v.split(",")]
            if any(s not in ("running", "paused") for s in states):
                raise api_error(400, "state must be running or paused")
        limit = self.query_one("limit") or "100"
        if not limit.isdigit() or not 1 <= int(limit) <= 100:
            raise api_error(400, "limit must be from 1 to 100")
        limit = int(limit)
        cursor_us, cursor_id = now_us(), "zzzzzzzzzzzzzzzzzzzz"
        if self.query_one("nextToken"):
            cursor_us, cursor_id = parse_next_token(self.query_one("nextToken"))
        sandboxes = [s for s in self.fake.all() if s.state in states]
        metadata = self.query_one("metadata")
        if metadata is not None:
            sandboxes = self.match_metadata(sandboxes, parse_metadata_filter(metadata))
        sandboxes = [s for s in sandboxes
                     if s.started_at < cursor_us or (s.started_at == cursor_us and s.id > cursor_id)]
        sandboxes.sort(key=lambda s: (-s.started_at, s.id))
        headers = {}
        if len(sandboxes) > limit:
            last = sandboxes[limit - 1]
            headers["X-Next-Token"] = make_next_token(last.started_at, last.id)
        self.send_json(200, [s.listed_json() for s in sandboxes[:limit]], headers)

    def api_detail(self, sandbox_id):
        self.send_json(200, self.fake.must_get(sandbox_id).detail_json(self.fake.domain))

    def api_metrics(self, sandbox_id):
        """GET /sandboxes/{id}/metrics: its samples from start to end (Unix
        seconds, both optional), oldest first."""
        sbx = self.fake.must_get(sandbox_id)
        bounds = []
        for name in ("start", "end"):
            v = self.query_one(name)
            if v is not None and not v.isdigit():
                raise api_error(400, "%s must be a non-negative integer" % name)
            bounds.append(int(v) if v is not None else None)
        start, end = bounds
        with self.fake.lock:
            samples = [dict(m) for m in sbx.samples
                       if (start is None or m["timestampUnix"] >= start)
                       and (end is None or m["timestampUnix"] <= end)]
        self.send_json(200, samples)

    def api_kill(self, sandbox_id):
        if not self.fake.remove(self.fake.must_get(sandbox_id)):
            raise api_error(404, "Sandbox \"%s\" doesn't exist or you don't have access to it" % sandbox_id)
        self.send_bytes(204, b"", "")

    def timeout_body(self):
        body = self.read_json()
        if not isinstance(body, dict) or "timeout" not in body:
            raise api_error(400, "Error when parsing request: timeout is required")
        return require_type(body["timeout"], int, "timeout")

    def api_timeout(self, sandbox_id):
        """POST /timeout: the deadline is now + timeout (it may shorten)."""
        timeout = max(0, self.timeout_body())
        sbx = self.fake.must_get(sandbox_id)
        if sbx.state != "running":
            raise api_error(404, "Sandbox \"%s\" doesn't exist or you don't have access to it" % sandbox_id)
        sbx.end_at = now_us() + timeout * 1_000_000
        self.send_bytes(204, b"", "")

    def api_pause(self, sandbox_id):
        self.drain_body()
        self.fake.pause(self.fake.must_get(sandbox_id))
        self.send_bytes(204, b"", "")

    def api_connect(self, sandbox_id):
        timeout = self.timeout_body()
        if timeout > MAX_TIMEOUT_S:
            raise api_error(400, "Timeout cannot be greater than %d hours" % (MAX_TIMEOUT_S // 3600))
        status, sbx = self.fake.connect(self.fake.must_get(sandbox_id), max(0, timeout))
        self.send_json(status, sbx.sandbox_json(self.fake.domain))

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
        if route == "/_fake/plant" and method == "POST":
            body = self.read_json() or {}
            require_type(body, dict, "body")
            body.setdefault("templateID", next(iter(self.fake.templates)))
            sbx = self.fake.create(CreateSpec(body, self.fake.templates))
            return self.send_json(201, {"sandboxID": sbx.id})
        if route == "/_fake/expect" and method == "POST":
            # {"on": true}: violations from now on are a test's own, sent on
            # purpose; {"on": false} answers them and ends that.
            on = require_type((self.read_json() or {}).get("on"), bool, "on")
            with self.fake.lock:
                got, self.fake.expected = self.fake.expected or [], [] if on else None
            return self.send_json(200, {"violations": got})
        if route == "/_fake/state" and method == "GET":
            with self.fake.lock:
                requests = list(self.fake.requests)
            return self.send_json(200, {"instance": self.fake.instance, "network": self.fake.network,
                                        "sandboxes": [s.state_json() for s in self.fake.all()],
                                        "misbehaviour": self.fake.behaviour_all(),
                                        "requests": requests,
                                        "violations": list(self.fake.violations)})
        self.drain_body()
        raise api_error(404, "no route %s %s" % (method, route))

    # -- envd

    def serve_envd(self, port, sandbox_id):
        sbx = self.fake.get(sandbox_id)
        if sbx is None or sbx.state != "running":
            self.drain_body()
            raise proxy_error(502, sandbox_id, "The sandbox was not found")
        if port != ENVD_PORT:
            self.drain_body()
            raise proxy_error(502, sandbox_id, "The sandbox is running but port is not open")
        self.check_traffic_token(sbx)
        route, method = self.route, self.command
        if sbx.envd_token and (method, route) != ("GET", "/health"):
            token = self.headers.get("X-Access-Token", "")
            if not secrets.compare_digest(token.encode(), sbx.envd_token.encode()):
                self.drain_body()
                e = api_error(401, "unauthorized access, please provide a valid access token "
                                   "or method signing if supported")
                # envd's auth middleware answers before any RPC handler: its
                # 401 is not a Connect error (on /files and /metrics it is
                # envd.yaml's Error).
                e.proxy = self.rpc is not None
                raise e
        routes = {("GET", "/health"): lambda s: self.send_bytes(204, b"", ""),
                  ("GET", "/metrics"): lambda s: self.send_json(200, self.fake.metrics(s)),
                  ("GET", "/files"): self.envd_download,
                  ("POST", "/files"): self.envd_upload,
                  ("POST", "/process.Process/Start"): self.envd_start,
                  ("POST", "/process.Process/SendSignal"): self.envd_signal}
        if (method, route) not in routes:
            self.drain_body()
            raise api_error(404, "no route %s %s" % (method, route))
        routes[(method, route)](sbx)

    def check_traffic_token(self, sbx):
        if not sbx.traffic_token:
            return
        header = "e2b-traffic-access-token"
        token = self.headers.get(header)
        if token is None or not secrets.compare_digest(token.encode(), sbx.traffic_token.encode()):
            self.drain_body()
            what = "is missing" if token is None else "is invalid"
            raise proxy_error(403, sbx.id, "Sandbox is secured with traffic access token. "
                                           "Token header '%s' %s" % (header, what))

    def files_user(self):
        """The user of a /files call: ?username=, else the default."""
        user = self.query_one("username") or DEFAULT_USER
        if user not in USERS:
            self.drain_body()
            raise api_error(401, "error looking up user '%s': unknown user" % user)
        return user

    def basic_user(self):
        """The user of an RPC: Authorization: Basic base64("<user>:")."""
        auth = self.headers.get("Authorization")
        if not auth:
            return DEFAULT_USER
        scheme, _, cred = auth.partition(" ")
        try:
            user = base64.b64decode(cred, validate=True).decode().partition(":")[0]
        except (ValueError, UnicodeDecodeError):
            user = None
        if scheme.lower() != "basic" or user not in USERS:
            raise ConnectError("unauthenticated", "invalid username: '%s'" % user)
        return user

    def envd_download(self, sbx):
        user = self.files_user()
        path = self.query_one("path")
        if not path:
            raise api_error(400, "path is required")
        data = self.fake.read_file(sbx, resolve_path(path, USERS[user][2]))
        self.send_bytes(200, data, "application/octet-stream")

    def envd_upload(self, sbx):
        """POST /files: each "file" part to ?path=, else to its filename."""
        user = self.files_user()
        content_type = self.headers.get("Content-Type", "")
        if not content_type.lower().startswith("multipart/"):
            self.drain_body()
            raise api_error(400, "unsupported content type: %s, expected multipart/form-data" % content_type)
        entries = []
        for headers, data in parse_multipart(self.read_body(), content_type):
            disposition = headers.get("content-disposition", "")
            if disposition_param(disposition, "name") != "file":
                self.fake.record([self.op.v("body", "part %r: the File body's one property is "
                                                    "file" % disposition_param(disposition, "name"))],
                                 "request")
                continue
            path = self.query_one("path") or disposition_param(disposition, "filename")
            if not path:
                raise api_error(400, "error resolving path: no path and no filename")
            path = resolve_path(path, USERS[user][2])
            if any(e["path"] == path for e in entries):
                raise api_error(400, "you cannot upload multiple files to the same path '%s' "
                                     "in one upload request" % path)
            self.fake.write_file(sbx, path, data, user)
            entries.append({"path": path, "name": path.rsplit("/", 1)[-1], "type": "file"})
        self.send_json(200, entries)

    def envd_signal(self, sbx):
        """SendSignal (Connect unary, JSON): signal a process's group."""
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            self.drain_body()
            raise HttpError(415, {"code": "unknown", "message": "content type must be application/json"})
        body = self.read_body()
        try:
            self.basic_user()
            try:
                self.proto_refusal("SendSignalRequest", json.loads(body))
            except ValueError:
                pass   # signal_process names it
            self.signal_process(sbx, body)
        except ConnectError as e:
            raise HttpError(CONNECT_STATUS[e.code], e.body()) from None
        self.send_json(200, {})

    def proto_refusal(self, message, request):
        """What envd's Connect handler refuses before the RPC runs: JSON that
        does not read as the request message (a wrong type, an enum name it
        does not have), invalid_argument.  Fields it does not know are
        dropped, as connect-go's JSON codec drops them."""
        found = [v for v in self.fake.contract.process.check(message, request, self.route, "body")
                 if not v["problem"].startswith("not a field of")]
        if found:
            raise ConnectError("invalid_argument", "proto: (line 1:1): %s: %s"
                               % (found[0]["field"], found[0]["problem"]))

    @staticmethod
    def signal_process(sbx, body):
        """Carry out a SendSignalRequest (JSON bytes) or raise ConnectError."""
        try:
            request = json.loads(body)
        except ValueError as e:
            raise ConnectError("invalid_argument", "bad JSON: %s" % e) from None
        if not isinstance(request, dict) or not isinstance(request.get("process"), dict):
            raise ConnectError("invalid_argument", "process is required")
        pid = request["process"].get("pid")
        if pid is None and "tag" in request["process"]:
            raise ConnectError("unimplemented", "process tags are not served by the fake")
        sig = request.get("signal")
        name = SIGNALS.get(sig) if isinstance(sig, (str, int)) else None
        if name is None:
            raise ConnectError("unimplemented", "invalid signal: %s" % sig)
        proc = sbx.processes.get(pid) if isinstance(pid, int) else None
        if proc is None:
            raise ConnectError("not_found", "process with pid %s not found" % pid)
        if not proc.signal(name):
            raise ConnectError("internal", "error sending signal")

    def envd_start(self, sbx):
        """Start (Connect server streaming, JSON): run a process and stream
        its start, output, keepalives and end as enveloped messages."""
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/connect+json":
            self.drain_body()
            raise HttpError(415, {"code": "unknown", "message": "content type must be application/connect+json"})
        body = self.read_body()
        try:
            user = self.basic_user()
            if self.entry is not None:
                self.entry["user"] = user   # for the tests to read back
            request = self.connect_request(body)
            self.proto_refusal("StartRequest", request)
            timeout_s = self.connect_timeout()
            keepalive_s = self.keepalive_interval()
            proc = self.fake.start_process(sbx, user, request, timeout_s)
        except ConnectError as e:
            self.begin_stream()
            return self.end_stream({"error": e.body()})
        deadline = time.monotonic() + timeout_s if timeout_s else None
        try:
            self.begin_stream()
            self.send_chunk(envelope({"event": {"start": {"pid": proc.pid}}}))
            if self.fake.take_vanish():
                vanish = threading.Timer(1.0, self.fake.vanish, (sbx, proc))
                vanish.daemon = True
                vanish.start()
            self.stream_events(proc, deadline, keepalive_s)
        except (BrokenPipeError, ConnectionResetError):
            proc.detach()
            self.close_connection = True

    @staticmethod
    def connect_request(body):
        """The one enveloped JSON request of a streaming call."""
        if len(body) < 5:
            raise ConnectError("invalid_argument", "missing request envelope")
        flags, length = struct.unpack(">BI", body[:5])
        if flags & 1:
            raise ConnectError("unimplemented", "compressed messages are not served by the fake")
        if length != len(body) - 5:
            raise ConnectError("invalid_argument", "envelope length does not match the body")
        try:
            request = json.loads(body[5:])
        except ValueError as e:
            raise ConnectError("invalid_argument", "bad JSON: %s" % e) from None
        if not isinstance(request, dict):
            raise ConnectError("invalid_argument", "the request is not an object")
        return request

    def connect_timeout(self):
        """Connect-Timeout-Ms in seconds (0: none)."""
        value = self.headers.get("Connect-Timeout-Ms")
        if value is None:
            return 0
        if not value.isdigit() or len(value) > 10:
            raise ConnectError("invalid_argument", "bad Connect-Timeout-Ms %r" % value)
        return int(value) / 1000

    def keepalive_interval(self):
        value = self.headers.get("Keepalive-Ping-Interval")
        return int(value) if value and value.isdigit() and int(value) > 0 else KEEPALIVE_S

    def begin_stream(self):
        self.check_request_once()
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_chunk(self, data):
        flags, length = struct.unpack(">BI", data[:5])
        self.check_stream_message(flags, json.loads(data[5:5 + length]))
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self, end):
        """The end-of-stream envelope (flag 0x02) and the last chunk."""
        self.send_chunk(envelope(end, flags=2))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def stream_events(self, proc, deadline, keepalive_s):
        last_sent = time.monotonic()
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                proc.detach()
                return self.end_stream({"error": {"code": "deadline_exceeded",
                                                  "message": "context deadline exceeded"}})
            wait = keepalive_s - (now - last_sent)
            if deadline is not None:
                wait = min(wait, deadline - now)
            try:
                kind, data = proc.events.get(timeout=max(wait, 0.01))
            except queue.Empty:
                if time.monotonic() - last_sent >= keepalive_s:
                    self.send_chunk(envelope({"event": {"keepalive": {}}}))
                    last_sent = time.monotonic()
                continue
            if kind == "end":
                if proc.vanished:
                    self.close_connection = True   # no end: the stream breaks
                    return None
                self.send_chunk(envelope({"event": {"end": end_event(data)}}))
                return self.end_stream({})
            self.send_chunk(envelope({"event": {"data": {kind: base64.b64encode(data).decode()}}}))
            last_sent = time.monotonic()


# -------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description="A fake of the hosted E2B service for tests.")
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any)")
    p.add_argument("--api-key", required=True)
    p.add_argument("--template", action="append", required=True, help="NAME=IMAGE (repeatable)")
    p.add_argument("--cpu", type=int, default=2, help="CPUs of every template")
    p.add_argument("--memory-mb", type=int, default=512, help="memory of every template (MiB)")
    p.add_argument("--domain", default="localhost", help="the sandboxes' domain")
    p.add_argument("--metrics-interval", type=float, default=1.0,
                   help="seconds between a sandbox's metrics samples")
    p.add_argument("--upstream", default=UPSTREAM,
                   help="E2B's contracts: openapi.yml, envd.yaml, process.proto")
    args = p.parse_args(argv)
    if any("=" not in t or t.startswith("=") or t.endswith("=") for t in args.template):
        p.error("--template is NAME=IMAGE")
    return args


def main(argv):
    args = parse_args(argv)
    try:
        fake = Fake(args)
    except contract.ContractMissing as e:
        print("fake_e2b: %s" % e, file=sys.stderr)
        return 1
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)
    server.daemon_threads = True
    server.fake = fake
    try:
        fake.create_network()
    except HttpError as e:
        print("fake_e2b: %s" % e.body["message"], file=sys.stderr)
        server.server_close()
        return 1

    def stop(signum, frame):
        fake.stopping.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=fake.reap, daemon=True).start()
    threading.Thread(target=fake.sample, daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
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
