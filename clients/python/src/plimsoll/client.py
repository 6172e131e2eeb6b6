# SPDX-License-Identifier: Apache-2.0
"""The synchronous client: Describe, Run, sessions, the tier re-check,
record checks and retries (docs/clients.md). What it sends and how it reads
the answers is ``_calls``, shared with the asyncio client (``aio``)."""
from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Callable, List, Mapping, Optional, Sequence, Type

from . import _calls, _transport
from ._answer import DEFAULT_MAX_ANSWER_BYTES
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, OutputChunk
from ._calls import (RETRYABLE, TIERS, Call, ClientBase, Files, LocalPath, Pages, RetryPolicy,
                     Steps, cell_object, check_floor, check_route, check_session_id, check_tier,
                     local_file, module_request, project_request, reconnectable,
                     snippet_request, tier_rank, upload_batches, upload_plan, with_floor,
                     without_nulls)
from .errors import NotFoundError, PlimsollError, SessionEndedError
from .record import Chain
from .results import (Description, ListFilesResult, ReadFileResult, RunResult, SessionInfo,
                      WriteFilesResult)

#: What ``run_stream`` and ``run_cell_stream`` call with each output chunk.
OnOutput = Callable[[OutputChunk], Any]

__all__ = ["Client", "Session", "OnOutput", "RetryPolicy", "TIERS", "tier_rank", "check_tier",
           "snippet_request", "project_request", "module_request", "cell_object",
           "without_nulls", "check_session_id", "RETRYABLE"]


