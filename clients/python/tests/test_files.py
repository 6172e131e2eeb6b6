# SPDX-License-Identifier: Apache-2.0
"""A session's files (WriteFiles, ReadFile, ListFiles) and the session's
conveniences over them (read_bytes, download, upload), against a fake
daemon: what is sent, what is refused before anything is sent, the typed
answers, the records and the session's chain, the paging of a whole file,
the batching of an upload, and the malformed answers that are the client's
protocol error."""
from __future__ import annotations

import base64
import datetime
import json
import os
import socket
import tempfile
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple

import plimsoll
from plimsoll import errors
from plimsoll.record import ChainError, verify_chain

from .support import SESSION_ID, FakeDaemon, connect_error, make_record, run_answer

UTC = datetime.timezone.utc
MIB = 1 << 20
TIME = "2026-11-30T01:02:03.123456789Z"


class FakeSession:
    """One session's files behind a FakeDaemon (its ``respond``): OpenSession,
    WriteFiles, ReadFile, ListFiles and RunCell answered as the daemon
    answers them, each record naming the one before. ``alter`` may change
    an answer (the method, the request, the answer) before its record is
    made; ``calls`` keeps each call's method and request."""

    def __init__(self, isolation: str = "container") -> None:
        self.isolation = isolation
        self.files: Dict[str, bytes] = {}
        self.head = ""
        self.calls: List[Tuple[str, Dict[str, Any]]] = []
        self.alter: Optional[Callable[[str, Dict[str, Any], Dict[str, Any]], None]] = None

    def __call__(self, path: str, body: bytes) -> Tuple[int, Any]:
        method = path.rsplit("/", 1)[1]
        req = json.loads(body)
        self.calls.append((method, dict(req)))
        if method == "OpenSession":
            return 200, {"session_id": SESSION_ID}
        if method == "CloseSession":
            return 200, {}
        req.pop("session_id")
        if method == "RunCell":
            answer = run_answer(req, "ok\n", isolation=self.isolation, previous=self.head)
            self.head = answer["record"]["digest"]
            return 200, answer
        if method == "WriteFiles":
            for f in req["files"]:
                self.files[f["path"]] = (base64.b64decode(f["content_base64"])
                                         if "content_base64" in f
                                         else f["content"].encode("utf-8"))
            answer = {"files": len(req["files"]),
                      "bytes": sum(len(self.files[f["path"]]) for f in req["files"])}
        elif method == "ReadFile":
            data = self.files.get(req["path"])
            if data is None:
                return connect_error("NOT_FOUND", "not_found", "path: nothing of that name in "
                                     "the work directory", 404)
            offset, limit = req.get("offset", 0), req.get("limit") or 4 * MIB
            piece = data[offset:offset + limit]
            answer = {"path": req["path"], "size": len(data), "offset": offset,
                      "content": piece.decode("utf-8", "replace"), "length": len(piece),
                      "more": offset + len(piece) < len(data)}
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError:
                answer["content_base64"] = base64.b64encode(piece).decode()
        elif method == "ListFiles":
            answer = {"entries": self.listing(req.get("path", ""), req.get("depth") or 1),
                      "truncated": False}
        else:
            return 500, b"no such method here"
        if self.alter is not None:
            self.alter(method, req, answer)
        answer["record"] = make_record(req, answer, self.head, self.isolation)
        self.head = answer["record"]["digest"]
        return 200, answer

    def listing(self, path: str, depth: int) -> List[Dict[str, Any]]:
        prefix = path + "/" if path else ""
        seen = set()
        for p in self.files:
            if p.startswith(prefix):
                parts = p[len(prefix):].split("/")
                for i in range(min(len(parts), depth)):
                    seen.add((tuple(parts[:i + 1]), i + 1 == len(parts)))
        out = []
        for parts, is_file in sorted(seen):  # depth first, each directory's by name
            p = prefix + "/".join(parts)
            out.append({"path": p, "type": "file" if is_file else "directory",
                        "size": len(self.files[p]) if is_file else 4096,
                        "mode": 0o644 if is_file else 0o755, "modified_at": TIME})
        return out


def read_answer(**fields: Any) -> Dict[str, Any]:
    """A ReadFile answer of "a.txt" (no record), with ``fields`` changed."""
    answer: Dict[str, Any] = {"path": "a.txt", "size": 5, "offset": 0, "content": "hello",
                              "length": 5, "more": False}
    answer.update(fields)
    return {k: v for k, v in answer.items() if v is not None}


