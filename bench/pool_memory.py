#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a waiting session sandbox holds on a given session image
(docs/providers/docker.md, "The data image"), and what the same sandbox
holds once a session took it and a Python cell ran CODE: the engine's
cgroup figure for the container (usage minus inactive file cache, the
lowest of three reads, as bench/runner_memory.py), with
SANDBOX_SESSION_POOL=2 and the image as SANDBOX_DOCKER_PROJECT_IMAGE.

    bench/pool_memory.py RUNTIME IMAGE [CODE]   (PLIMSOLL_BUILD_DIR set;
        CODE default "import pandas, matplotlib.pyplot"; "" for no cell)
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "lib"))
from plimsoll_test.docker import docker_env, engine, ours  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402

rt, image = sys.argv[1], sys.argv[2]
code = sys.argv[3] if len(sys.argv) > 3 else "import pandas, matplotlib.pyplot"
instance = "poolmem-" + rt
d = Daemon(env=docker_env(rt, instance, SANDBOX_MAX_SESSIONS="4", SANDBOX_SESSION_POOL="2",
                          SANDBOX_DOCKER_WARM="0", SANDBOX_DOCKER_PROJECT_IMAGE=image))
d.start(timeout=300)


def mem(cid):
    """The lowest of three reads, a second apart, in MiB."""
    out = []
    for _ in range(3):
        st = engine("GET", "/containers/%s/stats?stream=false" % cid)[1]
        m = st.get("memory_stats", {})
        out.append(m.get("usage", 0) - m.get("stats", {}).get("inactive_file", 0))
        time.sleep(1)
    return min(out) / 2**20


def pooled(timeout=300):
    """The pool's sandboxes once Describe says it holds its target."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = [x for x in d.rpc("Describe", {})[1].get("pools", []) if x["name"] == "sessions"]
        if p and p[0]["waiting"] >= p[0]["target"]:
            return [c["Id"] for c in ours(instance) if c["State"] == "running"
                    and c["Labels"].get("org.plimsoll.run", "").startswith("session-pool-")]
        time.sleep(0.5)
    raise RuntimeError("the sessions pool did not fill")


try:
    ids = pooled()
    time.sleep(5)  # the filler launches both interpreters after the start
    print("%s %s: waiting sandboxes %s MiB" % (rt, image, ", ".join(
        "%.1f" % mem(i) for i in ids)))
    if code:
        st, b = d.rpc("OpenSession", {"languages": ["python"]})
        assert st == 200, b
        sid = b["session_id"]
        st, b = d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python",
                                                              "code": code}})
        assert st == 200 and b["exit_code"] == 0, b
        name = b["sandbox_name"]
        assert "-pool-" in name, "the session did not take a pooled sandbox: %s" % name
        time.sleep(5)  # the cleanup after the call
        cid = [c["Id"] for c in ours(instance)
               if "plimsoll-" + c["Labels"].get("org.plimsoll.run", "") == name][0]
        print("%s %s: after %r in a cell: %.1f MiB" % (rt, image, code, mem(cid)))
        d.rpc("CloseSession", {"session_id": sid})
finally:
    d.stop()
