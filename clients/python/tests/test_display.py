# SPDX-License-Identifier: Apache-2.0
"""A cell's display outputs and a run's usage: what the answer may hold
(offline), how a notebook shows an output (IPython's formatter, when
IPython is installed), and what the harness's docker (runc) daemon gives
back, unary and streamed, with its SANDBOX_DISPLAY_OUTPUTS of 8. The live
tests skip, with a clear message, when PLIMSOLL_TEST_SESSION_URL is not
set."""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import struct
import sys
import unittest
from typing import Any, Dict, List, Tuple

import plimsoll
from plimsoll import DisplayOutput, RunResult, Usage
from plimsoll._answer import Malformed, check_answer
from plimsoll._stream import Decoder
from plimsoll.errors import ProtocolError

from .support import env

NO_DOCKER = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
             "--no-sessions, or no harness): the live display tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_display: %s\n" % NO_DOCKER)

PNG = bytes(range(256))
#: A Python cell: a raw PNG, an object with an HTML representation shown
#: with display() and then as the cell's value, output between them.
PY_CELL = ("print('before')\n"
           "display({'image/png': bytes(range(256)), 'text/plain': 'a png'}, raw=True)\n"
           "class Total:\n"
           "    def _repr_html_(self): return '<b>42</b>'\n"
           "    def __repr__(self): return 'Total(42)'\n"
           "display(Total())\n"
           "print('after')\n"
           "Total()\n")
TOTAL = {"text/html": "<b>42</b>", "text/plain": "Total(42)"}
#: What the harness's docker daemon keeps of one cell's outputs.
HARNESS_DISPLAY_OUTPUTS = 8

BUNDLE = {"kind": "display",
          "data": {"image/png": base64.b64encode(PNG).decode(), "text/plain": "a png",
                   "text/html": "<b>x</b>", "application/json": "{\"a\": [1, 2]}",
                   "image/svg+xml": "<svg/>", "image/jpeg": base64.b64encode(b"\xff\xd8").decode()}}


def answer(**extra: Any) -> Dict[str, Any]:
    a: Dict[str, Any] = {"exit_code": 0, "stdout": "", "stderr": ""}
    a.update(extra)
    return a


class Shapes(unittest.TestCase):
    """What a RunResponse's outputs and usage may be; anything else is a
    protocol error."""

    def test_a_well_formed_answer_is_read(self) -> None:
        a = answer(outputs=[BUNDLE, {"kind": "result", "data": {"text/plain": "1"}}],
                   outputs_dropped=2,
                   usage={"cpu_user_ms": 5, "cpu_system_ms": 6, "memory_peak_kib": 7,
                          "wall_ms": 8, "source": "cgroup"},
                   steps=[{"name": "a", "usage": {"wall_ms": 3, "source": "cgroup"}}, {"name": "b"}])
        r = RunResult.from_dict(check_answer(a, "RunCell"))
        self.assertEqual([o.kind for o in r.outputs], ["display", "result"])
        self.assertEqual(r.outputs[0].bytes_of("image/png"), PNG)
        self.assertEqual(r.outputs[0].data, BUNDLE["data"])
        self.assertEqual(r.outputs_dropped, 2)
        self.assertEqual(r.usage, Usage(5, 6, 7, 8, "cgroup"))
        self.assertEqual(r.usage_absent, "")
        self.assertEqual(r.steps[0].usage, Usage(wall_ms=3, source="cgroup"))
        self.assertIsNone(r.steps[1].usage)

    def test_absent_fields_are_their_defaults(self) -> None:
        r = RunResult.from_dict(check_answer(answer(usage_absent="not measured here"), "Run"))
        self.assertEqual((r.outputs, r.outputs_dropped, r.usage, r.usage_absent),
                         ([], 0, None, "not measured here"))

    def test_what_is_refused(self) -> None:
        cases = [
            answer(outputs={"kind": "display"}),
            answer(outputs=[None]),
            answer(outputs=[{"kind": "display", "data": ["text/plain"]}]),
            answer(outputs=[{"kind": "display", "data": {"text/plain": 1}}]),
            answer(outputs=[{"kind": "display", "data": {"text/plain": None}}]),
            answer(outputs=[{"kind": 1, "data": {}}]),
            answer(outputs=[{"kind": "update", "data": {"text/plain": "x"}}]),
            answer(outputs=[{"data": {"text/plain": "x"}}]),
            answer(outputs=[{"kind": "display", "data": {"image/png": "not base64!"}}]),
            answer(outputs=[{"kind": "display", "data": {"application/pdf": "QQ=x"}}]),
            answer(outputs_dropped=-1),
            answer(outputs_dropped="3"),
            answer(usage=[]),
            answer(usage={"cpu_user_ms": 2 ** 32}),
            answer(usage={"wall_ms": "1"}),
            answer(usage={"source": 1}),
            answer(usage_absent=False),
            answer(steps=[{"usage": {"memory_peak_kib": -1}}]),
        ]
        for a in cases:
            with self.subTest(answer=a), self.assertRaises(Malformed):
                check_answer(a, "RunCell")

    def test_describe_says_what_a_cell_can_show(self) -> None:
        d = {"operations": {"display": {"python": True, "javascript": True, "matplotlib": False,
                                        "pandas": True}},
             "limits": {"display_outputs": 32, "display_output_bytes": 4194304,
                        "display_bytes": 8388608}}
        desc = plimsoll.Description.from_dict(check_answer(d, "Describe"))
        self.assertEqual(desc.operations.display,
                         plimsoll.DisplaySupport(True, True, False, True))
        self.assertEqual((desc.limits.display_outputs, desc.limits.display_output_bytes,
                          desc.limits.display_bytes), (32, 4194304, 8388608))
        with self.assertRaises(Malformed):
            check_answer({"operations": {"display": {"python": "yes"}}}, "Describe")
        with self.assertRaises(Malformed):
            check_answer({"limits": {"display_bytes": -1}}, "Describe")