def entry(**fields: Any) -> Dict[str, Any]:
    e: Dict[str, Any] = {"path": "a.txt", "type": "file", "size": 5, "mode": 0o644,
                         "modified_at": TIME}
    e.update(fields)
    return e


def list_answer(*entries: Dict[str, Any]) -> Dict[str, Any]:
    return {"entries": list(entries), "truncated": False}


#: (name, call, answer): a 200 answer the client must take for a protocol
#: error. ``call`` is read (of "a.txt"), read-from-2 (offset 2, limit 3),
#: list (of ""), list-d (of "d", depth 2) or write ({"a.txt": "hello"}).
MALFORMED: List[Tuple[str, str, Any]] = [
    ("write-not-an-object", "write", [1]),
    ("write-files-a-string", "write", {"files": "1", "bytes": 5}),
    ("write-bytes-negative", "write", {"files": 1, "bytes": -5}),
    ("write-not-the-files-sent", "write", {"files": 2, "bytes": 5}),
    ("write-not-the-bytes-sent", "write", {"files": 1, "bytes": 4}),
    ("write-nothing-written", "write", {}),
    ("write-record-a-string", "write", {"files": 1, "bytes": 5, "record": "r"}),
    ("read-size-a-string", "read", read_answer(size="5")),
    ("read-more-a-number", "read", read_answer(more=0)),
    ("read-content-a-number", "read", read_answer(content=5)),
    ("read-length-not-the-bytes", "read", read_answer(length=4)),
    ("read-length-not-the-utf8-bytes", "read", read_answer(content="h\u00e9llo", size=6)),
    ("read-length-missing", "read", read_answer(length=None)),
    ("read-base64-not-base64", "read", read_answer(content_base64="!!!!")),
    ("read-base64-one-char-too-many", "read", read_answer(content_base64="aGVsbG8=a")),
    ("read-base64-url-safe", "read", read_answer(content_base64="_w==", size=1, length=1)),
    ("read-base64-not-the-length", "read", read_answer(content_base64="/wA=")),
    ("read-past-its-size", "read", read_answer(size=4)),
    ("read-more-but-none-remain", "read", read_answer(more=True)),
    ("read-no-more-but-some-remain", "read", read_answer(size=9)),
    ("read-another-path", "read", read_answer(path="b.txt")),
    ("read-no-path", "read", read_answer(path=None)),
    ("read-another-offset", "read-from-2", read_answer(offset=0, content="hel", length=3,
                                                       more=True)),
    ("read-past-the-limit", "read-from-2", read_answer(offset=2, size=9, content="llo w",
                                                       length=5, more=True)),
    ("list-entries-an-object", "list", {"entries": entry()}),
    ("list-a-null-entry", "list", list_answer(None)),  # type: ignore[arg-type]
    ("list-type-unknown", "list", list_answer(entry(type="pipe"))),
    ("list-type-missing", "list", list_answer({"path": "a.txt", "size": 1})),
    ("list-no-path", "list", list_answer(entry(path=""))),
    ("list-path-base64-not-base64", "list", list_answer(entry(path_base64="a b"))),
    ("list-mode-with-the-type-bits", "list", list_answer(entry(mode=0o100644))),
    ("list-size-past-uint32", "list", list_answer(entry(size=2 ** 32))),
    ("list-modified-at-not-a-time", "list", list_answer(entry(modified_at="today"))),
    ("list-modified-at-not-utc", "list",
     list_answer(entry(modified_at="2026-11-30T01:02:03+01:00"))),
    ("list-truncated-a-string", "list", {"entries": [], "truncated": "no"}),
    ("list-not-in-the-directory", "list-d", list_answer(entry(path="e/a.txt"))),
    ("list-the-directory-itself", "list-d", list_answer(entry(path="d/", type="directory"))),
    ("list-a-sibling-with-its-prefix", "list-d", list_answer(entry(path="dd/a.txt"))),
]

#: Answers the protocol allows though the daemon sends more (proto3 JSON
#: leaves defaults out), and members the client does not know.
ALLOWED: List[Tuple[str, str, Any]] = [
    ("read-an-empty-file", "read", {"path": "a.txt"}),
    ("read-nulls-are-defaults", "read", read_answer(content_base64=None, record=None)),
    ("read-base64-unpadded", "read", read_answer(content="\ufffd", content_base64="/w",
                                                 size=1, length=1)),
    ("read-past-the-end", "read-from-2", {"path": "a.txt", "offset": 2, "size": 1}),
    ("read-an-unknown-member", "read", read_answer(mime="text/plain")),
    ("list-empty", "list", {}),
    ("list-a-name-not-utf8", "list", list_answer(entry(path="\ufffd", path_base64="/w=="))),
    ("list-a-device-no-mode", "list", list_answer({"path": "null", "type": "device"})),
    ("list-under-d", "list-d", list_answer(entry(path="d/a"), entry(path="d/b/c"))),
    ("write-as-sent", "write", {"files": 1, "bytes": 5}),
]


