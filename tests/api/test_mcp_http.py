# SPDX-License-Identifier: Apache-2.0
"""/mcp against a stranger, a careless client and a hostile one: the MCP
server's head (Origin and Host, method, content type, Accept, the key,
MCP-Protocol-Version), its JSON-RPC parser (malformed, batches, ids,
nesting, huge bodies), its sessions (before initialization, another
caller's, ended, expired, their caps), calls at once, a client that leaves
mid-call, the floor fixed at initialization, the output cut for the model,
and the same over HTTP/2 (h2c, curl).  A real wasm daemon each time
(docs/mcp.md); the SDK-driven suite is tests/mcp.

Run: PLIMSOLL_BUILD_DIR=... python3 tests/api/test_mcp_http.py
"""
import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import ClassDaemon, Daemon  # noqa: E402

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "hostile", "version": "1"}}}
BUSY_JS = "const t = Date.now(); while (Date.now() - t < %d) {} console.log('done')"


class Mcp:
    """Raw HTTP/1.1 calls on /mcp of one daemon."""

    def __init__(self, d):
        self.d = d

    def post(self, body, sid=None, principal="alice", headers=None, key=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        k = key if key is not None else self.d.keys.get(principal)
        if k:
            h["Authorization"] = "Bearer " + k
        if sid:
            h["Mcp-Session-Id"] = sid
        h.update(headers or {})
        raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
        status, hdrs, data = self.d.request("POST", "/mcp", raw, h)
        return status, hdrs, json.loads(data) if data else None

    def open(self, principal="alice", headers=None, params=None):
        m = json.loads(json.dumps(INIT))
        m["params"].update(params or {})
        status, hdrs, body = self.post(m, principal=principal, headers=headers)
        assert status == 200, (status, body)
        sid = hdrs["mcp-session-id"]
        s, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid,
                            principal=principal)
        assert s == 202, s
        return sid, body["result"]

    def call(self, sid, name, args, principal="alice", id=7):
        return self.post({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": name, "arguments": args}}, sid, principal=principal)

    def delete(self, sid, principal="alice"):
        h = {"Authorization": "Bearer " + self.d.keys[principal], "Mcp-Session-Id": sid}
        return self.d.request("DELETE", "/mcp", None, h)[0]


class McpDaemon(ClassDaemon):
    """One daemon (DAEMON_ENV) for the class's tests, and its /mcp (cls.m)."""
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.m = Mcp(cls.d)


def run_count(d):
    """plimsoll_runs_total's sum from /metrics: every run started."""
    _, _, data = d.request("GET", "/metrics", None,
                           {"Authorization": "Bearer " + d.keys["alice"]})
    n = 0
    for line in data.decode().splitlines():
        if line.startswith("plimsoll_runs_total{"):
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


class Head(McpDaemon, unittest.TestCase):
    """Everything decided before a body byte is read."""
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MAX_REQUEST_BYTES": "65536"}

    def rpc_error(self, status, body, code):
        self.assertEqual(body["jsonrpc"], "2.0", body)
        self.assertIn("error", body)
        self.assertEqual(body["error"]["code"], code, body)

    def test_no_key_no_tools(self):
        for key in ("", "not-a-key"):
            status, _, body = self.m.post(INIT, key=key)
            self.assertEqual(status, 401)
            self.rpc_error(status, body, -32000)
            self.assertEqual(body["error"]["data"]["reason"], "UNAUTHENTICATED")
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, key="")
        self.assertEqual(status, 401)

    def test_a_foreign_origin_or_host_is_refused(self):
        status, _, body = self.m.post(INIT, headers={"Origin": "http://evil.example.com"})
        self.assertEqual(status, 403, body)
        self.rpc_error(status, body, -32600)
        status, _, body = self.m.post(INIT, headers={"Host": "evil.example.com"})
        self.assertEqual(status, 403, body)
        # A rebound name: its page's own origin, a Host that is not local.
        status, _, body = self.m.post(INIT, headers={"Host": "evil.example.com:%d" % self.d.port,
                                                     "Origin": "http://evil.example.com:%d"
                                                     % self.d.port})
        self.assertEqual(status, 403, body)
        # The daemon's own page (the console's origin) is let in.
        own = "127.0.0.1:%d" % self.d.port
        status, hdrs, body = self.m.post(INIT, headers={"Host": own, "Origin": "http://" + own})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.m.delete(hdrs["mcp-session-id"]), 204)
        for host in ("localhost:1", "127.0.0.1", "[::1]:9"):
            status, hdrs, body = self.m.post(INIT, headers={"Host": host})
            self.assertEqual(status, 200, (host, body))
            self.assertEqual(self.m.delete(hdrs["mcp-session-id"]), 204)

    def test_methods_types_and_accept(self):
        status, hdrs, data = self.d.request("GET", "/mcp", None,
                                            {"Authorization": "Bearer " + self.d.keys["alice"]})
        self.assertEqual(status, 405)
        self.assertEqual(hdrs["allow"], "POST, DELETE")
        self.assertEqual(json.loads(data)["jsonrpc"], "2.0")
        self.assertEqual(self.d.request("PUT", "/mcp", b"{}", {})[0], 405)
        status, _, _ = self.m.post(INIT, headers={"Content-Type": "text/plain"})
        self.assertEqual(status, 415)
        status, _, _ = self.m.post(INIT, headers={"Accept": "text/html"})
        self.assertEqual(status, 406)
        status, _, _ = self.m.post(INIT, headers={"Accept": "*/*"})
        self.assertEqual(status, 200)

    def test_protocol_version_header(self):
        status, _, body = self.m.post(INIT, headers={"MCP-Protocol-Version": "1999-01-01"})
        self.assertEqual(status, 400, body)
        sid, result = self.m.open(params={"protocolVersion": "2025-06-18"})
        self.assertEqual(result["protocolVersion"], "2025-06-18")
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid,
                                      headers={"MCP-Protocol-Version": "2025-11-25"})
        self.assertEqual(status, 400, body)  # not the version this session agreed
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid,
                                      headers={"MCP-Protocol-Version": "2025-06-18"})
        self.assertEqual((status, body["result"]), (200, {}))
        self.m.delete(sid)
        # An unknown version asked: the server answers its latest.
        sid, result = self.m.open(params={"protocolVersion": "2024-01-01"})
        self.assertEqual(result["protocolVersion"], "2025-11-25")
        self.m.delete(sid)

    def test_a_body_past_the_limit_is_not_read(self):
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 70000}})
        status, _, body = self.m.post(big)
        self.assertEqual(status, 400, body)
        self.assertEqual(body["jsonrpc"], "2.0")
        self.assertEqual(body["error"]["data"]["reason"], "INVALID_REQUEST")
        # Chunked, no length announced: cut at the limit all the same.
        s = socket.create_connection((self.d.host, self.d.port))
        s.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                   % self.d.keys["alice"]).encode())
        try:
            for _ in range(40):
                s.sendall(b"1000\r\n" + b"[" * 4096 + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(10)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer[:100])

    def test_mcp_off_is_not_found(self):
        with Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_MCP": "off"}) as d:
            status, _, _ = Mcp(d).post(INIT)
            self.assertEqual(status, 404)


