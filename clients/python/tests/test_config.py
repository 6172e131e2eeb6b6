# SPDX-License-Identifier: Apache-2.0
"""The client's configuration (docs/clients.md, "Configuration"): the URL
and the key from the environment, their precedence and trimming, the key
file's errors, and no key in any error, repr or str. Against a fake daemon:
no harness needed."""
from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
import traceback
import unittest
from typing import Any, Dict, Iterator, List
from unittest import mock

import plimsoll
from plimsoll import errors

from .support import FakeDaemon, connect_error, run_answer

VARS = ("PLIMSOLL_URL", "PLIMSOLL_KEY", "PLIMSOLL_KEY_FILE")
SNIPPET = {"snippet": {"language": "javascript", "code": "1"}}


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """The three variables exactly as given, whatever the caller's
    environment holds; the rest of it untouched."""
    with mock.patch.dict(os.environ):
        for name in VARS:
            os.environ.pop(name, None)
        os.environ.update(values)
        yield


def secret_key() -> str:
    """A key to recognise: it is never a substring of a message by chance."""
    return "plk_" + secrets.token_hex(24)


def pieces(key: str) -> List[str]:
    """The parts of ``key`` that no text may contain: every run of 6 of its
    characters (so a half, a prefix or the tail shows too)."""
    return [key[i:i + 6] for i in range(0, len(key) - 5)]


def everything_said(e: BaseException) -> str:
    """All an exception shows: str, repr, args, the chained cause and
    context, the formatted traceback."""
    parts = [str(e), repr(e), repr(e.args), repr(e.__cause__), repr(e.__context__),
             "".join(traceback.format_exception(type(e), e, e.__traceback__))]
    if isinstance(e, errors.PlimsollError):
        parts += [e.message, repr(e.metadata)]
    return "\n".join(parts)


