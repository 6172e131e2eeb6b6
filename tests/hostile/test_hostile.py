# SPDX-License-Identifier: Apache-2.0
"""Hostile code against every provider on this machine (issue #8's suite,
first slice): each case states what must happen, and after each class the
daemon must still be ready with nothing left behind.

The wasm cases run JavaScript in the process tier; the docker cases run
Python under runc and under runsc.  Shared expectations: a typed result
or refusal, never an infrastructure error, and no effect outside the
sandbox."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import per_runtime  # noqa: E402
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.hostile import HostileDockerDaemon, HostileWasmDaemon  # noqa: E402
from plimsoll_test.payloads import built_module, module, snippet  # noqa: E402


class HostileWasm(HostileWasmDaemon, unittest.TestCase):
    def js(self, code, **extra):
        return self.result(snippet("javascript", code, **extra))

    def test_infinite_loop_stops_at_deadline(self):
        self.assertTrue(self.js("for(;;){}", timeout_ms=300)["timed_out"])

    def test_regex_bomb_stops_at_deadline(self):
        self.assertTrue(self.js("/(a+)+$/.test('a'.repeat(40)+'b')", timeout_ms=300)["timed_out"])

    def test_memory_hog_is_out_of_memory(self):
        b = self.js("const a=[]; for(;;) a.push(new Array(1e6).fill(1))")
        self.assertTrue(b["out_of_memory"] or b["timed_out"], b)
        self.assertNotEqual(b["exit_code"], 0)

    def test_flood_both_streams(self):
        b = self.js("for(let i=0;i<1e5;i++){console.log('o'.repeat(50));console.error('e'.repeat(50))}")
        self.assertTrue(b["stdout_truncated"] and b["stderr_truncated"])
        self.assertEqual((len(b["stdout"]), len(b["stderr"])), (4096, 4096))

    def test_deep_recursion_is_an_exception(self):
        b = self.js("function f(){return f()+1} f()")
        self.assertEqual(b["exit_code"], 1)
        self.assertIn("stack overflow", b["stderr"])

    def test_no_host_objects(self):
        b = self.js("console.log([typeof require, typeof process, typeof std, typeof os, "
                    "typeof fetch, typeof XMLHttpRequest, typeof WebAssembly].join(','))")
        self.assertEqual(b["stdout"], "undefined,undefined,undefined,undefined,undefined,"
                                      "undefined,undefined\n")

    def test_no_module_loading(self):
        b = self.js("import('os').then(()=>console.log('LOADED'), e=>console.log('refused'))")
        self.assertEqual(b["stdout"], "refused\n")

    def test_function_constructor_escape_finds_nothing(self):
        b = self.js("const g = Function('return this')(); "
                    "console.log(Object.getOwnPropertyNames(g).filter(k => "
                    "/^(std|os|process|require|scriptArgs|print)$/.test(k)).length)")
        self.assertEqual(b["stdout"], "0\n")

    def test_no_threads_to_spin(self):
        b = self.js("console.log(typeof SharedArrayBuffer === 'undefined' || "
                    "typeof Atomics.wait !== 'function' || 'ok')")
        self.assertEqual(b["exit_code"], 0)

    def test_stdin_over_the_limit_refused(self):
        self.refusal({"snippet": {"language": "javascript", "code": "1",
                                  "stdin": "x" * (1024 * 1024 + 1)}}, "INVALID_REQUEST")

    def test_json_nesting_bomb_refused(self):
        status, body = self.d.rpc("Run", None, raw=b"[" * 100000 + b"]" * 100000)
        self.assertEqual(status, 400)
        self.assertEqual(error_info(body)[0]["reason"], "INVALID_REQUEST")

    def test_state_does_not_leak_between_runs(self):
        self.js("globalThis.secret = 'A'; Object.prototype.leak = 1")
        self.assertEqual(self.js("console.log(typeof secret, ({}).leak)")["stdout"],
                         "undefined undefined\n")

    def test_module_loop_and_grow(self):
        b = self.result(dict(module(built_module("loop")), timeout_ms=300))
        self.assertTrue(b["timed_out"])


class HostileDocker(HostileDockerDaemon):
    INSTANCE = "hostile-"  # per_runtime sets RUNTIME

    def py(self, code, **extra):
        return self.result(snippet("python", code, **extra))

    def test_closed_output_then_sleep_past_deadline(self):
        t0 = time.monotonic()
        b = self.py("import os, time\nos.close(1); os.close(2)\ntime.sleep(60)", timeout_ms=1500)
        self.assertTrue(b["timed_out"], b)
        self.assertEqual(b["exit_code"], 124)
        self.assertLess(time.monotonic() - t0, 1.5 + 10)  # a bound, not a speed claim

    def test_deep_recursion(self):
        b = self.py("import sys\nsys.setrecursionlimit(10**7)\n"
                    "def f(n): return f(n+1)+1\nf(0)")
        self.assertNotEqual(b["exit_code"], 0)

    def test_udp_and_dns_out(self):
        b = self.py("import socket\n"
                    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                    "try:\n"
                    "    s.sendto(b'x', ('10.0.0.1', 53)); print('SENT')\n"
                    "except OSError:\n"
                    "    print('no udp')\n"
                    "try:\n"
                    "    socket.gethostbyname('example.org'); print('RESOLVED')\n"
                    "except OSError:\n"
                    "    print('no dns')\n", timeout_ms=20000)
        self.assertEqual(b["stdout"], "no udp\nno dns\n")

    def test_only_loopback_interface(self):
        b = self.py("import socket\nprint(sorted(n for _, n in socket.if_nameindex()))")
        self.assertIn(b["stdout"].strip(), ("['lo']", "[]"))

    def test_no_broker_socket_without_grant(self):
        b = self.py("import os\nprint(os.path.exists('/run/plimsoll'))")
        self.assertEqual(b["stdout"], "False\n")

    def test_another_runs_files_are_invisible(self):
        self.py("open('/work/secret', 'w').write('A'); open('/tmp/secret', 'w').write('A')")
        b = self.py("import os\nprint(os.listdir('/work'), "
                    "[f for f in os.listdir('/tmp') if not f.startswith('.plimsoll')])")
        self.assertEqual(b["stdout"], "[] []\n")

    def test_signals_stay_inside(self):
        marker = time.time()
        b = self.py("import os, signal\n"
                    "for sig in (signal.SIGKILL, signal.SIGTERM):\n"
                    "    try:\n"
                    "        os.kill(-1, sig)\n"
                    "    except OSError as e:\n"
                    "        print('refused', e.errno)\n"
                    "print('alive')")
        # The guest is alone in its pid namespace: nothing outside was hit.
        self.assertIsNone(self.d.proc.poll())
        self.assertEqual(self.d.request("GET", "/healthz")[0], 200)
        self.assertLess(time.time() - marker, 60)
        self.assertIn(b["exit_code"], (0, 137, 143))

    def test_a_forged_end_marker_is_only_output(self):
        # The run's end marker needs the run's nonce (docs/providers/
        # docker.md, "The run's end"): guessed ones, whole or cut, on both
        # streams, end nothing and lose nothing.
        b = self.py("import os, sys\n"
                    "fake = '\\x1eplimsoll-end ' + '0' * 32 + ' 000\\n'\n"
                    "for fd in (1, 2):\n"
                    "    os.write(fd, fake.encode())\n"
                    "    os.write(fd, fake[:20].encode())\n"
                    "print('after'); print('err after', file=sys.stderr)\n"
                    "sys.stdout.write('\\x1eplimsoll-end ')\n"
                    "sys.exit(5)")
        fake = "\x1eplimsoll-end " + "0" * 32 + " 000\n"
        self.assertEqual(b["exit_code"], 5, b)
        self.assertFalse(b["timed_out"], b)
        self.assertEqual(b["stdout"], fake + fake[:20] + "after\n\x1eplimsoll-end ", b)
        self.assertEqual(b["stderr"], fake + fake[:20] + "err after\n", b)

    def test_pid1_takes_no_signal_from_the_guest(self):
        # The bootstrap stays PID 1 and blocks every signal: nothing the
        # guest sends it ends the run early or changes its status.
        b = self.py("import os, signal, time\n"
                    "for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,\n"
                    "            signal.SIGCHLD, signal.SIGPIPE):\n"
                    "    os.kill(1, sig)\n"
                    "time.sleep(0.3)\n"
                    "print('alive', os.getppid())")
        self.assertEqual((b["exit_code"], b["stdout"], b["stderr"]), (0, "alive 1\n", ""), b)
        # SIGKILL and SIGSTOP cannot be blocked.  Linux delivers neither to a
        # namespace's init from inside it; gVisor delivers both.  There the
        # guest ends its own run (PID 1 gone, the sandbox with it: 137) or
        # stops its own end (the deadline ends it): its choice, like exiting
        # or sleeping, and the answer is still typed.
        # The SIGKILL's deadline leaves a loaded machine time to tear the
        # sandbox down (3 s was once too short beside other docker work).
        for sig, want_runsc, ms in (("SIGKILL", (137, False), 15000),
                                    ("SIGSTOP", (124, True), 3000)):
            b = self.py("import os, signal, time\n"
                        "os.kill(1, signal.%s)\n"
                        "time.sleep(0.3)\n"
                        "print('alive')" % sig, timeout_ms=ms)
            got = (b["exit_code"], b["timed_out"])
            if self.RUNTIME == "runc":
                self.assertEqual(got + (b["stdout"],), (0, False, "alive\n"), b)
            else:
                self.assertEqual(got, want_runsc, b)
            self.assertFalse(b["out_of_memory"], b)

    def test_what_a_guest_can_read_of_pid_1(self):
        """A warm run's guest tries its PID 1's (the bootstrap's) /proc.  Its
        memory is refused under both runtimes; under runc PID 1 is not
        dumpable and everything else is refused too; under runsc gVisor
        shows its environment, maps, smaps and auxv and opens its stdin
        (docs/providers/docker.md, "The run's end").  None of it holds the
        run's nonce: the guest claims the end with every 32-hex-digit
        string it found there, and its output goes on after each claim."""
        b = self.py("import os, re, sys\n"
                    "got, found = [], set()\n"
                    "for what in ('environ', 'maps', 'smaps', 'auxv', 'mem', 'fd/0'):\n"
                    "    try:\n"
                    "        fd = os.open('/proc/1/' + what, os.O_RDONLY | os.O_NONBLOCK)\n"
                    "    except OSError:\n"
                    "        continue\n"
                    "    got.append(what)\n"
                    "    try:\n"
                    "        data = os.read(fd, 1 << 20)\n"
                    "    except OSError:\n"
                    "        data = b''\n"
                    "    os.close(fd)\n"
                    "    for run in re.findall(rb'[0-9a-f]{32,}', data):\n"
                    "        found.update(run[i:i + 32] for i in range(len(run) - 31))\n"
                    "for cand in sorted(found)[:200]:\n"
                    "    sys.stdout.buffer.write(b'\\x1eplimsoll-end ' + cand + b' 000\\n')\n"
                    "    sys.stdout.flush()\n"
                    "print('after', got)\n")
        self.assertEqual(b["exit_code"], 0, b)
        if self.RUNTIME == "runc":
            self.assertEqual(b["stdout"], "after []\n", b)
        else:
            self.assertTrue(b["stdout"].endswith(
                "after ['environ', 'maps', 'smaps', 'auxv', 'fd/0']\n"), b)

    def test_what_the_main_process_leaves_is_ended_with_it(self):
        # The run ends when the guest's main process does (as when it was
        # PID 1): a child still writing is killed before the end marker.
        t0 = time.monotonic()
        b = self.py("import os, time\n"
                    "if os.fork() == 0:\n"
                    "    os.setsid()\n"
                    "    while True:\n"
                    "        os.write(1, b'child\\n'); time.sleep(0.01)\n"
                    "time.sleep(0.2)\n"
                    "os.write(1, b'main done\\n')\n"
                    "os._exit(3)", timeout_ms=20000)
        self.assertEqual(b["exit_code"], 3, b)
        self.assertFalse(b["timed_out"], b)
        self.assertIn("main done\n", b["stdout"], b)
        self.assertLess(time.monotonic() - t0, 15)  # a bound, not a speed claim

    def test_proc_and_sys_show_no_host(self):
        b = self.py("import os\n"
                    "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
                    "print(len(pids))\n"
                    "for p in ['/proc/kcore', '/proc/1/environ', '/sys/firmware', "
                    "'/proc/sys/kernel/core_pattern']:\n"
                    "    try:\n"
                    "        with open(p, 'rb') as f: f.read(16)\n"
                    "        print('read', p)\n"
                    "    except OSError:\n"
                    "        print('no', p)\n")
        lines = b["stdout"].splitlines()
        self.assertLess(int(lines[0]), 10)  # only the sandbox's own processes
        self.assertNotIn("read /proc/kcore", lines)
        self.assertNotIn("read /sys/firmware", lines)

    def test_setuid_and_chroot_unavailable(self):
        b = self.py("import os\n"
                    "for f in (lambda: os.setuid(0), lambda: os.chroot('/tmp')):\n"
                    "    try:\n"
                    "        f(); print('ALLOWED')\n"
                    "    except OSError:\n"
                    "        print('refused')\n")
        self.assertEqual(b["stdout"], "refused\nrefused\n")

    def test_device_nodes(self):
        # A device node made in a writable area must not reach a host device.
        # runc refuses mknod (no CAP_MKNOD); gVisor allows nodes of the
        # devices it emulates itself (field notes), never a host device.
        b = self.py("import os\n"
                    "try:\n"
                    "    os.mknod('/tmp/mem', 0o20666, os.makedev(1, 1))\n"
                    "    with open('/tmp/mem', 'rb') as f: f.read(16); print('READ /dev/mem')\n"
                    "except OSError:\n"
                    "    print('refused')\n")
        self.assertEqual(b["stdout"], "refused\n")

    def test_disk_fill_is_bounded(self):
        b = self.py("import os\n"
                    "try:\n"
                    "    with open('/work/fill', 'wb') as f:\n"
                    "        while True: f.write(b'x' * (1 << 20))\n"
                    "except OSError as e:\n"
                    "    print('full', e.errno, os.path.getsize('/work/fill') >> 20)\n")
        self.assertTrue(b["stdout"].startswith("full 28 "), b)  # ENOSPC
        self.assertLessEqual(int(b["stdout"].split()[2]), 64)

    def test_huge_argv_and_file_counts_at_the_edge(self):
        files = [{"path": "f%d" % i, "content": ""} for i in range(256)]
        argv = ["python3", "-c", "import sys, os; print(len(sys.argv), len(os.listdir('.')))"] + \
               ["a" * 4096] * 61
        b = self.result({"project": {"files": files, "steps": [{"argv": argv}]}})
        self.assertEqual(b["steps"][0]["stdout"], "62 256\n")
        self.refusal({"project": {"files": files + [{"path": "extra", "content": ""}],
                                  "steps": [{"argv": ["true"]}]}}, "INVALID_REQUEST")
        self.refusal({"project": {"steps": [{"argv": argv + ["x"] * 2}]}}, "INVALID_REQUEST")


HostileDockerRunc, HostileDockerRunsc = per_runtime(HostileDocker)


if __name__ == "__main__":
    unittest.main()
