#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An honest caller's snippet latency on a quiet wasm daemon and on the same
daemon while strangers hold connections and half-open HTTP/2 streams at
every cap and a key holds answers it never reads (plimsoll_test.h2attack,
the load test's attackers, tests/load/test_h2_load.py), side by side in
one run.  Writes OUT/attack.json:

    python3 bench/attack.py OUT [SECONDS]
"""
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.h2attack import HalfOpen, Honest, Unread, p50  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402


def main(out, seconds):
    d = Daemon(principals=("bob", "mallory"),
               env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "1000000",
                    "SANDBOX_RATE_BURST": "100000"}).start()
    try:
        stop = threading.Event()
        honest = Honest(d, stop)
        honest.start()
        time.sleep(seconds)
        honest.phase = "attack"
        stop_attack = threading.Event()
        peers = [HalfOpen(d, src, stop_attack) for src in ("127.0.0.2", "127.0.0.3", "127.0.0.4")
                 for _ in range(70)]
        peers += [Unread(d, "127.0.0.5", stop_attack, d.keys["mallory"]) for _ in range(36)]
        for p in peers:
            p.start()
        time.sleep(seconds)
        stop_attack.set()
        stop.set()
        for p in peers:
            p.join(10)
        honest.join(40)
    finally:
        d.stop()
    quiet, attack = honest.latency.get("quiet", []), honest.latency.get("attack", [])
    r = {"quiet_n": len(quiet), "attack_n": len(attack),
         "quiet_p50_ms": 1000 * p50(quiet), "attack_p50_ms": 1000 * p50(attack),
         "wrong": len(honest.bad)}
    r["ratio"] = r["attack_p50_ms"] / r["quiet_p50_ms"] if quiet and attack else None
    with open(os.path.join(out, "attack.json"), "w") as f:
        json.dump(r, f)
    print("  attack: %s" % json.dumps(r))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10)