def call(client: plimsoll.Client, what: str) -> Any:
    if what == "write":
        return client.write_files(SESSION_ID, {"a.txt": "hello"})
    if what == "read":
        return client.read_file(SESSION_ID, "a.txt")
    if what == "read-from-2":
        return client.read_file(SESSION_ID, "a.txt", 2, 3)
    if what == "list":
        return client.list_files(SESSION_ID)
    return client.list_files(SESSION_ID, "d", 2)


async def aio_call(client: plimsoll.AsyncClient, what: str) -> Any:
    if what == "write":
        return await client.write_files(SESSION_ID, {"a.txt": "hello"})
    if what == "read":
        return await client.read_file(SESSION_ID, "a.txt")
    if what == "read-from-2":
        return await client.read_file(SESSION_ID, "a.txt", 2, 3)
    if what == "list":
        return await client.list_files(SESSION_ID)
    return await client.list_files(SESSION_ID, "d", 2)


#: Calls refused before anything is sent: (name, call, the error type).
BAD_CALLS: List[Tuple[str, Callable[[plimsoll.Client], Any], type]] = [
    ("write-bad-id", lambda c: c.write_files("x", {"a": "b"}), ValueError),
    ("write-no-files", lambda c: c.write_files(SESSION_ID, {}), ValueError),
    ("write-files-a-str", lambda c: c.write_files(SESSION_ID, "a.txt"), TypeError),
    ("write-files-none", lambda c: c.write_files(SESSION_ID, None), TypeError),
    ("write-content-an-int", lambda c: c.write_files(SESSION_ID, {"a": 1}), TypeError),
    ("write-path-bytes", lambda c: c.write_files(SESSION_ID, {b"a": "x"}), TypeError),
    ("write-file-dict-path-none", lambda c: c.write_files(SESSION_ID, [{"content": "x"}]),
     TypeError),
    ("write-file-dict-content-bytes",
     lambda c: c.write_files(SESSION_ID, [{"path": "a", "content": b"x"}]), TypeError),
    ("read-bad-id", lambda c: c.read_file(SESSION_ID.upper(), "a"), ValueError),
    ("read-path-none", lambda c: c.read_file(SESSION_ID, None), TypeError),
    ("read-path-a-pathlike", lambda c: c.read_file(SESSION_ID, __import__("pathlib").Path("a")),
     TypeError),
    ("read-offset-negative", lambda c: c.read_file(SESSION_ID, "a", -1), ValueError),
    ("read-offset-a-float", lambda c: c.read_file(SESSION_ID, "a", 1.0), ValueError),
    ("read-offset-past-uint32", lambda c: c.read_file(SESSION_ID, "a", 2 ** 32), ValueError),
    ("read-limit-a-str", lambda c: c.read_file(SESSION_ID, "a", 0, "10"), TypeError),
    ("read-limit-negative", lambda c: c.read_file(SESSION_ID, "a", 0, -1), ValueError),
    ("list-bad-id", lambda c: c.list_files(5), TypeError),
    ("list-path-none", lambda c: c.list_files(SESSION_ID, None), TypeError),
    ("list-depth-17", lambda c: c.list_files(SESSION_ID, "", 17), ValueError),
    ("list-depth-negative", lambda c: c.list_files(SESSION_ID, "", -1), ValueError),
    ("list-depth-a-bool", lambda c: c.list_files(SESSION_ID, "", True), TypeError),
]


def sent_methods(fake: FakeDaemon) -> List[str]:
    return [r["path"].rsplit("/", 1)[1] for r in fake.received]


