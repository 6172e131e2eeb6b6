# SPDX-License-Identifier: Apache-2.0
"""The asyncio client: the synchronous client's methods and semantics
(docs/clients.md), as coroutines over asyncio streams.

    import asyncio, plimsoll
    async def main():
        c = plimsoll.AsyncClient()   # PLIMSOLL_URL, PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
        runs = [c.run_snippet("console.log(%d)" % i) for i in range(4)]
        for r in await asyncio.gather(*runs):
            print(r.exit_code, r.stdout, r.record.digest)
    asyncio.run(main())

What is sent and how each answer is read (the typed errors, the tier
re-check, the record and chain checks, the retry policy) is ``_calls``,
shared with :class:`plimsoll.Client`; only the I/O differs.
"""
from __future__ import annotations

import asyncio
import inspect
from types import TracebackType
from typing import Any, Awaitable, Callable, List, Mapping, Optional, Sequence, Type

from . import _aio_transport, _calls, _transport
from ._answer import DEFAULT_MAX_ANSWER_BYTES
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, OutputChunk
from ._calls import (Call, ClientBase, Files, LocalPath, Pages, RetryPolicy, Steps, cell_object,
                     check_floor, check_route, local_file, module_request, project_request,
                     reconnectable,
                     snippet_request, upload_batches, upload_plan, with_floor)
from .errors import NotFoundError, PlimsollError, SessionEndedError
from .record import Chain
from .results import (Description, ListFilesResult, ReadFileResult, RunResult, SessionInfo,
                      WriteFilesResult)

#: What ``run_stream`` and ``run_cell_stream`` call with each output chunk:
#: a function or a coroutine function (awaited before the stream is read
#: on).
AsyncOnOutput = Callable[[OutputChunk], Any]

__all__ = ["AsyncClient", "AsyncSession", "AsyncOnOutput"]


