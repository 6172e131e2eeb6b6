# SPDX-License-Identifier: Apache-2.0
"""Load and soak against the real daemon and the real docker engine.

Load: a client loop (threads, one keep-alive HTTP connection each, Runs
sent back to back) at twice the daemon's admission capacity for a bounded
time. Every answer must be a result (200 with a record) or a typed refusal
(429 AT_CAPACITY or RATE_LIMITED, dispatched "false"); nothing else, no
socket error, no request past its timeout. Afterwards the daemon is ready,
nothing is in flight, its counters agree with what the clients saw, and its
fd and thread counts are back where they started.

Soak: at least 10,000 wasm runs and 1,000 docker (runc) runs, each a result
with the right output; the daemon's fd count stays flat and its RSS grows
less than 5% after a warm-up; under docker the instance never holds more
containers than its bound, and none are left after the daemon stops.

Timings (throughput, p50/p99) are printed, not asserted: this machine is
shared and noisy. The one timing bound, on the refusals' p99, is a hang
guard (a refusal that waited for a run slot would take a run's time), not a
performance claim. Figures are recorded in docs/load.md.

    PLIMSOLL_BUILD_DIR=build python3 tests/run.py tests/load load
"""
import http.client
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import docker_env, engine_up, ours  # noqa: E402
from plimsoll_test.harness import SERVICE, Daemon, error_info, metrics  # noqa: E402
from plimsoll_test.payloads import js, py  # noqa: E402
from plimsoll_test.procs import proc_counts  # noqa: E402

# A refusal's p99 above this means it waited (for a slot, a lock, a run):
# a hang guard, far above any refusal's real time, not a performance claim.
REFUSAL_HANG_GUARD_S = 0.5

# A JavaScript snippet that takes some milliseconds (so runs overlap and
# admission is exercised) and prints a known answer.
JS_BUSY = "let s=0; for (let i=0;i<30000;i++) s=(s+i)%1000003; console.log(s)"

PY_BUSY = "s=0\nfor i in range(200000): s=(s+i)%1000003\nprint(s)"


def _expected(n):
    s = 0
    for i in range(n):
        s = (s + i) % 1000003
    return "%d\n" % s


JS_BUSY_OUT = _expected(30000)
PY_BUSY_OUT = _expected(200000)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    i = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[i]


def ms(x):
    return "%.2f ms" % (x * 1000.0)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def metric_sum(m, prefix):
    return sum(v for k, v in m.items() if k == prefix or k.startswith(prefix + "{"))


def settle_counts(d, fds0, threads0, timeout=20.0):
    """fd and thread counts back to their start (+2, like the hostile suite);
    background work (connection threads ending, the reaper and warmer
    talking to the engine) gets a moment to finish."""
    deadline = time.monotonic() + timeout
    while True:
        fds, threads = proc_counts(d.proc.pid)
        if (fds <= fds0 + 2 and threads <= threads0 + 2) or time.monotonic() > deadline:
            return fds, threads
        time.sleep(0.2)


