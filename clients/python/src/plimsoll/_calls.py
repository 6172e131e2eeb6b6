# SPDX-License-Identifier: Apache-2.0
"""What the synchronous and the asyncio clients share, with no I/O in it:
the requests they build, each call as data (what is sent, and how its 200
answer becomes a result), the reading of an answer into a result or an
error, the tier re-check, the record checks and the retry policy
(docs/clients.md). ``client.Client`` and ``aio.AsyncClient`` only move the
bytes."""
from __future__ import annotations

import base64
import contextlib
import os
import random
import re
import stat
import time
from dataclasses import dataclass
from typing import (Any, BinaryIO, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from . import _config, _transport
from ._answer import DEFAULT_MAX_ANSWER_BYTES, ROUTE
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, Decoder, envelope
from .errors import (AtCapacityError, FileChangedError, IsolationEvidenceMismatchError,
                     PlimsollError, ProtocolError, RateLimitedError, SessionEndedError)
from .record import Chain, canonical, check_record
from .results import (Description, ListFilesResult, ReadFileResult, RunResult, SessionInfo,
                      WriteFilesResult)

#: Isolation tiers, weakest first.
TIERS = ("none", "process", "container", "kernel", "vm")

Files = Union[Mapping[str, Union[str, bytes]], Sequence[Mapping[str, Any]]]
Steps = Sequence[Union[Sequence[str], Mapping[str, Any]]]


def tier_rank(tier: Any) -> int:
    """A tier's rank (``none`` 0 … ``vm`` 4); -1 for an unknown tier, which is
    below every floor."""
    try:
        return TIERS.index(tier)
    except ValueError:
        return -1


@dataclass(frozen=True)
class RetryPolicy:
    """Opt-in retries of ``AT_CAPACITY`` and ``RATE_LIMITED`` refusals only.

    Up to ``max_attempts`` attempts in all; before retry *n* (0-based) the
    client sleeps a uniform random time in ``[d/2, d]`` milliseconds, where
    ``d = min(cap_ms, base_ms * 2**n)`` ("equal jitter").
    """

    max_attempts: int = 4
    base_ms: int = 100
    cap_ms: int = 2000

    def __post_init__(self) -> None:
        for name in ("max_attempts", "base_ms", "cap_ms"):
            _check_int("RetryPolicy: " + name, getattr(self, name))
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy: max_attempts must be at least 1")
        if self.base_ms < 0 or self.cap_ms < 0:
            raise ValueError("RetryPolicy: base_ms and cap_ms may not be negative")

    def ceiling_ms(self, n: int) -> float:
        """``d`` for retry ``n``: ``min(cap_ms, base_ms * 2**n)``."""
        return float(min(self.cap_ms, self.base_ms * (2 ** n)))

    def delay_ms(self, n: int, rng: Callable[[float, float], float] = random.uniform) -> float:
        """How long to sleep before retry ``n`` (0-based), in milliseconds."""
        d = self.ceiling_ms(n)
        return rng(d / 2, d)


RETRYABLE = (AtCapacityError, RateLimitedError)


def retry_delay(policy: Optional[RetryPolicy], err: PlimsollError, n: int) -> Optional[float]:
    """Seconds to sleep before retry ``n`` (0-based) after ``err``, or None
    when the error is to be raised: no policy, not a retried reason, or the
    attempts spent."""
    if policy is None or not isinstance(err, RETRYABLE) or n + 1 >= policy.max_attempts:
        return None
    return policy.delay_ms(n) / 1000.0


# ---- arguments -----------------------------------------------------------------

#: The largest value of a ``uint32`` field (``timeout_ms``, ``memory_mb``).
UINT32_MAX = 2 ** 32 - 1


def _check_int(name: str, value: Any, lo: int = 0, hi: Optional[int] = None) -> None:
    """An integer argument: an ``int`` (not a ``bool`` or a ``str``) in
    ``[lo, hi]``; else ``TypeError`` naming it, or ``ValueError`` for a
    number that is not such an integer (``1.5``, ``5000.0``, ``-1``)."""
    if isinstance(value, float):
        raise ValueError("plimsoll: %s must be an int, not the float %r" % (name, value))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("plimsoll: %s must be an int, not %s" % (name, type(value).__name__))
    if value < lo or (hi is not None and value > hi):
        raise ValueError("plimsoll: %s must be %s, not %d"
                         % (name, "at least %d" % lo if hi is None
                            else "from %d to %d" % (lo, hi), value))


def _check_uint32(name: str, value: Any) -> None:
    if value is not None:
        _check_int(name, value, 0, UINT32_MAX)


def _check_str(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError("plimsoll: %s must be a str, not %s" % (name, type(value).__name__))


_SESSION_ID = re.compile(r"[0-9a-f]{64}")


def check_session_id(session_id: Any) -> None:
    """A session id as OpenSession gives it: a ``str`` of 64 lowercase hex
    characters; else ``TypeError`` or ``ValueError``, before anything is
    sent."""
    if not isinstance(session_id, str):
        raise TypeError("plimsoll: session_id must be a str, not %s"
                        % type(session_id).__name__)
    if not _SESSION_ID.fullmatch(session_id):
        raise ValueError("plimsoll: session_id must be 64 lowercase hex characters, as "
                         "OpenSession gives it, not %r" % (session_id[:80],))


def check_route(route: Any) -> Optional[str]:
    """A route the caller gives (a daemon's ``PLIMSOLL_INSTANCE``, as
    ``Session.route`` or ``SessionInfo.route`` has it): None or ``""`` is
    none; else a ``str`` of 1 to 63 of ``[A-Za-z0-9._-]``, or ``TypeError``
    or ``ValueError`` before anything is sent."""
    if route is None or route == "":
        return None
    if not isinstance(route, str):
        raise TypeError("plimsoll: route must be a str, not %s" % type(route).__name__)
    if not ROUTE.fullmatch(route):
        raise ValueError("plimsoll: route must be 1 to 63 of A-Z, a-z, 0-9, '.', '_' and "
                         "'-' (a daemon's PLIMSOLL_INSTANCE), not %r" % (route[:80],))
    return route


def check_floor(minimum_isolation: Any) -> None:
    """A session's floor: None or a known tier."""
    if minimum_isolation is not None and tier_rank(minimum_isolation) < 0:
        raise ValueError("plimsoll: unknown tier %r (one of %s)"
                         % (minimum_isolation, ", ".join(TIERS)))


def check_run_fields(request: Mapping[str, Any]) -> None:
    """A RunRequest's settings of the right types, before it is sent: a
    ``timeout_ms`` of ``"5000"`` would be read by the daemon as 5000 and
    hashed as a number, so the record could never match what was sent."""
    if not isinstance(request, Mapping):
        raise TypeError("plimsoll: a RunRequest is a dict, not %s" % type(request).__name__)
    _check_uint32("timeout_ms", request.get("timeout_ms"))
    _check_uint32("memory_mb", request.get("memory_mb"))
    _check_str("minimum_isolation", request.get("minimum_isolation"))
    _check_str("grant_profile", request.get("grant_profile"))
    snippet = request.get("snippet")
    if isinstance(snippet, Mapping):
        for name in ("language", "code", "stdin"):
            _check_str(name, snippet.get(name))


# ---- requests ----------------------------------------------------------------


def _nonempty(**fields: Any) -> Dict[str, Any]:
    """The fields the caller set: no ``None`` is ever sent."""
    return {k: v for k, v in fields.items() if v is not None}


def without_nulls(value: Any) -> Any:
    """``value`` with every ``None`` member of its objects left out, at every
    depth: the daemon drops nulls before hashing, so sending none keeps the
    request digest the digest of exactly what was sent."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [without_nulls(v) for v in value]
    return value


def _run_fields(minimum_isolation: Optional[str], timeout_ms: Optional[int],
                memory_mb: Optional[int], grant_profile: Optional[str]) -> Dict[str, Any]:
    _check_str("minimum_isolation", minimum_isolation)
    _check_uint32("timeout_ms", timeout_ms)
    _check_uint32("memory_mb", memory_mb)
    _check_str("grant_profile", grant_profile)
    return _nonempty(minimum_isolation=minimum_isolation, timeout_ms=timeout_ms,
                     memory_mb=memory_mb, grant_profile=grant_profile)


def _collect(collect: Sequence[str]) -> List[str]:
    """``collect`` as the list of glob strings sent."""
    if isinstance(collect, (str, bytes)) or not all(isinstance(g, str) for g in collect):
        raise TypeError("plimsoll: collect is a list of glob strings, not %r"
                        % (collect[:40] if isinstance(collect, (str, bytes)) else collect,))
    return list(collect)


def snippet_request(code: str, language: str = "javascript", stdin: Optional[str] = None, *,
                    minimum_isolation: Optional[str] = None, timeout_ms: Optional[int] = None,
                    memory_mb: Optional[int] = None, grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """A RunRequest with a snippet; ``collect`` is globs relative to the work
    directory whose files come back as the result's ``artifacts`` once the
    guest ended (docs/api.md, "Artifacts"; not sent when None)."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, grant_profile)
    _check_str("code", code)
    _check_str("language", language)
    _check_str("stdin", stdin)
    req["snippet"] = _nonempty(language=language, code=code, stdin=stdin)
    if collect is not None:
        req["snippet"]["collect"] = _collect(collect)
    return req


def _files(files: Optional[Files]) -> List[Dict[str, Any]]:
    if files is None:
        return []
    if isinstance(files, Mapping):
        out = []
        for path, content in files.items():
            if isinstance(content, (bytes, bytearray, memoryview)):
                out.append({"path": path,
                            "content_base64": base64.b64encode(bytes(content)).decode("ascii")})
            elif isinstance(content, str):
                out.append({"path": path, "content": content})
            else:
                raise TypeError("plimsoll: file %r: content must be str or bytes" % path)
        return out
    return [dict(f) for f in files]


def _steps(steps: Steps) -> List[Dict[str, Any]]:
    out = []
    for s in steps:
        if isinstance(s, Mapping):
            out.append(dict(s))
        elif isinstance(s, (str, bytes)):
            raise TypeError("plimsoll: a step is an argv list or {'name', 'argv'}, not %r" % s)
        else:
            out.append({"argv": list(s)})
    return out


def project_request(files: Optional[Files], steps: Steps, *,
                    minimum_isolation: Optional[str] = None, timeout_ms: Optional[int] = None,
                    memory_mb: Optional[int] = None, grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """A RunRequest with a project: ``files`` maps paths to text (``content``)
    or bytes (``content_base64``), or is a list of File objects; each step is
    an argv list or ``{"name": …, "argv": […]}``; ``collect`` is globs
    relative to the work directory whose files come back as the result's
    ``artifacts`` (docs/api.md, "Artifacts"; not sent when None)."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, grant_profile)
    req["project"] = {"files": _files(files), "steps": _steps(steps)}
    if collect is not None:
        req["project"]["collect"] = _collect(collect)
    return req


def module_request(wasm: bytes, args: Optional[Sequence[str]] = None,
                   stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                   timeout_ms: Optional[int] = None,
                   memory_mb: Optional[int] = None) -> Dict[str, Any]:
    """A RunRequest with a WASI preview 1 module."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, None)
    if not isinstance(wasm, (bytes, bytearray, memoryview)):
        raise TypeError("plimsoll: wasm must be bytes, not %s" % type(wasm).__name__)
    _check_str("stdin", stdin)
    req["module"] = _nonempty(wasm_base64=base64.b64encode(bytes(wasm)).decode("ascii"),
                              args=list(args) if args is not None else None, stdin=stdin)
    return req


def cell_object(code: str, language: str, files: Optional[Files] = None) -> Dict[str, Any]:
    _check_str("code", code)
    _check_str("language", language)
    cell: Dict[str, Any] = {"language": language, "code": code}
    if files is not None:
        cell["files"] = _files(files)
    return cell


def with_floor(run: Mapping[str, Any], floor: Optional[str]) -> Mapping[str, Any]:
    """A session's run: the session's floor added when the request sets none."""
    if floor and "minimum_isolation" not in run:
        return dict(run, minimum_isolation=floor)
    return run


# ---- answers -------------------------------------------------------------------


def check_tier(floor: str, answer: Mapping[str, Any]) -> None:
    """The tier re-check: the answer's ``isolation`` and its record's must
    both be at least ``floor``; else :class:`IsolationEvidenceMismatchError`."""
    want = tier_rank(floor)
    got = answer.get("isolation")
    rec = answer.get("record")
    rec_tier = rec.get("isolation") if isinstance(rec, Mapping) else None
    # A missing tier, on the answer or for want of a record, is unknown:
    # below every floor.
    if tier_rank(got) < want or tier_rank(rec_tier) < want:
        raise IsolationEvidenceMismatchError(floor, got if isinstance(got, str) else "",
                                             rec_tier if isinstance(rec_tier, str) else "",
                                             answer)


@dataclass
class Call:
    """One API call as data: the method, the request sent (its canonical
    form is the body), ``finish``, which turns the 200 answer's object
    into what the caller gets, or raises, and the route it is sent on
    (``Plimsoll-Route``; None: no header)."""

    method: str
    wire: Mapping[str, Any]
    finish: Callable[[Dict[str, Any]], Any]
    route: Optional[str] = None

    def on_route(self, route: Optional[str]) -> "Call":
        """This call sent on ``route`` (checked: :func:`check_route`)."""
        self.route = check_route(route)
        return self

    def body(self) -> bytes:
        return canonical(self.wire).encode("utf-8")

    def stream_body(self) -> bytes:
        """The body of a streaming call: the request in one envelope."""
        return envelope(self.body())


def answer_of(method: str, status: int, content_type: Optional[str], body: bytes,
              deadline: float, url: str, timeout: float) -> Dict[str, Any]:
    """The 200 answer's object, checked against the protocol; any other
    answer raises the error it stands for (docs/clients.md, "Three
    channels")."""
    if status == 200:
        return _transport.parse_ok(method, body, content_type, deadline, url, timeout)
    raise _transport.error_from_answer(method, status, body, deadline, url, timeout)


def ran(hashed: Any, floor: Optional[str], verify: bool,
        chain: Optional[Chain]) -> Callable[[Dict[str, Any]], RunResult]:
    """The finish of a running call: the tier re-check, then the record (or
    the chain), then the result."""
    def finish(answer: Dict[str, Any]) -> RunResult:
        if floor:
            check_tier(floor, answer)
        if chain is not None:
            chain.append(hashed, answer)
        elif verify:
            check_record(hashed, answer, answer.get("record"))
        return RunResult.from_dict(answer)
    return finish


def _session_id(answer: Dict[str, Any]) -> Tuple[str, str]:
    """OpenSession's session id and route (``""``: none)."""
    sid = answer.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise ProtocolError("OpenSession: the answer names no session", code="unknown",
                            dispatched=True, http_status=200)
    return sid, answer.get("route") or ""


def _session_infos(answer: Dict[str, Any]) -> List[SessionInfo]:
    return [SessionInfo.from_dict(s) for s in answer.get("sessions") or []]


def _session_info_of(method: str, session_id: str) -> Callable[[Dict[str, Any]], SessionInfo]:
    """The finish of GetSession and ExtendSession: the answer, which must
    be the session asked about."""
    def finish(answer: Dict[str, Any]) -> SessionInfo:
        if answer.get("session_id") != session_id:
            raise _transport.protocol_error(
                method, 200, "it is about session %s, not the one asked about, %s"
                % (answer.get("session_id"), session_id))
        return SessionInfo.from_dict(answer)
    return finish


def reconnectable(info: SessionInfo) -> SessionInfo:
    """``info`` when its session may be reconnected to; an ended one is the
    :class:`SessionEndedError` a call in it would get (``ended_reason``
    from the answer)."""
    if info.ended:
        why = info.ended_reason
        raise SessionEndedError("the session has ended" + (": " + why if why else ""),
                                metadata={"ended_reason": why} if why else None,
                                http_status=200)
    return info


def _floor(request: Mapping[str, Any]) -> Optional[str]:
    floor = request.get("minimum_isolation")
    return floor if isinstance(floor, str) else None


class ClientBase:
    """A client's settings and its calls as data; the synchronous and the
    asyncio client add the I/O (``_do``) and the methods."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 120.0, retry: Optional[RetryPolicy] = None,
                 verify_records: bool = True,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError("plimsoll: timeout must be a number of seconds, not %s"
                            % type(timeout).__name__)
        if not timeout > 0:
            raise ValueError("plimsoll: timeout must be > 0 seconds")
        _check_int("max_answer_bytes", max_answer_bytes, 1)
        _check_int("max_message_bytes", max_message_bytes, 1)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError("plimsoll: retry must be a RetryPolicy or None, not %s"
                            % type(retry).__name__)
        if not isinstance(verify_records, bool):
            raise TypeError("plimsoll: verify_records must be a bool, not %s"
                            % type(verify_records).__name__)
        self.max_message_bytes = max_message_bytes
        url = _config.resolve_url(url)
        self._endpoint = _transport.Endpoint(url)
        self.url = url
        self._api_key = _config.resolve_key(api_key)
        self.timeout = timeout
        self.retry = retry
        self.verify_records = verify_records
        self.max_answer_bytes = max_answer_bytes
        #: Set by ``close``: a call after it raises ``RuntimeError``.
        self.closed = False

    def __repr__(self) -> str:
        return "%s(%r, timeout=%r, retry=%r)" % (type(self).__name__, self.url, self.timeout,
                                                 self.retry)

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("plimsoll: this %s is closed" % type(self).__name__)

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    def _answer(self, call: Call, status: int, content_type: Optional[str], body: bytes,
                deadline: float) -> Dict[str, Any]:
        return answer_of(call.method, status, content_type, body, deadline, self.url,
                         self.timeout)

    # -- the calls ----------------------------------------------------------

    def _describe_call(self) -> Call:
        return Call("Describe", {}, Description.from_dict)

    def _run_call(self, request: Mapping[str, Any]) -> Call:
        check_run_fields(request)
        request = without_nulls(request)
        return Call("Run", request, ran(request, _floor(request), self.verify_records, None))

    def _run_stream_call(self, request: Mapping[str, Any]) -> Call:
        check_run_fields(request)
        request = without_nulls(request)
        return Call("RunStream", request,
                    ran(request, _floor(request), self.verify_records, None))

    def _decoder(self, call: Call, deadline: float) -> Decoder:
        return Decoder(call.method, self.max_message_bytes, deadline, self.url, self.timeout)

    def _stream_answer(self, call: Call, status: int, content_type: Optional[str],
                       body: Optional[bytes], decoder: Decoder,
                       deadline: float) -> Dict[str, Any]:
        """The result of a stream call's answer: the decoder's, when the
        answer was a stream; else the error the answer stands for (a
        non-200, or a 200 that is not ``application/connect+json``)."""
        if body is None:
            return decoder.finish()
        if status == 200:
            raise _transport.protocol_error(
                call.method, 200, "its Content-Type is %r, not %s"
                % (content_type, _transport.STREAM_MEDIA_TYPE))
        raise _transport.error_from_answer(call.method, status, body, deadline, self.url,
                                           self.timeout)

    def _open_session_call(self, languages: Optional[Sequence[str]],
                           minimum_isolation: Optional[str]) -> Call:
        check_floor(minimum_isolation)
        req: Dict[str, Any] = {}
        if languages is not None:
            req["languages"] = list(languages)
        return Call("OpenSession", req, _session_id)

    def _run_in_session_call(self, session_id: str, run: Mapping[str, Any],
                             chain: Optional[Chain]) -> Call:
        check_run_fields(run)
        run = without_nulls(run)
        return Call("RunInSession", {"session_id": session_id, "run": run},
                    ran(run, _floor(run), self.verify_records, chain))

    def _run_cell_call(self, session_id: str, cell: Mapping[str, Any],
                       timeout_ms: Optional[int], chain: Optional[Chain],
                       minimum_isolation: Optional[str]) -> Call:
        _check_uint32("timeout_ms", timeout_ms)
        hashed = _nonempty(cell=without_nulls(cell), timeout_ms=timeout_ms)
        return Call("RunCell", dict(hashed, session_id=session_id),
                    ran(hashed, minimum_isolation, self.verify_records, chain))

    def _run_cell_stream_call(self, session_id: str, cell: Mapping[str, Any],
                              timeout_ms: Optional[int], chain: Optional[Chain],
                              minimum_isolation: Optional[str]) -> Call:
        call = self._run_cell_call(session_id, cell, timeout_ms, chain, minimum_isolation)
        call.method = "RunCellStream"
        return call

    def _close_session_call(self, session_id: str) -> Call:
        return Call("CloseSession", {"session_id": session_id}, lambda answer: None)

    def _list_sessions_call(self) -> Call:
        return Call("ListSessions", {}, _session_infos)

    def _get_session_call(self, session_id: str) -> Call:
        check_session_id(session_id)
        return Call("GetSession", {"session_id": session_id},
                    _session_info_of("GetSession", session_id))

    def _extend_session_call(self, session_id: str, ends_in_s: int) -> Call:
        check_session_id(session_id)
        _check_int("ends_in_s", ends_in_s, 1, UINT32_MAX)
        return Call("ExtendSession", {"session_id": session_id, "ends_in_s": ends_in_s},
                    _session_info_of("ExtendSession", session_id))

    # -- a session's files ------------------------------------------------------

    def _write_files_call(self, session_id: str, files: Files, chain: Optional[Chain],
                          minimum_isolation: Optional[str]) -> Call:
        check_session_id(session_id)
        hashed = {"files": write_files_list(files)}
        sent = hashed["files"]

        def check(answer: Dict[str, Any]) -> None:
            want = (len(sent), sum(_decoded_length(f) for f in sent))
            got = (answer.get("files") or 0, answer.get("bytes") or 0)
            if got != want:
                raise _transport.protocol_error(
                    "WriteFiles", 200, "it says %d files of %d bytes were written, not the %d "
                    "of %d bytes sent" % (got + want))
        return Call("WriteFiles", dict(hashed, session_id=session_id),
                    filed(hashed, check, WriteFilesResult.from_dict,
                          minimum_isolation, self.verify_records, chain))

    def _read_file_call(self, session_id: str, path: str, offset: int, limit: Optional[int],
                        chain: Optional[Chain], minimum_isolation: Optional[str]) -> Call:
        check_session_id(session_id)
        _check_path("path", path)
        _check_int("offset", offset, 0, UINT32_MAX)
        _check_uint32("limit", limit)
        hashed: Dict[str, Any] = {"path": path}  # what the caller did not set is not sent
        if offset:
            hashed["offset"] = offset
        if limit is not None:
            hashed["limit"] = limit

        def check(answer: Dict[str, Any]) -> None:
            if answer.get("path") != path or (answer.get("offset") or 0) != offset:
                raise _transport.protocol_error(
                    "ReadFile", 200, "it is about %r from offset %s, not %r from %d, asked about"
                    % (answer.get("path"), answer.get("offset") or 0, path, offset))
            if limit and (answer.get("length") or 0) > limit:
                raise _transport.protocol_error(
                    "ReadFile", 200, "it holds %d bytes, past the limit asked, %d"
                    % (answer.get("length"), limit))
        return Call("ReadFile", dict(hashed, session_id=session_id),
                    filed(hashed, check, ReadFileResult.from_dict,
                          minimum_isolation, self.verify_records, chain))

    def _list_files_call(self, session_id: str, path: str, depth: int,
                         chain: Optional[Chain], minimum_isolation: Optional[str]) -> Call:
        check_session_id(session_id)
        _check_path("path", path)
        _check_int("depth", depth, 0, LIST_FILES_MAX_DEPTH)
        hashed = _nonempty(path=path or None, depth=depth)
        prefix = path.encode("utf-8") + b"/" if path else b""

        def check(answer: Dict[str, Any]) -> None:
            for e in answer.get("entries") or []:
                b64 = e.get("path_base64")
                name = base64.b64decode(b64 + "=" * (-len(b64) % 4)) if b64 \
                    else (e.get("path") or "").encode("utf-8")
                if not name.startswith(prefix) or len(name) == len(prefix):
                    raise _transport.protocol_error(
                        "ListFiles", 200, "it lists %r, which is not in %r, the directory "
                        "asked about" % (name[:200], path))
        return Call("ListFiles", dict(hashed, session_id=session_id),
                    filed(hashed, check, ListFilesResult.from_dict,
                          minimum_isolation, self.verify_records, chain))


# ---- a session's files -------------------------------------------------------------

#: The most files one WriteFiles call takes.
WRITE_FILES_MAX_FILES = 256
#: The most bytes (decoded) one WriteFiles call takes, all its files together.
WRITE_FILES_MAX_BYTES = 4 << 20
#: The longest path (UTF-8 bytes) of a file call.
FILE_PATH_MAX_BYTES = 256
#: The most levels ListFiles goes down.
LIST_FILES_MAX_DEPTH = 16


def _check_path(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError("plimsoll: %s must be a str, not %s" % (name, type(value).__name__))


def _decoded_length(f: Mapping[str, Any]) -> int:
    b64 = f.get("content_base64")
    if isinstance(b64, str):
        return len(base64.b64decode(b64 + "=" * (-len(b64) % 4)))
    content = f.get("content")
    return len(content.encode("utf-8")) if isinstance(content, str) else 0


def write_files_list(files: Files) -> List[Dict[str, Any]]:
    """WriteFiles' ``files``: a ``{path: str or bytes}`` dict or File dicts,
    as :func:`project_request` takes them; at least one, each path a
    ``str``."""
    if isinstance(files, (str, bytes)) or files is None:
        raise TypeError("plimsoll: files is a {path: str or bytes} dict or a list of File "
                        "dicts, not %s" % type(files).__name__)
    out = without_nulls(_files(files))
    if not out:
        raise ValueError("plimsoll: files: at least one file")
    for f in out:
        if not isinstance(f, Mapping):
            raise TypeError("plimsoll: a File is a dict {path, content | content_base64}")
        _check_path("a file's path", f.get("path"))
        _check_str("content", f.get("content"))
        _check_str("content_base64", f.get("content_base64"))
    return out


def check_record_tier(floor: str, answer: Mapping[str, Any]) -> None:
    """The tier re-check of an answer with no ``isolation`` of its own (a
    file call's): its record's tier must be at least ``floor``."""
    rec = answer.get("record")
    tier = rec.get("isolation") if isinstance(rec, Mapping) else None
    if tier_rank(tier) < tier_rank(floor):
        tier = tier if isinstance(tier, str) else ""
        raise IsolationEvidenceMismatchError(floor, tier, tier, answer)


def filed(hashed: Any, check: Callable[[Dict[str, Any]], None],
          make: Callable[[Dict[str, Any]], Any], floor: Optional[str], verify: bool,
          chain: Optional[Chain]) -> Callable[[Dict[str, Any]], Any]:
    """The finish of a file call: the answer against what was asked, the
    tier re-check of its record, then the record (or the chain), then the
    result."""
    def finish(answer: Dict[str, Any]) -> Any:
        check(answer)
        if floor:
            check_record_tier(floor, answer)
        if chain is not None:
            chain.append(hashed, answer)
        elif verify:
            check_record(hashed, answer, answer.get("record"))
        return make(answer)
    return finish


class Pages:
    """A whole file read a ReadFile page at a time (``read_bytes``,
    ``download``): :attr:`offset` is the next page's; :meth:`add` takes
    each page, hands its bytes to ``sink`` and says whether the file is
    done. A page that is not the next (its offset), or that makes no
    progress while saying more remain, is a ProtocolError; one whose
    ``size`` is not the first page's is a :class:`FileChangedError`."""

    def __init__(self, path: str, sink: Callable[[bytes], Any]) -> None:
        self.path = path
        self.sink = sink
        self.offset = 0
        self.size: Optional[int] = None

    def add(self, page: ReadFileResult) -> bool:
        if page.offset != self.offset or (page.more and page.length == 0):
            raise _transport.protocol_error(
                "ReadFile", 200, "a page of %r from offset %d (%d bytes, more: %s) does not "
                "go on from offset %d" % (self.path, page.offset, page.length, page.more,
                                          self.offset))
        if self.size is None:
            self.size = page.size
        elif page.size != self.size:
            raise FileChangedError(
                "plimsoll: %s changed while it was read: %d bytes, then %d at offset %d; "
                "read it again" % (self.path, self.size, page.size, self.offset))
        self.sink(page.content)
        self.offset += page.length
        return not page.more


LocalPath = Union[str, "os.PathLike[str]"]


@contextlib.contextmanager
def local_file(local_path: LocalPath) -> Iterator[BinaryIO]:
    """``local_path`` open to be written; removed when the ``with`` block
    raises, so a failed download leaves no file."""
    f = open(local_path, "wb")
    try:
        with f:
            yield f
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(local_path)
        raise


def upload_plan(local_path: LocalPath, remote_dir: str) -> List[Tuple[str, str]]:
    """``(local file, remote path)`` of what ``upload`` sends: the file, or
    every regular file under the directory (symlinks and special files
    skipped, the walk sorted by name), each under ``remote_dir`` by its
    name (a directory's files under its name too). A file past
    :data:`WRITE_FILES_MAX_BYTES`, or a remote path past
    :data:`FILE_PATH_MAX_BYTES`, is a ``ValueError`` here, before
    anything is sent."""
    _check_path("remote_dir", remote_dir)
    local = os.fspath(local_path)
    if not isinstance(local, str):
        raise TypeError("plimsoll: local_path must be a str or a path, not bytes")
    st = os.lstat(local)  # the FileNotFoundError of a missing one, as open() gives it
    base = os.path.basename(os.path.abspath(local))
    if not base:
        raise ValueError("plimsoll: %s has no name to upload it by" % local)
    remote_dir = remote_dir.rstrip("/")
    top = remote_dir + "/" + base if remote_dir else base
    plan: List[Tuple[str, str, int]] = []
    if stat.S_ISREG(st.st_mode):
        plan.append((local, top, st.st_size))
    elif stat.S_ISDIR(st.st_mode):
        for root, dirs, names in os.walk(local):
            dirs.sort()
            rel = os.path.relpath(root, local)
            parts = [] if rel == os.curdir else rel.split(os.sep)
            for name in sorted(names):
                full = os.path.join(root, name)
                st = os.lstat(full)
                if stat.S_ISREG(st.st_mode):
                    plan.append((full, "/".join([top] + parts + [name]), st.st_size))
            # os.walk follows no symlink to a directory (followlinks=False)
    else:
        raise ValueError("plimsoll: %s is neither a regular file nor a directory" % local)
    for full, remote, size in plan:
        try:
            n = len(remote.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("plimsoll: %s: its name is not UTF-8; a session's paths are "
                             "text" % full) from None
        if n > FILE_PATH_MAX_BYTES:
            raise ValueError("plimsoll: %s: its path in the session, %s, is %d bytes, past "
                             "the most a file call takes, %d" % (full, remote, n,
                                                                 FILE_PATH_MAX_BYTES))
        if size > WRITE_FILES_MAX_BYTES:
            raise ValueError("plimsoll: %s is %d bytes, past the most one WriteFiles call "
                             "takes (%d bytes, 4 MiB, all its files together); it cannot be "
                             "uploaded" % (full, size, WRITE_FILES_MAX_BYTES))
    return [(full, remote) for full, remote, _ in plan]


def upload_batches(plan: Sequence[Tuple[str, str]]) -> Iterator[Dict[str, bytes]]:
    """The WriteFiles calls of ``plan``, in order: as few as the bounds
    allow, each at most :data:`WRITE_FILES_MAX_FILES` files and
    :data:`WRITE_FILES_MAX_BYTES` bytes; each file is read as its call
    is made."""
    batch: Dict[str, bytes] = {}
    size = 0
    for full, remote in plan:
        with open(full, "rb") as f:
            data = f.read(WRITE_FILES_MAX_BYTES + 1)
        if len(data) > WRITE_FILES_MAX_BYTES:
            raise ValueError("plimsoll: %s grew past %d bytes (4 MiB), the most one "
                             "WriteFiles call takes" % (full, WRITE_FILES_MAX_BYTES))
        if batch and (len(batch) == WRITE_FILES_MAX_FILES
                      or size + len(data) > WRITE_FILES_MAX_BYTES):
            yield batch
            batch, size = {}, 0
        batch[remote] = data
        size += len(data)
    if batch:
        yield batch
