#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""e2b benchmark: plimsoll's own time per run on the e2b provider, against
the local fake of E2B's API (tests/fakes/e2b).  The fake's numbers say
nothing about E2B (its "VMs" are local containers), so only plumbing is
reported: for each run, the wall time the caller saw minus the time the
fake spent answering that run's calls (its request log times each one;
the calls of a run are sequential), i.e. plimsoll's HTTP front, admission,
its control-plane and envd clients, the stream reader, the record.

    bench/e2b.py OUT_DIR [N]      (writes OUT_DIR/e2b.json)
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.e2b import FakeE2B  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402


def series(d, fake, name, message, n, method="Run"):
    walls, fakes, calls = [], [], 0
    for i in range(n + 2):  # two warm-up runs not counted
        fake.reset()
        t0 = time.monotonic()
        status, body = d.rpc(method, message)
        wall = (time.monotonic() - t0) * 1000
        if status != 200 or body.get("isolation") != "vm":
            raise RuntimeError("%s: %s %s" % (name, status, body))
        reqs = fake.state()["requests"]
        if i < 2:
            continue
        walls.append(wall)
        fakes.append(sum(r.get("ms", 0) for r in reqs))
        calls += len(reqs)
    over = sorted(w - f for w, f in zip(walls, fakes))
    return {"name": name, "n": n, "calls_per_run": calls / n,
            "wall_p50_ms": statistics.median(walls), "fake_p50_ms": statistics.median(fakes),
            "overhead_p50_ms": statistics.median(over),
            "overhead_p95_ms": over[min(len(over) - 1, int(len(over) * 0.95))]}


def main():
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with FakeE2B(templates={"plimsoll-project": "plimsoll/project:latest"}) as fake:
        d = Daemon(env={"SANDBOX_PROVIDER": "e2b", "E2B_API_KEY": fake.api_key,
                        "SANDBOX_E2B_TEMPLATE": "plimsoll-project",
                        "SANDBOX_E2B_API_URL": fake.url, "SANDBOX_E2B_INSTANCE": "bench",
                        "SANDBOX_E2B_EGRESS_PROBE": "192.0.2.1:80",
                        "SANDBOX_MAX_SESSIONS": "2", "SANDBOX_SESSION_LIFETIME": "3600",
                        "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "10000"})
        d.start(timeout=300)
        try:
            rows = [series(d, fake, "snippet", {"snippet": {"language": "python",
                                                            "code": "print(1)"}}, n),
                    series(d, fake, "project, 3 steps", {"project": {"steps": [
                        {"argv": ["python3", "-c", "print(1)"]}] * 3}}, n)]
            # A session's cells: a kept interpreter, one envd process per
            # cell plus the cleanup after it.
            status, body = d.rpc("OpenSession", {})
            if status != 200:
                raise RuntimeError("OpenSession: %s %s" % (status, body))
            sid = body["session_id"]
            rows.append(series(d, fake, "session cell `x + 1`", {
                "session_id": sid, "cell": {"language": "python", "code": "x = 1\nx + 1"}},
                n, method="RunCell"))
            d.rpc("CloseSession", {"session_id": sid})
        finally:
            d.stop()
    for r in rows:
        print("  e2b %s: wall p50 %.1f ms, the fake's share %.1f ms, plimsoll's own p50 %.1f ms"
              " p95 %.1f ms (%.1f calls per run)" % (r["name"], r["wall_p50_ms"],
                                                    r["fake_p50_ms"], r["overhead_p50_ms"],
                                                    r["overhead_p95_ms"], r["calls_per_run"]))
    with open(os.path.join(out, "e2b.json"), "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main()
