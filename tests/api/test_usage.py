# SPDX-License-Identifier: Apache-2.0
"""What each run cost (docs/api.md, "Usage") through the real daemon: a
guest that burns CPU and touches memory is counted, against one that does
nothing, under the wasm provider (the worker process) and the docker
provider under runc and runsc (the container's cgroup): snippets, modules,
a cold and a warm container, a project's steps, a session's calls and
cells; the record's digest covers the usage; /metrics' histograms grow."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, ours, per_runtime  # noqa: E402
from plimsoll_test.harness import ClassDaemon  # noqa: E402
from plimsoll_test.payloads import built_module, js, module, py, sha  # noqa: E402

MIB_KIB = 1024

# About 400 ms of the guest's own CPU time, then 64 MiB allocated and
# touched page by page; it prints the CPU time its process counted.
PY_BURN = """import os, time
t0 = os.times()
while time.process_time() - (t0.user + t0.system) < 0.4:
    pass
t1 = os.times()
b = bytearray(64 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print(int((t1.user - t0.user) * 1000))
"""
PY_NOTHING = "print(1)"

# A fixed amount of work (about 300 ms of the worker's CPU here), then
# 64 MiB of linear memory touched.
JS_BURN = ("let x = 0; for (let i = 0; i < 8000000; i++) x += i % 7;"
           "const a = new Uint8Array(64 << 20); for (let i = 0; i < a.length; i += 4096) a[i] = 1;"
           "console.log(x)")
JS_NOTHING = "console.log(1)"


def histograms(d):
    """{(name, provider, kind): count} of /metrics' usage histograms, and
    their +Inf buckets under the same keys with "_inf" added to the name."""
    status, _, body = d.request("GET", "/metrics",
                                headers={"Authorization": "Bearer " + d.keys["alice"]})
    assert status == 200, status
    out = {}
    for line in body.decode().splitlines():
        for name in ("plimsoll_run_cpu_seconds", "plimsoll_run_memory_peak_bytes"):
            if line.startswith(name + "_count{") or line.startswith(name + "_bucket{"):
                labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:
                                                              line.index("}")].split(","))
                labels = {k: v.strip('"') for k, v in labels.items()}
                value = int(line.rsplit(" ", 1)[1])
                if line.startswith(name + "_count{"):
                    out[(name, labels["provider"], labels["kind"])] = value
                elif labels["le"] == "+Inf":
                    out[(name + "_inf", labels["provider"], labels["kind"])] = value
    return out


class UsageChecks:
    """What every provider that measures must show."""
    SOURCE = None

    def assertUsage(self, body, source=None):
        u = body.get("usage")
        self.assertIsNotNone(u, body)
        self.assertNotIn("usage_absent", body)
        self.assertEqual(set(u), {"cpu_user_ms", "cpu_system_ms", "memory_peak_kib", "wall_ms",
                                  "source"}, u)
        self.assertEqual(u["source"], source or self.SOURCE)
        for k in ("cpu_user_ms", "cpu_system_ms", "memory_peak_kib", "wall_ms"):
            self.assertIsInstance(u[k], int)
            self.assertTrue(0 <= u[k] <= 4294967295, u)
        # The answer's digest covers it (the record is over the whole answer).
        rec = body["record"]
        rest = {k: v for k, v in body.items() if k != "record"}
        self.assertEqual(rec["response_sha256"], sha(rest))
        return u

    def assertBurned(self, burn, nothing):
        """burn's usage shows the CPU and the 64 MiB it spent, nothing's
        does not."""
        b, n = burn["usage"], nothing["usage"]
        self.assertGreaterEqual(b["cpu_user_ms"], 150, (b, n))
        self.assertGreaterEqual(b["cpu_user_ms"] + b["cpu_system_ms"],
                                n["cpu_user_ms"] + n["cpu_system_ms"] + 200, (b, n))
        self.assertGreaterEqual(b["memory_peak_kib"], 60 * MIB_KIB, (b, n))
        self.assertLess(n["memory_peak_kib"], b["memory_peak_kib"] - 40 * MIB_KIB, (b, n))


class WasmUsage(UsageChecks, ClassDaemon, unittest.TestCase):
    SOURCE = "worker"
    DAEMON_ENV = {"SANDBOX_PROVIDER": "wasm", "SANDBOX_MEMORY_MB": "128",
                  "SANDBOX_TOTAL_MEMORY_MB": "512",
                  "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "10000"}

    def run_ok(self, req):
        status, body = self.d.rpc("Run", req)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        return body

    def test_a_burning_snippet_against_one_that_does_nothing(self):
        before = histograms(self.d)
        nothing = self.run_ok(js(JS_NOTHING))
        self.assertUsage(nothing)
        burn = self.run_ok(js(JS_BURN))
        u = self.assertUsage(burn)
        self.assertBurned(burn, nothing)
        self.assertGreaterEqual(u["wall_ms"], u["cpu_user_ms"] // 2)
        # The worker gave back the run's memory after it answered: a run
        # after it counts from what the worker holds again (the peak is
        # reset when each run is sent).
        time.sleep(0.5)
        again = self.run_ok(js(JS_NOTHING))
        self.assertLess(self.assertUsage(again)["memory_peak_kib"],
                        burn["usage"]["memory_peak_kib"] - 40 * MIB_KIB)
        after = histograms(self.d)
        for name in ("plimsoll_run_cpu_seconds", "plimsoll_run_memory_peak_bytes"):
            key = (name, "wasm", "snippet")
            self.assertEqual(after[key] - before.get(key, 0), 3, (before, after))
            self.assertEqual(after[(name + "_inf", "wasm", "snippet")], after[key])

    def test_a_module(self):
        before = histograms(self.d)
        body = self.run_ok(module(built_module("hello")))
        self.assertUsage(body)
        after = histograms(self.d)
        key = ("plimsoll_run_cpu_seconds", "wasm", "module")
        self.assertEqual(after[key] - before.get(key, 0), 1)


class DockerUsage(UsageChecks, DockerDaemon):
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "usage-"
    SETTINGS = {"SANDBOX_DOCKER_WARM": "1", "SANDBOX_MAX_SESSIONS": "2",
                "SANDBOX_SESSION_LIFETIME": "600"}
    START_TIMEOUT = 240

    @property
    def SOURCE(self):
        return "gvisor" if self.RUNTIME == "runsc" else "cgroup"

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        assert ours(cls.instance) == [], "containers left behind"

    def run_ok(self, req):
        status, body = self.d.rpc("Run", req)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        return body

    def test_cold_containers_a_burning_snippet_against_one_that_does_nothing(self):
        # Another memory size than the default: no warm container, each
        # run counts its own container from its start.
        before = histograms(self.d)
        nothing = self.run_ok(py(PY_NOTHING, memory_mb=192))
        self.assertUsage(nothing)
        burn = self.run_ok(py(PY_BURN, memory_mb=192))
        u = self.assertUsage(burn)
        self.assertBurned(burn, nothing)
        # The cgroup holds the guest's process: at least what it counted
        # itself (under gVisor its own count is gVisor's).
        if self.RUNTIME == "runc":
            self.assertGreaterEqual(u["cpu_user_ms"] + 20, int(burn["stdout"]), (u, burn["stdout"]))
        after = histograms(self.d)
        key = ("plimsoll_run_cpu_seconds", "docker", "snippet")
        self.assertEqual(after[key] - before.get(key, 0), 2)

    def wait_warm(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if len([c for c in ours(self.instance) if c["State"] == "running"]) >= 2:
                return
            time.sleep(0.2)
        self.fail("no warm container")

    def test_warm_container_counts_from_the_run(self):
        cold = self.run_ok(py(PY_NOTHING, memory_mb=192))
        self.wait_warm()
        warm = self.run_ok(py(PY_NOTHING))
        c, w = self.assertUsage(cold), self.assertUsage(warm)
        # What the waiting container spent starting is not the run's.
        self.assertLess(w["cpu_user_ms"] + w["cpu_system_ms"],
                        c["cpu_user_ms"] + c["cpu_system_ms"], (w, c))
        self.wait_warm()
        burn = self.run_ok(py(PY_BURN))
        self.assertBurned(burn, warm)

    def test_a_deadline_still_counts(self):
        # The guest burns until its deadline, writing what CPU it has had
        # so far every 10 ms of it: the run ended by its deadline keeps what
        # it wrote and counts at least the last of those (how much the guest
        # got of the CPU in its 5 s depends on the machine's load, not on
        # the count).  At the allowance the run takes the warm container: a
        # cold one's start counts in the deadline, and under the ASan
        # stage's load a cold python3 took more than 1.5 s to print.
        burn = ("import time\nnext = 0.0\nwhile True:\n    t = time.process_time()\n"
                "    if t >= next:\n        print(int(t * 1000), flush=True)\n"
                "        next = t + 0.01\n")
        status, body = self.d.rpc("Run", py(burn, timeout_ms=5000))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outcome"], "timed_out")
        u = self.assertUsage(body)
        self.assertGreater(u["cpu_user_ms"], 0, u)
        self.assertGreaterEqual(u["wall_ms"], 4500, u)
        seen = [int(x) for x in body["stdout"].split()]
        self.assertTrue(seen and seen[-1] > 0, body["stdout"])
        cpu = u["cpu_user_ms"] + u["cpu_system_ms"]
        if self.RUNTIME == "runc":
            # The guest's clock is the host kernel's, read ticks apart from
            # the cgroup's: 30 ms of slack.
            self.assertGreaterEqual(cpu + 30, seen[-1], (u, seen[-1]))
        else:
            # gVisor's clock for a task counts its own ticks while the task
            # is in the guest's code, whether or not the host ran it then
            # (pkg/sentry/kernel/task_sched.go): on a loaded host it runs
            # ahead of the CPU the cgroup was given (3040 against 2956 ms
            # in one ASan-stage run).  Read at the kill, the count is still
            # most of it; read before the burn it would be next to nothing.
            self.assertGreaterEqual(cpu, seen[-1] // 4, (u, seen[-1]))

    def test_a_project_per_step_and_in_all(self):
        before = histograms(self.d)
        proj = {"project": {"files": [{"path": "burn.py", "content": PY_BURN}], "steps": [
            {"name": "burn", "argv": ["python3", "burn.py"]},
            {"name": "nothing", "argv": ["python3", "-c", PY_NOTHING]}]}}
        body = self.run_ok(proj)
        total = self.assertUsage(body)
        burn, nothing = body["steps"]
        self.assertBurned(burn, nothing)
        for st in (burn, nothing):
            self.assertEqual(st["usage"]["source"], self.SOURCE)
            self.assertEqual(st["usage"]["wall_ms"], st["duration_ms"])
        # The run's whole: both steps and more; its peak the larger step's.
        self.assertGreaterEqual(total["cpu_user_ms"] + total["cpu_system_ms"],
                                burn["usage"]["cpu_user_ms"] + burn["usage"]["cpu_system_ms"])
        self.assertGreaterEqual(total["memory_peak_kib"], burn["usage"]["memory_peak_kib"])
        after = histograms(self.d)
        key = ("plimsoll_run_memory_peak_bytes", "docker", "project")
        self.assertEqual(after[key] - before.get(key, 0), 1)

    def test_a_session_call_and_cells(self):
        status, body = self.d.rpc("OpenSession", {"languages": ["python"]})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        before = histograms(self.d)
        cells = []
        for code in ("1 + 1", PY_BURN.replace("print(", "b = None; print(") + "\n", "2 + 2"):
            status, b = self.d.rpc("RunCell", {"session_id": sid,
                                              "cell": {"language": "python", "code": code}})
            self.assertEqual(status, 200, b)
            self.assertUsage(b)
            cells.append(b)
        self.assertBurned(cells[1], cells[0])
        if self.RUNTIME == "runc":
            # The peak is reset at each call (cgroup v1 here): the cell
            # after the burning one does not carry its 64 MiB.
            self.assertLess(cells[2]["usage"]["memory_peak_kib"],
                            cells[1]["usage"]["memory_peak_kib"] - 40 * MIB_KIB)
        status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": py(PY_BURN)})
        self.assertEqual(status, 200, b)
        self.assertUsage(b)
        self.assertBurned(b, cells[0])
        proj = {"project": {"files": [], "steps": [
            {"name": "one", "argv": ["python3", "-c", "print(1)"]},
            {"name": "two", "argv": ["python3", "-c", "print(2)"]}]}}
        status, b = self.d.rpc("RunInSession", {"session_id": sid, "run": proj})
        self.assertEqual(status, 200, b)
        self.assertUsage(b)
        for st in b["steps"]:
            self.assertEqual(st["usage"]["source"], self.SOURCE, st)
        after = histograms(self.d)
        key = ("plimsoll_run_cpu_seconds", "docker", "cell")
        self.assertEqual(after[key] - before.get(key, 0), 3)


DockerUsageRunc, DockerUsageRunsc = per_runtime(DockerUsage)

if __name__ == "__main__":
    unittest.main()