class AsyncClient(ClientBase):
    """A plimsoll daemon's client for asyncio.

    The arguments are :class:`plimsoll.Client`'s: ``url`` is
    ``http://host:port`` (a path prefix is kept), ``https://…`` or
    ``unix:/path``, and it and ``api_key`` come from the environment when
    not given (``PLIMSOLL_URL``, ``PLIMSOLL_KEY``, ``PLIMSOLL_KEY_FILE``,
    as :class:`plimsoll.Client` says); ``timeout`` bounds each HTTP exchange in seconds, from
    the request to the decoded answer; ``retry`` is an opt-in
    :class:`RetryPolicy` (its sleeps are ``asyncio.sleep``);
    ``verify_records`` checks the record of every run answer;
    ``max_answer_bytes`` caps one answer's body, ``max_message_bytes`` one
    message of a stream. Each call opens its own
    connection, so a client keeps no state between calls and any number of
    its calls may run at once (``asyncio.gather``). Cancelling a call
    closes its connection; the code may have run. Use it as an async
    context manager (``async with AsyncClient() as c:``) to close it on
    exit (:meth:`close`).
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 120.0, retry: Optional[RetryPolicy] = None,
                 verify_records: bool = True,
                 max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        super().__init__(url, api_key, timeout, retry, verify_records, max_answer_bytes,
                         max_message_bytes)
        self._sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the client, as :meth:`plimsoll.Client.close`: a call after
        it raises ``RuntimeError`` before anything is sent. No connection
        outlives its call (a call still running keeps its own until it
        ends); the sessions it opened stay open on the daemon. A second
        close does nothing."""
        self.closed = True

    async def _do(self, call: Call) -> Any:
        """One call, retried per the policy; what its finish makes of the
        200 answer."""
        self._check_open()
        body = call.body()
        n = 0
        while True:
            deadline = self._deadline()
            status, ctype, answer = await _aio_transport.exchange(
                self._endpoint, self._api_key, call.method, body, deadline,
                self.max_answer_bytes, route=call.route)
            try:
                obj = self._answer(call, status, ctype, answer, deadline)
            except PlimsollError as err:
                delay = _calls.retry_delay(self.retry, err, n)
                if delay is None:
                    raise
                await self._sleep(delay)
                n += 1
                continue
            return call.finish(obj)

    async def _do_stream(self, call: Call, on_output: Optional[AsyncOnOutput]) -> Any:
        """One streaming call, retried per the policy while no chunk has
        been given to ``on_output``; what its finish makes of the result."""
        self._check_open()
        body = call.stream_body()
        n = 0
        while True:
            deadline = self._deadline()
            decoder = self._decoder(call, deadline)

            async def piece(data: bytes) -> None:
                for chunk in decoder.feed(data):
                    if on_output is not None:
                        try:
                            r = on_output(chunk)
                            if inspect.isawaitable(r):
                                await r
                        except asyncio.CancelledError:
                            raise  # the call's deadline, or the caller's cancelling
                        except BaseException as e:
                            raise _transport.Passthrough(e) from e

            try:
                status, ctype, answer = await _aio_transport.exchange(
                    self._endpoint, self._api_key, call.method, body, deadline,
                    self.max_answer_bytes, piece, call.route)
                obj = self._stream_answer(call, status, ctype, answer, decoder, deadline)
            except _transport.Passthrough as p:
                raise p.error from None
            except PlimsollError as err:
                delay = _calls.retry_delay(self.retry, err, n) if not decoder.chunks else None
                if delay is None:
                    raise
                await self._sleep(delay)
                n += 1
                continue
            return call.finish(obj)

    # -- the API ----------------------------------------------------------

    async def describe(self) -> Description:
        """What this daemon is: provider, tier, readiness, kinds, limits."""
        return await self._do(self._describe_call())

    async def run(self, request: Mapping[str, Any]) -> RunResult:
        """Run a RunRequest given as a dict (proto field names, no nulls)."""
        return await self._do(self._run_call(request))

    async def run_snippet(self, code: str, language: str = "javascript",
                          stdin: Optional[str] = None, *,
                          minimum_isolation: Optional[str] = None,
                          timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                          grant_profile: Optional[str] = None,
                          collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a snippet of ``language`` (``javascript`` or ``python``)."""
        return await self.run(snippet_request(code, language, stdin,
                                              minimum_isolation=minimum_isolation,
                                              timeout_ms=timeout_ms, memory_mb=memory_mb,
                                              grant_profile=grant_profile, collect=collect))

    async def run_project(self, files: Optional[Files], steps: Steps, *,
                          minimum_isolation: Optional[str] = None,
                          timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                          grant_profile: Optional[str] = None,
                          collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a project: files, then steps in order (stop on the first failure)."""
        return await self.run(project_request(files, steps,
                                              minimum_isolation=minimum_isolation,
                                              timeout_ms=timeout_ms, memory_mb=memory_mb,
                                              grant_profile=grant_profile, collect=collect))

    async def run_module(self, wasm: bytes, args: Optional[Sequence[str]] = None,
                         stdin: Optional[str] = None, *,
                         minimum_isolation: Optional[str] = None,
                         timeout_ms: Optional[int] = None,
                         memory_mb: Optional[int] = None) -> RunResult:
        """Run a WASI preview 1 module (its bytes)."""
        return await self.run(module_request(wasm, args, stdin,
                                             minimum_isolation=minimum_isolation,
                                             timeout_ms=timeout_ms, memory_mb=memory_mb))

    async def run_stream(self, request: Mapping[str, Any],
                         on_output: Optional[AsyncOnOutput] = None) -> RunResult:
        """RunStream, as :meth:`plimsoll.Client.run_stream`: ``on_output``
        (a function or a coroutine function) gets each
        :class:`~plimsoll.OutputChunk` as it comes; the result is returned,
        checked as :meth:`run` checks it."""
        return await self._do_stream(self._run_stream_call(request), on_output)

    async def open_session(self, languages: Optional[Sequence[str]] = None,
                           minimum_isolation: Optional[str] = None) -> "AsyncSession":
        """Open a session and return the object that keeps its chain (as
        :meth:`plimsoll.Client.open_session`, with the answer's ``route``)."""
        sid, route = await self._do(self._open_session_call(languages, minimum_isolation))
        return AsyncSession(self, sid, minimum_isolation, route=route)

    async def run_in_session(self, session_id: str, run: Mapping[str, Any],
                             chain: Optional[Chain] = None, *,
                             route: Optional[str] = None) -> RunResult:
        """RunInSession with a RunRequest dict; with ``chain`` the answer is
        appended to it, without, its record is checked alone. ``route``
        (every call by session id takes it): the session's daemon behind a
        proxy, as :meth:`plimsoll.Client.run_in_session` says."""
        return await self._do(self._run_in_session_call(session_id, run, chain)
                              .on_route(route))

    async def run_cell(self, session_id: str, cell: Mapping[str, Any],
                       timeout_ms: Optional[int] = None, chain: Optional[Chain] = None,
                       minimum_isolation: Optional[str] = None, *,
                       route: Optional[str] = None) -> RunResult:
        """RunCell with a Cell dict ``{"language", "code"[, "files"]}``;
        ``minimum_isolation`` is checked, not sent."""
        return await self._do(self._run_cell_call(session_id, cell, timeout_ms, chain,
                                                  minimum_isolation).on_route(route))

    async def run_cell_stream(self, session_id: str, cell: Mapping[str, Any],
                              on_output: Optional[AsyncOnOutput] = None,
                              timeout_ms: Optional[int] = None,
                              chain: Optional[Chain] = None,
                              minimum_isolation: Optional[str] = None, *,
                              route: Optional[str] = None) -> RunResult:
        """RunCellStream: :meth:`run_cell` with its output as it comes."""
        return await self._do_stream(
            self._run_cell_stream_call(session_id, cell, timeout_ms, chain, minimum_isolation)
            .on_route(route), on_output)

    async def close_session(self, session_id: str, *, route: Optional[str] = None) -> None:
        """Close a session: its container and files are removed."""
        await self._do(self._close_session_call(session_id).on_route(route))

    async def list_sessions(self) -> List[SessionInfo]:
        """ListSessions: this caller's sessions, open and recently ended,
        oldest first (as :meth:`plimsoll.Client.list_sessions`)."""
        return await self._do(self._list_sessions_call())

    async def get_session(self, session_id: str, *,
                          route: Optional[str] = None) -> SessionInfo:
        """GetSession: one of this caller's sessions as it is now (as
        :meth:`plimsoll.Client.get_session`)."""
        return await self._do(self._get_session_call(session_id).on_route(route))

    async def extend_session(self, session_id: str, ends_in_s: int, *,
                             route: Optional[str] = None) -> SessionInfo:
        """ExtendSession: the session now ends ``ends_in_s`` seconds from
        this call (as :meth:`plimsoll.Client.extend_session`)."""
        return await self._do(self._extend_session_call(session_id, ends_in_s)
                              .on_route(route))

    async def write_files(self, session_id: str, files: Files, chain: Optional[Chain] = None,
                          minimum_isolation: Optional[str] = None, *,
                          route: Optional[str] = None) -> WriteFilesResult:
        """WriteFiles (as :meth:`plimsoll.Client.write_files`); with
        ``chain`` the answer is appended to it, without, its record is
        checked alone."""
        return await self._do(self._write_files_call(session_id, files, chain,
                                                     minimum_isolation).on_route(route))

    async def read_file(self, session_id: str, path: str, offset: int = 0,
                        limit: Optional[int] = None, chain: Optional[Chain] = None,
                        minimum_isolation: Optional[str] = None, *,
                        route: Optional[str] = None) -> ReadFileResult:
        """ReadFile: one call (as :meth:`plimsoll.Client.read_file`)."""
        return await self._do(self._read_file_call(session_id, path, offset, limit, chain,
                                                   minimum_isolation).on_route(route))

    async def list_files(self, session_id: str, path: str = "", depth: int = 1,
                         chain: Optional[Chain] = None,
                         minimum_isolation: Optional[str] = None, *,
                         route: Optional[str] = None) -> ListFilesResult:
        """ListFiles (as :meth:`plimsoll.Client.list_files`)."""
        return await self._do(self._list_files_call(session_id, path, depth, chain,
                                                    minimum_isolation).on_route(route))

    async def connect_session(self, session_id: str,
                              minimum_isolation: Optional[str] = None, *,
                              route: Optional[str] = None) -> "AsyncSession":
        """An :class:`AsyncSession` for a session opened before, its chain
        starting at GetSession's ``previous_digest``; an ended session is a
        :class:`~plimsoll.errors.SessionEndedError`; ``route``, the
        session's daemon behind a proxy, else the route GetSession answers
        (as :meth:`plimsoll.Client.connect_session`)."""
        check_floor(minimum_isolation)
        route = check_route(route)
        info = reconnectable(await self.get_session(session_id, route=route))
        return AsyncSession(self, session_id, minimum_isolation, previous=info.previous_digest,
                            route=route or info.route)


class AsyncSession:
    """An open session, as :class:`plimsoll.Session`: its calls are checked
    against its ``chain``, and calls on one object run one at a time, in
    the order they were made, so that the chain keeps the order the daemon
    saw. Use it as an async context manager to close it.
    :meth:`AsyncClient.connect_session` makes one for a session opened
    before (its chain starts at ``previous``). Every call of the object is
    sent on its :attr:`route`.
    """

    def __init__(self, client: AsyncClient, session_id: str,
                 minimum_isolation: Optional[str] = None, previous: str = "",
                 route: Optional[str] = None) -> None:
        self.client = client
        self.session_id = session_id
        self.minimum_isolation = minimum_isolation
        self.chain = Chain(previous)
        self.closed = False
        self._route = check_route(route) or ""
        self._lock = asyncio.Lock()

    @property
    def route(self) -> str:
        """The route of the session's daemon, sent as ``Plimsoll-Route``
        with every call of this object (as :attr:`plimsoll.Session.route`);
        ``""``: none is sent."""
        return self._route

    def __repr__(self) -> str:
        return "AsyncSession(%r, route=%r, entries=%d, closed=%r)" % (
            self.session_id, self._route, len(self.chain), self.closed)

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            await self.close()
        except (SessionEndedError, NotFoundError):
            pass  # it ended on its own: nothing left to close
        except PlimsollError:
            if exc is None:
                raise

    async def run(self, run: Mapping[str, Any]) -> RunResult:
        """RunInSession with a RunRequest dict; the session's floor is added
        when the request sets none."""
        run = with_floor(run, self.minimum_isolation)
        async with self._lock:
            return await self.client.run_in_session(self.session_id, run, chain=self.chain,
                                                    route=self._route)

    async def run_snippet(self, code: str, language: str = "javascript",
                          stdin: Optional[str] = None, *, timeout_ms: Optional[int] = None,
                          memory_mb: Optional[int] = None,
                          grant_profile: Optional[str] = None,
                          collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a snippet in the session's container."""
        return await self.run(snippet_request(code, language, stdin,
                                              minimum_isolation=self.minimum_isolation,
                                              timeout_ms=timeout_ms, memory_mb=memory_mb,
                                              grant_profile=grant_profile, collect=collect))

    async def run_project(self, files: Optional[Files], steps: Steps, *,
                          timeout_ms: Optional[int] = None, memory_mb: Optional[int] = None,
                          grant_profile: Optional[str] = None,
                          collect: Optional[Sequence[str]] = None) -> RunResult:
        """Run a project's steps in the session's container."""
        return await self.run(project_request(files, steps,
                                              minimum_isolation=self.minimum_isolation,
                                              timeout_ms=timeout_ms, memory_mb=memory_mb,
                                              grant_profile=grant_profile, collect=collect))

    async def cell(self, code: str, language: str, files: Optional[Files] = None,
                   timeout_ms: Optional[int] = None) -> RunResult:
        """Run a cell in the session's kept interpreter of ``language``."""
        async with self._lock:
            return await self.client.run_cell(self.session_id,
                                              cell_object(code, language, files), timeout_ms,
                                              chain=self.chain,
                                              minimum_isolation=self.minimum_isolation,
                                              route=self._route)

    async def cell_stream(self, code: str, language: str,
                          on_output: Optional[AsyncOnOutput] = None,
                          files: Optional[Files] = None,
                          timeout_ms: Optional[int] = None) -> RunResult:
        """:meth:`cell` with its output as it comes (RunCellStream)."""
        async with self._lock:
            return await self.client.run_cell_stream(self.session_id,
                                                     cell_object(code, language, files),
                                                     on_output, timeout_ms, chain=self.chain,
                                                     minimum_isolation=self.minimum_isolation,
                                                     route=self._route)

    # -- its files ---------------------------------------------------------

    async def write_files(self, files: Files) -> WriteFilesResult:
        """WriteFiles into the work directory (as
        :meth:`plimsoll.Session.write_files`); the record extends the chain."""
        async with self._lock:
            return await self.client.write_files(self.session_id, files, chain=self.chain,
                                                 minimum_isolation=self.minimum_isolation,
                                                 route=self._route)

    async def write_text(self, path: str, text: str) -> WriteFilesResult:
        """``write_files({path: text})``: one file of text (UTF-8)."""
        if not isinstance(text, str):
            raise TypeError("plimsoll: text must be a str, not %s" % type(text).__name__)
        return await self.write_files({path: text})

    async def write_bytes(self, path: str, data: bytes) -> WriteFilesResult:
        """``write_files({path: data})``: one file of bytes."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("plimsoll: data must be bytes, not %s" % type(data).__name__)
        return await self.write_files({path: bytes(data)})

    async def read_file(self, path: str, offset: int = 0,
                        limit: Optional[int] = None) -> ReadFileResult:
        """ReadFile: one call (as :meth:`plimsoll.Session.read_file`); the
        record extends the chain."""
        async with self._lock:
            return await self.client.read_file(self.session_id, path, offset, limit,
                                               chain=self.chain,
                                               minimum_isolation=self.minimum_isolation,
                                               route=self._route)

    async def list_files(self, path: str = "", depth: int = 1) -> ListFilesResult:
        """ListFiles (as :meth:`plimsoll.Session.list_files`); the record
        extends the chain."""
        async with self._lock:
            return await self.client.list_files(self.session_id, path, depth,
                                                chain=self.chain,
                                                minimum_isolation=self.minimum_isolation,
                                                route=self._route)

    async def read_bytes(self, path: str, *, limit: Optional[int] = None) -> bytes:
        """The whole file, a ReadFile page at a time (as
        :meth:`plimsoll.Session.read_bytes`)."""
        parts: List[bytes] = []
        pages = Pages(path, parts.append)
        while not pages.add(await self.read_file(path, pages.offset, limit)):
            pass
        return b"".join(parts)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """:meth:`read_bytes`, decoded."""
        return (await self.read_bytes(path)).decode(encoding)

    async def download(self, path: str, local_path: LocalPath, *,
                       limit: Optional[int] = None) -> int:
        """The whole file written to ``local_path`` (as
        :meth:`plimsoll.Session.download`); its size. The local file is
        written on the event loop, a page at a time."""
        with local_file(local_path) as f:
            pages = Pages(path, f.write)
            while not pages.add(await self.read_file(path, pages.offset, limit)):
                pass
        return pages.offset

    async def upload(self, local_path: LocalPath, remote_dir: str = "") -> List[str]:
        """A local file or directory tree into ``remote_dir`` (as
        :meth:`plimsoll.Session.upload`: symlinks and special files
        skipped, as few WriteFiles calls as the bounds allow, a file over
        4 MiB a ``ValueError`` before anything is sent). The walk, and the
        reading of each call's files, run in the loop's default executor."""
        loop = asyncio.get_running_loop()
        plan = await loop.run_in_executor(None, upload_plan, local_path, remote_dir)
        batches = upload_batches(plan)
        while True:
            batch = await loop.run_in_executor(None, next, batches, None)
            if batch is None:
                return [remote for _, remote in plan]
            await self.write_files(batch)

    async def info(self) -> SessionInfo:
        """GetSession: the session as the daemon holds it now; it waits for
        none of this object's calls."""
        return await self.client.get_session(self.session_id, route=self._route)

    async def extend(self, ends_in_s: int) -> SessionInfo:
        """ExtendSession: the session now ends ``ends_in_s`` seconds from
        now (shorter is allowed)."""
        return await self.client.extend_session(self.session_id, ends_in_s,
                                                route=self._route)

    async def close(self) -> None:
        """Close the session (once; a second close does nothing)."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            await self.client.close_session(self.session_id, route=self._route)
