# SPDX-License-Identifier: Apache-2.0
"""What a project that uses an official client starts from: a clean
checkout of plimsoll (`make_checkout`) and an environment in which nothing
an ecosystem would fetch is reachable but npm's registry (`consumer_env`).
tests/clients/test_install.py runs each client's whole install steps
with them."""
import os
import shutil
import tempfile

from .harness import BUILD, ROOT

CHECKOUT = "/path/to/plimsoll"  # how the docs' install steps name the checkout
TS_CLIENT = os.path.join(ROOT, "clients", "typescript")


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
