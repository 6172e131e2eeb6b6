# SPDX-License-Identifier: Apache-2.0
"""RunStream and RunCellStream: Connect server streaming with JSON messages
(``application/connect+json``), with no I/O in it. The request is one
envelope; the answer's body is a sequence of envelopes (a flags byte, a
4-byte big-endian length, that many bytes): output chunks, then the
result, then the end-of-stream message (flags 0x02), ``{}`` or
``{"error": …}``. :class:`Decoder` takes the body as it comes and gives
the chunks; what it refuses is a :class:`~plimsoll.errors.ProtocolError`.
Shared by the synchronous and the asyncio client."""
from __future__ import annotations

import base64
import binascii
import hashlib
import struct
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _answer, _transport
from .errors import PlimsollError
from .record import canonical
from .results import DisplayOutput

#: The largest envelope (one message) a client reads, unless told
#: otherwise: a longer one is refused from its header, before its bytes are
#: read. The same in every official client.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20

FLAG_COMPRESSED = 0x01
FLAG_END_STREAM = 0x02
_HEADER = 5


def envelope(payload: bytes, flags: int = 0) -> bytes:
    """One Connect envelope around ``payload``."""
    return struct.pack(">BI", flags, len(payload)) + payload


@dataclass(frozen=True)
class OutputChunk:
    """What the guest wrote since the previous chunk: exact bytes of each
    stream (either may be empty; nothing orders one against the other
    within a chunk) and, for a project, its step (1-based; 0 for a snippet,
    a module or a cell). Joined in order, a step's chunks are its result's
    output byte for byte (the client checks this). A multi-byte character
    may be split between chunks: decode incrementally
    (``codecs.getincrementaldecoder("utf-8")``).

    A cell's display output comes as a chunk of its own, in the order the
    cell produced it among its output: ``display`` is the
    :class:`~plimsoll.DisplayOutput` (then ``stdout`` and ``stderr`` are
    empty), None in every other chunk. In order, they are the result's
    ``outputs`` (the client checks this too)."""

    stdout: bytes = b""
    stderr: bytes = b""
    step: int = 0
    display: Optional[DisplayOutput] = None


def _b64(value: str, what: str) -> bytes:
    """proto3 JSON bytes: standard or URL-safe base64, padded or not."""
    text = value.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise _answer.Malformed("%s is not base64" % what) from None


def _display_line(d: Any) -> bytes:
    """One display output as :class:`_Joined` takes it: its canonical form
    and a newline (which the canonical form never holds)."""
    return canonical(d).encode("utf-8") + b"\n"


class _Joined:
    """A stream's chunks joined, as a length and a running SHA-256."""

    def __init__(self) -> None:
        self.n = 0
        self.h = hashlib.sha256()

    def add(self, data: bytes) -> None:
        self.n += len(data)
        self.h.update(data)

    def equals(self, data: bytes) -> bool:
        return self.n == len(data) and self.h.digest() == hashlib.sha256(data).digest()


