# SPDX-License-Identifier: Apache-2.0
"""gRPC's health checking (grpc.health.v1.Health) and server reflection on
the daemon's one port, against real wasm daemons.

Health through a client generated at test time by Debian's
python3-grpc-tools from a health.proto this module writes from the
protocol's documented messages (not the repository's proto/): Check
SERVING on a ready daemon, NOT_SERVING when the wasm worker is taken away
(as /readyz), NOT_FOUND for an unknown service, Watch seeing the change,
SERVICE_UNKNOWN, the Watch caps and deadline; Check over gRPC-Web and
Connect too; PLIMSOLL_HEALTH and PLIMSOLL_REFLECTION.  Reflection's
hostile cases through python3-grpcio's raw streams and HTTP/2 by hand:
no key, a huge message, endless requests, malformed messages, a stream
that never sends, a peer that never reads.  Reflection and Watch over
Connect's streaming protocol (curl, and HTTP/2 by hand): the answers and
end messages, Connect's JSON, the envelope's flags, Connect-Protocol-
Version, refusals as end messages, 505 over HTTP/1.1, and every budget
at its edge (the message's bytes, the messages, the streams, the
deadline, the answers unread).  /metrics's method labels for them.

Run: cd tests/api && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_grpc_health
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test import h2raw, rawhttp  # noqa: E402
from plimsoll_test.harness import BUILD, Daemon, error_info, run_startup  # noqa: E402

try:
    import grpc
except ImportError:  # Debian's python3-grpcio, from another python3
    sys.path.append("/usr/lib/python3/dist-packages")
    import grpc

WASM = {"SANDBOX_PROVIDER": "wasm"}
CHECK = "/grpc.health.v1.Health/Check"
REFLECT = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
REFLECT_ALPHA = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
WATCH = "/grpc.health.v1.Health/Watch"

# Written from the health checking protocol's documentation (gRPC's
# doc/health-checking.md): the messages, their field numbers, the service.
HEALTH_PROTO = """
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"""


def generated_health():
    """health_pb2 and health_pb2_grpc, generated now by grpc_tools."""
    gen = tempfile.mkdtemp(prefix="plimsoll-health-")
    with open(os.path.join(gen, "health.proto"), "w") as f:
        f.write(HEALTH_PROTO)
    subprocess.run(["/usr/bin/python3", "-m", "grpc_tools.protoc", "-I", gen,
                    "--python_out=" + gen, "--grpc_python_out=" + gen, "health.proto"],
                   check=True)
    sys.path.insert(0, gen)
    import health_pb2
    import health_pb2_grpc
    return health_pb2, health_pb2_grpc


pb, pb_grpc = generated_health()


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, raw):
    return varint(num << 3 | 2) + varint(len(raw)) + raw


def envelope(msg):
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


def list_services():
    return field(7, b"*")


def symbol(name):
    return field(4, name.encode())


def channel(target):
    """A channel with a connection of its own (grpcio shares one among a
    process's channels to one target otherwise)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def wasm_daemon(**env):
    tmp = tempfile.mkdtemp()
    for w in ("plimsoll-js-worker", "plimsoll-wasi-worker"):
        shutil.copy2(os.path.join(BUILD, w), tmp)
    e = dict(WASM, SANDBOX_WASM_WORKER_DIR=tmp)
    e.update(env)
    return Daemon(env=e).start(), os.path.join(tmp, "plimsoll-js-worker")


class Health(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d, cls.worker = wasm_daemon(PLIMSOLL_HEALTH_WATCH_STREAMS_PER_CONNECTION="2",
                                        PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS="3000")
        cls.target = "%s:%d" % (cls.d.host, cls.d.port)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.d.check_sanitizers()

    def stub(self):
        ch = channel(self.target)
        self.addCleanup(ch.close)
        return pb_grpc.HealthStub(ch)

    def test_check_follows_readyz(self):
        stub = self.stub()
        for service in ("", "plimsoll.v1.SandboxService"):
            r = stub.Check(pb.HealthCheckRequest(service=service), timeout=10)
            self.assertEqual(r.status, pb.HealthCheckResponse.SERVING, service)
        os.rename(self.worker, self.worker + ".away")
        try:
            self.assertEqual(self.d.request("GET", "/readyz")[0], 503)
            r = stub.Check(pb.HealthCheckRequest(), timeout=10)
            self.assertEqual(r.status, pb.HealthCheckResponse.NOT_SERVING)
        finally:
            os.rename(self.worker + ".away", self.worker)
        self.assertEqual(stub.Check(pb.HealthCheckRequest(), timeout=10).status,
                         pb.HealthCheckResponse.SERVING)

    def test_check_unknown_service_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub().Check(pb.HealthCheckRequest(service="nope.v1.Nothing"), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_check_needs_no_key_and_refuses_a_wrong_one(self):
        stub = self.stub()
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Check(pb.HealthCheckRequest(), timeout=10,
                       metadata=[("authorization", "Bearer plk_wrong")])
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        r = stub.Check(pb.HealthCheckRequest(), timeout=10,
                       metadata=[("authorization", "Bearer " + self.d.keys["alice"])])
        self.assertEqual(r.status, pb.HealthCheckResponse.SERVING)

    def test_check_over_connect_and_grpc_web(self):
        status, _, body = self.d.request("POST", CHECK, b'{"service": ""}',
                                         {"Content-Type": "application/json"})
        self.assertEqual((status, json.loads(body)), (200, {"status": "SERVING"}))
        status, _, body = self.d.request("POST", CHECK, b"",
                                         {"Content-Type": "application/proto"})
        self.assertEqual((status, body), (200, b"\x08\x01"))
        status, hdrs, body = self.d.request("POST", CHECK, envelope(b""),
                                            {"Content-Type": "application/grpc-web+proto"})
        self.assertEqual(status, 200)
        self.assertTrue(body.startswith(envelope(b"\x08\x01")), body)
        self.assertIn(b"grpc-status:0", body)
        status, _, body = self.d.request("POST", CHECK, b'{"service": "x"}',
                                         {"Content-Type": "application/json"})
        self.assertEqual(status, 404)
        self.assertEqual(error_info(json.loads(body))[0]["reason"], "NOT_FOUND")
        for bad in (b'{"service": 1}', b'{"servic": ""}', b"[]", b"{"):
            status, _, body = self.d.request("POST", CHECK, bad,
                                             {"Content-Type": "application/json"})
            self.assertEqual(status, 400, bad)
            self.assertEqual(error_info(json.loads(body))[0]["reason"], "INVALID_REQUEST", bad)

    def test_check_malformed_protobuf(self):
        ch = grpc.insecure_channel(self.target)
        self.addCleanup(ch.close)
        check = ch.unary_unary(CHECK, request_serializer=None, response_deserializer=None)
        for bad in (b"\x0a\x05ab", b"\x0a\x02\xff\xfe", b"\x08", b"\x0b", b"\x00\x01",
                    b"\x0a\x01a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"):
            with self.assertRaises(grpc.RpcError) as cm:
                check(bad, timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, bad)
        # an unknown field is skipped, as protobuf has it
        self.assertEqual(check(b"\x10\x05" + field(1, b""), timeout=10), b"\x08\x01")

    def test_watch_sees_the_change(self):
        stub = self.stub()
        it = stub.Watch(pb.HealthCheckRequest(service=""), timeout=30)
        self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
        os.rename(self.worker, self.worker + ".away")
        try:
            self.assertEqual(next(it).status, pb.HealthCheckResponse.NOT_SERVING)
        finally:
            os.rename(self.worker + ".away", self.worker)
        self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
        it.cancel()

    def test_watch_unknown_service(self):
        it = self.stub().Watch(pb.HealthCheckRequest(service="nope"), timeout=30)
        self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVICE_UNKNOWN)
        it.cancel()

    def test_watch_ends_cleanly_at_its_deadline(self):
        t0 = time.monotonic()
        statuses = [r.status for r in
                    self.stub().Watch(pb.HealthCheckRequest(), timeout=60)]  # ends with OK
        self.assertEqual(statuses, [pb.HealthCheckResponse.SERVING])
        self.assertLess(time.monotonic() - t0, 55)
        lines = [x for x in self.d.log_lines() if x.get("method") == "health.Watch"
                 and x.get("ended") == "PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS"]
        self.assertTrue(lines)

    def test_watch_streams_per_connection(self):
        stub = self.stub()
        held = [stub.Watch(pb.HealthCheckRequest(), timeout=30) for _ in range(2)]
        for it in held:
            self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
        third = stub.Watch(pb.HealthCheckRequest(), timeout=30)
        with self.assertRaises(grpc.RpcError) as cm:
            next(third)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("PLIMSOLL_HEALTH_WATCH_STREAMS_PER_CONNECTION", cm.exception.details())
        # another connection has its own share
        other = self.stub().Watch(pb.HealthCheckRequest(), timeout=30)
        self.assertEqual(next(other).status, pb.HealthCheckResponse.SERVING)
        for it in held + [other]:
            it.cancel()

    def test_watch_is_grpc_over_http2(self):
        status, _, body = self.d.request("POST", "/grpc.health.v1.Health/Watch", envelope(b""),
                                         {"Content-Type": "application/grpc-web+proto"})
        self.assertEqual(status, 200)  # gRPC-Web's trailers-only answer
        self.assertNotEqual(_.get("grpc-status"), "0")
        self.assertIn("over HTTP/2", _.get("grpc-message", ""))

    def test_watch_hostile_requests(self):
        ch = grpc.insecure_channel(self.target)
        self.addCleanup(ch.close)
        watch = ch.stream_stream("/grpc.health.v1.Health/Watch", request_serializer=None,
                                 response_deserializer=None)
        cases = {"two requests": [b"", b""], "malformed": [b"\x0a\x09"],
                 "too large": [field(1, b"x" * 100000)], "none": []}
        for name, msgs in cases.items():
            it = watch(iter(msgs), timeout=10)
            with self.assertRaises(grpc.RpcError) as cm:
                list(it)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, name)


class WatchCap(unittest.TestCase):
    def test_watch_streams_in_total(self):
        d = Daemon(env=dict(WASM, PLIMSOLL_HEALTH_WATCH_STREAMS="3")).start()
        try:
            chans = [channel("%s:%d" % (d.host, d.port)) for _ in range(4)]
            its = []
            for ch in chans[:3]:
                it = pb_grpc.HealthStub(ch).Watch(pb.HealthCheckRequest(), timeout=30)
                self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
                its.append(it)
            with self.assertRaises(grpc.RpcError) as cm:
                next(pb_grpc.HealthStub(chans[3]).Watch(pb.HealthCheckRequest(), timeout=30))
            self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn("PLIMSOLL_HEALTH_WATCH_STREAMS", cm.exception.details())
            its[0].cancel()
            time.sleep(0.5)  # the cancel reaches the daemon; the slot comes back
            it = pb_grpc.HealthStub(chans[3]).Watch(pb.HealthCheckRequest(), timeout=30)
            self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
            it.cancel()
            for it in its[1:]:
                it.cancel()
            for ch in chans:
                ch.close()
        finally:
            d.stop()

    def test_watch_sees_the_drain(self):
        d = Daemon(env=WASM).start()
        ch = grpc.insecure_channel("%s:%d" % (d.host, d.port))
        try:
            it = pb_grpc.HealthStub(ch).Watch(pb.HealthCheckRequest(), timeout=30)
            self.assertEqual(next(it).status, pb.HealthCheckResponse.SERVING)
            stopper = threading.Thread(target=d.stop)
            stopper.start()
            rest = [r.status for r in it]  # NOT_SERVING, then the stream ends with OK
            stopper.join()
            self.assertEqual(rest, [pb.HealthCheckResponse.NOT_SERVING])
        finally:
            ch.close()
            if d.proc.poll() is None:
                d.stop()


class Reflection(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env=dict(WASM, PLIMSOLL_REFLECTION_MESSAGES="20",
                                PLIMSOLL_REFLECTION_TIMEOUT_MS="2000",
                                PLIMSOLL_REFLECTION_STREAMS="3",
                                PLIMSOLL_ANSWER_SEND_TIMEOUT_MS="1000")).start()
        cls.ch = grpc.insecure_channel("%s:%d" % (cls.d.host, cls.d.port))

    @classmethod
    def tearDownClass(cls):
        cls.ch.close()
        cls.d.stop()
        cls.d.check_sanitizers()

    def reflect(self, msgs, key="alice", path=REFLECT, timeout=10):
        call = self.ch.stream_stream(path, request_serializer=None, response_deserializer=None)
        md = [("authorization", "Bearer " + self.d.keys[key])] if key else []
        return list(call(iter(msgs), timeout=timeout, metadata=md))

    def test_answers_one_per_request_in_order(self):
        for path in (REFLECT, REFLECT_ALPHA):
            out = self.reflect([list_services(), symbol("plimsoll.v1.SandboxService.Run"),
                                symbol("nope.Nothing"), field(3, b"plimsoll/v1/sandbox.proto")],
                               path=path)
            self.assertEqual(len(out), 4)
            self.assertIn(b"plimsoll.v1.SandboxService", out[0])
            self.assertIn(b"grpc.health.v1.Health", out[0])
            self.assertIn(b"sandbox.proto", out[1])
            self.assertIn(b"symbol not found", out[2])
            self.assertIn(b"sandbox.proto", out[3])

    def test_without_a_key_nothing_leaks(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.reflect([list_services()], key=None)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertNotIn("SandboxService", cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            call = self.ch.stream_stream(REFLECT, request_serializer=None,
                                         response_deserializer=None)
            list(call(iter([symbol("plimsoll.v1.RunRequest")]), timeout=10,
                      metadata=[("authorization", "Bearer plk_nobody")]))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_a_huge_message(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.reflect([symbol("x" * 1000000)])
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("PLIMSOLL_REFLECTION_MESSAGE_BYTES", cm.exception.details())
        # at the edge: 4096 bytes is answered, 4097 refused
        edge = symbol("y" * (4096 - 3))
        self.assertEqual(len(edge), 4096)
        self.assertEqual(len(self.reflect([edge])), 1)
        with self.assertRaises(grpc.RpcError):
            self.reflect([symbol("y" * (4096 - 2))])

    def test_endless_requests(self):
        self.assertEqual(len(self.reflect([list_services()] * 20)), 20)
        with self.assertRaises(grpc.RpcError) as cm:
            self.reflect(list_services() for _ in range(100000))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("PLIMSOLL_REFLECTION_MESSAGES", cm.exception.details())

    def test_malformed_messages(self):
        for bad in (b"\x3a\x05ab", b"\x22\x02\xff\xfe", b"\x2a\x03\x08\x01", b"\x03",
                    b"\x00\x00", b"\x3a"):
            with self.assertRaises(grpc.RpcError) as cm:
                self.reflect([bad])
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, bad)
        # the questions answered NOT_FOUND, each in its error_response
        out = self.reflect([field(5, field(1, b"plimsoll.v1.RunRequest") + b"\x10\x07"),
                            field(6, b"nope.Type"), field(6, b"plimsoll.v1.RunRequest"), b""])
        self.assertIn(b"\x08\x05", out[0])  # error_code 5
        self.assertIn(b"message type not found", out[1])
        self.assertIn(field(1, b"plimsoll.v1.RunRequest"), out[2])
        self.assertIn(b"\x08\x03", out[3])  # no question: INVALID_ARGUMENT

    def test_a_stream_that_never_sends(self):
        gate = threading.Event()
        self.addCleanup(gate.set)

        def never():
            gate.wait(30)
            return
            yield

        t0 = time.monotonic()
        self.assertEqual(self.reflect(never(), timeout=30), [])  # ended with OK
        self.assertLess(time.monotonic() - t0, 25)
        self.assertTrue([x for x in self.d.log_lines() if x.get("method") == "reflection"
                         and x.get("ended") == "PLIMSOLL_REFLECTION_TIMEOUT_MS"])

    def test_streams_at_once(self):
        conns = []
        for i in range(3):
            c = h2raw.Conn(self.d)
            hdrs = h2raw.request_headers("", self.d.keys["alice"], "application/grpc")
            hdrs[2] = (":path", REFLECT)
            c.headers(1, hdrs)  # and nothing more: the stream is held
            conns.append(c)
        time.sleep(0.3)
        with self.assertRaises(grpc.RpcError) as cm:
            self.reflect([list_services()])
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("PLIMSOLL_REFLECTION_STREAMS", cm.exception.details())
        for c in conns:
            c.close()
        time.sleep(0.5)
        self.assertEqual(len(self.reflect([list_services()])), 1)

    def test_a_peer_that_never_reads(self):
        c = h2raw.Conn(self.d, preface=False)
        # no window for the daemon's DATA: every answer waits in the daemon
        c.send(h2raw.PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0, b"\x00\x04\x00\x00\x00\x00"))
        hdrs = h2raw.request_headers("", self.d.keys["alice"], "application/grpc")
        hdrs[2] = (":path", REFLECT)
        c.headers(1, hdrs)
        for _ in range(19):
            c.data(1, envelope(symbol("plimsoll.v1.SandboxService")), end_stream=False)
        f, _ = c.until(lambda f: f[2] == 1 and f[0] == h2raw.RST_STREAM, timeout=20)
        self.assertIsNotNone(f)  # cut at PLIMSOLL_ANSWER_SEND_TIMEOUT_MS
        c.close()
        self.assertEqual(len(self.reflect([list_services()])), 1)


def connect_frames(body):
    """A Connect stream's body as [(flags, payload)]; the end message's
    payload parsed as JSON."""
    out, i = [], 0
    while i < len(body):
        flags, n = body[i], int.from_bytes(body[i + 1:i + 5], "big")
        payload = body[i + 5:i + 5 + n]
        assert len(payload) == n, "a cut message: %r" % body[i:i + 40]
        out.append((flags, json.loads(payload) if flags & 2 else payload))
        i += 5 + n
    return out


class ConnectStreams(unittest.TestCase):
    """Reflection and Watch over Connect's streaming protocol (HTTP/2),
    sent by curl (a whole request body, then the answer) or HTTP/2 by hand
    for what curl will not do; the budgets at their defaults but the
    deadlines."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env=dict(WASM, PLIMSOLL_REFLECTION_TIMEOUT_MS="2000",
                                PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS="2000",
                                PLIMSOLL_ANSWER_SEND_TIMEOUT_MS="1000")).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.d.check_sanitizers()

    def curl(self, msgs=(), ctype="application/connect+proto", key="alice", path=REFLECT,
             headers=(), http2=True, raw=None):
        """One stream by curl: (HTTP status, headers, body).  msgs are
        enveloped; raw is sent as it is."""
        tmp = tempfile.mkdtemp(prefix="plimsoll-connect-")
        argv = ["curl", "-sS", "-D", os.path.join(tmp, "h"), "-o", os.path.join(tmp, "b"),
                "-H", "content-type: " + ctype, "--data-binary", "@-"]
        if http2:
            argv.append("--http2-prior-knowledge")
        if key:
            argv += ["-H", "authorization: Bearer " + self.d.keys.get(key, key)]
        for h in headers:
            argv += ["-H", h]
        body = raw if raw is not None else b"".join(envelope(m) for m in msgs)
        # An answer at the head ends the stream before the request did, and
        # the daemon then resets it with NO_ERROR (RFC 9113, 8.1): Debian's
        # curl 7.88 exits 92 when that reset comes while it still sends the
        # body, with the whole answer written.  The answer is judged below.
        r = subprocess.run(argv + ["http://%s:%d%s" % (self.d.host, self.d.port, path)],
                           input=body, timeout=60)
        self.assertIn(r.returncode, (0, 92) if http2 else (0,))
        with open(os.path.join(tmp, "h"), "rb") as f:
            head = f.read().decode("latin-1").split("\r\n")
        with open(os.path.join(tmp, "b"), "rb") as f:
            data = f.read()
        hdrs = dict((k.strip().lower(), v.strip()) for k, _, v in
                    (line.partition(":") for line in head[1:] if ":" in line))
        return int(head[0].split()[1]), hdrs, data

    def stream(self, msgs=(), ctype="application/connect+proto", **kw):
        """The frames of a stream, which answers 200 in Connect's type."""
        status, hdrs, data = self.curl(msgs, ctype=ctype, **kw)
        self.assertEqual(status, 200, data[:300])
        self.assertEqual(hdrs.get("content-type"), ctype)
        return connect_frames(data)

    def assert_ends_with(self, frames, code=None, words=""):
        """The last frame is the end message: {} (code None) or the error;
        every frame before it a message."""
        flags, end = frames[-1]
        self.assertEqual(flags, 2, frames[-3:])
        if code is None:
            self.assertEqual(end, {})
        else:
            self.assertEqual(end["error"]["code"], code, end)
            self.assertIn(words, end["error"]["message"])
        self.assertTrue(all(f == 0 for f, _ in frames[:-1]), frames)

    def test_reflection_answers_in_order(self):
        for path in (REFLECT, REFLECT_ALPHA):
            frames = self.stream([list_services(), symbol("plimsoll.v1.SandboxService.Run"),
                                  symbol("nope.Nothing"), field(3, b"plimsoll/v1/sandbox.proto")],
                                 path=path)
            self.assertEqual(len(frames), 5)
            self.assert_ends_with(frames)
            out = [p for _, p in frames[:-1]]
            self.assertIn(b"plimsoll.v1.SandboxService", out[0])
            self.assertIn(b"grpc.health.v1.Health", out[0])
            self.assertIn(b"sandbox.proto", out[1])
            self.assertIn(b"symbol not found", out[2])
            self.assertIn(b"sandbox.proto", out[3])

    def test_connect_protocol_version(self):
        frames = self.stream([list_services()], headers=["connect-protocol-version: 1"])
        self.assertEqual(len(frames), 2)
        self.assert_ends_with(frames)
        frames = self.stream([list_services()], headers=["connect-protocol-version: 2"])
        self.assertEqual(len(frames), 1)  # refused at the head: the end message alone
        self.assert_ends_with(frames, "invalid_argument", "Connect-Protocol-Version")
        # a unary Check over HTTP/1.1 reads it too
        for version, want in (("1", 200), ("2", 400)):
            status, _, body = self.d.request("POST", CHECK, b"{}", {
                "Content-Type": "application/json", "Connect-Protocol-Version": version})
            self.assertEqual(status, want, body)

    def test_reflection_over_connect_json(self):
        frames = self.stream([b'{"listServices": "*"}',
                              b'{"fileContainingSymbol": "plimsoll.v1.SandboxService"}',
                              b'{"file_containing_symbol": "nope.Nothing", "host": "h"}',
                              b'{"allExtensionNumbersOfType": "plimsoll.v1.RunRequest"}',
                              b'{"fileContainingExtension": {"containingType": '
                              b'"plimsoll.v1.RunRequest", "extensionNumber": "7"}}', b'{}'],
                             ctype="application/connect+json")
        self.assert_ends_with(frames)
        out = [json.loads(p) for _, p in frames[:-1]]
        self.assertEqual(len(out), 6)
        self.assertEqual(out[0]["originalRequest"], {"listServices": "*"})
        self.assertEqual([x["name"] for x in out[0]["listServicesResponse"]["service"]],
                         ["plimsoll.v1.SandboxService", "grpc.health.v1.Health",
                          "grpc.reflection.v1.ServerReflection",
                          "grpc.reflection.v1alpha.ServerReflection"])
        files = out[1]["fileDescriptorResponse"]["fileDescriptorProto"]
        self.assertIn(b"plimsoll/v1/sandbox.proto", base64.b64decode(files[0]))
        self.assertEqual(out[2]["validHost"], "h")
        self.assertEqual(out[2]["errorResponse"]["errorCode"], 5)
        self.assertIn("symbol not found", out[2]["errorResponse"]["errorMessage"])
        self.assertEqual(out[3]["allExtensionNumbersResponse"],
                         {"baseTypeName": "plimsoll.v1.RunRequest"})
        self.assertEqual(out[4]["errorResponse"]["errorCode"], 5)
        self.assertEqual(out[5]["errorResponse"]["errorCode"], 3)  # no question asked
        for bad in (b'{"listServices": 1}', b'{"nope": "x"}', b"[]", b"{", b"\xff",
                    b'{"fileContainingExtension": {"extensionNumber": 2147483648}}',
                    b'{"fileContainingExtension": {"extensionNumber": "7x"}}',
                    b'{"listServices": "*", "listServices": "*"}', b"[" * 100):
            frames = self.stream([b'{"listServices": "*"}', bad], ctype="application/connect+json")
            self.assertEqual(len(frames), 2, bad)  # the first answered, then the end
            self.assert_ends_with(frames, "invalid_argument")

    def test_envelope_flags(self):
        for flags, words in ((1, "no compression was negotiated"), (3, "no compression"),
                             (2, "flags 0x02"), (0x80, "flags 0x80")):
            bad = bytes([flags]) + envelope(list_services())[1:]
            frames = self.stream(raw=envelope(list_services()) + bad + envelope(list_services()))
            self.assertEqual(len(frames), 2, flags)  # one answer, then the end
            self.assert_ends_with(frames, "invalid_argument", words)

    def test_a_cut_message_and_none(self):
        frames = self.stream(raw=envelope(list_services())[:6])
        self.assert_ends_with(frames, "invalid_argument", "inside a message")
        self.assert_ends_with(self.stream(raw=b""))  # no request: the end at once

    def test_refusals_at_the_head_are_end_messages(self):
        for key in (None, "plk_nobody"):
            status, hdrs, data = self.curl([list_services()], key=key)
            self.assertEqual((status, hdrs.get("content-type")),
                             (200, "application/connect+proto"))
            frames = connect_frames(data)
            self.assertEqual(len(frames), 1)
            self.assert_ends_with(frames, "unauthenticated")
            self.assertNotIn(b"SandboxService", data)

    def test_over_http11(self):
        # a bidirectional stream needs HTTP/2: connect-go's 505, the connection closed
        for ctype in ("application/connect+proto", "application/connect+json"):
            s = rawhttp.raw_connect(self.d)
            body = envelope(list_services())
            s.sendall(rawhttp.head(REFLECT, self.d.keys["alice"], len(body), ctype=ctype) + body)
            status, hdrs, _ = rawhttp.read_answer(s)
            self.assertEqual(status, 505)
            self.assertEqual(hdrs.get("connection"), "close")
            self.assertTrue(rawhttp.closed_by_peer(s, rawhttp.AT_ONCE_S))
            s.close()
        # Watch is served over HTTP/2 only (415 here)
        status, _, data = self.curl([b""], path=WATCH, http2=False)
        self.assertEqual(status, 415, data)

    def test_message_bytes_at_the_edge(self):
        edge = symbol("y" * (4096 - 3))
        self.assertEqual(len(edge), 4096)  # PLIMSOLL_REFLECTION_MESSAGE_BYTES's default
        frames = self.stream([edge])
        self.assertEqual(len(frames), 2)
        self.assert_ends_with(frames)
        frames = self.stream([symbol("y" * (4096 - 2))])
        self.assertEqual(len(frames), 1)
        self.assert_ends_with(frames, "invalid_argument", "PLIMSOLL_REFLECTION_MESSAGE_BYTES")
        # the prefix alone decides: a huge one's bytes never need to come
        frames = self.stream(raw=b"\x00\x7f\xff\xff\xff" + b"z" * 10)
        self.assert_ends_with(frames, "invalid_argument", "nothing of it was read")

    def test_messages_at_the_edge(self):
        frames = self.stream([list_services()] * 128)  # PLIMSOLL_REFLECTION_MESSAGES's default
        self.assertEqual(len(frames), 129)
        self.assert_ends_with(frames)
        frames = self.stream([list_services()] * 129)
        self.assertEqual(len(frames), 129)  # 128 answers, then the end
        self.assert_ends_with(frames, "invalid_argument", "PLIMSOLL_REFLECTION_MESSAGES")

    def test_streams_at_the_edge(self):
        conns = []
        try:
            for _ in range(16):  # PLIMSOLL_REFLECTION_STREAMS's default
                c = h2raw.Conn(self.d)
                hdrs = h2raw.request_headers("", self.d.keys["alice"], "application/connect+proto")
                hdrs[2] = (":path", REFLECT)
                c.headers(1, hdrs)  # and nothing more: the stream is held
                c.data(1, envelope(list_services()), end_stream=False)
                f, _ = c.until(lambda f: f[2] == 1 and f[0] == h2raw.DATA)
                self.assertEqual(connect_frames(f[3])[0][0], 0)  # its answer: it is open
                conns.append(c)
            frames = self.stream([list_services()])
            self.assertEqual(len(frames), 1)
            self.assert_ends_with(frames, "resource_exhausted", "PLIMSOLL_REFLECTION_STREAMS")
        finally:
            for c in conns:
                c.close()
        for _ in range(50):  # the closes reach the daemon; the slots come back
            frames = self.stream([list_services()])
            if len(frames) == 2:
                break
            time.sleep(0.1)
        self.assert_ends_with(frames)

    def test_a_stream_that_never_sends_ends_at_its_deadline(self):
        c = h2raw.Conn(self.d)
        self.addCleanup(c.close)
        hdrs = h2raw.request_headers("", self.d.keys["alice"], "application/connect+proto")
        hdrs[2] = (":path", REFLECT)
        c.headers(1, hdrs)
        body = c.answer(1, timeout=30)  # the answer ends though the request never does
        self.assertIsNotNone(body)
        self.assert_ends_with(connect_frames(body))
        lines = [x for x in self.d.log_lines() if x.get("method") == "reflection"
                 and x.get("codec") == "connect+proto"
                 and x.get("ended") == "PLIMSOLL_REFLECTION_TIMEOUT_MS"]
        self.assertTrue(lines)

    def test_watch_over_connect(self):
        frames = self.stream([b""], path=WATCH)  # SERVING, then the end at its deadline
        self.assertEqual(frames[0], (0, b"\x08\x01"))
        self.assert_ends_with(frames)
        frames = self.stream([b'{"service": "nope"}'], path=WATCH, ctype="application/connect+json")
        self.assertEqual(frames[0], (0, b'{"status":"SERVICE_UNKNOWN"}'))
        self.assert_ends_with(frames)
        for ctype, bad in (("application/connect+json", b'{"service": 1}'),
                           ("application/connect+proto", b"\x0a\x09")):
            frames = self.stream([bad], path=WATCH, ctype=ctype)
            self.assertEqual(len(frames), 1)
            self.assert_ends_with(frames, "invalid_argument")


class ConnectUnread(unittest.TestCase):
    def test_answers_unread_at_the_edge(self):
        """A peer that takes nothing (a window of 0): the request after 1 MiB
        of answers wait ends the stream; the one before it is answered."""
        d = Daemon(env=dict(WASM, PLIMSOLL_REFLECTION_MESSAGES="1000",
                            PLIMSOLL_REFLECTION_TIMEOUT_MS="2000",
                            PLIMSOLL_ANSWER_SEND_TIMEOUT_MS="1000")).start()
        self.addCleanup(d.stop)
        ask = envelope(symbol("plimsoll.v1.SandboxService"))
        c = h2raw.Conn(d)
        hdrs = h2raw.request_headers("", d.keys["alice"], "application/connect+proto")
        hdrs[2] = (":path", REFLECT)
        c.headers(1, hdrs)
        c.data(1, ask, end_stream=True)
        one = c.answer(1)
        c.close()
        size = len(one) - len(envelope(b"{}"))  # one answer, enveloped
        n = (1 << 20) // size + 1  # the most answered: (n - 1) * size <= 1 MiB
        for count in (n, n + 1):
            c = h2raw.Conn(d, preface=False)
            c.send(h2raw.PREFACE + h2raw.frame(h2raw.SETTINGS, 0, 0, b"\x00\x04\x00\x00\x00\x00"))
            c.headers(1, hdrs)
            c.data(1, ask * count, end_stream=False)
            f, _ = c.until(lambda f: f[2] == 1 and f[0] == h2raw.RST_STREAM, timeout=20)
            self.assertIsNotNone(f)  # cut at PLIMSOLL_ANSWER_SEND_TIMEOUT_MS
            c.close()
        time.sleep(0.5)
        ended = {x["messages"]: x["ended"] for x in d.log_lines()
                 if x.get("method") == "reflection" and x.get("messages") in (n, n + 1)}
        self.assertEqual(ended, {n: "PLIMSOLL_REFLECTION_TIMEOUT_MS", n + 1: "answers unread"})
        d.stop()
        d.check_sanitizers()


class Metrics(unittest.TestCase):
    def test_own_method_labels(self):
        """/metrics counts Check, Watch and reflection under their own
        method, never "other"."""
        d = Daemon(env=dict(WASM, PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS="1000")).start()
        ch = grpc.insecure_channel("%s:%d" % (d.host, d.port))
        try:
            stub = pb_grpc.HealthStub(ch)
            self.assertEqual(stub.Check(pb.HealthCheckRequest(), timeout=10).status,
                             pb.HealthCheckResponse.SERVING)
            with self.assertRaises(grpc.RpcError):
                stub.Check(pb.HealthCheckRequest(service="nope"), timeout=10)
            self.assertEqual([r.status for r in stub.Watch(pb.HealthCheckRequest(), timeout=30)],
                             [pb.HealthCheckResponse.SERVING])  # ends OK at its deadline
            md = [("authorization", "Bearer " + d.keys["alice"])]
            call = ch.stream_stream(REFLECT, request_serializer=None, response_deserializer=None)
            for _ in range(2):
                self.assertEqual(len(list(call(iter([list_services()]), timeout=10,
                                               metadata=md))), 1)
            with self.assertRaises(grpc.RpcError):
                list(call(iter([list_services()]), timeout=10))
            with self.assertRaises(grpc.RpcError):
                list(call(iter([b"\x3a"]), timeout=10, metadata=md))
            want = {
                '{method="health.Check",code="ok"}': 1,
                '{method="health.Check",code="not_found"}': 1,
                '{method="health.Watch",code="ok"}': 1,
                '{method="reflection",code="ok"}': 2,
                '{method="reflection",code="unauthenticated"}': 1,
                '{method="reflection",code="invalid_argument"}': 1,
            }
            for _ in range(50):  # a stream is counted when the daemon frees it, after its end
                status, _, body = d.request("GET", "/metrics", None,
                                            {"Authorization": "Bearer " + d.keys["alice"]})
                self.assertEqual(status, 200)
                counts = {}
                for line in body.decode().splitlines():
                    if line.startswith("plimsoll_requests_total{") and "metrics" not in line:
                        labels, value = line.rsplit(" ", 1)
                        counts[labels[len("plimsoll_requests_total"):]] = int(value)
                if counts == want:
                    break
                time.sleep(0.1)
            self.assertEqual(counts, want)
        finally:
            ch.close()
            d.stop()
        d.check_sanitizers()


class Settings(unittest.TestCase):
    def test_bad_values_refused_at_startup(self):
        for name, value in (("PLIMSOLL_HEALTH", "yes"), ("PLIMSOLL_REFLECTION", "Key"),
                            ("PLIMSOLL_HEALTH_WATCH_STREAMS", "0"),
                            ("PLIMSOLL_HEALTH_WATCH_STREAMS_PER_CONNECTION", "101"),
                            ("PLIMSOLL_HEALTH_WATCH_TIMEOUT_MS", "999"),
                            ("PLIMSOLL_REFLECTION_STREAMS", "x"),
                            ("PLIMSOLL_REFLECTION_MESSAGE_BYTES", "63"),
                            ("PLIMSOLL_REFLECTION_MESSAGES", "0"),
                            ("PLIMSOLL_REFLECTION_TIMEOUT_MS", "99")):
            code, err = run_startup(dict(WASM, **{name: value}))
            self.assertEqual(code, 2, name)
            self.assertIn("plimsolld: " + name, err)

    def test_health_key_reflection_open_and_off(self):
        d = Daemon(env=dict(WASM, PLIMSOLL_HEALTH="key", PLIMSOLL_REFLECTION="open")).start()
        ch = grpc.insecure_channel("%s:%d" % (d.host, d.port))
        try:
            stub = pb_grpc.HealthStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Check(pb.HealthCheckRequest(), timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            r = stub.Check(pb.HealthCheckRequest(), timeout=10,
                           metadata=[("authorization", "Bearer " + d.keys["bob"])])
            self.assertEqual(r.status, pb.HealthCheckResponse.SERVING)
            call = ch.stream_stream(REFLECT, request_serializer=None, response_deserializer=None)
            self.assertEqual(len(list(call(iter([list_services()]), timeout=10))), 1)
        finally:
            ch.close()
            d.stop()
        d = Daemon(env=dict(WASM, PLIMSOLL_HEALTH="off", PLIMSOLL_REFLECTION="off")).start()
        ch = grpc.insecure_channel("%s:%d" % (d.host, d.port))
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                pb_grpc.HealthStub(ch).Check(pb.HealthCheckRequest(), timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
            call = ch.stream_stream(REFLECT, request_serializer=None, response_deserializer=None)
            with self.assertRaises(grpc.RpcError) as cm:
                list(call(iter([list_services()]), timeout=10,
                          metadata=[("authorization", "Bearer " + d.keys["alice"])]))
            self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        finally:
            ch.close()
            d.stop()


if __name__ == "__main__":
    unittest.main()