class Notebook(unittest.TestCase):
    """How an output shows itself in IPython and Jupyter."""

    def setUp(self) -> None:
        self.out = DisplayOutput.from_dict(BUNDLE)

    def test_the_bundle_is_as_ipython_publishes_it(self) -> None:
        b = self.out._repr_mimebundle_()
        self.assertEqual(b["image/png"], base64.b64encode(PNG).decode())  # base64 text
        self.assertEqual(b["text/html"], "<b>x</b>")
        self.assertEqual(b["application/json"], {"a": [1, 2]})  # a JSON value, not its text
        self.assertEqual(b["image/svg+xml"], "<svg/>")
        self.assertEqual(list(self.out._repr_mimebundle_(include=["text/plain"])), ["text/plain"])
        self.assertNotIn("image/png", self.out._repr_mimebundle_(exclude=["image/png"]))
        bad_json = DisplayOutput.from_dict({"kind": "display",
                                            "data": {"application/json": "{", "text/plain": "j"}})
        self.assertEqual(bad_json._repr_mimebundle_(), {"text/plain": "j"})

    def test_the_repr_methods(self) -> None:
        o = self.out
        self.assertEqual(o._repr_png_(), PNG)  # raw bytes, as IPython's PNGFormatter takes
        self.assertEqual(o._repr_jpeg_(), b"\xff\xd8")
        self.assertEqual(o._repr_html_(), "<b>x</b>")
        self.assertEqual(o._repr_svg_(), "<svg/>")
        self.assertEqual(o._repr_json_(), {"a": [1, 2]})
        self.assertIsNone(o._repr_markdown_())
        self.assertIsNone(o._repr_latex_())
        self.assertEqual(o.types, list(BUNDLE["data"]))
        self.assertEqual(o.bytes_of("text/html"), b"<b>x</b>")
        self.assertEqual(o.text_of("text/plain"), "a png")
        with self.assertRaises(ValueError):
            o.text_of("image/png")
        with self.assertRaises(KeyError):
            o.bytes_of("image/gif")
        self.assertEqual(repr(o), "DisplayOutput(kind='display', types=%r)" % o.types)

    def test_mime_is_text(self) -> None:
        for mime in ("text/plain", "text/csv", "application/json", "application/javascript",
                     "image/svg+xml", "application/vnd.plotly.v1+json", "application/rss+xml"):
            self.assertTrue(plimsoll.mime_is_text(mime), mime)
        for mime in ("image/png", "image/jpeg", "application/pdf", "application/octet-stream"):
            self.assertFalse(plimsoll.mime_is_text(mime), mime)

    def test_ipython_formats_it(self) -> None:
        if importlib.util.find_spec("IPython") is None:
            self.skipTest("IPython is not installed: its formatter is not tried")
        from IPython.core.formatters import DisplayFormatter
        data, _ = DisplayFormatter().format(self.out)
        self.assertEqual(data["image/png"], base64.b64encode(PNG).decode())
        self.assertEqual(data["image/jpeg"], base64.b64encode(b"\xff\xd8").decode())
        self.assertEqual(data["text/html"], "<b>x</b>")
        self.assertEqual(data["application/json"], {"a": [1, 2]})
        self.assertEqual(data["text/plain"], "a png")
        json.dumps(data)  # what the kernel sends is JSON


