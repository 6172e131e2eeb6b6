# SPDX-License-Identifier: Apache-2.0
"""A project's and a snippet's artifacts (``collect``): what comes back from the docker
(runc) daemon of the harness, one-shot and in a session, with the bounds
the harness sets (8 files, 64 KiB); and saving them, which never writes
outside the directory given. The live tests skip, with a clear message,
when PLIMSOLL_TEST_SESSION_URL is not set."""
from __future__ import annotations

import base64
import os
import sys
import tempfile
import unittest

import plimsoll
from plimsoll import RunResult
from plimsoll._answer import Malformed, check_answer

from .support import env

NO_DOCKER = ("PLIMSOLL_TEST_SESSION_URL is not set (no docker engine, the harness's "
             "--no-sessions, or no harness): the live artifact tests skip")
if not os.environ.get("PLIMSOLL_TEST_SESSION_URL"):
    sys.stderr.write("test_artifacts: %s\n" % NO_DOCKER)

BINARY = bytes(range(256)) * 4
TEXT = "h\u00e9llo, artifacts\n".encode()
BIG = bytes((i * 7) % 251 for i in range(70000))
#: One step: three files under out/ (walked first: small, small, big) and
#: ten under zz/, past the harness's 8 files.
SCRIPT = ("import os\n"
          "os.makedirs('out'); os.makedirs('zz')\n"
          "open('out/a.bin', 'wb').write(bytes(range(256)) * 4)\n"
          "open('out/b.txt', 'w', encoding='utf-8').write('h\\u00e9llo, artifacts\\n')\n"
          "open('out/z.bin', 'wb').write(bytes((i * 7) % 251 for i in range(70000)))\n"
          "[open('zz/%02d' % i, 'w').write('x') for i in range(10)]\n")
STEPS = [["python3", "-c", SCRIPT]]
COLLECT = ["out/*", "zz/*"]


class Live(unittest.TestCase):
    def setUp(self) -> None:
        self.client = plimsoll.Client(env("PLIMSOLL_TEST_SESSION_URL", NO_DOCKER),
                                      env("PLIMSOLL_TEST_KEY"))

    def check(self, r: RunResult) -> None:
        self.assertEqual(r.exit_code, 0, r.stderr)
        arts = r.artifacts
        assert arts is not None
        self.assertEqual([a.path for a in arts],
                         ["out/a.bin", "out/b.txt", "out/z.bin"] +
                         ["zz/%02d" % i for i in range(5)])
        self.assertTrue(r.artifacts_truncated)
        a, b, z = arts[:3]
        self.assertEqual((a.content, a.size, a.truncated), (BINARY, len(BINARY), False))
        self.assertEqual((b.content, b.size, b.truncated), (TEXT, len(TEXT), False))
        # the 64 KiB budget runs out in z.bin: its first bytes, then none
        self.assertEqual((z.size, z.truncated), (len(BIG), True))
        self.assertEqual(len(z.content), 65536 - len(BINARY) - len(TEXT))
        self.assertEqual(z.content, BIG[:len(z.content)])
        self.assertEqual([(x.size, x.content, x.truncated) for x in arts[3:]],
                         [(1, b"", True)] * 5)
        with tempfile.TemporaryDirectory() as tmp:
            saved = r.save_artifacts(os.path.join(tmp, "got"))
            self.assertEqual(saved[0], os.path.join(tmp, "got", "out/a.bin"))
            with open(saved[0], "rb") as f:
                self.assertEqual(f.read(), BINARY)
            with open(saved[1], "rb") as f:
                self.assertEqual(f.read(), TEXT)

    def test_one_shot(self) -> None:
        self.check(self.client.run_project(None, STEPS, collect=COLLECT))

    def test_in_a_session_and_none_without_globs(self) -> None:
        with self.client.open_session() as s:
            self.check(s.run_project(None, STEPS, collect=COLLECT))
            r = s.run_project(None, [["true"]])
            self.assertIsNone(r.artifacts)
            self.assertFalse(r.artifacts_truncated)

    def test_a_snippet_one_shot_and_in_a_session(self) -> None:
        code = ("import os\nos.makedirs('out', exist_ok=True)\n"
                "open('out/s.bin', 'wb').write(bytes(range(256)))\nprint('done')\n")

        def check(r: RunResult) -> None:
            self.assertEqual((r.exit_code, r.stdout), (0, "done\n"), r.stderr)
            assert r.artifacts is not None
            self.assertEqual([(a.path, a.size, a.content, a.truncated) for a in r.artifacts],
                             [("out/s.bin", 256, bytes(range(256)), False)])
            self.assertFalse(r.artifacts_truncated)
        self.assertEqual(plimsoll.snippet_request("1", "python", collect=["o/*"])["snippet"]
                         ["collect"], ["o/*"])
        self.assertNotIn("collect", plimsoll.snippet_request("1", "python")["snippet"])
        with self.assertRaises(TypeError):
            plimsoll.snippet_request("1", "python", collect="o/*")
        check(self.client.run_snippet(code, "python", collect=["out/*"]))
        with self.client.open_session() as s:
            check(s.run_snippet(code, "python", collect=["out/*"]))

    def test_async(self) -> None:
        async def go() -> RunResult:
            async with plimsoll.AsyncClient(env("PLIMSOLL_TEST_SESSION_URL", NO_DOCKER),
                                            env("PLIMSOLL_TEST_KEY")) as c:
                return await c.run_project(None, STEPS, collect=COLLECT)
        import asyncio
        self.check(asyncio.run(go()))