class Messages(McpDaemon, unittest.TestCase):
    """The JSON-RPC parser and the session's rules."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sid, _ = cls.m.open()

    def test_malformed_messages(self):
        cases = [(b"{", -32700), (b"", -32700), (b"\xff\xfe", -32700), (b"[]", -32600),
                 (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600), (b'"ping"', -32600),
                 (b"42", -32600), (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600),
                 (b'{"id":1,"method":"ping"}', -32600),
                 (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600),
                 (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600),
                 (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600),
                 (b'{"jsonrpc":"2.0","id":"' + b"x" * 300 + b'","method":"ping"}', -32600),
                 (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
                 (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', -32600),
                 (b'{"jsonrpc":"2.0"}', -32600),
                 (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', -32700),
                 (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'[' * 5000 + b']' * 5000 + b'}',
                  -32600)]
        for raw, code in cases:
            status, _, body = self.m.post(raw, self.sid)
            self.assertEqual(status, 400, (raw[:60], body))
            self.assertEqual(body["error"]["code"], code, (raw[:60], body))
        # The session still answers.
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": "p", "method": "ping"}, self.sid)
        self.assertEqual((status, body), (200, {"jsonrpc": "2.0", "id": "p", "result": {}}))

    def test_unknown_methods_and_tools(self):
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}, self.sid)
        self.assertEqual(body["error"]["code"], -32601)
        _, _, body = self.m.call(self.sid, "rm_rf", {})
        self.assertEqual(body["error"]["code"], -32602)
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {}}, self.sid)
        self.assertEqual(body["error"]["code"], -32602)
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                  "params": {"uri": "file:///etc/passwd"}}, self.sid)
        self.assertEqual(body["error"]["code"], -32002)

    def test_arguments_outside_the_schema_are_a_refusal(self):
        before = run_count(self.d)
        for args in ({"language": "javascript"}, {"language": "javascript", "code": 7},
                     {"language": "javascript", "code": "1", "grant_profile": "prod"},
                     {"language": "javascript", "code": "1", "timeout_ms": -1},
                     {"language": "javascript", "code": "1", "minimum_isolation": "steel"}):
            _, _, body = self.m.call(self.sid, "run_code", args)
            r = body["result"]
            self.assertTrue(r["isError"], (args, r))
            self.assertTrue(r["content"][0]["text"].startswith("REFUSED INVALID_REQUEST"), r)
            self.assertNotIn("structuredContent", r)
        self.assertEqual(run_count(self.d), before)

    def test_a_non_zero_exit_is_a_result(self):
        _, _, body = self.m.call(self.sid, "run_code",
                                 {"language": "javascript", "code": "console.log(6*7); throw 1"})
        r = body["result"]
        self.assertFalse(r["isError"])
        sc = r["structuredContent"]
        self.assertEqual(sc["exit_code"], 1)
        self.assertEqual(sc["stdout"], "42\n")
        self.assertEqual(sc["isolation"], "process")
        self.assertEqual(len(sc["record_digest"]), 64)

    def test_before_initialization(self):
        # No session at all.
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["code"], -32600)
        # A session id nobody gave, or in the wrong shape.
        for sid in ("0" * 64, "x", "../" * 30):
            status, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)
            self.assertEqual(status, 404, sid)
            self.assertEqual(body["error"]["code"], -32001)
        # initialize answered, notifications/initialized not sent: ping only.
        status, hdrs, _ = self.m.post(INIT)
        sid = hdrs["mcp-session-id"]
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "run_code",
                                             "arguments": {"language": "javascript", "code": "1"}}},
                                 sid)
        self.assertEqual(body["error"]["code"], -32600)
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid)
        self.assertEqual(body["result"], {})
        # initialize again inside a session: refused.
        status, _, _ = self.m.post(INIT, sid)
        self.assertEqual(status, 400)
        self.assertEqual(self.m.delete(sid), 204)

    def test_another_callers_session_is_not_found(self):
        sid, _ = self.m.open("alice")
        s1, _, b1 = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid, principal="bob")
        s2, _, b2 = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, "f" * 64,
                                principal="bob")
        self.assertEqual((s1, b1), (s2, b2))  # no hint that the id exists
        self.assertEqual(s1, 404)
        self.assertEqual(self.m.delete(sid, "bob"), 404)
        status, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)
        self.assertEqual(status, 200)  # the owner's session lives on
        self.assertEqual(self.m.delete(sid), 204)
        self.assertEqual(self.m.delete(sid), 404)
        status, _, _ = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)
        self.assertEqual(status, 404)

    def test_notifications_and_responses_take_202(self):
        for m in ({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 9}},
                  {"jsonrpc": "2.0", "method": "notifications/whatever"},
                  {"jsonrpc": "2.0", "id": 5, "result": {}},
                  {"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "x"}}):
            status, _, body = self.m.post(m, self.sid)
            self.assertEqual((status, body), (202, None), m)

    def test_describe_resource_is_describe(self):
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, self.sid)
        self.assertEqual([r["uri"] for r in body["result"]["resources"]], ["plimsoll://describe"])
        _, _, body = self.m.post({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                                  "params": {"uri": "plimsoll://describe"}}, self.sid)
        c = body["result"]["contents"][0]
        self.assertEqual(c["mimeType"], "application/json")
        status, api = self.d.rpc("Describe", {})
        self.assertEqual(json.loads(c["text"]), api)


class Bounds(McpDaemon, unittest.TestCase):
    """Every MCP session, call and answer has its bound."""
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_MAX_CONCURRENT": "4",
                            "PLIMSOLL_MCP_SESSIONS": "4", "PLIMSOLL_MCP_SESSIONS_PER_KEY": "3",
                            "PLIMSOLL_MCP_CALLS_PER_SESSION": "1",
                            "PLIMSOLL_MCP_OUTPUT_BYTES": "1024",
                            "PLIMSOLL_MCP_SESSION_IDLE_MS": "1500"}

    def test_session_caps(self):
        mine = [self.m.open("alice")[0] for _ in range(3)]
        status, _, body = self.m.post(INIT, principal="alice")
        self.assertEqual(status, 429, body)
        self.assertEqual(body["error"]["data"]["reason"], "AT_CAPACITY")
        self.assertIn("PLIMSOLL_MCP_SESSIONS_PER_KEY", body["error"]["message"])
        bobs = self.m.open("bob")[0]
        status, _, body = self.m.post(INIT, principal="bob")
        self.assertEqual(status, 429, body)
        self.assertIn("PLIMSOLL_MCP_SESSIONS ", body["error"]["message"] + " ")
        self.assertEqual(self.m.delete(mine.pop()), 204)
        mine.append(self.m.open("alice")[0])
        for sid in mine:
            self.assertEqual(self.m.delete(sid), 204)
        self.assertEqual(self.m.delete(bobs, "bob"), 204)

    def test_an_idle_session_ends(self):
        sid, _ = self.m.open()
        time.sleep(0.8)
        self.assertEqual(self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)[0], 200)
        time.sleep(0.8)  # used 0.8 s ago: alive
        self.assertEqual(self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)[0], 200)
        time.sleep(2.0)
        self.assertEqual(self.m.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)[0], 404)
        # Its slot is free again: three more open.
        sids = [self.m.open()[0] for _ in range(3)]
        for s in sids:
            self.m.delete(s)

    def test_calls_at_once_and_a_client_that_leaves(self):
        sid, _ = self.m.open()
        # A call whose client goes away once it is sent.
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "run_code",
                                      "arguments": {"language": "javascript",
                                                    "code": BUSY_JS % 1200}}}).encode()
        s = socket.create_connection((self.d.host, self.d.port))
        s.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n"
                   % (self.d.keys["alice"], sid, len(body))).encode() + body)
        time.sleep(0.4)
        s.close()
        # Its call holds the session's one slot until the run ends.
        _, _, r = self.m.call(sid, "run_code", {"language": "javascript", "code": "1"})
        self.assertTrue(r["result"]["isError"], r)
        self.assertTrue(r["result"]["content"][0]["text"].startswith("REFUSED AT_CAPACITY"), r)
        self.assertIn("PLIMSOLL_MCP_CALLS_PER_SESSION", r["result"]["content"][0]["text"])
        # Another session is not held up.
        other, _ = self.m.open()
        _, _, r = self.m.call(other, "run_code", {"language": "javascript", "code": "console.log(1)"})
        self.assertEqual(r["result"]["structuredContent"]["stdout"], "1\n")
        deadline = time.time() + 20
        while time.time() < deadline:
            _, _, r = self.m.call(sid, "run_code", {"language": "javascript", "code": "console.log(2)"})
            if not r["result"]["isError"]:
                break
            time.sleep(0.2)
        self.assertEqual(r["result"]["structuredContent"]["stdout"], "2\n")
        self.m.delete(sid)
        self.m.delete(other)

    def test_output_is_cut_for_the_model(self):
        sid, _ = self.m.open()
        _, _, r = self.m.call(sid, "run_code", {"language": "javascript",
                                                "code": "console.log('é'.repeat(3000))"})
        sc = r["result"]["structuredContent"]
        self.assertTrue(sc["stdout_truncated"])
        raw = sc["stdout"].encode()
        self.assertLessEqual(len(raw), 1024)
        self.assertGreater(len(raw), 1000)
        self.assertEqual(set(sc["stdout"]), {"é"})
        self.assertIn("--- stdout (cut) ---", r["result"]["content"][0]["text"])
        self.m.delete(sid)


class Floor(McpDaemon, unittest.TestCase):
    """A floor fixed for the MCP session is beyond an argument's reach."""

    def refused(self, sid, name, args):
        _, _, r = self.m.call(sid, name, args)
        self.assertTrue(r["result"]["isError"], r)
        self.assertTrue(r["result"]["content"][0]["text"].startswith(
            "REFUSED INSUFFICIENT_ISOLATION"), r)
        self.assertEqual(r["result"]["_meta"]["org.plimsoll/refusal"],
                         {"reason": "INSUFFICIENT_ISOLATION", "dispatched": False,
                          "isolation": "process"})

    def test_header_and_capability_fix_the_floor(self):
        before = run_count(self.d)
        for how in ({"headers": {"Plimsoll-Minimum-Isolation": "kernel"}},
                    {"params": {"capabilities": {"experimental": {
                        "org.plimsoll": {"minimum_isolation": "vm"}}}}}):
            sid, result = self.m.open(**how)
            self.assertIn("above this daemon's tier", result["instructions"])
            self.refused(sid, "run_code", {"language": "javascript", "code": "1",
                                           "minimum_isolation": "none"})
            self.refused(sid, "open_session", {})
            self.refused(sid, "run_cell", {"session_id": "x", "language": "python", "code": "1"})
            _, _, r = self.m.call(sid, "explain", {"language": "javascript", "code": "1",
                                                   "minimum_isolation": "none"})
            self.assertFalse(r["result"]["structuredContent"]["dispatch"])
            self.m.delete(sid)
        self.assertEqual(run_count(self.d), before)
        # Without one: the same call runs.
        sid, _ = self.m.open()
        _, _, r = self.m.call(sid, "run_code", {"language": "javascript", "code": "1",
                                                "minimum_isolation": "process"})
        self.assertFalse(r["result"]["isError"])
        self.m.delete(sid)

    def test_a_bad_floor_is_refused_at_initialize(self):
        for how in ({"headers": {"Plimsoll-Minimum-Isolation": "titanium"}},
                    {"params": {"capabilities": {"experimental": {
                        "org.plimsoll": {"minimum_isolation": 3}}}}}):
            m = json.loads(json.dumps(INIT))
            m["params"].update(how.get("params", {}))
            status, hdrs, body = self.m.post(m, headers=how.get("headers"))
            self.assertEqual(body["error"]["code"], -32602, body)
            self.assertNotIn("mcp-session-id", hdrs)

    def test_the_operators_floor(self):
        with Daemon(env={"SANDBOX_PROVIDER": "wasm",
                         "PLIMSOLL_MCP_MINIMUM_ISOLATION": "container"}) as d:
            m = Mcp(d)
            sid, result = m.open(headers={"Plimsoll-Minimum-Isolation": "none"})
            self.assertIn("floor is container", result["instructions"])
            _, _, r = m.call(sid, "run_code", {"language": "javascript", "code": "1"})
            self.assertTrue(r["result"]["content"][0]["text"].startswith(
                "REFUSED INSUFFICIENT_ISOLATION"))


