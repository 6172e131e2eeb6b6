# SPDX-License-Identifier: Apache-2.0
"""The errors a plimsoll client raises (docs/clients.md, "Three channels").

* :class:`RefusalError` and one subclass per reason: the daemon refused the
  call before anything ran (``dispatched`` is False for every refusal).
* :class:`InfrastructureError`: ``INTERNAL``, a transport failure, the
  call's timeout, or an answer that breaks the protocol
  (:class:`ProtocolError`); the code may have run.
* :class:`IsolationEvidenceMismatchError`: the answer's tier, or its
  record's, is below the floor the caller set; the code may have run and it
  is never retried.
* :class:`ChainError` (also ``plimsoll.record.ChainError``): a record or a
  chain of records does not check out.
* :class:`FileChangedError`: a file read a page at a time changed between
  two pages.
* :class:`ConfigurationError` (also a ``ValueError``): the client's own
  settings are wrong (a URL, a key, a key file that cannot be read); raised
  when the client is made, before anything is sent.

A guest's non-zero exit code is never an error: it is a result.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Type

__all__ = [
    "PlimsollError",
    "RefusalError",
    "InvalidRequestError",
    "UnauthenticatedError",
    "DisabledError",
    "InsufficientIsolationError",
    "UnsupportedError",
    "CallerNotAllowedError",
    "NotReadyError",
    "ShuttingDownError",
    "RateLimitedError",
    "AtCapacityError",
    "SessionEndedError",
    "NotFoundError",
    "WrongRouteError",
    "InfrastructureError",
    "ProtocolError",
    "IsolationEvidenceMismatchError",
    "ChainError",
    "FileChangedError",
    "ConfigurationError",
    "refusal_class",
]


class PlimsollError(Exception):
    """Base of every error this client raises.

    Every subclass carries the same attributes, so a caller can log any of
    them alike: ``reason`` (the daemon's reason, or ``""``), ``code`` (the
    Connect code), ``message``, ``dispatched`` (whether the code may have
    run), ``metadata`` (the ErrorInfo metadata) and ``http_status`` (None
    when no HTTP answer came).
    """

    reason: str
    code: str
    message: str
    dispatched: bool
    metadata: Dict[str, str]
    http_status: Optional[int]

    def __init__(self, message: str, *, reason: str = "", code: str = "",
                 dispatched: bool = False, metadata: Optional[Mapping[str, str]] = None,
                 http_status: Optional[int] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code
        self.message = message
        self.dispatched = dispatched
        self.metadata = dict(metadata or {})
        self.http_status = http_status

    def __str__(self) -> str:
        if self.reason:
            return "%s (%s): %s" % (self.reason, self.code, self.message)
        return self.message


class RefusalError(PlimsollError):
    """The daemon refused the call; nothing ran. Also the type of a reason
    this client does not know."""


class InvalidRequestError(RefusalError):
    """``INVALID_REQUEST``: malformed request, unknown field, a bound exceeded."""


class UnauthenticatedError(RefusalError):
    """``UNAUTHENTICATED``: no bearer key, or a key the daemon does not know."""


class DisabledError(RefusalError):
    """``DISABLED``: the daemon runs the Disabled provider."""


class InsufficientIsolationError(RefusalError):
    """``INSUFFICIENT_ISOLATION``: the floor is above the daemon's tier
    (``metadata["isolation"]``)."""


class UnsupportedError(RefusalError):
    """``UNSUPPORTED``: the provider does not run this kind, language or method."""


class CallerNotAllowedError(RefusalError):
    """``CALLER_NOT_ALLOWED``: the caller is not in the grant profile's callers."""


class NotReadyError(RefusalError):
    """``NOT_READY``: the provider's readiness check fails; try later."""


class ShuttingDownError(RefusalError):
    """``SHUTTING_DOWN``: the daemon is draining; try elsewhere."""


class RateLimitedError(RefusalError):
    """``RATE_LIMITED``: the caller's token bucket is empty (retryable)."""


class AtCapacityError(RefusalError):
    """``AT_CAPACITY``: every run slot, or the caller's share, is busy (retryable)."""


class SessionEndedError(RefusalError):
    """``SESSION_ENDED``: the session has ended; ``ended_reason`` says why."""

    ended_reason: str

    def __init__(self, message: str, *, reason: str = "SESSION_ENDED",
                 code: str = "failed_precondition", dispatched: bool = False,
                 metadata: Optional[Mapping[str, str]] = None,
                 http_status: Optional[int] = None) -> None:
        super().__init__(message, reason=reason, code=code, dispatched=dispatched,
                         metadata=metadata, http_status=http_status)
        self.ended_reason = self.metadata.get("ended_reason") or message


