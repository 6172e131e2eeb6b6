#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run every official client's own test suite with its ecosystem's runner.

    python3 tests/clients/harness.py -- python3 tests/clients/run_suites.py LOGDIR [NAME...]

Meant to run under the harness (which exports PLIMSOLL_TEST_*).  Each
suite's whole output goes to LOGDIR/clients-NAME.log; one line per suite,
"clients NAME: N passed, N failed, N skipped", is printed for scripts/test,
with the failures' lines after a failed suite.  The counts come from each
runner's own report: cmocka, unittest, node --test, go test -v.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("PLIMSOLL_BUILD_DIR", os.path.join(ROOT, "build"))


def count_cmocka(out):
    ran = re.findall(r"^\[==========\] (\d+) test\(s\) run\.", out, re.M)
    failed = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) test\(s\)", out, re.M))
    skipped = len(re.findall(r"^SKIP:", out, re.M))
    total = sum(int(n) for n in ran)
    return total - failed - skipped, failed, skipped


def count_unittest(out):
    m = re.findall(r"^Ran (\d+) tests? in", out, re.M)
    total = int(m[-1]) if m else 0
    f = re.search(r"^FAILED \((.*)\)", out, re.M)
    failed = skipped = 0
    if f:
        for k, v in re.findall(r"(\w+)=(\d+)", f.group(1)):
            if k in ("failures", "errors"):
                failed += int(v)
            elif k == "skipped":
                skipped += int(v)
    s = re.search(r"^OK \(skipped=(\d+)\)", out, re.M)
    if s:
        skipped = int(s.group(1))
    return total - failed - skipped, failed, skipped


def count_node(out):
    def last(name):
        m = re.findall(r"^# %s (\d+)" % name, out, re.M)
        return int(m[-1]) if m else 0
    return last("pass"), last("fail") + last("cancelled"), last("skipped") + last("todo")


def count_go(out):
    return (len(re.findall(r"^\s*--- PASS: ", out, re.M)),
            len(re.findall(r"^\s*--- FAIL: ", out, re.M)),
            len(re.findall(r"^\s*--- SKIP: ", out, re.M)))


SUITES = [
    ("c", [os.path.join(BUILD, "tests", "client_suite")], count_cmocka),
    ("python", [os.path.join(ROOT, "clients", "python", "run-tests")], count_unittest),
    ("typescript", [os.path.join(ROOT, "clients", "typescript", "run-tests")], count_node),
    ("go", [os.path.join(ROOT, "clients", "go", "run-tests")], count_go),
]


def main(argv):
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    logdir, only = argv[0], set(argv[1:])
    os.makedirs(logdir, exist_ok=True)
    bad = 0
    for name, cmd, counter in SUITES:
        if only and name not in only:
            continue
        log = os.path.join(logdir, "clients-%s.log" % name)
        env = dict(os.environ, CMOCKA_MESSAGE_OUTPUT="stdout")
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=900)
            out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
        except (OSError, subprocess.TimeoutExpired) as e:
            out, rc = "cannot run %s: %s\n" % (cmd, e), 1
        with open(log, "w") as f:
            f.write(out)
        passed, failed, skipped = counter(out)
        if rc != 0 and failed == 0:
            failed = 1  # the runner failed outside any test (build, crash)
        if passed + failed == 0:
            failed = 1  # nothing ran is not a pass
        if failed:
            bad += 1
            lines = [l for l in out.splitlines()
                     if re.search(r"FAIL|ERROR|Error|assert|not ok", l)]
            sys.stdout.write("--- clients %s (%s)\n%s\n%s\n" % (
                name, log, "\n".join(lines[:40]), "\n".join(out.splitlines()[-15:])))
        for l in out.splitlines():
            if re.search(r"\bSKIP\b|skipped", l) and skipped:
                sys.stdout.write("  (%s) %s\n" % (name, l.strip()))
                break
        sys.stdout.write("clients %s: %d passed, %d failed, %d skipped\n"
                         % (name, passed, failed, skipped))
        sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
