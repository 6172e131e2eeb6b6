# SPDX-License-Identifier: Apache-2.0
"""One Connect unary call over HTTP/1.1 (standard library only), and the
mapping of its answer onto results and errors. The headers, the errors of
a failed exchange and the reading of an answer are shared with the asyncio
transport (``_aio_transport``)."""
from __future__ import annotations

import base64
import binascii
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Optional, Tuple

from . import _answer
from ._config import Key
from .errors import (ConfigurationError, InfrastructureError, PlimsollError, ProtocolError,
                     refusal_class)

SERVICE = "/plimsoll.v1.SandboxService/"
USER_AGENT = "plimsoll-python/0.1.0"


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (``unix:/path`` URLs, as the CLI takes)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Endpoint:
    """Where the daemon is: ``http://host:port[/prefix]``, ``https://…`` or
    ``unix:/path``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.unix_path: Optional[str] = None
        if url.startswith("unix:"):
            self.unix_path = url[len("unix:"):]
            self.scheme, self.host, self.port, self.prefix = "unix", "localhost", None, ""
            if not self.unix_path:
                raise ConfigurationError("plimsoll: %r names no socket" % url)
            return
        bad = ConfigurationError("plimsoll: the URL %r is not http://host:port, https://… "
                                 "or unix:/path" % url)
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError:  # a bad port or IPv6 literal
            port, parts = None, None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise bad
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port
        self.prefix = parts.path.rstrip("/")

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.unix_path is not None:
            return _UnixHTTPConnection(self.unix_path, timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("the call took longer than its timeout")
    return left


def deadline_error(method: str, url: str, timeout: float, why: str) -> InfrastructureError:
    """The timeout error: infrastructure, ``deadline_exceeded``, dispatched."""
    return InfrastructureError("%s: no complete answer from %s within %.1f s (%s); the code "
                               "may have run" % (method, url, timeout, why),
                               code="deadline_exceeded", dispatched=True)


def protocol_error(method: str, status: int, why: str) -> ProtocolError:
    """An answer that is not what the protocol allows (docs/clients.md)."""
    return ProtocolError("%s: HTTP %d with an answer that breaks the protocol: %s; the code "
                         "may have run" % (method, status, why), code="unknown",
                         dispatched=True, http_status=status)


def declared_past_cap(method: str, status: int, declared: str,
                      max_answer_bytes: int) -> Optional[ProtocolError]:
    """The protocol error for a Content-Length past the cap, or None."""
    if declared.isdigit() and int(declared) > max_answer_bytes:
        return protocol_error(method, status, "its length, %s bytes, is past the client's "
                              "max_answer_bytes (%d)" % (declared, max_answer_bytes))
    return None


def read_past_cap(method: str, status: int, max_answer_bytes: int) -> ProtocolError:
    """The protocol error for a body that grew past the cap as it was read."""
    return protocol_error(method, status, "it is longer than the client's max_answer_bytes "
                          "(%d)" % max_answer_bytes)


def transport_error(method: str, url: str, e: BaseException) -> InfrastructureError:
    """A failed exchange: infrastructure, ``unavailable``, dispatched."""
    return InfrastructureError("%s: transport failure talking to %s: %s; the code may have "
                               "run" % (method, url, e or type(e).__name__),
                               code="unavailable", dispatched=True)


#: The request header that names a session's daemon behind a proxy.
ROUTE_HEADER = "Plimsoll-Route"


def request_headers(api_key: Key, stream: bool = False,
                    route: Optional[str] = None) -> Dict[str, str]:
    """The headers of every call (docs/clients.md, "Calls"); ``stream``: of
    a server-streaming call (RunStream, RunCellStream), whose body is one
    Connect envelope; ``route`` (checked by the caller): the session's
    daemon, sent as ``Plimsoll-Route``."""
    media = STREAM_MEDIA_TYPE if stream else "application/json"
    headers = {
        "Content-Type": media,
        "Connect-Protocol-Version": "1",
        "Authorization": "Bearer " + api_key.reveal(),
        "Accept": media,
        "User-Agent": USER_AGENT,
    }
    if route:
        headers[ROUTE_HEADER] = route
    return headers


#: The Content-Type of a Connect server stream with JSON messages.
STREAM_MEDIA_TYPE = "application/connect+json"


class Passthrough(Exception):
    """Carries an exception raised by the caller's code (an output callback)
    through the transport's handlers, which would otherwise take an OSError
    of the caller's for the exchange's."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def media_type_is_stream(value: Optional[str]) -> bool:
    """Whether a Content-Type is ``application/connect+json`` (any case);
    a charset, if any, must be UTF-8."""
    if not value:
        return False
    parts = value.split(";")
    if parts[0].strip().lower() != STREAM_MEDIA_TYPE:
        return False
    return media_type_is_json("application/json;" + ";".join(parts[1:]))


