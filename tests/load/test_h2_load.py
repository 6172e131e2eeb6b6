# SPDX-License-Identifier: Apache-2.0
"""What strangers can make the daemon hold over HTTP/2, at every cap at
once, while an honest caller runs snippets (wasm provider, loopback only,
every loop bounded in time).

  quiet   the honest caller alone (bob, 127.0.0.1, HTTP/1.1, a new
          connection for each /healthz and each run)
  attack  three addresses (127.0.0.2-4), each with more connections than its
          cap (PLIMSOLL_MAX_CONNECTIONS_PER_ADDRESS), each connection opening
          100 streams without a key that it never ends, and a PING every
          second; and from 127.0.0.5 a key (mallory) whose connections have
          a receive window of 0 and ask for runs of 256 KB of output they
          never read, more than its share of the bytes in flight
  after   the honest caller alone again

Asserted: every honest call is answered correctly; the daemon's peak RSS
(VmHWM) stays under what docs/security.md's budget table predicts for this
configuration (the daemon's own at start, every connection's cost, and
mallory's share of the bytes in flight with the answers of the runs it
may have in progress, RSS_PREDICTED_KIB); the attackers' streams were
answered and reset, their idle connections closed and the unread answers
reset; afterwards the daemon's descriptor and thread counts are back and
mallory runs again.  The honest caller's latencies (p50 per phase) and
the peaks are printed, never asserted: docs/load.md records them.

    PLIMSOLL_BUILD_DIR=build python3 -m unittest tests/load/test_h2_load.py
"""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.h2attack import HalfOpen, Honest, Unread, p50, totals  # noqa: E402
from plimsoll_test.harness import Daemon  # noqa: E402
from plimsoll_test.procs import proc_counts  # noqa: E402

STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
MALLORY = "127.0.0.5"
PER_ADDRESS = 64             # PLIMSOLL_MAX_CONNECTIONS (256) / 4, the default
CONNECTIONS = 256
KEY_SHARE = 32 << 20         # PLIMSOLL_PER_KEY_REQUEST_BYTES_IN_FLIGHT's default: half of 64 MiB
PER_KEY_RUNS = 4             # SANDBOX_PER_KEY_CONCURRENT's default: half of 8
ANSWER_BYTES = 262144 + 4096  # one of mallory's answers: its output and the JSON around it
READ_MS = SEND_MS = 3000
# What one open HTTP/2 connection costs the daemon's RSS at the most: its
# thread's touched stack (the read buffer, the flush's 64 KiB), its nghttp2
# session and its streams' structures (docs/security.md).
CONNECTION_KIB = 256
_SCALE = float(os.environ.get("PL_LOAD_PHASE_SCALE", "1"))
PHASES = {"quiet": max(3, 6 * _SCALE), "attack": max(2 * READ_MS / 1000 + 2, 16 * _SCALE),
          "after": max(2, 4 * _SCALE)}


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s" % field)


class HeldForNothingUnderLoad(unittest.TestCase):
    def test_strangers_at_every_cap(self):
        d = Daemon(principals=("bob", "mallory"),
                   env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_RATE_PER_MIN": "1000000",
                        "SANDBOX_RATE_BURST": "100000",
                        "PLIMSOLL_REQUEST_READ_TIMEOUT_MS": str(READ_MS),
                        "PLIMSOLL_ANSWER_SEND_TIMEOUT_MS": str(SEND_MS)}).start()
        try:
            self.exercise(d)
        finally:
            d.stop()

    def exercise(self, d):
        pid = d.proc.pid
        self.assertEqual(d.rpc("Run", {"snippet": {"language": "javascript",
                                                   "code": "console.log(1)"}},
                               principal="mallory")[0], 200)
        time.sleep(0.5)
        before = proc_counts(pid)
        rss0 = status_kib(pid, "VmRSS")
        predicted = (rss0 + CONNECTIONS * CONNECTION_KIB +
                     (KEY_SHARE + PER_KEY_RUNS * ANSWER_BYTES) // 1024)
        stop_honest = threading.Event()
        honest = Honest(d, stop_honest)
        honest.start()
        time.sleep(PHASES["quiet"])
        honest.phase = "attack"
        stop_attack = threading.Event()
        peers = [HalfOpen(d, src, stop_attack) for src in STRANGERS
                 for _ in range(PER_ADDRESS + 6)]
        peers += [Unread(d, MALLORY, stop_attack, d.keys["mallory"]) for _ in range(36)]
        for p in peers:
            p.start()
        rss_max = 0
        end = time.monotonic() + PHASES["attack"]
        while time.monotonic() < end:
            rss_max = max(rss_max, status_kib(pid, "VmRSS"))
            time.sleep(0.2)
        stop_attack.set()
        for p in peers:
            p.join(10)
        honest.phase = "after"
        time.sleep(PHASES["after"])
        stop_honest.set()
        honest.join(40)
        hwm = status_kib(pid, "VmHWM")
        strangers = totals([p for p in peers if isinstance(p, HalfOpen)])
        unread = totals([p for p in peers if isinstance(p, Unread)])
        print("\n[h2-load] honest p50 ms: quiet %.2f attack %.2f after %.2f; calls %s" % (
            1000 * p50(honest.latency.get("quiet", [])),
            1000 * p50(honest.latency.get("attack", [])),
            1000 * p50(honest.latency.get("after", [])),
            {k: len(v) for k, v in honest.latency.items()}))
        print("[h2-load] RSS KiB: start %d, max %d, peak (VmHWM) %d, predicted bound %d" % (
            rss0, rss_max, hwm, predicted))
        print("[h2-load] strangers %s" % strangers)
        print("[h2-load] mallory %s" % unread)
        self.assertEqual(honest.bad, [])
        for phase in PHASES:
            self.assertTrue(honest.latency.get(phase), phase)
        self.assertLess(hwm, predicted)
        # The strangers met the cap, their streams were answered and reset,
        # and their connections, idle, were closed.
        self.assertGreater(strangers.get("refused at connect", 0) + strangers.get("closed", 0),
                           0, strangers)
        self.assertGreater(strangers.get("resets", 0), 0, strangers)
        self.assertGreater(strangers.get("goaway", 0), 0, strangers)
        # Mallory's unread answers were reset at the send deadline.
        self.assertGreater(unread.get("resets", 0), 0, unread)
        # Afterwards: the counts are back, mallory's share with them.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            after = proc_counts(pid)
            if after[0] <= before[0] + 2:
                break
            time.sleep(0.5)
        self.assertLessEqual(after[0], before[0] + 2, (before, after))
        status, body = d.rpc("Run", {"snippet": {"language": "javascript",
                                                 "code": "console.log(1)"}}, principal="mallory")
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main()
