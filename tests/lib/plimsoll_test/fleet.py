# SPDX-License-Identifier: Apache-2.0
"""A fleet on loopback: N real plimsolld (docker provider, one engine,
distinct instances) sharing one keys file, behind Debian's HAProxy running
the project's own deploy/haproxy.cfg unchanged (only its environment is
this fleet's).  tests/fleet and bench/fleet.py use it.

    with Fleet(n=3) as f:
        f.proxy_url, f.daemons["d1"], f.rpc("Run", {...})
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .docker import RUN_TAG, docker_env, ours, require_engine
from .grants import free_port
from .harness import ROOT, Daemon, exchange, key_line, make_key
from .pki import make_pki

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
CONFIG = os.path.join(ROOT, "deploy", "haproxy.cfg")
SERVICE = "/plimsoll.v1.SandboxService/"


class Fleet:
    def __init__(self, n=3, runtime="runc", instance="fleet", settings=None, tls=False):
        self.n = n
        self.runtime = runtime
        self.instance = instance
        self.settings = dict(settings or {})
        self.tls = tls
        self.dir = tempfile.mkdtemp(prefix="plimsoll-fleet-")
        self.keys = {p: make_key() for p in ("alice", "bob")}
        self.keys_file = os.path.join(self.dir, "keys")
        with open(self.keys_file, "w") as f:
            for p, k in self.keys.items():
                f.write(key_line(p, k))
        self.daemons = {}
        self.proxy = None
        self.log_path = os.path.join(self.dir, "haproxy.log")

    # ---- the daemons ---------------------------------------------------
    def name(self, i):
        return "d%d" % i

    def docker_instance(self, name):
        """The daemon's SANDBOX_DOCKER_INSTANCE before RUN_TAG."""
        return "%s-%s" % (self.instance, name)

    def daemon_env(self, name, port):
        env = docker_env(self.runtime, self.docker_instance(name), **{
            "PLIMSOLL_INSTANCE": name, "PLIMSOLL_KEYS_FILE": self.keys_file,
            "PLIMSOLL_LISTEN": "127.0.0.1:%d" % port, "SANDBOX_MAX_SESSIONS": "8",
            "SANDBOX_MAX_CONCURRENT": "6", "SANDBOX_PER_KEY_CONCURRENT": "6"})
        env.update(self.settings)
        return env

    def start_daemon(self, name, port):
        d = Daemon(env=self.daemon_env(name, port))
        d.keys = dict(self.keys)
        d.start(timeout=120)
        self.daemons[name] = d
        return d

    # ---- the proxy -----------------------------------------------------
    def proxy_env(self):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PLIMSOLL_PROXY_BIND": "127.0.0.1:%d" % self.proxy_port}
        for i in range(1, self.n + 1):
            env["PLIMSOLL_D%d" % i] = "127.0.0.1:%d" % self.ports[self.name(i)]
        if self.tls:
            env["PLIMSOLL_PROXY_TLS_BIND"] = "127.0.0.1:%d" % self.tls_port
            env["PLIMSOLL_PROXY_TLS_PEM"] = self.pem
        return env

    def start_proxy(self):
        self.proxy_log = open(self.log_path, "ab")
        self.proxy = subprocess.Popen([HAPROXY, "-db", "-f", CONFIG], env=self.proxy_env(),
                                      stdin=subprocess.DEVNULL, stdout=self.proxy_log,
                                      stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proxy.poll() is not None:
                raise RuntimeError("haproxy exited %d: %s" % (self.proxy.returncode,
                                                             self.proxy_text()))
            if all(self.proxy_up(n) for n in self.daemons):
                return
            time.sleep(0.1)
        raise RuntimeError("haproxy did not find every daemon ready: " + self.proxy_text())

    def proxy_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def proxy_up(self, name):
        """Whether the proxy routes a call named for daemon `name` there: a
        Describe naming it is answered by it (a server the proxy holds down
        gets the call balanced elsewhere, which answers WRONG_ROUTE)."""
        try:
            status, headers, _ = self.request("POST", SERVICE + "Describe", b"{}",
                                              self.headers(route=name))
        except OSError:
            return False
        return status == 200 and headers.get("plimsoll-route") == name

    def wait_proxy(self, name, up, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proxy_up(name) == up:
                return
            time.sleep(0.1)
        raise AssertionError("the proxy did not see %s %s: %s" % (
            name, "up" if up else "down", self.proxy_text()[-4000:]))

    # ---- the whole -----------------------------------------------------
    def start(self):
        require_engine()
        if self.tls:
            pki = make_pki(self.dir)
            self.pem = os.path.join(self.dir, "proxy.pem")
            with open(self.pem, "w") as out:
                for part in (pki["server"] + ".pem", pki["server"] + ".key"):
                    with open(part) as f:
                        out.write(f.read())
            self.ca = pki["ca"] + ".pem"
            self.tls_port = free_port("127.0.0.1")
        self.ports = {}
        for i in range(1, self.n + 1):
            self.ports[self.name(i)] = free_port("127.0.0.1")
        self.proxy_port = free_port("127.0.0.1")
        try:
            for i in range(1, self.n + 1):
                self.start_daemon(self.name(i), self.ports[self.name(i)])
            self.start_proxy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.proxy and self.proxy.poll() is None:
            self.proxy.send_signal(signal.SIGUSR1)  # soft stop
            try:
                self.proxy.wait(10)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait()
        if getattr(self, "proxy_log", None):
            self.proxy_log.close()
        for d in self.daemons.values():
            d.stop()

    def leftovers_of(self, name):
        """Every container (any state) of daemon `name`'s instance."""
        return ours(self.docker_instance(name))

    def leftovers(self):
        """Every container left of any of this fleet's daemons."""
        out = []
        for i in range(1, self.n + 1):
            out += ours(self.docker_instance(self.name(i)))
        return out

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- calls through the proxy ---------------------------------------
    def headers(self, principal="alice", route=None, extra=None):
        h = {"Content-Type": "application/json",
             "Authorization": "Bearer " + self.keys[principal]}
        if route:
            h["Plimsoll-Route"] = route
        h.update(extra or {})
        return h

    def request(self, method, path, body=None, headers=None, timeout=120):
        """One request to the proxy on a connection of its own:
        (status, headers in lower case, body), as Daemon.request."""
        c = http.client.HTTPConnection("127.0.0.1", self.proxy_port, timeout=timeout)
        try:
            return exchange(c, method, path, body, headers)
        finally:
            c.close()

    def rpc(self, method, message, route=None, principal="alice"):
        """A Connect JSON call through the proxy: (status, answer, the
        Plimsoll-Route of the daemon that answered)."""
        status, headers, data = self.request("POST", SERVICE + method,
                                             json.dumps(message).encode(),
                                             self.headers(principal, route))
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = {"not_json": data.decode("utf-8", "replace")}
        return status, body, headers.get("plimsoll-route")


class ProxyView:
    """A fleet seen as one daemon at the proxy's address (the docs
    runner's `fleet` kind): host, port, keys, rpc, log_text, stop."""

    def __init__(self, fleet):
        self.f = fleet
        self.host, self.port = "127.0.0.1", fleet.proxy_port
        self.keys = fleet.keys

    def rpc(self, method, message, principal="alice", route=None):
        status, body, _ = self.f.rpc(method, message, route=route, principal=principal)
        return status, body

    def log_text(self):
        return self.f.proxy_text()

    def stop(self):
        self.f.stop()


__all__ = ["Fleet", "ProxyView", "RUN_TAG", "HAPROXY", "CONFIG"]
