#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Start real daemons for the clients' test suites and run a command.

    python3 tests/clients/harness.py [--no-sessions] -- COMMAND [ARG...]

Every daemon is a real plimsolld from PLIMSOLL_BUILD_DIR (default ./build)
with the same two callers' keys; the command gets their addresses in the
environment (docs/clients.md lists them) and its exit status is the
harness's.  The docker daemon for the session tests starts only when the
engine answers and --no-sessions is not given; without it
PLIMSOLL_TEST_SESSION_URL is unset and the suites say they skip.  It runs
with PLIMSOLL_INSTANCE=clients-docker, so its sessions' route (the
OpenSession answer's "route" and every answer's Plimsoll-Route header) is
that name, exported as PLIMSOLL_TEST_SESSION_ROUTE with the URL; a call
naming another route there is refused WRONG_ROUTE.

The lowering proxy forwards every request to the wasm daemon unchanged and
rewrites the top-level "isolation" of a 200 answer to "none" on its way
back: a daemon (or a path) that lies about its wall.  GET /__proxy/count
answers {"count": N}, the requests it forwarded, so a test can show a
client did not retry.

The hostile daemon serves tests/vectors/hostile_answers.json: case NAME
answers at PLIMSOLL_TEST_HOSTILE_URL + "/NAME" (the client's URL, so its
calls go to /NAME/plimsoll.v1.SandboxService/METHOD) with exactly what the
case describes: bytes no real daemon would send, too many of them, or too
slowly. It also answers every reason of tests/vectors/reasons.json as the
daemon sends it, whatever the call: PLIMSOLL_TEST_HOSTILE_URL +
"/reason/REASON" gives the reason's Connect error with its code and HTTP
status, its ErrorInfo both as JSON ("debug") and as protobuf ("value"),
and metadata.dispatched as the file says; each client's suite checks the
typed error it makes of each against the file.
"""
import base64
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
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from plimsoll_test.harness import BUILD, Daemon, key_line, make_key  # noqa: E402

RUNNING_MESSAGES = ("Run", "RunInSession", "RunCell")
SESSION_ROUTE = "clients-docker"  # the session daemon's PLIMSOLL_INSTANCE
HOSTILE_VECTORS = os.path.join(ROOT, "tests", "vectors", "hostile_answers.json")
REASON_VECTORS = os.path.join(ROOT, "tests", "vectors", "reasons.json")


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


class HostileDaemon(http.server.ThreadingHTTPServer):
    """Answers each case of hostile_answers.json as the case says."""

    daemon_threads = True
    longest = 120.0  # no answer is dripped or stalled for longer than this

    def __init__(self, path=HOSTILE_VECTORS, reasons=REASON_VECTORS):
        with open(path, encoding="utf-8") as f:
            self.cases = {c["name"]: c for c in json.load(f)["cases"]}
        with open(reasons, encoding="utf-8") as f:
            self.reasons = {r["reason"]: refusal_answer(r) for r in json.load(f)["reasons"]}
        self.stopping = threading.Event()
        super().__init__(("127.0.0.1", 0), HostileHandler)

    def shutdown(self):
        self.stopping.set()
        super().shutdown()


STATUS_TEXT = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
               404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
               501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable"}


def protobuf_field(number, data):
    """One length-delimited protobuf field."""
    n, size = len(data), b""
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return bytes([number << 3 | 2]) + size + data


def refusal_answer(entry):
    """The answer the daemon sends for a reason of reasons.json (docs/api.md,
    "The three channels"): a Connect error whose first detail is the
    google.rpc.ErrorInfo, as unpadded base64 protobuf and as JSON."""
    metadata = {"dispatched": "true" if entry["dispatched"] else "false",
                "isolation": "process"}
    info = protobuf_field(1, entry["reason"].encode()) + protobuf_field(2, b"plimsoll")
    for k, v in sorted(metadata.items()):
        info += protobuf_field(3, protobuf_field(1, k.encode()) + protobuf_field(2, v.encode()))
    body = {"code": entry["code"],
            "message": "%s, as tests/vectors/reasons.json says: %s" % (entry["reason"],
                                                                      entry["meaning"]),
            "details": [{"type": "google.rpc.ErrorInfo",
                         "value": base64.b64encode(info).decode("ascii").rstrip("="),
                         "debug": {"reason": entry["reason"], "domain": "plimsoll",
                                   "metadata": metadata}}]}
    return {"status": entry["http_status"],
            "headers": [["Content-Type", "application/json"]],
            "body": json.dumps(body, separators=(",", ":"))}


def body_chunks(answer, block=1 << 16):
    """The answer's body in pieces of about `block` bytes."""
    if "body_base64" in answer:
        yield base64.b64decode(answer["body_base64"])
        return
    if "body" in answer:
        data = answer["body"].encode("utf-8")
        for i in range(0, len(data), block):
            yield data[i:i + block]
        return
    for part in answer["body_parts"]:
        unit = part["text"].encode("utf-8")
        n = part.get("repeat", 1)
        if not unit or not n:
            continue
        per = max(1, block // len(unit))
        whole = unit * per
        for _ in range(n // per):
            yield whole
        if n % per:
            yield unit * (n % per)


def body_length(answer):
    if "body_base64" in answer:
        return len(base64.b64decode(answer["body_base64"]))
    if "body" in answer:
        return len(answer["body"].encode("utf-8"))
    return sum(len(p["text"].encode("utf-8")) * p.get("repeat", 1) for p in answer["body_parts"])


class HostileHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._plain(404, b"POST a case's call\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.close_connection = True
        parts = self.path.split("/")
        if len(parts) == 5 and parts[1] == "reason" and parts[3] == "plimsoll.v1.SandboxService":
            answer = self.server.reasons.get(parts[2])
            if not answer:
                self._plain(404, b"no such reason in tests/vectors/reasons.json\n")
                return
            try:
                self._serve(answer)
            except OSError:
                pass
            return
        case = self.server.cases.get(parts[1]) if len(parts) == 4 else None
        if not case or parts[2] != "plimsoll.v1.SandboxService" or parts[3] != case["call"]:
            self._plain(404, b"no such case or call\n")
            return
        try:
            self._serve(case["answer"])
        except OSError:
            pass  # the client hung up: what most cases want of it

    def _plain(self, status, body):
        self.close_connection = True
        self.wfile.write(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (status, STATUS_TEXT.get(status, "X")
                                                             .encode(), len(body), body))

    def _wait(self, seconds):
        """Sleep unless the harness is stopping; False when it is."""
        return not self.server.stopping.wait(seconds)

    def _send(self, data, drip):
        if not drip:
            self.wfile.write(data)
            return
        step, pause = drip["bytes"], drip["interval_ms"] / 1000.0
        t0 = time.monotonic()
        for i in range(0, len(data), step):
            if time.monotonic() - t0 > self.server.longest or not self._wait(pause):
                raise ConnectionAbortedError("enough dripping")
            self.wfile.write(data[i:i + step])
            self.wfile.flush()

    def _serve(self, a):
        if a.get("stall_ms"):
            self._wait(min(a["stall_ms"] / 1000.0, self.server.longest))
            return
        status = a["status"]
        head = ["HTTP/1.1 %d %s" % (status, STATUS_TEXT.get(status, "Status"))]
        head += ["%s: %s" % (k, v) for k, v in a.get("headers", [])]
        length = a.get("length", "exact")
        chunked = length == "chunked"
        if chunked:
            head.append("Transfer-Encoding: chunked")
        else:
            head.append("Content-Length: %d" % (body_length(a) if length == "exact" else length))
        head.append("Connection: close")
        drip = a.get("drip")
        self._send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"),
                   drip if drip and drip["phase"] == "headers" else None)
        body_drip = drip if drip and drip["phase"] == "body" else None
        for chunk in body_chunks(a):
            if chunked:
                chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            self._send(chunk, body_drip)
        if chunked:
            self._send(b"0\r\n\r\n", None)
        self.wfile.flush()


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
    proxy = hostile = None
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
        hostile = HostileDaemon()
        threading.Thread(target=hostile.serve_forever, daemon=True).start()
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
            "PLIMSOLL_TEST_HOSTILE_URL": "http://127.0.0.1:%d" % hostile.server_address[1],
            # tests/wasi/modules/hello.c, built by meson into the build tree
            "PLIMSOLL_TEST_WASM_MODULE": os.path.join(BUILD, "tests", "hello.wasm"),
        })
        env.pop("PLIMSOLL_TEST_SESSION_URL", None)
        env.pop("PLIMSOLL_TEST_SESSION_ROUTE", None)
        if sessions:
            from plimsoll_test.docker import docker_env, engine_up
            if engine_up():
                t0 = time.monotonic()
                sd = start(docker_env("runc", "clients", SANDBOX_MAX_SESSIONS="6",
                                      SANDBOX_SESSION_DISK_MB="8", SANDBOX_SESSION_IDLE="60",
                                      SANDBOX_SESSION_LIFETIME="600",
                                      SANDBOX_DOCKER_WARM="0",
                                      # small, so the artifact tests meet both
                                      # bounds with a few small files
                                      SANDBOX_COLLECT_FILES="8",
                                      SANDBOX_COLLECT_BYTES="65536",
                                      # small, so a cell meets the display
                                      # bound with a few small outputs
                                      SANDBOX_DISPLAY_OUTPUTS="8",
                                      # its sessions' route (fleets)
                                      PLIMSOLL_INSTANCE=SESSION_ROUTE), keys, timeout=240)
                daemons.append(sd)
                env["PLIMSOLL_TEST_SESSION_URL"] = url(sd)
                env["PLIMSOLL_TEST_SESSION_ROUTE"] = SESSION_ROUTE
                sys.stderr.write("harness: session daemon up in %.1f s\n"
                                 % (time.monotonic() - t0))
            else:
                sys.stderr.write("harness: the docker engine is not running; "
                                 "no PLIMSOLL_TEST_SESSION_URL\n")
        return subprocess.call(cmd, env=env)
    finally:
        if proxy:
            proxy.shutdown()
        if hostile:
            hostile.shutdown()
        for d in daemons:
            d.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
