# SPDX-License-Identifier: Apache-2.0
"""The README's ten-line example runs as written against the wasm daemon."""
from __future__ import annotations

import contextlib
import io
import os
import re
import unittest
from unittest import mock

from .support import env

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


class Readme(unittest.TestCase):
    def test_ten_line_example(self) -> None:
        url, key = env("PLIMSOLL_TEST_URL"), env("PLIMSOLL_TEST_KEY")
        with open(README, encoding="utf-8") as f:
            block = re.findall(r"```python\n(.*?)```", f.read(), re.S)[0]
        self.assertLessEqual(len(block.strip().splitlines()), 10)
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"PLIMSOLL_URL": url, "PLIMSOLL_KEY": key}), \
                contextlib.redirect_stdout(out):
            exec(compile(block, README, "exec"), {})
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "process")
        self.assertTrue(lines[1].startswith("0 42"), lines)
        self.assertEqual(lines[-1], "refused, nothing ran; this daemon is process")


if __name__ == "__main__":
    unittest.main()
