# SPDX-License-Identifier: Apache-2.0
"""Sessions on the openshell provider, against the local fake gateway: one
gateway sandbox per session whose main process does nothing, read back
from the gateway before every call (a sandbox changed, gone or out of
READY ends the session with the reason, and nothing runs); the same
cleanup between calls as a project's steps, after the answer (the next
call waits for it, and one that failed refuses it); an idle session is stopped:
its files stay, its interpreters end, and it gives back its admission slot
(the next call takes one again).  The one real session the daemon opens
at startup is test_openshell_startup_session's.  The cases every hosted
provider's sessions meet are
plimsoll_test.hosted_sessions.HostedSessions's.

Run: cd tests/openshell && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_openshell_sessions
"""
import os
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_openshell_provider import OpenShellDaemon  # noqa: E402  (tests/lib on the path)
from plimsoll_test.harness import error_info  # noqa: E402
from plimsoll_test.hosted_sessions import LOOK, HostedSessions, project  # noqa: E402


class Sessions(HostedSessions, OpenShellDaemon):
    TIER = "container"
    EXTRA = {"SANDBOX_MAX_SESSIONS": "3", "SANDBOX_SESSION_IDLE": "2",
             "SANDBOX_SESSION_LIFETIME": "600", "SANDBOX_OUTPUT_BYTES": "4096",
             "SANDBOX_FILE_READ_BYTES": "65536", "SANDBOX_FILE_LIST_ENTRIES": "40",
             "SANDBOX_MAX_CONCURRENT": "3", "SANDBOX_PER_KEY_CONCURRENT": "3"}

    def in_flight(self):
        req = urllib.request.Request("http://%s:%d/metrics" % (self.d.host, self.d.port),
                                     headers={"Authorization": "Bearer " + self.d.keys["alice"]})
        with urllib.request.urlopen(req, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("plimsoll_in_flight "):
                    return int(line.split()[1])
        raise AssertionError("no plimsoll_in_flight in /metrics")

    def wait_idle(self, name):
        # The stop gives the slot back: nothing of this class holds one then.
        deadline = time.monotonic() + 15
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.in_flight(), 0)
        self.assertTrue(self.sandbox_exists(name))  # stopped, not deleted

    @staticmethod
    def is_cleanup(e):
        return "def spared(p)" in " ".join(e["argv"])

    def cleanups(self):
        return [e for e in self.fake.state()["execs"] if self.is_cleanup(e)]

    def look_cleaned(self, sid):
        """A call, and its cleanup (after the answer) waited for.  The call's
        cleanup is the first one the gateway saw start after the call's own
        exec: the previous call's cleanup can still be starting when this
        call is sent, so a count taken before it would name the wrong one."""
        _, name = self.look(sid)
        deadline = time.monotonic() + 30
        while True:
            execs = self.fake.state()["execs"]
            mine = [i for i, e in enumerate(execs) if LOOK in e["argv"]]
            self.assertTrue(mine, "the call's own exec is not in the gateway's log")
            after = [e for e in execs[mine[-1] + 1:] if self.is_cleanup(e)]
            if (after and after[0]["state"] != "running") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertTrue(after, "no cleanup after the call")
        self.assertEqual(after[0]["state"], "exited", [(e["state"], e["started"]) for e in after])
        return name

    def sandbox_exists(self, name):
        return any(s["name"] == name for s in self.live())

    def test_describe_and_the_startup_session(self):
        status, d = self.d.rpc("Describe", {})
        self.assertTrue(d["supports_sessions"], d)
        self.assertEqual(d["languages"], ["python", "javascript"])
        self.assertIn("stopped when idle", d["operations"]["session"]["engine"])
        self.assertFalse(d["operations"]["session"].get("grants", False), d)
        checks = " | ".join(d["startup_checks"])
        self.assertIn("one real session", checks)
        self.assertIn("across an idle stop", checks)
        self.assertIn("cells kept a value in python and javascript", checks)

    def test_the_sandbox_is_read_back_before_every_call(self):
        sid = self.open()
        _, name = self.look(sid)
        before = self.fake.state()["calls"]["GetSandbox"]["count"]
        self.look(sid)
        self.look_cleaned(sid)  # its cleanup (after the answer) counted too
        self.assertGreaterEqual(self.fake.state()["calls"]["GetSandbox"]["count"], before + 2)
        # The gateway now reports it otherwise: the session ends, nothing runs.
        execs = len(self.fake.state()["execs"])
        self.fake.drift_now(name, drift_image=True)
        status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                   "run": project([["touch", "/tmp/ran"]])})
        info, _ = error_info(body)
        self.assertEqual(info["reason"], "SESSION_ENDED", body)
        self.assertIn("image", body["message"])
        self.assertEqual(len(self.fake.state()["execs"]), execs)
        self.fake.reset()
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": project([["true"]])})
        self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)
        deadline = time.monotonic() + 10
        while self.sandbox_exists(name) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertFalse(self.sandbox_exists(name))

    def test_a_sandbox_gone_or_its_main_process_killed_ends_the_session(self):
        kill = ("import os, signal\n"
                "for p in os.listdir('/proc'):\n"
                "    try:\n"
                "        argv = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')\n"
                "    except OSError:\n"
                "        continue\n"
                "    if argv[:2] == [b'sleep', b'infinity']:\n"
                "        os.kill(int(p), signal.SIGKILL)\n")
        for how in ("deleted", "killed"):
            sid = self.open()
            _, name = self.look(sid)
            if how == "deleted":
                self.fake.delete(name)
            else:  # the guest's code ends the main process: ERROR for good
                self.d.rpc("RunInSession", {"session_id": sid,
                                            "run": project([["python3", "-c", kill]])})
            status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                       "run": project([["true"]])})
            self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", (how, body))
            self.assert_no_sandbox_left()

    def test_the_cleanup_runs_after_the_answer(self):
        # The gateway withholds the cleanup's exit (its script's own text
        # picks it out): the call's answer does not wait for it, the next
        # call does (the cleanup's floor, PH_CLEANUP_MIN_MS, 10 s), and is
        # refused SESSION_ENDED naming the cleanup; nothing else runs.
        sid = self.open()
        self.look_cleaned(sid)
        self.fake.misbehave(exec_withhold_exit="def spared(p)")
        t0 = time.monotonic()
        run = dict(project([["echo", "answered"]]), timeout_ms=8000)
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": run})
        answered = time.monotonic() - t0
        self.assertEqual(status, 200, body)
        self.assertEqual(body["steps"][0]["stdout"], "answered\n", body)
        self.assertLess(answered, 4, "the answer waited for the cleanup")
        status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                   "run": project([["touch", "/tmp/ran"]])})
        refused = time.monotonic() - t0
        info, _ = error_info(body)
        self.assertEqual(info["reason"], "SESSION_ENDED", body)
        self.assertIn("cleanup between calls failed", body["message"])
        self.assertIn("the call left running", body["message"])
        self.assertGreaterEqual(refused, 9.5, "the next call did not wait for the cleanup")
        last = self.fake.state()["execs"][-1]  # the withheld cleanup, and nothing since
        self.assertIn("def spared(p)", " ".join(last["argv"]))
        self.assertEqual(last["state"], "withholding", last)
        self.fake.reset()
        self.assert_no_sandbox_left()

    def test_a_close_and_an_idle_stop_wait_for_the_cleanup(self):
        # With the cleanup held up: a close waits for it, then the sandbox
        # goes; an idle stop waits for it and, as it failed, ends the
        # session (its slot comes back, its sandbox goes) rather than stop it.
        for how in ("close", "idle"):
            sid = self.open()
            name = self.look_cleaned(sid)
            self.fake.misbehave(exec_withhold_exit="def spared(p)")
            self.call(sid, project([["true"]]))
            t0 = time.monotonic()
            if how == "close":
                status, body = self.d.rpc("CloseSession", {"session_id": sid})
                self.assertEqual(status, 200, body)
            # The sandbox goes only once the cleanup has ended (its floor, 10 s).
            deadline = time.monotonic() + 25
            while self.sandbox_exists(name) and time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertFalse(self.sandbox_exists(name))
            self.assertGreaterEqual(time.monotonic() - t0, 5, (how, "did not wait"))
            if how == "idle":
                self.assertEqual(self.in_flight(), 0)
                status, body = self.d.rpc("RunInSession", {"session_id": sid,
                                                           "run": project([["true"]])})
                self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)
                self.assertIn("paused when idle", body["message"])
            self.fake.reset()

    def test_an_idle_stop_keeps_the_files_and_gives_the_slot_back(self):
        sid = self.open()
        self.assertEqual(self.in_flight(), 1)
        self.call(sid, project([["sh", "-c", "sleep 600 > /dev/null 2>&1 &"]],
                               [("kept.txt", "kept")]))
        b = self.cell(sid, "python", "x = 1")
        name = b["sandbox_name"]
        self.wait_idle(name)
        # The slot is free for others while the session sleeps...
        for _ in range(3):
            self.run_ok({"snippet": {"language": "python", "code": "print(1)"}})
        # ...and taken again by its next call: the file is there, the
        # process and the interpreter are not.
        out, name2 = self.look(sid)
        self.assertEqual((out, name2), ("kept\n0\n", name))
        b = self.cell(sid, "python", "'x' in dir()")
        self.assertEqual((b["stdout"], b["interpreter_started"]), ("False\n", True), b)
        self.assertEqual(self.in_flight(), 1)

    def test_a_stopped_session_waits_for_a_slot(self):
        # Three slots: three sessions stop, three runs hold every slot, and
        # a stopped session's call is refused AT_CAPACITY, not ended.
        sids = [self.open() for _ in range(3)]
        names = [self.look(s)[1] for s in sids]
        for n in names:
            self.wait_idle(n)
        import threading
        slow = {"snippet": {"language": "python", "code": "import time; time.sleep(6)"}}
        holders = [threading.Thread(target=self.d.rpc, args=("Run", slow)) for _ in range(3)]
        for t in holders:
            t.start()
        deadline = time.monotonic() + 10
        while self.in_flight() < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        status, body = self.d.rpc("RunInSession", {"session_id": sids[0],
                                                   "run": project([["true"]])})
        self.assertEqual(error_info(body)[0]["reason"], "AT_CAPACITY", body)
        for t in holders:
            t.join()
        out, _ = self.look(sids[0])
        self.assertEqual(out, "no file\n0\n")

    def test_kill_everything_ends_the_session_or_leaves_it_clean(self):
        # The guest's own user runs the sandbox's main process too: killing
        # everything it can may end the sandbox (the session ends with the
        # reason) or leave it running (the next call finds nothing left).
        sid = self.open()
        self.cell(sid, "python", "x = 1")
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": project(
            [["sh", "-c", "kill -9 -1; sleep 1"]])})
        self.assertIn(status, (200, 500), body)
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": project(
            [["python3", "-c", "print('alive')"]])})
        if status == 200:
            self.assertEqual(body["steps"][0]["stdout"], "alive\n", body)
            b = self.cell(sid, "python", "'x' in dir()")
            self.assertEqual(b["interpreter_started"], True, b)
        else:
            self.assertEqual(error_info(body)[0]["reason"], "SESSION_ENDED", body)

    def test_explain_agrees_with_the_session_calls(self):
        # An unknown id, a live session, and one its owner closed: Explain
        # predicts RunInSession's and RunCell's answer, field for field.
        sid = self.open()
        closed = self.open()
        self.d.rpc("CloseSession", {"session_id": closed})
        run = project([["true"]])
        cell = {"language": "python", "code": "1"}
        for who in ("0" * 64, sid, closed):
            for method, call in (("RunInSession", {"session_id": who, "run": run}),
                                 ("RunCell", {"session_id": who, "cell": cell})):
                status, e = self.d.rpc("Explain", call)
                self.assertEqual(status, 200, e)
                status, body = self.d.rpc(method, call)
                if e["dispatch"]:
                    self.assertEqual((who, status), (sid, 200), body)
                    continue
                info, _ = error_info(body)
                self.assertEqual(e["checks"][-1]["refusal"],
                                 {"code": body["code"], "message": body["message"],
                                  "reason": info["reason"], "domain": info["domain"],
                                  "metadata": info["metadata"], "http_status": status})
                self.assertIn(info["reason"], ("NOT_FOUND", "SESSION_ENDED"))

    def test_grants_and_runs_of_cells_are_refused_before_dispatch(self):
        sid = self.open()
        status, body = self.d.rpc("RunInSession", {"session_id": sid, "run": {
            "grant_profile": "items", "snippet": {"language": "python", "code": "1"}}})
        info, _ = error_info(body)
        self.assertEqual(info["metadata"]["dispatched"], "false", body)
        status, body = self.d.rpc("Run", {"cell": {"language": "python", "code": "1"}})
        self.assertEqual(error_info(body)[0]["metadata"]["dispatched"], "false", body)


if __name__ == "__main__":
    unittest.main()
