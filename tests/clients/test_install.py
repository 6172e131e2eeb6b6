# SPDX-License-Identifier: Apache-2.0
"""Each client installs the way its ecosystem installs, as the docs say.

Every `<!-- doc: install CLIENT -->` block of README.md, docs/clients.md
and clients/*/README.md (plimsoll_test.docblocks reads them, as the docs
suite does) runs once per distinct text, as written, with `bash -euo
pipefail`, in an empty temporary directory outside the repository, where
the client's example has been saved first under the name the steps use
(EXAMPLES: the README's own example block).  `/path/to/plimsoll` in the
text stands for a clean checkout (plimsoll_test.consumer.make_checkout): a
copy of the repository's layout whose clients/typescript holds no
node_modules and no dist (as a fresh clone has it) and whose `build` is
the build under test.  The example runs
against a real wasm daemon (PLIMSOLL_URL, and PLIMSOLL_KEY_FILE naming a
key file); the output block after the steps shows how their stdout ends.

Nothing an ecosystem would fetch is reachable but what the steps ask for:
pip sees no index (PIP_NO_INDEX, and an index URL nothing answers on), Go
has no module proxy (GOPROXY=off); npm reaches its registry, for
TypeScript itself (`npm ci`, and the consumer's pinned `typescript`).
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from plimsoll_test.consumer import CHECKOUT, consumer_env, make_checkout  # noqa: E402
from plimsoll_test.docblocks import doc_files, output_matches, read_blocks  # noqa: E402
from plimsoll_test.harness import ROOT, Daemon  # noqa: E402

TIMEOUT = float(os.environ.get("PL_INSTALL_TIMEOUT", "600"))
# The files each client's steps expect beside them: (name, the document
# that shows it, the fence's language, which block of that language).
EXAMPLES = {
    "c": [("example.c", "README.md", "c", 0)],
    "python": [("example.py", "clients/python/README.md", "python", 0)],
    "typescript": [("example.ts", "clients/typescript/README.md", "ts", 0),
                   ("example.cts", "clients/typescript/README.md", "ts", 1)],
    "go": [("main.go", "clients/go/README.md", "go", 0)],
}


BLOCKS = [b for path in doc_files(ROOT) for b in read_blocks(path, ROOT)]


def install_blocks(client):
    """The distinct install steps of `client`, each with where it is shown."""
    seen = {}
    for b in BLOCKS:
        if b.kind == "install" and b.arg == client and b.problem is None:
            seen.setdefault(b.text, b)
    return list(seen.values())


def example(name, doc, lang, index):
    blocks = [b for b in BLOCKS if b.path == doc and b.lang == lang]
    assert len(blocks) > index, "%s has no %s block number %d" % (doc, lang, index + 1)
    return blocks[index].text


class Installs(unittest.TestCase):
    d = None

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}, principals=("alice",)).start(timeout=60)
        cls.keydir = tempfile.mkdtemp(prefix="plimsoll-install-key-")
        cls.key_file = os.path.join(cls.keydir, "key")
        fd = os.open(cls.key_file, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, (cls.d.keys["alice"] + "\n").encode())
        os.close(fd)
        cls.checkout = make_checkout()
        cls.start_all()

    @classmethod
    def tearDownClass(cls):
        cls.pool.shutdown(wait=True)
        if cls.d:
            cls.d.stop()
        shutil.rmtree(cls.keydir, ignore_errors=True)
        shutil.rmtree(cls.checkout, ignore_errors=True)

    @classmethod
    def start_all(cls):
        """Every client's steps at once (they mostly wait on builds and
        their tools' start), each in its own empty directory."""
        cls.pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(EXAMPLES))
        cls.runs = {c: [(b, cls.pool.submit(cls.run_steps, c, b)) for b in install_blocks(c)]
                    for c in EXAMPLES}

    @classmethod
    def run_steps(cls, client, block):
        """Run `block` from an empty directory; (its CompletedProcess, what
        the directory held before the example was put in)."""
        work = tempfile.mkdtemp(prefix="plimsoll-consumer-")
        try:
            before = os.listdir(work)
            for name, doc, lang, index in EXAMPLES[client]:
                with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                    f.write(example(name, doc, lang, index))
            script = os.path.join(work, "..", os.path.basename(work) + ".sh")
            with open(script, "w") as f:
                f.write(block.text.replace(CHECKOUT, cls.checkout))
            try:
                p = subprocess.run(["bash", "-euo", "pipefail", script], cwd=work,
                                   env=consumer_env("http://%s:%d" % (cls.d.host, cls.d.port),
                                                    cls.key_file),
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=TIMEOUT)
            finally:
                os.unlink(script)
            return p, before
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def check_client(self, client):
        runs = self.runs[client]
        self.assertTrue(runs, "no <!-- doc: install %s --> block in %s" % (
            client, ", ".join(os.path.relpath(p, ROOT) for p in doc_files(ROOT))))
        for block, future in runs:
            with self.subTest(block=str(block)):
                p, before = future.result()
                self.assertEqual(before, [], "the steps start from an empty directory")
                self.assertEqual(p.returncode, 0, "%s (install %s) exited %d\n--- stdout\n%s\n"
                                 "--- stderr\n%s" % (block, client, p.returncode,
                                                     p.stdout[-4000:], p.stderr[-4000:]))
                self.assertTrue(block.checks, "%s: no output block after the steps" % block)
                for c in block.checks:
                    diff = output_matches(c.text, p.stdout)
                    self.assertIsNone(diff, "%s: not what %s printed\n%s" % (c, block, diff))
                print("  %s (install %s): ran, its output as %s shows" % (
                    block, client, block.checks[0]), file=sys.stderr)

    def test_c(self):
        """meson install and pkg-config, installed and uninstalled."""
        self.check_client("c")

    def test_python(self):
        """pip install and pip wheel in a fresh venv, with no index."""
        self.check_client("python")

    def test_typescript(self):
        """npm ci and npm pack, then a `tsc --init` project that imports and requires it."""
        with open(os.path.join(ROOT, "clients", "typescript", "package.json")) as f:
            pinned = json.load(f)["devDependencies"]["typescript"]
        for block, _ in self.runs["typescript"]:
            self.assertIn("typescript@%s " % pinned, block.text,
                          "%s: the project's TypeScript is the client's own" % block)
        self.check_client("typescript")

    def test_go(self):
        """A fresh module: go mod init, edit -replace, tidy, run."""
        self.check_client("go")

    def test_the_readme_shows_the_programs_run_here(self):
        """README.md's TypeScript example is the client README's first, which
        test_typescript compiles and runs as example.ts."""
        self.assertEqual(example("readme.ts", "README.md", "ts", 0),
                         example("example.ts", "clients/typescript/README.md", "ts", 0))


if __name__ == "__main__":
    unittest.main()