def frame(flags: int, msg: Any) -> bytes:
    body = json.dumps(msg).encode()
    return struct.pack(">BI", flags, len(body)) + body


class StreamedDisplays(unittest.TestCase):
    """The display chunks of a RunCellStream, read by the decoder: given in
    order among the output, and checked against the result's outputs."""

    def decode(self, *msgs: Any) -> Tuple[List[plimsoll.OutputChunk], Dict[str, Any]]:
        d = Decoder("RunCellStream")
        chunks = d.feed(b"".join(frame(0, m) for m in msgs) + frame(2, {}))
        return chunks, d.finish()

    def test_in_order_and_as_the_result_holds_them(self) -> None:
        shown = {"kind": "result", "data": {"text/plain": "1"}}
        chunks, res = self.decode(
            {"output": {"stdout": base64.b64encode(b"a\n").decode()}},
            {"output": {"display": BUNDLE}},
            {"output": {"stdout": base64.b64encode(b"b\n").decode()}},
            {"output": {"display": shown}},
            {"result": answer(stdout="a\nb\n", outputs=[BUNDLE, shown])})
        self.assertEqual([(c.stdout, c.display.kind if c.display else None) for c in chunks],
                         [(b"a\n", None), (b"", "display"), (b"b\n", None), (b"", "result")])
        self.assertEqual(chunks[1].display.bytes_of("image/png"), PNG)
        self.assertEqual(len(res["outputs"]), 2)

    def test_what_breaks_the_stream(self) -> None:
        other = {"kind": "display", "data": {"text/plain": "other"}}
        cases = [
            # a display the result does not hold, or holds otherwise
            [{"output": {"display": BUNDLE}}, {"result": answer()}],
            [{"output": {"display": other}}, {"result": answer(outputs=[BUNDLE])}],
            [{"output": {"display": other}}, {"output": {"display": BUNDLE}},
             {"result": answer(outputs=[BUNDLE, other])}],
            # the result holds one that never came, once chunks came
            [{"output": {"stdout": "YQ=="}}, {"result": answer(stdout="a", outputs=[BUNDLE])}],
            # a display with output bytes, or not a display
            [{"output": {"display": BUNDLE, "stdout": "YQ=="}},
             {"result": answer(stdout="a", outputs=[BUNDLE])}],
            [{"output": {"display": {"kind": "display", "data": {"image/png": "%%"}}}},
             {"result": answer()}],
            [{"output": {"display": {"kind": "nope", "data": {}}}}, {"result": answer()}],
            [{"output": {"display": "text/plain"}}, {"result": answer()}],
        ]
        for msgs in cases:
            with self.subTest(msgs=msgs), self.assertRaises(ProtocolError):
                self.decode(*msgs)

    def test_a_stream_of_no_chunks_has_nothing_to_check(self) -> None:
        chunks, res = self.decode({"result": answer(outputs=[BUNDLE])})
        self.assertEqual((chunks, len(res["outputs"])), ([], 1))


def events(chunks: List[plimsoll.OutputChunk]) -> List[Any]:
    """The chunks as the caller saw them: stdout runs joined, each display
    as its kind."""
    out: List[Any] = []
    for c in chunks:
        if c.display is not None:
            out.append(c.display.kind)
        elif c.stdout:
            if out and isinstance(out[-1], bytes):
                out[-1] += c.stdout
            else:
                out.append(c.stdout)
    return out