def exchange(endpoint: Endpoint, api_key: Key, method: str, body: bytes, deadline: float,
             max_answer_bytes: int,
             on_stream: Optional[Callable[[bytes], None]] = None,
             route: Optional[str] = None
             ) -> Tuple[int, Optional[str], Optional[bytes]]:
    """POST ``body`` to the method; ``(status, Content-Type, answer body)``.

    With ``on_stream`` the call is a server-streaming one (its headers say
    ``application/connect+json``): a 200 ``application/connect+json``
    answer's body is given to ``on_stream`` piece by piece as it comes, and
    the answer body returned is None; any other answer is read whole, as
    for a unary call. ``max_answer_bytes`` bounds the whole body either
    way. Wrap what the caller's code raises in ``on_stream`` in
    :class:`Passthrough`: it is raised as it is, the connection closed.
    ``route`` is sent as ``Plimsoll-Route`` (a session's call).

    ``deadline`` (``time.monotonic()``) bounds the whole exchange, however
    slowly the answer comes: a watchdog shuts the socket down when it
    passes. A body past ``max_answer_bytes`` is a :class:`ProtocolError`
    (read no further). Transport failures raise :class:`InfrastructureError`
    (dispatched: the code may have run)."""
    timeout = max(deadline - time.monotonic(), 0.0)
    conn = endpoint.connection(timeout)
    fired = threading.Event()
    finished = threading.Event()
    sock: Optional[socket.socket] = None
    lock = threading.Lock()

    def cut() -> None:
        with lock:
            if finished.is_set():
                return
            fired.set()
            # Before connect() returns, conn.sock is the TCP socket of a
            # TLS handshake in progress, if any.
            target = sock if sock is not None else conn.sock
            if target is not None:
                try:  # the plain socket's shutdown, also under TLS: wakes any blocked read
                    socket.socket.shutdown(target, socket.SHUT_RDWR)
                except OSError:
                    pass

    watchdog = threading.Timer(timeout, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()
        with lock:
            # The response keeps the socket after the connection lets go of
            # it (Connection: close), so the watchdog holds its own handle.
            sock = conn.sock
            if fired.is_set():
                raise socket.timeout("the deadline passed while connecting")
        if sock is None:
            raise OSError("no socket after connecting")
        conn.request("POST", endpoint.prefix + SERVICE + method, body=body,
                     headers=request_headers(api_key, on_stream is not None, route))
        sock.settimeout(_remaining(deadline))
        resp = conn.getresponse()
        ctype = resp.getheader("Content-Type")
        streaming = (on_stream is not None and resp.status == 200
                     and media_type_is_stream(ctype))
        past = declared_past_cap(method, resp.status,
                                 (resp.getheader("Content-Length") or "").strip(),
                                 max_answer_bytes)
        if past:
            raise past
        data = bytearray()
        total = 0
        while True:
            sock.settimeout(_remaining(deadline))
            chunk = resp.read1(65536)  # one read at most: the deadline is checked between
            if not chunk:
                break
            total += len(chunk)
            if total > max_answer_bytes:
                raise read_past_cap(method, resp.status, max_answer_bytes)
            if streaming:
                assert on_stream is not None
                on_stream(chunk)
            else:
                data += chunk
        if getattr(resp, "length", None):  # read1 ends quietly when the peer hangs up early
            raise http.client.IncompleteRead(bytes(data), resp.length)
        _remaining(deadline)
        return resp.status, ctype, None if streaming else bytes(data)
    except Passthrough:
        raise
    except socket.timeout as e:
        raise deadline_error(method, endpoint.url, timeout, str(e)) from e
    except (OSError, http.client.HTTPException) as e:
        if fired.is_set() or time.monotonic() >= deadline:
            raise deadline_error(method, endpoint.url, timeout, "cut at the deadline") from e
        raise transport_error(method, endpoint.url, e) from e
    finally:
        watchdog.cancel()
        with lock:  # the watchdog leaves alone a socket that is being closed
            finished.set()
        conn.close()


def _varint(data: bytes, i: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes, deadline: Optional[float] = None) -> Dict[int, list]:
    """The length-delimited fields of a protobuf message, by number; past
    ``deadline``, :class:`~plimsoll._answer.DeadlinePassed`."""
    out: Dict[int, list] = {}
    i = 0
    n = 0
    while i < len(data):
        n += 1
        if deadline is not None and n % 4096 == 0 and time.monotonic() > deadline:
            raise _answer.DeadlinePassed()
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _varint(data, i)
            if i + n > len(data):
                raise ValueError("truncated field")
            out.setdefault(number, []).append(data[i:i + n])
            i += n
        else:
            raise ValueError("unsupported wire type %d" % wire)
    return out


def decode_error_info(value: str,
                      deadline: Optional[float] = None) -> Tuple[str, Dict[str, str]]:
    """``reason`` and ``metadata`` of a ``google.rpc.ErrorInfo`` sent as
    (unpadded) base64 protobuf."""
    raw = base64.b64decode(value + "=" * (-len(value) % 4))
    f = _fields(raw, deadline)
    reason = f[1][0].decode("utf-8") if 1 in f else ""
    metadata: Dict[str, str] = {}
    for entry in f.get(3, []):
        kv = _fields(entry)
        k = kv[1][0].decode("utf-8") if 1 in kv else ""
        metadata[k] = kv[2][0].decode("utf-8") if 2 in kv else ""
    return reason, metadata


def _error_info(details: Any, deadline: Optional[float]) -> Tuple[str, Dict[str, str]]:
    if not isinstance(details, list) or not details or not isinstance(details[0], dict):
        return "", {}
    d = details[0]
    debug = d.get("debug")
    if isinstance(debug, dict) and isinstance(debug.get("reason"), str):
        md = debug.get("metadata")
        md = {str(k): str(v) for k, v in md.items()} if isinstance(md, dict) else {}
        return debug["reason"], md
    if isinstance(d.get("value"), str):
        try:
            return decode_error_info(d["value"], deadline)
        except (ValueError, binascii.Error, UnicodeDecodeError, IndexError):
            pass
    return "", {}


def media_type_is_json(value: Optional[str]) -> bool:
    """Whether a Content-Type is ``application/json`` (any case), with a
    charset, if any, of UTF-8 (quoted or not); other parameters are
    ignored."""
    if not value:
        return False
    parts = value.split(";")
    if parts[0].strip().lower() != "application/json":
        return False
    for p in parts[1:]:
        name, _, v = p.partition("=")
        if name.strip().lower() == "charset":
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            if v.lower() != "utf-8":
                return False
    return True


def error_from_answer(method: str, status: int, body: bytes,
                      deadline: Optional[float] = None, url: str = "",
                      timeout: float = 0.0) -> PlimsollError:
    """The error a non-200 answer stands for (docs/clients.md, "Three
    channels"): a refusal, infrastructure, or a :class:`ProtocolError` for
    a body that is not a Connect error."""
    try:
        obj = _answer.parse(body, deadline)
    except _answer.Malformed as e:
        snippet = body[:120].decode("utf-8", "replace")
        return protocol_error(method, status, "not a Connect error (%s): %r" % (e, snippet))
    except _answer.DeadlinePassed:
        return deadline_error(method, url, timeout, "still decoding the error")
    return error_from_connect(method, status, obj, deadline, url, timeout,
                              body[:120].decode("utf-8", "replace"))


def error_from_connect(method: str, status: int, obj: Any,
                       deadline: Optional[float] = None, url: str = "",
                       timeout: float = 0.0, snippet: str = "") -> PlimsollError:
    """The error a Connect error object stands for: the JSON of a non-200
    answer, or the ``error`` of a stream's end-of-stream message (then
    ``status`` is the stream's 200)."""
    try:
        obj = _answer.check_shape(obj, _answer.CONNECT_ERROR, "the error")
        if not isinstance(obj.get("code"), str):
            raise _answer.Malformed("it has no code")
        code = obj["code"]
        message = obj.get("message") or ""
        reason, metadata = _error_info(obj.get("details"), deadline)
    except _answer.Malformed as e:
        return protocol_error(method, status, "not a Connect error (%s)%s"
                              % (e, ": %r" % snippet if snippet else ""))
    except _answer.DeadlinePassed:
        return deadline_error(method, url, timeout, "still decoding the error")
    if deadline is not None and time.monotonic() > deadline:
        return deadline_error(method, url, timeout, "still decoding the error")
    if reason == "INTERNAL" or (not reason and code == "internal"):
        return InfrastructureError(message or "internal error", reason=reason, code=code,
                                   dispatched=metadata.get("dispatched", "true") != "false",
                                   metadata=metadata, http_status=status)
    cls = refusal_class(reason)
    return cls(message, reason=reason, code=code,
               dispatched=metadata.get("dispatched") == "true",
               metadata=metadata, http_status=status)


def parse_ok(method: str, body: bytes, content_type: Optional[str] = "application/json",
             deadline: Optional[float] = None, url: str = "",
             timeout: float = 0.0) -> Dict[str, Any]:
    """The JSON object of a 200 answer, its known members of their types;
    anything else is a :class:`ProtocolError`, and decoding past the
    deadline the timeout error."""
    if not media_type_is_json(content_type):
        raise protocol_error(method, 200, "its Content-Type is %r, not application/json"
                             % (content_type,))
    try:
        obj = _answer.check_answer(_answer.parse(body, deadline), method)
    except _answer.Malformed as e:
        raise protocol_error(method, 200, str(e)) from None
    except _answer.DeadlinePassed:
        raise deadline_error(method, url, timeout, "still decoding the answer") from None
    if deadline is not None and time.monotonic() > deadline:
        raise deadline_error(method, url, timeout, "still decoding the answer")
    return obj
