# SPDX-License-Identifier: Apache-2.0
"""plimsoll's MCP server through the MCP TypeScript SDK, which nobody here
wrote (@modelcontextprotocol/sdk, pinned by package-lock.json; its Client
driven by sdk_client.mjs), over both of the SDK's transports: stdio, the
SDK spawning `plimsoll mcp` (the CLI relaying to the daemon's /mcp), and
Streamable HTTP straight to the daemon's /mcp.  The SDK checks every
structuredContent against its tool's outputSchema itself; each case
checks what the SDK returned, or the McpError it threw, against the
contract of the daemon's MCP server (revision 2025-11-25):

  - a wasm daemon per transport: the tools and their schemas, run_code's
    result and its isolation, a guest's non-zero exit and a timeout as
    normal results, stdin, a floor above the tier as a typed refusal that
    starts no run (/metrics), a floor fixed at initialization that no
    argument lowers, a bad tier name at initialization, explain, the
    describe resource against the API's Describe, an unknown tool,
    arguments of the wrong type, and PLIMSOLL_MCP_OUTPUT_BYTES cutting
    output at a UTF-8 boundary;
  - a docker daemon under runc with sessions on the data image: a session
    opened, two cells sharing state, files written, read and listed, a
    matplotlib figure and a JavaScript display() as image content blocks,
    the session closed and a cell on it refused; a snippet's
    process.exit(3) as a normal result; the session tools under a floor
    above the tier.

Run: cd tests/mcp && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_mcp_sdk
"""
import base64
import json
import os
import struct
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.docker import DockerDaemon, engine, ours  # noqa: E402
from plimsoll_test.harness import CLI, Daemon, metrics  # noqa: E402

# The contract's tools.
TOOLS = {"run_code", "open_session", "run_cell", "close_session", "write_files", "read_file",
         "list_files", "explain"}
RUN_FIELDS = {"exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated",
              "isolation", "outcome", "timed_out", "out_of_memory", "duration_ms",
              "record_digest"}
PNG = b"\x89PNG\r\n\x1a\n"
# A 1 by 1 PNG, whole (IHDR, IDAT, IEND).
PNG_1X1 = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
                           "/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==")
OUTPUT_BYTES = 4096  # the wasm daemons' PLIMSOLL_MCP_OUTPUT_BYTES


def setup_stack():
    subprocess.run([os.path.join(HERE, "setup")], check=True, stdout=subprocess.DEVNULL)


def describe(d):
    status, body = d.rpc("Describe", {})
    if status != 200:
        raise AssertionError("Describe: %s %r" % (status, body))
    return body


def runs_started(d):
    """Runs the daemon answered or has under way: every plimsoll_runs_total
    series and plimsoll_in_flight."""
    m = metrics(d)
    return sum(v for k, v in m.items()
               if k.startswith("plimsoll_runs_total") or k.startswith("plimsoll_in_flight"))