class Live(unittest.TestCase):
    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL", NO_DOCKER),
                                      env("PLIMSOLL_TEST_KEY"))

    def check_python_cell(self, r: RunResult) -> None:
        self.assertEqual((r.exit_code, r.stdout), (0, "before\nafter\n"), r.stderr)
        self.assertEqual([o.kind for o in r.outputs], ["display", "display", "result"])
        png, total, value = r.outputs
        self.assertEqual(png.bytes_of("image/png"), PNG)
        self.assertEqual(png.data["text/plain"], "a png")
        self.assertEqual(png._repr_png_(), PNG)
        self.assertEqual(total.data, TOTAL)
        self.assertEqual(value.data, TOTAL)
        self.assertEqual(value._repr_html_(), "<b>42</b>")
        self.assertEqual(r.outputs_dropped, 0)

    def check_usage(self, r: RunResult) -> None:
        """Docker measures every run: usage present, from the cgroup."""
        u = r.usage
        assert u is not None, r.usage_absent
        self.assertEqual(r.usage_absent, "")
        self.assertIn(u.source, plimsoll.USAGE_SOURCES)
        self.assertEqual(u.source, "cgroup")
        self.assertGreater(u.wall_ms, 0)
        self.assertGreater(u.memory_peak_kib, 0)

    def test_describe_says_cells_can_show(self) -> None:
        d = self.client.describe()
        self.assertTrue(d.operations.display.python)
        self.assertTrue(d.operations.display.javascript)
        self.assertEqual(d.limits.display_outputs, HARNESS_DISPLAY_OUTPUTS)
        self.assertGreater(d.limits.display_output_bytes, 0)
        self.assertGreater(d.limits.display_bytes, 0)

    def test_python_and_javascript_cells(self) -> None:
        with self.client.open_session() as s:
            r = s.cell(PY_CELL, "python")
            self.check_python_cell(r)
            self.check_usage(r)
            js = s.cell("display({a: 1}); console.log('js')", "javascript")
            self.assertEqual((js.exit_code, js.stdout), (0, "js\n"), js.stderr)
            self.assertEqual([(o.kind, o.data) for o in js.outputs],
                             [("display", {"application/json": "{\"a\":1}"})])
            self.assertEqual(js.outputs[0]._repr_json_(), {"a": 1})
            plain = s.cell("x = 1", "python")
            self.assertEqual((plain.outputs, plain.outputs_dropped), ([], 0))
            self.assertNotIn("outputs", plain.raw)

    def test_past_the_display_bound_the_rest_are_dropped(self) -> None:
        n = HARNESS_DISPLAY_OUTPUTS + 3
        with self.client.open_session(languages=["python"]) as s:
            r = s.cell("for i in range(%d): display({'text/plain': str(i)}, raw=True)" % n,
                       "python")
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual([o.data["text/plain"] for o in r.outputs],
                         [str(i) for i in range(HARNESS_DISPLAY_OUTPUTS)])
        self.assertEqual(r.outputs_dropped, 3)

    def test_a_streamed_cell_gives_its_displays_in_order(self) -> None:
        with self.client.open_session(languages=["python"]) as s:
            chunks: List[plimsoll.OutputChunk] = []
            r = s.cell_stream(PY_CELL, "python", on_output=chunks.append)
            self.check_python_cell(r)
            self.assertEqual(events(chunks),
                             [b"before\n", "display", "display", b"after\n", "result"])
            shown = [c.display for c in chunks if c.display is not None]
            self.assertEqual(shown, r.outputs)
            self.assertEqual(len(s.chain), 1)

    def test_the_asyncio_client_streams_displays_too(self) -> None:
        import asyncio
        url, key = self.client.url, env("PLIMSOLL_TEST_KEY")

        async def go() -> Tuple[List[plimsoll.OutputChunk], RunResult]:
            c = plimsoll.AsyncClient(url, key)
            async with await c.open_session(languages=["python"]) as s:
                chunks: List[plimsoll.OutputChunk] = []
                return chunks, await s.cell_stream(PY_CELL, "python", on_output=chunks.append)
        chunks, r = asyncio.run(go())
        self.check_python_cell(r)
        self.assertEqual(events(chunks), [b"before\n", "display", "display", b"after\n", "result"])

    def test_usage_of_a_snippet_and_of_a_project_step(self) -> None:
        self.check_usage(self.client.run_snippet("print(1)", "python"))
        with self.client.open_session() as s:
            r = s.run_project(None, [["true"], ["sh", "-c", "echo hi"]])
            self.check_usage(r)
            self.assertEqual(len(r.steps), 2)
            for step in r.steps:
                assert step.usage is not None
                self.assertEqual(step.usage.source, "cgroup")


class LiveWasm(unittest.TestCase):
    """The wasm daemon's usage: present with its source, or absent with why;
    one or the other, never both."""

    def test_usage_is_well_formed(self) -> None:
        c = plimsoll.Client(env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY"))
        r = c.run_snippet("console.log(1)")
        self.assertEqual(r.exit_code, 0)
        if r.usage is None:
            self.assertNotEqual(r.usage_absent, "")
        else:
            self.assertEqual(r.usage_absent, "")
            self.assertIn(r.usage.source, plimsoll.USAGE_SOURCES)
            self.assertEqual(r.usage.source, "worker")


if __name__ == "__main__":
    unittest.main()
