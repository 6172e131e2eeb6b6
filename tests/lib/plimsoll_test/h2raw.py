# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 frames by hand, for the hostile cases no well-behaved library
sends: a preface, frames of any kind, headers as HPACK literals (never
indexed, no Huffman), and a reader of the frames that come back.  Answers'
header blocks are not decoded (HPACK's tables are the server's); their
bodies are plain DATA.  Standard library only.
"""
import json
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 2, 3, 4, 6, 7, 8, 9)
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
SERVICE = "/plimsoll.v1.SandboxService/"


def _int(n, prefix_bits, first=0):
    cap = (1 << prefix_bits) - 1
    if n < cap:
        return bytes([first | n])
    out = [first | cap]
    n -= cap
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = b""
    for name, value in headers:
        n, v = name.encode(), value.encode() if isinstance(value, str) else value
        out += b"\x00" + _int(len(n), 7) + n + _int(len(v), 7) + v
    return out


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream) + payload


def request_headers(method, key=None, ctype="application/json", extra=()):
    h = [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
         (":authority", "plimsoll"), ("content-type", ctype)]
    if key:
        h.append(("authorization", "Bearer " + key))
    return h + list(extra)


class Conn:
    def __init__(self, d, timeout=10, preface=True, source=None):
        """source: the loopback address to connect from (127.0.0.0/8)."""
        self.s = socket.create_connection((d.host, d.port), timeout=timeout,
                                          source_address=(source, 0) if source else None)
        self.buf = b""
        self.filed = {}  # frames read while waiting for another stream's
        if preface:
            self.s.sendall(PREFACE + frame(SETTINGS, 0, 0))

    def send(self, *frames):
        self.s.sendall(b"".join(frames))

    def headers(self, stream, headers, end_stream=False, max_frame=16384):
        """A header block, in HEADERS and CONTINUATION frames of max_frame."""
        block = hpack(headers)
        first, rest = block[:max_frame], block[max_frame:]
        flags = (END_STREAM if end_stream else 0) | (0 if rest else END_HEADERS)
        frames = [frame(HEADERS, flags, stream, first)]
        while rest:
            part, rest = rest[:max_frame], rest[max_frame:]
            frames.append(frame(CONTINUATION, 0 if rest else END_HEADERS, stream, part))
        self.send(*frames)

    def data(self, stream, payload, end_stream=True):
        self.send(frame(DATA, END_STREAM if end_stream else 0, stream, payload))

    def read_frame(self, timeout=None):
        """(type, flags, stream, payload), or None when the peer closed."""
        if timeout is not None:
            self.s.settimeout(timeout)
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        n = int.from_bytes(self.buf[:3], "big")
        kind, flags = self.buf[3], self.buf[4]
        stream = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
        payload = self.buf[9:9 + n]
        self.buf = self.buf[9 + n:]
        if kind == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        if kind == PING and not flags & ACK:
            self.send(frame(PING, ACK, 0, payload))
        return kind, flags, stream, payload

    def until(self, pred, timeout=10):
        """Frames until pred(frame) holds; returns (that frame, all read).
        Frames read on the way are kept for answer()."""
        seen = []
        for frames in self.filed.values():
            for f in list(frames):
                if pred(f):
                    frames.remove(f)
                    return f, seen
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            f = self.read_frame(timeout=max(0.05, end - time.monotonic()))
            if f is None:
                return None, seen
            seen.append(f)
            if pred(f):
                return f, seen
            self.filed.setdefault(f[2], []).append(f)
        raise TimeoutError("no such frame in %ss: %r" % (timeout, seen[-5:]))

    def answer(self, stream, timeout=30):
        """The stream's body (its DATA) once it ends; None when reset."""
        body = b""
        while True:
            f, _ = self.until(lambda f: f[2] == stream, timeout=timeout)
            if f is None or f[0] == RST_STREAM:
                return None
            if f[0] == DATA:
                body += f[3]
            if f[1] & END_STREAM:
                return body

    def json_answer(self, stream, timeout=30):
        body = self.answer(stream, timeout)
        return json.loads(body) if body else None

    def close(self):
        self.s.close()
