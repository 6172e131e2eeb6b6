# SPDX-License-Identifier: Apache-2.0
"""Where a client's URL and key come from (docs/clients.md, "Configuration").

An argument given wins; else ``PLIMSOLL_URL`` (default
``http://127.0.0.1:7475``) and ``PLIMSOLL_KEY``, or the first line of the
file named by ``PLIMSOLL_KEY_FILE``. Both are trimmed of surrounding
whitespace. The key is held by a :class:`Key`, whose ``repr`` and ``str``
never show it, and no error this module raises contains any part of it.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

from .errors import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:7475"

#: What is trimmed off both ends of the URL and the key.
WHITESPACE = " \t\r\n\v\f"

#: The most bytes of a key file read to find its first line.
MAX_KEY_FILE_BYTES = 65536


class Key:
    """The API key, kept out of every ``repr``, ``str`` and format: a
    client, a traceback's locals or a log line show ``Key(hidden)``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the ``Authorization`` header only."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Key(hidden)" if self._value else "Key(none)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)


def _what_is_wrong(key: str) -> Optional[str]:
    """Why ``key`` (trimmed) cannot be sent as a bearer key, or None: the
    daemon takes visible ASCII only. Never a character of the key."""
    for ch in key:
        o = ord(ch)
        if ch in "\r\n":
            return "contains a line break"
        if o < 0x20 or o == 0x7F:
            return "contains a control character"
        if o == 0x20:
            return "contains a space"
        if o > 0x7F:
            return "contains a character that is not ASCII"
    return None


def check_key(key: str, source: str) -> str:
    """``key`` trimmed, or :class:`ConfigurationError` saying what is wrong
    with it (never the key). ``source`` says where it came from."""
    if not isinstance(key, str):
        raise TypeError("plimsoll: the API key %s must be a str, not %s"
                        % (source, type(key).__name__))
    key = key.strip(WHITESPACE)
    why = _what_is_wrong(key)
    if why is not None:
        raise ConfigurationError("plimsoll: the API key %s %s (the key is not shown)"
                                 % (source, why))
    return key


def read_key_file(path: str) -> str:
    """The first line of the key file, trimmed and checked; a file that
    cannot be read, or whose first line is empty, is a
    :class:`ConfigurationError` naming the path and the reason."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_KEY_FILE_BYTES)
    except OSError as e:
        err = ConfigurationError("plimsoll: PLIMSOLL_KEY_FILE: cannot read the key file %s: %s"
                                 % (path, e.strerror or type(e).__name__), path=path)
    else:
        err = None
    if err is not None:
        raise err  # outside the handler: no chained OSError to show
    line = data.split(b"\n", 1)[0].decode("utf-8", "replace")
    key = check_key(line, "in the key file %s (PLIMSOLL_KEY_FILE)" % path)
    if not key:
        raise ConfigurationError("plimsoll: PLIMSOLL_KEY_FILE: the key file %s holds no key "
                                 "(its first line is empty)" % path, path=path)
    return key


def resolve_url(url: Optional[str], environ: Optional[Mapping[str, str]] = None) -> str:
    """The URL given, else ``PLIMSOLL_URL``, else :data:`DEFAULT_URL`;
    trimmed. An empty one is not given."""
    environ = os.environ if environ is None else environ
    if url is not None and not isinstance(url, str):
        raise TypeError("plimsoll: url must be a str, not %s" % type(url).__name__)
    url = (url or "").strip(WHITESPACE)
    if url:
        return url
    return environ.get("PLIMSOLL_URL", "").strip(WHITESPACE) or DEFAULT_URL


def resolve_key(api_key: Optional[str], environ: Optional[Mapping[str, str]] = None) -> Key:
    """The key given, else ``PLIMSOLL_KEY``, else the first line of the
    file ``PLIMSOLL_KEY_FILE``; trimmed and checked. A key that is empty
    once trimmed is not given. No key anywhere is the empty key: the
    client sends none (a daemon without keys takes that)."""
    environ = os.environ if environ is None else environ
    if api_key is not None:
        key = check_key(api_key, "given to the client")
        if key:
            return Key(key)
    key = check_key(environ.get("PLIMSOLL_KEY", ""), "from PLIMSOLL_KEY")
    if key:
        return Key(key)
    path = environ.get("PLIMSOLL_KEY_FILE", "")
    if path:
        return Key(read_key_file(path))
    return Key("")
