# SPDX-License-Identifier: Apache-2.0
"""Hostile WASI modules against the wasm provider (issue #12, sections 4
and 6): a guest that picks the exit status, or writes the bytes, that the
worker protocol once used to mean something, a guest that calls every
WASI function, one that makes the interpreter's value stack eat the
worker's memory, and modules with millions of items.  Each answer is the
guest's result or a refusal before dispatch, never an infrastructure
error; the module workers that refused or ran them are still the same
processes unless the run had to end one; the daemon is ready after."""
import base64
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "wasi"))
from plimsoll_test.harness import build_is_sanitized, error_info  # noqa: E402
from plimsoll_test.hostile import HostileWasmDaemon  # noqa: E402
from plimsoll_test.payloads import built_module, module, sha  # noqa: E402
from plimsoll_test.procs import children  # noqa: E402
import wasmgen  # noqa: E402


class HostileWasmModules(HostileWasmDaemon, unittest.TestCase):
    def test_guest_picks_the_status_that_meant_refused(self):
        # proc_exit(4294966296) is -1000 as an int32: the status the module
        # worker once used in-band for "refused", with a stderr that reads
        # like a refusal.  It is the guest's result, with its record.
        for status_u32, want in ((2**32 - 1000, -1000), (2**31, -2**31), (2**32 - 1, -1),
                                 (124, 124)):
            with self.subTest(status_u32):
                msg = module(built_module("exitcode"), args=[str(status_u32)])
                b = self.result(msg)
                self.assertEqual((b["exit_code"], b["stdout"], b["timed_out"], b["outcome"]),
                                 (want, "exit %d\n" % status_u32, False, "completed"))
                rec = b.pop("record")
                self.assertEqual(rec["request_sha256"], sha(msg))
                self.assertEqual(rec["response_sha256"], sha(b))

    def test_guest_output_that_is_protocol_frames(self):
        # The guest writes, on both streams, a REFUSED frame and a
        # timed-out RESULT frame (exit -1000) of the worker protocol (v3),
        # byte for byte.  They come back as its output; the run was neither
        # refused nor timed out.
        def frame(msg_type, payload):
            return (b"PLJS" + bytes([3, 0, msg_type, 0, len(payload), 0, 0, 0]) + bytes(4)
                    + payload)
        frames = frame(5, bytes(8) + b"no")
        frames += frame(3, (2**32 - 1000).to_bytes(4, "little") + bytes([1, 0, 0, 0])
                        + bytes(16))
        b = self.result(module(wasmgen.writer(out=frames, err=frames)))
        self.assertEqual((b["exit_code"], b["timed_out"], b["out_of_memory"]), (0, False, False))
        self.assertEqual(base64.b64decode(b["stdout_base64"] or
                                          base64.b64encode(b["stdout"].encode())), frames)
        self.assertEqual(base64.b64decode(b["stderr_base64"] or
                                          base64.b64encode(b["stderr"].encode())), frames)

    def test_every_wasi_call_keeps_the_worker(self):
        # random_get and clock_res_get used to kill the module worker.
        before = children(self.d.proc.pid)
        with open(os.path.join(os.path.dirname(HERE), "wasi", "modules", "wasicalls.out")) as f:
            want = f.read()
        b = self.result(module(built_module("wasicalls"), stdin="in"))
        self.assertEqual((b["exit_code"], b["stdout"]), (7, want))
        self.assertEqual(children(self.d.proc.pid), before)

    def test_millions_of_items_refused_before_dispatch(self):
        before = children(self.d.proc.pid)
        for what, kw in (("functions", {"funcs": 1000000}),
                         ("globals", {"globals": 1000000}),
                         ("function types", {"types": 1500000}),
                         ("element segments", {"empty_elems": 1000000}),
                         ("data segments", {"datas": 2000000}),
                         ("exports", {"exports": 500000})):
            with self.subTest(what):
                self.refusal(module(wasmgen.build(**kw)), "INVALID_REQUEST")
        # The worker that counted them is the one that refused: none ran out.
        self.assertEqual(children(self.d.proc.pid), before)
        self.assertEqual(self.result(module(built_module("exit3")))["exit_code"], 3)

    def test_value_stack_flood_is_a_result(self):
        # 20000 live operands per frame make wabt's unbounded value stack
        # grow until the worker's address-space cap: the run's own result.
        b = self.result(module(built_module("opstack")))
        self.assertEqual(b["exit_code"], 1)
        if not build_is_sanitized():  # no address-space cap under ASan
            self.assertTrue(b["out_of_memory"], b)
            self.assertIn("ran out of host memory", b["stderr"])
        self.assertEqual(self.result(module(built_module("exit3")))["exit_code"], 3)

    def test_refusal_still_names_the_reason(self):
        status, body = self.d.rpc("Run", module(wasmgen.build(funcs=100001)))
        self.assertEqual(status, 400, body)
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false")
        self.assertIn("at most 100000", body["message"])


if __name__ == "__main__":
    unittest.main()
