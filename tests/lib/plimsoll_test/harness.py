# SPDX-License-Identifier: Apache-2.0
"""Start the real plimsolld and talk to it over HTTP.

Every API test goes through this: a daemon process built from this tree
(PLIMSOLL_BUILD_DIR, default ./build), its own keys file and a free port
(PLIMSOLL_LISTEN=127.0.0.1:0; the port is read from the "listening" log
line), standard library only.  ClassDaemon gives a test class one daemon
for all its tests.
"""
import base64
import hashlib
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time

# tests/lib/plimsoll_test/harness.py: the repository is four folders up.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("PLIMSOLL_BUILD_DIR", os.path.join(ROOT, "build"))
PLIMSOLLD = os.path.join(BUILD, "plimsolld")
CLI = os.path.join(BUILD, "plimsoll")
SERVICE = "/plimsoll.v1.SandboxService/"


def build_is_sanitized():
    """Whether PLIMSOLL_BUILD_DIR was configured with -Db_sanitize=address..."""
    path = os.path.join(BUILD, "meson-info", "intro-buildoptions.json")
    try:
        with open(path) as f:
            opts = json.load(f)
    except (OSError, ValueError):
        return False
    return any(o["name"] == "b_sanitize" and "address" in str(o["value"]) for o in opts)


def make_key():
    return "plk_" + secrets.token_urlsafe(32)


def key_line(principal, key):
    return "%s %s\n" % (principal, hashlib.sha256(key.encode()).hexdigest())


class Daemon:
    """One plimsolld process. Use as a context manager."""

    # Every daemon started in this process: tests/run.py fails a module
    # that leaves one running (it would run on, with its warm containers,
    # through the rest of the suite).
    started = []

    def __init__(self, env=None, principals=("alice", "bob"), listen="127.0.0.1:0"):
        self.dir = tempfile.mkdtemp(prefix="plimsoll-test-")
        self.keys = {p: make_key() for p in principals}
        self.keys_file = os.path.join(self.dir, "keys")
        with open(self.keys_file, "w") as f:
            f.write("# test callers\n")
            for p, k in self.keys.items():
                f.write(key_line(p, k))
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PLIMSOLL_KEYS_FILE": self.keys_file,
            "PLIMSOLL_LISTEN": listen,
        }
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]
        for k, v in (env or {}).items():
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = v
        self.proc = None
        self.host = None
        self.port = None
        self.unix_path = None

    def start(self, timeout=20.0):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([PLIMSOLLD], env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        Daemon.started.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log_lines():
                if line.get("msg") == "listening":
                    addr = line["address"]
                    if addr.startswith("unix:"):
                        self.unix_path = addr[5:]
                    else:
                        host, _, port = addr.rpartition(":")
                        self.host, self.port = host.strip("[]"), int(port)
                    return self
            if self.proc.poll() is not None:
                self.check_sanitizers()
                raise RuntimeError("plimsolld exited %d: %s" % (self.proc.returncode,
                                                               self.log_text()))
            time.sleep(0.02)
        raise RuntimeError("plimsolld did not start: " + self.log_text())

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_lines(self):
        out = []
        for raw in self.log_text().splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                pass
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
        self.check_sanitizers()
        return self.proc.returncode if self.proc else None

    # What AddressSanitizer, LeakSanitizer and UBSan write when they find
    # something (a build with them: scripts/test's ASan build).
    SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

    def check_sanitizers(self):
        """A sanitizer's report in the daemon's log fails the test that
        stopped it, whatever the exit status says (a startup refusal's log
        counts too)."""
        if not os.path.exists(self.log_path):
            return
        text = self.log_text()
        for marker in self.SANITIZER_REPORTS:
            at = text.find(marker)
            if at >= 0:
                raise AssertionError("plimsolld's log has a sanitizer report:\n" +
                                     text[max(0, at - 200):at + 3000])

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- HTTP -------------------------------------------------------------
    def connection(self, timeout=60):
        if self.unix_path:
            return UnixHTTPConnection(self.unix_path, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, conn=None):
        own = conn is None
        c = conn or self.connection()
        try:
            return exchange(c, method, path, body, headers)
        finally:
            if own:
                c.close()

    def rpc(self, method, message, principal="alice", key=None, raw=None, headers=None,
            conn=None):
        """A Connect unary call; returns (status, parsed JSON body)."""
        h = {"Content-Type": "application/json"}
        k = key if key is not None else self.keys.get(principal)
        if k:
            h["Authorization"] = "Bearer " + k
        h.update(headers or {})
        body = raw if raw is not None else json.dumps(message).encode()
        status, _, data = self.request("POST", SERVICE + method, body, h, conn=conn)
        return status, json.loads(data) if data else None


def exchange(conn, method, path, body=None, headers=None):
    """One request on conn: (status, its headers in lower case, its body)."""
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


class ClassDaemon:
    """Mixin for a TestCase: one daemon (cls.d) for all the class's tests,
    started with the settings DAEMON_ENV and stopped after the last."""
    DAEMON_ENV = None

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env=cls.DAEMON_ENV).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def metrics(d):
    """Daemon d's /metrics (read with alice's key) as {series: value}."""
    status, _, data = d.request("GET", "/metrics",
                                headers={"Authorization": "Bearer " + d.keys["alice"]})
    if status != 200:
        raise AssertionError("/metrics: %d %r" % (status, data))
    out = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def error_info(body):
    """Decode details[0] of a Connect error: the protobuf bytes and the debug copy."""
    d = body["details"][0]
    assert d["type"] == "google.rpc.ErrorInfo", d
    v = d["value"]
    raw = base64.b64decode(v + "=" * (-len(v) % 4))
    return parse_error_info(raw), d.get("debug")


def _varint(b, i):
    shift = n = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def _fields(b):
    i = 0
    while i < len(b):
        tag, i = _varint(b, i)
        if tag & 7 != 2:
            raise ValueError("unexpected wire type %d" % (tag & 7))
        n, i = _varint(b, i)
        yield tag >> 3, b[i:i + n]
        i += n


def parse_error_info(raw):
    out = {"reason": "", "domain": "", "metadata": {}}
    for field, val in _fields(raw):
        if field == 1:
            out["reason"] = val.decode()
        elif field == 2:
            out["domain"] = val.decode()
        elif field == 3:
            kv = dict(_fields(val))
            out["metadata"][kv[1].decode()] = kv[2].decode()
    return out


def run_startup(env, timeout=10.0):
    """Start plimsolld expecting it to refuse; returns (exit code, stderr text)."""
    d = Daemon(env=env)
    p = subprocess.run([PLIMSOLLD], env=d.env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode("utf-8", "replace")
