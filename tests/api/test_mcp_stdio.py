# SPDX-License-Identifier: Apache-2.0
"""`plimsoll mcp`, the stdio face of the daemon's MCP server, driven as a
subprocess with raw JSON lines (MCP's stdio transport).

Two kinds of cases.  The relay's own behaviour runs against a small HTTP
stand-in of /mcp written here (StandIn), which can answer what the daemon
never does (HTML from a proxy, an event stream, an answer past the cap,
a forgotten session): an over-long line skipped with an error and the next
message still relayed, a line at the bound relayed, a non-JSON line, a
slow request not holding up a ping, the session's headers on every later
POST and the floor on initialize only, a 404 answered by a re-initialize
and one resend, an HTTP error's JSON-RPC error given the request's id, the
end of stdin and SIGTERM each ending the session (DELETE) with exit 0,
the daemon out of reach, usage errors.  Then the same relay against a
real wasm daemon: a ping answered while a 1.5 s run_code is in flight,
the MCP session deleted at the end of stdin (a later POST with its id is
404), a daemon restarted on the same port between two calls, and
--minimum-isolation vm refusing run_code on the wasm (process) tier.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_mcp_stdio
"""
import http.client
import http.server
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.harness import CLI, Daemon  # noqa: E402
from plimsoll_test.grants import free_port  # noqa: E402

WASM = {"SANDBOX_PROVIDER": "wasm"}
VERSION = "2025-11-25"
BUSY_JS = "const t=Date.now(); while(Date.now()-t<1500){}"


def initialize(id_=1, **params):
    p = {"protocolVersion": VERSION, "capabilities": {},
         "clientInfo": {"name": "test_mcp_stdio", "version": "1"}}
    p.update(params)
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": p}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def request(id_, method, params=None):
    m = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        m["params"] = params
    return m