class Driver:
    """Mixin: cls.d is the daemon, TRANSPORT "stdio" or "http"."""
    TRANSPORT = None

    def drive(self, steps, expect_connect=True, **plan):
        """Run steps through the SDK; returns (connect line, step lines)."""
        plan = dict(plan, transport=self.TRANSPORT, cli=CLI, steps=steps,
                    url="http://127.0.0.1:%d" % self.d.port)
        plan.setdefault("key", self.d.keys["alice"])
        p = subprocess.run(["node", os.path.join(HERE, "sdk_client.mjs")],
                           input=json.dumps(plan), capture_output=True, text=True,
                           timeout=600, cwd=HERE)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        why = "stdout: %s\nstderr: %s" % (p.stdout[-4000:], p.stderr[-4000:])
        self.assertGreater(len(lines), 0, why)
        connect = lines[0]
        self.assertEqual(connect["op"], "connect", why)
        if not expect_connect:
            return connect, lines[1:]
        self.assertIn("ok", connect, why)
        self.assertEqual(len(lines), len(steps) + 2, why)
        close = lines[-1]
        self.assertEqual(close["op"], "close", why)
        # The MCP session ended cleanly: DELETE answered (HTTP), and the
        # SDK saw no error on the way (a GET's 405 is no error to it).
        self.assertEqual(close["transport_errors"], [], why)
        if self.TRANSPORT == "http":
            self.assertIs(close["terminated"], True, why)
        return connect, lines[1:-1]

    def call(self, name, arguments, **plan):
        """One tools/call; its line."""
        _, [line] = self.drive([{"op": "callTool", "name": name, "arguments": arguments}],
                               **plan)
        return line

    def result(self, line):
        """A tool's normal result: its structuredContent."""
        self.assertIn("ok", line, line)
        r = line["ok"]
        self.assertFalse(r.get("isError", False), r)
        self.assertIn("structuredContent", r, r)
        return r["structuredContent"]

    def refused(self, line, reasons, tier):
        """A typed refusal (one of reasons): isError, no structuredContent,
        one text block, the refusal in _meta; the reason."""
        self.assertIn("ok", line, line)
        r = line["ok"]
        self.assertIs(r.get("isError"), True, r)
        self.assertNotIn("structuredContent", r, r)
        self.assertEqual(len(r["content"]), 1, r)
        self.assertEqual(r["content"][0]["type"], "text", r)
        text = r["content"][0]["text"]
        self.assertTrue(text.startswith("REFUSED "), text)
        reason = text[len("REFUSED "):].split(":", 1)[0]
        self.assertIn(reason, reasons, text)
        self.assertTrue(text.lower().endswith("nothing ran."), text)
        meta = r["_meta"]["org.plimsoll/refusal"]
        self.assertEqual(meta, {"reason": reason, "dispatched": False, "isolation": tier}, r)
        return reason

    def mcp_error(self, line, code):
        self.assertIn("error", line, line)
        self.assertEqual(line["error"]["name"], "McpError", line)
        self.assertEqual(line["error"]["code"], code, line)
        return line["error"]


