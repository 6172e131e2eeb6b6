# SPDX-License-Identifier: Apache-2.0
"""What an answer may be (docs/clients.md, "What a client reads"): JSON
text in UTF-8, no deeper than MAX_ANSWER_DEPTH, no member twice, integers only and
none past MAX_ANSWER_INTEGER, the known members of each message of their proto
type, and what a type cannot say (a SessionInfo's id, state and times; a
ReadFile's base64, length and ``more``; a FileEntry's type, mode and time:
:data:`VALUES`). Anything else is :class:`Malformed`, which the transport
turns into a :class:`~plimsoll.errors.ProtocolError`."""
from __future__ import annotations

import base64
import json
import re
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .results import DISPLAY_KINDS, FILE_TYPES, SESSION_STATES, mime_is_text, parse_time

#: The default cap on one answer's body, the same in every official client.
DEFAULT_MAX_ANSWER_BYTES = 256 << 20
#: Objects and arrays nested in an answer, the answer itself counting 1.
MAX_ANSWER_DEPTH = 64
#: The largest magnitude of a number in an answer (2^53 - 1: every client
#: can hold it exactly).
MAX_ANSWER_INTEGER = 2 ** 53 - 1


class Malformed(ValueError):
    """An answer that breaks the rules above."""


class DeadlinePassed(Exception):
    """Decoding ran past the call's deadline."""


def _no_float(text: str) -> Any:
    raise Malformed("a number that is not an integer (%s)" % text[:40])


def _no_constant(text: str) -> Any:
    raise Malformed("%s is not JSON" % text)


def _integer(text: str) -> int:
    # Checked on the text first: Python's int() of a long digit string is
    # slow, and no allowed number has more than 16 digits.
    if len(text) > 17:
        raise Malformed("an integer of %d digits" % len(text.lstrip("-")))
    n = int(text)
    if abs(n) > MAX_ANSWER_INTEGER:
        raise Malformed("the integer %s is past 2^53-1" % text)
    return n


def _object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise Malformed("the member %r appears twice" % k[:40])
            seen.add(k)
    return d


def _unicode(s: str) -> None:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise Malformed("a string holds a lone surrogate") from None


def _walk(value: Any, deadline: Optional[float]) -> None:
    """Depth, and strings that are Unicode; the deadline every few
    thousand containers."""
    stack = [(value, 1)]
    seen = 0
    while stack:
        v, depth = stack.pop()
        if depth > MAX_ANSWER_DEPTH:
            raise Malformed("nested deeper than %d" % MAX_ANSWER_DEPTH)
        seen += 1
        if deadline is not None and seen % 4096 == 0 and time.monotonic() > deadline:
            raise DeadlinePassed()
        if isinstance(v, dict):
            items = v.values()
            for k in v:
                _unicode(k)
        else:
            items = v
        for x in items:
            if isinstance(x, str):
                _unicode(x)
            elif isinstance(x, (dict, list)):
                stack.append((x, depth + 1))


