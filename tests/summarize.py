#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Count what one `meson test` run reported, test case by test case.

    tests/summarize.py LABEL MESON_LOG.json

LABEL names the build ("build", "build-asan").  The log is the JSON-lines
file `meson test --logbase NAME` writes (BUILD/meson-logs/NAME.json).  For
each test it prints "  LABEL NAME   N passed, N failed" from what the test
itself reported:
  - cmocka:        "[  PASSED  ] N test(s)", "[  FAILED  ] N test(s)",
                   "[  SKIPPED ] N test(s)" (skips are listed by name)
  - tests/run.py:  "LABEL: N passed, N failed"
  - clients:       "clients NAME: N passed, N failed, N skipped"
  - anything else: its exit status, one passed or one failed.
A test that failed by its exit status (a crash, a sanitizer report, a
timeout) counts at least one failure whatever it printed.  After a failed
test come the lines that say why.  The last line is
"TOTAL <passed> <failed> <skipped>" for scripts/test.
"""
import json
import re
import sys

CMOCKA_PASSED = re.compile(r"^\[  PASSED  \] (\d+) test", re.M)
CMOCKA_FAILED = re.compile(r"^\[  FAILED  \] (\d+) test", re.M)
CMOCKA_SKIPPED = re.compile(r"^\[  SKIPPED \] (\d+) test", re.M)
CMOCKA_SKIP_NAME = re.compile(r"^\[  SKIPPED \] ([a-z_0-9]+)\s*$", re.M)
SUITE_LINE = re.compile(r"^([a-z][a-z0-9 /_-]*): (\d+) passed, (\d+) failed(?:, (\d+) skipped)?$", re.M)
WHY = re.compile(r"^(FAIL|ERROR|Traceback|AssertionError|  File|---|==\d+==|SUMMARY)")


def counts(out):
    """(passed, failed, skipped, [skipped names]) from a test's output, or None."""
    if CMOCKA_PASSED.search(out) or CMOCKA_FAILED.search(out):
        p = sum(int(n) for n in CMOCKA_PASSED.findall(out))
        f = sum(int(n) for n in CMOCKA_FAILED.findall(out))
        s = sum(int(n) for n in CMOCKA_SKIPPED.findall(out))
        return p, f, s, sorted(set(CMOCKA_SKIP_NAME.findall(out)))
    lines = SUITE_LINE.findall(out)
    if lines:
        p = sum(int(m[1]) for m in lines)
        f = sum(int(m[2]) for m in lines)
        s = sum(int(m[3] or 0) for m in lines)
        return p, f, s, []
    return None


def main():
    label, path = sys.argv[1], sys.argv[2]
    total_p = total_f = total_s = 0
    try:
        entries = [json.loads(line) for line in open(path) if line.strip()]
    except OSError as e:
        print("  %s: no test log (%s)" % (label, e))
        print("TOTAL 0 1 0")
        return
    for t in entries:
        name = t.get("name", "?").split(" / ")[-1]
        result = t.get("result", "FAIL")
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        ok = result in ("OK", "EXPECTEDFAIL")
        c = counts(out)
        if c is None:
            p, f, s, skipped = (1, 0, 0, []) if ok else (0, 1, 0, [])
        else:
            p, f, s, skipped = c
            if not ok and f == 0:
                f = 1  # crashed, timed out or a sanitizer spoke after the counts
        if skipped:
            print("  skipped in %s (%s): %s" % (name, label, " ".join(skipped)))
        total_p += p
        total_f += f
        total_s += s
        if f:
            print("--- %s (%s): %s" % (name, label, result))
            why = [ln for ln in out.splitlines() if WHY.match(ln)][:40]
            print("\n".join(why + out.splitlines()[-20:]))
        print("  %-40s %d passed, %d failed" % ("%s %s" % (label, name), p, f))
    print("TOTAL %d %d %d" % (total_p, total_f, total_s))


if __name__ == "__main__":
    main()