def result(*artifacts: dict) -> RunResult:
    return RunResult.from_dict({"exit_code": 0, "artifacts": list(artifacts)})


class Save(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.target = os.path.join(self.tmp, "target")
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.target)
        os.makedirs(self.outside)

    def test_exact_bytes_of_path_and_content(self) -> None:
        name = b"d/caf\xe9.bin"
        r = result({"path": "d/caf\ufffd.bin", "path_base64": base64.b64encode(name).decode(),
                    "size": 3, "content": "\ufffd\ufffd", "content_base64": "/wD+",
                    "truncated": False},
                   {"path": "t.txt", "size": 2, "content": "hi"})
        self.assertEqual(r.artifacts[0].path_bytes, name)
        self.assertEqual(r.artifacts[0].content, b"\xff\x00\xfe")
        r.save_artifacts(self.target)
        with open(os.path.join(os.fsencode(self.target), name), "rb") as f:
            self.assertEqual(f.read(), b"\xff\x00\xfe")
        with open(os.path.join(self.target, "t.txt"), "rb") as f:
            self.assertEqual(f.read(), b"hi")

    def test_hostile_paths_are_refused_before_anything_is_written(self) -> None:
        for bad in ("../x", "a/../../x", "/etc/x", "", "a//b", "./x", "a/."):
            r = result({"path": "ok.txt", "content": "ok"}, {"path": bad, "content": "x"})
            with self.assertRaises(ValueError, msg=bad):
                r.save_artifacts(self.target)
            self.assertEqual(os.listdir(self.target), [], bad)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["outside", "target"])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))

    def test_a_symlink_planted_in_the_target_is_not_followed(self) -> None:
        os.symlink(self.outside, os.path.join(self.target, "link"))
        os.symlink(os.path.join(self.outside, "f"), os.path.join(self.target, "f"))
        for path in ("link/x", "f"):
            with self.assertRaisesRegex(ValueError, "symlink"):
                result({"path": path, "content": "x"}).save_artifacts(self.target)
        self.assertEqual(os.listdir(self.outside), [])

    def test_the_schema_checks_artifacts(self) -> None:
        ok = {"artifacts": [{"path": "a", "size": 1, "content": "x"}],
              "artifacts_truncated": False}
        self.assertEqual(check_answer(ok, "Run"), ok)
        for bad in ({"artifacts": [{"path": "a", "size": -1}]},
                    {"artifacts": [{"path": "a", "content_base64": "%%"}]},
                    {"artifacts": [{"size": 1}]}, {"artifacts_truncated": "yes"}):
            with self.assertRaises(Malformed, msg=bad):
                check_answer(bad, "Run")


if __name__ == "__main__":
    unittest.main()