class Client(ClientBase):
    """A plimsoll daemon's client.

    ``url`` is ``http://host:port`` (a path prefix is kept), ``https://…`` or
    ``unix:/path``; not given, it is ``PLIMSOLL_URL``, else
    ``http://127.0.0.1:7475``. ``api_key`` not given is ``PLIMSOLL_KEY``,
    else the first line of the file ``PLIMSOLL_KEY_FILE``, else none. Both
    are trimmed of surrounding whitespace; a key file that cannot be read,
    or a key that cannot be sent (a line break inside it, …), is a
    :class:`~plimsoll.errors.ConfigurationError`, raised here, which never
    shows the key (nor does the client's ``repr``). ``timeout`` bounds each HTTP exchange in seconds, from
    the request to the decoded answer, however slowly it comes;
    ``retry`` is an opt-in :class:`RetryPolicy`; ``verify_records`` checks
    the record of every run answer (checks 1-4 and 6 for ``run``; a session
    object always keeps and checks its chain); ``max_answer_bytes`` caps
    one answer's body (a longer one is a :class:`ProtocolError`; default
    :data:`DEFAULT_MAX_ANSWER_BYTES`, 256 MiB), a stream's included;
    ``max_message_bytes`` caps one message of a stream (``run_stream``,
    ``run_cell_stream``; default :data:`DEFAULT_MAX_MESSAGE_BYTES`,
    16 MiB). A client keeps no state
    between calls and may be shared between threads.

    Use it as a context manager (``with Client() as c:``) to close it on
    exit (:meth:`close`).
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 120.0, retry: Optional[RetryPolicy] = None,
                 verify_records: bool = True,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(url, api_key, timeout, retry, verify_records, max_answer_bytes,
                         max_message_bytes)
        self._sleep: Callable[[float], None] = time.sleep

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def close(self) -> None:
        """Close the client; a call after it raises ``RuntimeError`` before
        anything is sent. Each call opens and closes its own connection, so
        no connection outlives a call and there is nothing else to release.
        The sessions it opened stay open on the daemon (close them, or let
        them end; another client may :meth:`connect_session` to them). A
        second close does nothing."""
        self.closed = True

    # -- the wire ---------------------------------------------------------

    def _do(self, call: Call) -> Any:
        """One call, retried per the policy; what its finish makes of the
        200 answer."""
        self._check_open()
        body = call.body()
        n = 0
        while True:
            deadline = self._deadline()
            status, ctype, answer = _transport.exchange(self._endpoint, self._api_key,
                                                        call.method, body, deadline,
                                                        self.max_answer_bytes,
                                                        route=call.route)
            try:
                obj = self._answer(call, status, ctype, answer, deadline)
            except PlimsollError as err:
                delay = _calls.retry_delay(self.retry, err, n)
                if delay is None:
                    raise
                self._sleep(delay)
                n += 1
                continue
            return call.finish(obj)

    def _do_stream(self, call: Call, on_output: Optional[OnOutput]) -> Any:
        """One streaming call, retried per the policy while no chunk has
        been given to ``on_output``; what its finish makes of the result."""
        self._check_open()
        body = call.stream_body()
        n = 0
        while True:
            deadline = self._deadline()
            decoder = self._decoder(call, deadline)

            def piece(data: bytes) -> None:
                for chunk in decoder.feed(data):
                    if on_output is not None:
                        try:
                            on_output(chunk)
                        except BaseException as e:
                            raise _transport.Passthrough(e) from e

            try:
                status, ctype, answer = _transport.exchange(
                    self._endpoint, self._api_key, call.method, body, deadline,
                    self.max_answer_bytes, piece, call.route)
                obj = self._stream_answer(call, status, ctype, answer, decoder, deadline)
            except _transport.Passthrough as p:
                raise p.error from None
            except PlimsollError as err:
                delay = _calls.retry_delay(self.retry, err, n) if not decoder.chunks else None
                if delay is None:
                    raise
                self._sleep(delay)
                n += 1
                continue
            return call.finish(obj)

    # -- the API ----------------------------------------------------------

    def describe(self) -> Description:
        """What this daemon is: provider, tier, readiness, kinds, limits."""
        return self._do(self._describe_call())

    def run(self, request: Mapping[str, Any]) -> RunResult:
        """Run a RunRequest given as a dict (proto field names, no nulls)."""
        return self._do(self._run_call(request))

    def run_snippet(self, code: str, language: str = "javascript",
                    stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                    timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a snippet of ``language`` (``javascript`` or ``python``)."""
        return self.run(snippet_request(code, language, stdin,
                                        minimum_isolation=minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile, collect=collect))

    def run_project(self, files: Optional[Files], steps: Steps, *,
                    minimum_isolation: Optional[str] = None, timeout_ms: Optional[int] = None,
                    memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a project: files, then steps in order (stop on the first failure)."""
        return self.run(project_request(files, steps, minimum_isolation=minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile, collect=collect))

    def run_module(self, wasm: bytes, args: Optional[Sequence[str]] = None,
                   stdin: Optional[str] = None, *, minimum_isolation: Optional[str] = None,
                   timeout_ms: Optional[int] = None,
                   memory_mb: Optional[int] = None) -> RunResult:
        """Run a WASI preview 1 module (its bytes)."""
        return self.run(module_request(wasm, args, stdin, minimum_isolation=minimum_isolation,
                                       timeout_ms=timeout_ms, memory_mb=memory_mb))

    def run_stream(self, request: Mapping[str, Any],
                   on_output: Optional[OnOutput] = None) -> RunResult:
        """RunStream: run a RunRequest dict (as :meth:`run`) and call
        ``on_output`` with each :class:`OutputChunk` as the guest writes it;
        return the result, checked as :meth:`run` checks it (tier re-check,
        record). Joined in order, the chunks are the result's output byte
        for byte (a project's: its step's); the client checks it. A kind
        that does not stream (``describe().operations``, ``streams``) gives
        no chunk, only the result. What ``on_output`` raises ends the call
        (the connection is closed) and is raised as it is; the code may
        have run. ``timeout`` bounds the whole stream, ``on_output``'s time
        included.
        """
        return self._do_stream(self._run_stream_call(request), on_output)

    def open_session(self, languages: Optional[Sequence[str]] = None,
                     minimum_isolation: Optional[str] = None) -> "Session":
        """Open a session and return the object that keeps its chain.

        ``languages`` is a hint of the cell languages to start. OpenSession
        itself carries no floor: ``minimum_isolation`` is sent with every
        run in the session and checked by the client on every answer,
        cells included. The session's ``route`` is the answer's: every
        later call of the object sends it (README.md, "Sessions behind a
        proxy (fleets)").
        """
        sid, route = self._do(self._open_session_call(languages, minimum_isolation))
        return Session(self, sid, minimum_isolation, route=route)

    def run_in_session(self, session_id: str, run: Mapping[str, Any],
                       chain: Optional[Chain] = None, *,
                       route: Optional[str] = None) -> RunResult:
        """RunInSession with a RunRequest dict (a snippet or a project).

        With ``chain`` the answer is appended to it (all six checks);
        without, its record is checked alone (no ``previous_digest``) when
        ``verify_records`` is on. ``route`` (every call by session id takes
        it) is the session's daemon behind a proxy, sent as
        ``Plimsoll-Route``: 1 to 63 of ``[A-Za-z0-9._-]`` (else
        ``ValueError``, nothing sent); None or ``""``: none. A daemon
        reached that is not the route's refuses with
        :class:`~plimsoll.errors.WrongRouteError`.
        """
        return self._do(self._run_in_session_call(session_id, run, chain).on_route(route))

    def run_cell(self, session_id: str, cell: Mapping[str, Any],
                 timeout_ms: Optional[int] = None, chain: Optional[Chain] = None,
                 minimum_isolation: Optional[str] = None, *,
                 route: Optional[str] = None) -> RunResult:
        """RunCell with a Cell dict ``{"language", "code"[, "files"]}``.

        ``minimum_isolation`` is not sent (a cell has no floor): the client
        checks the answer against it. ``chain`` and ``route`` as in
        :meth:`run_in_session`.
        """
        return self._do(self._run_cell_call(session_id, cell, timeout_ms, chain,
                                            minimum_isolation).on_route(route))

    def run_cell_stream(self, session_id: str, cell: Mapping[str, Any],
                        on_output: Optional[OnOutput] = None,
                        timeout_ms: Optional[int] = None, chain: Optional[Chain] = None,
                        minimum_isolation: Optional[str] = None, *,
                        route: Optional[str] = None) -> RunResult:
        """RunCellStream: :meth:`run_cell` with its output as it comes, as
        :meth:`run_stream` gives it."""
        return self._do_stream(self._run_cell_stream_call(session_id, cell, timeout_ms, chain,
                                                          minimum_isolation).on_route(route),
                               on_output)

    def close_session(self, session_id: str, *, route: Optional[str] = None) -> None:
        """Close a session: its container and files are removed. ``route``
        as in :meth:`run_in_session`."""
        self._do(self._close_session_call(session_id).on_route(route))

    def list_sessions(self) -> List[SessionInfo]:
        """ListSessions: this caller's sessions, open and recently ended,
        oldest first; never another caller's."""
        return self._do(self._list_sessions_call())

    def get_session(self, session_id: str, *, route: Optional[str] = None) -> SessionInfo:
        """GetSession: one of this caller's sessions as it is now (it waits
        for no call). Another caller's id is a
        :class:`~plimsoll.errors.NotFoundError`, as an unknown one is.
        ``route`` as in :meth:`run_in_session`."""
        return self._do(self._get_session_call(session_id).on_route(route))

    def extend_session(self, session_id: str, ends_in_s: int, *,
                       route: Optional[str] = None) -> SessionInfo:
        """ExtendSession: the session now ends ``ends_in_s`` seconds (an int
        from 1) from this call, sooner or later than before; the answer
        has its new ``lifetime_deadline``. Past the daemon's
        ``SANDBOX_SESSION_MAX_LIFETIME`` from the session's open (its
        ``max_lifetime_s``) it is refused with
        :class:`~plimsoll.errors.InvalidRequestError`; an ended session
        with :class:`~plimsoll.errors.SessionEndedError`. ``route`` as in
        :meth:`run_in_session`."""
        return self._do(self._extend_session_call(session_id, ends_in_s).on_route(route))

    def write_files(self, session_id: str, files: Files, chain: Optional[Chain] = None,
                    minimum_isolation: Optional[str] = None, *,
                    route: Optional[str] = None) -> WriteFilesResult:
        """WriteFiles: ``files`` (a ``{path: str or bytes}`` dict or File
        dicts, as :meth:`run_project` takes them; 1 to 256 files, 4 MiB in
        all) written into the session's work directory, a file there
        replaced, the directories on the way made. ``chain`` and
        ``minimum_isolation`` (checked against the record's tier, not sent)
        as in :meth:`run_cell`: without a chain the record is checked
        alone. :meth:`Session.write_files` is the call with the session's
        chain. ``route`` as in :meth:`run_in_session`."""
        return self._do(self._write_files_call(session_id, files, chain,
                                               minimum_isolation).on_route(route))

    def read_file(self, session_id: str, path: str, offset: int = 0,
                  limit: Optional[int] = None, chain: Optional[Chain] = None,
                  minimum_isolation: Optional[str] = None, *,
                  route: Optional[str] = None) -> ReadFileResult:
        """ReadFile: at most ``limit`` bytes (None or 0: the daemon's
        ``limits.file_read_bytes``, also the most) of the regular file
        ``path`` from ``offset``. A missing file is a
        :class:`~plimsoll.errors.NotFoundError`; a symlink on the way, a
        directory or a special file an
        :class:`~plimsoll.errors.InvalidRequestError`. ``chain`` and
        ``minimum_isolation`` (and ``route``) as in :meth:`write_files`."""
        return self._do(self._read_file_call(session_id, path, offset, limit, chain,
                                             minimum_isolation).on_route(route))

    def list_files(self, session_id: str, path: str = "", depth: int = 1,
                   chain: Optional[Chain] = None,
                   minimum_isolation: Optional[str] = None, *,
                   route: Optional[str] = None) -> ListFilesResult:
        """ListFiles: the entries of the directory ``path`` (``""``: the work
        directory) and, to ``depth`` levels (1 to 16; 0 is 1), of the
        directories in it; symlinks listed, never followed. ``chain`` and
        ``minimum_isolation`` (and ``route``) as in :meth:`write_files`."""
        return self._do(self._list_files_call(session_id, path, depth, chain,
                                              minimum_isolation).on_route(route))

    def connect_session(self, session_id: str, minimum_isolation: Optional[str] = None, *,
                        route: Optional[str] = None) -> "Session":
        """A :class:`Session` for a session opened before (by this client,
        another, another process): GetSession, then the object whose chain
        starts at the answer's ``previous_digest``, so every later call is
        checked against the chain as if this object had made the earlier
        ones. An ended session is the
        :class:`~plimsoll.errors.SessionEndedError` (``ended_reason``) a
        call in it would get; another caller's is a
        :class:`~plimsoll.errors.NotFoundError`.

        The daemon keeps no floor for a session: pass ``minimum_isolation``
        again to have it sent and checked as :meth:`open_session` does. A
        call made elsewhere in the session after this one (another
        process's) fails this object's next answer with
        ``ChainError(broken="previous_digest")``, as it should.

        Behind a proxy, ``route`` is the session's daemon (the ``route`` of
        the object that opened it, or of its :class:`SessionInfo`):
        GetSession and every call of the object send it, and a session
        whose daemon is out of reach is a
        :class:`~plimsoll.errors.WrongRouteError`. Without it, the object
        takes the route GetSession answers.
        """
        check_floor(minimum_isolation)
        route = check_route(route)
        info = reconnectable(self.get_session(session_id, route=route))
        return Session(self, session_id, minimum_isolation, previous=info.previous_digest,
                       route=route or info.route)


class Session:
    """An open session: the calls made through it are checked against its
    chain (``chain``), whose head advances only when every check holds.
    :meth:`Client.open_session` makes one, and :meth:`Client.connect_session`
    one for a session opened before (its chain starts at the daemon's
    ``previous_digest``: ``previous``). Every call of the object is sent
    on its :attr:`route`.

    After a :class:`~plimsoll.record.ChainError` or an
    :class:`~plimsoll.errors.IsolationEvidenceMismatchError` the session
    cannot be trusted: open a new one. Calls on one object are serialized
    so that the chain keeps the order the daemon saw. Use it as a context
    manager to close it.
    """

    def __init__(self, client: Client, session_id: str,
                 minimum_isolation: Optional[str] = None, previous: str = "",
                 route: Optional[str] = None) -> None:
        self.client = client
        self.session_id = session_id
        self.minimum_isolation = minimum_isolation
        self.chain = Chain(previous)
        self.closed = False
        self._route = check_route(route) or ""
        self._lock = threading.Lock()

    @property
    def route(self) -> str:
        """The route of the daemon that holds the session (its
        ``PLIMSOLL_INSTANCE``), sent as ``Plimsoll-Route`` with every call
        of this object so that a proxy in front of many daemons sends it
        there; ``""`` (a daemon older than routes): none is sent."""
        return self._route

    def __repr__(self) -> str:
        return "Session(%r, route=%r, entries=%d, closed=%r)" % (
            self.session_id, self._route, len(self.chain), self.closed)

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
        run = with_floor(run, self.minimum_isolation)
        with self._lock:
            return self.client.run_in_session(self.session_id, run, chain=self.chain,
                                              route=self._route)

    def run_snippet(self, code: str, language: str = "javascript", stdin: Optional[str] = None,
                    *, timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a snippet in the session's container (files persist; no
        interpreter state does)."""
        return self.run(snippet_request(code, language, stdin,
                                        minimum_isolation=self.minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile, collect=collect))

    def run_project(self, files: Optional[Files], steps: Steps, *,
                    timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                    grant_profile: Optional[str] = None,
                    collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a project's steps in the session's container."""
        return self.run(project_request(files, steps, minimum_isolation=self.minimum_isolation,
                                        timeout_ms=timeout_ms, memory_mb=memory_mb,
                                        grant_profile=grant_profile, collect=collect))

    def cell(self, code: str, language: str, files: Optional[Files] = None,
             timeout_ms: Optional[int] = None) -> RunResult:
        """Run a cell in the session's kept interpreter of ``language``."""
        with self._lock:
            return self.client.run_cell(self.session_id, cell_object(code, language, files),
                                        timeout_ms, chain=self.chain,
                                        minimum_isolation=self.minimum_isolation,
                                        route=self._route)

    def cell_stream(self, code: str, language: str, on_output: Optional[OnOutput] = None,
                    files: Optional[Files] = None,
                    timeout_ms: Optional[int] = None) -> RunResult:
        """:meth:`cell` with its output as it comes (RunCellStream, as
        :meth:`Client.run_stream`); the answer extends the chain alike."""
        with self._lock:
            return self.client.run_cell_stream(self.session_id,
                                               cell_object(code, language, files), on_output,
                                               timeout_ms, chain=self.chain,
                                               minimum_isolation=self.minimum_isolation,
                                               route=self._route)

    # -- its files ---------------------------------------------------------

    def write_files(self, files: Files) -> WriteFilesResult:
        """WriteFiles: ``files``, a ``{path: str or bytes}`` dict (or File
        dicts), written into the work directory (1 to 256 files, 4 MiB in
        all; a file there is replaced, directories on the way made). The
        answer's record extends the chain, as a cell's does."""
        with self._lock:
            return self.client.write_files(self.session_id, files, chain=self.chain,
                                           minimum_isolation=self.minimum_isolation,
                                           route=self._route)

    def write_text(self, path: str, text: str) -> WriteFilesResult:
        """``write_files({path: text})``: one file of text (UTF-8)."""
        if not isinstance(text, str):
            raise TypeError("plimsoll: text must be a str, not %s" % type(text).__name__)
        return self.write_files({path: text})

    def write_bytes(self, path: str, data: bytes) -> WriteFilesResult:
        """``write_files({path: data})``: one file of bytes."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("plimsoll: data must be bytes, not %s" % type(data).__name__)
        return self.write_files({path: bytes(data)})

    def read_file(self, path: str, offset: int = 0,
                  limit: Optional[int] = None) -> ReadFileResult:
        """ReadFile: one call, at most ``limit`` bytes (None: the daemon's
        ``file_read_bytes``) of ``path`` from ``offset``; ``content`` is
        the exact bytes, ``more`` whether bytes remain. The record extends
        the chain."""
        with self._lock:
            return self.client.read_file(self.session_id, path, offset, limit,
                                         chain=self.chain,
                                         minimum_isolation=self.minimum_isolation,
                                         route=self._route)

    def list_files(self, path: str = "", depth: int = 1) -> ListFilesResult:
        """ListFiles: the entries (:class:`~plimsoll.FileEntry`) of the
        directory ``path`` (``""``: the work directory), ``depth`` levels
        down (1 to 16), depth first; ``truncated`` when the daemon's
        ``file_list_entries`` left some out. The record extends the chain."""
        with self._lock:
            return self.client.list_files(self.session_id, path, depth, chain=self.chain,
                                          minimum_isolation=self.minimum_isolation,
                                          route=self._route)

    def read_bytes(self, path: str, *, limit: Optional[int] = None) -> bytes:
        """The whole file ``path``: ReadFile from offset 0 until ``more``
        is false, ``limit`` bytes a call at most (None: the daemon's most).
        A page that is not the next is a
        :class:`~plimsoll.errors.ProtocolError`; a file whose size changes
        between pages a :class:`~plimsoll.errors.FileChangedError`."""
        parts: List[bytes] = []
        pages = Pages(path, parts.append)
        while not pages.add(self.read_file(path, pages.offset, limit)):
            pass
        return b"".join(parts)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """:meth:`read_bytes`, decoded."""
        return self.read_bytes(path).decode(encoding)

    def download(self, path: str, local_path: LocalPath, *,
                 limit: Optional[int] = None) -> int:
        """The whole file ``path`` written to the local file ``local_path``
        (replaced), read as :meth:`read_bytes` reads it, a page at a time;
        its size is returned. When a call fails the local file is
        removed."""
        with local_file(local_path) as f:
            pages = Pages(path, f.write)
            while not pages.add(self.read_file(path, pages.offset, limit)):
                pass
        return pages.offset

    def upload(self, local_path: LocalPath, remote_dir: str = "") -> List[str]:
        """The local file ``local_path``, or every file of the local
        directory ``local_path`` and its subdirectories, written into
        ``remote_dir`` (``""``: the work directory) under its name: a
        directory ``d`` becomes ``remote_dir/d/…``. Symlinks (to files or
        directories) and special files (FIFOs, sockets, devices) in a
        directory are skipped, and empty directories are not made.

        As few WriteFiles calls as the bounds allow (256 files and 4 MiB a
        call), each extending the chain; a file over 4 MiB, which no
        WriteFiles call can take, is a ``ValueError`` before anything is
        sent, as is a path in the session past 256 bytes. A refusal of a
        later call leaves the earlier calls' files written. Returns the
        paths written in the session, in order."""
        plan = upload_plan(local_path, remote_dir)
        for batch in upload_batches(plan):
            self.write_files(batch)
        return [remote for _, remote in plan]

    def info(self) -> SessionInfo:
        """GetSession: the session as the daemon holds it now. It waits
        neither for the daemon's calls nor for this object's."""
        return self.client.get_session(self.session_id, route=self._route)

    def extend(self, ends_in_s: int) -> SessionInfo:
        """ExtendSession: the session now ends ``ends_in_s`` seconds from
        now, as :meth:`Client.extend_session` says (shorter is allowed)."""
        return self.client.extend_session(self.session_id, ends_in_s, route=self._route)

    def close(self) -> None:
        """Close the session (once; a second close does nothing)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self.client.close_session(self.session_id, route=self._route)