class Decoder:
    """The body of one RunStream or RunCellStream answer, as it comes.

    :meth:`feed` takes the next bytes and returns the output chunks they
    complete; :meth:`finish`, at the end of the body, returns the result
    (the RunResponse object, its members of their types, the streamed
    output checked against it) or raises the end-of-stream error or a
    :class:`~plimsoll.errors.ProtocolError`: an envelope past
    ``max_message_bytes`` (from its header), flags other than 0 and 0x02,
    a message that is not a RunStreamResponse, anything after the result
    but the end of the stream or after the end of the stream, a body that
    ends inside an envelope, without the result or without the end."""

    def __init__(self, method: str, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 deadline: Optional[float] = None, url: str = "",
                 timeout: float = 0.0) -> None:
        self.method = method
        self.max_message_bytes = max_message_bytes
        self.deadline = deadline
        self.url = url
        self.timeout = timeout
        self.chunks = 0
        self._buf = bytearray()
        self._result: Optional[Dict[str, Any]] = None
        self._error: Optional[PlimsollError] = None
        self._ended = False
        self._joined: Dict[Tuple[int, str], _Joined] = {}
        #: The display outputs given, joined as :func:`_display_line`s.
        self._displays = _Joined()
        self._display_count = 0

    def _protocol(self, why: str) -> PlimsollError:
        return _transport.protocol_error(self.method, 200, "the stream " + why)

    def feed(self, data: bytes) -> List[OutputChunk]:
        """The output chunks the next ``data`` of the body completes."""
        self._buf += data
        out: List[OutputChunk] = []
        while len(self._buf) >= _HEADER:
            flags, size = struct.unpack_from(">BI", self._buf)
            if size > self.max_message_bytes:
                raise self._protocol("announces a message of %d bytes, past the client's "
                                     "max_message_bytes (%d)" % (size, self.max_message_bytes))
            if flags & ~FLAG_END_STREAM:
                raise self._protocol("has an envelope with flags 0x%02x (%s)" % (
                    flags, "compressed, which was not asked for" if flags == FLAG_COMPRESSED
                    else "not a message nor the end of the stream"))
            if self._ended:
                raise self._protocol("goes on after its end-of-stream message")
            if len(self._buf) < _HEADER + size:
                break
            payload = bytes(self._buf[_HEADER:_HEADER + size])
            del self._buf[:_HEADER + size]
            if flags & FLAG_END_STREAM:
                self._end(payload)
            else:
                chunk = self._message(payload)
                if chunk is not None:
                    out.append(chunk)
        if self._ended and self._buf:
            raise self._protocol("goes on after its end-of-stream message")
        return out

    def _parse(self, payload: bytes, shape: Dict[str, Any], what: str) -> Dict[str, Any]:
        try:
            return _answer.check_shape(_answer.parse(payload, self.deadline), shape, what)
        except _answer.Malformed as e:
            raise self._protocol("has a %s that is not one: %s" % (what, e)) from None
        except _answer.DeadlinePassed:
            raise _transport.deadline_error(self.method, self.url, self.timeout,
                                            "still decoding the stream") from None

    def _message(self, payload: bytes) -> Optional[OutputChunk]:
        if self._result is not None:
            raise self._protocol("has a message after its result")
        msg = self._parse(payload, _answer.RUN_STREAM_RESPONSE, "RunStreamResponse")
        output, result = msg.get("output"), msg.get("result")
        if output is not None and result is not None:
            raise self._protocol("has a message with both an output and a result")
        if result is not None:
            try:
                _answer.check_run(result, "RunStreamResponse.result")
            except _answer.Malformed as e:
                raise self._protocol("has a result that is not one: %s" % e) from None
            self._result = result
            return None
        if output is None:
            return None  # a kind of message this client does not know: skipped
        if output.get("display") is not None:
            return self._display(output)
        try:
            chunk = OutputChunk(_b64(output.get("stdout") or "", "output.stdout"),
                                _b64(output.get("stderr") or "", "output.stderr"),
                                output.get("step") or 0)
        except _answer.Malformed as e:
            raise self._protocol("has an output chunk that is not one: %s" % e) from None
        for name, data in (("stdout", chunk.stdout), ("stderr", chunk.stderr)):
            joined = self._joined.setdefault((chunk.step, name), _Joined())
            joined.add(data)
            if joined.n > self.max_message_bytes:
                raise self._protocol("has more output than a result could hold")
        self.chunks += 1
        return chunk

    def _display(self, output: Dict[str, Any]) -> OutputChunk:
        """A chunk that is a cell's display output: nothing else in it, a
        display the result could hold."""
        display = output["display"]
        if output.get("stdout") or output.get("stderr"):
            raise self._protocol("has an output chunk with both a display output and output "
                                 "bytes")
        try:
            _answer.check_display(display, "output.display")
        except _answer.Malformed as e:
            raise self._protocol("has an output chunk that is not one: %s" % e) from None
        self._displays.add(_display_line(display))
        self._display_count += 1
        if self._displays.n > self.max_message_bytes:
            raise self._protocol("has more display outputs than a result could hold")
        self.chunks += 1
        return OutputChunk(step=output.get("step") or 0,
                           display=DisplayOutput.from_dict(display))

    def _end(self, payload: bytes) -> None:
        self._ended = True
        end = self._parse(payload, _answer.END_STREAM, "end-of-stream message")
        if end.get("error") is not None:
            self._error = _transport.error_from_connect(self.method, 200, end["error"],
                                                        self.deadline, self.url, self.timeout)

    def finish(self) -> Dict[str, Any]:
        """The result, at the end of the body; or the error the stream ended
        with, or the :class:`~plimsoll.errors.ProtocolError` of a stream
        that broke off."""
        if self._buf:
            raise self._protocol("ends inside an envelope (%d bytes of it)" % len(self._buf))
        if self._error is not None:
            raise self._error
        if not self._ended:
            raise self._protocol("ends without its end-of-stream message")
        if self._result is None:
            raise self._protocol("ends without a result or an error")
        self._check_output(self._result)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _transport.deadline_error(self.method, self.url, self.timeout,
                                            "still decoding the stream")
        return self._result

    def _check_output(self, result: Dict[str, Any]) -> None:
        """The streamed output, joined, is the result's, byte for byte: a
        step's chunks its step's output, the others the run's; the display
        outputs given, in order, are the result's ``outputs``. A stream
        that sent no chunks (a kind that does not stream) has nothing to
        check."""
        if not self.chunks:
            return
        outputs = result.get("outputs") or []
        if not (self._display_count == len(outputs) and self._displays.equals(
                b"".join(_display_line(d) for d in outputs))):
            raise self._protocol("display outputs are not the result's: %d streamed, %d kept"
                                 % (self._display_count, len(outputs)))
        if not self._joined:
            return
        steps = result.get("steps") or []
        seen = {step for step, _ in self._joined}
        wanted = set()
        if 0 in seen:
            wanted.add(0)
        if seen - {0}:
            wanted.update(range(1, len(steps) + 1))
        if max(seen) > len(steps):
            raise self._protocol("has output of step %d, but the result has %d steps"
                                 % (max(seen), len(steps)))
        for step in sorted(seen | wanted):
            where: Dict[str, Any] = steps[step - 1] if step else result
            for name in ("stdout", "stderr"):
                b64 = where.get(name + "_base64") or ""
                try:
                    kept = (_b64(b64, name + "_base64") if b64
                            else (where.get(name) or "").encode("utf-8"))
                except _answer.Malformed as e:
                    raise _transport.protocol_error(self.method, 200, str(e)) from None
                joined = self._joined.get((step, name), _Joined())
                if not joined.equals(kept):
                    raise self._protocol(
                        "output of %s is not the result's: %d bytes streamed, %d kept"
                        % ("step %d's %s" % (step, name) if step else name, joined.n,
                           len(kept)))
