#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The openshell provider against its local fake gateway (tests/fakes/
openshell; every exec a `docker exec` into a local container, so these are
the fake's figures, not a real gateway's): a snippet run without and with a
grant (the relay's start), a broker call through the relay timed in the
guest, a session's open plus first cell, and later cells.  Needs root and
the docker engine (scripts/docker-setup).

    PLIMSOLL_BUILD_DIR=build python3 bench/openshell_fake.py
"""
import json, os, statistics, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "openshell"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
os.environ.setdefault("PLIMSOLL_BUILD_DIR", os.path.join(HERE, "..", "build"))
from test_openshell_provider import osh_env  # noqa: E402
from plimsoll_test.grants import (SOCKET_CLIENT, TOKEN, GrantFiles, grant_env,  # noqa: E402
                                  profile, token_cred)
from plimsoll_test.harness import Daemon  # noqa: E402
from plimsoll_test.openshell import FakeOpenShell  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402

files = GrantFiles()
up = Upstream(Check(token=TOKEN))
files.write({"items": profile(up.url, token_cred(), limits={"max_calls": 1000})})
fake = FakeOpenShell().start()
d = Daemon(env=osh_env(fake, SANDBOX_MAX_SESSIONS="2", SANDBOX_SESSION_IDLE="600", **grant_env(files.path))).start(timeout=300)
try:
    def run(msg):
        t = time.monotonic()
        s, b = d.rpc("Run", msg)
        return s, b, (time.monotonic() - t) * 1000
    plain = [run({"snippet": {"language": "python", "code": "print(1)"}})[2] for _ in range(5)]
    granted = [run({"grant_profile": "items", "snippet": {"language": "python", "code": "print(1)"}})[2] for _ in range(5)]
    code = SOCKET_CLIENT + ("t = time.monotonic()\n"
                            "for i in range(50): call('GET', '/items/%d' % i)\n"
                            "print((time.monotonic() - t) * 1000 / 50)\n")
    s, b, _ = run({"grant_profile": "items", "snippet": {"language": "python", "code": code}})
    per_call = float(b["stdout"])
    # sessions
    t = time.monotonic()
    s, o = d.rpc("OpenSession", {})
    sid = o["session_id"]
    s, c1 = d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python", "code": "x = 1"}})
    open_first = (time.monotonic() - t) * 1000
    later = []
    for i in range(10):
        t = time.monotonic()
        d.rpc("RunCell", {"session_id": sid, "cell": {"language": "python", "code": "x + %d" % i}})
        later.append((time.monotonic() - t) * 1000)
    d.rpc("CloseSession", {"session_id": sid})
    # runs: 5 each; a relay call: 50 in one run; later cells: 10
    print(json.dumps({"run_p50_ms": round(statistics.median(plain)), "grant_run_p50_ms": round(statistics.median(granted)),
                      "relay_call_ms_in_guest": round(per_call, 2), "session_open_plus_first_cell_ms": round(open_first),
                      "later_cell_p50_ms": round(statistics.median(later))}))
finally:
    d.stop()
    fake.stop()
    up.close()
    files.close()
