#!/usr/bin/env python3
"""Run every tests/api/test_*.py against the build in PLIMSOLL_BUILD_DIR and
print one summary line: "api: N passed, N failed". Exit 1 on any failure."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    result = unittest.TextTestRunner(verbosity=int(os.environ.get("PL_VERBOSE", "1"))).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    # A skipped test is not hidden in a green run: it counts as failed here.
    print("api: %d passed, %d failed" % (passed, failed + skipped))
    return 1 if failed or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
