# SPDX-License-Identifier: Apache-2.0
"""The client: Describe, Run, sessions, the tier re-check, record checks and
retries (docs/clients.md)."""
from __future__ import annotations

import base64
import random
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, Type, Union)

from . import _transport
from ._answer import DEFAULT_MAX_ANSWER_BYTES
from .errors import (AtCapacityError, IsolationEvidenceMismatchError, NotFoundError,
                     PlimsollError, ProtocolError, RateLimitedError, SessionEndedError)
from .record import Chain, canonical, check_record
from .results import Description, RunResult

__all__ = ["Client", "Session", "RetryPolicy", "TIERS", "tier_rank"]

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
    return _nonempty(minimum_isolation=minimum_isolation, timeout_ms=timeout_ms,
                     memory_mb=memory_mb, grant_profile=grant_profile)


def snippet_request(code: str, language: str = "javascript", stdin: Optional[str] = None, *,
                    minimum_isolation: Optional[str] = None, timeout_ms: Optional[int] = None,
                    memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> Dict[str, Any]:
    """A RunRequest with a snippet."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, grant_profile)
    req["snippet"] = _nonempty(language=language, code=code, stdin=stdin)
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
                    memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> Dict[str, Any]:
    """A RunRequest with a project: ``files`` maps paths to text (``content``)
    or bytes (``content_base64``), or is a list of File objects; each step is
    an argv list or ``{"name": …, "argv": […]}``."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, grant_profile)
    req["project"] = {"files": _files(files), "steps": _steps(steps)}
    return req


def module_request(wasm: bytes, args: Optional[Sequence[str]] = None,
                   stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                   timeout_ms: Optional[int] = None,
                   memory_mb: Optional[int] = None) -> Dict[str, Any]:
    """A RunRequest with a WASI preview 1 module."""
    req = _run_fields(minimum_isolation, timeout_ms, memory_mb, None)
    req["module"] = _nonempty(wasm_base64=base64.b64encode(bytes(wasm)).decode("ascii"),
                              args=list(args) if args is not None else None, stdin=stdin)
    return req


def cell_object(code: str, language: str, files: Optional[Files] = None) -> Dict[str, Any]:
    cell: Dict[str, Any] = {"language": language, "code": code}
    if files is not None:
        cell["files"] = _files(files)
    return cell


class Client:
    """A plimsoll daemon's client.

    ``url`` is ``http://host:port`` (a path prefix is kept), ``https://…`` or
    ``unix:/path``; ``timeout`` bounds each HTTP exchange in seconds, from
    the request to the decoded answer, however slowly it comes;
    ``retry`` is an opt-in :class:`RetryPolicy`; ``verify_records`` checks
    the record of every run answer (checks 1-4 and 6 for ``run``; a session
    object always keeps and checks its chain); ``max_answer_bytes`` caps
    one answer's body (a longer one is a :class:`ProtocolError`; default
    :data:`DEFAULT_MAX_ANSWER_BYTES`, 256 MiB). A client keeps no state
    between calls and may be shared between threads.
    """

    def __init__(self, url: str, api_key: str, timeout: float = 120.0,
                 retry: Optional[RetryPolicy] = None, verify_records: bool = True,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        if not timeout > 0:
            raise ValueError("plimsoll: timeout must be > 0 seconds")
        if max_answer_bytes < 1:
            raise ValueError("plimsoll: max_answer_bytes must be at least 1")
        self._endpoint = _transport.Endpoint(url)
        self.url = url
        self._api_key = api_key
        self.timeout = timeout
        self.retry = retry
        self.verify_records = verify_records
        self.max_answer_bytes = max_answer_bytes
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return "Client(%r, timeout=%r, retry=%r)" % (self.url, self.timeout, self.retry)

    # -- the wire ---------------------------------------------------------

    def _call(self, method: str, request: Mapping[str, Any]) -> Dict[str, Any]:
        """One call, retried per the policy; the 200 answer's object."""
        body = canonical(request).encode("utf-8")
        attempts = self.retry.max_attempts if self.retry else 1
        n = 0
        while True:
            deadline = time.monotonic() + self.timeout
            status, ctype, answer = _transport.exchange(self._endpoint, self._api_key, method,
                                                        body, deadline, self.max_answer_bytes)
            if status == 200:
                return _transport.parse_ok(method, answer, ctype, deadline, self.url,
                                           self.timeout)
            err = _transport.error_from_answer(method, status, answer, deadline, self.url,
                                               self.timeout)
            if self.retry is None or not isinstance(err, RETRYABLE) or n + 1 >= attempts:
                raise err
            self._sleep(self.retry.delay_ms(n) / 1000.0)
            n += 1

    def _ran(self, method: str, wire: Mapping[str, Any], hashed: Any, floor: Optional[str],
             verify: bool, chain: Optional[Chain]) -> RunResult:
        """A running call: the tier re-check, then the record (or the chain)."""
        answer = self._call(method, wire)
        if floor:
            check_tier(floor, answer)
        if chain is not None:
            chain.append(hashed, answer)
        elif verify:
            check_record(hashed, answer, answer.get("record"))
        return RunResult.from_dict(answer)

    # -- the API ----------------------------------------------------------

    def describe(self) -> Description:
        """What this daemon is: provider, tier, readiness, kinds, limits."""
        return Description.from_dict(self._call("Describe", {}))

    def run(self, request: Mapping[str, Any]) -> RunResult:
        """Run a RunRequest given as a dict (proto field names, no nulls)."""
        request = without_nulls(request)
        floor = request.get("minimum_isolation")
        return self._ran("Run", request, request, floor if isinstance(floor, str) else None,
                         self.verify_records, None)

    def run_snippet(self, code: str, language: str = "javascript",
                    stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                    timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> RunResult:
        """Run a snippet of ``language`` (``javascript`` or ``python``)."""
        return self.run(snippet_request(code, language, stdin,
                                        minimum_isolation=minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile))

    def run_project(self, files: Optional[Files], steps: Steps, *,
                    minimum_isolation: Optional[str] = None, timeout_ms: Optional[int] = None,
                    memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> RunResult:
        """Run a project: files, then steps in order (stop on the first failure)."""
        return self.run(project_request(files, steps, minimum_isolation=minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile))

    def run_module(self, wasm: bytes, args: Optional[Sequence[str]] = None,
                   stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                   timeout_ms: Optional[int] = None,
                   memory_mb: Optional[int] = None) -> RunResult:
        """Run a WASI preview 1 module (its bytes)."""
        return self.run(module_request(wasm, args, stdin, minimum_isolation=minimum_isolation,
                                       timeout_ms=timeout_ms, memory_mb=memory_mb))

    def open_session(self, languages: Optional[Sequence[str]] = None,
                     minimum_isolation: Optional[str] = None) -> "Session":
        """Open a session and return the object that keeps its chain.

        ``languages`` is a hint of the cell languages to start. OpenSession
        itself carries no floor: ``minimum_isolation`` is sent with every
        run in the session and checked by the client on every answer,
        cells included.
        """
        if minimum_isolation is not None and tier_rank(minimum_isolation) < 0:
            raise ValueError("plimsoll: unknown tier %r (one of %s)"
                             % (minimum_isolation, ", ".join(TIERS)))
        req: Dict[str, Any] = {}
        if languages is not None:
            req["languages"] = list(languages)
        answer = self._call("OpenSession", req)
        sid = answer.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise ProtocolError(
                "OpenSession: the answer names no session", code="unknown",
                dispatched=True, http_status=200)
        return Session(self, sid, minimum_isolation)

    def run_in_session(self, session_id: str, run: Mapping[str, Any],
                       chain: Optional[Chain] = None) -> RunResult:
        """RunInSession with a RunRequest dict (a snippet or a project).

        With ``chain`` the answer is appended to it (all six checks);
        without, its record is checked alone (no ``previous_digest``) when
        ``verify_records`` is on.
        """
        run = without_nulls(run)
        floor = run.get("minimum_isolation")
        return self._ran("RunInSession", {"session_id": session_id, "run": run}, run,
                         floor if isinstance(floor, str) else None, self.verify_records, chain)

    def run_cell(self, session_id: str, cell: Mapping[str, Any],
                 timeout_ms: Optional[int] = None, chain: Optional[Chain] = None,
                 minimum_isolation: Optional[str] = None) -> RunResult:
        """RunCell with a Cell dict ``{"language", "code"[, "files"]}``.

        ``minimum_isolation`` is not sent (a cell has no floor): the client
        checks the answer against it. ``chain`` as in :meth:`run_in_session`.
        """
        hashed = _nonempty(cell=without_nulls(cell), timeout_ms=timeout_ms)
        return self._ran("RunCell", dict(hashed, session_id=session_id), hashed,
                         minimum_isolation, self.verify_records, chain)

    def close_session(self, session_id: str) -> None:
        """Close a session: its container and files are removed."""
        self._call("CloseSession", {"session_id": session_id})


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


class Session:
    """An open session: the calls made through it are checked against its
    chain (``chain``), whose head advances only when every check holds.

    After a :class:`~plimsoll.record.ChainError` or an
    :class:`~plimsoll.errors.IsolationEvidenceMismatchError` the session
    cannot be trusted: open a new one. Calls on one object are serialized
    so that the chain keeps the order the daemon saw. Use it as a context
    manager to close it.
    """

    def __init__(self, client: Client, session_id: str,
                 minimum_isolation: Optional[str] = None) -> None:
        self.client = client
        self.session_id = session_id
        self.minimum_isolation = minimum_isolation
        self.chain = Chain()
        self.closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "Session(%r, entries=%d, closed=%r)" % (self.session_id, len(self.chain),
                                                        self.closed)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            self.close()
        except (SessionEndedError, NotFoundError):
            pass  # it ended on its own: nothing left to close
        except PlimsollError:
            if exc is None:
                raise

    def run(self, run: Mapping[str, Any]) -> RunResult:
        """RunInSession with a RunRequest dict; the session's floor is added
        when the request sets none."""
        if self.minimum_isolation and "minimum_isolation" not in run:
            run = dict(run, minimum_isolation=self.minimum_isolation)
        with self._lock:
            return self.client.run_in_session(self.session_id, run, chain=self.chain)

    def run_snippet(self, code: str, language: str = "javascript", stdin: Optional[str] = None,
                    *, timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> RunResult:
        """Run a snippet in the session's container (files persist; no
        interpreter state does)."""
        return self.run(snippet_request(code, language, stdin,
                                        minimum_isolation=self.minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile))

    def run_project(self, files: Optional[Files], steps: Steps, *,
                    timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None) -> RunResult:
        """Run a project's steps in the session's container."""
        return self.run(project_request(files, steps, minimum_isolation=self.minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile))

    def cell(self, code: str, language: str, files: Optional[Files] = None,
             timeout_ms: Optional[int] = None) -> RunResult:
        """Run a cell in the session's kept interpreter of ``language``."""
        with self._lock:
            return self.client.run_cell(self.session_id, cell_object(code, language, files),
                                        timeout_ms, chain=self.chain,
                                        minimum_isolation=self.minimum_isolation)

    def close(self) -> None:
        """Close the session (once; a second close does nothing)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self.client.close_session(self.session_id)