def parse(data: bytes, deadline: Optional[float] = None) -> Any:
    """The JSON value of an answer's body, or :class:`Malformed`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Malformed("not UTF-8 (byte %d)" % e.start) from None
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_int=_integer,
                           parse_float=_no_float, parse_constant=_no_constant)
    except RecursionError:
        raise Malformed("nested deeper than %d" % MAX_ANSWER_DEPTH) from None
    except Malformed:
        raise
    except ValueError as e:
        raise Malformed("not JSON (%s)" % e) from None
    if isinstance(value, str):
        _unicode(value)
    elif isinstance(value, (dict, list)):
        _walk(value, deadline)
    return value


# ---- the messages' shapes (proto/plimsoll/v1/sandbox.proto) ---------------

STRING, BOOL, INT32, UINT32 = "string", "bool", "int32", "uint32"
#: A proto map<string, string>: an object whose every member is a string.
STRING_MAP = "map<string, string>"

USAGE: Dict[str, Any] = {
    "cpu_user_ms": UINT32, "cpu_system_ms": UINT32, "memory_peak_kib": UINT32,
    "wall_ms": UINT32, "source": STRING,
}
STEP_RESULT: Dict[str, Any] = {
    "name": STRING, "exit_code": INT32, "stdout": STRING, "stderr": STRING,
    "stdout_truncated": BOOL, "stderr_truncated": BOOL, "duration_ms": UINT32,
    "timed_out": BOOL, "stdout_base64": STRING, "stderr_base64": STRING, "usage": USAGE,
}
DISPLAY_OUTPUT: Dict[str, Any] = {"kind": STRING, "data": STRING_MAP}
RUN_RECORD: Dict[str, Any] = {
    "version": INT32, "request_sha256": STRING, "response_sha256": STRING,
    "provider": STRING, "isolation": STRING, "runtime": STRING, "started_at": STRING,
    "ended_at": STRING, "previous_digest": STRING, "digest": STRING,
    "broker_calls": UINT32, "broker_refused": UINT32,
}
ARTIFACT: Dict[str, Any] = {
    "path": STRING, "path_base64": STRING, "size": UINT32, "content": STRING,
    "content_base64": STRING, "truncated": BOOL,
}
RUN_RESPONSE: Dict[str, Any] = {
    "exit_code": INT32, "stdout": STRING, "stderr": STRING, "stdout_truncated": BOOL,
    "stderr_truncated": BOOL, "duration_ms": UINT32, "sandbox_name": STRING,
    "isolation": STRING, "timed_out": BOOL, "out_of_memory": BOOL, "outcome": STRING,
    "detail": STRING, "steps": [STEP_RESULT], "record": RUN_RECORD,
    "stdout_base64": STRING, "stderr_base64": STRING, "interpreter_started": BOOL,
    "artifacts": [ARTIFACT], "artifacts_truncated": BOOL,
    "outputs": [DISPLAY_OUTPUT], "outputs_dropped": UINT32, "usage": USAGE,
    "usage_absent": STRING,
}
OPERATION_SUPPORT: Dict[str, Any] = {
    "supported": BOOL, "engine": STRING, "max_timeout_ms": UINT32, "languages": [STRING],
    "grants": BOOL, "streams": BOOL,
}
LIMITS: Dict[str, Any] = dict(
    {k: UINT32 for k in ("memory_mb", "total_memory_mb", "max_concurrent",
                         "effective_concurrency", "per_key_concurrent", "rate_per_min",
                         "rate_burst", "default_timeout_ms", "output_bytes",
                         "max_snippet_bytes", "max_request_bytes", "min_memory_mb",
                         "file_read_bytes", "file_list_entries", "session_max_lifetime_s",
                         "collect_files", "collect_bytes", "display_outputs",
                         "display_output_bytes", "display_bytes")},
    memory_budget_applies=BOOL)
DESCRIBE_RESPONSE: Dict[str, Any] = {
    "version": STRING, "provider": STRING, "isolation": STRING, "runtime": STRING,
    "ready": BOOL, "ready_detail": STRING, "supports_sessions": BOOL, "languages": [STRING],
    "operations": dict({k: OPERATION_SUPPORT
                        for k in ("snippet", "project", "module", "session", "files")},
                       artifacts={"project": BOOL, "snippet": BOOL},
                       display={k: BOOL for k in ("python", "javascript", "matplotlib",
                                                  "pandas")}),
    "limits": LIMITS,
}
OPEN_SESSION_RESPONSE: Dict[str, Any] = {"session_id": STRING, "route": STRING}
SESSION_INTERPRETER: Dict[str, Any] = {"language": STRING, "alive": BOOL}
SESSION_INFO: Dict[str, Any] = {
    "session_id": STRING, "state": STRING, "ended_reason": STRING, "created_at": STRING,
    "last_call_at": STRING, "idle_deadline": STRING, "lifetime_deadline": STRING,
    "ended_at": STRING, "calls": UINT32, "calls_waiting": UINT32, "previous_digest": STRING,
    "languages": [STRING], "interpreters": [SESSION_INTERPRETER], "disk_used_kib": UINT32,
    "disk_budget_kib": UINT32, "max_lifetime_s": UINT32, "route": STRING,
}
LIST_SESSIONS_RESPONSE: Dict[str, Any] = {"sessions": [SESSION_INFO]}
WRITE_FILES_RESPONSE: Dict[str, Any] = {"files": UINT32, "bytes": UINT32, "record": RUN_RECORD}
READ_FILE_RESPONSE: Dict[str, Any] = {
    "path": STRING, "size": UINT32, "offset": UINT32, "content": STRING,
    "content_base64": STRING, "length": UINT32, "more": BOOL, "record": RUN_RECORD,
}
FILE_ENTRY: Dict[str, Any] = {
    "path": STRING, "path_base64": STRING, "type": STRING, "size": UINT32, "mode": UINT32,
    "modified_at": STRING,
}
LIST_FILES_RESPONSE: Dict[str, Any] = {"entries": [FILE_ENTRY], "truncated": BOOL,
                                       "record": RUN_RECORD}
EMPTY: Dict[str, Any] = {}
#: The answer of each method on 200.
RESPONSES: Dict[str, Dict[str, Any]] = {
    "Describe": DESCRIBE_RESPONSE, "Run": RUN_RESPONSE, "RunInSession": RUN_RESPONSE,
    "RunCell": RUN_RESPONSE, "OpenSession": OPEN_SESSION_RESPONSE, "CloseSession": EMPTY,
    "ListSessions": LIST_SESSIONS_RESPONSE, "GetSession": SESSION_INFO,
    "ExtendSession": SESSION_INFO, "WriteFiles": WRITE_FILES_RESPONSE,
    "ReadFile": READ_FILE_RESPONSE, "ListFiles": LIST_FILES_RESPONSE,
}
#: A message of RunStream and RunCellStream (bytes are base64 strings).
OUTPUT_CHUNK: Dict[str, Any] = {"stdout": STRING, "stderr": STRING, "step": UINT32,
                                "display": DISPLAY_OUTPUT}
RUN_STREAM_RESPONSE: Dict[str, Any] = {"output": OUTPUT_CHUNK, "result": RUN_RESPONSE}
#: What of a Connect error is checked: its details are the extensions'
#: business and are read leniently.
CONNECT_ERROR: Dict[str, Any] = {"code": STRING, "message": STRING, "details": ["any"]}

#: A stream's end-of-stream message: ``{}`` or ``{"error": …}`` (Connect's
#: "metadata" is allowed and ignored).
END_STREAM: Dict[str, Any] = {"error": CONNECT_ERROR, "metadata": "any"}

_RANGES = {INT32: (-2 ** 31, 2 ** 31 - 1), UINT32: (0, 2 ** 32 - 1)}


def _check(value: Any, kind: Any, where: str) -> None:
    if kind == "any":
        return
    if kind == STRING_MAP:
        if not isinstance(value, dict):
            raise Malformed("%s is not an object" % where)
        for k, v in value.items():
            if not isinstance(v, str):
                raise Malformed("%s[%r] is not a string" % (where, k[:40]))
        return
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise Malformed("%s is not an object" % where)
        for name, sub in kind.items():
            v = value.get(name)
            if v is not None:  # null is the default, as proto3 JSON says
                _check(v, sub, where + "." + name)
        return
    if isinstance(kind, list):
        if not isinstance(value, list):
            raise Malformed("%s is not an array" % where)
        for i, v in enumerate(value):
            if v is None:
                raise Malformed("%s[%d] is null" % (where, i))
            _check(v, kind[0], "%s[%d]" % (where, i))
        return
    if kind == STRING:
        ok = isinstance(value, str)
    elif kind == BOOL:
        ok = isinstance(value, bool)
    else:
        lo, hi = _RANGES[kind]
        ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    if not ok:
        raise Malformed("%s is not a%s %s" % (where, "n" if kind[0] in "iu" else "", kind))


def check_shape(value: Any, shape: Mapping[str, Any], what: str) -> Dict[str, Any]:
    """``value`` when it is an object whose known members have their types."""
    if not isinstance(value, dict):
        raise Malformed("the answer is not a JSON object")
    _check(value, dict(shape), what)
    return value


# ---- what a shape cannot say -----------------------------------------------------

_HEX64 = re.compile(r"[0-9a-f]{64}")
#: A daemon's route (its PLIMSOLL_INSTANCE): 1 to 63 of [A-Za-z0-9._-].
ROUTE = re.compile(r"[A-Za-z0-9._-]{1,63}")
#: SessionInfo's instants: RFC 3339 in UTC, or "" for none.
SESSION_TIMES = ("created_at", "last_call_at", "idle_deadline", "lifetime_deadline",
                 "ended_at")


def _session_info(value: Dict[str, Any], where: str) -> None:
    """A SessionInfo of the right shape that is one: its id 64 lowercase hex
    (what OpenSession gives), a known state, times that are times, a
    ``previous_digest`` that is a digest or ``""``, a ``route`` that a
    daemon may have or ``""``."""
    sid = value.get("session_id") or ""
    if not _HEX64.fullmatch(sid):
        raise Malformed("%s.session_id is %s, not 64 lowercase hex characters"
                        % (where, "missing" if not sid else repr(sid[:80])))
    state = value.get("state") or ""
    if state not in SESSION_STATES:
        raise Malformed("%s.state is %r, not one of %s"
                        % (where, state[:40], ", ".join(SESSION_STATES)))
    for name in SESSION_TIMES:
        try:
            parse_time(value.get(name) or "")
        except ValueError:
            raise Malformed("%s.%s is %r, not an RFC 3339 time in UTC"
                            % (where, name, value[name][:40])) from None
    previous = value.get("previous_digest") or ""
    if previous and not _HEX64.fullmatch(previous):
        raise Malformed("%s.previous_digest is %r, not a digest (64 lowercase hex) or \"\""
                        % (where, previous[:80]))
    _route(value, where)


def _route(value: Dict[str, Any], where: str) -> None:
    route = value.get("route") or ""
    if route and not ROUTE.fullmatch(route):
        raise Malformed("%s.route is %r, not 1 to 63 of [A-Za-z0-9._-] or \"\""
                        % (where, route[:80]))


def _list_sessions(value: Dict[str, Any], where: str) -> None:
    for i, info in enumerate(value.get("sessions") or []):
        _session_info(info, "%s.sessions[%d]" % (where, i))


_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?")


def base64_bytes(text: str, where: str) -> bytes:
    """The bytes of ``text``, standard base64 (its padding may be left
    out); else :class:`Malformed` naming ``where``."""
    if not _BASE64.fullmatch(text):
        raise Malformed("%s is not base64" % where)
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _read_file(value: Dict[str, Any], where: str) -> None:
    """ReadFile's answer: ``content_base64`` base64, ``length`` the number
    of bytes that came, ``more`` whether bytes remain past them."""
    b64 = value.get("content_base64") or ""
    if b64:
        n = len(base64_bytes(b64, where + ".content_base64"))
    else:
        n = len((value.get("content") or "").encode("utf-8"))
    length = value.get("length") or 0
    if length != n:
        raise Malformed("%s.length is %d, but %d bytes came" % (where, length, n))
    offset, size = value.get("offset") or 0, value.get("size") or 0
    if n and offset + n > size:
        raise Malformed("%s: %d bytes from offset %d pass the file's size, %d"
                        % (where, n, offset, size))
    if bool(value.get("more")) != (offset + n < size):
        raise Malformed("%s.more is %s, but %d bytes from offset %d %s the file's size, %d"
                        % (where, "true" if value.get("more") else "false", n, offset,
                           "reach" if offset + n >= size else "do not reach", size))


def _list_files(value: Dict[str, Any], where: str) -> None:
    """ListFiles' entries: a known type, a path (``path_base64`` base64
    when present), permission bits, a time that is one."""
    for i, e in enumerate(value.get("entries") or []):
        at = "%s.entries[%d]" % (where, i)
        b64 = e.get("path_base64") or ""
        if not (base64_bytes(b64, at + ".path_base64") if b64 else e.get("path")):
            raise Malformed("%s has no path" % at)
        kind = e.get("type") or ""
        if kind not in FILE_TYPES:
            raise Malformed("%s.type is %r, not one of %s"
                            % (at, kind[:40], ", ".join(FILE_TYPES)))
        if (e.get("mode") or 0) > 0o7777:
            raise Malformed("%s.mode is %o, more than permission bits" % (at, e["mode"]))
        try:
            parse_time(e.get("modified_at") or "")
        except ValueError:
            raise Malformed("%s.modified_at is %r, not an RFC 3339 time in UTC"
                            % (at, e["modified_at"][:40])) from None


def check_display(d: Dict[str, Any], where: str) -> None:
    """A display output: a kind of :data:`DISPLAY_KINDS`, and the data of
    each type that is not text (:func:`mime_is_text`) base64."""
    kind = d.get("kind") or ""
    if kind not in DISPLAY_KINDS:
        raise Malformed("%s.kind is %r, not one of %s"
                        % (where, kind[:40], ", ".join(DISPLAY_KINDS)))
    for mime, data in (d.get("data") or {}).items():
        if not mime_is_text(mime):
            base64_bytes(data, "%s.data[%r]" % (where, mime[:40]))


def check_run(value: Dict[str, Any], where: str) -> None:
    """A run's artifacts (their base64 is base64, each has a path) and
    display outputs (:func:`check_display`)."""
    for i, d in enumerate(value.get("outputs") or []):
        check_display(d, "%s.outputs[%d]" % (where, i))
    for i, a in enumerate(value.get("artifacts") or []):
        at = "%s.artifacts[%d]" % (where, i)
        b64 = a.get("path_base64") or ""
        if not (base64_bytes(b64, at + ".path_base64") if b64 else a.get("path")):
            raise Malformed("%s has no path" % at)
        if a.get("content_base64"):
            base64_bytes(a["content_base64"], at + ".content_base64")


#: What each method's answer must be beyond its shape's types.
VALUES: Dict[str, Callable[[Dict[str, Any], str], None]] = {
    "Run": check_run, "RunInSession": check_run, "RunCell": check_run,
    "ListSessions": _list_sessions, "GetSession": _session_info,
    "ExtendSession": _session_info, "ReadFile": _read_file, "ListFiles": _list_files,
    "OpenSession": _route,
}


def check_answer(value: Any, method: str) -> Dict[str, Any]:
    """``value`` when it is the 200 answer of ``method``: an object of the
    method's shape (:data:`RESPONSES`; ``{}`` for a method not listed), and
    the values its shape cannot say (:data:`VALUES`)."""
    obj = check_shape(value, RESPONSES.get(method, EMPTY), method)
    values = VALUES.get(method)
    if values is not None:
        values(obj, method)
    return obj
