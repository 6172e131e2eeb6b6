#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Artifacts benchmark: what a run's collect globs cost (docs/api.md,
"Artifacts"), under runc and under runsc, in one run.  Each pair is the
same payload with and without `collect`, timed back to back in turn at a
pace the runs' warm pool sustains: a snippet that writes a 1 KiB file,
and a project of one step that writes it; with `collect` the answer
carries the file.

    bench/artifacts.py OUT_DIR [N [RUNTIME]]   (writes OUT_DIR/artifacts.json;
                                               both runtimes unless one is named)

Called by bench/run; report.py turns the JSON into docs/performance.md.
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.docker import docker_env  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402

WRITE = "open('out.bin', 'wb').write(bytes(range(256)) * 4)"
PAYLOADS = {
    "snippet": {"snippet": {"language": "python", "code": WRITE}},
    "project": {"project": {"steps": [{"argv": ["python3", "-c", WRITE]}]}},
}


def with_collect(run):
    run = json.loads(json.dumps(run))
    list(run.values())[0]["collect"] = ["*.bin"]
    return run


def one_series(runtime, n):
    d = Daemon(env=docker_env(runtime, "bench-artifacts-" + runtime,
                              SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="10000"))
    d.start(timeout=300)
    times = {k + s: [] for k in PAYLOADS for s in ("", "_collect")}
    pace = 3.0 if runtime == "runsc" else 1.5  # the warm container made again
    try:
        conn = d.connection()
        for i in range(n + 1):
            for kind, run in PAYLOADS.items():
                for suffix, msg in (("", run), ("_collect", with_collect(run))):
                    time.sleep(pace)
                    t0 = time.monotonic()
                    status, b = d.rpc("Run", msg, conn=conn)
                    ms = (time.monotonic() - t0) * 1000
                    assert status == 200 and b["exit_code"] == 0, b
                    if suffix:
                        assert [a["size"] for a in b["artifacts"]] == [1024], b
                    if i:  # the first round warms the pool up, untimed
                        times[kind + suffix].append(ms)
        conn.close()
    finally:
        d.stop()
    return {"runtime": runtime, "n": n,
            "p50_ms": {k: statistics.median(v) for k, v in times.items()}}


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rows = []
    for runtime in sys.argv[3:4] or ("runc", "runsc"):
        r = one_series(runtime, n)
        p = r["p50_ms"]
        for kind in PAYLOADS:
            print("  artifacts %s: a %s p50 %.1f ms, with collect %.1f ms (%.2fx)"
                  % (runtime, kind, p[kind], p[kind + "_collect"],
                     p[kind + "_collect"] / p[kind]))
        rows.append(r)
    with open(os.path.join(out, "artifacts.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