class FileCalls(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.session = FakeSession()
        self.client = plimsoll.Client(self.fake.url, "plk_test")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def open(self, **kw: Any) -> plimsoll.Session:
        self.fake.respond = self.session
        return self.client.open_session(**kw)

    def test_what_is_sent_the_typed_answers_and_the_chain(self) -> None:
        s = self.open()
        w = s.write_files({"a.txt": "h\u00e9llo", "d/b.bin": b"\xff\x00"})
        self.assertEqual(self.fake.received[-1]["body"], plimsoll.canonical(
            {"session_id": SESSION_ID,
             "files": [{"path": "a.txt", "content": "h\u00e9llo"},
                       {"path": "d/b.bin", "content_base64": "/wA="}]}).encode())
        self.assertIsInstance(w, plimsoll.WriteFilesResult)
        self.assertEqual((w.files, w.bytes), (2, 8))
        assert w.record is not None
        self.assertEqual(w.record.previous_digest, "")
        r = s.read_file("a.txt")
        self.assertEqual(self.fake.sent(), {"session_id": SESSION_ID, "path": "a.txt"})
        self.assertIsInstance(r, plimsoll.ReadFileResult)
        self.assertEqual((r.path, r.size, r.offset, r.content, r.length, r.more),
                         ("a.txt", 6, 0, "h\u00e9llo".encode(), 6, False))
        b = s.read_file("d/b.bin")
        self.assertEqual((b.content, b.length, b.raw["content"], b.raw["content_base64"]),
                         (b"\xff\x00", 2, "\ufffd\x00", "/wA="))
        page = s.read_file("a.txt", 1, 3)
        self.assertEqual(self.fake.sent(), {"session_id": SESSION_ID, "path": "a.txt",
                                            "offset": 1, "limit": 3})
        self.assertEqual((page.content, page.offset, page.length, page.more),
                         ("\u00e9l".encode(), 1, 3, True))
        listed = s.list_files()
        self.assertEqual(self.fake.sent(), {"session_id": SESSION_ID, "depth": 1})
        self.assertIsInstance(listed, plimsoll.ListFilesResult)
        self.assertEqual([(e.path, e.type) for e in listed],
                         [("a.txt", "file"), ("d", "directory")])
        self.assertEqual(len(listed), 2)
        a = listed.entries[0]
        self.assertIsInstance(a, plimsoll.FileEntry)
        self.assertEqual((a.path, a.path_bytes, a.size, a.mode, a.modified_at),
                         ("a.txt", b"a.txt", 6, 0o644, TIME))
        self.assertEqual(a.modified_time,
                         datetime.datetime(2026, 11, 30, 1, 2, 3, 123456, tzinfo=UTC))
        deep = s.list_files("d", depth=2)
        self.assertEqual(self.fake.sent(), {"session_id": SESSION_ID, "path": "d", "depth": 2})
        self.assertEqual([e.path for e in deep], ["d/b.bin"])
        c = s.cell("1", "python")
        self.assertEqual(sent_methods(self.fake),
                         ["OpenSession", "WriteFiles", "ReadFile", "ReadFile", "ReadFile",
                          "ListFiles", "ListFiles", "RunCell"])
        self.assertEqual(len(s.chain), 7)
        self.assertEqual(s.chain.head, c.record.digest if c.record else None)
        # the entries are what was sent without session_id, and the answers without record
        self.assertEqual(s.chain.entries[1]["request"], {"path": "a.txt"})
        self.assertNotIn("record", s.chain.entries[1]["response"])
        self.assertEqual(verify_chain(s.chain.entries).head, s.chain.head)

    def test_the_helpers_of_one_file(self) -> None:
        s = self.open()
        s.write_text("t.txt", "caf\u00e9\n")
        self.assertEqual(self.fake.sent()["files"], [{"path": "t.txt", "content": "caf\u00e9\n"}])
        s.write_bytes("b.bin", bytearray(b"\x00\x01"))
        self.assertEqual(self.fake.sent()["files"], [{"path": "b.bin",
                                                      "content_base64": "AAE="}])
        self.assertEqual(s.read_text("t.txt"), "caf\u00e9\n")
        self.assertEqual(s.read_bytes("b.bin"), b"\x00\x01")
        with self.assertRaises(TypeError):
            s.write_text("t.txt", b"x")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            s.write_bytes("b.bin", "x")  # type: ignore[arg-type]
        self.assertEqual(len(s.chain), 4)

    def test_arguments_refused_before_anything_is_sent(self) -> None:
        for name, make, cls in BAD_CALLS:
            with self.subTest(name):
                with self.assertRaises(cls):
                    make(self.client)
        self.assertEqual(self.fake.received, [])

    def test_malformed_answers_are_protocol_errors(self) -> None:
        for name, what, answer in MALFORMED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                with self.assertRaises(errors.ProtocolError) as cm:
                    call(self.client, what)
                e = cm.exception
                self.assertEqual((e.code, e.dispatched, e.http_status), ("unknown", True, 200))
        self.assertEqual(len(self.fake.received), len(MALFORMED))

    def test_allowed_answers(self) -> None:
        client = plimsoll.Client(self.fake.url, "k", verify_records=False)
        for name, what, answer in ALLOWED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                call(client, what)
        self.fake.answer(200, {"path": "a.txt"})
        empty = client.read_file(SESSION_ID, "a.txt")
        self.assertEqual((empty.content, empty.size, empty.more, empty.record),
                         (b"", 0, False, None))
        self.fake.answer(200, list_answer(entry(path="\ufffd", path_base64="/w==")))
        odd = client.list_files(SESSION_ID).entries[0]
        self.assertEqual((odd.path, odd.path_bytes), ("\ufffd", b"\xff"))
        self.fake.answer(200, list_answer({"path": "null", "type": "device"}))
        dev = client.list_files(SESSION_ID).entries[0]
        self.assertEqual((dev.mode, dev.size, dev.modified_at, dev.modified_time),
                         (0, 0, "", None))

    def test_refusals_are_the_typed_errors(self) -> None:
        s = self.open()
        with self.assertRaises(errors.NotFoundError) as nf:
            s.read_file("missing.txt")
        self.assertTrue(nf.exception.message.startswith("path:"))
        self.fake.respond = None
        self.fake.answer(*connect_error("INVALID_REQUEST", "invalid_argument",
                                        "path: a symlink is on the way or at the end; the "
                                        "file calls follow none"))
        with self.assertRaises(errors.InvalidRequestError):
            s.list_files("ln")
        self.fake.answer(*connect_error("UNSUPPORTED", "unimplemented", "no files here", 501))
        with self.assertRaises(errors.UnsupportedError):
            s.write_files({"a": "b"})
        self.assertEqual(len(s.chain), 0)  # a refusal makes no record

    def test_records_alone_and_in_the_chain(self) -> None:
        # without a chain: checked alone (no previous_digest), unless verify_records is off
        answer = read_answer()
        answer["record"] = make_record({"path": "a.txt"}, answer, previous="ab" * 32)
        self.fake.answer(200, answer)
        r = self.client.read_file(SESSION_ID, "a.txt")
        self.assertEqual(r.record.previous_digest if r.record else None, "ab" * 32)
        forged = dict(answer, content="HELLO")
        self.fake.answer(200, forged)
        with self.assertRaises(ChainError) as cm:
            self.client.read_file(SESSION_ID, "a.txt")
        self.assertEqual(cm.exception.broken, "response_sha256")
        # the request hashed is the one sent, without session_id
        self.fake.answer(200, answer)
        with self.assertRaises(ChainError) as cm:
            self.client.read_file(SESSION_ID, "a.txt", 0, 5)
        self.assertEqual(cm.exception.broken, "request_sha256")
        self.fake.answer(200, forged)
        plimsoll.Client(self.fake.url, "k", verify_records=False).read_file(SESSION_ID, "a.txt")
        self.fake.answer(200, read_answer())
        with self.assertRaises(ChainError) as cm:
            self.client.read_file(SESSION_ID, "a.txt")
        self.assertEqual(cm.exception.broken, "version")  # no record at all
        # a chain given: the record must name its head
        chain = plimsoll.Chain("cd" * 32)
        self.fake.answer(200, answer)
        with self.assertRaises(ChainError) as cm:
            self.client.read_file(SESSION_ID, "a.txt", chain=chain)
        self.assertEqual((cm.exception.broken, len(chain)), ("previous_digest", 0))
        listing = list_answer()
        listing["record"] = make_record({"path": "d", "depth": 1}, listing, "cd" * 32)
        self.fake.answer(200, listing)
        self.client.list_files(SESSION_ID, "d", chain=chain)
        self.assertEqual(chain.head, listing["record"]["digest"])

    def test_a_session_missing_a_call_fails_its_next_answer(self) -> None:
        s = self.open()
        s.write_files({"a.txt": "x"})
        self.client.read_file(SESSION_ID, "a.txt")  # behind the session object's back
        head = s.chain.head
        with self.assertRaises(ChainError) as cm:
            s.list_files()
        self.assertEqual((cm.exception.index, cm.exception.broken), (1, "previous_digest"))
        self.assertEqual(s.chain.head, head)

    def test_the_floor_is_checked_against_the_record(self) -> None:
        self.session.isolation = "process"
        s = self.open(minimum_isolation="container")
        with self.assertRaises(errors.IsolationEvidenceMismatchError) as cm:
            s.write_files({"a.txt": "x"})
        e = cm.exception
        self.assertEqual((e.floor, e.record_isolation, e.dispatched), ("container", "process",
                                                                      True))
        self.assertNotIn("minimum_isolation", self.fake.sent())  # checked, never sent
        self.assertEqual(len(s.chain), 0)
        self.session.isolation = "container"
        self.fake.respond = FakeSession("container")
        s2 = self.client.open_session(minimum_isolation="container")
        s2.write_files({"a.txt": "x"})
        self.assertEqual(len(s2.chain), 1)

    # -- read_bytes and download: a whole file, a page at a time ------------------

    def test_read_bytes_pages_until_no_more(self) -> None:
        s = self.open()
        data = bytes(range(256)) * 4 + b"end"
        s.write_files({"big.bin": data, "empty": ""})
        self.assertEqual(s.read_bytes("big.bin", limit=100), data)
        reads = [req for m, req in self.session.calls if m == "ReadFile"]
        self.assertEqual([r.get("offset", 0) for r in reads], list(range(0, 1027, 100)))
        self.assertTrue(all(r["limit"] == 100 for r in reads))
        self.assertEqual(len(s.chain), 1 + 11)
        self.assertEqual(s.read_bytes("big.bin"), data)  # one call: the daemon's most
        self.assertEqual(len(s.chain), 13)
        self.assertEqual(s.read_bytes("empty"), b"")
        self.assertEqual(self.session.calls[-1][1], {"session_id": SESSION_ID, "path": "empty"})
        local = os.path.join(self.tmp.name, "got.bin")
        self.assertEqual(s.download("big.bin", local, limit=512), len(data))
        with open(local, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(len(s.chain), 17)
        verify_chain(s.chain.entries)

    def test_a_page_that_does_not_go_on_is_refused(self) -> None:
        s = self.open()
        s.write_files({"f": b"0123456789"})
        local = os.path.join(self.tmp.name, "f")

        def grows(method: str, req: Dict[str, Any], answer: Dict[str, Any]) -> None:
            if method == "ReadFile" and req.get("offset"):
                self.session.files["f"] += b"more"
                answer["size"] += 4
                answer["more"] = True
        self.session.alter = grows
        with self.assertRaises(errors.FileChangedError) as cm:
            s.read_bytes("f", limit=4)
        self.assertIn("changed while it was read", str(cm.exception))
        self.assertEqual((cm.exception.code, cm.exception.dispatched), ("aborted", False))
        with open(local, "wb") as f:
            f.write(b"old")
        with self.assertRaises(errors.FileChangedError):
            s.download("f", local, limit=4)
        self.assertFalse(os.path.exists(local))  # a failed download leaves no file

        def stalls(method: str, req: Dict[str, Any], answer: Dict[str, Any]) -> None:
            if method == "ReadFile" and req.get("offset"):
                answer.update(content="", length=0, more=True)
        self.session.alter = stalls
        with self.assertRaises(errors.ProtocolError) as pe:
            s.read_bytes("f", limit=4)
        self.assertIn("does not go on", str(pe.exception))
        self.session.alter = None
        self.assertEqual(s.read_bytes("f", limit=4), self.session.files["f"])

    # -- upload: as few WriteFiles calls as the bounds allow ----------------------

    def tree(self, sizes: Dict[str, int]) -> str:
        top = os.path.join(self.tmp.name, "up")
        for rel, n in sizes.items():
            path = os.path.join(top, *rel.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(bytes([len(rel) % 251]) * n)
        return top

    def writes(self) -> List[Dict[str, Any]]:
        return [req for m, req in self.session.calls if m == "WriteFiles"]

    def test_upload_300_small_files_is_two_calls(self) -> None:
        s = self.open()
        top = self.tree({"d%d/f%03d.txt" % (i % 3, i): 10 for i in range(300)})
        os.symlink(os.path.join(top, "d0", "f000.txt"), os.path.join(top, "link.txt"))
        os.symlink(os.path.join(top, "d1"), os.path.join(top, "dirlink"))
        os.mkfifo(os.path.join(top, "fifo"))
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        try:
            sock.bind(os.path.join(top, "sock"))
        except OSError:
            pass  # a path too long for a socket: the FIFO stands for the special files
        os.makedirs(os.path.join(top, "empty"))
        paths = s.upload(top, "in")
        calls = self.writes()
        self.assertEqual([len(c["files"]) for c in calls], [256, 44])
        self.assertEqual(len(paths), 300)
        self.assertEqual(paths, [f["path"] for c in calls for f in c["files"]])
        self.assertEqual(paths[0], "in/up/d0/f000.txt")
        self.assertEqual(sorted(paths), paths)  # walked by name
        self.assertTrue(all("link" not in p and "fifo" not in p and "sock" not in p
                            for p in paths))
        self.assertEqual(len(s.chain), 2)
        listed = s.list_files("in/up", depth=2)
        self.assertEqual(len([e for e in listed if e.type == "file"]), 300)
        self.assertEqual(s.read_bytes("in/up/d2/f299.txt"), bytes([11]) * 10)

    def test_upload_batches_by_bytes(self) -> None:
        s = self.open()
        # the bound is inclusive: two files of 2 MiB are one call of 4 MiB
        top = self.tree({"a": 2 * MIB, "b": 2 * MIB, "c": 1 * MIB})
        s.upload(top)
        self.assertEqual([[f["path"] for f in c["files"]] for c in self.writes()],
                         [["up/a", "up/b"], ["up/c"]])
        self.session.calls.clear()
        os.remove(os.path.join(top, "c"))
        self.tree({"a": 2 * MIB + 1, "b": 2 * MIB + 1, "c": 1 * MIB - 2})  # 5 MiB in all
        s.upload(top, "x/")
        self.assertEqual([[f["path"] for f in c["files"]] for c in self.writes()],
                         [["x/up/a"], ["x/up/b", "x/up/c"]])
        self.session.calls.clear()
        top2 = os.path.join(self.tmp.name, "three")
        os.makedirs(top2)
        for n in "abc":
            with open(os.path.join(top2, n), "wb") as f:
                f.write(b"\x00" * (2 * MIB + 1))
        s.upload(top2)
        self.assertEqual([len(c["files"]) for c in self.writes()], [1, 1, 1])
        self.assertEqual(s.read_bytes("three/c"), b"\x00" * (2 * MIB + 1))
        self.assertEqual(len(s.chain), 2 + 2 + 3 + 1)

    def test_upload_one_file_and_the_bounds(self) -> None:
        s = self.open()
        one = os.path.join(self.tmp.name, "one.bin")
        with open(one, "wb") as f:
            f.write(b"\xff" * 10)
        self.assertEqual(s.upload(one), ["one.bin"])
        self.assertEqual(s.upload(one, "a/b"), ["a/b/one.bin"])
        self.assertEqual(self.writes()[-1]["files"],
                         [{"path": "a/b/one.bin", "content_base64": "/" * 12 + "/w=="}])
        exact = self.tree({"exact": 4 * MIB})
        self.assertEqual(s.upload(exact), ["up/exact"])  # 4 MiB is allowed
        n = len(self.fake.received)
        big = self.tree({"small": 1, "big": 4 * MIB + 1})
        with self.assertRaises(ValueError) as cm:
            s.upload(big)
        self.assertIn("4 MiB", str(cm.exception))
        self.assertIn("big", str(cm.exception))
        long_dir = "d" * 250
        with self.assertRaises(ValueError) as cm:
            s.upload(one, long_dir)
        self.assertIn("256", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            s.upload(os.path.join(self.tmp.name, "nothing"))
        os.mkfifo(os.path.join(self.tmp.name, "fifo"))
        with self.assertRaises(ValueError):
            s.upload(os.path.join(self.tmp.name, "fifo"))
        with self.assertRaises(TypeError):
            s.upload(one, None)  # type: ignore[arg-type]
        self.assertEqual(len(self.fake.received), n)  # nothing sent for any of them
        empty = os.path.join(self.tmp.name, "nothing-in-it")
        os.makedirs(empty)
        self.assertEqual(s.upload(empty), [])
        self.assertEqual(len(self.fake.received), n)

    def test_describe_says_files(self) -> None:
        self.fake.answer(200, {"provider": "docker", "operations": {
            "files": {"supported": True, "max_timeout_ms": 60000}},
            "limits": {"file_read_bytes": 4 * MIB, "file_list_entries": 1000,
                       "session_max_lifetime_s": 86400, "min_memory_mb": 6}})
        d = self.client.describe()
        self.assertTrue(d.operations.files.supported)
        self.assertFalse(d.operations.session.supported)
        self.assertEqual((d.limits.file_read_bytes, d.limits.file_list_entries,
                          d.limits.session_max_lifetime_s, d.limits.min_memory_mb),
                         (4 * MIB, 1000, 86400, 6))
        for bad in ({"operations": {"files": {"supported": "yes"}}},
                    {"operations": {"files": []}},
                    {"limits": {"file_read_bytes": -1}},
                    {"limits": {"file_list_entries": "1000"}},
                    {"limits": {"session_max_lifetime_s": 2 ** 32}}):
            with self.subTest(bad):
                self.fake.answer(200, bad)
                with self.assertRaises(errors.ProtocolError):
                    self.client.describe()


class AsyncFileCalls(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.fake = FakeDaemon().__enter__()
        self.addCleanup(self.fake.__exit__)
        self.session = FakeSession()
        self.fake.respond = self.session
        self.client = plimsoll.AsyncClient(self.fake.url, "plk_test")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.top = os.path.join(self.tmp.name, "tree")  # made here, not on the loop
        for i in range(300):
            os.makedirs(os.path.join(self.top, "d%d" % (i % 2)), exist_ok=True)
            with open(os.path.join(self.top, "d%d" % (i % 2), "%03d" % i), "w") as f:
                f.write(str(i))
        with open(os.path.join(self.tmp.name, "big"), "wb") as f:
            f.write(b"\x00" * (4 * MIB + 1))

    async def test_the_calls_send_what_the_synchronous_ones_send(self) -> None:
        other = FakeDaemon().__enter__()
        self.addCleanup(other.__exit__)
        other.respond = FakeSession()
        s = plimsoll.Client(other.url, "plk_test").open_session()
        a = await self.client.open_session()
        pairs = [(lambda: s.write_files({"a.txt": "x", "b": b"\x00"}),
                  lambda: a.write_files({"a.txt": "x", "b": b"\x00"})),
                 (lambda: s.read_file("a.txt", 0, 10), lambda: a.read_file("a.txt", 0, 10)),
                 (lambda: s.list_files("", 3), lambda: a.list_files("", 3))]
        for make_sync, make_async in pairs:
            want = make_sync()
            got = await make_async()
            self.assertEqual(self.fake.received[-1]["body"], other.received[-1]["body"])
            self.assertEqual(type(got), type(want))
            self.assertEqual(got.raw.keys(), want.raw.keys())
        self.assertEqual(len(a.chain), 3)
        r = await self.client.read_file(SESSION_ID, "b")
        self.assertEqual(r.content, b"\x00")
        w = await self.client.write_files(SESSION_ID, [{"path": "c", "content": "y"}])
        self.assertEqual((w.files, w.bytes), (1, 1))
        ls = await self.client.list_files(SESSION_ID, depth=2)
        self.assertEqual([e.path for e in ls], ["a.txt", "b", "c"])

    async def test_the_conveniences(self) -> None:
        s = await self.client.open_session()
        await s.write_text("t.txt", "hi\n")
        await s.write_bytes("b.bin", b"\x00" * 1000)
        self.assertEqual(await s.read_text("t.txt"), "hi\n")
        self.assertEqual(await s.read_bytes("b.bin", limit=300), b"\x00" * 1000)
        local = os.path.join(self.tmp.name, "b.bin")
        self.assertEqual(await s.download("b.bin", local, limit=999), 1000)
        with open(local, "rb") as f:
            self.assertEqual(f.read(), b"\x00" * 1000)
        paths = await s.upload(self.top, "up")
        self.assertEqual(len(paths), 300)
        writes = [req for m, req in self.session.calls if m == "WriteFiles"]
        self.assertEqual([len(w["files"]) for w in writes[2:]], [256, 44])
        n = len(self.fake.received)
        with self.assertRaises(ValueError):
            await s.upload(os.path.join(self.tmp.name, "big"))
        self.assertEqual(len(self.fake.received), n)
        self.session.alter = lambda m, req, answer: answer.update(size=answer["size"] + 1,
                                                                  more=True) \
            if m == "ReadFile" and req.get("offset") else None
        with self.assertRaises(errors.FileChangedError):
            await s.download("b.bin", local, limit=500)
        self.assertFalse(os.path.exists(local))
        self.session.alter = None
        with self.assertRaises(errors.NotFoundError):
            await s.read_bytes("nothing")
        verify_chain(s.chain.entries)
        self.assertEqual(len(s.chain), 2 + 1 + 4 + 3 + 2 + 1)

    async def test_malformed_and_refused(self) -> None:
        self.fake.respond = None
        for name, what, answer in MALFORMED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                with self.assertRaises(errors.ProtocolError):
                    await aio_call(self.client, what)
        client = plimsoll.AsyncClient(self.fake.url, "k", verify_records=False)
        for name, what, answer in ALLOWED:
            with self.subTest(name):
                self.fake.answer(200, answer)
                await aio_call(client, what)
        n = len(self.fake.received)
        with self.assertRaises(ValueError):
            await self.client.write_files(SESSION_ID, {})
        with self.assertRaises(TypeError):
            await self.client.read_file(SESSION_ID, None)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            await self.client.list_files(SESSION_ID, "", 17)
        self.assertEqual(len(self.fake.received), n)


if __name__ == "__main__":
    unittest.main()