class NotFoundError(RefusalError):
    """``NOT_FOUND``: no such path, method, or session for this caller."""


class WrongRouteError(RefusalError):
    """``WRONG_ROUTE``: the call named another daemon's route (the
    session's, sent as ``Plimsoll-Route``), so the session's daemon was not
    reached: behind a proxy, that daemon is gone or draining. The session is
    out of reach; nothing ran."""


class InfrastructureError(PlimsollError):
    """``INTERNAL``, a transport failure, the call's timeout (code
    ``deadline_exceeded``), or an answer that breaks the protocol (a
    :class:`ProtocolError`). ``dispatched`` is True unless the daemon said
    otherwise: the code may have run."""


class ProtocolError(InfrastructureError):
    """An answer the protocol does not allow (docs/clients.md, "What a
    client reads"): longer than the client's ``max_answer_bytes``, a 200
    that is not ``application/json``, text that is not JSON in UTF-8, nested
    past 64, a member twice, a number that is not an integer of at most
    2^53-1, a known member of the wrong type, or an error answer that is not
    a Connect error. Code ``unknown``; dispatched: the code may have run."""


class IsolationEvidenceMismatchError(PlimsollError):
    """The answer's ``isolation`` or its record's is below the floor the
    request set. Code ``data_loss``, dispatched: the code may have run.

    ``floor`` is the floor, ``isolation`` the answer's tier,
    ``record_isolation`` the record's (``""`` when there is none) and
    ``response`` the answer as received.
    """

    floor: str
    isolation: str
    record_isolation: str
    response: Dict[str, object]

    def __init__(self, floor: str, isolation: str, record_isolation: str,
                 response: Mapping[str, object], http_status: Optional[int] = 200) -> None:
        super().__init__(
            "the answer's isolation %r (record: %r) is below the floor %r; the code may "
            "have run" % (isolation, record_isolation, floor),
            code="data_loss", dispatched=True, http_status=http_status)
        self.floor = floor
        self.isolation = isolation
        self.record_isolation = record_isolation
        self.response = dict(response)


class ChainError(PlimsollError):
    """A record or a chain of records does not check out.

    ``index`` is the position of the entry that failed (0 for a record
    checked alone) and ``broken`` the first check that failed: ``version``,
    ``digest``, ``request_sha256``, ``response_sha256``, ``previous_digest``
    or ``ended_at`` (docs/clients.md, "Records and chains"). The code ran:
    ``dispatched`` is True.
    """

    index: int
    broken: str

    def __init__(self, broken: str, index: int = 0, detail: str = "") -> None:
        msg = "record %d: %s check failed" % (index, broken)
        if detail:
            msg += ": " + detail
        super().__init__(msg, code="data_loss", dispatched=True)
        self.index = index
        self.broken = broken


class FileChangedError(PlimsollError):
    """A file read a page at a time (``Session.read_bytes``,
    ``Session.download``) changed between two of its ReadFile calls: a
    page gave another ``size`` than the first. Nothing is returned (a
    download leaves no file); read it again. Code ``aborted``, not
    dispatched (nothing ran but the reads)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="aborted", dispatched=False)


class ConfigurationError(PlimsollError, ValueError):
    """The client's settings are wrong: a URL that is not one, a key that
    cannot be sent (a line break, a control character, …; the message says
    what, never the key), or a key file (``PLIMSOLL_KEY_FILE``) that cannot
    be read or holds no key (``path`` names it). Raised by the constructor;
    nothing was sent. Code ``invalid_argument``, not dispatched."""

    path: Optional[str]

    def __init__(self, message: str, *, path: Optional[str] = None) -> None:
        super().__init__(message, code="invalid_argument", dispatched=False)
        self.path = path


_BY_REASON: Dict[str, Type[RefusalError]] = {
    "INVALID_REQUEST": InvalidRequestError,
    "UNAUTHENTICATED": UnauthenticatedError,
    "DISABLED": DisabledError,
    "INSUFFICIENT_ISOLATION": InsufficientIsolationError,
    "UNSUPPORTED": UnsupportedError,
    "CALLER_NOT_ALLOWED": CallerNotAllowedError,
    "NOT_READY": NotReadyError,
    "SHUTTING_DOWN": ShuttingDownError,
    "RATE_LIMITED": RateLimitedError,
    "AT_CAPACITY": AtCapacityError,
    "SESSION_ENDED": SessionEndedError,
    "NOT_FOUND": NotFoundError,
    "WRONG_ROUTE": WrongRouteError,
}


def refusal_class(reason: str) -> Type[RefusalError]:
    """The refusal type of a reason; :class:`RefusalError` for an unknown one."""
    return _BY_REASON.get(reason, RefusalError)
