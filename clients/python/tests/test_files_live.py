# SPDX-License-Identifier: Apache-2.0
"""A session's files against the docker (runc) daemon of the harness,
through the synchronous and the asyncio client; skipped, with a clear
message, when PLIMSOLL_TEST_SESSION_URL is not set."""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import unittest
from typing import Dict

import plimsoll
from plimsoll import errors
from plimsoll.record import verify_chain
from plimsoll.results import parse_time

from .support import env

NO_SESSIONS = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
               "--no-sessions, or no harness): the session file tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_files_live: %s\n" % NO_SESSIONS)

MIB = 1 << 20
#: A local tree to upload: its files by path, text and bytes, one empty.
TREE: Dict[str, bytes] = {
    "README.txt": b"a tree\n",
    "src/main.py": b"print('hi')\n",
    "src/pkg/__init__.py": b"",
    "src/pkg/util.py": "def f():\n    return 'caf\u00e9'\n".encode(),
    "data/blob.bin": bytes(range(256)) * 64,
    "data/deeper/still/x.json": b'{"x": 1}\n',
}


def make_tree(top: str) -> None:
    for rel, data in TREE.items():
        path = os.path.join(top, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    os.symlink("README.txt", os.path.join(top, "link.txt"))  # skipped
    os.mkfifo(os.path.join(top, "fifo"))                     # skipped


class Files(unittest.TestCase):
    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                      env("PLIMSOLL_TEST_KEY"))
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def open(self, **kw: object) -> plimsoll.Session:
        s = self.client.open_session(**kw)  # type: ignore[arg-type]
        self.addCleanup(s.__exit__, None, None, None)
        return s

    def test_describe_says_files(self) -> None:
        d = self.client.describe()
        self.assertTrue(d.operations.files.supported)
        self.assertGreater(d.limits.file_read_bytes, 0)
        self.assertGreater(d.limits.file_list_entries, 0)
        self.assertGreaterEqual(d.limits.session_max_lifetime_s, 600)

    def test_write_read_list_and_the_chain_with_runs_and_cells(self) -> None:
        s = self.open(languages=["python"], minimum_isolation="container")
        binary = b"\xff\xfe\x00bin\x80"
        w = s.write_files({"notes/a.txt": "h\u00e9llo\n", "notes/b.bin": binary,
                           "top.txt": "top"})
        self.assertEqual((w.files, w.bytes), (3, 7 + len(binary) + 3))
        assert w.record is not None
        self.assertEqual((w.record.isolation, w.record.previous_digest), ("container", ""))
        r = s.read_file("notes/a.txt")
        self.assertEqual((r.path, r.content, r.size, r.offset, r.length, r.more),
                         ("notes/a.txt", "h\u00e9llo\n".encode(), 7, 0, 7, False))
        self.assertEqual(s.read_file("notes/b.bin").content, binary)
        # the guest sees what was written, and its files are read back
        c = s.cell("print(open('notes/a.txt').read(), end=''); "
                   "n = open('made.bin', 'wb').write(bytes(range(256)))", "python")
        self.assertEqual(c.stdout, "h\u00e9llo\n", c.stderr)
        self.assertEqual(s.read_bytes("made.bin"), bytes(range(256)))
        # paging with a small limit
        page = s.read_file("made.bin", 250, 4)
        self.assertEqual((page.content, page.offset, page.length, page.more, page.size),
                         (bytes([250, 251, 252, 253]), 250, 4, True, 256))
        last = s.read_file("made.bin", 254, 4)
        self.assertEqual((last.content, last.length, last.more), (b"\xfe\xff", 2, False))
        past = s.read_file("made.bin", 1000)
        self.assertEqual((past.content, past.length, past.more), (b"", 0, False))
        before = len(s.chain)
        self.assertEqual(s.read_bytes("made.bin", limit=100), bytes(range(256)))
        self.assertEqual(len(s.chain), before + 3)
        # listing, one level and more
        top = s.list_files()
        self.assertEqual([(e.path, e.type) for e in top],
                         [("made.bin", "file"), ("notes", "directory"), ("top.txt", "file")])
        self.assertFalse(top.truncated)
        made = top.entries[0]
        self.assertEqual((made.size, made.path_bytes), (256, b"made.bin"))
        self.assertTrue(0 < made.mode <= 0o7777)
        assert c.record is not None
        cell_ended = parse_time(c.record.ended_at)
        assert made.modified_time is not None and cell_ended is not None
        self.assertLessEqual(abs((made.modified_time - cell_ended).total_seconds()), 60)
        deep = s.list_files(depth=2)
        self.assertEqual([e.path for e in deep],
                         ["made.bin", "notes", "notes/a.txt", "notes/b.bin", "top.txt"])
        self.assertEqual([e.path for e in s.list_files("notes")], ["notes/a.txt", "notes/b.bin"])
        # mixed with runs and cells, the chain holds: a later cell passes its check
        p = s.run_project({"p.py": "print(open('top.txt').read())"}, [["python3", "p.py"]])
        self.assertEqual(p.steps[0].stdout, "top\n", p.detail)
        s.write_text("top.txt", "changed")
        self.assertEqual(s.cell("print(open('top.txt').read())", "python").stdout, "changed\n")
        self.assertEqual(s.read_text("top.txt"), "changed")
        info = s.info()
        self.assertEqual((info.previous_digest, info.calls), (s.chain.head, len(s.chain)))
        self.assertEqual(verify_chain(s.chain.entries).head, s.chain.head)
        self.assertEqual(s.chain.entries[1]["request"], {"path": "notes/a.txt"})

    def test_upload_a_tree_list_it_read_every_file_and_download(self) -> None:
        s = self.open()
        top = os.path.join(self.tmp, "proj")
        make_tree(top)
        n = len(s.chain)
        paths = s.upload(top, "in")
        self.assertEqual(sorted(paths), sorted("in/proj/" + p for p in TREE))
        self.assertEqual(len(s.chain), n + 1)  # one WriteFiles call
        listed = s.list_files("in/proj", depth=16)
        files = {e.path: e for e in listed if e.type == "file"}
        self.assertEqual(sorted(files), sorted(paths))
        self.assertEqual(sorted(e.path for e in listed if e.type == "directory"),
                         ["in/proj/data", "in/proj/data/deeper", "in/proj/data/deeper/still",
                          "in/proj/src", "in/proj/src/pkg"])
        for rel, data in TREE.items():
            with self.subTest(rel):
                self.assertEqual(files["in/proj/" + rel].size, len(data))
                self.assertEqual(s.read_bytes("in/proj/" + rel), data)
        local = os.path.join(self.tmp, "blob.bin")
        self.assertEqual(s.download("in/proj/data/blob.bin", local, limit=5000),
                         len(TREE["data/blob.bin"]))
        with open(local, "rb") as f:
            self.assertEqual(f.read(), TREE["data/blob.bin"])
        self.assertEqual(s.upload(os.path.join(top, "README.txt")), ["README.txt"])
        self.assertEqual(s.read_bytes("README.txt"), TREE["README.txt"])
        verify_chain(s.chain.entries)

    def test_upload_at_the_bounds(self) -> None:
        s = self.open()
        many = os.path.join(self.tmp, "many")
        for i in range(300):
            os.makedirs(os.path.join(many, "d%d" % (i % 3)), exist_ok=True)
            with open(os.path.join(many, "d%d" % (i % 3), "f%03d" % i), "w") as f:
                f.write(str(i))
        n = len(s.chain)
        s.upload(many)
        self.assertEqual(len(s.chain), n + 2)  # 256 files, then 44
        listed = s.list_files("many", depth=2)
        self.assertEqual(len([e for e in listed if e.type == "file"]), 300)
        self.assertEqual(s.read_text("many/d2/f299"), "299")
        # two files of 2 MiB are one call of 4 MiB, the most one call takes
        two = os.path.join(self.tmp, "two")
        os.makedirs(two)
        for name in ("a", "b"):
            with open(os.path.join(two, name), "wb") as f:
                f.write(name.encode() * (2 * MIB))
        n = len(s.chain)
        s.upload(two)
        self.assertEqual(len(s.chain), n + 1)
        self.assertEqual(s.read_bytes("two/b"), b"b" * (2 * MIB))
        with open(os.path.join(two, "c"), "wb") as f:
            f.write(b"\0" * (4 * MIB + 1))
        n = len(s.chain)
        with self.assertRaises(ValueError) as cm:
            s.upload(two)
        self.assertIn("4 MiB", str(cm.exception))
        self.assertEqual(len(s.chain), n)

    def test_refusals(self) -> None:
        s = self.open(languages=["python"])
        r = s.run_snippet("import os; os.makedirs('real'); open('real/f', 'w').write('x'); "
                          "os.symlink('real/f', 'lnf'); os.symlink('real', 'lnd'); "
                          "os.symlink('/etc/passwd', 'out')", language="python")
        self.assertEqual(r.exit_code, 0, r.stderr)
        n = len(s.chain)
        with self.assertRaises(errors.NotFoundError) as nf:
            s.read_file("missing.txt")
        self.assertTrue(nf.exception.message.startswith("path:"), nf.exception.message)
        self.assertFalse(nf.exception.dispatched)
        with self.assertRaises(errors.NotFoundError):
            s.list_files("no-such-dir")
        for make in (lambda: s.read_file("lnf"), lambda: s.read_file("lnd/f"),
                     lambda: s.read_file("out"), lambda: s.list_files("lnd"),
                     lambda: s.write_files({"lnd/new.txt": "x"}),
                     lambda: s.read_file("real"), lambda: s.read_file("../etc/passwd"),
                     lambda: s.read_file(""), lambda: s.read_file("/etc/passwd")):
            with self.assertRaises(errors.InvalidRequestError):
                make()
        listed = {e.path: e.type for e in s.list_files()}
        self.assertEqual(listed, {"lnd": "symlink", "lnf": "symlink", "out": "symlink",
                                  "real": "directory"})
        with self.assertRaises(ValueError):  # past 16: refused before it is sent
            s.list_files("", 17)
        self.assertEqual(len(s.chain), n + 1)  # refusals make no record
        self.assertEqual(s.read_bytes("real/f"), b"x")
        self.assertEqual(s.cell("print(open('real/f').read())", "python").stdout, "x\n")

    def test_another_callers_id_is_not_found(self) -> None:
        s = self.open()
        s.write_files({"a.txt": "mine"})
        other = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL"), env("PLIMSOLL_TEST_KEY_B"))
        unknown = "0" * 64
        for make in (lambda i: other.write_files(i, {"a.txt": "theirs"}),
                     lambda i: other.read_file(i, "a.txt"),
                     lambda i: other.list_files(i)):
            with self.assertRaises(errors.NotFoundError) as theirs:
                make(s.session_id)
            with self.assertRaises(errors.NotFoundError) as nobodys:
                make(unknown)
            a, b = theirs.exception, nobodys.exception
            self.assertEqual((a.message, a.code, a.http_status, a.metadata, a.dispatched),
                             (b.message, b.code, b.http_status, b.metadata, False))
        self.assertEqual(s.read_text("a.txt"), "mine")
        self.assertEqual(s.info().calls, 2)
        # the low-level calls, the record checked alone
        r = self.client.read_file(s.session_id, "a.txt")
        assert r.record is not None
        self.assertEqual(r.record.previous_digest, s.chain.head)


