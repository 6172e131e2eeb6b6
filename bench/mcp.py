#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""MCP benchmark: run_code through the MCP server (docs/mcp.md) over its
two faces, beside the same snippet as a Connect JSON Run, against one wasm
daemon, in one run.  In turn, N times each after an untimed round: a
Connect JSON `Run` on a kept-alive HTTP/1.1 connection; a `tools/call
run_code` on `/mcp` (Streamable HTTP) on a kept-alive connection of an
initialized MCP session; the same through `plimsoll mcp` (stdio, one
process for the whole series, itself on a kept-alive connection to the
daemon).  Each is timed from the request written to the answer read;
p50 and p95, and each MCP face's p50 over Connect's.

    bench/mcp.py OUT_DIR [N]   (writes OUT_DIR/mcp.json)

Called by bench/run; report.py turns the JSON into docs/performance.md.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.harness import BUILD, Daemon  # noqa: E402

CODE = "console.log(1)"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}


def call(i):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "run_code", "arguments": {"language": "javascript", "code": CODE}}}


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "1000000",
                    "SANDBOX_RATE_BURST": "100000"}).start()
    key = d.keys["alice"]
    times = {"connect": [], "mcp_http": [], "mcp_stdio": []}
    try:
        conn = d.connection()
        mh = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
              "Authorization": "Bearer " + key}
        conn.request("POST", "/mcp", json.dumps(INIT), mh)
        r = conn.getresponse()
        r.read()
        mh["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
        conn.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0",
                                                 "method": "notifications/initialized"}), mh)
        conn.getresponse().read()
        relay = subprocess.Popen(
            [os.path.join(BUILD, "plimsoll"), "mcp"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PLIMSOLL_URL="http://%s:%d" % (d.host, d.port), PLIMSOLL_KEY=key))

        def stdio(m):
            relay.stdin.write(json.dumps(m) + "\n")
            relay.stdin.flush()
            if "id" in m:
                return json.loads(relay.stdout.readline())
            return None
        stdio(INIT)
        stdio({"jsonrpc": "2.0", "method": "notifications/initialized"})
        rq = json.dumps({"snippet": {"language": "javascript", "code": CODE}})
        ch = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
        for i in range(n + 1):
            t0 = time.monotonic()
            conn.request("POST", "/plimsoll.v1.SandboxService/Run", rq, ch)
            b = json.loads(conn.getresponse().read())
            t1 = time.monotonic()
            assert b["stdout"] == "1\n", b
            conn.request("POST", "/mcp", json.dumps(call(i + 1)), mh)
            b = json.loads(conn.getresponse().read())
            t2 = time.monotonic()
            assert b["result"]["structuredContent"]["stdout"] == "1\n", b
            b = stdio(call(i + 1))
            t3 = time.monotonic()
            assert b["result"]["structuredContent"]["stdout"] == "1\n", b
            if i:  # the first round warms up, untimed
                times["connect"].append((t1 - t0) * 1000)
                times["mcp_http"].append((t2 - t1) * 1000)
                times["mcp_stdio"].append((t3 - t2) * 1000)
        relay.stdin.close()
        relay.wait(timeout=30)
        conn.close()
    finally:
        d.stop()
    row = {"n": n, "p50_ms": {k: statistics.median(v) for k, v in times.items()},
           "p95_ms": {k: sorted(v)[max(0, int(len(v) * 0.95) - 1)] for k, v in times.items()}}
    p = row["p50_ms"]
    print("  mcp (wasm): Connect JSON Run p50 %.2f ms; MCP HTTP %.2f ms (%.2fx); MCP stdio %.2f ms"
          " (%.2fx)" % (p["connect"], p["mcp_http"], p["mcp_http"] / p["connect"],
                        p["mcp_stdio"], p["mcp_stdio"] / p["connect"]))
    with open(os.path.join(out, "mcp.json"), "w") as f:
        json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