class Tally:
    """What the client threads saw, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.results = []      # latencies of 200 answers (s)
        self.refusals = []     # latencies of typed refusals (s)
        self.reasons = {}
        self.bad = []          # anything else: (what, detail)
        self.done = 0
        self.claimed = 0       # requests under way (with a limit)

    def claim(self, limit):
        """With a limit: whether one more request may start."""
        with self.lock:
            if self.done + self.claimed >= limit:
                return False
            self.claimed += 1
            return True

    def add(self, kind, dt, detail=None, claimed=False):
        with self.lock:
            self.done += 1
            self.claimed -= 1 if claimed else 0
            if kind == "result":
                self.results.append(dt)
            elif kind == "refusal":
                self.refusals.append(dt)
                self.reasons[detail] = self.reasons.get(detail, 0) + 1
            else:
                self.bad.append((kind, detail))


def one_run(conn, d, principal, msg, check):
    """Send one Run on conn; returns (kind, detail)."""
    h = {"Content-Type": "application/json",
         "Authorization": "Bearer " + d.keys[principal]}
    conn.request("POST", SERVICE + "Run", body=json.dumps(msg).encode(), headers=h)
    r = conn.getresponse()
    data = r.read()
    try:
        body = json.loads(data)
    except ValueError:
        return "unparsable", "%d %r" % (r.status, data[:200])
    if r.status == 200:
        if not isinstance(body.get("record"), dict) or not body["record"].get("digest"):
            return "no-record", body
        problem = check(body)
        return ("result", None) if problem is None else ("wrong-result", problem)
    try:
        info = error_info(body)[0]
    except (KeyError, IndexError, AssertionError, ValueError) as e:
        return "untyped-error", "%d %r (%s)" % (r.status, body, e)
    reason, dispatched = info["reason"], info["metadata"].get("dispatched")
    if r.status == 429 and reason in ("AT_CAPACITY", "RATE_LIMITED") and dispatched == "false":
        return "refusal", reason
    return "other-error", "%d %s dispatched=%s %r" % (r.status, reason, dispatched,
                                                       body.get("message"))


def client_loop(d, principal, msg, check, tally, stop, timeout_s, limit=None):
    """Runs back to back on one keep-alive connection until stop is set (or,
    with limit, until limit requests have been answered). A socket error or a request past
    timeout_s is recorded as bad and the connection is opened anew."""
    conn = d.connection(timeout=timeout_s)
    try:
        while not stop.is_set():
            if limit is not None and not tally.claim(limit):
                return
            t0 = time.monotonic()
            try:
                kind, detail = one_run(conn, d, principal, msg, check)
            except (OSError, http.client.HTTPException) as e:
                kind, detail = "socket", "%s: %s" % (type(e).__name__, e)
                conn.close()
                conn = d.connection(timeout=timeout_s)
            tally.add(kind, time.monotonic() - t0, detail, claimed=limit is not None)
    finally:
        conn.close()


def drive(d, clients, msg, check, timeout_s, seconds=None, limit=None):
    """clients: a list of principals, one thread each; for seconds, or until
    limit answers. Returns (tally, wall s)."""
    tally = Tally()
    stop = threading.Event()
    threads = [threading.Thread(target=client_loop,
                                args=(d, p, msg, check, tally, stop, timeout_s, limit),
                                daemon=True) for p in clients]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    if seconds is not None:
        time.sleep(seconds)
        stop.set()
    for t in threads:
        # Each thread ends within one request's timeout of stop; a thread
        # still alive after that is a hang.
        t.join(timeout=(timeout_s + 10) if seconds is not None else None)
    wall = time.monotonic() - t0
    stop.set()
    hung = [t for t in threads if t.is_alive()]
    assert not hung, "%d client threads still waiting on the daemon" % len(hung)
    return tally, wall


def server_durations(d, outcome):
    """Server-side duration_ms of the Run calls logged with this outcome."""
    return [line["duration_ms"] / 1000.0 for line in d.log_lines()
            if line.get("method") == "Run" and line.get("outcome") == outcome
            and "duration_ms" in line]


def expect_stdout(want):
    def check(body):
        if body.get("exit_code") != 0 or body.get("stdout") != want or body.get("timed_out"):
            return {k: body.get(k) for k in ("exit_code", "stdout", "stderr", "timed_out",
                                             "outcome", "detail")}
        return None
    return check


class LoadBase:
    """Shared by the wasm and docker load tests: the daemon and its checks."""

    def report(self, name, tally, wall, d):
        n = len(tally.results) + len(tally.refusals)
        srv_ran = server_durations(d, "ran")
        srv_ref = server_durations(d, "refused")
        print("\n[%s] %.1f s, %d answers (%.0f/s): %d results (%.1f/s), %d refusals %r, %d bad"
              % (name, wall, n, n / wall, len(tally.results), len(tally.results) / wall,
                 len(tally.refusals), tally.reasons, len(tally.bad)), file=sys.stderr)
        print("[%s] client  results p50 %s p99 %s max %s; refusals p50 %s p99 %s max %s"
              % (name, ms(pct(tally.results, 50)), ms(pct(tally.results, 99)),
                 ms(max(tally.results or [0])), ms(pct(tally.refusals, 50)),
                 ms(pct(tally.refusals, 99)), ms(max(tally.refusals or [0]))), file=sys.stderr)
        print("[%s] daemon  results p50 %s p99 %s; refusals p50 %s p99 %s (logged duration_ms)"
              % (name, ms(pct(srv_ran, 50)), ms(pct(srv_ran, 99)), ms(pct(srv_ref, 50)),
                 ms(pct(srv_ref, 99))), file=sys.stderr)
        return srv_ref

    def check_load(self, name, d, m0, fds0, threads0, tally, wall):
        srv_ref = self.report(name, tally, wall, d)
        self.assertEqual(tally.bad[:5], [], "%d answers neither a result nor a typed refusal"
                         % len(tally.bad))
        self.assertGreater(len(tally.results), 0, "no run got through")
        self.assertGreater(tally.reasons.get("AT_CAPACITY", 0), 0,
                           "twice the capacity never met AT_CAPACITY")
        self.assertLess(pct(srv_ref, 99), REFUSAL_HANG_GUARD_S, "refusals waited (daemon side)")
        self.assertLess(pct(tally.refusals, 99), REFUSAL_HANG_GUARD_S,
                        "refusals waited (client side)")
        self.assertEqual(d.request("GET", "/readyz")[0], 200, "not ready after the load")
        m1 = metrics(d)
        self.assertEqual(m1.get("plimsoll_in_flight"), 0, "runs still in flight")
        # The daemon's counters agree with the clients, answer for answer.
        self.assertEqual(metric_sum(m1, "plimsoll_runs_total")
                         - metric_sum(m0, "plimsoll_runs_total"), len(tally.results))
        for reason, n in tally.reasons.items():
            key = 'plimsoll_refusals_total{reason="%s"}' % reason
            self.assertEqual(m1.get(key, 0) - m0.get(key, 0), n, key)
        fds, threads = settle_counts(d, fds0, threads0)
        print("[%s] fds %d -> %d, threads %d -> %d" % (name, fds0, fds, threads0, threads),
              file=sys.stderr)
        self.assertLessEqual(fds, fds0 + 2, "fds %d -> %d" % (fds0, fds))
        self.assertLessEqual(threads, threads0 + 2, "threads %d -> %d" % (threads0, threads))


class LoadWasm(LoadBase, unittest.TestCase):
    CAPACITY = 4
    SECONDS = 15

    def test_twice_capacity(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_OUTPUT_BYTES": "4096",
                        "SANDBOX_MAX_CONCURRENT": str(self.CAPACITY),
                        "SANDBOX_PER_KEY_CONCURRENT": str(self.CAPACITY),
                        "SANDBOX_RATE_PER_MIN": "1000000", "SANDBOX_RATE_BURST": "1000000"})
        with d:
            fds0, threads0 = proc_counts(d.proc.pid)
            m0 = metrics(d)
            # 2x capacity: half the clients as alice, half as bob.
            clients = ["alice", "bob"] * self.CAPACITY
            tally, wall = drive(d, clients, js(JS_BUSY), expect_stdout(JS_BUSY_OUT),
                                timeout_s=30, seconds=self.SECONDS)
            self.check_load("load wasm", d, m0, fds0, threads0, tally, wall)


class LoadDocker(LoadBase, unittest.TestCase):
    CAPACITY = 2
    SECONDS = 20

    def test_twice_capacity_runc(self):
        self.assertTrue(engine_up(), "the docker engine is not running: run scripts/docker-setup")
        instance = "load-runc"
        env = docker_env("runc", instance, SANDBOX_MAX_CONCURRENT=str(self.CAPACITY),
                         SANDBOX_PER_KEY_CONCURRENT=str(self.CAPACITY))
        d = Daemon(env=env).start(timeout=120)
        try:
            fds0, threads0 = proc_counts(d.proc.pid)
            m0 = metrics(d)
            clients = ["alice", "bob"] * self.CAPACITY
            tally, wall = drive(d, clients, py(PY_BUSY), expect_stdout(PY_BUSY_OUT),
                                timeout_s=60, seconds=self.SECONDS)
            self.check_load("load docker/runc", d, m0, fds0, threads0, tally, wall)
        finally:
            d.stop()
        left = ours(instance)
        self.assertEqual(left, [], "containers left behind")


def children(pid):
    """(count, total RSS KiB) of pid's child processes (the wasm workers)."""
    n = kib = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                n += 1
                kib += rss_kib(int(p))
        except (OSError, ValueError, IndexError, AssertionError):
            pass
    return n, kib


