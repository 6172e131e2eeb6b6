#!/usr/bin/env python3
"""Start real daemons for the clients' test suites and run a command.

    python3 tests/clients/harness.py [--no-sessions] -- COMMAND [ARG...]

Every daemon is a real plimsolld from PLIMSOLL_BUILD_DIR (default ./build)
with the same two callers' keys; the command gets their addresses in the
environment (docs/clients.md lists them) and its exit status is the
harness's.  The docker daemon for the session tests starts only when the
engine answers and --no-sessions is not given; without it
PLIMSOLL_TEST_SESSION_URL is unset and the suites say they skip.

The lowering proxy forwards every request to the wasm daemon unchanged and
rewrites the top-level "isolation" of a 200 answer to "none" on its way
back: a daemon (or a path) that lies about its wall.  GET /__proxy/count
answers {"count": N}, the requests it forwarded, so a test can show a
client did not retry.
"""
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
from harness import BUILD, Daemon, key_line, make_key  # noqa: E402

RUNNING_MESSAGES = ("Run", "RunInSession", "RunCell")


class LoweringProxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream_host, upstream_port):
        self.upstream = (upstream_host, upstream_port)
        self.count = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), ProxyHandler)


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "date",
                                 "server"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/__proxy/count":
            with self.server.lock:
                n = self.server.count
            self._answer(200, [("Content-Type", "application/json")],
                         json.dumps({"count": n}).encode())
            return
        self._forward("GET", b"")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self._forward("POST", self.rfile.read(n))

    def _forward(self, method, body):
        with self.server.lock:
            self.server.count += 1
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        c = http.client.HTTPConnection(*self.server.upstream, timeout=120)
        try:
            c.request(method, self.path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            status, rheaders = r.status, r.getheaders()
        finally:
            c.close()
        method_name = self.path.rsplit("/", 1)[-1]
        if status == 200 and method_name in RUNNING_MESSAGES:
            obj = json.loads(data)
            if isinstance(obj, dict) and "isolation" in obj:
                obj["isolation"] = "none"
                data = json.dumps(obj, separators=(",", ":")).encode()
        self._answer(status, rheaders, data)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def url(d):
    return "http://%s:%d" % (d.host, d.port)


def start(env, keys, timeout=30.0):
    d = Daemon(env=env, principals=tuple(keys))
    d.keys = dict(keys)
    with open(d.keys_file, "w") as f:
        for p, k in keys.items():
            f.write(key_line(p, k))
    return d.start(timeout=timeout)


def main(argv):
    sessions = True
    if argv and argv[0] == "--no-sessions":
        sessions, argv = False, argv[1:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: harness.py [--no-sessions] -- COMMAND [ARG...]\n")
        return 2
    cmd = argv[1:]
    module = os.path.join(BUILD, "tests", "hello.wasm")
    if not os.path.exists(module):
        sys.stderr.write("harness: %s is missing: build first\n" % module)
        return 2
    keys = {"client-a": make_key(), "client-b": make_key()}
    wasm = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "100000",
            "SANDBOX_RATE_BURST": "10000"}
    daemons = []
    proxy = None
    try:
        main_d = start(wasm, keys)
        daemons.append(main_d)
        rate = start(dict(wasm, SANDBOX_RATE_PER_MIN="60", SANDBOX_RATE_BURST="1"), keys)
        daemons.append(rate)
        cap = start(dict(wasm, SANDBOX_MAX_CONCURRENT="1", SANDBOX_PER_KEY_CONCURRENT="1"), keys)
        daemons.append(cap)
        disabled = start({"SANDBOX_PROVIDER": "disabled"}, keys)
        daemons.append(disabled)
        proxy = LoweringProxy(main_d.host, main_d.port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        env = dict(os.environ)
        env.update({
            "PLIMSOLL_TEST_URL": url(main_d),
            "PLIMSOLL_TEST_KEY": keys["client-a"],
            "PLIMSOLL_TEST_KEY_B": keys["client-b"],
            "PLIMSOLL_TEST_LOWERING_URL": "http://127.0.0.1:%d" % proxy.server_address[1],
            "PLIMSOLL_TEST_RATE_URL": url(rate),
            "PLIMSOLL_TEST_CAPACITY_URL": url(cap),
            "PLIMSOLL_TEST_DISABLED_URL": url(disabled),
            "PLIMSOLL_TEST_DEAD_URL": "http://127.0.0.1:%d" % free_port(),
            # tests/wasi/modules/hello.c, built by meson into the build tree
            "PLIMSOLL_TEST_WASM_MODULE": os.path.join(BUILD, "tests", "hello.wasm"),
        })
        env.pop("PLIMSOLL_TEST_SESSION_URL", None)
        if sessions:
            sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
            from test_docker import docker_env, engine_up
            if engine_up():
                t0 = time.monotonic()
                sd = start(docker_env("runc", "clients", SANDBOX_MAX_SESSIONS="6",
                                      SANDBOX_SESSION_DISK_MB="8", SANDBOX_SESSION_IDLE="60",
                                      SANDBOX_SESSION_LIFETIME="600",
                                      SANDBOX_DOCKER_WARM="0"), keys, timeout=240)
                daemons.append(sd)
                env["PLIMSOLL_TEST_SESSION_URL"] = url(sd)
                sys.stderr.write("harness: session daemon up in %.1f s\n"
                                 % (time.monotonic() - t0))
            else:
                sys.stderr.write("harness: the docker engine is not running; "
                                 "no PLIMSOLL_TEST_SESSION_URL\n")
        return subprocess.call(cmd, env=env)
    finally:
        if proxy:
            proxy.shutdown()
        for d in daemons:
            d.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