class AsyncFiles(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.client = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL", NO_SESSIONS),
                                           env("PLIMSOLL_TEST_KEY"))
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        make_tree(os.path.join(self.tmp, "proj"))

    async def open(self, **kw: object) -> plimsoll.AsyncSession:
        s = await self.client.open_session(**kw)  # type: ignore[arg-type]
        self.addAsyncCleanup(s.__aexit__, None, None, None)
        return s

    async def test_files_cells_and_the_chain(self) -> None:
        s = await self.open(languages=["python"])
        await s.write_files({"a.txt": "one", "b.bin": b"\x00\xff"})
        # gathered on one session: one at a time, in the order made
        got = await asyncio.gather(s.read_file("a.txt"), s.cell("print(1)", "python"),
                                   s.read_file("b.bin"), s.list_files())
        self.assertEqual((got[0].content, got[1].stdout, got[2].content),
                         (b"one", "1\n", b"\x00\xff"))
        self.assertEqual([e.path for e in got[3]], ["a.txt", "b.bin"])
        self.assertEqual([e["request"].get("path") for e in s.chain.entries[1:]],
                         ["a.txt", None, "b.bin", None])
        paths = await s.upload(os.path.join(self.tmp, "proj"))
        self.assertEqual(sorted(paths), sorted("proj/" + p for p in TREE))
        for rel, data in TREE.items():
            self.assertEqual(await s.read_bytes("proj/" + rel, limit=3000), data)
        local = os.path.join(self.tmp, "util.py")
        await s.download("proj/src/pkg/util.py", local)
        with open(local, "rb") as f:
            self.assertEqual(f.read(), TREE["src/pkg/util.py"])
        with self.assertRaises(errors.NotFoundError):
            await s.read_bytes("proj/nothing")
        c = await s.cell("import os; print(len(os.listdir('proj')))", "python")
        self.assertEqual(c.stdout, "3\n")
        self.assertEqual((await s.info()).previous_digest, s.chain.head)
        verify_chain(s.chain.entries)
        other = plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL"), env("PLIMSOLL_TEST_KEY_B"))
        with self.assertRaises(errors.NotFoundError):
            await other.list_files(s.session_id)


if __name__ == "__main__":
    unittest.main()