class Relay:
    """One `plimsoll mcp` process: lines in, lines out (each checked to be
    one JSON-RPC message), stderr kept."""

    def __init__(self, url, key="plk_standin", args=(), env=None):
        e = {"PATH": os.environ.get("PATH", ""), "PLIMSOLL_URL": url, "PLIMSOLL_KEY": key}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                e[k] = os.environ[k]
        e.update(env or {})
        self.proc = subprocess.Popen([CLI, "mcp"] + list(args), env=e, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.err = b""
        self.t_out = threading.Thread(target=self._read_out, daemon=True)
        self.t_err = threading.Thread(target=self._read_err, daemon=True)
        self.t_out.start()
        self.t_err.start()

    def _read_out(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def _read_err(self):
        self.err = self.proc.stderr.read()

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self, timeout=30):
        raw = self.lines.get(timeout=timeout)
        if raw is None:
            raise AssertionError("the relay's stdout ended; stderr: %s" % self.stderr())
        if not raw.endswith(b"\n") or b"\n" in raw[:-1]:
            raise AssertionError("not one line: %r" % raw)
        m = json.loads(raw)
        if not isinstance(m, dict) or m.get("jsonrpc") != "2.0":
            raise AssertionError("not a JSON-RPC message on stdout: %r" % raw)
        return m

    def call(self, msg, timeout=30):
        self.send(msg)
        return self.recv(timeout)

    def close_stdin(self):
        self.proc.stdin.close()

    def wait(self, timeout=15):
        code = self.proc.wait(timeout)
        self.t_out.join(5)
        self.t_err.join(5)
        self._close()
        return code

    def _close(self):
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def stderr(self):
        return self.err.decode("utf-8", "replace")

    def no_more_lines(self):
        """What stdout held past what the test read (after wait())."""
        rest = []
        while True:
            try:
                raw = self.lines.get_nowait()
            except queue.Empty:
                break
            if raw is not None:
                rest.append(raw)
        return rest

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.t_out.join(5)
        self.t_err.join(5)
        self._close()


# ---- a stand-in of the daemon's /mcp ----------------------------------------

class QuietServer(http.server.ThreadingHTTPServer):
    """A client that hangs up mid-answer (the relay refusing an answer
    past its cap) is no error of the test's."""
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


class StandIn:
    """/mcp as the contract says it answers, with methods of its own to
    make it answer what a test needs:

      slow     answered after 1.5 s
      echo     the request's Mcp-Session-Id and MCP-Protocol-Version
      html     502 text/html, a proxy's page
      rpcerror 400 with a JSON-RPC error of id null
      sse      200 text/event-stream: a notification, then the answer
      big      an answer of 2 MB
      accepted 202 with no body (a request answered as a notification)

    Every request is kept in self.seen as (method, headers, body)."""

    def __init__(self):
        self.seen = []
        self.sessions = set()
        self.count = 0
        self.lock = threading.Lock()
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status, body=b"", ctype="application/json", headers=()):
                if isinstance(body, (dict, list)):
                    body = json.dumps(body, indent=2).encode()  # lines in it
                self.send_response(status)
                if body:
                    self.send_header("Content-Type", ctype)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_DELETE(self):
                sid = self.headers.get("Mcp-Session-Id")
                with standin.lock:
                    standin.seen.append(("DELETE", dict(self.headers), b""))
                    known = sid in standin.sessions
                    standin.sessions.discard(sid)
                self.answer(204 if known else 404)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with standin.lock:
                    standin.seen.append(("POST", dict(self.headers), body))
                m = json.loads(body)
                sid = self.headers.get("Mcp-Session-Id")
                method = m.get("method")
                if method == "initialize":
                    with standin.lock:
                        standin.count += 1
                        sid = "session-%d" % standin.count
                        standin.sessions.add(sid)
                    res = {"protocolVersion": VERSION, "capabilities": {"tools": {}},
                           "serverInfo": {"name": "standin", "version": "0"}}
                    return self.answer(200, {"jsonrpc": "2.0", "id": m["id"], "result": res},
                                       headers=[("Mcp-Session-Id", sid)])
                if sid is None:
                    return self.answer(400, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32600, "message": "send initialize first"}})
                if sid not in standin.sessions:
                    return self.answer(404, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32001, "message": "session not found"}})
                if "id" not in m:
                    return self.answer(202)
                if method == "slow":
                    time.sleep(1.5)
                if method == "html":
                    return self.answer(502, b"<html><body>Bad Gateway</body></html>",
                                       "text/html")
                if method == "rpcerror":
                    return self.answer(400, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32602, "message": "no such thing"}})
                if method == "accepted":
                    return self.answer(202)
                if method == "sse":
                    events = ("event: message\ndata: " + json.dumps({
                        "jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progress": 1}}) + "\n\n: a comment\n" +
                        "data: {\"jsonrpc\": \"2.0\",\r\ndata:  \"id\": %s, \"result\": {}}\n\n"
                        % json.dumps(m["id"]))
                    return self.answer(200, events.encode(), "text/event-stream")
                result = {"method": method}
                if method == "echo":
                    result["session"] = sid
                    result["version"] = self.headers.get("MCP-Protocol-Version")
                    result["floor"] = self.headers.get("Plimsoll-Minimum-Isolation")
                if method == "big":
                    result["pad"] = "x" * 2000000
                return self.answer(200, {"jsonrpc": "2.0", "id": m["id"], "result": result})

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def posts(self):
        with self.lock:
            return [(h, json.loads(b)) for m, h, b in self.seen if m == "POST"]

    def deletes(self):
        with self.lock:
            return [h for m, h, _ in self.seen if m == "DELETE"]


