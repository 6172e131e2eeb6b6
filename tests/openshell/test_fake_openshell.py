# SPDX-License-Identifier: Apache-2.0
"""The OpenShell gateway fake (tests/fakes/openshell/fake_openshell.py)
does what docs/providers/openshell-fake.md says, with real containers:
bearer and admin auth, the driver report, the sandbox lifecycle and its
read-back (names, labels and selectors, DELETING then NOT_FOUND), resource
limits that really hold, the lockdown (writes only under /tmp, no network
but loopback, no capabilities, no process reading another's memory),
ExecSandbox streaming with stdin, exit codes, timeouts and cancellation
that leave no process behind, the 1 MiB message limit, TLS and mutual TLS,
and every misbehaviour a provider test can ask for.

    cd tests/openshell && PLIMSOLL_BUILD_DIR=/work/main/build-m python3 -m unittest -v test_fake_openshell

Needs root, the docker engine, protoc, grpcio and the image
plimsoll/project:latest.  One fake serves the module (the TLS tests start
their own); one sandbox (ExecTest.sbx) is shared by the tests that only run
commands in it."""
import hashlib
import io
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import engine, require_engine  # noqa: E402
from plimsoll_test.openshell import IMAGE, FakeOpenShell, grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402  (after plimsoll_test: Debian's packages)

FAKE = None
CODE = grpc.StatusCode
LIMITS_SH = ("cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
             "echo \"$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)\"; "
             "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
# Read another process's memory (argv[1], default the parent): READ, or
# DENIED with the errno.
MEM_PY = r"""
import os, sys
pid = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
try:
    with open("/proc/%d/mem" % pid, "rb") as mem:
        with open("/proc/%d/maps" % pid) as maps:
            start = int(maps.readline().split("-")[0], 16)
        mem.seek(start)
        print("READ %d %d" % (pid, len(mem.read(16))))
except OSError as e:
    print("DENIED %d %d" % (pid, e.errno))
"""
# A parent holding a secret; its child tries /proc/<ppid>/mem,
# process_vm_readv and PTRACE_SEIZE and prints what each gave (READ or
# ATTACHED, else the errno).
SECRET_PY = r'''
import ctypes, os, subprocess, sys
secret = ctypes.create_string_buffer(os.urandom(16).hex().encode())
child = """
import ctypes, os, sys
ppid, addr, n, want = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].encode()
out = []
try:
    with open("/proc/%d/mem" % ppid, "rb") as f:
        f.seek(addr)
        out.append("mem=" + ("READ" if f.read(n) == want else "other"))
except OSError as e:
    out.append("mem=%d" % e.errno)
libc = ctypes.CDLL(None, use_errno=True)
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(n)
loc, rem = IOV(ctypes.addressof(buf), n), IOV(addr, n)
libc.process_vm_readv.restype = ctypes.c_ssize_t
got = libc.process_vm_readv(ppid, ctypes.byref(loc), ctypes.c_ulong(1), ctypes.byref(rem),
                            ctypes.c_ulong(1), ctypes.c_ulong(0))
out.append("vm=" + ("READ" if got == n and buf.raw == want else str(ctypes.get_errno())))
libc.ptrace.restype = ctypes.c_long
got = libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(ppid), None, None)
out.append("ptrace=" + ("ATTACHED" if got == 0 else str(ctypes.get_errno())))
print(" ".join(out))
"""
r = subprocess.run([sys.executable, "-c", child, str(os.getpid()), str(ctypes.addressof(secret)),
                    str(len(secret.value)), secret.value.decode()], stdout=subprocess.PIPE)
print(r.stdout.decode().strip())
'''
# Every other process's argv, one a line.
PS_PY = r"""
import os
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                print(f.read().replace(b"\0", b" ").decode().strip())
        except OSError:
            pass
"""
# SIGKILL every process whose argv (joined by spaces) is one of argv[1:].
KILL_LEFT_PY = r"""
import os, signal, sys, time
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if f.read().replace(b"\0", b" ").decode().strip() in sys.argv[1:]:
                    os.kill(int(p), signal.SIGKILL)
        except OSError:
            pass
time.sleep(0.3)
"""
WRITE_PY = r"""
import os
for d in ["/", "/etc", "/home", "/root", "/usr", "/var", "/var/tmp", "/run", "/dev", "/dev/shm",
          "/opt", "/tmp"]:
    try:
        with open(os.path.join(d, "fake-write-probe"), "w") as f:
            f.write("x")
        print("WROTE", d)
    except OSError:
        pass
"""
NET_PY = r"""
import os, socket
print("IFACES", " ".join(sorted(os.listdir("/sys/class/net"))))
try:
    socket.create_connection(("192.0.2.1", 80), 2).close()
    print("OUTSIDE connected")
except OSError as e:
    print("OUTSIDE refused", e.errno)
srv = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(srv.getsockname(), 2)
conn, _ = srv.accept()
c.sendall(b"ping")
print("LOOPBACK", conn.recv(4).decode())
"""


def setUpModule():
    global FAKE
    require_engine()
    if engine("GET", "/images/%s/json" % IMAGE)[0] != 200:
        raise RuntimeError("the image %s is missing: run scripts/docker-setup" % IMAGE)
    FAKE = FakeOpenShell().start()


def tearDownModule():
    left = FAKE.stop()
    if left or FAKE.returncode != 0:
        raise RuntimeError("the fake exited %s and left %r" % (FAKE.returncode, left))


def kind(event):
    return event.WhichOneof("payload")


def phase(name):
    return FAKE.pb.SandboxPhase.Name(FAKE.get(name).status.phase)[len("SANDBOX_PHASE_"):]


def processes(sbx_id):
    return FAKE.exec(sbx_id, ["python3", "-c", PS_PY]).stdout.decode().splitlines()


def drain(call, out):
    """Read one more event of a streaming call into out: "event", "end" or
    the status code."""
    try:
        next(call)
        out.append("event")
    except StopIteration:
        out.append("end")
    except grpc.RpcError as e:
        out.append(e.code())



def upstream_policy_hash(pol):
    """Upstream's deterministic_policy_hash (crates/openshell-server/src/grpc/
    policy.rs:5704, canonical_policy_bytes :5667-5700) of a policy whose
    endpoints carry no L7 rules and that has no middlewares, spelled out:
    the policy without its maps, length-prefixed; "network_policies", the
    count, and per key in order the key and its rule's bytes (the rule,
    then per endpoint its index and an empty graphql_persisted_queries
    map); "network_middlewares" and 0."""
    def lp(b):
        return struct.pack("<Q", len(b)) + b
    free = type(pol)()
    free.CopyFrom(pol)
    free.network_policies.clear()
    out = lp(free.SerializeToString()) + lp(b"network_policies") + \
        struct.pack("<Q", len(pol.network_policies))
    for key in sorted(pol.network_policies):
        rule = pol.network_policies[key]
        rb = lp(rule.SerializeToString()) + b"".join(
            struct.pack("<Q", i) + lp(b"graphql_persisted_queries") + struct.pack("<Q", 0)
            for i in range(len(rule.endpoints)))
        out += lp(key.encode()) + lp(rb)
    out += lp(b"network_middlewares") + struct.pack("<Q", 0)
    return hashlib.sha256(out).hexdigest()


class Base(unittest.TestCase):
    def setUp(self):
        FAKE.reset()

    def tearDown(self):
        FAKE.reset()

    def assertCode(self, code, fn, *args, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            out = fn(*args, **kw)
            if hasattr(out, "__next__"):        # a streaming call fails on reading
                list(out)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception

    def delete_quietly(self, name):
        try:
            FAKE.delete(name)
        except grpc.RpcError as e:
            if e.code() != CODE.NOT_FOUND:
                raise

    def new_sandbox(self, **kw):
        sbx = FAKE.create(**kw)
        self.addCleanup(self.delete_quietly, sbx.metadata.name)
        return sbx


class AuthTest(Base):
    def test_bearer_required(self):
        for token in (None, "wrong-token", ""):
            self.assertCode(CODE.UNAUTHENTICATED, FAKE.health, token=token)
            self.assertCode(CODE.UNAUTHENTICATED, FAKE.list, token=token)
            self.assertCode(CODE.UNAUTHENTICATED, FAKE.get, "anything", token=token)
            self.assertCode(CODE.UNAUTHENTICATED, FAKE.exec_stream, "anything", ["true"], token=token)
            self.assertCode(CODE.UNAUTHENTICATED, FAKE.info, token=token)
        calls = FAKE.state()["calls"]
        self.assertEqual(calls["Health"], {"count": 3, "authorization": ["bad", "bad", "bad"]})
        self.assertEqual(calls["ExecSandbox"]["authorization"], ["bad"] * 3)
        self.assertEqual(FAKE.health().status, FAKE.pb.SERVICE_STATUS_HEALTHY)
        self.assertEqual(FAKE.state()["calls"]["Health"]["authorization"][-1], "ok")

    def test_admin_token(self):
        e = self.assertCode(CODE.PERMISSION_DENIED, FAKE.info, token=True)
        self.assertIn("admin", e.details())
        self.assertEqual(FAKE.info(token="admin").compute_drivers[0].name, "docker")
        # The admin token is good for every other call too.
        self.assertTrue(FAKE.health(token="admin").version)

    def test_driver_report(self):
        info = FAKE.info()
        self.assertTrue(info.gateway_version)
        self.assertEqual(info.status, FAKE.pb.SERVICE_STATUS_HEALTHY)
        self.assertEqual(len(info.compute_drivers), 1)
        d = info.compute_drivers[0]
        self.assertEqual((d.name, d.capabilities.driver_name), ("docker", "docker"))
        self.assertEqual(d.capabilities.driver_version, engine("GET", "/version")[1]["Version"])
        FAKE.misbehave(driver="kubernetes")
        d = FAKE.info().compute_drivers[0]
        self.assertEqual((d.name, d.capabilities.driver_name), ("kubernetes", "kubernetes"))
        FAKE.misbehave(gateway_status="DEGRADED")
        self.assertEqual(FAKE.info().status, FAKE.pb.SERVICE_STATUS_DEGRADED)
        FAKE.misbehave(driver_denied=True)
        self.assertCode(CODE.PERMISSION_DENIED, FAKE.info)
        FAKE.reset()
        self.assertEqual(FAKE.info().compute_drivers[0].name, "docker")

    def test_fail_next(self):
        FAKE.misbehave(fail_next={"rpc": "ListSandboxes", "code": "UNAVAILABLE", "count": 2})
        self.assertEqual(FAKE.state()["misbehaviour"]["fail_next"],
                         {"ListSandboxes": {"code": "UNAVAILABLE", "count": 2}})
        self.assertCode(CODE.UNAVAILABLE, FAKE.list)
        FAKE.health()                              # other RPCs are not affected
        self.assertCode(CODE.UNAVAILABLE, FAKE.list)
        FAKE.list()
        FAKE.misbehave(fail_next={"rpc": "CreateSandbox", "code": "DEADLINE_EXCEEDED"})
        self.assertCode(CODE.DEADLINE_EXCEEDED, FAKE.create, image="no-such-image")
        # Past the injected failure the real validation answers.
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.create, image="no-such-image")

    def test_control(self):
        self.assertEqual(FAKE.control("GET", "/state", secret=False)[0], 401)
        self.assertEqual(FAKE.control("GET", "/state", secret="wrong")[0], 401)
        self.assertEqual(FAKE.control("POST", "/misbehave", {"no_such": True})[0], 400)
        self.assertEqual(FAKE.control("POST", "/misbehave", {"fail_next": {"rpc": "Nope"}})[0], 400)
        self.assertEqual(FAKE.control("POST", "/misbehave", {"attach_provider": "no-record"})[0], 400)
        self.assertEqual(FAKE.control("GET", "/nowhere")[0], 404)


class SandboxTest(Base):
    def test_lifecycle(self):
        pb = FAKE.pb
        t0 = time.time()
        req = pb.CreateSandboxRequest(name="os-life", spec=FAKE.spec(template_labels={"tpl": "1"},
                                                                      environment={"A": "b"}))
        req.labels.update({"suite": "fake", "case": "life"})
        sbx = FAKE.call("CreateSandbox", req).sandbox
        self.addCleanup(self.delete_quietly, "os-life")
        self.assertEqual(sbx.metadata.name, "os-life")
        self.assertRegex(sbx.metadata.id, r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        self.assertLessEqual(abs(sbx.metadata.created_at_ms / 1000 - t0), 5)
        self.assertEqual(dict(sbx.metadata.labels), {"suite": "fake", "case": "life"})
        self.assertEqual(sbx.spec, req.spec)
        self.assertEqual(sbx.status.sandbox_name, "os-life")
        self.assertEqual(sbx.status.phase, pb.SANDBOX_PHASE_PROVISIONING)
        ready = FAKE.wait_phase("os-life")
        self.assertEqual(ready.status.phase, pb.SANDBOX_PHASE_READY)
        self.assertEqual(ready.metadata.id, sbx.metadata.id)
        self.assertEqual(dict(ready.spec.template.labels), {"tpl": "1"})
        self.assertEqual(FAKE.exec(ready.metadata.id, ["sh", "-c", "echo $A"]).stdout, b"b\n")
        # Label selectors: every term must match.
        names = [s.metadata.name for s in FAKE.list("suite=fake,case=life")]
        self.assertEqual(names, ["os-life"])
        self.assertEqual(FAKE.list("suite=fake,case=other"), [])
        self.assertIn("os-life", [s.metadata.name for s in FAKE.list()])
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.list, "suite")
        self.assertEqual(len(FAKE.list(limit=1)), 1)
        self.assertEqual(FAKE.list("case=life", offset=1), [])
        container = FAKE.sandbox_state("os-life")["container"]
        self.assertEqual(FAKE.inspect(container)[0], 200)
        # Delete: DELETING for a moment, then NOT_FOUND, the container gone.
        self.assertTrue(FAKE.delete("os-life", wait=False).deleted)
        self.assertEqual(phase("os-life"), "DELETING")
        self.assertEqual(FAKE.list("case=life")[0].status.phase, pb.SANDBOX_PHASE_DELETING)
        self.assertTrue(FAKE.wait_for(lambda: self.gone("os-life"), timeout=30))
        self.assertEqual(FAKE.inspect(container)[0], 404)
        self.assertEqual(FAKE.list("case=life"), [])
        self.assertCode(CODE.NOT_FOUND, FAKE.delete, "os-life")
        self.assertCode(CODE.NOT_FOUND, FAKE.get, "never-was")
        self.assertCode(CODE.NOT_FOUND, FAKE.providers, "never-was")
        self.assertCode(CODE.NOT_FOUND, FAKE.policy_status, "never-was")

    @staticmethod
    def gone(name):
        try:
            FAKE.get(name)
            return False
        except grpc.RpcError as e:
            return e.code() == CODE.NOT_FOUND

    def test_names(self):
        # stuck_error sandboxes have no container: cheap to make.
        FAKE.misbehave(stuck_error=True)
        for bad in ("Upper", "-lead", "trail-", "a" * 20, "under_score", "dot.ted", "sp ace"):
            self.assertCode(CODE.INVALID_ARGUMENT, FAKE.create, name=bad, wait=False)
        longest = self.new_sandbox(name="a" * 17 + "-9", wait=False)
        self.assertEqual(longest.metadata.name, "a" * 17 + "-9")
        self.assertCode(CODE.ALREADY_EXISTS, FAKE.create, name="a" * 17 + "-9", wait=False)
        made = self.new_sandbox(wait=False)
        self.assertRegex(made.metadata.name, r"^[a-z0-9]([a-z0-9-]{0,17}[a-z0-9])?$")
        self.assertNotEqual(made.metadata.id, longest.metadata.id)

    def test_invalid_specs(self):
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.create, image="")
        e = self.assertCode(CODE.INVALID_ARGUMENT, FAKE.create, image="no-such-image:never")
        self.assertIn("unknown image", e.details())
        self.assertCode(CODE.FAILED_PRECONDITION, FAKE.create, providers=["no-such-provider"])
        for resources in ({"limits": {"cpu": "lots"}}, {"limits": {"memory": "12XB"}},
                          {"limits": {"cpu": "-1"}}, {"limits": {"memory": "0.5"}},
                          {"limits": {"gpu": "1"}}, {"limit": {"cpu": "1"}},
                          {"limits": {"cpu": "64"}}, {"limits": {"memory": "1Ki"}},
                          {"requests": {"memory": "a lot"}}):
            self.assertCode(CODE.INVALID_ARGUMENT, FAKE.create, resources=resources)
        self.assertEqual([s for s in FAKE.state()["sandboxes"] if not s["deleted"]
                          and s["phase"] == "PROVISIONING"], [])

    def test_resources_applied(self):
        res = {"limits": {"cpu": "500m", "memory": "300Mi"}, "requests": {"cpu": "250m"}}
        sbx = self.new_sandbox(image=IMAGE, resources=res)
        self.assertEqual(sbx.status.phase, FAKE.pb.SANDBOX_PHASE_READY)
        self.assertEqual(json_format.MessageToDict(sbx.spec.template.resources), res)
        out = FAKE.exec(sbx.metadata.id, ["sh", "-c", LIMITS_SH]).stdout.decode().split()
        self.assertEqual(out, ["50000", "100000", str(300 << 20)])
        host = FAKE.inspect(FAKE.sandbox_state(sbx.metadata.name)["container"])[1]["HostConfig"]
        self.assertEqual((host["NanoCpus"], host["Memory"], host["MemorySwap"]),
                         (500000000, 300 << 20, 300 << 20))
        self.assertEqual(host["Runtime"], "runc")
        self.assertEqual(host["NetworkMode"], "none")
        self.assertTrue(host["ReadonlyRootfs"])
        self.assertEqual(host["CapDrop"], ["ALL"])
        self.assertFalse(host.get("CapAdd"))
        self.assertIn("no-new-privileges", host["SecurityOpt"])
        self.assertGreater(host["PidsLimit"], 0)

    def test_main_process_death_is_final(self):
        sbx = self.new_sandbox()
        kill = ("import os, signal\n"
                "for p in os.listdir('/proc'):\n"
                "    if p.isdigit():\n"
                "        try:\n"
                "            argv = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')\n"
                "        except OSError:\n"
                "            continue\n"
                "        if argv[:2] == [b'sleep', b'infinity']:\n"
                "            os.kill(int(p), signal.SIGKILL)\n")
        FAKE.exec(sbx.metadata.id, ["python3", "-c", kill])
        self.assertTrue(FAKE.wait_for(lambda: phase(sbx.metadata.name) == "ERROR", timeout=20))
        time.sleep(0.5)
        self.assertEqual(phase(sbx.metadata.name), "ERROR")
        self.assertCode(CODE.FAILED_PRECONDITION, FAKE.exec, sbx.metadata.id, ["true"])



def left_the_group(n):
    """Shell that starts `sleep n` in a session of its own and goes on only
    once it is there: a kill of the group that comes before the setsid
    would otherwise take it too."""
    mark = "/tmp/left-%d" % n
    return ("rm -f %s; (setsid sh -c 'touch %s; exec sleep %d' &); "
            "while [ ! -e %s ]; do sleep 0.01; done; " % (mark, mark, n, mark))


class ExecTest(Base):
    """Runs commands in one shared sandbox."""

    @classmethod
    def setUpClass(cls):
        cls.sbx = FAKE.create(environment={"SPEC_VAR": "from-spec"}, labels={"suite": "exec"})
        cls.id = cls.sbx.metadata.id

    @classmethod
    def tearDownClass(cls):
        FAKE.delete(cls.sbx.metadata.name)

    def test_stream_order(self):
        call = FAKE.exec_stream(self.id, ["sh", "-c", "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three"])
        events = [(kind(e), e.stdout.data or e.stderr.data or e.exit.exit_code) for e in call]
        self.assertEqual(events, [("stdout", b"one\n"), ("stderr", b"two\n"), ("stdout", b"three\n"),
                                  ("exit", 0)])

    def test_streaming_is_live(self):
        t0 = time.monotonic()
        call = FAKE.exec_stream(self.id, ["sh", "-c", "echo first; sleep 3; echo second"])
        first = next(call)
        self.assertEqual(first.stdout.data, b"first\n")
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertEqual([kind(e) for e in call], ["stdout", "exit"])

    def test_stdin_environment_workdir(self):
        out = FAKE.exec(self.id, ["cat"], stdin=b"hello\x00world")
        self.assertEqual((out.stdout, out.exit_code), (b"hello\x00world", 0))
        out = FAKE.exec(self.id, ["sh", "-c", 'echo "$FOO|$SPEC_VAR|$HOME|$(pwd)|$(id -u)"'],
                        environment={"FOO": "bar baz", "SPEC_VAR": "overridden"}, workdir="/usr")
        self.assertEqual(out.stdout, b"bar baz|overridden|/tmp|/usr|65534\n")
        out = FAKE.exec(self.id, ["sh", "-c", 'echo "$SPEC_VAR $(pwd)"'])
        self.assertEqual(out.stdout, b"from-spec /tmp\n")
        # Without stdin the command reads end of file at once.
        self.assertEqual(FAKE.exec(self.id, ["cat"]).stdout, b"")

    def test_interactive_stdin_as_it_comes(self):
        # ExecSandboxInteractive: the start, then stdin in pieces; each
        # line is answered before the next is sent, and the half-close
        # ends the command.
        import queue
        q = queue.Queue()
        pb = FAKE.pb

        def inputs():
            yield pb.ExecSandboxInput(start=FAKE.exec_request(self.id, [
                "python3", "-u", "-c",
                "import sys\nfor line in sys.stdin: print(line.strip().upper())"]))
            while True:
                item = q.get()
                if item is None:
                    return
                yield item

        call = FAKE.exec_interactive(inputs())
        got = []
        for word in (b"one", b"two"):
            q.put(pb.ExecSandboxInput(stdin=word + b"\n"))
            q.put(pb.ExecSandboxInput(resize=pb.ExecSandboxWindowResize(cols=80, rows=24)))
            line = b""
            while not line.endswith(b"\n"):  # a line may come in pieces
                line += next(call).stdout.data
            got.append(line)
        q.put(None)
        rest = [kind(e) for e in call]
        self.assertEqual((got, rest), ([b"ONE\n", b"TWO\n"], ["exit"]))

    def test_interactive_needs_its_start(self):
        pb = FAKE.pb
        call = FAKE.exec_interactive(iter([pb.ExecSandboxInput(stdin=b"x")]))
        with self.assertRaises(grpc.RpcError) as e:
            list(call)
        self.assertEqual(e.exception.code(), CODE.INVALID_ARGUMENT)
        call = FAKE.exec_interactive(iter([]))
        with self.assertRaises(grpc.RpcError) as e:
            list(call)
        self.assertEqual(e.exception.code(), CODE.INVALID_ARGUMENT)

    def test_exit_codes(self):
        self.assertEqual(FAKE.exec(self.id, ["sh", "-c", "exit 7"]).exit_code, 7)
        self.assertEqual(FAKE.exec(self.id, ["sh", "-c", "kill -9 $$"]).exit_code, 137)
        missing = FAKE.exec(self.id, ["/no/such/program"])
        self.assertIn(missing.exit_code, (126, 127))
        self.assertTrue(missing.stderr)

    def test_large_stdin_and_chunks(self):
        data = os.urandom((1 << 20) - (16 << 10))
        out = FAKE.exec(self.id, ["sha256sum"], stdin=data)
        self.assertEqual(out.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        out = FAKE.exec(self.id, ["head", "-c", "300000", "/dev/zero"])
        sizes = [len(e.stdout.data) for e in out.events if kind(e) == "stdout"]
        self.assertEqual(sum(sizes), 300000)
        self.assertLessEqual(max(sizes), 64 << 10)
        self.assertEqual(kind(out.events[-1]), "exit")

    def test_tar_upload(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path, data in (("app/main.py", b"print(6*7)\n"), ("app/data.bin", os.urandom(200000))):
                info = tarfile.TarInfo(path)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        out = FAKE.exec(self.id, ["sh", "-c", 'mkdir -p "$1" && tar -x -C "$1"', "sh", "/tmp/upload"],
                        stdin=buf.getvalue())
        self.assertEqual(out.exit_code, 0, out)
        self.assertEqual(FAKE.exec(self.id, ["python3", "/tmp/upload/app/main.py"]).stdout, b"42\n")
        self.assertEqual(FAKE.exec(self.id, ["stat", "-c", "%s", "/tmp/upload/app/data.bin"]).stdout,
                         b"200000\n")

    def test_invalid(self):
        self.assertCode(CODE.NOT_FOUND, FAKE.exec, "00000000-0000-4000-8000-000000000000", ["true"])
        self.assertCode(CODE.NOT_FOUND, FAKE.exec, self.sbx.metadata.name, ["true"])
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.exec, self.id, [])
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.exec, self.id, ["true"], workdir="relative")
        self.assertCode(CODE.INVALID_ARGUMENT, FAKE.exec, self.id, ["true"], environment={"A=B": "c"})

    def test_upstreams_exec_limits(self):
        """validate_exec_request_fields (../shared/upstream/openshell/
        validation.rs:45-77): each refusal INVALID_ARGUMENT with upstream's
        message; each limit itself is allowed."""
        kb32 = 32 * 1024
        for args, kw, message in (
                (["true"] + ["x"] * 1024, {}, "command array exceeds 1024 argument limit"),
                (["echo", "x" * (kb32 + 1)], {}, "command argument 1 exceeds 32768 byte limit"),
                (["echo", "\u00e9" * (kb32 // 2) + "x"], {},
                 "command argument 1 exceeds 32768 byte limit"),
                (["echo", "a\0b"], {}, "command argument 1 contains null bytes"),
                (["true"], {"environment": {"V": "x" * (kb32 + 1)}},
                 "environment value for 'V' exceeds 32768 byte limit"),
                (["true"], {"environment": {"V": "a\nb"}},
                 "environment value for 'V' contains newline or carriage return characters"),
                (["true"], {"environment": {"1V": "a"}}, "environment keys must match"),
                (["true"], {"environment": {"OPENSHELL_X": "a"}},
                 "keys starting with OPENSHELL_ are reserved"),
                (["true"], {"workdir": "/" + "w" * 4096}, "workdir exceeds 4096 byte limit"),
                (["true"], {"workdir": "/tmp\r"},
                 "workdir contains newline or carriage return characters")):
            with self.subTest(message):
                e = self.assertCode(CODE.INVALID_ARGUMENT, FAKE.exec, self.id, args, **kw)
                self.assertIn(message, e.details())
        # At the limits: 1024 arguments, one of 32 KiB, a 32 KiB value, and
        # newlines in an argument (inline scripts) are upstream's to allow.
        out = FAKE.exec(self.id, ["sh", "-c", 'printf %s "$#"', "sh"] + ["y"] * 1020)
        self.assertEqual(out.stdout, b"1020")
        out = FAKE.exec(self.id, ["sh", "-c", 'printf "%s " "${#1}"; printf %s "$V" | wc -c',
                                  "sh", "z" * kb32], environment={"V": "v" * kb32,
                                                                  "OPENSHELL_PYFUNC_B64": "e30="})
        self.assertEqual(out.stdout, b"32768 32768\n")
        self.assertEqual(FAKE.exec(self.id, ["sh", "-c", "echo a\necho b"]).stdout, b"a\nb\n")
        # The interactive start is held to the same rules.
        call = FAKE.exec_interactive(iter([FAKE.pb.ExecSandboxInput(
            start=FAKE.exec_request(self.id, ["echo", "x" * (kb32 + 1)]))]))
        with self.assertRaises(grpc.RpcError) as e:
            list(call)
        self.assertEqual(e.exception.code(), CODE.INVALID_ARGUMENT)

    def test_message_limit(self):
        e = self.assertCode(CODE.RESOURCE_EXHAUSTED, FAKE.exec, self.id, ["cat"], stdin=b"x" * ((1 << 20) + 1))
        self.assertIn("larger than max", e.details())
        req = FAKE.pb.CreateSandboxRequest(spec=FAKE.spec())
        req.labels["big"] = "y" * (1 << 20)
        self.assertCode(CODE.RESOURCE_EXHAUSTED, FAKE.call, "CreateSandbox", req)

    def test_timeout_kills_the_tree(self):
        t0 = time.monotonic()
        out = FAKE.exec(self.id, ["sh", "-c", "(setsid sleep 1001 &); echo started; sleep 1002"], timeout_seconds=1)
        self.assertEqual((out.stdout, out.exit_code), (b"started\n", 124))
        self.assertLess(time.monotonic() - t0, 6)
        left = processes(self.id)
        self.assertNotIn("sleep 1001", left)
        self.assertNotIn("sleep 1002", left)
        self.assertEqual(FAKE.state()["execs"][0]["state"], "timed out")

    def test_cancel_kills_the_tree(self):
        call = FAKE.exec_stream(self.id, ["sh", "-c", "(setsid sleep 1003 &); sleep 1004 & echo started; sleep 1005"])
        self.assertEqual(next(call).stdout.data, b"started\n")
        self.assertTrue({"sleep 1003", "sleep 1004", "sleep 1005"} <= set(processes(self.id)))
        call.cancel()
        self.assertTrue(FAKE.wait_for(
            lambda: not {"sleep 1003", "sleep 1004", "sleep 1005"} & set(processes(self.id)), timeout=10))
        self.assertTrue(FAKE.wait_for(lambda: FAKE.state()["execs"][0]["state"] == "cancelled"))

    def test_a_gateway_that_kills_only_the_group(self):
        """exec_kill "group": a timed-out or cancelled command's process
        group ends, a process that left it with setsid stays (upstream
        documents only the 124)."""
        FAKE.misbehave(exec_kill="group")
        out = FAKE.exec(self.id, ["sh", "-c", left_the_group(1011) + "sleep 1012 & echo started; "
                                  "sleep 1013"], timeout_seconds=1)
        self.assertEqual((out.stdout, out.exit_code), (b"started\n", 124))
        call = FAKE.exec_stream(self.id, ["sh", "-c", left_the_group(1014) + "sleep 1015 & "
                                          "echo started; sleep 1016"])
        self.assertEqual(next(call).stdout.data, b"started\n")
        call.cancel()
        self.assertTrue(FAKE.wait_for(
            lambda: not {"sleep 1012", "sleep 1013", "sleep 1015", "sleep 1016"}
            & set(processes(self.id)), timeout=10))
        time.sleep(1)
        left = set(processes(self.id))
        self.assertTrue({"sleep 1011", "sleep 1014"} <= left, left)
        FAKE.exec(self.id, ["python3", "-c", KILL_LEFT_PY, "sleep 1011", "sleep 1014"])
        self.assertFalse({"sleep 1011", "sleep 1014"} & set(processes(self.id)))

    def test_hang_after_exit(self):
        FAKE.misbehave(exec_hang_after_exit=True)
        call = FAKE.exec_stream(self.id, ["echo", "hi"])
        events = []
        for e in call:
            events.append(kind(e))
            if kind(e) == "exit":
                break
        self.assertEqual(events, ["stdout", "exit"])
        more = []
        reader = threading.Thread(target=drain, args=(call, more), daemon=True)
        reader.start()
        reader.join(1.0)
        self.assertTrue(reader.is_alive(), more)       # the stream has not ended
        self.assertEqual(FAKE.state()["execs"][0]["state"], "hanging")
        call.cancel()
        reader.join(10)
        self.assertEqual(more, [CODE.CANCELLED])

    def test_exec_log(self):
        FAKE.exec(self.id, ["true"], environment={"SECRET_NAME": "value"})
        FAKE.exec(self.id, ["sh", "-c", "exit 3"])
        st = FAKE.state()
        self.assertEqual(st["exec_count"], 2)
        self.assertEqual([e["argv"] for e in st["execs"]], [["true"], ["sh", "-c", "exit 3"]])
        self.assertEqual(st["execs"][0]["env"], ["SECRET_NAME"])
        self.assertEqual([e["exit_code"] for e in st["execs"]], [0, 3])
        self.assertEqual(st["calls"]["ExecSandbox"], {"count": 2, "authorization": ["ok", "ok"]})

    # -- the lockdown

    def test_user_and_privileges(self):
        out = FAKE.exec(self.id, ["sh", "-c", "id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status"])
        lines = out.stdout.decode().split("\n")
        self.assertEqual(lines[0], "65534")
        status = dict(line.split(":\t") for line in lines[1:] if line)
        self.assertEqual(status, {"CapPrm": "0000000000000000", "CapEff": "0000000000000000",
                                  "NoNewPrivs": "1", "Seccomp": "2"})

    def test_writes_only_under_tmp(self):
        out = FAKE.exec(self.id, ["python3", "-c", WRITE_PY])
        self.assertEqual(out.stdout, b"WROTE /tmp\n", out)

    def test_no_network_but_loopback(self):
        out = FAKE.exec(self.id, ["python3", "-c", NET_PY]).stdout.decode().splitlines()
        self.assertEqual(out[0], "IFACES lo")
        self.assertTrue(out[1].startswith("OUTSIDE refused"), out)
        self.assertEqual(out[2], "LOOPBACK ping")

    def test_no_process_reads_another_memory(self):
        # A child of python tries its parent's secret three ways (as the
        # provider's startup proof does).
        out = FAKE.exec(self.id, ["python3", "-c", SECRET_PY]).stdout.decode()
        self.assertRegex(out, r"^mem=(1|13) vm=(1|13) ptrace=(1|13)\n$")
        # A python child of sh; the init (PID 1).
        for argv in (["sh", "-c", 'python3 -c "$1"; true', "sh", MEM_PY], ["python3", "-c", MEM_PY, "1"]):
            out = FAKE.exec(self.id, argv).stdout.decode()
            self.assertRegex(out, r"^DENIED \d+ (1|13)\n$", argv)


class MisbehaviourTest(Base):
    @classmethod
    def policy(cls):
        pb = FAKE.pb
        pol = pb.SandboxPolicy(version=1)
        pol.filesystem.read_write.extend(["/tmp"])
        pol.process.run_as_user = "sandbox"
        rule = pol.network_policies["pypi"]
        rule.name = "pypi"
        rule.endpoints.add(host="pypi.org", port=443)
        pol.network_policies["npm"].name = "npm"
        return pol

    def test_the_hash_is_upstreams(self):
        """The order of map entries and of endpoints: the first does not
        change upstream's hash, the second does (policy.rs:5667-5700 sorts
        maps and keeps repeated fields in order)."""
        a = self.policy()
        b = FAKE.pb.SandboxPolicy(version=1)
        b.process.run_as_user = "sandbox"
        b.network_policies["npm"].name = "npm"
        rule = b.network_policies["pypi"]
        rule.name = "pypi"
        rule.endpoints.add(host="pypi.org", port=443)
        b.filesystem.read_write.extend(["/tmp"])
        c = self.policy()
        c.network_policies["pypi"].endpoints.add(host="files.pythonhosted.org", port=443)
        d = self.policy()
        d.network_policies["pypi"].endpoints.insert(0, FAKE.pb.NetworkEndpoint(
            host="files.pythonhosted.org", port=443))
        hashes = []
        for pol in (a, b, c, d):
            sbx = self.new_sandbox(policy=pol)
            hashes.append(FAKE.policy_status(sbx.metadata.name).revision.policy_hash)
        self.assertEqual(hashes[0], hashes[1])
        self.assertEqual(hashes[0], upstream_policy_hash(a))
        self.assertEqual(hashes[2], upstream_policy_hash(c))
        self.assertNotEqual(hashes[2], hashes[3])
        self.assertEqual(len(set(hashes[1:])), 3)

    def test_no_drift(self):
        FAKE.provider("declared", {"TOKEN": "declared-secret"})
        pol = self.policy()
        sbx = self.new_sandbox(labels={"owner": "plimsoll"}, providers=["declared"], policy=pol)
        got = FAKE.get(sbx.metadata.name)
        self.assertEqual(dict(got.metadata.labels), {"owner": "plimsoll"})
        self.assertEqual(got.spec.template.image, "base")
        st = FAKE.policy_status(sbx.metadata.name)
        self.assertEqual(st.revision.policy_hash,
                         upstream_policy_hash(pol))
        self.assertEqual((st.revision.version, st.revision.status, st.active_version),
                         (1, FAKE.pb.POLICY_STATUS_LOADED, 1))
        self.assertEqual(FAKE.policy_status(sbx.metadata.name, version=1), st)
        self.assertCode(CODE.NOT_FOUND, FAKE.policy_status, sbx.metadata.name, version=2)
        provs = FAKE.providers(sbx.metadata.name)
        self.assertEqual([(p.metadata.name, dict(p.credentials)) for p in provs], [("declared", {"TOKEN": "declared-secret"})])

    def check_real(self, sbx, labels, memory):
        """The container is as asked, whatever the read-back says."""
        st = FAKE.sandbox_state(sbx.metadata.name)
        self.assertEqual(st["labels"], labels)
        self.assertEqual(st["phase"], "READY")
        c = FAKE.inspect(st["container"])[1]
        self.assertEqual(c["Config"]["Image"], IMAGE)
        self.assertEqual(c["HostConfig"]["Memory"], memory)

    def test_drift_defaults(self):
        FAKE.provider("declared", {"TOKEN": "declared-secret"})
        FAKE.misbehave(drift_labels=True, drift_image=True, drift_limits=True, drift_policy_hash=True,
                       attach_provider=True)
        pol = self.policy()
        sbx = self.new_sandbox(labels={"owner": "plimsoll"}, providers=["declared"], policy=pol,
                               resources={"limits": {"cpu": "1", "memory": "512Mi"}})
        FAKE.reset()                   # drift stays with the sandboxes made under it
        for got in (FAKE.get(sbx.metadata.name), FAKE.list("fake-drift=true")[0]):
            self.assertEqual(dict(got.metadata.labels), {"owner": "plimsoll-drifted", "fake-drift": "true"})
            self.assertEqual(got.spec.template.image, "base-drifted")
            self.assertEqual(dict(got.spec.template.resources["limits"]), {"cpu": "4", "memory": "8Gi"})
        self.assertEqual(FAKE.list("owner=plimsoll"), [])
        st = FAKE.policy_status(sbx.metadata.name)
        self.assertNotEqual(st.revision.policy_hash,
                            upstream_policy_hash(pol))
        self.assertRegex(st.revision.policy_hash, "^[0-9a-f]{64}$")
        provs = {p.metadata.name: dict(p.credentials) for p in FAKE.providers(sbx.metadata.name)}
        self.assertEqual(provs, {"declared": {"TOKEN": "declared-secret"},
                                 "fake-attached": {"API_KEY": "fake-attached-secret"}})
        self.check_real(sbx, {"owner": "plimsoll"}, 512 << 20)

    def test_drift_values(self):
        FAKE.misbehave(drift_labels={"owner": "someone-else", "extra": "1"}, drift_image="other/image:1",
                       drift_limits={"limits": {"cpu": "2"}}, drift_policy_hash="00" * 32,
                       attach_provider={"name": "leaked", "credentials": {"KEY": "leaked-secret"}})
        sbx = self.new_sandbox(labels={"owner": "plimsoll"}, image=IMAGE,
                               resources={"limits": {"memory": "256Mi"}})
        got = FAKE.get(sbx.metadata.name)
        self.assertEqual(dict(got.metadata.labels), {"owner": "someone-else", "extra": "1"})
        self.assertEqual(got.spec.template.image, "other/image:1")
        self.assertEqual(dict(got.spec.template.resources["limits"]), {"cpu": "2"})
        self.assertEqual(FAKE.policy_status(sbx.metadata.name).revision.policy_hash, "00" * 32)
        self.assertEqual([(p.metadata.name, dict(p.credentials)) for p in FAKE.providers(sbx.metadata.name)],
                         [("leaked", {"KEY": "leaked-secret"})])
        self.check_real(sbx, {"owner": "plimsoll"}, 256 << 20)

    def test_stuck_error(self):
        FAKE.misbehave(stuck_error=True)
        sbx = self.new_sandbox()
        self.assertEqual(phase(sbx.metadata.name), "ERROR")
        time.sleep(0.5)
        got = FAKE.get(sbx.metadata.name)
        self.assertEqual(got.status.phase, FAKE.pb.SANDBOX_PHASE_ERROR)
        self.assertEqual(got.status.conditions[0].status, "False")
        self.assertIsNone(FAKE.sandbox_state(sbx.metadata.name)["container_id"])
        self.assertCode(CODE.FAILED_PRECONDITION, FAKE.exec, sbx.metadata.id, ["true"])
        self.assertEqual(FAKE.policy_status(sbx.metadata.name).revision.status, FAKE.pb.POLICY_STATUS_PENDING)
        FAKE.delete(sbx.metadata.name)

    def test_plant(self):
        labels = {"plimsoll.instance": "other-daemon", "plimsoll.managed": "true"}
        planted = FAKE.plant(name="planted-one", labels=labels)
        self.addCleanup(self.delete_quietly, "planted-one")
        self.assertEqual((planted["name"], planted["phase"]), ("planted-one", "READY"))
        got = FAKE.get("planted-one")
        self.assertEqual(dict(got.metadata.labels), labels)
        self.assertEqual(got.metadata.id, planted["id"])
        self.assertEqual([s.metadata.name for s in FAKE.list("plimsoll.instance=other-daemon")], ["planted-one"])
        self.assertTrue(FAKE.sandbox_state("planted-one")["planted"])
        self.assertEqual(FAKE.inspect(planted["container"])[1]["Config"]["Labels"]["plimsoll-fake-openshell"],
                         FAKE.instance)
        self.assertEqual(FAKE.exec(planted["id"], ["echo", "alive"]).stdout, b"alive\n")
        # Misbehaviours do not apply to planted sandboxes.
        FAKE.misbehave(drift_labels=True, stuck_error=True)
        other = FAKE.plant(labels={"k": "v"})
        self.addCleanup(self.delete_quietly, other["name"])
        self.assertEqual(other["phase"], "READY")
        self.assertEqual(dict(FAKE.get(other["name"]).metadata.labels), {"k": "v"})


class TlsTest(unittest.TestCase):
    """TLS with a self-signed certificate, and mutual TLS; these fakes have
    no admin token (the plain token is admin) and room for one sandbox."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        for name, extra in (("server", ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]), ("client", [])):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=" + name, "-keyout", os.path.join(d, name + ".key"),
                            "-out", os.path.join(d, name + ".pem")] + extra,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.tls = FakeOpenShell(admin_token=None, max_sandboxes=1, tls_cert=os.path.join(d, "server.pem"),
                                tls_key=os.path.join(d, "server.key")).start()
        cls.mtls = FakeOpenShell(tls_cert=os.path.join(d, "server.pem"), tls_key=os.path.join(d, "server.key"),
                                 client_ca=os.path.join(d, "client.pem"),
                                 client_cert=os.path.join(d, "client.pem"),
                                 client_key=os.path.join(d, "client.key")).start()

    @classmethod
    def tearDownClass(cls):
        left = cls.tls.stop() + cls.mtls.stop()
        cls.dir.cleanup()
        if left or cls.tls.returncode != 0 or cls.mtls.returncode != 0:
            raise RuntimeError("a TLS fake exited %s/%s and left %r" % (cls.tls.returncode, cls.mtls.returncode, left))

    def test_tls(self):
        self.assertEqual(self.tls.health().status, self.tls.pb.SERVICE_STATUS_HEALTHY)
        self.assertEqual(self.tls.info(token=True).compute_drivers[0].name, "docker")
        plain = grpc.insecure_channel(self.tls.address)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                self.tls.call("Health", channel=plain, timeout=5)
            self.assertEqual(cm.exception.code(), CODE.UNAVAILABLE)
        finally:
            plain.close()

    def test_mutual_tls(self):
        self.assertEqual(self.mtls.health().status, self.mtls.pb.SERVICE_STATUS_HEALTHY)
        bare = self.mtls.open_channel(cert=False)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                self.mtls.call("Health", channel=bare, timeout=5)
            self.assertEqual(cm.exception.code(), CODE.UNAVAILABLE)
        finally:
            bare.close()

    def test_max_sandboxes(self):
        sbx = self.tls.create()
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                self.tls.create()
            self.assertEqual(cm.exception.code(), CODE.RESOURCE_EXHAUSTED)
        finally:
            self.tls.delete(sbx.metadata.name)
        self.tls.misbehave(stuck_error=True)       # room again once it is gone
        self.tls.delete(self.tls.create().metadata.name)


if __name__ == "__main__":
    unittest.main()
