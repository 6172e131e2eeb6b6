# SPDX-License-Identifier: Apache-2.0
"""The README's examples run as written against the wasm daemon (the
session examples against the harness's session daemon)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import unittest
from typing import Iterator
from unittest import mock

from .support import env

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


@contextlib.contextmanager
def readme_environment(url_variable: str = "PLIMSOLL_TEST_URL") -> Iterator[None]:
    """What the README's reader has: PLIMSOLL_URL and PLIMSOLL_KEY_FILE, a
    file that ends in a newline as keygen writes it; no PLIMSOLL_KEY. The
    daemon is the harness's wasm one, or the one ``url_variable`` names."""
    url, key = env(url_variable), env("PLIMSOLL_TEST_KEY")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "key")
        with open(path, "w") as f:
            f.write(key + "\n")
        with mock.patch.dict(os.environ, {"PLIMSOLL_URL": url, "PLIMSOLL_KEY_FILE": path}):
            os.environ.pop("PLIMSOLL_KEY", None)
            yield


class Readme(unittest.TestCase):
    def test_ten_line_example(self) -> None:
        with open(README, encoding="utf-8") as f:
            block = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
        self.assertLessEqual(len(block.strip().splitlines()), 10)
        out = io.StringIO()
        with readme_environment(), contextlib.redirect_stdout(out):
            exec(compile(block, README, "exec"), {})
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "process")
        self.assertTrue(lines[1].startswith("0 42"), lines)
        self.assertEqual(lines[-1], "refused, nothing ran; this daemon is process")

    def test_asyncio_example(self) -> None:
        with open(README, encoding="utf-8") as f:
            block = re.search(r"^## asyncio\n+(?:<!--[^\n]*-->\n)?```python\n(.*?)```", f.read(),
                              re.S | re.M)
        assert block is not None
        out = io.StringIO()
        with readme_environment(), contextlib.redirect_stdout(out):
            exec(compile(block.group(1), README, "exec"), {"__name__": "readme"})
        rows = [line.split() for line in out.getvalue().splitlines()]
        self.assertEqual([r[:2] for r in rows], [["0", str(n * 7)] for n in range(4)])
        self.assertTrue(all(len(r[2]) == 12 for r in rows), rows)

    def test_live_output_example(self) -> None:
        with open(README, encoding="utf-8") as f:
            block = re.search(r"^## Live output\n.*?```python\n(.*?)```", f.read(), re.S | re.M)
        assert block is not None
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
        with readme_environment(), contextlib.redirect_stdout(out):
            exec(compile(block.group(1), README, "exec"), {"__name__": "readme"})
        out.flush()
        lines = raw.getvalue().decode().splitlines()
        self.assertEqual(lines[:3], ["line 0", "line 1", "line 2"])
        self.assertTrue(lines[3].startswith("0 ") and len(lines[3]) == 66, lines)

    def test_managing_sessions_examples(self) -> None:
        """The blocks of "Managing sessions", each with the output the
        README shows after it, against the harness's session daemon."""
        self.run_section("Managing sessions")

    def test_session_files_examples(self) -> None:
        """The blocks of "A session's files", each with the output the
        README shows after it, against the harness's session daemon."""
        self.run_section("A session's files")

    def test_artifacts_example(self) -> None:
        """The block of "A project's artifacts", with its output, against
        the harness's docker daemon."""
        self.run_section("A project's artifacts", blocks=1)

    def test_display_outputs_example(self) -> None:
        """The block of "Display outputs and usage", with its output,
        against the harness's docker daemon."""
        self.run_section("Display outputs and usage", blocks=1)

    def run_section(self, title: str, blocks: int = 2) -> None:
        """Each docker-sessions block of the README's section `title` run,
        its printout compared with the output block after it."""
        with open(README, encoding="utf-8") as f:
            section = re.search(r"^## %s\n(.*?)^## " % re.escape(title), f.read(), re.S | re.M)
        assert section is not None
        pairs = re.findall(r"<!-- doc: run docker-sessions -->\n```python\n(.*?)```\n+"
                           r"<!-- doc: output -->\n```\n(.*?)```", section.group(1), re.S)
        self.assertEqual(len(pairs), blocks)
        for n, (block, shown) in enumerate(pairs):
            with self.subTest(block=n):
                out = io.StringIO()
                with readme_environment("PLIMSOLL_TEST_SESSION_URL"), \
                        contextlib.redirect_stdout(out):
                    exec(compile(block, README, "exec"), {"__name__": "readme"})
                self.assertEqual(out.getvalue(), shown)


if __name__ == "__main__":
    unittest.main()
