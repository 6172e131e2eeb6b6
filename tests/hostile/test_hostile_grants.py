# SPDX-License-Identifier: Apache-2.0
"""Hostile code that holds a grant (docker, runc and runsc): the broker
socket is the only way out, it reaches only the listed routes of its own
run, it survives garbage, floods and injection attempts, and a slow or dead
API never holds a run past its deadline.  After each class the daemon is
ready, no container is left, and fd and thread counts are back."""
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import per_runtime  # noqa: E402
from plimsoll_test.grants import (SOCKET_CLIENT, TOKEN, GrantDaemon, profile,  # noqa: E402
                                  token_cred)
from plimsoll_test.hostile import HostileDockerDaemon  # noqa: E402
from plimsoll_test.payloads import snippet  # noqa: E402

CLIENT = SOCKET_CLIENT


class HostileGrants(HostileDockerDaemon, GrantDaemon):
    INSTANCE = "hostile-grants-"  # per_runtime sets RUNTIME

    @classmethod
    def grants(cls):
        closed = "http://127.0.0.1:9"  # discard port: nothing listens there
        return {
            "items": profile(cls.up.url, token_cred(), limits={"max_calls": 5}),
            "slow": profile(cls.up.url, token_cred(), limits={"call_timeout_ms": 500}),
            "down": profile(closed, token_cred()),
        }

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
            assert TOKEN not in cls.d.log_text(), "the token reached the log"
        finally:
            cls.close_grants()

    def setUp(self):
        self.up.take()

    def py(self, code, grant="items", **extra):
        b = self.result(snippet("python", CLIENT + code, grant, **extra))
        self.assertNotIn(TOKEN, json.dumps(b))
        return b

    def test_network_is_still_none_with_a_grant(self):
        b = self.py("out = []\n"
                    "for host in ('127.0.0.1', '172.17.0.1'):\n"
                    "    s = socket.socket(); s.settimeout(2)\n"
                    "    try:\n"
                    "        s.connect((host, %d)); out.append('tcp')\n"
                    "    except OSError:\n"
                    "        out.append('no tcp')\n"
                    "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                    "try:\n"
                    "    u.sendto(b'x', ('10.0.0.1', 53)); out.append('udp')\n"
                    "except OSError:\n"
                    "    out.append('no udp')\n"
                    "try:\n"
                    "    socket.gethostbyname('example.org'); out.append('dns')\n"
                    "except OSError:\n"
                    "    out.append('no dns')\n"
                    "print(out)\n" % self.up.port, timeout_ms=20000)
        self.assertEqual(b["stdout"], "['no tcp', 'no tcp', 'no udp', 'no dns']\n", b)
        self.assertEqual(self.up.take(), [])

    def test_only_its_own_broker_is_visible(self):
        # A second run holds its own broker while this one looks around.
        import threading
        other = threading.Thread(target=lambda: self.py("time.sleep(4)"))
        other.start()
        time.sleep(1.5)
        # The run's directory is traverse-only (its own socket is reachable
        # by name, nothing can be listed), and no other socket shows up.
        b = self.py("import glob\n"
                    "try:\n"
                    "    os.listdir('/run/plimsoll')\n"
                    "except PermissionError:\n"
                    "    print('not listed', os.path.exists(SOCK), SOCK)\n"
                    "found = [p for p in glob.glob('/run/**/*.sock', recursive=True)]\n"
                    "print(found)\n")
        other.join()
        self.assertEqual(b["stdout"].splitlines(),
                         ["not listed True /run/plimsoll/broker.sock", "[]"], b)

    def test_the_broker_directory_is_read_only(self):
        b = self.py("r = []\n"
                    "for op in (lambda: os.unlink(SOCK), lambda: open('/run/plimsoll/x', 'w'),\n"
                    "           lambda: os.rename(SOCK, '/run/plimsoll/y')):\n"
                    "    try:\n"
                    "        op(); r.append('done')\n"
                    "    except OSError:\n"
                    "        r.append('refused')\n"
                    "print(r, call('GET', '/items/1')[0])\n")
        self.assertEqual(b["stdout"], "['refused', 'refused', 'refused'] 200\n", b)

    def test_call_flood_stops_at_max_calls(self):
        b = self.py("codes = [call('GET', '/items/%d' % i)[0] for i in range(12)]\n"
                    "print(codes)\n")
        self.assertEqual(b["stdout"], str([200] * 5 + [429] * 7) + "\n", b)
        self.assertEqual(len(self.up.take()), 5)
        self.assertEqual(b["record"]["broker_calls"], 5)
        self.assertEqual(b["record"]["broker_refused"], 7)

    def test_garbage_and_oversized_requests(self):
        b = self.py("print(raw(b'\\x00\\xff garbage\\r\\n\\r\\n'))\n"
                    "print(raw(b'GET /items/1 HTTP/1.1\\r\\nX: ' + b'a' * 70000 + b'\\r\\n\\r\\n'))\n"
                    "print(raw(b'POST /items/1/notes HTTP/1.1\\r\\nTransfer-Encoding: chunked'"
                    " b'\\r\\n\\r\\n0\\r\\n\\r\\n'))\n"
                    "print(raw(b'GET http://evil.example/items/1 HTTP/1.1\\r\\n\\r\\n'))\n"
                    "print(raw(b'GET //evil.example/items/1 HTTP/1.1\\r\\n\\r\\n'))\n"
                    "print(call('GET', '/items/1')[0])\n")
        lines = b["stdout"].splitlines()
        self.assertEqual(len(lines), 6, b)
        self.assertTrue(lines[0].startswith("HTTP/1.1 400"), lines)
        self.assertTrue(lines[1].startswith("HTTP/1.1 431"), lines)
        self.assertTrue(lines[2].startswith("HTTP/1.1 501"), lines)
        self.assertTrue(lines[3].startswith("HTTP/1.1 400"), lines)
        self.assertTrue(lines[4].startswith("HTTP/1.1 400"), lines)
        self.assertEqual(lines[5], "200")
        got = self.up.take()
        self.assertEqual([g["path"] for g in got], ["/items/1"])

    def test_injection_attempts_never_carry(self):
        b = self.py("print(call('GET', '/items/1', headers={'Authorization': 'Bearer forged',"
                    " 'Cookie': 'a=b', 'X-Forwarded-Host': 'evil'})[0])\n"
                    "print(call('GET', '/items/1@evil.example')[0])\n"
                    "print(call('GET', '/items/%2e%2e/admin')[0])\n"
                    "print(call('GET', '/items/a%2Fb')[0])\n")
        self.assertEqual(b["stdout"].splitlines(), ["200", "200", "400", "400"], b)
        got = self.up.take()
        self.assertEqual(len(got), 2)
        for g in got:
            self.assertEqual(g["headers"]["authorization"], "Bearer " + TOKEN)
            self.assertNotIn("cookie", g["headers"])
            self.assertNotIn("x-forwarded-host", g["headers"])
        self.assertEqual(got[1]["path"], "/items/1@evil.example")

    def test_slow_api_is_cut_by_the_call_timeout(self):
        b = self.py("print(call('GET', '/slow'))\n", grant="slow")
        self.assertEqual(b["stdout"], "(504, 'upstream_timeout')\n", b)

    def test_slow_api_never_outlives_the_deadline(self):
        t0 = time.monotonic()
        b = self.py("print(call('GET', '/slow'))\n", timeout_ms=1200)
        # The broker counts the deadline from dispatch, the container from
        # its attach: a guest whose call comes after the former (a cold
        # start on a loaded machine) is answered 504 "deadline" at once.
        self.assertTrue(b["timed_out"] or b["stdout"] in ("(504, 'upstream_timeout')\n",
                                                          "(504, 'deadline')\n"), b)
        self.assertLess(time.monotonic() - t0, 1.2 + 10)  # a bound, not a speed claim

    def test_dead_api_is_a_502_the_guest_can_read(self):
        b = self.py("print(call('GET', '/items/1'))\n", grant="down")
        self.assertEqual(b["stdout"], "(502, 'upstream_unreachable')\n", b)
        self.assertEqual(b["exit_code"], 0)


HostileGrantsRunc, HostileGrantsRunsc = per_runtime(HostileGrants)


if __name__ == "__main__":
    unittest.main()