class Config(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def key_file(self, text: str, name: str = "key") -> str:
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def sent_key(self, client: Any) -> str:
        """The bearer key ``client`` sends (by a Describe to the fake)."""
        self.fake.answer(200, {})
        if isinstance(client, plimsoll.AsyncClient):
            asyncio.run(client.describe())
        else:
            client.describe()
        auth = self.fake.received[-1]["headers"]["Authorization"]
        self.assertTrue(auth.startswith("Bearer "), auth)
        return auth[len("Bearer "):]

    def assert_hides(self, key: str, text: str) -> None:
        for p in pieces(key):
            self.assertNotIn(p, text)

    def clients(self, *args: Any, **kwargs: Any) -> List[Any]:
        return [plimsoll.Client(*args, **kwargs), plimsoll.AsyncClient(*args, **kwargs)]

    # -- where the URL and the key come from ---------------------------------

    def test_environment_only(self) -> None:
        key = secret_key()
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY=key):
            for c in self.clients():
                self.assertEqual(c.url, self.fake.url)
                self.assertEqual(self.sent_key(c), key)

    def test_nothing_set_is_the_default_url_and_no_key(self) -> None:
        with environ():
            for c in self.clients():
                self.assertEqual(c.url, "http://127.0.0.1:7475")
                self.assertEqual(c.url, plimsoll.DEFAULT_URL)
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY="", PLIMSOLL_KEY_FILE=""):
            for c in self.clients():
                self.assertEqual(self.sent_key(c), "")  # keyless, as the client always was

    def test_key_file_with_a_trailing_newline(self) -> None:
        key = secret_key()
        for text in (key + "\n", key + "\r\n", "  " + key + "\t\n", key + "\nsecond line\n",
                     key):
            path = self.key_file(text)
            with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY_FILE=path):
                for c in self.clients():
                    self.assertEqual(self.sent_key(c), key, repr(text))

    def test_key_wins_over_key_file(self) -> None:
        key, other = secret_key(), secret_key()
        path = self.key_file(other + "\n")
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY=key, PLIMSOLL_KEY_FILE=path):
            for c in self.clients():
                self.assertEqual(self.sent_key(c), key)
        missing = os.path.join(self.dir, "missing")
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY=key, PLIMSOLL_KEY_FILE=missing):
            for c in self.clients():  # the file is not even read
                self.assertEqual(self.sent_key(c), key)
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY=" \n", PLIMSOLL_KEY_FILE=path):
            for c in self.clients():  # an empty PLIMSOLL_KEY is not set
                self.assertEqual(self.sent_key(c), other)

    def test_explicit_arguments_win_over_the_environment(self) -> None:
        key, env_key = secret_key(), secret_key()
        path = self.key_file(secret_key() + "\n")
        with environ(PLIMSOLL_URL="http://127.0.0.1:1", PLIMSOLL_KEY=env_key,
                     PLIMSOLL_KEY_FILE=path):
            for c in self.clients(self.fake.url, key):
                self.assertEqual(c.url, self.fake.url)
                self.assertEqual(self.sent_key(c), key)
            for c in self.clients(url=self.fake.url):
                self.assertEqual(self.sent_key(c), env_key)
            for c in self.clients(api_key=key):
                self.assertEqual(c.url, "http://127.0.0.1:1")
        missing = os.path.join(self.dir, "missing")
        with environ(PLIMSOLL_KEY_FILE=missing):
            for c in self.clients(self.fake.url, key):  # no file is read for a given key
                self.assertEqual(self.sent_key(c), key)

    def test_given_key_and_url_are_trimmed(self) -> None:
        key = secret_key()
        with environ():
            for c in self.clients(" %s\n" % self.fake.url, key + "\n"):
                self.assertEqual(c.url, self.fake.url)
                self.assertEqual(self.sent_key(c), key)
        with environ(PLIMSOLL_URL=self.fake.url + "\n", PLIMSOLL_KEY="\t" + key + "\r\n"):
            for c in self.clients():
                self.assertEqual(self.sent_key(c), key)

    # -- the key file's errors -------------------------------------------------

    def assert_key_file_error(self, path: str, why: str) -> None:
        for cls in (plimsoll.Client, plimsoll.AsyncClient):
            with self.assertRaises(plimsoll.ConfigurationError) as cm:
                cls(self.fake.url)
            e = cm.exception
            self.assertIsInstance(e, errors.PlimsollError)
            self.assertIsInstance(e, ValueError)
            self.assertEqual(e.path, path)
            self.assertEqual((e.code, e.dispatched), ("invalid_argument", False))
            self.assertIn("cannot read the key file %s: %s" % (path, why), str(e))
            self.assertIn("PLIMSOLL_KEY_FILE", str(e))
        self.assertEqual(self.fake.received, [])  # nothing was sent

    def test_missing_key_file(self) -> None:
        path = os.path.join(self.dir, "no", "key")
        with environ(PLIMSOLL_KEY_FILE=path):
            self.assert_key_file_error(path, "No such file or directory")

    def test_key_file_is_a_directory(self) -> None:
        with environ(PLIMSOLL_KEY_FILE=self.dir):
            self.assert_key_file_error(self.dir, "Is a directory")

    @unittest.skipIf(os.geteuid() == 0, "root reads a file of mode 000")
    def test_key_file_not_readable(self) -> None:
        path = self.key_file(secret_key() + "\n")
        os.chmod(path, 0)
        with environ(PLIMSOLL_KEY_FILE=path):
            self.assert_key_file_error(path, "Permission denied")

    def test_empty_key_file(self) -> None:
        for text in ("", "\n", "  \n" + secret_key() + "\n"):
            path = self.key_file(text)
            with environ(PLIMSOLL_KEY_FILE=path):
                with self.assertRaises(plimsoll.ConfigurationError) as cm:
                    plimsoll.Client(self.fake.url)
                self.assertIn("the key file %s holds no key" % path, str(cm.exception))
                self.assertEqual(cm.exception.path, path)

    def test_the_key_file_error_does_not_show_its_content(self) -> None:
        key = secret_key()
        path = self.key_file(key[:20] + "\x07" + key[20:] + "\n")
        with environ(PLIMSOLL_KEY_FILE=path):
            with self.assertRaises(plimsoll.ConfigurationError) as cm:
                plimsoll.Client(self.fake.url)
        self.assertIn(path, str(cm.exception))
        self.assertIn("contains a control character", str(cm.exception))
        self.assert_hides(key, everything_said(cm.exception))

    # -- never a key -------------------------------------------------------------

    def test_a_key_with_a_line_break_is_refused_without_showing_it(self) -> None:
        cases = {"\n": "contains a line break", "\r": "contains a line break",
                 "\x00": "contains a control character", "\x1b": "contains a control character",
                 "\x7f": "contains a control character", " ": "contains a space",
                 "\u00e9": "contains a character that is not ASCII",
                 "\u2028": "contains a character that is not ASCII"}
        for bad, why in cases.items():
            key = secret_key()
            broken = key[:25] + bad + key[25:]
            sources: List[Dict[str, Any]] = [{"args": (self.fake.url, broken), "env": {}}]
            if bad != "\x00":  # no environment holds a NUL
                sources.append({"args": (self.fake.url,), "env": {"PLIMSOLL_KEY": broken}})
            for src in sources:
                for cls in (plimsoll.Client, plimsoll.AsyncClient):
                    with environ(**src["env"]):
                        with self.assertRaises(plimsoll.ConfigurationError) as cm:
                            cls(*src["args"])
                    e = cm.exception
                    self.assertIn("the API key", str(e))
                    self.assertIn(why, str(e), repr(bad))
                    self.assertIsNone(e.__cause__)
                    self.assertIsNone(e.__context__)
                    self.assert_hides(key, everything_said(e))
        self.assertEqual(self.fake.received, [])

    def test_repr_and_str_of_a_client_show_no_key(self) -> None:
        key = secret_key()
        with environ(PLIMSOLL_URL=self.fake.url, PLIMSOLL_KEY=key):
            for c in self.clients() + self.clients(self.fake.url, key):
                text = "\n".join([repr(c), str(c), "%s" % c, "{}".format(c), f"{c!r}",
                                  repr(vars(c)), str(vars(c))])
                self.assert_hides(key, text)
                self.assertIn(self.fake.url, repr(c))

    def test_a_refused_key_is_not_in_the_error(self) -> None:
        key = secret_key()
        self.fake.answers.append(connect_error("UNAUTHENTICATED", "unauthenticated",
                                               "no such key", 401))
        with environ(PLIMSOLL_KEY=key):
            with self.assertRaises(errors.UnauthenticatedError) as cm:
                plimsoll.Client(self.fake.url).describe()
        self.assert_hides(key, everything_said(cm.exception))
        with environ(PLIMSOLL_URL="http://127.0.0.1:1", PLIMSOLL_KEY=key):
            with self.assertRaises(errors.InfrastructureError) as ci:
                plimsoll.Client().describe()
        self.assert_hides(key, everything_said(ci.exception))

    def test_a_bad_url_from_the_environment(self) -> None:
        with environ(PLIMSOLL_URL="ftp://example"):
            with self.assertRaises(plimsoll.ConfigurationError) as cm:
                plimsoll.Client()
        self.assertIn("ftp://example", str(cm.exception))
        for url in ("unix:", "http://h:port", "http://[::1"):
            with self.assertRaises(ValueError):
                plimsoll.Client(url)