class WasmTools(Driver):
    """The tools against a wasm daemon; TRANSPORT set by the two classes below."""

    @classmethod
    def setUpClass(cls):
        setup_stack()
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "100000",
                            "SANDBOX_RATE_BURST": "1000",
                            "PLIMSOLL_MCP_OUTPUT_BYTES": str(OUTPUT_BYTES)}).start()
        cls.describe = describe(cls.d)
        cls.tier = cls.describe["isolation"]

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    # The floor that the wasm tier cannot meet (process < vm).
    FLOOR = "vm"

    def test_initialize_and_tools_list(self):
        connect, [tools, ping, templates] = self.drive(
            [{"op": "listTools"}, {"op": "ping"}, {"op": "listResourceTemplates"}])
        info = connect["ok"]
        self.assertEqual(info["server"]["name"], "plimsolld", info)
        self.assertEqual(info["capabilities"]["tools"], {"listChanged": False}, info)
        self.assertEqual(info["capabilities"]["resources"], {"listChanged": False}, info)
        self.assertIn(self.tier, info["instructions"], info)
        if self.TRANSPORT == "http":
            self.assertEqual(info["protocol_version"], "2025-11-25", info)
            self.assertRegex(info["session_id"], r"^[0-9a-f]{64}$")
        self.assertEqual(ping["ok"], {}, ping)
        self.assertEqual(templates["ok"]["resourceTemplates"], [], templates)
        by_name = {t["name"]: t for t in tools["ok"]["tools"]}
        self.assertLessEqual(TOOLS, set(by_name), sorted(by_name))
        for name in TOOLS:
            t = by_name[name]
            self.assertEqual(t["inputSchema"]["type"], "object", t)
            self.assertEqual(t["outputSchema"]["type"], "object", t)
            self.assertTrue(t.get("description"), t)
        run = by_name["run_code"]
        self.assertLessEqual({"language", "code"}, set(run["inputSchema"].get("required", [])))
        self.assertEqual(sorted(run["inputSchema"]["properties"]["language"]["enum"]),
                         sorted(self.describe["operations"]["snippet"]["languages"]))
        self.assertLessEqual(RUN_FIELDS, set(run["outputSchema"]["properties"]), run)
        cell = by_name["run_cell"]
        self.assertLessEqual(RUN_FIELDS | {"outputs", "outputs_dropped", "interpreter_started"},
                             set(cell["outputSchema"]["properties"]), cell)

    def test_run_code_prints_at_the_daemon_s_tier(self):
        r = self.result(self.call("run_code", {
            "language": "javascript",
            "code": "console.log('hello ' + (6 * 7)); console.error('e')"}))
        self.assertLessEqual(RUN_FIELDS, set(r), r)
        self.assertEqual((r["exit_code"], r["stdout"], r["stderr"]), (0, "hello 42\n", "e\n"), r)
        self.assertEqual(r["isolation"], self.tier)
        self.assertEqual(r["outcome"], "completed", r)
        self.assertEqual((r["timed_out"], r["out_of_memory"]), (False, False), r)
        self.assertEqual((r["stdout_truncated"], r["stderr_truncated"]), (False, False), r)
        self.assertRegex(r["record_digest"], r"^[0-9a-f]{64}$")

    def test_a_non_zero_exit_is_a_normal_result(self):
        """The wasm provider's JavaScript has no process.exit (docs/providers/
        wasm.md): an uncaught error is its non-zero exit, 1.  The docker
        class below exits 3 with process.exit."""
        line = self.call("run_code", {"language": "javascript",
                                      "code": "console.log('before'); throw new TypeError('bad')"})
        self.assertIs(line["ok"].get("isError", False), False, line)
        r = self.result(line)
        self.assertEqual((r["exit_code"], r["stdout"]), (1, "before\n"), r)
        self.assertIn("TypeError: bad", r["stderr"])
        self.assertEqual(r["isolation"], self.tier)

    def test_a_timeout_is_a_normal_result_and_stdin_arrives(self):
        _, [spin, echo] = self.drive([
            {"op": "callTool", "name": "run_code",
             "arguments": {"language": "javascript", "code": "for (;;) {}", "timeout_ms": 300}},
            {"op": "callTool", "name": "run_code",
             "arguments": {"language": "javascript", "stdin": "from stdin\n",
                           "code": "console.log(readStdin().trim().toUpperCase())"}}])
        self.assertIs(spin["ok"].get("isError", False), False, spin)
        r = self.result(spin)
        self.assertEqual((r["timed_out"], r["outcome"]), (True, "timed_out"), r)
        self.assertNotEqual(r["exit_code"], 0, r)
        r = self.result(echo)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "FROM STDIN\n"), r)

    def test_a_floor_above_the_tier_is_refused_and_starts_nothing(self):
        before = runs_started(self.d)
        line = self.call("run_code", {"language": "javascript", "code": "console.log(1)",
                                      "minimum_isolation": self.FLOOR})
        self.refused(line, ["INSUFFICIENT_ISOLATION"], self.tier)
        self.assertEqual(runs_started(self.d), before)
        # The count moves for a run that does start (the check can fail).
        self.result(self.call("run_code", {"language": "javascript", "code": "1",
                                           "minimum_isolation": "none"}))
        self.assertEqual(runs_started(self.d), before + 1)

    def floors_at_initialization(self):
        """Each way this transport fixes a floor when the MCP session opens."""
        ways = {"capability": {"capability_minimum_isolation": self.FLOOR}}
        if self.TRANSPORT == "http":
            ways["header"] = {"header_minimum_isolation": self.FLOOR}
        else:
            ways["--minimum-isolation"] = {"cli_minimum_isolation": self.FLOOR}
        return ways

    def test_a_floor_fixed_at_initialization_no_argument_lowers(self):
        plain, _ = self.drive([])
        plain = plain["ok"]["instructions"]
        for way, plan in self.floors_at_initialization().items():
            with self.subTest(way=way):
                before = runs_started(self.d)
                connect, [run, run_none, explain] = self.drive([
                    {"op": "callTool", "name": "run_code",
                     "arguments": {"language": "javascript", "code": "console.log(1)"}},
                    {"op": "callTool", "name": "run_code",
                     "arguments": {"language": "javascript", "code": "console.log(1)",
                                   "minimum_isolation": "none"}},
                    {"op": "callTool", "name": "explain",
                     "arguments": {"language": "javascript", "code": "console.log(1)",
                                   "minimum_isolation": "none"}}], **plan)
                # The instructions say the session's floor: they name it
                # where an MCP session without one does not.
                said = connect["ok"]["instructions"]
                self.assertGreater(said.count(self.FLOOR), plain.count(self.FLOOR), (said, plain))
                self.refused(run, ["INSUFFICIENT_ISOLATION"], self.tier)
                self.refused(run_none, ["INSUFFICIENT_ISOLATION"], self.tier)
                self.assertIs(self.result(explain)["dispatch"], False, explain)
                self.assertEqual(runs_started(self.d), before)

    def test_a_bad_tier_at_initialization(self):
        ways = {"capability": {"capability_minimum_isolation": "bogus"}}
        if self.TRANSPORT == "http":
            ways["header"] = {"header_minimum_isolation": "bogus"}
        for way, plan in ways.items():
            with self.subTest(way=way):
                connect, _ = self.drive([], expect_connect=False, **plan)
                self.assertIn("error", connect, connect)
                self.assertEqual(connect["error"]["code"], -32602, connect)

    def test_explain_with_and_without_the_floor(self):
        _, [floor, plain] = self.drive([
            {"op": "callTool", "name": "explain",
             "arguments": {"language": "javascript", "code": "1",
                           "minimum_isolation": self.FLOOR}},
            {"op": "callTool", "name": "explain",
             "arguments": {"language": "javascript", "code": "1"}}])
        e = self.result(floor)
        self.assertIs(e["dispatch"], False, e)
        self.assertEqual(e["isolation"], self.tier)
        self.assertTrue(any(not c["passed"] for c in e["checks"]), e)
        e = self.result(plain)
        self.assertIs(e["dispatch"], True, e)
        self.assertTrue(e["checks"] and all(c["passed"] for c in e["checks"]), e)
        for c in e["checks"]:
            self.assertLessEqual({"check", "what", "value", "passed"}, set(c), c)

    def test_the_describe_resource_is_describe(self):
        _, [listed, read] = self.drive([{"op": "listResources"},
                                        {"op": "readResource", "uri": "plimsoll://describe"}])
        [res] = [r for r in listed["ok"]["resources"] if r["uri"] == "plimsoll://describe"]
        self.assertEqual(res["mimeType"], "application/json", res)
        [content] = read["ok"]["contents"]
        self.assertEqual(content["uri"], "plimsoll://describe", content)
        self.assertEqual(content["mimeType"], "application/json", content)
        self.assertEqual(json.loads(content["text"]), describe(self.d))

    def test_an_unknown_tool_is_a_protocol_error(self):
        self.mcp_error(self.call("no_such_tool", {}), -32602)

    def test_arguments_of_the_wrong_type_are_refused(self):
        for args in ({"language": "javascript", "code": 42},
                     {"language": "javascript", "code": "1", "timeout_ms": "soon"},
                     {"language": "cobol", "code": "1"},
                     {"code": "1"}):
            with self.subTest(args=args):
                self.refused(self.call("run_code", args), ["INVALID_REQUEST"], self.tier)

    def test_output_past_the_bound_is_cut_at_a_utf8_boundary(self):
        # 3000 three-byte characters on stdout, 5000 bytes on stderr.
        line = self.call("run_code", {
            "language": "javascript",
            "code": "console.log('\\u20ac'.repeat(3000)); console.error('x'.repeat(5000))"})
        r = self.result(line)
        self.assertEqual(r["exit_code"], 0, r)
        # The longest whole-character prefix within 4096 bytes: 1365 of them.
        self.assertEqual(r["stdout"], "\u20ac" * (OUTPUT_BYTES // 3), r["stdout"][-20:])
        self.assertIs(r["stdout_truncated"], True)
        self.assertEqual(r["stderr"], "x" * OUTPUT_BYTES)
        self.assertIs(r["stderr_truncated"], True)
        # Nor does any content block carry more of it to the model.
        for block in line["ok"]["content"]:
            if block["type"] == "text":
                self.assertNotIn("\u20ac" * (OUTPUT_BYTES // 3 + 1), block["text"])
                self.assertNotIn("x" * (OUTPUT_BYTES + 1), block["text"])
        # Under the bound nothing is cut.
        r = self.result(self.call("run_code", {"language": "javascript",
                                               "code": "console.log('\\u20ac'.repeat(1000))"}))
        self.assertEqual((r["stdout"], r["stdout_truncated"]), ("\u20ac" * 1000 + "\n", False))


class WasmToolsStdio(WasmTools, unittest.TestCase):
    TRANSPORT = "stdio"


class WasmToolsHttp(WasmTools, unittest.TestCase):
    TRANSPORT = "http"


DATA = "plimsoll/data:latest"

# A matplotlib figure left open: 4 by 3 inches at 50 dpi, 200 by 150 pixels.
FIGURE = ("import matplotlib.pyplot as plt\n"
          "fig, ax = plt.subplots(figsize=(4, 3), dpi=50)\n"
          "ax.plot([1, 2, 3], [1, 4, 9])\n"
          "print('drawn')")


class DockerSessions(DockerDaemon, Driver, unittest.TestCase):
    """The session tools against one docker daemon under runc with sessions
    on, whose sessions run on the data image (plimsoll/data: the project
    image with numpy, pandas and matplotlib), over both transports."""
    RUNTIME = "runc"
    INSTANCE = "mcp-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "4", "SANDBOX_DOCKER_PROJECT_IMAGE": DATA,
                "SANDBOX_DOCKER_WARM": "0"}
    START_TIMEOUT = 240

    @classmethod
    def setUpClass(cls):
        setup_stack()
        status, _ = engine("GET", "/images/%s/json" % DATA)
        if status != 200:
            raise RuntimeError("%s is not built: run scripts/build/images" % DATA)
        super().setUpClass()
        cls.describe = describe(cls.d)
        cls.tier = cls.describe["isolation"]
        assert cls.describe["operations"]["display"]["matplotlib"], cls.describe

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left

    def cell(self, language, code):
        return {"op": "callTool", "name": "run_cell",
                "arguments": {"session_id": "{{sid}}", "language": language, "code": code}}

    def images(self, line):
        return [base64.b64decode(b["data"]) for b in line["ok"]["content"]
                if b["type"] == "image" and b["mimeType"] == "image/png"]

    def a_session_end_to_end(self, transport):
        self.TRANSPORT = transport
        steps = [
            {"op": "callTool", "name": "open_session",
             "arguments": {"languages": ["python", "javascript"]},
             "save": {"sid": "structuredContent.session_id"}},
            self.cell("python", "x = 41"),
            self.cell("python", "print(x + 1)"),
            {"op": "callTool", "name": "write_files", "arguments": {
                "session_id": "{{sid}}",
                "files": [{"path": "data/a.txt", "content": "hello\n"},
                          {"path": "data/b.bin",
                           "content_base64": base64.b64encode(bytes(range(256))).decode()}]}},
            {"op": "callTool", "name": "read_file",
             "arguments": {"session_id": "{{sid}}", "path": "data/a.txt"}},
            {"op": "callTool", "name": "read_file",
             "arguments": {"session_id": "{{sid}}", "path": "data/b.bin", "offset": 250}},
            {"op": "callTool", "name": "list_files",
             "arguments": {"session_id": "{{sid}}", "path": "", "depth": 2}},
            self.cell("python", "print(open('data/a.txt').read().strip() + ' ' + str(x))"),
            self.cell("python", FIGURE),
            self.cell("javascript", "display(Buffer.from('%s', 'base64'), 'image/png'); 7"
                      % base64.b64encode(PNG_1X1).decode()),
            {"op": "callTool", "name": "explain",
             "arguments": {"session_id": "{{sid}}", "language": "python", "code": "x"}},
            {"op": "callTool", "name": "close_session", "arguments": {"session_id": "{{sid}}"}},
            self.cell("python", "print(x)"),
            {"op": "callTool", "name": "read_file",
             "arguments": {"session_id": "{{sid}}", "path": "data/a.txt"}},
            {"op": "callTool", "name": "run_code", "arguments": {
                "language": "javascript", "code": "console.log('before'); process.exit(3)"}},
        ]
        _, lines = self.drive(steps)
        (opened, set_x, print_x, wrote, read_a, read_b, listed, read_back, figure, js_png,
         explained, closed, after, read_after, exit3) = lines

        s = self.result(opened)
        self.assertRegex(s["session_id"], r"^[0-9a-f]{64}$")
        self.assertEqual(s["isolation"], self.tier)

        r = self.result(set_x)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, ""), r)
        self.assertEqual(r["isolation"], self.tier)
        r = self.result(print_x)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "42\n"), r)
        self.assertIs(r["interpreter_started"], False, r)

        self.assertEqual(self.result(wrote), {"files": 2, "bytes": 6 + 256})
        r = self.result(read_a)
        self.assertEqual((r["path"], r["size"], r["offset"], r["length"], r["more"],
                          r["content"], r["truncated"]),
                         ("data/a.txt", 6, 0, 6, False, "hello\n", False), r)
        r = self.result(read_b)
        self.assertEqual((r["size"], r["offset"], r["length"], r["more"]), (256, 250, 6, False), r)
        self.assertEqual(base64.b64decode(r["content_base64"]), bytes(range(250, 256)), r)
        entries = {e["path"]: (e["type"], e["size"]) for e in self.result(listed)["entries"]}
        self.assertEqual(entries.get("data/a.txt"), ("file", 6), entries)
        self.assertEqual(entries.get("data/b.bin"), ("file", 256), entries)
        self.assertEqual(entries.get("data", ("?",))[0], "directory", entries)
        self.assertIs(self.result(listed)["truncated"], False)
        self.assertEqual(self.result(read_back)["stdout"], "hello 41\n")

        # The figure: an image content block of the figure's own size.
        r = self.result(figure)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "drawn\n"), r)
        self.assertEqual(len(r["outputs"]), 1, r)
        self.assertEqual(r["outputs"][0]["kind"], "display", r)
        self.assertIn("image/png", r["outputs"][0]["mime_types"], r)
        [png] = self.images(figure)
        self.assertEqual(png[:8], PNG)
        self.assertEqual(png[12:16], b"IHDR")
        self.assertEqual(struct.unpack(">II", png[16:24]), (200, 150))
        # JavaScript's display() of bytes: those bytes, exactly.
        r = self.result(js_png)
        self.assertEqual((r["exit_code"], r["outputs"]),
                         (0, [{"kind": "display", "mime_types": ["image/png"]}]), r)
        self.assertEqual(self.images(js_png), [PNG_1X1])

        e = self.result(explained)
        self.assertIs(e["dispatch"], True, e)
        self.assertEqual(e["isolation"], self.tier)
        self.assertEqual(self.result(closed), {"closed": True})
        self.refused(after, ["SESSION_ENDED", "NOT_FOUND"], self.tier)
        self.refused(read_after, ["SESSION_ENDED", "NOT_FOUND"], self.tier)

        # A snippet's non-zero exit (Node's process.exit): a normal result.
        self.assertIs(exit3["ok"].get("isError", False), False, exit3)
        r = self.result(exit3)
        self.assertEqual((r["exit_code"], r["stdout"], r["isolation"]),
                         (3, "before\n", self.tier), r)

    def test_a_session_end_to_end_over_stdio(self):
        self.a_session_end_to_end("stdio")

    def test_a_session_end_to_end_over_http(self):
        self.a_session_end_to_end("http")

    def test_the_session_tools_under_a_floor_above_the_tier(self):
        """A floor fixed at initialization above the daemon's tier: the
        session tools are refused INSUFFICIENT_ISOLATION, whatever session
        they name."""
        for transport, plan in (("stdio", {"cli_minimum_isolation": "vm"}),
                                ("http", {"header_minimum_isolation": "vm"})):
            with self.subTest(transport=transport):
                self.TRANSPORT = transport
                _, lines = self.drive([
                    {"op": "callTool", "name": "open_session", "arguments": {}},
                    {"op": "callTool", "name": "run_cell",
                     "arguments": {"session_id": "0" * 64, "language": "python",
                                   "code": "1"}},
                    {"op": "callTool", "name": "list_files",
                     "arguments": {"session_id": "0" * 64}}], **plan)
                for line in lines:
                    self.refused(line, ["INSUFFICIENT_ISOLATION"], self.tier)


if __name__ == "__main__":
    unittest.main()
