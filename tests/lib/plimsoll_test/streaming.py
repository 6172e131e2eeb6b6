# SPDX-License-Identifier: Apache-2.0
"""Server-streaming calls (RunStream, RunCellStream) by hand: Connect's
enveloped messages over HTTP/1.1 and gRPC-Web's frames, read one message
at a time so a test sees what arrived before what."""
import base64
import json
import struct
import time

from .harness import SERVICE


def envelope(payload, flags=0):
    return bytes([flags]) + struct.pack(">I", len(payload)) + payload


def _read_exact(r, n):
    data = b""
    while len(data) < n:
        part = r.read(n - len(data))
        if not part:
            break
        data += part
    return data


class Stream:
    """What a streaming call answered: the HTTP status and headers, each
    envelope (flags, payload, seconds since the call) in order, and for
    Connect JSON the decoded messages."""

    def __init__(self, status, headers):
        self.status = status
        self.headers = headers
        self.frames = []
        self.leftover = b""  # bytes after the last whole envelope

    @property
    def messages(self):
        return [json.loads(p) for f, p, _ in self.frames if f == 0]

    @property
    def end(self):
        """Connect's end-of-stream message (flags 0x02), or None."""
        ends = [json.loads(p) for f, p, _ in self.frames if f == 2]
        return ends[-1] if ends else None

    @property
    def chunks(self):
        return [m["output"] for m in self.messages if "output" in m]

    @property
    def result(self):
        rs = [m["result"] for m in self.messages if "result" in m]
        return rs[-1] if rs else None

    def joined(self, name, step=0):
        """The stream's bytes of step (0: not a project's), chunks joined."""
        return b"".join(base64.b64decode(c.get(name, "")) for c in self.chunks
                        if c.get("step", 0) == step)

    def error(self):
        end = self.end
        return end.get("error") if end else None


def call(d, method, message=None, key=None, principal="alice", ctype="application/connect+json",
         raw=None, headers=None, on_frame=None, timeout=120):
    """A streaming call; on_frame(stream, flags, payload) runs as each
    envelope arrives.  raw: the whole request body instead of one
    enveloped JSON message."""
    h = {"Content-Type": ctype}
    k = key if key is not None else d.keys.get(principal)
    if k:
        h["Authorization"] = "Bearer " + k
    h.update(headers or {})
    body = raw if raw is not None else envelope(json.dumps(message).encode())
    c = d.connection(timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("POST", SERVICE + method, body=body, headers=h)
        r = c.getresponse()
        st = Stream(r.status, dict((k.lower(), v) for k, v in r.getheaders()))
        ct = st.headers.get("content-type", "")
        if not (ct.startswith("application/connect+") or ct.startswith("application/grpc-web")):
            st.leftover = r.read()
            return st
        while True:
            head = _read_exact(r, 5)
            if len(head) < 5:
                st.leftover = head
                return st
            n = struct.unpack(">I", head[1:])[0]
            payload = _read_exact(r, n)
            if len(payload) < n:
                st.leftover = head + payload
                return st
            st.frames.append((head[0], payload, time.monotonic() - t0))
            if on_frame:
                on_frame(st, head[0], payload)
    finally:
        c.close()