class Soak:
    """Runs in two phases, warm-up then the rest, each on fresh keep-alive
    connections that are closed at its end; the daemon's RSS, fd count and
    children are sampled after each phase, in the same state (no client
    connected, nothing in flight), so the two samples compare like with like."""

    def sample(self, d, threads0):
        """Waits (at most 20 s) until the connection threads have ended and the
        fd count has held still for a second, then samples."""
        deadline = time.monotonic() + 20
        last, still = None, 0
        while time.monotonic() < deadline:
            fds, threads = proc_counts(d.proc.pid)
            still = still + 1 if fds == last else 0
            last = fds
            if threads <= threads0 + 2 and still >= 5:
                break
            time.sleep(0.2)
        return rss_kib(d.proc.pid), last, children(d.proc.pid)

    def soak(self, name, d, msg, check, clients, total, warmup, timeout_s):
        threads0 = proc_counts(d.proc.pid)[1]
        t1, wall1 = drive(d, clients, msg, check, timeout_s, limit=warmup)
        self.assertEqual(t1.bad[:5], [], "%d warm-up runs went wrong" % len(t1.bad))
        rss_w, fds_w, kids_w = self.sample(d, threads0)
        tally, wall = drive(d, clients, msg, check, timeout_s, limit=total - warmup)
        rss_e, fds_e, kids_e = self.sample(d, threads0)
        done = t1.done + tally.done
        results = t1.results + tally.results
        wall += wall1
        print("\n[%s] %d runs in %.1f s (%.1f/s); p50 %s p99 %s max %s; %d refusals %r, %d bad"
              % (name, done, wall, done / wall, ms(pct(results, 50)), ms(pct(results, 99)),
                 ms(max(results or [0])), len(tally.refusals) + len(t1.refusals),
                 tally.reasons, len(tally.bad)), file=sys.stderr)
        growth = (rss_e - rss_w) / float(rss_w)
        print("[%s] after run %d: RSS %d KiB, %d fds, %d children (%d KiB); after run %d: "
              "RSS %d KiB (%+.2f%%), %d fds, %d children (%d KiB)"
              % (name, warmup, rss_w, fds_w, kids_w[0], kids_w[1], done, rss_e, growth * 100,
                 fds_e, kids_e[0], kids_e[1]), file=sys.stderr)
        self.assertEqual(tally.bad[:5], [], "%d runs went wrong" % len(tally.bad))
        self.assertEqual(t1.refusals + tally.refusals, [],
                         "refused under its capacity: %r %r" % (t1.reasons, tally.reasons))
        self.assertEqual(len(results), total)
        self.assertEqual(d.request("GET", "/readyz")[0], 200)
        self.assertEqual(metrics(d).get("plimsoll_in_flight"), 0)
        self.assertLessEqual(fds_e, fds_w + 2, "fds %d -> %d" % (fds_w, fds_e))
        self.assertLess(growth, 0.05, "RSS %d -> %d KiB" % (rss_w, rss_e))
        self.assertLessEqual(kids_e[0], kids_w[0], "child processes %d -> %d"
                             % (kids_w[0], kids_e[0]))
        return tally


