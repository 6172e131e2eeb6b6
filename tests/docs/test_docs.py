# SPDX-License-Identifier: Apache-2.0
"""Every fenced code block of README.md, docs/**/*.md and
clients/*/README.md is run, checked, or says why not: the line just before its opening fence is a marker, an HTML
comment that renders as nothing.  A block without one fails, so a new
example cannot slip in untested.  Tests are named by file and line.

The markers:

  <!-- doc: run KIND -->    the block runs against a daemon of KIND, started
      by this test from the build under test (PLIMSOLL_BUILD_DIR):
        wasm             SANDBOX_PROVIDER=wasm (what scripts/quickstart starts),
                         with PLIMSOLL_CORS_ORIGINS=http://127.0.0.2:8000
        disabled         no SANDBOX_PROVIDER: the Disabled provider
        docker           SANDBOX_PROVIDER=docker under runc
        docker-sessions  docker under runc with SANDBOX_MAX_SESSIONS=4 (what
                         scripts/quickstart docker starts)
        docker-data      docker-sessions with the data image (plimsoll/data,
                         numpy, pandas, matplotlib) as SANDBOX_DOCKER_PROJECT_IMAGE
        fleet            three docker daemons (runc, sessions on,
                         PLIMSOLL_INSTANCE d1, d2, d3) behind HAProxy running
                         deploy/haproxy.cfg (plimsoll_test.fleet): the
                         block's address is the proxy's
      with no KIND (`<!-- doc: run -->`) it runs with no daemon; with KIND
      quickstart it runs in a fresh copy of the repository's layout with
      PLIMSOLL_SKIP_DEPS=1, PLIMSOLL_BUILD_DIR (the build under test, used as
      it is), PLIMSOLL_LISTEN on a free port and its own
      SANDBOX_DOCKER_INSTANCE, and `scripts/quickstart stop` after it,
      whatever happened.  The block must exit 0, or N with
      `<!-- doc: run KIND exits N -->` (a last command that shows a refusal).
  <!-- doc: output -->       the block is what the run block just before it
      printed on stdout (stderr is not compared).
  <!-- doc: answer -->       the block is the JSON the run block just before
      it printed, checked by shape (below).
  <!-- doc: answer METHOD[.FIELD] KIND [REQUEST] -->   the block is what a
      Connect JSON call of METHOD (with REQUEST, a JSON object, default {})
      answers on a daemon of KIND, or the member FIELD of that answer,
      checked by shape; an error body is an answer too.
  <!-- doc: mcp-config KIND -->   the block is an MCP client's
      configuration (JSON, an "mcpServers" object, as most MCP clients read
      it); each server it names is started or reached as written by the
      MCP TypeScript SDK's client (tests/docs/mcp_config.mjs, with
      tests/mcp/setup's SDK), against a daemon of KIND: `plimsoll` as a
      command is the build's CLI, a relative path in env is the workdir's,
      `${VAR}` in a header is expanded from the block's environment (where
      PLIMSOLL_KEY is the key).  Each must initialize, list run_code among
      its tools, and run `console.log(6 * 7)` through it: stdout "42", the
      daemon's tier, and instructions naming the floor the block fixes.
  <!-- doc: grants -->      the block is a grants file (PLIMSOLL_GRANTS_FILE)
      that the `guest` blocks of the same file run under.  What in it is
      the operator's becomes the test's, and nothing else: each profile's
      base_url points at a test API on loopback that checks the profile's
      credential as the operator's API would (a JWT's signature, issuer,
      audience and scopes; a shared token), an https one through a CA file
      the test adds as ca_file; each key_file is a key the test makes of
      the credential's alg; each env variable the credential names is set.
  <!-- doc: guest KIND PROFILE -->   the block is guest code, sent as a
      snippet in the fence's language (python, js) with grant_profile
      PROFILE to a daemon of KIND (docker or wasm) holding the file's
      grants block.  It must exit 0 and print a 2xx status first, and the
      test API must have received its call with a credential it accepted.
  <!-- doc: install CLIENT -->  a client's install steps (CLIENT: c, python,
      typescript or go), a sh block that tests/clients/test_install.py runs
      in the clients suite, from an empty directory outside the repository
      (`/path/to/plimsoll` standing for the checkout), with the client's
      example beside it; an output block after it shows how its stdout
      ends.  Here it is only read.
  <!-- doc: not run: REASON -->  an example that cannot run here (a hosted
      service, an operator's machine, a suite of its own); REASON is
      required and printed.
  <!-- doc: shape: WHAT -->   a block that is no example: a diagram, a
      synopsis, a schema, a declaration; WHAT is required and printed.

How a run block runs: in a temporary directory laid out as a clone of the
repository (a symlink to each top-level entry, `build` a symlink to the
build under test, `.plimsoll/key` a real 0600 file holding a key of the
daemon's keys file), with the environment README.md's "Using it" sets,
PLIMSOLL_URL=http://127.0.0.1:PORT and PLIMSOLL_KEY_FILE=.plimsoll/key
(PLIMSOLL_KEY unset), and Debian's tools first on PATH.  The one rewrite of
a block's text: `127.0.0.1:7475` and `localhost:7475`, the address the
docs use, become the test daemon's address.  By the fence's language:
sh, bash or none: `bash -euo pipefail` (a block that runs `buf curl` gets
tests/conformance/setup's npm buf first on PATH); python: python3, with
clients/python/src on PYTHONPATH (as `pip install ./clients/python`
would); c: compiled with cc and the flags of the build's uninstalled
plimsoll.pc (build/meson-uninstalled), then run; go: built as the main
package of a module that requires `plimsoll` replaced by clients/go, then
run; ts: a file of a project that installed the packed TypeScript client
as clients/typescript/README.md's install steps say (up to `npx tsc
--init`; made once per digest of the client's sources, in the build dir:
plimsoll_test.consumer), type-checked and compiled by its tsc under tsc
--init's tsconfig.json with the suite's other ts blocks, each a module of
its own (what tsc says of the block fails it), then run with node, the
rewrite made in the .js.  Each block gets
PL_DOC_TIMEOUT seconds (default 240) and must exit 0.

Output rules: lines are compared after trailing whitespace is dropped, and
trailing blank lines are ignored; a line that is `…` alone stands for any
number of lines (none too); a `…` inside a line stands for any text on that
line.

Answer rules (JSON by shape): before parsing, outside strings, `{…}` is any
object, `[…]` any array, `…` as a value any value, and `, …` closing an
object allows members not shown.  Then each object has the same keys as
the answer at that level (the shown ones and, without `, …`, no others),
each value the type shown (string, number, boolean, null, object, array);
each element shown in an array matches, by the same rules, some element of
the answer's array; an empty array matches any array.  Values themselves
are illustrations and are not compared.

At the end the count of blocks, by file and by marker, is printed on
stderr (the "doc blocks" lines).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from plimsoll_test.consumer import typescript_project  # noqa: E402
from plimsoll_test.grants import free_port as free_port_on  # noqa: E402
from plimsoll_test.harness import BUILD, ROOT, Daemon  # noqa: E402
from plimsoll_test import docker as pdocker  # noqa: E402
from plimsoll_test.docblocks import (ELLIPSIS, GUEST_LANGUAGES, KINDS, doc_files,  # noqa: E402
                                     output_matches, read_blocks)
from plimsoll_test.fleet import Fleet, ProxyView  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

TIMEOUT = float(os.environ.get("PL_DOC_TIMEOUT", "240"))
DOC_ADDRESSES = ("127.0.0.1:7475", "localhost:7475")

# Each daemon kind's settings (docker's instance label carries this
# process's pid, so two runs never touch each other's containers).
DAEMON_ENV = {
    "wasm": {"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_CORS_ORIGINS": "http://127.0.0.2:8000"},
    "disabled": {"SANDBOX_PROVIDER": None},
    "docker": {"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": "runc",
               "SANDBOX_DOCKER_INSTANCE": "docs" + pdocker.RUN_TAG},
    "docker-sessions": {"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": "runc",
                        "SANDBOX_MAX_SESSIONS": "4",
                        "SANDBOX_DOCKER_INSTANCE": "docs-sessions" + pdocker.RUN_TAG},
    "docker-data": {"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": "runc",
                    "SANDBOX_MAX_SESSIONS": "4",
                    "SANDBOX_DOCKER_PROJECT_IMAGE": "plimsoll/data:latest",
                    "SANDBOX_DOCKER_INSTANCE": "docs-data" + pdocker.RUN_TAG},
}


# ---- the blocks ---------------------------------------------------------------
BLOCKS = [b for f in doc_files(ROOT) for b in read_blocks(f, ROOT)]


# ---- checking -----------------------------------------------------------------
ANY, ANY_OBJECT, ANY_ARRAY, MORE = "\0any", "\0object", "\0array", "\0more"


def parse_shown_json(text):
    """The doc's JSON with its placeholders (the module's answer rules)."""
    pieces = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for k in range(0, len(pieces), 2):
        p = pieces[k]
        p = re.sub(r"\{\s*" + ELLIPSIS + r"\s*\}", lambda _: json.dumps(ANY_OBJECT), p)
        p = re.sub(r"\[\s*" + ELLIPSIS + r"\s*\]", lambda _: json.dumps(ANY_ARRAY), p)
        p = re.sub(r",\s*" + ELLIPSIS + r"\s*(?=\})", lambda _: ", %s: 0" % json.dumps(MORE), p)
        p = p.replace(ELLIPSIS, json.dumps(ANY))
        pieces[k] = p
    return json.loads("".join(pieces))


def kind_of(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if v is None:
        return "null"
    return {str: "string", dict: "object", list: "array"}[type(v)]


def shape_problems(shown, real, at="$"):
    """What of `real` does not have the shape `shown` shows; [] when it does."""
    if shown == ANY:
        return []
    if shown == ANY_OBJECT:
        return [] if isinstance(real, dict) else ["%s: an object, not %s" % (at, kind_of(real))]
    if shown == ANY_ARRAY:
        return [] if isinstance(real, list) else ["%s: an array, not %s" % (at, kind_of(real))]
    if kind_of(shown) != kind_of(real):
        return ["%s: %s shown, %s answered (%s)" % (at, kind_of(shown), kind_of(real),
                                                    json.dumps(real)[:200])]
    if isinstance(shown, dict):
        out = []
        more = MORE in shown
        for k, v in shown.items():
            if k == MORE:
                continue
            if k not in real:
                out.append("%s: %r shown, not in the answer" % (at, k))
            else:
                out += shape_problems(v, real[k], "%s.%s" % (at, k))
        if not more:
            out += ["%s: %r answered, not shown" % (at, k) for k in real if k not in shown]
        return out
    if isinstance(shown, list):
        out = []
        for n, v in enumerate(shown):
            best = None
            for r in real:
                p = shape_problems(v, r, "%s[%d]" % (at, n))
                if not p:
                    break
                if best is None or len(p) < len(best):
                    best = p
            else:
                out += best or ["%s[%d]: shown, but the answer's array is empty" % (at, n)]
        return out
    return []


# ---- running ----------------------------------------------------------------
def free_port():
    """A loopback port below the ephemeral range (plimsoll_test.grants)."""
    return free_port_on("127.0.0.1")


def make_workdir(key=None):
    """A temporary directory laid out as a clone of the repository."""
    d = tempfile.mkdtemp(prefix="plimsoll-doc-")
    for name in os.listdir(ROOT):
        if name in (".git", ".plimsoll", "build") or name.startswith("build-"):
            continue
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(os.path.abspath(BUILD), os.path.join(d, "build"))
    if key is not None:
        os.mkdir(os.path.join(d, ".plimsoll"), 0o700)
        fd = os.open(os.path.join(d, ".plimsoll", "key"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, (key + "\n").encode())
        os.close(fd)
    return d


def block_env(url=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLIMSOLL_", "SANDBOX_")) and k != "PYTHONPATH"}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin:" + os.environ.get("PATH", "")
    env.setdefault("LANG", "C.UTF-8")
    if url:
        env["PLIMSOLL_URL"] = url
        env["PLIMSOLL_KEY_FILE"] = ".plimsoll/key"
    return env


def run_text(block, cwd, env, address=None):
    """Run the block's text by its language; returns the CompletedProcess."""
    text = block.text
    if address:
        for a in DOC_ADDRESSES:
            text = text.replace(a, address)
    scratch = tempfile.mkdtemp(prefix="plimsoll-doc-src-")
    try:
        if block.lang in ("", "sh", "bash"):
            if re.search(r"^\s*buf curl\b", text, re.M):  # npm's buf, as the conformance suite has it
                subprocess.run([os.path.join(ROOT, "tests", "conformance", "setup")], check=True,
                               capture_output=True, timeout=TIMEOUT)
                env = dict(env, PATH=os.path.join(ROOT, "tests", "conformance", "node_modules",
                                                  ".bin") + ":" + env["PATH"])
            path = os.path.join(scratch, "block.sh")
            with open(path, "w") as f:
                f.write(text)
            argv = ["bash", "-euo", "pipefail", path]
        elif block.lang == "python":
            path = os.path.join(scratch, "block.py")
            with open(path, "w") as f:
                f.write(text)
            env = dict(env, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
            argv = ["python3", path]
        elif block.lang == "c":
            src, exe = os.path.join(scratch, "block.c"), os.path.join(scratch, "block")
            with open(src, "w") as f:
                f.write(text)
            libdir = os.path.join(os.path.abspath(BUILD), "src", "lib")
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", "plimsoll"],
                                   env=dict(env, PKG_CONFIG_PATH=os.path.join(
                                       os.path.abspath(BUILD), "meson-uninstalled")),
                                   capture_output=True, text=True, check=True).stdout.split()
            cc = subprocess.run(["cc", "-o", exe, src, "-Wl,-rpath," + libdir] + flags,
                                capture_output=True, text=True)
            if cc.returncode:
                return cc
            argv = [exe]
        elif block.lang == "go":
            mod = os.path.join(scratch, "example")
            os.mkdir(mod)
            with open(os.path.join(mod, "main.go"), "w") as f:
                f.write(text)
            with open(os.path.join(mod, "go.mod"), "w") as f:
                f.write("module example\n\ngo 1.19\n\nrequire plimsoll v0.0.0\n\n"
                        "replace plimsoll => %s\n" % os.path.join(ROOT, "clients", "go"))
            exe = os.path.join(scratch, "example-bin")
            genv = dict(env, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local")
            gb = subprocess.run(["go", "build", "-o", exe, "."], cwd=mod, env=genv,
                                capture_output=True, text=True, timeout=TIMEOUT)
            if gb.returncode:
                return gb
            argv = [exe]
        elif block.lang == "ts":
            argv = ["node", compile_typescript(block, address)]
        else:
            raise AssertionError("%s: a %r block cannot be run" % (block, block.lang))
        return subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


TS_BUILD = {}  # "dir", "tsc": every ts run block compiled, once per run


def ts_name(block):
    """The file a ts run block is in the project: its path and line."""
    return re.sub(r"\W", "_", "%s_%d" % (block.path, block.line))


def typescript_build():
    """Every ts run block as its own NAME.ts of one project that installed
    the TypeScript client as its README says
    (plimsoll_test.consumer.typescript_project: its package.json, tsc
    --init's tsconfig.json and its node_modules), compiled by one run of
    that project's tsc (moduleDetection "force": each file is a module of
    its own).  Returns (the folder, tsc's CompletedProcess)."""
    if not TS_BUILD:
        project = typescript_project(timeout=TIMEOUT)
        d = tempfile.mkdtemp(prefix="plimsoll-doc-ts-")
        for name in ("package.json", "tsconfig.json"):
            shutil.copy(os.path.join(project, name), d)
        os.symlink(os.path.join(project, "node_modules"), os.path.join(d, "node_modules"))
        for b in BLOCKS:
            if b.kind == "run" and b.lang == "ts" and b.problem is None:
                with open(os.path.join(d, ts_name(b) + ".ts"), "w") as f:
                    f.write(b.text)
        tsc = subprocess.run([os.path.join(project, "node_modules", ".bin", "tsc")], cwd=d,
                             env=block_env(), stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=TIMEOUT)
        TS_BUILD.update(dir=d, tsc=tsc)
    return TS_BUILD["dir"], TS_BUILD["tsc"]


def compile_typescript(block, address):
    """The .js tsc made of the block (typescript_build), the docs' address
    made `address` in it.  What tsc says of the block's file, or of no file,
    fails the test whatever exit status the marker expects."""
    d, tsc = typescript_build()
    name = ts_name(block) + ".ts"
    said, whose = [], None
    for line in (tsc.stdout + tsc.stderr).splitlines():
        if not line.startswith(" "):  # a diagnostic; its more lines are indented
            m = re.match(r"(\S+?)\(\d+,\d+\): ", line)
            whose = m.group(1) if m else None
        if whose in (name, None) and line.strip():
            said.append(line)
    if tsc.returncode and said:
        raise AssertionError("%s: tsc, under tsc --init's tsconfig.json, exited %d:\n%s" % (
            block, tsc.returncode, "\n".join(said)))
    js = os.path.join(d, ts_name(block) + ".js")
    if address:
        with open(js) as f:
            text = f.read()
        for a in DOC_ADDRESSES:
            text = text.replace(a, address)
        with open(js, "w") as f:
            f.write(text)
    return js


COUNTS = {}  # (path, kind) -> how many were run or checked


def counted(block, kind):
    COUNTS[(block.path, kind)] = COUNTS.get((block.path, kind), 0) + 1


def call(daemon, method, request):
    """A Connect JSON call's body; any status: an error body is an answer too."""
    return daemon.rpc(method, request)[1]


class BlockCase:
    """The blocks whose daemon is KIND: one test each, one daemon for all."""
    KIND = None
    d = None

    @classmethod
    def blocks(cls):
        return [b for b in BLOCKS if b.problem is None and b.daemon_kind == cls.KIND]

    @classmethod
    def setUpClass(cls):
        cls.work = None
        if cls.KIND == "fleet" and cls.blocks():
            cls.d = ProxyView(Fleet(n=3, instance="docs-fleet").start())
        elif cls.KIND in KINDS and cls.blocks():
            if cls.KIND.startswith("docker"):
                pdocker.require_engine()
            cls.d = Daemon(env=DAEMON_ENV[cls.KIND], principals=("alice",)).start(timeout=180)
        if cls.KIND != "quickstart" and cls.blocks():
            cls.work = make_workdir(cls.d.keys["alice"] if cls.d else "plk_no-daemon")

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.stop()
            cls.d = None
        if cls.work:
            shutil.rmtree(cls.work, ignore_errors=True)

    def address(self):
        return "%s:%d" % (self.d.host, self.d.port) if self.d else None

    def check_mcp_config(self, block):
        subprocess.run([os.path.join(ROOT, "tests", "mcp", "setup")], check=True,
                       capture_output=True, timeout=TIMEOUT)
        text = block.text
        for a in DOC_ADDRESSES:
            text = text.replace(a, self.address())
        env = dict(block_env("http://" + self.address()), PLIMSOLL_KEY=self.d.keys["alice"])
        plan = {"config": json.loads(text), "cli": os.path.join(os.path.abspath(BUILD), "plimsoll"),
                "env": env}
        p = subprocess.run(["node", os.path.join(HERE, "mcp_config.mjs")], cwd=self.work,
                           input=json.dumps(plan), capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, "%s: %s%s" % (block, p.stderr[-4000:], self.daemon_log()))
        servers = plan["config"]["mcpServers"]
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        self.assertEqual(sorted(x["server"] for x in lines), sorted(servers), p.stdout)
        tier = self.d.rpc("Describe", {})[1]["isolation"]
        for x in lines:
            self.assertNotIn("error", x, "%s: %s" % (block, x))
            self.assertIn("run_code", x["tools"])
            self.assertEqual(x["run"]["stdout"], "42\n", x)
            self.assertEqual(x["run"]["isolation"], tier, x)
            conf = servers[x["server"]]
            floor = conf.get("headers", {}).get("Plimsoll-Minimum-Isolation")
            args = conf.get("args", [])
            if "--minimum-isolation" in args:
                floor = args[args.index("--minimum-isolation") + 1]
            self.assertIn("floor is %s" % (floor or "none"), x["instructions"], x)
        counted(block, "mcp-config " + self.KIND)

    def check_block(self, block):
        if block.kind == "mcp-config":
            self.check_mcp_config(block)
            return
        if block.kind == "answer":
            method, _, rest = block.arg.partition(" ")
            _, _, request = rest.partition(" ")
            name, _, field = method.partition(".")
            real = call(self.d, name, json.loads(request) if request else {})
            if field:
                self.assertIn(field, real, "%s: the answer has no %r: %s" % (block, field, real))
                real = real[field]
            self.check_answer(block, real)
            counted(block, "answer")
            return
        if self.KIND == "quickstart":
            p = self.run_quickstart(block)
        else:
            addr = self.address()
            p = run_text(block, self.work, block_env("http://" + addr if addr else None), addr)
        self.assertEqual(p.returncode, block.exit, "%s exited %d\n--- stdout\n%s\n--- stderr\n%s%s" % (
            block, p.returncode, p.stdout[-4000:], p.stderr[-4000:], self.daemon_log()))
        counted(block, "run " + (self.KIND or "(no daemon)"))
        for c in block.checks:
            if c.kind == "output":
                diff = output_matches(c.text, p.stdout)
                self.assertIsNone(diff, "%s: not what %s printed\n%s" % (c, block, diff))
                counted(c, "output")
            else:
                try:
                    real = json.loads(p.stdout)
                except ValueError:
                    self.fail("%s: %s printed no JSON: %r" % (c, block, p.stdout[:2000]))
                self.check_answer(c, real)
                counted(c, "answer")

    def check_answer(self, block, real):
        try:
            shown = parse_shown_json(block.text)
        except ValueError as e:
            self.fail("%s: not JSON with placeholders: %s" % (block, e))
        problems = shape_problems(shown, real)
        self.assertEqual(problems, [], "%s: not the shape answered:\n  %s\nanswered: %s" % (
            block, "\n  ".join(problems), json.dumps(real)[:3000]))

    def daemon_log(self):
        if not self.d:
            return ""
        return "\n--- daemon log (tail)\n" + self.d.log_text()[-3000:]

    def run_quickstart(self, block):
        work = make_workdir()
        port = free_port()
        env = block_env()
        env.update(PLIMSOLL_SKIP_DEPS="1", PLIMSOLL_BUILD_DIR=os.path.abspath(BUILD),
                   PLIMSOLL_LISTEN="127.0.0.1:%d" % port,
                   SANDBOX_DOCKER_INSTANCE="docs-quickstart" + pdocker.RUN_TAG)
        try:
            return run_text(block, work, env)
        finally:
            stop = subprocess.run(["scripts/quickstart", "stop"], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert stop.returncode == 0, stop
            shutil.rmtree(work, ignore_errors=True)


# ---- grants: guest code under the file's profiles ------------------------------
class OperatorSetup:
    """A grants block made the test's: a test API per profile (plimsoll_test
    .upstream), the keys its credentials name, the environment they read,
    and the file written with those in place of the operator's."""

    def __init__(self, block):
        self.dir = tempfile.mkdtemp(prefix="plimsoll-doc-grants-")
        self.apis, self.env = {}, {}
        ca = self.certificate()
        grants = json.loads(block.text)
        for name, prof in grants["profiles"].items():
            cred = prof["credential"]
            check = self.credential(name, cred, prof.get("scopes", []))
            https = prof["base_url"].startswith("https://")
            api = Upstream(check, tls=ca if https else None)
            prefix = urllib.parse.urlsplit(prof["base_url"]).path
            prof["base_url"] = api.url + prefix
            if https:
                prof["ca_file"] = ca[0]
            self.apis[name] = api
        self.path = os.path.join(self.dir, "grants.json")
        with open(self.path, "w") as f:
            json.dump(grants, f)
        os.chmod(self.dir, 0o755)

    def certificate(self):
        cert, key = os.path.join(self.dir, "api.crt"), os.path.join(self.dir, "api.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                       capture_output=True)
        return cert, key

    def credential(self, name, cred, scopes):
        """The profile's credential made the test's; returns how its API checks it."""
        if cred["kind"] == "shared_token":
            token = "doc-token-" + name
            self.env[cred["env"]] = token
            return Check(token=token)
        alg = cred["alg"]
        if alg == "HS256":
            secret = "doc-hmac-key-" + name + "-" + "k" * 32
            self.env[cred["key_env"]] = secret
            pub = None
        else:
            cred["key_file"] = os.path.join(self.dir, name + ".pem")
            args = ["-algorithm", "ED25519"] if alg == "EdDSA" else \
                ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
            subprocess.run(["openssl", "genpkey"] + args + ["-out", cred["key_file"]],
                           check=True, capture_output=True)
            pub = cred["key_file"] + ".pub"
            subprocess.run(["openssl", "pkey", "-in", cred["key_file"], "-pubout", "-out", pub],
                           check=True, capture_output=True)
            os.chmod(cred["key_file"], 0o644)
            secret = None
        return Check(alg=alg, hmac_key=secret, pub_pem=pub, issuer=cred.get("issuer"),
                     audience=cred.get("audience"), scopes=scopes)

    def close(self):
        for api in self.apis.values():
            api.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class GuestCase:
    """The guest blocks whose daemon is KIND: one daemon per grants block."""
    KIND = None

    @classmethod
    def setUpClass(cls):
        cls.setups, cls.daemons = {}, {}

    @classmethod
    def tearDownClass(cls):
        for d in cls.daemons.values():
            d.stop()
        for s in cls.setups.values():
            s.close()

    def daemon_for(self, grants):
        key = str(grants)
        if key not in self.daemons:
            setup = OperatorSetup(grants)
            self.setups[key] = setup
            env = dict(DAEMON_ENV[self.KIND], PLIMSOLL_GRANTS_FILE=setup.path, **setup.env)
            if self.KIND == "docker":
                pdocker.require_engine()
                env["SANDBOX_DOCKER_INSTANCE"] = "docs-grants" + pdocker.RUN_TAG
            self.daemons[key] = Daemon(env=env, principals=("alice",)).start(timeout=180)
            if (grants.path, "grants") not in COUNTS:  # one file, one grants block
                counted(grants, "grants")
        return self.setups[key], self.daemons[key]

    def check_guest(self, block):
        setup, d = self.daemon_for(block.grants)
        profile = block.arg.split()[1]
        api = setup.apis[profile]
        api.take()
        status, answer = d.rpc("Run", {"snippet": {"language": GUEST_LANGUAGES[block.lang],
                                                   "code": block.text},
                                       "grant_profile": profile})
        log = "\n--- daemon log (tail)\n" + d.log_text()[-3000:]
        self.assertEqual(status, 200, "%s: %s%s" % (block, answer, log))
        result = answer
        self.assertEqual(result.get("exit_code"), 0, "%s: %s%s" % (block, answer, log))
        out = result.get("stdout", "")
        self.assertRegex(out, r"^2\d\d ", "%s printed: %r" % (block, out))
        calls = api.take()
        self.assertTrue(calls, "%s: the test API received no call" % block)
        self.assertTrue(all(c["ok"] for c in calls),
                        "%s: the API refused the credential: %s" % (block, [c["reason"] for c in calls]))
        counted(block, "guest " + self.KIND)


def make_case(kind, name, base=None):
    """A TestCase class of one test per block of KIND: by default the
    blocks a daemon of KIND runs or answers (BlockCase); with base
    GuestCase, the guest blocks for a daemon of KIND."""
    def make_test(block):
        def test(self):
            self.check_guest(block) if base is GuestCase else self.check_block(block)
        test.__doc__ = "%s (%s)" % (block, block.marker)
        return test

    def mine(b):
        if base is GuestCase:
            return b.kind == "guest" and b.arg.split()[0] == kind
        return b.daemon_kind == kind

    attrs = {"KIND": kind, "__module__": __name__, "__qualname__": name}
    for b in BLOCKS:
        if b.problem is None and mine(b):
            attrs["test_%s_%d" % (re.sub(r"\W", "_", b.path), b.line)] = make_test(b)
    return type(name, (base or BlockCase, unittest.TestCase), attrs)


LocalBlocks = make_case("", "LocalBlocks")
DisabledBlocks = make_case("disabled", "DisabledBlocks")
WasmBlocks = make_case("wasm", "WasmBlocks")
DockerBlocks = make_case("docker", "DockerBlocks")
DockerSessionBlocks = make_case("docker-sessions", "DockerSessionBlocks")
DockerDataBlocks = make_case("docker-data", "DockerDataBlocks")
FleetBlocks = make_case("fleet", "FleetBlocks")
QuickstartBlocks = make_case("quickstart", "QuickstartBlocks")
DockerGuestBlocks = make_case("docker", "DockerGuestBlocks", GuestCase)
WasmGuestBlocks = make_case("wasm", "WasmGuestBlocks", GuestCase)


class Markers(unittest.TestCase):
    def test_every_block_has_a_marker_that_reads(self):
        bad = ["%s: %s" % (b, b.problem) for b in BLOCKS if b.problem]
        self.assertEqual(bad, [], "blocks without a usable marker:\n  " + "\n  ".join(bad))

    def test_the_blocks_not_run_say_why(self):
        for b in BLOCKS:
            if b.kind in ("not run", "shape") and not b.problem:
                print("  %s %s: %s" % (b, b.kind, b.arg), file=sys.stderr)
                counted(b, b.kind)

    def test_install_steps_are_the_clients_suites(self):
        """An install block and its output run in the clients suite
        (tests/clients/test_install.py), which reads them as this does."""
        installs = [b for b in BLOCKS if b.kind == "install" and not b.problem]
        self.assertEqual(sorted({b.arg for b in installs}), ["c", "go", "python", "typescript"])
        for b in installs:
            print("  %s install %s: run by tests/clients/test_install.py" % (b, b.arg),
                  file=sys.stderr)
            counted(b, "install")
            for c in b.checks:
                counted(c, "install")

    def test_the_runner_reads_its_own_rules(self):
        self.assertIsNone(output_matches("a\n" + ELLIPSIS + "\nb " + ELLIPSIS + " c\n",
                                         "a\nx\ny\nb 1 2 c\n\n"))
        self.assertIsNone(output_matches(ELLIPSIS + "\nb\n", "b\n"))
        self.assertIsNotNone(output_matches("a\n", "a\nb\n"))
        shown = parse_shown_json('{"a": {' + ELLIPSIS + '}, "b": [{"c": "x' + ELLIPSIS +
                                 '"}], "d": ' + ELLIPSIS + ', ' + ELLIPSIS + '}')
        self.assertEqual(shape_problems(shown, {"a": {"q": 1}, "b": [{"c": "y"}], "d": 1,
                                                "e": 2}), [])
        self.assertNotEqual(shape_problems(shown, {"a": 1, "b": [], "d": None}), [])
        self.assertNotEqual(shape_problems({"a": 1}, {"a": 1, "b": 2}), [])


def tearDownModule():
    if TS_BUILD:
        shutil.rmtree(TS_BUILD["dir"], ignore_errors=True)
    files = sorted({b.path for b in BLOCKS})
    kinds = sorted({k for _, k in COUNTS})
    print("doc blocks run or checked, by file (%s):" % ", ".join(kinds), file=sys.stderr)
    total = 0
    for f in files:
        row = {k: n for (p, k), n in COUNTS.items() if p == f}
        ran = sum(n for k, n in row.items() if k not in ("not run", "shape", "install"))
        total += ran
        print("  %-40s %3d of %3d blocks run or checked  %s" % (
            f, ran, sum(1 for b in BLOCKS if b.path == f),
            ", ".join("%s %d" % kv for kv in sorted(row.items()))), file=sys.stderr)
    by_kind = {}
    for (_, k), n in COUNTS.items():
        by_kind[k] = by_kind.get(k, 0) + n
    print("doc blocks: %d in all, %d run or checked; by marker: %s" % (
        len(BLOCKS), total, ", ".join("%s %d" % kv for kv in sorted(by_kind.items()))),
        file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
