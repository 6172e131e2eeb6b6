# SPDX-License-Identifier: Apache-2.0
"""What a project that uses an official client starts from: a clean
checkout of plimsoll (`make_checkout`), an environment in which nothing an
ecosystem would fetch is reachable but npm's registry (`consumer_env`),
and, for the TypeScript client, a project in which the packed package is
installed as clients/typescript/README.md's install steps say
(`typescript_project`).  tests/clients/test_install.py runs each client's
whole install steps with the first two; the docs suite compiles and runs
the TypeScript README's examples in the third."""
import hashlib
import os
import shutil
import subprocess
import tempfile

from .docblocks import read_blocks
from .harness import BUILD, ROOT

CHECKOUT = "/path/to/plimsoll"  # how the docs' install steps name the checkout
TS_CLIENT = os.path.join(ROOT, "clients", "typescript")
TS_README = os.path.join("clients", "typescript", "README.md")
TS_INIT = "npx tsc --init"  # the install steps' last line that makes the project


def clone_leaves_out(top, names):
    """What of clients/typescript's top folder `top` a fresh clone would not
    hold: node_modules, the built dist, the LICENSE prepack copies in, packed
    tarballs (shutil.copytree's `ignore`)."""
    if os.path.realpath(top) != os.path.realpath(TS_CLIENT):
        return []
    return [n for n in names if n in ("node_modules", "dist", "LICENSE") or n.endswith(".tgz")]


def make_checkout():
    """A clean checkout's layout: the tree's files as they are, but for
    what a clone would not have (clone_leaves_out); `build` is the build
    under test.  The caller removes it."""
    top = tempfile.mkdtemp(prefix="plimsoll-checkout-")
    for name in os.listdir(ROOT):
        if name in (".git", ".plimsoll", "build", "clients") or name.startswith("build-"):
            continue
        os.symlink(os.path.join(ROOT, name), os.path.join(top, name))
    os.symlink(os.path.abspath(BUILD), os.path.join(top, "build"))
    os.mkdir(os.path.join(top, "clients"))
    for name in os.listdir(os.path.join(ROOT, "clients")):
        src = os.path.join(ROOT, "clients", name)
        if name == "typescript":
            shutil.copytree(src, os.path.join(top, "clients", name), symlinks=True,
                            ignore=clone_leaves_out)
        else:
            os.symlink(src, os.path.join(top, "clients", name))
    return top


def consumer_env(url=None, key_file=None):
    """The environment of a consumer's shell: no package index for pip, no
    module proxy for Go, npm's registry quietly; PLIMSOLL_URL and
    PLIMSOLL_KEY_FILE when given."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLIMSOLL_", "SANDBOX_", "PIP_", "GO", "npm_"))
           and k not in ("PYTHONPATH", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
    env.update(
        LANG=env.get("LANG", "C.UTF-8"),
        # No package index: whatever pip would fetch, it cannot.
        PIP_NO_INDEX="1", PIP_INDEX_URL="http://192.0.2.1:9/simple",
        PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
        # No module proxy: Go builds from what the steps name.  No
        # GOFLAGS=-mod=mod either: without `go mod tidy`, `go run` must fail.
        GOPROXY="off", GOTOOLCHAIN="local",
        npm_config_update_notifier="false", npm_config_fund="false",
        npm_config_audit="false")
    if url:
        env["PLIMSOLL_URL"] = url
    if key_file:
        env["PLIMSOLL_KEY_FILE"] = key_file
    if "HOME" not in env:
        env["HOME"] = tempfile.gettempdir()
    return env


def typescript_setup_steps():
    """clients/typescript/README.md's install steps up to `npx tsc --init`:
    what makes the project, before the README's own examples are built."""
    steps = [b for b in read_blocks(os.path.join(ROOT, TS_README), ROOT)
             if b.kind == "install" and b.arg == "typescript" and b.problem is None]
    assert steps, "%s has no <!-- doc: install typescript --> block" % TS_README
    lines = steps[0].text.split("\n")
    stripped = [ln.strip() for ln in lines]
    assert TS_INIT in stripped, "%s: the install steps have no `%s` line" % (steps[0], TS_INIT)
    return "\n".join(lines[:stripped.index(TS_INIT) + 1]) + "\n"


def typescript_sources_digest(steps):
    """What the project is made of: the client's files a clone holds, the
    LICENSE its pack copies in, and the steps."""
    h = hashlib.sha256(steps.encode())
    for d, dirs, names in os.walk(TS_CLIENT):
        skip = set(clone_leaves_out(d, dirs + names))
        dirs[:] = sorted(n for n in dirs if n not in skip)
        for n in sorted(names):
            if n in skip:
                continue
            path = os.path.join(d, n)
            h.update(b"\0" + os.path.relpath(path, ROOT).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()[:16]


def typescript_project(timeout=600):
    """A project that installed the TypeScript client as its README says:
    the README's install steps up to `npx tsc --init`, run with `bash -euo
    pipefail` from an empty directory, `/path/to/plimsoll` a clean checkout
    (so `npm ci` and `npm pack` run on a fresh copy of the client).  It
    holds package.json (`"type": "module"`), tsconfig.json (tsc --init's),
    node_modules (TypeScript and @plimsoll/client) and the tarball.  Made
    once per digest of the client's sources and the steps, in the build
    dir (BUILD/tests/typescript-consumer/DIGEST/consumer), and kept: a
    project made for older sources is removed.  Returns its path."""
    steps = typescript_setup_steps()
    cache = os.path.join(os.path.abspath(BUILD), "tests", "typescript-consumer")
    digest = typescript_sources_digest(steps)
    project = os.path.join(cache, digest, "consumer")  # `npm init -y` names it after its folder
    if os.path.isfile(os.path.join(project, "tsconfig.json")):
        return project
    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix="new-", dir=cache)
    checkout = make_checkout()
    try:
        os.mkdir(os.path.join(work, "consumer"))
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", steps.replace(CHECKOUT, checkout)],
                           cwd=os.path.join(work, "consumer"), env=consumer_env(),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        assert p.returncode == 0, "%s's install steps exited %d\n--- stdout\n%s\n--- stderr\n%s" % (
            TS_README, p.returncode, p.stdout[-4000:], p.stderr[-4000:])
        try:
            os.rename(work, os.path.join(cache, digest))
        except OSError:  # another run made it first
            if not os.path.isfile(os.path.join(project, "tsconfig.json")):
                raise
        for old in os.listdir(cache):
            if old != digest and not old.startswith("new-"):
                shutil.rmtree(os.path.join(cache, old), ignore_errors=True)
        return project
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(checkout, ignore_errors=True)
