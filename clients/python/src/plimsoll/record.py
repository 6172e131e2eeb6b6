# SPDX-License-Identifier: Apache-2.0
"""Run records: the canonical form, checking one record, keeping a chain.

See docs/records.md and docs/clients.md ("Records and chains"). Entries are
plain dicts ``{"request": …, "response": …, "record": …}``, the same shape
as ``tests/vectors/chains.json``, so a kept chain is ``json.dumps``-able as
is and :func:`verify_chain` checks it again later.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .errors import ChainError

__all__ = ["canonical", "sha256_hex", "check_record", "first_broken", "Chain",
           "verify_chain", "ChainError", "CHECKS"]

#: The checks in the order they run; :attr:`ChainError.broken` is one of them.
CHECKS: Tuple[str, ...] = ("version", "digest", "request_sha256", "response_sha256",
                           "previous_digest", "ended_at")

_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _write(value: Any, out: List[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        # Escapes only '"', '\\' and the controls below U+0020 (short forms
        # where JSON has them, else \u00xx in lowercase hex): RFC 8785.
        out.append(_encode_string(value))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, Mapping):
        items = []
        for k in value:
            if not isinstance(k, str):
                raise ValueError("canonical: object key %r is not a string" % (k,))
            items.append(k)
        items.sort(key=_utf16_key)
        out.append("{")
        for i, k in enumerate(items):
            if i:
                out.append(",")
            out.append(_encode_string(k))
            out.append(":")
            _write(value[k], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    elif isinstance(value, float):
        raise ValueError("canonical: %r is not an integer; plimsoll's messages have no "
                         "fractional numbers" % (value,))
    else:
        raise ValueError("canonical: a %s has no JSON form" % type(value).__name__)


def canonical(value: Any) -> str:
    """The canonical form (RFC 8785, for plimsoll's values) of a JSON value.

    Objects' members sorted by key, no whitespace, strings escaping only
    what JSON requires, integers in plain decimal. A float, a non-string
    key, a lone surrogate or any non-JSON value raises :class:`ValueError`.
    """
    out: List[str] = []
    _write(value, out)
    text = "".join(out)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("canonical: a string is not valid Unicode (%s)" % e) from None
    return text


def sha256_hex(value: Any) -> str:
    """SHA-256 (lowercase hex) of the canonical form of ``value``; a ``str``
    or ``bytes`` value is hashed as is (UTF-8 for text)."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        data = canonical(value).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _digest_of(value: Any) -> Optional[str]:
    try:
        return sha256_hex(value)
    except ValueError:
        return None


def first_broken(request: Any, response: Mapping[str, Any], record: Any,
                 previous: Optional[str] = None) -> Tuple[str, str]:
    """The first check that fails, and why, as ``(check, detail)``;
    ``("", "")`` when the record checks out.

    ``response`` may still carry its ``record`` member (it is left out of
    the hash). ``previous`` None skips check 5 (``previous_digest``).
    """
    if not isinstance(record, Mapping):
        return "version", "the answer carries no record"
    version = record.get("version")
    if type(version) is not int or version != 1:
        return "version", "version is %r, not 1" % (version,)
    body = {k: v for k, v in record.items() if k != "digest"}
    want = _digest_of(body)
    if want is None or record.get("digest") != want:
        return "digest", "digest %r is not the record's (%s)" % (record.get("digest"), want)
    want = _digest_of(request)
    if want is None or record.get("request_sha256") != want:
        return "request_sha256", "the record names another request"
    answer = {k: v for k, v in response.items() if k != "record"}
    want = _digest_of(answer)
    if want is None or record.get("response_sha256") != want:
        return "response_sha256", "the record names another response"
    if previous is not None and record.get("previous_digest") != previous:
        return "previous_digest", "previous_digest %r, expected %r" % (
            record.get("previous_digest"), previous)
    started, ended = record.get("started_at"), record.get("ended_at")
    # Same format (RFC 3339 UTC, always 9 fraction digits), so text order is
    # time order; two texts of different lengths are not the same format.
    if not (isinstance(started, str) and isinstance(ended, str)) or len(started) != len(ended):
        return "ended_at", "started_at %r and ended_at %r are not times of the same " \
            "format" % (started, ended)
    if ended < started:
        return "ended_at", "ended_at %s is before started_at %s" % (ended, started)
    return "", ""


def check_record(request: Any, response: Mapping[str, Any], record: Any,
                 previous: Optional[str] = None, index: int = 0) -> None:
    """Check one record against what was sent and what came back (checks
    1-6 of docs/clients.md; ``previous`` None skips 5). Raises
    :class:`ChainError` naming the first check that fails."""
    broken, detail = first_broken(request, response, record, previous)
    if broken:
        raise ChainError(broken, index, detail)


class Chain:
    """The chain keeper: verifies each (request, response) pair in turn and
    keeps the accepted entries in order.

    ``head`` is the expected ``previous_digest`` of the next record: the
    last accepted record's digest (``previous`` before the first). It covers
    every earlier record, so a harness that signs it (say, an HMAC with its
    own key) signs the whole chain.
    """

    def __init__(self, previous: str = "") -> None:
        self._start = previous
        self._head = previous
        self._entries: List[Dict[str, Any]] = []

    @property
    def head(self) -> str:
        return self._head

    @property
    def entries(self) -> List[Dict[str, Any]]:
        """A copy of the accepted entries, oldest first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, request: Any, response: Mapping[str, Any],
               record: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Verify the next entry and keep it; returns the entry kept.

        ``response`` is the answer as received (its ``record`` member is the
        record) or, with ``record`` given, the answer without it. On any
        failure raises :class:`ChainError` with ``index`` the entry's
        position, and the chain is left as it was.
        """
        if record is None:
            record = response.get("record")
        answer = {k: v for k, v in response.items() if k != "record"}
        check_record(request, answer, record, self._head, len(self._entries))
        assert record is not None
        entry = {"request": request, "response": answer, "record": dict(record)}
        self._entries.append(entry)
        self._head = record["digest"]
        return entry

    def __repr__(self) -> str:
        return "Chain(entries=%d, head=%r)" % (len(self._entries), self._head)


def verify_chain(entries: Iterable[Mapping[str, Any]], previous: str = "") -> Chain:
    """Check a kept list of ``{"request", "response", "record"}`` entries from
    the start; returns the rebuilt :class:`Chain` or raises
    :class:`ChainError` at the first entry that fails."""
    chain = Chain(previous)
    for entry in entries:
        chain.append(entry.get("request"), entry.get("response") or {}, entry.get("record"))
    return chain
