# SPDX-License-Identifier: Apache-2.0
"""What every hostile suite (tests/hostile) asks of its daemon: a typed
result or refusal for each payload, and after the class a daemon that is
ready with its descriptor and thread counts back where they started (the
Hostile mixin), with a wasm daemon or a docker one."""
import time

from .docker import DockerDaemon, ours
from .harness import Daemon, error_info
from .procs import proc_counts


class Hostile:
    """Mixin: self.d is the daemon; run() sends one payload.  setUpClass
    starts cls.d, then calls cls.baseline()."""

    @classmethod
    def baseline(cls):
        """The daemon's counts that tearDownClass expects back."""
        cls.fds0, cls.threads0 = proc_counts(cls.d.proc.pid)

    def result(self, msg):
        status, body = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, body)  # a result, never an infrastructure error
        return body

    def refusal(self, msg, reason):
        status, body = self.d.rpc("Run", msg)
        self.assertNotEqual(status, 200, body)
        self.assertEqual(error_info(body)[0]["reason"], reason)
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false")

    @classmethod
    def tearDownClass(cls):
        d = cls.d
        try:
            assert d.request("GET", "/readyz")[0] == 200, "not ready after the hostile suite"
            # Background work (the docker reaper and warm pool) holds a socket
            # while it talks to the engine: give it a moment to settle.
            deadline = time.monotonic() + 15
            while True:
                fds, threads = proc_counts(d.proc.pid)
                if (fds <= cls.fds0 + 2 and threads <= cls.threads0 + 2) or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert fds <= cls.fds0 + 2 and threads <= cls.threads0 + 2, \
                "fds %d->%d threads %d->%d" % (cls.fds0, fds, cls.threads0, threads)
        finally:
            d.stop()


class HostileWasmDaemon(Hostile):
    """Hostile, with a wasm-provider daemon: 4 KiB of output, 64 MiB a run."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "SANDBOX_OUTPUT_BYTES": "4096",
                            "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "10000",
                            "SANDBOX_MEMORY_MB": "64", "SANDBOX_TOTAL_MEMORY_MB": "512"}).start()
        cls.baseline()


class HostileDockerDaemon(Hostile, DockerDaemon):
    """Hostile, with DockerDaemon's daemon (per_runtime sets RUNTIME; a
    subclass sets INSTANCE); after the class no container of the instance
    is left either."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.baseline()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert ours(cls.instance) == [], "containers left behind"
