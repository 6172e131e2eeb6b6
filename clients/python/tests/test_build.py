# SPDX-License-Identifier: Apache-2.0
"""The in-tree build backend (_build/plimsoll_build.py): what its wheel and
sdist hold, and that its reader of pyproject.toml reads it as tomllib
does.  tests/clients/test_install.py installs with it through pip."""
from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import sys
import tarfile
import tempfile
import tomllib
import unittest
import zipfile

import plimsoll

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "plimsoll_build", os.path.join(HERE, "_build", "plimsoll_build.py"))
assert spec is not None and spec.loader is not None
backend = importlib.util.module_from_spec(spec)
spec.loader.exec_module(backend)


class Build(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_pyproject_read_without_tomllib_as_with_it(self) -> None:
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            data = f.read()
        self.assertEqual(backend._small_toml(data.decode("utf-8"))["project"],
                         tomllib.loads(data.decode("utf-8"))["project"])
        self.assertEqual(tomllib.loads(data.decode("utf-8"))["build-system"]["requires"], [])

    def test_the_small_reader_refuses_what_it_cannot_read(self) -> None:
        for text in ('[project]\nversion = 1\n', 'name = "x"\n', '[project]\nname: "x"\n'):
            with self.subTest(text=text), self.assertRaises(ValueError):
                backend._small_toml(text)

    def test_the_wheel_holds_the_package_and_a_record_that_checks(self) -> None:
        name = backend.build_wheel(self.tmp.name)
        self.assertEqual(name, "plimsoll-%s-py3-none-any.whl" % plimsoll.__version__)
        with zipfile.ZipFile(os.path.join(self.tmp.name, name)) as z:
            names = z.namelist()
            info = "plimsoll-%s.dist-info" % plimsoll.__version__
            src = os.path.join(HERE, "src", "plimsoll")
            want = sorted("plimsoll/" + n for n in os.listdir(src)
                          if n.endswith(".py") or n == "py.typed")
            self.assertEqual(sorted(n for n in names if n.startswith("plimsoll/")), want)
            self.assertEqual(sorted(n for n in names if not n.startswith("plimsoll/")),
                             [info + "/METADATA", info + "/RECORD", info + "/WHEEL"])
            rows = list(csv.reader(io.StringIO(z.read(info + "/RECORD").decode())))
            self.assertEqual(sorted(r[0] for r in rows), sorted(names))
            for path, digest, size in rows:
                if path == info + "/RECORD":
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = z.read(path)
                h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual((digest, int(size)), ("sha256=" + h.decode(), len(data)), path)
            meta = z.read(info + "/METADATA").decode()
            self.assertIn("\nName: plimsoll\n", meta)
            self.assertIn("\nVersion: %s\n" % plimsoll.__version__, meta)
            self.assertIn("\nRequires-Python: >=3.9\n", meta)
            self.assertIn("Tag: py3-none-any\n", z.read(info + "/WHEEL").decode())

    def test_builds_are_reproducible(self) -> None:
        a, b = os.path.join(self.tmp.name, "a"), os.path.join(self.tmp.name, "b")
        os.mkdir(a)
        os.mkdir(b)
        for build in (backend.build_wheel, backend.build_sdist):
            na, nb = build(a), build(b)
            with open(os.path.join(a, na), "rb") as fa, open(os.path.join(b, nb), "rb") as fb:
                self.assertEqual(fa.read(), fb.read(), na)

    def test_the_sdist_holds_the_backend_and_the_sources(self) -> None:
        name = backend.build_sdist(self.tmp.name)
        base = "plimsoll-%s" % plimsoll.__version__
        self.assertEqual(name, base + ".tar.gz")
        with tarfile.open(os.path.join(self.tmp.name, name)) as t:
            names = t.getnames()
        for want in ("PKG-INFO", "pyproject.toml", "README.md", "_build/plimsoll_build.py",
                     "src/plimsoll/__init__.py", "src/plimsoll/py.typed"):
            self.assertIn("%s/%s" % (base, want), names)
        self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
        self.assertTrue(all(n.startswith(base + "/") for n in names), names)

    def test_the_editable_wheel_points_at_src(self) -> None:
        name = backend.build_editable(self.tmp.name)
        with zipfile.ZipFile(os.path.join(self.tmp.name, name)) as z:
            pth = [n for n in z.namelist() if n.endswith(".pth")]
            self.assertEqual(len(pth), 1)
            self.assertEqual(z.read(pth[0]).decode().strip(), os.path.join(HERE, "src"))

    def test_it_asks_for_nothing(self) -> None:
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        self.assertEqual(backend.get_requires_for_build_sdist(), [])
        self.assertEqual(backend.get_requires_for_build_editable(), [])


if __name__ == "__main__":
    sys.exit(unittest.main())