class RelayOwnBehaviour(unittest.TestCase):
    def setUp(self):
        self.standin = StandIn()
        self.relays = []

    def tearDown(self):
        for r in self.relays:
            r.kill()
        self.standin.stop()

    def relay(self, args=(), env=None, url=None):
        r = Relay(url or self.standin.url, args=args, env=env)
        self.relays.append(r)
        return r

    def started(self, args=(), env=None):
        r = self.relay(args, env)
        self.assertEqual(r.call(initialize())["result"]["protocolVersion"], VERSION)
        r.send(INITIALIZED)
        # The relay sends a notification before it reads on: the ping's
        # answer says notifications/initialized reached the stand-in.
        self.assertEqual(r.call(request("sync", "ping"))["id"], "sync")
        return r

    def test_session_headers_and_the_floor_on_initialize_only(self):
        r = self.started(args=["--minimum-isolation", "vm"])
        res = r.call(request(2, "echo"))["result"]
        self.assertEqual(res, {"method": "echo", "session": "session-1", "version": VERSION,
                               "floor": None})
        posts = self.standin.posts()
        self.assertEqual(posts[0][0].get("Plimsoll-Minimum-Isolation"), "vm")
        self.assertIsNone(posts[0][0].get("Mcp-Session-Id"))
        for h, _ in posts:
            self.assertEqual(h["Content-Type"], "application/json")
            self.assertEqual(h["Accept"], "application/json, text/event-stream")
            self.assertEqual(h["Authorization"], "Bearer plk_standin")
        self.assertEqual(posts[1][1], INITIALIZED)
        self.assertEqual(posts[1][0]["Mcp-Session-Id"], "session-1")
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())

    def test_over_long_line_is_skipped_and_the_next_message_works(self):
        r = self.started(args=["--max-message-bytes", "1000"])
        # Exactly the bound: relayed.
        at = request(2, "echo", {"pad": ""})
        at["params"]["pad"] = "y" * (1000 - len(json.dumps(at)))
        self.assertEqual(len(json.dumps(at)), 1000)
        self.assertEqual(r.call(at)["id"], 2)
        # One byte past it, then far past it (many reads): an error each,
        # id null, and the message after each still answered.
        past = request(3, "echo", {"pad": "y" * (len(at["params"]["pad"]) + 1)})
        self.assertEqual(len(json.dumps(past)), 1001)
        r.send(past)
        err = r.recv()
        self.assertIsNone(err["id"])
        self.assertEqual(err["error"]["code"], -32600)
        self.assertEqual(r.call(request(4, "ping"))["id"], 4)
        r.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"echo","params":{"pad":"' +
                   b"z" * (3 << 20) + b'"}}\n')
        err = r.recv()
        self.assertEqual((err["id"], err["error"]["code"]), (None, -32600))
        self.assertEqual(r.call(request(6, "ping"))["result"], {"method": "ping"})
        # Neither over-long message reached the daemon.
        ids = [m.get("id") for _, m in self.standin.posts()]
        self.assertNotIn(3, ids)
        self.assertNotIn(5, ids)
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())
        self.assertEqual(r.no_more_lines(), [])

    def test_not_json_and_blank_lines(self):
        r = self.started()
        r.send_raw(b"\n   \n\r\n")
        r.send_raw(b"{not json\n")
        err = r.recv()
        self.assertEqual((err["id"], err["error"]["code"]), (None, -32700))
        r.send_raw(b'{"jsonrpc":"2.0","id":"s","method":"echo"}\r\n')  # CRLF taken too
        self.assertEqual(r.recv()["id"], "s")
        r.send_raw(b"\xff\xfe\n")  # not UTF-8: not JSON
        self.assertEqual(r.recv()["error"]["code"], -32700)
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())
        self.assertEqual(r.no_more_lines(), [])

    def test_a_ping_is_not_held_up_by_a_slow_request(self):
        r = self.started()
        r.send(request(2, "slow"))
        r.send(request(3, "ping"))
        first, second = r.recv(), r.recv()
        self.assertEqual((first["id"], second["id"]), (3, 2))

    def test_more_requests_than_in_flight_all_answered(self):
        r = self.started()
        for i in range(12):
            r.send(request(100 + i, "slow"))
        got = sorted(r.recv(10)["id"] for _ in range(12))
        self.assertEqual(got, list(range(100, 112)))

    def test_answers_are_one_line_each(self):
        r = self.started()
        # The stand-in indents its JSON: the relay writes it compact.
        self.assertEqual(r.call(request(2, "echo"))["result"]["session"], "session-1")

    def test_a_forgotten_session_is_initialized_again_and_the_message_resent(self):
        r = self.started()
        self.standin.sessions.clear()  # as a restarted daemon
        res = r.call(request(2, "echo"))
        self.assertEqual(res["id"], 2)
        self.assertEqual(res["result"]["session"], "session-2")
        posts = self.standin.posts()
        inits = [m for _, m in posts if m.get("method") == "initialize"]
        self.assertEqual(len(inits), 2)
        self.assertEqual(inits[0], inits[1])  # the kept initialize, as it was
        after = [m.get("method") for _, m in posts[-3:]]
        self.assertEqual(after, ["initialize", "notifications/initialized", "echo"])
        self.assertEqual(posts[-2][0]["Mcp-Session-Id"], "session-2")
        # Nothing but the answer reached stdout (the second initialize's
        # answer is the relay's own).
        self.assertEqual(r.call(request(3, "ping"))["id"], 3)
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())
        self.assertEqual(r.no_more_lines(), [])
        self.assertEqual(self.standin.deletes()[-1]["Mcp-Session-Id"], "session-2")

    def test_http_errors(self):
        r = self.started()
        # A JSON-RPC error of id null answering a request: the request's id.
        e = r.call(request("q", "rpcerror"))
        self.assertEqual(e["id"], "q")
        self.assertEqual(e["error"], {"code": -32602, "message": "no such thing"})
        # A proxy's HTML: -32603 with the id, what failed in the message.
        e = r.call(request(7, "html"))
        self.assertEqual(e["id"], 7)
        self.assertEqual(e["error"]["code"], -32603)
        self.assertTrue(e["error"]["message"].startswith("plimsolld: HTTP 502"), e)
        # A request answered 202: no answer would ever come, so an error.
        e = r.call(request(8, "accepted"))
        self.assertEqual((e["id"], e["error"]["code"]), (8, -32603))
        # A notification's failure goes to stderr only.
        r.send({"jsonrpc": "2.0", "method": "html"})
        self.assertEqual(r.call(request(9, "ping"))["id"], 9)
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())
        self.assertEqual(r.no_more_lines(), [])

    def test_an_event_stream_answer(self):
        r = self.started()
        r.send(request(4, "sse"))
        note, answer = r.recv(), r.recv()
        self.assertEqual(note["method"], "notifications/progress")
        self.assertEqual(answer, {"jsonrpc": "2.0", "id": 4, "result": {}})

    def test_an_answer_past_the_cap_is_an_error_for_that_request(self):
        r = self.started(env={"PLIMSOLL_MAX_ANSWER_BYTES": "1000000"})
        e = r.call(request(5, "big"))
        self.assertEqual((e["id"], e["error"]["code"]), (5, -32603))
        self.assertIn("max_answer_bytes", e["error"]["message"])
        self.assertEqual(r.call(request(6, "ping"))["id"], 6)

    def test_eof_waits_for_requests_in_flight_then_deletes_the_session(self):
        r = self.started()
        r.send(request(2, "slow"))
        r.close_stdin()
        self.assertEqual(r.recv()["id"], 2)
        self.assertEqual(r.wait(), 0, r.stderr())
        dels = self.standin.deletes()
        self.assertEqual(len(dels), 1)
        self.assertEqual(dels[0]["Mcp-Session-Id"], "session-1")
        self.assertEqual(self.standin.sessions, set())

    def test_sigterm_deletes_the_session_and_exits_0(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            r = self.started()
            r.proc.send_signal(sig)
            self.assertEqual(r.wait(5), 0, r.stderr())
            self.assertEqual(self.standin.deletes()[-1]["Mcp-Session-Id"],
                             "session-%d" % self.standin.count)
        self.assertEqual(self.standin.sessions, set())

    def test_daemon_out_of_reach(self):
        r = self.relay(url="http://127.0.0.1:%d" % free_port("127.0.0.1"))
        e = r.call(initialize(id_="init"))
        self.assertEqual((e["id"], e["error"]["code"]), ("init", -32603))
        self.assertTrue(e["error"]["message"].startswith("plimsolld: "), e)
        e = r.call(request(2, "ping"))
        self.assertEqual((e["id"], e["error"]["code"]), (2, -32603))
        r.send(INITIALIZED)  # a notification: stderr only
        r.close_stdin()
        self.assertEqual(r.wait(), 0)
        self.assertEqual(r.no_more_lines(), [])
        self.assertIn("notification", r.stderr())

    def test_usage_errors_exit_2(self):
        for args in (["--minimum-isolation", "steel"], ["--minimum-isolation"],
                     ["--max-message-bytes", "0"], ["--max-message-bytes", "-1"],
                     ["--max-message-bytes", "1x"], ["--frobnicate"]):
            r = self.relay(args=args)
            r.close_stdin()
            self.assertEqual(r.wait(), 2, args)
            self.assertEqual(r.no_more_lines(), [])
        self.assertEqual(self.standin.seen, [])
        r = self.relay(env={"PLIMSOLL_KEY": "", "PLIMSOLL_KEY_FILE": "/nonexistent/key"})
        r.close_stdin()
        self.assertEqual(r.wait(), 2)
        self.assertIn("/nonexistent/key", r.stderr())


# ---- against a real wasm daemon ----------------------------------------------

class Recorder:
    """A forwarding HTTP proxy in front of a daemon that keeps each
    answer's Mcp-Session-Id, so a test can learn the id the relay holds."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.session_ids = []
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else None
                h = {k: v for k, v in self.headers.items()
                     if k.lower() not in ("host", "content-length", "connection")}
                c = http.client.HTTPConnection("127.0.0.1", rec.daemon.port, timeout=60)
                try:
                    c.request(self.command, self.path, body=body, headers=h)
                    a = c.getresponse()
                    data = a.read()
                    sid = a.getheader("Mcp-Session-Id")
                    if sid:
                        rec.session_ids.append(sid)
                    self.send_response(a.status)
                    for k, v in a.getheaders():
                        if k.lower() not in ("content-length", "connection",
                                             "transfer-encoding"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    c.close()

            do_POST = forward
            do_DELETE = forward

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def tool_text(answer):
    return answer["result"]["content"][0]["text"]


class RelayAgainstTheDaemon(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env=WASM).start()
        cls.url = "http://127.0.0.1:%d" % cls.d.port

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def setUp(self):
        self.relays = []

    def tearDown(self):
        for r in self.relays:
            r.kill()

    def relay(self, args=(), url=None, key=None):
        r = Relay(url or self.url, key=key or self.d.keys["alice"], args=args)
        self.relays.append(r)
        return r

    def started(self, args=(), url=None):
        r = self.relay(args, url)
        init = r.call(initialize())
        self.assertEqual(init["id"], 1, init)
        self.assertEqual(init["result"]["protocolVersion"], VERSION)
        self.assertEqual(init["result"]["serverInfo"]["name"], "plimsolld")
        r.send(INITIALIZED)
        return r

    def run_code(self, id_, code, **more):
        args = dict(language="javascript", code=code, **more)
        return request(id_, "tools/call", {"name": "run_code", "arguments": args})

    def test_tools_and_a_run(self):
        r = self.started()
        names = [t["name"] for t in r.call(request(2, "tools/list"))["result"]["tools"]]
        self.assertIn("run_code", names)
        a = r.call(self.run_code(3, "console.log(6*7)"))
        self.assertFalse(a["result"].get("isError"), a)
        self.assertEqual(a["result"]["structuredContent"]["stdout"], "42\n")
        self.assertEqual(a["result"]["structuredContent"]["isolation"], "process")
        r.close_stdin()
        self.assertEqual(r.wait(), 0, r.stderr())
        self.assertEqual(r.no_more_lines(), [])

    def test_a_ping_comes_back_while_a_long_run_is_in_flight(self):
        r = self.started()
        r.send(self.run_code(2, BUSY_JS))
        time.sleep(0.2)  # the run is on its way before the ping is read
        r.send(request(3, "ping"))
        first, second = r.recv(), r.recv()
        self.assertEqual(first, {"jsonrpc": "2.0", "id": 3, "result": {}})
        self.assertEqual(second["id"], 2)
        self.assertFalse(second["result"].get("isError"), second)
        self.assertGreaterEqual(second["result"]["structuredContent"]["duration_ms"], 1400)

    def test_eof_exits_0_and_deletes_the_session(self):
        rec = Recorder(self.d)
        try:
            r = self.started(url=rec.url)
            self.assertEqual(r.call(request(2, "ping"))["id"], 2)
            r.close_stdin()
            self.assertEqual(r.wait(), 0, r.stderr())
            self.assertEqual(len(rec.session_ids), 1)
            sid = rec.session_ids[0]
            self.assertTrue(sid)
        finally:
            rec.stop()
        status, _, body = self.d.request(
            "POST", "/mcp", json.dumps(request(9, "ping")).encode(),
            {"Content-Type": "application/json", "Accept": "application/json",
             "Authorization": "Bearer " + self.d.keys["alice"], "Mcp-Session-Id": sid,
             "MCP-Protocol-Version": VERSION, "Host": "127.0.0.1"})
        self.assertEqual(status, 404, body)
        self.assertEqual(json.loads(body)["error"]["code"], -32001)

    def test_minimum_isolation_above_the_tier_refuses_run_code(self):
        r = self.started(args=["--minimum-isolation", "vm"])
        a = r.call(self.run_code(2, "console.log(1)"))
        self.assertEqual(a["id"], 2)
        self.assertTrue(a["result"]["isError"], a)
        self.assertTrue(tool_text(a).startswith("REFUSED INSUFFICIENT_ISOLATION"), a)
        # No argument lowers the session's floor.
        a = r.call(self.run_code(3, "console.log(1)", minimum_isolation="none"))
        self.assertTrue(tool_text(a).startswith("REFUSED INSUFFICIENT_ISOLATION"), a)

    def test_daemon_out_of_reach(self):
        r = self.relay(url="http://127.0.0.1:%d" % free_port("127.0.0.1"))
        e = r.call(initialize(id_=11))
        self.assertEqual((e["id"], e["error"]["code"]), (11, -32603))
        r.close_stdin()
        self.assertEqual(r.wait(), 0)


class RelayAcrossADaemonRestart(unittest.TestCase):
    """The daemon restarted between two calls (its MCP sessions gone): the
    relay initializes again with the kept initialize and resends."""

    def test_restart_on_the_same_port(self):
        d = Daemon(env=WASM).start()
        port = d.port
        r = Relay("http://127.0.0.1:%d" % port, key=d.keys["alice"])
        try:
            self.assertEqual(r.call(initialize())["id"], 1)
            r.send(INITIALIZED)
            a = r.call(request(2, "tools/call", {"name": "run_code", "arguments": {
                "language": "javascript", "code": "console.log('one')"}}))
            self.assertEqual(a["result"]["structuredContent"]["stdout"], "one\n")
            d.stop()
            # Between the two daemons, out of reach: -32603 with the id.
            e = r.call(request(3, "ping"))
            self.assertEqual((e["id"], e["error"]["code"]), (3, -32603))
            d2 = Daemon(env=WASM, listen="127.0.0.1:%d" % port)
            with open(d.keys_file) as src, open(d2.keys_file, "w") as dst:
                dst.write(src.read())
            d = d2.start()
            a = r.call(request(4, "tools/call", {"name": "run_code", "arguments": {
                "language": "javascript", "code": "console.log('two')"}}))
            self.assertEqual(a["id"], 4, a)
            self.assertEqual(a["result"]["structuredContent"]["stdout"], "two\n")
            r.close_stdin()
            self.assertEqual(r.wait(), 0, r.stderr())
            self.assertIn("initialized a new one", r.stderr())
            self.assertEqual(r.no_more_lines(), [])
        finally:
            r.kill()
            d.stop()


if __name__ == "__main__":
    unittest.main()