class SoakWasm(Soak, unittest.TestCase):
    RUNS = 10000

    def test_ten_thousand_runs(self):
        # Capacity above the clients: every run must be admitted.
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_OUTPUT_BYTES": "4096",
                        "SANDBOX_MAX_CONCURRENT": "8", "SANDBOX_PER_KEY_CONCURRENT": "8",
                        "SANDBOX_RATE_PER_MIN": "1000000", "SANDBOX_RATE_BURST": "1000000"})
        with d:
            code = "console.log(6*7)"
            self.soak("soak wasm", d, js(code), expect_stdout("42\n"), ["alice"] * 4,
                      self.RUNS, 1000, timeout_s=30)


class SoakDocker(Soak, unittest.TestCase):
    RUNS = int(os.environ.get("PL_LOAD_DOCKER_RUNS", "1000"))
    CAPACITY = 4
    WARM = 2
    IMAGES = 2  # the warm pool keeps WARM per image: snippet and project

    def test_thousand_runs_runc(self):
        self.assertTrue(engine_up(), "the docker engine is not running: run scripts/docker-setup")
        instance = "soak-runc"
        env = docker_env("runc", instance, SANDBOX_MAX_CONCURRENT=str(self.CAPACITY),
                         SANDBOX_PER_KEY_CONCURRENT=str(self.CAPACITY),
                         SANDBOX_DOCKER_WARM=str(self.WARM))
        d = Daemon(env=env).start(timeout=120)
        seen = []  # (all containers of the instance, running, created, exited or dead)
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                try:
                    cs = ours(instance)
                    st = [c["State"] for c in cs]
                    seen.append((len(st), st.count("running"), st.count("created"),
                                 st.count("exited") + st.count("dead")))
                except (OSError, KeyError, TypeError):
                    pass
                stop.wait(0.5)
        watcher = threading.Thread(target=watch, daemon=True)
        try:
            watcher.start()
            self.soak("soak docker/runc", d, py("print(6*7)"), expect_stdout("42\n"),
                      ["alice"] * self.CAPACITY, self.RUNS, 100, timeout_s=60)
        finally:
            stop.set()
            watcher.join()
            d.stop()
        peak = [max(x[i] for x in seen) if seen else 0 for i in range(4)]
        print("[soak docker/runc] containers of the instance over %d samples: at most %d in all, "
              "%d running, %d created, %d exited or dead" % ((len(seen),) + tuple(peak)),
              file=sys.stderr)
        self.assertGreater(len(seen), 10)
        # Running sandboxes: the runs in flight plus the warm pool (WARM per
        # image), never more. A run's container has exited before its answer
        # and the reaper deletes it after, so exited ones (and warm ones being
        # created) wait a moment: the pile-up guard below counts them, and a
        # reaper that fell behind or deletions that failed would exceed it.
        self.assertLessEqual(peak[1], self.CAPACITY + self.WARM * self.IMAGES,
                             "running containers: %r" % seen[-20:])
        self.assertLessEqual(peak[0], 2 * (self.CAPACITY + self.WARM * self.IMAGES),
                             "containers piled up: %r" % seen[-20:])
        self.assertEqual(ours(instance), [], "containers left behind")
