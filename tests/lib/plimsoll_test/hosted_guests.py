# SPDX-License-Identifier: Apache-2.0
"""Hostile guests every hosted provider meets the same way (e2b,
dockercloud, openshell): a mixin for a provider's daemon class, which
supplies run_ok(message) -> the Run answer, fake (with containers()),
assert_no_sandbox_left() and service_secrets().  Each provider's own cases stay in its folder.
"""
import base64
import json
import time

from .harness import error_info
from .payloads import py


class HostedGuests:
    """service_secrets() names what must never be readable inside: the
    service's credentials and the header words that would carry them."""

    def test_no_service_credential_enters_the_sandbox(self):
        # Everything a guest can read of its own sandbox's processes.
        r = self.run_ok(py(
            "import os\n"
            "print(dict(os.environ))\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit():\n"
            "        for f in ('environ', 'cmdline'):\n"
            "            try:\n"
            "                print(open('/proc/%s/%s' % (p, f), 'rb').read())\n"
            "            except OSError:\n"
            "                pass\n"))
        secrets = self.service_secrets()
        self.assertTrue(secrets)
        for secret in secrets:
            self.assertNotIn(secret, r["stdout"])

    def test_a_background_process_does_not_outlive_its_run(self):
        r = self.run_ok(py(
            "import subprocess\n"
            "subprocess.Popen(['sh', '-c', 'sleep 600'], start_new_session=True,\n"
            "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print('left one behind')\n"))
        self.assertEqual(r["stdout"], "left one behind\n")
        self.assert_no_sandbox_left()
        # Not only forgotten by the API: the machine itself is gone.
        self.assertEqual(self.fake.containers(), [])

    def test_bytes_that_are_not_text_arrive_exactly(self):
        r = self.run_ok(py("import sys; sys.stdout.buffer.write(bytes(range(256)))"))
        self.assertEqual(base64.b64decode(r["stdout_base64"]), bytes(range(256)))

    def test_a_flood_is_capped_and_the_daemon_stays_ready(self):
        r = self.run_ok(py(
            "import sys\n"
            "for i in range(200000):\n"
            "    sys.stdout.write('%d\\n' % i)\n"
            "sys.stderr.write('e' * 2000000)\n"))
        self.assertTrue(r["stderr_truncated"])
        self.assertEqual(self.d.request("GET", "/readyz")[0], 200)


class HostedRuns:
    """The calls a hosted provider's daemon class makes in every test: a
    run that must succeed at the class's TIER, a refusal with its reason
    and dispatched flag, and no sandbox left (live() lists the fake's
    sandboxes still there)."""
    TIER = None

    def run_ok(self, message):
        status, body = self.d.rpc("Run", message)
        self.assertEqual(status, 200, body)
        self.assertEqual(body.get("isolation"), self.TIER, body)
        return body

    def refusal(self, message, reason, dispatched):
        status, body = self.d.rpc("Run", message)
        self.assertNotEqual(status, 200, body)
        info, _ = error_info(body)
        self.assertEqual((info["reason"], info["metadata"]["dispatched"]),
                         (reason, "true" if dispatched else "false"), body)
        return body

    def assert_no_sandbox_left(self, timeout=10):
        deadline = time.monotonic() + timeout
        while self.live() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.live(), [])


class HostedArtifacts:
    """A project's collect globs through a hosted provider (mixed into a
    test class whose cls.d is its daemon, with HostedRuns): the files come
    back with their exact bytes, in the walk's order; what a guest set up
    against the reader (symlinks out, a FIFO) is left out; a snippet's
    globs are refused (a hosted snippet does not run in the work
    directory)."""

    def test_project_artifacts(self):
        d = self.d.rpc("Describe", {})[1]
        self.assertEqual(d["operations"]["artifacts"], {"project": True, "snippet": False})
        b = self.run_ok({"project": {
            "files": [{"path": "in.txt", "content": "given"}],
            "steps": [{"argv": ["python3", "-c", (
                "import os\n"
                "os.makedirs('out/real')\n"
                "open('out/b.bin', 'wb').write(bytes(range(256)))\n"
                "open('out/real/t.txt', 'w').write('text')\n"
                "open(b'out/\\xff.txt', 'wb').write(b'odd')\n"
                "os.symlink('/etc/passwd', 'out/etc')\n"
                "os.symlink('/', 'out/root')\n"
                "os.mkfifo('out/fifo')\n"
                "raise SystemExit(2)\n")]}],
            "collect": ["out/**", "in.txt"]}})
        self.assertEqual(b["exit_code"], 2, b)  # a failed step's files come too
        got = [(base64.b64decode(a["path_base64"]) if "path_base64" in a else a["path"],
                base64.b64decode(a["content_base64"]) if "content_base64" in a
                else a["content"].encode(), a["truncated"]) for a in b["artifacts"]]
        self.assertEqual(got, [("in.txt", b"given", False), ("out/b.bin", bytes(range(256)), False),
                               ("out/real/t.txt", b"text", False),
                               (b"out/\xff.txt", b"odd", False)])
        self.assertFalse(b["artifacts_truncated"])
        self.assertNotIn("root:", json.dumps(b))
        status, body = self.d.rpc("Run", {"snippet": {"language": "python", "code": "1",
                                                      "collect": ["*"]}})
        self.assertEqual((status, error_info(body)[0]["reason"],
                          error_info(body)[0]["metadata"]["dispatched"]),
                         (501, "UNSUPPORTED", "false"), body)
        self.assertIn("snippet.collect", body["message"])


class HostedStreams:
    """RunStream through a hosted provider (mixed into a test class whose
    cls.d is its daemon): the chunks joined are the result's output, a
    project's numbered by step, and Describe says every kind streams."""

    def stream_ok(self, message):
        from . import streaming
        st = streaming.call(self.d, "RunStream", message)
        self.assertEqual((st.status, st.end, st.leftover), (200, {}, b""), st.frames[-1:])
        return st

    def test_stream_snippet(self):
        st = self.stream_ok({"snippet": {"language": "python", "code": (
            "import sys\nprint('one', flush=True)\nprint('two', file=sys.stderr)")}})
        res = st.result
        self.assertEqual((res["exit_code"], res["stdout"], res["stderr"]), (0, "one\n", "two\n"))
        self.assertEqual(st.joined("stdout"), b"one\n")
        self.assertEqual(st.joined("stderr"), b"two\n")
        self.assertIn("record", res)

    def test_stream_project_steps(self):
        st = self.stream_ok({"project": {
            "files": [{"path": "a.py", "content": "print('a')"}],
            "steps": [{"argv": ["python3", "a.py"]}, {"argv": ["python3", "-c", "print('b')"]}]}})
        self.assertEqual(st.result["outcome"], "completed", st.result)
        self.assertEqual((st.joined("stdout", 1), st.joined("stdout", 2)), (b"a\n", b"b\n"))

    def test_describe_says_it_streams(self):
        status, body = self.d.rpc("Describe", {})
        self.assertTrue(body["operations"]["snippet"]["streams"])
        self.assertTrue(body["operations"]["project"]["streams"])
