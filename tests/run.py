#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run the test modules of a folder (tests/api, tests/hostile, ...) against
the build in PLIMSOLL_BUILD_DIR and print one summary line: "<label>: N
passed, N failed". Exit 1 on any failure.  tests/meson.build registers
each module as a meson test of its own through this runner.  MODULES, when
given, is a comma-separated list of the folder's modules to run instead of
every one.  With --list, print the folder's modules, one a line, and run
nothing (tests/meson.build's list; scripts/check/suites').

    tests/run.py FOLDER LABEL [MODULES]
    tests/run.py --list FOLDER"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# The suites' shared helpers: the package plimsoll_test.
sys.path.insert(0, os.path.join(HERE, "lib"))


class TimedResult(unittest.TextTestResult):
    """Also keeps each test class's time (setUpClass included, by the gap
    between one class's last test and the next's first), for the log's
    "slowest classes" line: where a suite's minutes go; and each test's own
    time, for the "slowest tests" line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.per_class = {}
        self.per_test = {}
        self.last = (None, time.monotonic())
        self.test_started = 0.0

    def startTest(self, test):
        cls, since = self.last
        now = time.monotonic()
        if cls is not None:
            self.per_class[cls] = self.per_class.get(cls, 0.0) + now - since
        self.last = ("%s.%s" % (type(test).__module__, type(test).__name__), now)
        self.test_started = now
        super().startTest(test)

    def stopTest(self, test):
        # By class and method: a suite's own attribute may shadow id().
        name = "%s.%s.%s" % (type(test).__module__, type(test).__name__,
                             getattr(test, "_testMethodName", "?"))
        self.per_test[name] = time.monotonic() - self.test_started
        super().stopTest(test)

    def stopTestRun(self):
        cls, since = self.last
        if cls is not None:
            self.per_class[cls] = self.per_class.get(cls, 0.0) + time.monotonic() - since
        super().stopTestRun()


def modules(folder):
    """The folder's test modules, by name, sorted."""
    return sorted(f[:-3] for f in os.listdir(folder)
                  if f.startswith("test_") and f.endswith(".py"))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--list":
        print("\n".join(modules(sys.argv[2])))
        return 0
    folder = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "api")
    label = sys.argv[2] if len(sys.argv) > 2 else "api"
    sys.path.insert(0, folder)
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else modules(folder)
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=int(os.environ.get("PL_VERBOSE", "1")),
                                     resultclass=TimedResult).run(suite)
    slowest = sorted(result.per_class.items(), key=lambda kv: -kv[1])[:8]
    print("slowest classes: " + ", ".join("%s %.0fs" % kv for kv in slowest), file=sys.stderr)
    slowest = sorted(result.per_test.items(), key=lambda kv: -kv[1])[:8]
    print("slowest tests: " + ", ".join("%s %.1fs" % kv for kv in slowest), file=sys.stderr)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    # A daemon the module started and never stopped fails it, and is stopped.
    from plimsoll_test.harness import Daemon
    for d in Daemon.started:
        if d.proc.poll() is None:
            print("FAIL: a daemon left running at the module's end (%s): %s" % (
                d.env.get("SANDBOX_DOCKER_INSTANCE") or d.env.get("SANDBOX_PROVIDER", "disabled"),
                d.log_path), file=sys.stderr)
            try:
                d.stop()
            except Exception as e:  # noqa: BLE001 - its sanitizer report, printed
                print(e, file=sys.stderr)
            failed += 1
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    # A skipped test is not hidden in a green run: it counts as failed here.
    print("%s: %d passed, %d failed" % (label, passed, failed + skipped))
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