class OverHTTP2(McpDaemon, unittest.TestCase):
    """The same server over h2c, through curl (nobody here wrote it)."""

    def curl(self, body, sid=None, extra=(), early=False):
        cmd = ["curl", "-sS", "-i", "--http2-prior-knowledge", "-X", "POST",
               "http://%s:%d/mcp" % (self.d.host, self.d.port),
               "-H", "Content-Type: application/json", "-H", "Accept: application/json",
               "-H", "Authorization: Bearer " + self.d.keys["alice"], "--data-binary", "@-"]
        if sid:
            cmd += ["-H", "Mcp-Session-Id: " + sid]
        for h in extra:
            cmd += ["-H", h]
        p = subprocess.run(cmd, input=json.dumps(body).encode(), capture_output=True, timeout=60)
        # A head refused early is answered, then its stream reset
        # (NO_ERROR) while curl may still be sending the body: curl then
        # exits 92 after printing the whole answer.
        self.assertIn(p.returncode, (0, 92) if early else (0,), p.stderr)
        head, _, data = p.stdout.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        hdrs = dict((k.lower(), v.strip()) for k, _, v in (x.partition(":") for x in lines[1:]))
        return int(lines[0].split()[1]), hdrs, json.loads(data) if data else None

    def test_initialize_and_run_over_h2c(self):
        status, hdrs, body = self.curl(INIT)
        self.assertEqual(status, 200, body)
        sid = hdrs["mcp-session-id"]
        self.assertEqual(self.curl({"jsonrpc": "2.0", "method": "notifications/initialized"},
                                   sid)[0], 202)
        _, _, body = self.curl({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "run_code", "arguments": {
                                    "language": "javascript", "code": "console.log('h2')"}}}, sid)
        self.assertEqual(body["result"]["structuredContent"]["stdout"], "h2\n")
        status, _, _ = self.curl(INIT, extra=["Host: evil.example.com"], early=True)
        self.assertEqual(status, 403)


if __name__ == "__main__":
    unittest.main()
