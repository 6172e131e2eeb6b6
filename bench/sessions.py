#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sessions benchmark: OpenSession + the first cell (+ CloseSession after the
clock stops), and a later cell once the cleanup between calls has finished
(with the pool on, also one more once the pool's replacement waits),
with the warm pool (SANDBOX_SESSION_POOL) and without it,
under runc and under runsc, in one run; plus the memory a waiting pooled
sandbox holds (the engine's cgroup figure) and an idle interpreter's RSS.
With the pool on, also a session's project calls: its first (one `true`
step), then calls of one and of three steps (`true`, and `python3 -c
print(1)`), each timed as a repeated call (the same call runs once before,
untimed) once the cleanup of the call before has finished: a step's own
cost in a session is (3 − 1) / 2.  And, the same way, a session's file
calls: WriteFiles and ReadFile of 1 KiB and of 1 MiB, beside the later
cell.

    bench/sessions.py OUT_DIR [N [RUNTIME]]   (writes OUT_DIR/sessions.json;
                                              both runtimes unless one is named)

Called by bench/run; report.py turns the JSON into docs/performance.md.
"""
import base64
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.docker import docker_env, engine, ours  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402


def waiting_pool(instance, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ids = [c["Id"] for c in ours(instance)
               if c["Labels"].get("org.plimsoll.run", "").startswith("session-pool-")
               and c["State"] == "running"]
        if ids:
            return ids
        time.sleep(0.1)
    raise RuntimeError("no pooled sandbox")


def pool_full(d, timeout=120):
    """Wait until Describe's sessions pool has its target waiting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pools = d.rpc("Describe", {})[1].get("pools", [])
        p = [x for x in pools if x["name"] == "sessions"]
        if p and p[0]["waiting"] >= p[0]["target"]:
            return
        time.sleep(0.1)
    raise RuntimeError("the sessions pool did not refill")


def one_series(runtime, pool, n):
    instance = "bench-sessions-%s-%d" % (runtime, pool)
    d = Daemon(env=docker_env(runtime, instance, SANDBOX_MAX_SESSIONS="2",
                              SANDBOX_SESSION_POOL=str(pool), SANDBOX_DOCKER_WARM="0",
                              SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="10000"))
    d.start(timeout=300)
    times, later, refilled, mem = [], [], [], None
    proj = {k: [] for k in ("first1", "true1", "true3", "py1", "py3")}
    fcalls = {k: [] for k in ("write1k", "read1k", "write1m", "read1m")}
    blobs = {"1k": os.urandom(1024), "1m": os.urandom(1 << 20)}
    steps = {"true": {"argv": ["true"]}, "first": {"argv": ["true"]},
             "py": {"argv": ["python3", "-c", "print(1)"]}}
    try:
        for i in range(n):
            if pool:
                ids = waiting_pool(instance)
                time.sleep(2.5)  # the filler launches both interpreters after start
                if mem is None:
                    st = engine("GET", "/containers/%s/stats?stream=false" % ids[0])[1]
                    m = st.get("memory_stats", {})
                    mem = m.get("usage", 0) - m.get("stats", {}).get("inactive_file", 0)
            conn = d.connection()
            t0 = time.monotonic()
            status, body = d.rpc("OpenSession", {"languages": ["python"]}, conn=conn)
            assert status == 200, body
            sid = body["session_id"]
            status, b = d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "python", "code": "1 + 1"}}, conn=conn)
            elapsed = time.monotonic() - t0
            assert status == 200 and b["stdout"] == "2\n", b
            # A later cell, once the cleanup after the first has finished:
            # what a notebook's next cell costs.
            time.sleep(3.0 if runtime == "runsc" else 1.5)
            t1 = time.monotonic()
            status, b = d.rpc("RunCell", {"session_id": sid, "cell": {
                "language": "python", "code": "2 + 2"}}, conn=conn)
            later.append((time.monotonic() - t1) * 1000)
            assert status == 200 and b["stdout"] == "4\n", b
            if pool:
                # The take started a replacement (a sandbox and both
                # interpreters, seconds under gVisor), which may still
                # share the two cores with the cell above.  Once it waits,
                # a later cell again, with nothing else running.
                pool_full(d)
                time.sleep(2.5)
                t2 = time.monotonic()
                status, b = d.rpc("RunCell", {"session_id": sid, "cell": {
                    "language": "python", "code": "3 + 3"}}, conn=conn)
                refilled.append((time.monotonic() - t2) * 1000)
                assert status == 200 and b["stdout"] == "6\n", b
                for key in proj:
                    run = {"project": {"steps": [steps[key[:-1]]] * int(key[-1])}}
                    # Each call is timed as a repeated one (an agent's
                    # loop): the same call once before, untimed; the
                    # session's first is timed alone.
                    for timed in (False, True) if key != "first1" else (True,):
                        time.sleep(3.0 if runtime == "runsc" else 1.5)
                        t3 = time.monotonic()
                        status, b = d.rpc("RunInSession", {"session_id": sid, "run": run},
                                          conn=conn)
                        if timed:
                            proj[key].append((time.monotonic() - t3) * 1000)
                        assert status == 200 and b["outcome"] == "completed", b
                for size, blob in blobs.items():
                    w = {"session_id": sid, "files": [{
                        "path": "bench/%s.bin" % size,
                        "content_base64": base64.b64encode(blob).decode()}]}
                    for method, msg in (("WriteFiles", w), ("ReadFile", {
                            "session_id": sid, "path": "bench/%s.bin" % size})):
                        for timed in (False, True):
                            # a write's cleanup after it, finished first
                            time.sleep(3.0 if runtime == "runsc" else 1.5)
                            t4 = time.monotonic()
                            status, b = d.rpc(method, msg, conn=conn)
                            if timed:
                                fcalls[("write" if method == "WriteFiles" else "read") + size].append(
                                    (time.monotonic() - t4) * 1000)
                            assert status == 200, b
                            if method == "ReadFile":
                                assert base64.b64decode(b["content_base64"]) == blob
            d.rpc("CloseSession", {"session_id": sid}, conn=conn)
            conn.close()
            times.append(elapsed * 1000)
    finally:
        d.stop()
    times.sort()
    return {"runtime": runtime, "pool": pool, "n": n, "p50_ms": statistics.median(times),
            "min_ms": times[0], "max_ms": times[-1], "waiting_memory_bytes": mem,
            "later_cell_p50_ms": statistics.median(later),
            "later_cell_refilled_p50_ms": statistics.median(refilled) if refilled else None,
            "project_p50_ms": {k: statistics.median(v) for k, v in proj.items() if v},
            "files_p50_ms": {k: statistics.median(v) for k, v in fcalls.items() if v}}


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rows = []
    for runtime in sys.argv[3:4] or ("runc", "runsc"):
        for pool in (0, 1):
            r = one_series(runtime, pool, n)
            print("  sessions %s pool=%d: p50 %.1f ms (min %.1f, max %.1f); later cell p50 %.1f ms%s%s"
                  % (runtime, pool, r["p50_ms"], r["min_ms"], r["max_ms"], r["later_cell_p50_ms"],
                "; with the pool refilled %.1f ms" % r["later_cell_refilled_p50_ms"]
                if r["later_cell_refilled_p50_ms"] is not None else "",
                "; waiting sandbox %.1f MiB" % (r["waiting_memory_bytes"] / 1048576)
                if r["waiting_memory_bytes"] else ""))
            pp = r["project_p50_ms"]
            if pp.get("first1") is not None:
                print("  sessions %s: a session's first project call (one true step) p50 %.1f ms"
                      % (runtime, pp["first1"]))
            for what in ("true", "py"):
                if pp.get(what + "1") is not None:
                    step = (pp[what + "3"] - pp[what + "1"]) / 2
                    print("  sessions %s: a project call of 1 / 3 %s steps p50 %.1f / %.1f ms; "
                          "a step's own cost %.1f ms, %.2fx a later cell"
                          % (runtime, what, pp[what + "1"], pp[what + "3"], step,
                             step / r["later_cell_p50_ms"]))
            fp = r["files_p50_ms"]
            if fp:
                print("  sessions %s: WriteFiles / ReadFile of 1 KiB p50 %.1f / %.1f ms, "
                      "of 1 MiB %.1f / %.1f ms; a later cell %.1f ms"
                      % (runtime, fp["write1k"], fp["read1k"], fp["write1m"], fp["read1m"],
                         r["later_cell_p50_ms"]))
            rows.append(r)
    with open(os.path.join(out, "sessions.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
