#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What a session's waiting step runner and its python3 steps' waiters
hold (docs/sessions.md, "A waiting runner"): the engine's cgroup figure
for the session's container (usage minus inactive file cache, the lowest
of three reads) once a call of three python3 steps ran and the next runner
waits, less the same figure before that call.

    bench/runner_memory.py RUNTIME   (runc or runsc; PLIMSOLL_BUILD_DIR set)
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "lib"))
from plimsoll_test.docker import docker_env, engine, ours  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402

rt = sys.argv[1]
d = Daemon(env=docker_env(rt, "mem-" + rt, SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_POOL="0",
                          SANDBOX_DOCKER_WARM="0"))
d.start(timeout=300)


def mem(cid):
    st = engine("GET", "/containers/%s/stats?stream=false" % cid)[1]
    m = st.get("memory_stats", {})
    return m.get("usage", 0) - m.get("stats", {}).get("inactive_file", 0)


try:
    st, b = d.rpc("OpenSession", {"languages": ["python"]})
    sid = b["session_id"]
    d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python", "code": "1"}})
    time.sleep(4)
    cid = [c["Id"] for c in ours("mem-" + rt) if c["State"] == "running"][0]
    before = [mem(cid) for _ in range(3)]
    py = {"argv": ["python3", "-c", "print(1)"]}
    st, b = d.rpc("RunInSession", {"session_id": sid, "run": {"project": {"steps": [py] * 3}}})
    assert b["outcome"] == "completed", b
    time.sleep(8)
    d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python", "code": "1"}})  # joins the cleanup
    time.sleep(4)
    after = [mem(cid) for _ in range(3)]
    print(rt, "before %.1f MiB, after %.1f MiB, the runner and its waiters %.1f MiB" % (
        min(before) / 2**20, min(after) / 2**20, (min(after) - min(before)) / 2**20))
finally:
    d.stop()
