"""One Connect unary call over HTTP/1.1 (standard library only), and the
mapping of its answer onto results and errors."""
from __future__ import annotations

import base64
import binascii
import http.client
import json
import socket
import ssl
import time
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from .errors import InfrastructureError, PlimsollError, refusal_class

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
                raise ValueError("plimsoll: %r names no socket" % url)
            return
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("plimsoll: the URL %r is not http://host:port, https://… or "
                             "unix:/path" % url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
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


def exchange(endpoint: Endpoint, api_key: str, method: str, body: bytes,
             timeout: float) -> Tuple[int, bytes]:
    """POST ``body`` to the method; ``(status, answer body)``. ``timeout``
    bounds the whole exchange. Transport failures raise
    :class:`InfrastructureError` (dispatched: the code may have run)."""
    deadline = time.monotonic() + timeout
    conn = endpoint.connection(timeout)
    try:
        conn.request("POST", endpoint.prefix + SERVICE + method, body=body, headers={
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            "Authorization": "Bearer " + api_key,
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        })
        if conn.sock is not None:
            conn.sock.settimeout(_remaining(deadline))
        resp = conn.getresponse()
        chunks = []
        while True:
            if conn.sock is not None:
                conn.sock.settimeout(_remaining(deadline))
            chunk = resp.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return resp.status, b"".join(chunks)
    except socket.timeout as e:
        raise InfrastructureError("%s: no complete answer from %s within %.1f s (%s); the "
                                  "code may have run" % (method, endpoint.url, timeout, e),
                                  code="deadline_exceeded", dispatched=True) from e
    except (OSError, http.client.HTTPException) as e:
        raise InfrastructureError("%s: transport failure talking to %s: %s; the code may "
                                  "have run" % (method, endpoint.url, e or type(e).__name__),
                                  code="unavailable", dispatched=True) from e
    finally:
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


def _fields(data: bytes) -> Dict[int, list]:
    """The length-delimited fields of a protobuf message, by number."""
    out: Dict[int, list] = {}
    i = 0
    while i < len(data):
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


def decode_error_info(value: str) -> Tuple[str, Dict[str, str]]:
    """``reason`` and ``metadata`` of a ``google.rpc.ErrorInfo`` sent as
    (unpadded) base64 protobuf."""
    raw = base64.b64decode(value + "=" * (-len(value) % 4))
    f = _fields(raw)
    reason = f[1][0].decode("utf-8") if 1 in f else ""
    metadata: Dict[str, str] = {}
    for entry in f.get(3, []):
        kv = _fields(entry)
        k = kv[1][0].decode("utf-8") if 1 in kv else ""
        metadata[k] = kv[2][0].decode("utf-8") if 2 in kv else ""
    return reason, metadata


def _error_info(details: Any) -> Tuple[str, Dict[str, str]]:
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
            return decode_error_info(d["value"])
        except (ValueError, binascii.Error, UnicodeDecodeError, IndexError):
            pass
    return "", {}


def error_from_answer(method: str, status: int, body: bytes) -> PlimsollError:
    """The error a non-200 answer stands for (docs/clients.md, "Three
    channels")."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("code"), str):
        snippet = body[:200].decode("utf-8", "replace")
        return InfrastructureError("%s: HTTP %d with an answer that is not a Connect error: %r"
                                   % (method, status, snippet),
                                   code="unknown", dispatched=True, http_status=status)
    code = obj["code"]
    message = obj.get("message") if isinstance(obj.get("message"), str) else ""
    reason, metadata = _error_info(obj.get("details"))
    if reason == "INTERNAL" or (not reason and code == "internal"):
        return InfrastructureError(message or "internal error", reason=reason, code=code,
                                   dispatched=metadata.get("dispatched", "true") != "false",
                                   metadata=metadata, http_status=status)
    cls = refusal_class(reason)
    return cls(message, reason=reason, code=code,
               dispatched=metadata.get("dispatched") == "true",
               metadata=metadata, http_status=status)


def parse_ok(method: str, body: bytes) -> Dict[str, Any]:
    """The JSON object of a 200 answer; anything else is infrastructure."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InfrastructureError("%s: a 200 answer that is not JSON (%s); the code may "
                                  "have run" % (method, e), code="unknown", dispatched=True,
                                  http_status=200) from None
    if not isinstance(obj, dict):
        raise InfrastructureError("%s: a 200 answer that is not a JSON object; the code may "
                                  "have run" % method, code="unknown", dispatched=True,
                                  http_status=200)
    return obj
