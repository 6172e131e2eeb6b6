#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Display outputs benchmark: what a cell's image costs to bring back
(docs/sessions.md, "Display outputs"), under runc and under runsc, in one
run.  In one session, in turn: a cell that displays a 100 KB image/png
(its bytes made in the interpreter, sent as the uplink's display message,
checked and kept by the daemon, base64 in the answer) and a plain cell
`x + 1` after it, each once the cleanup after the call before it finished
(1.5 s apart under runc, 3 s under runsc); p50 and p95 of N each after an
untimed round.

    bench/display.py OUT_DIR [N [RUNTIME]]   (writes OUT_DIR/display.json;
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
from plimsoll_test.docker import docker_env  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402

IMAGE = 100 * 1024
CELLS = {
    "image": "display({'image/png': b'\\x89PNG' + bytes(range(256)) * 400}, raw=True)",
    "plain": "x + 1",
}


def one_series(runtime, n):
    d = Daemon(env=docker_env(runtime, "bench-display-" + runtime, SANDBOX_MAX_SESSIONS="1",
                              SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="10000"))
    d.start(timeout=300)
    times = {k: [] for k in CELLS}
    try:
        conn = d.connection()
        status, o = d.rpc("OpenSession", {"languages": ["python"]}, conn=conn)
        assert status == 200, o
        sid = o["session_id"]
        status, b = d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python",
                                                                  "code": "x = 41"}}, conn=conn)
        assert status == 200 and b["exit_code"] == 0, b
        pace = 3.0 if runtime == "runsc" else 1.5  # the cleanup after a call finished
        for i in range(n + 1):
            for kind, code in CELLS.items():
                time.sleep(pace)
                t0 = time.monotonic()
                status, b = d.rpc("RunCell", {"session_id": sid, "cell": {
                    "language": "python", "code": code}}, conn=conn)
                ms = (time.monotonic() - t0) * 1000
                assert status == 200 and b["exit_code"] == 0, b
                if kind == "image":
                    png = base64.b64decode(b["outputs"][0]["data"]["image/png"])
                    assert len(png) == 4 + 256 * 400 and len(png) > IMAGE - 1024, len(png)
                else:
                    assert b["stdout"] == "42\n", b
                if i:  # the first round warms up, untimed
                    times[kind].append(ms)
        d.rpc("CloseSession", {"session_id": sid}, conn=conn)
        conn.close()
    finally:
        d.stop()
    return {"runtime": runtime, "n": n,
            "p50_ms": {k: statistics.median(v) for k, v in times.items()},
            "p95_ms": {k: sorted(v)[max(0, int(len(v) * 0.95) - 1)] for k, v in times.items()}}


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rows = []
    for runtime in sys.argv[3:4] or ("runc", "runsc"):
        r = one_series(runtime, n)
        p = r["p50_ms"]
        print("  display %s: a 100 KB image cell p50 %.1f ms, a plain cell %.1f ms (%.2fx)"
              % (runtime, p["image"], p["plain"], p["image"] / p["plain"]))
        rows.append(r)
    with open(os.path.join(out, "display.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
