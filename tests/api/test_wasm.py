# SPDX-License-Identifier: Apache-2.0
"""The wasm provider (process tier) through the real daemon over HTTP:
results, real limits, refusals that need a provider that runs, records,
concurrency, readiness, a soak, and the CLI."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "wasi"))
from plimsoll_test.harness import (BUILD, CLI, ClassDaemon, Daemon,  # noqa: E402
                                   build_is_sanitized, error_info, run_startup)
from plimsoll_test.payloads import built_module, js, module, sha  # noqa: E402
from plimsoll_test.procs import children  # noqa: E402
import wasmgen  # noqa: E402

WASM = {"SANDBOX_PROVIDER": "wasm"}
SANITIZED = build_is_sanitized()


def proc_stats(pid):
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    threads = len(os.listdir("/proc/%d/task" % pid))
    return rss, fds, threads


class WasmRuns(ClassDaemon, unittest.TestCase):
    DAEMON_ENV = dict(WASM, SANDBOX_MAX_CONCURRENT="4", SANDBOX_PER_KEY_CONCURRENT="4",
                      SANDBOX_OUTPUT_BYTES="4096",
                      SANDBOX_MEMORY_MB="128", SANDBOX_TOTAL_MEMORY_MB="512",
                      SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="10000")

    def run_js(self, code, **extra):
        status, body = self.d.rpc("Run", js(code, **extra))
        self.assertEqual(status, 200, body)
        return body

    def assertRefusal(self, status, body, http, reason):
        self.assertEqual(status, http, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason)
        self.assertEqual(info["metadata"]["dispatched"], "false")
        self.assertEqual(info["metadata"]["isolation"], "process")

    def test_describe(self):
        status, body = self.d.rpc("Describe", {})
        self.assertEqual(status, 200)
        self.assertEqual((body["provider"], body["isolation"], body["runtime"]),
                         ("wasm", "process", "wasm2c"))
        sn = body["operations"]["snippet"]
        self.assertTrue(sn["supported"])
        self.assertEqual(sn["languages"], ["javascript"])
        self.assertIn("QuickJS 2021-03-27", sn["engine"])
        # The whole string, what it lacks included (not cut at a buffer).
        self.assertTrue(sn["engine"].endswith("symbols as WeakMap keys"), sn["engine"])
        # What proved the mark: the startup proof's four steps.
        checks = body["startup_checks"]
        self.assertEqual(len(checks), 4, checks)
        self.assertIn("refused as out of memory", checks[1])
        self.assertIn("stopped at a 100 ms deadline", checks[2])
        self.assertEqual(sn["max_timeout_ms"], 60000)
        self.assertFalse(body["operations"]["project"]["supported"])
        self.assertTrue(body["operations"]["module"]["supported"])
        self.assertIn("wabt", body["operations"]["module"]["engine"])
        self.assertEqual(body["limits"]["effective_concurrency"], 4)
        self.assertTrue(body["limits"]["memory_budget_applies"])

    def test_hello_world_and_record(self):
        req = js("console.log('hello world')")
        status, body = self.d.rpc("Run", req)
        self.assertEqual(status, 200, body)
        self.assertEqual((body["exit_code"], body["stdout"], body["stderr"]),
                         (0, "hello world\n", ""))
        self.assertEqual(body["isolation"], "process")
        self.assertEqual(body["outcome"], "completed")
        self.assertTrue(body["sandbox_name"].startswith("wasm-"))
        rec = body.pop("record")
        self.assertEqual(rec["request_sha256"], sha(req))
        # The answer's digest covers what the run cost too.
        self.assertEqual(body["usage"]["source"], "worker", body)
        self.assertEqual(rec["response_sha256"], sha(body))
        self.assertEqual(rec["digest"], sha({k: v for k, v in rec.items() if k != "digest"}))
        self.assertEqual((rec["provider"], rec["isolation"], rec["runtime"]),
                         ("wasm", "process", "wasm2c"))
        self.assertGreaterEqual(rec["ended_at"], rec["started_at"])

    def test_last_expression_not_printed(self):
        body = self.run_js("1 + 1; 'value'")
        self.assertEqual(body["stdout"], "")

    def test_syntax_error_is_a_result(self):
        body = self.run_js("let x = ;")
        self.assertEqual(body["exit_code"], 1)
        self.assertIn("SyntaxError", body["stderr"])

    def test_uncaught_exception(self):
        body = self.run_js("throw new TypeError('bad')")
        self.assertEqual(body["exit_code"], 1)
        self.assertIn("TypeError: bad", body["stderr"])

    def test_stdin(self):
        req = js("console.log(readStdin().toUpperCase())")
        req["snippet"]["stdin"] = "abc"
        status, body = self.d.rpc("Run", req)
        self.assertEqual(body["stdout"], "ABC\n")

    def test_nothing_survives_between_runs(self):
        self.run_js("globalThis.leak = 1; Object.prototype.p = 2;")
        body = self.run_js("console.log(typeof leak, ({}).p)")
        self.assertEqual(body["stdout"], "undefined undefined\n")

    def test_loops_stopped_at_deadline_while_others_answer(self):
        loops = {
            "for": "for(;;){}",
            "regex bomb": "/(a+)+$/.test('a'.repeat(40) + 'b')",
            "giant join": "Array(2**27).join('')",
        }
        results = {}

        def loop(name, code):
            t0 = time.monotonic()
            status, body = self.d.rpc("Run", js(code, timeout_ms=1000))
            results[name] = (status, body, time.monotonic() - t0)

        ts = [threading.Thread(target=loop, args=kv) for kv in loops.items()]
        for t in ts:
            t.start()
        time.sleep(0.2)
        # The fourth slot keeps answering while three guests loop: count the
        # answers that came back with all three loops still running (no
        # rate: on a loaded machine a run can take a good part of the
        # loops' second).
        answered = 0
        t0 = time.monotonic()
        while all(t.is_alive() for t in ts) and time.monotonic() - t0 < 10:
            out = self.run_js("console.log(2)")["stdout"]
            if out == "2\n" and all(t.is_alive() for t in ts):
                answered += 1
        for t in ts:
            t.join()
        self.assertGreaterEqual(answered, 2)
        for name, (status, body, secs) in results.items():
            with self.subTest(name):
                self.assertEqual(status, 200, body)
                self.assertTrue(body["timed_out"], body)
                self.assertEqual(body["exit_code"], 124)
                self.assertEqual(body["outcome"], "timed_out")
                # A correctness bound on the deadline, not a speed claim.
                self.assertLess(secs, 1.0 + 1.5, name)

    def test_memory_cap(self):
        body = self.run_js("const b = new ArrayBuffer(1024 * 1024 * 1024); console.log('got it')",
                           memory_mb=64)
        self.assertTrue(body["out_of_memory"], body)
        self.assertEqual(body["exit_code"], 1)
        self.assertEqual(body["stdout"], "")
        self.assertIn("64 MiB", body["detail"])

    def test_memory_mb_above_allowance_refused(self):
        status, body = self.d.rpc("Run", js("1", memory_mb=129))
        self.assertRefusal(status, body, 400, "INVALID_REQUEST")

    def test_output_flood_truncated(self):
        body = self.run_js("for (let i = 0; i < 100000; i++) console.log('line ' + i)")
        self.assertTrue(body["stdout_truncated"])
        self.assertFalse(body["stderr_truncated"])
        self.assertEqual(len(body["stdout"].encode()), 4096)
        expected = "".join("line %d\n" % i for i in range(1000))
        self.assertEqual(body["stdout"], expected[:4096])

    def test_floor(self):
        status, body = self.d.rpc("Run", js("console.log(1)", minimum_isolation="container"))
        self.assertRefusal(status, body, 400, "INSUFFICIENT_ISOLATION")
        body = self.run_js("console.log(1)", minimum_isolation="process")
        self.assertEqual(body["stdout"], "1\n")

    def test_floor_refusal_runs_nothing(self):
        before = self.runs_total()
        for tier in ("container", "kernel", "vm"):
            self.d.rpc("Run", js("console.log(1)", minimum_isolation=tier))
        self.assertEqual(self.runs_total(), before)

    def runs_total(self):
        _, _, data = self.d.request(
            "GET", "/metrics", headers={"Authorization": "Bearer " + self.d.keys["alice"]})
        return sum(int(l.split()[-1]) for l in data.decode().splitlines()
                   if l.startswith("plimsoll_runs_total{"))

    def test_unsupported_kinds(self):
        status, body = self.d.rpc("Run", {"snippet": {"language": "python", "code": "print(1)"}})
        self.assertRefusal(status, body, 501, "UNSUPPORTED")
        status, body = self.d.rpc("Run", {"project": {"steps": [{"argv": ["true"]}]}})
        self.assertRefusal(status, body, 501, "UNSUPPORTED")

    def test_timeout_limit(self):
        status, body = self.d.rpc("Run", js("1", timeout_ms=60001))
        self.assertRefusal(status, body, 400, "INVALID_REQUEST")

    def test_randomness_and_clocks_keep_the_workers(self):
        # Math.random is seeded per run from the worker's getrandom, Date
        # reads the clock (clock_time_get): every host call the guest can make stays inside the worker's
        # seccomp list, so no worker is killed and replaced.
        before = children(self.d.proc.pid)
        body = self.run_js(
            "const a = Array.from({length: 8}, Math.random);"
            "console.log(a.every(x => x >= 0 && x < 1), new Set(a).size > 1,"
            " Date.now() > 1.6e12, isNaN(new Date().getTime()), new Date(0).toISOString())")
        self.assertEqual((body["exit_code"], body["stdout"]),
                         (0, "true true true false 1970-01-01T00:00:00.000Z\n"), body)
        self.assertEqual(children(self.d.proc.pid), before)


class WasmImage(ClassDaemon, unittest.TestCase):
    """Every run starts from the engine's image, on the one worker here:
    nothing a run does, however it ends, reaches the next."""
    DAEMON_ENV = dict(WASM, SANDBOX_MAX_CONCURRENT="1", SANDBOX_PER_KEY_CONCURRENT="1",
                      SANDBOX_MEMORY_MB="256", SANDBOX_TOTAL_MEMORY_MB="256",
                      SANDBOX_RATE_PER_MIN="100000", SANDBOX_RATE_BURST="10000")

    PROBE = ("console.log(JSON.stringify([typeof leak, ({}).p, [5, 6].at(-1), typeof JSON,"
             " Object.isFrozen(Object.prototype), typeof console.log, plimsoll.hasGrant,"
             " typeof structuredClone, Math.random === Math.random && typeof Math.random()]))")
    CLEAN = ["undefined", None, 6, "object", False, "function", False, "function", "number"]

    def run_js(self, code, **extra):
        status, body = self.d.rpc("Run", js(code, **extra))
        self.assertEqual(status, 200, body)
        return body

    def assertClean(self):
        body = self.run_js(self.PROBE)
        self.assertEqual((body["exit_code"], json.loads(body["stdout"])), (0, self.CLEAN), body)

    def worker(self):
        def exe(pid):
            return os.path.basename(os.readlink("/proc/%d/exe" % pid))
        kids = [k for k in children(self.d.proc.pid) if exe(k) == "plimsoll-js-worker"]
        self.assertEqual(len(kids), 1, kids)
        return kids[0]

    def test_no_state_survives_any_ending(self):
        spoil = ("globalThis.leak = 1; Object.prototype.p = 2; Array.prototype.at = () => 0;"
                 " delete globalThis.JSON; console.log = null; globalThis.structuredClone = 1;"
                 " Math.random = () => 7; Object.freeze(Object.prototype);")
        endings = {
            "completed": spoil,
            "uncaught": spoil + " throw new Error('x')",
            "rejected": spoil + " Promise.reject(1)",
            "timed out": spoil + " for (;;) {}",
            "out of memory": spoil + " const a = []; for (;;) a.push(new Array(1e5).fill(1))",
            "grew memory then completed": spoil + " globalThis.big = new Uint8Array(64 << 20);",
        }
        pid = self.worker()
        self.assertClean()
        for name, code in endings.items():
            with self.subTest(name):
                extra = {"timeout_ms": 300} if name == "timed out" else {}
                if name == "out of memory":
                    extra = {"memory_mb": 32}
                self.run_js(code, **extra)
                self.assertClean()
        # The same worker served every run: no respawn hid a leak.
        self.assertEqual(self.worker(), pid)

    def test_memory_a_run_grew_is_not_the_next_runs(self):
        # A run grows its memory to 200 MiB; the next, capped at 16 MiB,
        # still cannot pass its own cap, and its fresh allocation reads zero.
        self.run_js("globalThis.big = new Uint8Array(200 << 20).fill(0xab)")
        body = self.run_js("const b = new Uint8Array(12 << 20); console.log(b.every(x => x === 0))",
                           memory_mb=16)
        self.assertEqual(body["stdout"], "true\n", body)
        body = self.run_js("const b = new Uint8Array(32 << 20); console.log('got it')",
                           memory_mb=16)
        self.assertTrue(body["out_of_memory"], body)
        self.assertClean()

    def test_math_random_differs_between_runs(self):
        # Made once, the image would give every run QuickJS's one seed;
        # each run gets its own.
        firsts = {self.run_js("console.log(Math.random())")["stdout"] for _ in range(8)}
        self.assertEqual(len(firsts), 8, firsts)

    def test_a_cap_below_the_image_makes_its_own_engine(self):
        # 1 MiB is below the image (and below what the engine needs at
        # all): the run makes a fresh engine at its cap, fails as out of
        # memory, and the image serves the next run as before.
        pid = self.worker()
        body = self.run_js("console.log(1)", memory_mb=1)
        self.assertTrue(body["out_of_memory"], body)
        self.assertIn("below what the engine needs to start", body["stderr"])
        self.assertClean()
        self.assertEqual(self.worker(), pid)

    def test_a_grant_is_the_runs_own(self):
        # hasGrant is set per run on the image's plimsoll object: read-only.
        body = self.run_js("'use strict'; try { plimsoll.hasGrant = true; } catch (e)"
                           " { console.log(e.name); } console.log(plimsoll.hasGrant)")
        self.assertEqual(body["stdout"], "TypeError\nfalse\n", body)
        self.assertClean()


class WasmModules(ClassDaemon, unittest.TestCase):
    """WASI modules, built by the test build from tests/wasi/modules."""
    DAEMON_ENV = dict(WASM, SANDBOX_OUTPUT_BYTES="4096")

    def run_module(self, name, **extra):
        m = module(built_module(name), **extra.pop("module", {}))
        m.update(extra)
        return self.d.rpc("Run", m)

    def test_prints_its_args(self):
        status, body = self.run_module("args", module={"args": ["one", "two words"]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0)
        self.assertIn("argv[0]=module\nargv[1]=one\nargv[2]=two words\n", body["stdout"])
        self.assertEqual(body["isolation"], "process")

    def test_stdin(self):
        status, body = self.run_module("echo", module={"stdin": "round trip\n"})
        self.assertEqual(body["stdout"], "round trip\n")

    def test_exit_code_is_a_result(self):
        status, body = self.run_module("exit3")
        self.assertEqual((status, body["exit_code"]), (200, 3))

    def test_trap_is_a_result(self):
        status, body = self.run_module("trap")
        self.assertEqual(status, 200)
        self.assertEqual(body["exit_code"], 1)
        self.assertIn("plimsoll: module trapped", body["stderr"])
        self.assertIn("trapped", body["detail"])

    def test_loop_stopped_at_deadline(self):
        t0 = time.monotonic()
        status, body = self.run_module("loop", timeout_ms=500)
        secs = time.monotonic() - t0
        self.assertEqual(status, 200, body)
        self.assertTrue(body["timed_out"])
        self.assertEqual(body["exit_code"], 124)
        self.assertLess(secs, 0.5 + 1.5)  # a bound on the deadline, not a speed claim
        # The pool replaced the worker: the next module runs.
        self.assertEqual(self.run_module("exit3")[1]["exit_code"], 3)

    def test_memory_cap(self):
        status, body = self.run_module("grow", memory_mb=64)
        self.assertEqual(status, 200, body)
        import re
        m = re.search(r"memory.grow returned -1 at (\d+) pages", body["stdout"])
        self.assertIsNotNone(m, body["stdout"])
        pages = int(m.group(1))
        # 64 MiB is 1024 pages; growth is in 16-page steps from the initial size.
        self.assertLessEqual(pages, 1024)
        self.assertGreater(pages, 1024 - 16)

    def test_output_truncated(self):
        status, body = self.run_module("flood")
        self.assertTrue(body["stdout_truncated"])
        self.assertEqual(len(body["stdout"].encode()), 4096)

    def test_invalid_modules_refused(self):
        for name in ("garbage", "envfoo", "nostart"):
            with self.subTest(name):
                status, body = self.run_module(name)
                self.assertEqual(status, 400, body)
                info, _ = error_info(body)
                self.assertEqual(info["reason"], "INVALID_REQUEST")
                self.assertEqual(info["metadata"]["dispatched"], "false")

    def run_bytes(self, wasm, **fields):
        return self.d.rpc("Run", module(wasm, **fields))

    def assertRefused(self, status, body, message):
        self.assertEqual(status, 400, body)
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                         ("INVALID_REQUEST", "false"))
        self.assertIn(message, body["message"])

    def test_exit_status_is_always_the_result(self):
        # Any u32 given to proc_exit is the result, as the int32 exit_code
        # (two's complement: 2^31.. read negative), with its output and a
        # record; 4294966296 is -1000, the status that once meant "refused".
        for status_u32 in (0, 1, 3, 124, 126, 127, 255, 256, 2**31 - 1, 2**31,
                           2**32 - 1000, 2**32 - 1):
            with self.subTest(status_u32):
                req = module(built_module("exitcode"), args=[str(status_u32)])
                status, body = self.d.rpc("Run", req)
                self.assertEqual(status, 200, body)
                want = status_u32 - 2**32 if status_u32 >= 2**31 else status_u32
                line = "exit %d\n" % status_u32
                self.assertEqual((body["exit_code"], body["stdout"], body["stderr"]),
                                 (want, line, line))
                self.assertEqual((body["outcome"], body["timed_out"]), ("completed", False))
                rec = body.pop("record")
                self.assertEqual(rec["request_sha256"], sha(req))
                self.assertEqual(rec["response_sha256"], sha(body))

    def test_every_wasi_call_works_or_returns_its_errno(self):
        # wasicalls calls all 46 preview 1 functions (random_get and
        # clock_res_get on every clock among them); none ends the worker.
        with open(os.path.join(os.path.dirname(HERE), "wasi", "modules", "wasicalls.out")) as f:
            want = f.read()
        before = children(self.d.proc.pid)
        status, body = self.run_module("wasicalls", module={"stdin": "in"})
        self.assertEqual(status, 200, body)
        self.assertEqual((body["exit_code"], body["stdout"], body["stderr"]), (7, want, ""))
        self.assertEqual(children(self.d.proc.pid), before)

    def test_c_programs_with_randomness_and_clocks(self):
        # Built here by clang-14 against wasi-libc (tests/wasi/modules).
        status, body = self.run_module("entropy")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body["stdout"])
        self.assertNotIn("FAILED", body["stdout"])
        self.assertEqual(len(body["stdout"].splitlines()), 12)
        self.assertIn("clock_getres(process cputime) in (0, 1 s]: ok\n", body["stdout"])
        self.assertIn("getentropy 256 bytes, twice, differ: ok\n", body["stdout"])
        # A hash table keyed by SipHash under a seed from random_get: the
        # same answers under two different seeds.
        n = 2000
        kept = [i for i in range(n) if i % 3]
        want = ("inserted %d, found %d, sum %d, absent keys found 0\n"
                "after deleting every third key: found %d, sum %d\n"
                % (n, n, sum(i * i for i in range(n)), len(kept), sum(i * i for i in kept)))
        seeds = []
        for _ in range(2):
            status, body = self.run_module("hashtable", timeout_ms=20000)
            self.assertEqual(status, 200, body)
            self.assertEqual((body["exit_code"], body["stdout"]), (0, want), body)
            self.assertRegex(body["stderr"], r"^seed [0-9a-f]{32}\n$")
            seeds.append(body["stderr"])
        self.assertNotEqual(seeds[0], seeds[1])

    def test_module_bounds_at_and_past(self):
        # Each bound: a module at it runs; one past it is refused before
        # dispatch, naming the bound.
        for bound, (at, past) in wasmgen.EDGES.items():
            with self.subTest(bound):
                status, body = self.run_bytes(wasmgen.build(**at))
                self.assertEqual((status, body.get("exit_code")), (200, 0), body)
                status, body = self.run_bytes(wasmgen.build(**past))
                self.assertRefused(status, body, wasmgen.REASONS[bound])

    def test_a_million_functions_refused_before_the_worker_allocates(self):
        before = children(self.d.proc.pid)
        status, body = self.run_bytes(wasmgen.build(funcs=1000000))
        self.assertRefused(status, body,
                           "module has 1000000 functions (imported and defined); at most 100000")
        # Refused by the counting pass: the worker that said so still serves.
        self.assertEqual(children(self.d.proc.pid), before)
        self.assertEqual(self.run_module("exit3")[1]["exit_code"], 3)

    def test_value_stack_exhaustion_is_a_result(self):
        # opstack keeps 20000 operands live per frame; wabt grows its value
        # stack until the worker's address-space cap stops it.  A result,
        # not an infrastructure error; the worker is replaced after it.
        status, body = self.run_module("opstack", timeout_ms=30000)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 1)
        if SANITIZED:  # no address-space cap under ASan: the call depth ends it
            self.assertTrue(body["out_of_memory"] or "trapped" in body["stderr"], body)
        else:
            self.assertTrue(body["out_of_memory"], body)
            self.assertEqual(body["stderr"],
                             "plimsoll: module stopped: the interpreter ran out of host memory\n")
            self.assertIn("host memory", body["detail"])
        self.assertEqual(self.run_module("exit3")[1]["exit_code"], 3)


class WasmAdmission(unittest.TestCase):
    def test_at_capacity_while_runs_in_flight(self):
        d = Daemon(env=dict(WASM, SANDBOX_MAX_CONCURRENT="2",
                            SANDBOX_PER_KEY_CONCURRENT="2")).start()
        try:
            done = []
            ts = [threading.Thread(target=lambda: done.append(
                d.rpc("Run", js("for(;;){}", timeout_ms=1500)))) for _ in range(2)]
            for t in ts:
                t.start()
            time.sleep(0.4)
            status, body = d.rpc("Run", js("console.log(1)"), principal="bob")
            self.assertEqual(status, 429, body)
            info, _ = error_info(body)
            self.assertEqual(info["reason"], "AT_CAPACITY")
            self.assertEqual(info["metadata"]["dispatched"], "false")
            for t in ts:
                t.join()
            self.assertEqual([s for s, _ in done], [200, 200])
            # Slots come back.
            self.assertEqual(d.rpc("Run", js("console.log(1)"), principal="bob")[0], 200)
        finally:
            d.stop()

    def test_per_caller_cap(self):
        d = Daemon(env=dict(WASM, SANDBOX_MAX_CONCURRENT="4",
                            SANDBOX_PER_KEY_CONCURRENT="1")).start()
        try:
            t = threading.Thread(target=lambda: d.rpc("Run", js("for(;;){}", timeout_ms=1500)))
            t.start()
            time.sleep(0.4)
            status, body = d.rpc("Run", js("console.log(1)"))
            self.assertEqual(status, 429)
            self.assertEqual(error_info(body)[0]["reason"], "AT_CAPACITY")
            status, body = d.rpc("Run", js("console.log(1)"), principal="bob")
            self.assertEqual(status, 200, body)
            t.join()
        finally:
            d.stop()

    def test_rate_limited(self):
        d = Daemon(env=dict(WASM, SANDBOX_RATE_PER_MIN="60", SANDBOX_RATE_BURST="3")).start()
        try:
            for _ in range(3):
                self.assertEqual(d.rpc("Run", js("console.log(1)"))[0], 200)
            status, body = d.rpc("Run", js("console.log(1)"))
            self.assertEqual(status, 429)
            info, _ = error_info(body)
            self.assertEqual(info["reason"], "RATE_LIMITED")
            self.assertEqual(info["metadata"]["dispatched"], "false")
            # Another caller has its own bucket.
            self.assertEqual(d.rpc("Run", js("console.log(1)"), principal="bob")[0], 200)
        finally:
            d.stop()


class WasmLifecycle(unittest.TestCase):
    def test_startup_refusals(self):
        code, err = run_startup(dict(WASM, SANDBOX_MIN_ISOLATION="container"))
        self.assertEqual(code, 2)
        self.assertIn("plimsolld: SANDBOX_MIN_ISOLATION", err)
        code, err = run_startup(dict(WASM, SANDBOX_WASM_WORKER_DIR="/nonexistent"))
        self.assertEqual(code, 2)
        self.assertIn("plimsolld: SANDBOX_WASM_WORKER_DIR", err)

    def test_readiness_follows_the_worker(self):
        tmp = tempfile.mkdtemp()
        worker = os.path.join(tmp, "plimsoll-js-worker")
        shutil.copy2(os.path.join(BUILD, "plimsoll-js-worker"), worker)
        shutil.copy2(os.path.join(BUILD, "plimsoll-wasi-worker"), tmp)
        d = Daemon(env=dict(WASM, SANDBOX_WASM_WORKER_DIR=tmp)).start()
        try:
            self.assertEqual(d.request("GET", "/readyz")[0], 200)
            os.rename(worker, worker + ".away")
            status, _, text = d.request("GET", "/readyz")
            self.assertEqual(status, 503)
            self.assertIn(b"not ready", text)
            status, body = d.rpc("Run", js("console.log(1)"))
            self.assertEqual(status, 503)
            self.assertEqual(error_info(body)[0]["reason"], "NOT_READY")
            status, body = d.rpc("Describe", {})
            self.assertFalse(body["ready"])
            os.rename(worker + ".away", worker)
            self.assertEqual(d.request("GET", "/readyz")[0], 200)
            self.assertEqual(d.rpc("Run", js("console.log(1)"))[0], 200)
        finally:
            d.stop()

    def test_sigterm_drains_in_flight_run(self):
        d = Daemon(env=WASM).start()
        out = []
        t = threading.Thread(target=lambda: out.append(
            d.rpc("Run", js("for(;;){}", timeout_ms=1500))))
        t.start()
        time.sleep(0.4)
        d.proc.send_signal(signal.SIGTERM)
        t.join()
        self.assertEqual(d.proc.wait(10), 0)
        d.stop()
        status, body = out[0]
        self.assertEqual(status, 200, body)
        self.assertTrue(body["timed_out"])
        lines = d.log_lines()
        drain = [l for l in lines if l.get("msg") == "draining"][0]
        self.assertEqual(drain["in_flight"], 1)

    def test_soak_flat_memory_fds_threads(self):
        d = Daemon(env=dict(WASM, SANDBOX_RATE_PER_MIN="1000000",
                            SANDBOX_RATE_BURST="1000000")).start()
        try:
            c = d.connection()
            body = json.dumps(js("console.log(1+1)")).encode()

            def batch(n):
                for _ in range(n):
                    status, resp = d.rpc("Run", None, raw=body, conn=c)
                    assert status == 200 and resp["stdout"] == "2\n", resp

            batch(300)  # warm up: allocator arenas, connection thread
            rss0, fds0, thr0 = proc_stats(d.proc.pid)
            batch(3000)
            rss1, fds1, thr1 = proc_stats(d.proc.pid)
            c.close()
            print("\nsoak: daemon RSS %d -> %d KiB, fds %d -> %d, threads %d -> %d"
                  % (rss0, rss1, fds0, fds1, thr0, thr1), file=sys.stderr)
            self.assertEqual(fds1, fds0)
            self.assertEqual(thr1, thr0)
            if not SANITIZED:  # ASan's quarantine keeps freed memory on purpose
                self.assertLess(rss1, rss0 * 1.05 + 512)
        finally:
            d.stop()


class WasmCli(unittest.TestCase):
    def test_cli(self):
        d = Daemon(env=WASM).start()
        try:
            env = {"PLIMSOLL_URL": "http://127.0.0.1:%d" % d.port,
                   "PLIMSOLL_KEY": d.keys["alice"]}

            def cli(*args):
                p = subprocess.run([CLI] + list(args), env=env, capture_output=True, timeout=60)
                return p.returncode, p.stdout.decode(), p.stderr.decode()

            self.assertEqual(cli("run", "console.log('hi')"), (0, "hi\n", ""))
            code, _, err = cli("run", "throw new Error('x')")
            self.assertEqual(code, 1)
            self.assertIn("exit code 1 (isolation: process)", err)
            code, _, err = cli("run", "--floor", "kernel", "1")
            self.assertEqual(code, 3)
            self.assertIn("INSUFFICIENT_ISOLATION", err)
            code, out, _ = cli("run", "--json", "--floor", "process", "console.log(5)")
            self.assertEqual(code, 0)
            self.assertEqual(json.loads(out)["stdout"], "5\n")
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