class Arguments(unittest.TestCase):
    """A wrongly typed argument is refused at the call, naming it; nothing
    is sent (a ``"5000"`` would be hashed by the daemon as 5000, and the
    record would fail)."""

    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.client = plimsoll.Client(self.fake.url, "plk_test")

    def refused(self, exc: type, name: str, call: Any) -> None:
        with self.assertRaises(exc) as cm:
            call()
        self.assertIn(name, str(cm.exception))
        self.assertEqual(self.fake.received, [])

    def test_run_options(self) -> None:
        c = self.client
        self.refused(TypeError, "timeout_ms", lambda: c.run_snippet("1", timeout_ms="5000"))
        self.refused(TypeError, "timeout_ms", lambda: c.run_snippet("1", timeout_ms=True))
        self.refused(ValueError, "timeout_ms", lambda: c.run_snippet("1", timeout_ms=5000.0))
        self.refused(ValueError, "timeout_ms", lambda: c.run_snippet("1", timeout_ms=-1))
        self.refused(ValueError, "timeout_ms", lambda: c.run_snippet("1", timeout_ms=2 ** 32))
        self.refused(TypeError, "memory_mb", lambda: c.run_snippet("1", memory_mb="64"))
        self.refused(TypeError, "memory_mb",
                     lambda: c.run_project({"a": "b"}, [["true"]], memory_mb="64"))
        self.refused(TypeError, "timeout_ms",
                     lambda: c.run_module(b"\0asm", timeout_ms="1"))
        self.refused(TypeError, "minimum_isolation",
                     lambda: c.run_snippet("1", minimum_isolation=3))
        self.refused(TypeError, "code", lambda: c.run_snippet(b"1"))
        self.refused(TypeError, "timeout_ms", lambda: c.run(dict(SNIPPET, timeout_ms="5000")))
        self.refused(TypeError, "memory_mb", lambda: c.run_stream(dict(SNIPPET, memory_mb="1")))
        self.refused(TypeError, "timeout_ms",
                     lambda: c.run_in_session("s", dict(SNIPPET, timeout_ms="5")))
        self.refused(TypeError, "timeout_ms",
                     lambda: c.run_cell("s", {"language": "python", "code": "1"}, "5"))
        self.refused(TypeError, "timeout_ms",
                     lambda: c.run_cell_stream("s", {"language": "python", "code": "1"},
                                               timeout_ms="5"))
        ac = plimsoll.AsyncClient(self.fake.url, "plk_test")
        self.refused(TypeError, "timeout_ms",
                     lambda: asyncio.run(ac.run_snippet("1", timeout_ms="5000")))
        self.fake.answer(200, run_answer(dict(SNIPPET, timeout_ms=5000)))
        self.client.run_snippet("1", timeout_ms=5000)  # the right type is sent as it is
        self.assertEqual(self.fake.sent()["timeout_ms"], 5000)

    def test_client_options(self) -> None:
        url = self.fake.url
        for cls in (plimsoll.Client, plimsoll.AsyncClient):
            self.refused(TypeError, "timeout", lambda: cls(url, "k", timeout="5"))
            self.refused(ValueError, "timeout", lambda: cls(url, "k", timeout=0))
            self.refused(TypeError, "max_answer_bytes",
                         lambda: cls(url, "k", max_answer_bytes="1024"))
            self.refused(ValueError, "max_answer_bytes",
                         lambda: cls(url, "k", max_answer_bytes=0))
            self.refused(ValueError, "max_message_bytes",
                         lambda: cls(url, "k", max_message_bytes=1.0e6))
            self.refused(TypeError, "retry", lambda: cls(url, "k", retry=True))
            self.refused(TypeError, "verify_records",
                         lambda: cls(url, "k", verify_records="no"))
            self.refused(TypeError, "url", lambda: cls(7475))
            self.refused(TypeError, "API key", lambda: cls(url, b"plk_k"))
        self.refused(TypeError, "max_attempts", lambda: plimsoll.RetryPolicy(max_attempts="4"))
        self.refused(ValueError, "base_ms", lambda: plimsoll.RetryPolicy(base_ms=0.5))


if __name__ == "__main__":
    unittest.main()
