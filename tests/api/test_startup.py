# SPDX-License-Identifier: Apache-2.0
"""Startup refusals: for each bad setting the daemon exits non-zero before
serving, with a message that names the setting."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.harness import Daemon, run_startup  # noqa: E402


class StartupRefusals(unittest.TestCase):
    def refuse(self, env, setting):
        code, err = run_startup(env)
        self.assertEqual(code, 2, err)
        self.assertIn("plimsolld: " + setting, err)
        self.assertIn('"startup refused"', err)

    def test_unknown_provider(self):
        self.refuse({"SANDBOX_PROVIDER": "local-node"}, "SANDBOX_PROVIDER")

    def test_openshell_without_its_gateway(self):
        self.refuse({"SANDBOX_PROVIDER": "openshell"}, "SANDBOX_OPENSHELL_URL")

    def test_malformed_tier(self):
        self.refuse({"SANDBOX_MIN_ISOLATION": "medium"}, "SANDBOX_MIN_ISOLATION")

    def test_provider_below_floor(self):
        self.refuse({"SANDBOX_MIN_ISOLATION": "process"}, "SANDBOX_MIN_ISOLATION")
        self.refuse({"SANDBOX_PROVIDER": "disabled", "SANDBOX_MIN_ISOLATION": "vm"},
                    "SANDBOX_MIN_ISOLATION")

    def test_memory_without_total(self):
        self.refuse({"SANDBOX_MEMORY_MB": "256"}, "SANDBOX_MEMORY_MB")

    def test_total_without_memory(self):
        self.refuse({"SANDBOX_TOTAL_MEMORY_MB": "1024"}, "SANDBOX_TOTAL_MEMORY_MB")

    def test_allowance_above_budget(self):
        self.refuse({"SANDBOX_MEMORY_MB": "512", "SANDBOX_TOTAL_MEMORY_MB": "256"},
                    "SANDBOX_MEMORY_MB")

    def test_runsc_allowance_before_the_engine(self):
        # Refused from the settings alone: no engine answers this socket.
        self.refuse({"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": "runsc",
                     "SANDBOX_MEMORY_MB": "63", "SANDBOX_TOTAL_MEMORY_MB": "1024",
                     "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
                    "SANDBOX_MEMORY_MB: 63 is below 64")

    def test_bad_numbers(self):
        self.refuse({"SANDBOX_MAX_CONCURRENT": "0"}, "SANDBOX_MAX_CONCURRENT")
        self.refuse({"SANDBOX_RATE_PER_MIN": "lots"}, "SANDBOX_RATE_PER_MIN")
        self.refuse({"SANDBOX_PER_KEY_CONCURRENT": "9"}, "SANDBOX_PER_KEY_CONCURRENT")

    def test_bad_instance(self):
        self.refuse({"PLIMSOLL_INSTANCE": "d1/../d2"}, "PLIMSOLL_INSTANCE")
        self.refuse({"PLIMSOLL_INSTANCE": "x" * 64}, "PLIMSOLL_INSTANCE")
        self.refuse({"PLIMSOLL_DRAIN_NOTICE_MS": "soon"}, "PLIMSOLL_DRAIN_NOTICE_MS")

    def test_bad_listen(self):
        self.refuse({"PLIMSOLL_LISTEN": "everywhere"}, "PLIMSOLL_LISTEN")

    def test_keys_file(self):
        self.refuse({"PLIMSOLL_KEYS_FILE": None}, "PLIMSOLL_KEYS_FILE")
        self.refuse({"PLIMSOLL_KEYS_FILE": "/nonexistent/keys"}, "PLIMSOLL_KEYS_FILE")
        d = tempfile.mkdtemp()
        empty = os.path.join(d, "empty")
        with open(empty, "w") as f:
            f.write("# nobody\n")
        self.refuse({"PLIMSOLL_KEYS_FILE": empty}, "PLIMSOLL_KEYS_FILE")
        bad = os.path.join(d, "bad")
        with open(bad, "w") as f:
            f.write("alice not-a-digest\n")
        self.refuse({"PLIMSOLL_KEYS_FILE": bad}, "PLIMSOLL_KEYS_FILE")

    def test_cors_origins(self):
        """PLIMSOLL_CORS_ORIGINS: exact origins only; each refusal names the
        setting and says why."""
        for value, why in (("http://127.0.0.2:8000/", "no path"),
                           ("http://127.0.0.2:8000/app", "no path"),
                           ("*", "wildcard"),
                           ("https://*.example.com", "wildcard"),
                           ("null", "null"),
                           ("127.0.0.2:8000", "not http:// or https://"),
                           ("http://127.0.0.2:99999", "a port"),
                           ("http://a,,http://b", "entry 2 is empty"),
                           ("http://a, HTTP://A:80", "listed twice"),
                           ("http://" + "a" * 250, "longer than 256 bytes"),
                           (",".join("http://h%d" % i for i in range(33)), "more than 32")):
            with self.subTest(value=value[:40]):
                code, err = run_startup({"PLIMSOLL_CORS_ORIGINS": value})
                self.assertEqual(code, 2, err)
                self.assertIn("plimsolld: PLIMSOLL_CORS_ORIGINS: ", err)
                self.assertIn(why, err)
        # The edges: 32 origins, one of 256 bytes.
        longest = "http://" + ".".join(["a" * 60] * 5)[:249]
        self.assertEqual(len(longest), 256)
        d = Daemon(env={"PLIMSOLL_CORS_ORIGINS": ",".join(
            ["http://h%d" % i for i in range(31)] + [longest])}).start()
        self.assertEqual(d.stop(), 0)

    def test_reserved_settings(self):
        self.refuse({"PLIMSOLL_GRANTS_FILE": "/nonexistent/grants.json"}, "PLIMSOLL_GRANTS_FILE")
        self.refuse({"SANDBOX_MAX_SESSIONS": "4"}, "SANDBOX_MAX_SESSIONS")

    def test_good_settings_start(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "", "SANDBOX_MIN_ISOLATION": "none",
                        "SANDBOX_MEMORY_MB": "256", "SANDBOX_TOTAL_MEMORY_MB": "1024",
                        "SANDBOX_MAX_CONCURRENT": "8"}).start()
        try:
            status, body = d.rpc("Describe", {})
            self.assertEqual(status, 200)
            self.assertEqual(body["provider"], "disabled")
            self.assertEqual(body["limits"]["total_memory_mb"], 1024)
        finally:
            self.assertEqual(d.stop(), 0)


class SanitizerReports(unittest.TestCase):
    """The harness fails a test whose daemon's log holds a sanitizer's
    report (the ASan build's suites rely on it: a leak at exit changes no
    answer)."""

    def test_a_report_in_the_log_fails_the_stop(self):
        for report in ("==1==ERROR: LeakSanitizer: detected memory leaks",
                       "==1==ERROR: AddressSanitizer: heap-use-after-free",
                       "src/x.c:1:2: runtime error: signed integer overflow"):
            d = Daemon()
            with open(d.log_path, "w") as f:
                f.write('{"msg":"listening"}\n' + report + "\n")
            with self.assertRaises(AssertionError):
                d.stop()
        d = Daemon()
        with open(d.log_path, "w") as f:
            f.write('{"msg":"stopped"}\n')
        self.assertIsNone(d.stop())


if __name__ == "__main__":
    unittest.main()
