# SPDX-License-Identifier: Apache-2.0
"""One Connect unary call over HTTP/1.1 on asyncio streams (standard
library only): TCP, TLS or a Unix socket, one connection per call
(``Connection: close``), the request sent with its Content-Length. The
answer is read with the same bounds as the synchronous transport's: the
call's deadline over the whole exchange, ``max_answer_bytes`` over the
body (declared or read), and the head's lines and count as http.client
bounds them. What the answer means is ``_calls``, shared with the
synchronous client."""
from __future__ import annotations

import asyncio
import ssl
import time
from typing import Awaitable, Callable, Dict, List, Optional, Tuple

from . import _transport
from ._config import Key
from .errors import InfrastructureError

#: The longest line of an answer's head (the status line, a header, a chunk
#: size), and the most header lines: http.client's bounds.
MAX_LINE = 65536
MAX_HEADERS = 100
_READ = 65536


class _BadHead(Exception):
    """An answer whose HTTP framing cannot be read: a transport failure."""


def _host_header(endpoint: _transport.Endpoint) -> str:
    host = endpoint.host
    if ":" in host:
        host = "[%s]" % host
    return host if endpoint.port is None else "%s:%d" % (host, endpoint.port)


def request_head(endpoint: _transport.Endpoint, api_key: Key, method: str,
                 length: int, stream: bool = False, route: Optional[str] = None) -> bytes:
    """The request line and headers of a call whose body is ``length`` bytes."""
    for v in (api_key.reveal(), endpoint.prefix):
        if any(c in v for c in "\r\n\0"):
            raise ValueError("plimsoll: a control character in the key or the URL")
    lines = ["POST %s HTTP/1.1" % (endpoint.prefix + _transport.SERVICE + method),
             "Host: " + _host_header(endpoint)]
    lines += ["%s: %s" % kv
              for kv in _transport.request_headers(api_key, stream, route).items()]
    lines += ["Content-Length: %d" % length, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _open(endpoint: _transport.Endpoint
                ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if endpoint.unix_path is not None:
        return await asyncio.open_unix_connection(endpoint.unix_path, limit=MAX_LINE)
    if endpoint.scheme == "https":
        return await asyncio.open_connection(endpoint.host, endpoint.port or 443,
                                             ssl=ssl.create_default_context(),
                                             server_hostname=endpoint.host, limit=MAX_LINE)
    return await asyncio.open_connection(endpoint.host, endpoint.port or 80, limit=MAX_LINE)


async def _line(reader: asyncio.StreamReader) -> bytes:
    """One CRLF- (or LF-) ended line, without its end."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        raise _BadHead("the connection closed in the answer's head (%d bytes of a line)"
                       % len(e.partial)) from None
    except asyncio.LimitOverrunError:
        raise _BadHead("a line of the answer's head is longer than %d bytes" % MAX_LINE) \
            from None
    return line.rstrip(b"\r\n")


async def _head(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, List[str]]]:
    """The status and the headers (lower-case names) of the final answer,
    1xx answers skipped."""
    while True:
        parts = (await _line(reader)).split(None, 2)
        if (len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3
                or not parts[1].isdigit()):
            raise _BadHead("not an HTTP/1.x status line")
        status = int(parts[1])
        headers: Dict[str, List[str]] = {}
        n = 0
        while True:
            line = await _line(reader)
            if not line:
                break
            n += 1
            if n > MAX_HEADERS:
                raise _BadHead("more than %d header lines" % MAX_HEADERS)
            name, sep, value = line.partition(b":")
            if not sep or not name.strip():
                raise _BadHead("a header line without a name")
            headers.setdefault(name.strip().decode("latin-1").lower(), []).append(
                value.strip().decode("latin-1"))
        if not 100 <= status < 200:
            return status, headers


Sink = Callable[[bytes], Awaitable[None]]


async def _chunked(reader: asyncio.StreamReader, method: str, status: int,
                   cap: int, sink: Sink) -> None:
    total = 0
    while True:
        size_text = (await _line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _BadHead("a chunk size that is not hexadecimal") from None
        if size < 0:
            raise _BadHead("a negative chunk size")
        if size == 0:
            while await _line(reader):  # trailers, ignored
                pass
            return
        if total + size > cap:
            raise _transport.read_past_cap(method, status, cap)
        total += size
        while size:
            piece = await reader.read(min(size, _READ))
            if not piece:
                raise _BadHead("the connection closed inside a chunk")
            await sink(piece)
            size -= len(piece)
        if await _line(reader):
            raise _BadHead("a chunk not followed by CRLF")


async def _exchange(endpoint: _transport.Endpoint, api_key: Key, method: str, body: bytes,
                    cap: int, on_stream: Optional[Sink], route: Optional[str]
                    ) -> Tuple[int, Optional[str], Optional[bytes]]:
    head = request_head(endpoint, api_key, method, len(body), on_stream is not None, route)
    reader, writer = await _open(endpoint)
    try:
        writer.write(head + body)
        await writer.drain()
        status, headers = await _head(reader)
        ctype = headers["content-type"][0] if "content-type" in headers else None
        data = bytearray()
        sink: Sink
        if (on_stream is not None and status == 200
                and _transport.media_type_is_stream(ctype)):
            sink = on_stream
        else:
            async def sink(piece: bytes) -> None:
                data.extend(piece)
        streaming = sink is on_stream
        codings = [c.strip().lower() for v in headers.get("transfer-encoding", [])
                   for c in v.split(",")]
        if codings:
            if codings[-1] == "chunked":
                await _chunked(reader, method, status, cap, sink)
                return status, ctype, None if streaming else bytes(data)
            length = None  # another coding: the body runs to the end
        else:
            declared = set(headers.get("content-length", []))
            if len(declared) > 1:
                raise _BadHead("two different Content-Lengths")
            length_text = declared.pop() if declared else None
            if length_text is not None:
                past = _transport.declared_past_cap(method, status, length_text, cap)
                if past:
                    raise past
                if not length_text.isdigit():
                    raise _BadHead("a Content-Length that is not a number")
            length = int(length_text) if length_text is not None else None
        total = 0
        while length is None or total < length:
            want = _READ if length is None else min(_READ, length - total)
            piece = await reader.read(want)
            if not piece:
                if length is not None:
                    raise _BadHead("the connection closed after %d of %d bytes"
                                   % (total, length))
                break
            total += len(piece)
            if total > cap:
                raise _transport.read_past_cap(method, status, cap)
            await sink(piece)
        return status, ctype, None if streaming else bytes(data)
    finally:
        writer.close()


async def exchange(endpoint: _transport.Endpoint, api_key: Key, method: str, body: bytes,
                   deadline: float, max_answer_bytes: int, on_stream: Optional[Sink] = None,
                   route: Optional[str] = None
                   ) -> Tuple[int, Optional[str], Optional[bytes]]:
    """POST ``body`` to the method; ``(status, Content-Type, answer body)``.

    With ``on_stream`` the call is a server-streaming one: a 200
    ``application/connect+json`` answer's body is given to it piece by
    piece and the body returned is None (``_transport.exchange`` says
    more); what it raises wrapped in ``_transport.Passthrough`` is raised
    as it is. ``route`` is sent as ``Plimsoll-Route`` (a session's call).

    ``deadline`` (``time.monotonic()``) bounds the whole exchange, however
    slowly the answer comes. A body past ``max_answer_bytes`` is a
    :class:`~plimsoll.errors.ProtocolError` (read no further). Transport
    failures raise :class:`~plimsoll.errors.InfrastructureError`
    (dispatched: the code may have run), the deadline the timeout error."""
    timeout = max(deadline - time.monotonic(), 0.0)
    try:
        return await asyncio.wait_for(
            _exchange(endpoint, api_key, method, body, max_answer_bytes, on_stream, route),
            timeout)
    except asyncio.TimeoutError as e:
        raise _transport.deadline_error(method, endpoint.url, timeout,
                                        "cut at the deadline") from e
    except (InfrastructureError, _transport.Passthrough):
        raise
    except (OSError, EOFError, _BadHead) as e:
        if time.monotonic() >= deadline:
            raise _transport.deadline_error(method, endpoint.url, timeout,
                                            "cut at the deadline") from e
        raise _transport.transport_error(method, endpoint.url, e) from e
