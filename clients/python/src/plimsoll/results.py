# SPDX-License-Identifier: Apache-2.0
"""What the daemon answers, as dataclasses. Each keeps the answer as
received in ``raw``; a field the daemon left out takes its proto3 default."""
from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Type, TypeVar

__all__ = ["RunRecord", "StepResult", "RunResult", "Artifact", "ArtifactSupport",
           "DisplayOutput", "DISPLAY_KINDS", "Usage", "USAGE_SOURCES", "mime_is_text",
           "DisplaySupport", "OperationSupport", "Operations",
           "Limits", "Description", "SessionInterpreter", "SessionInfo", "SESSION_STATES",
           "parse_time", "WriteFilesResult", "ReadFileResult", "FileEntry", "ListFilesResult",
           "FILE_TYPES"]

T = TypeVar("T")


def _build(cls: Type[T], data: Any, **extra: Any) -> T:
    """An instance of the dataclass ``cls`` from the JSON object ``data``:
    the members it knows (nested dataclasses filled by ``extra``), unknown
    members ignored, missing ones and nulls at their defaults."""
    if not isinstance(data, Mapping):
        data = {}
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: v for k, v in data.items()
              if k in names and k not in extra and v is not None}
    kwargs.update(extra)
    if "raw" in names:
        kwargs["raw"] = dict(data)
    return cls(**kwargs)


def _bytes_of(text: str, b64: str) -> bytes:
    if b64:
        return base64.b64decode(b64 + "=" * (-len(b64) % 4))
    return text.encode("utf-8")


@dataclass(frozen=True)
class RunRecord:
    """A run's record (docs/records.md). ``raw`` is what the hashes cover."""

    version: int = 0
    request_sha256: str = ""
    response_sha256: str = ""
    provider: str = ""
    isolation: str = ""
    runtime: str = ""
    started_at: str = ""
    ended_at: str = ""
    previous_digest: str = ""
    digest: str = ""
    broker_calls: int = 0
    broker_refused: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunRecord":
        return _build(cls, data)


class _Output:
    """The exact output bytes of a run or a step."""

    stdout: str
    stderr: str
    stdout_base64: str
    stderr_base64: str

    def stdout_bytes(self) -> bytes:
        """The exact bytes of stdout (``stdout_base64`` when present)."""
        return _bytes_of(self.stdout, self.stdout_base64)

    def stderr_bytes(self) -> bytes:
        """The exact bytes of stderr (``stderr_base64`` when present)."""
        return _bytes_of(self.stderr, self.stderr_base64)


#: What a :class:`Usage`'s figures cover: the sandbox's cgroup (every
#: process in it), the same with gVisor's own Sentry and Gofer, the wasm
#: worker process, the hosted service's own metrics.
USAGE_SOURCES = ("cgroup", "gvisor", "worker", "service")


@dataclass(frozen=True)
class Usage:
    """What a run (or a project's step) cost, as the provider measured it
    (docs/api.md, "Usage"). Each figure saturates at 4294967295;
    ``memory_peak_kib`` is 0 when the provider did not measure a peak."""

    cpu_user_ms: int = 0
    cpu_system_ms: int = 0
    #: The most memory in use at once.
    memory_peak_kib: int = 0
    wall_ms: int = 0
    #: What the figures cover: one of :data:`USAGE_SOURCES`.
    source: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Usage":
        return _build(cls, data)


def _usage(data: Any) -> Optional[Usage]:
    u = data.get("usage") if isinstance(data, Mapping) else None
    return Usage.from_dict(u) if isinstance(u, Mapping) else None


#: What a :class:`DisplayOutput` is: ``display`` (from ``display()`` or a
#: figure left open) or ``result`` (the cell's last expression).
DISPLAY_KINDS = ("display", "result")


def mime_is_text(mime: str) -> bool:
    """Whether a display output carries ``mime`` as text (``text/*``,
    ``application/json``, ``application/javascript``, ``image/svg+xml``,
    ``*+json``, ``*+xml``); every other type comes as base64."""
    return (mime.startswith("text/") or mime in ("application/json", "application/javascript",
                                                 "image/svg+xml")
            or mime.endswith("+json") or mime.endswith("+xml"))


def _mime_is_json(mime: str) -> bool:
    return mime == "application/json" or mime.endswith("+json")


@dataclass(frozen=True)
class DisplayOutput:
    """One display output of a cell (docs/sessions.md, "Display outputs"):
    a MIME bundle as Jupyter's ``display_data``. ``data`` maps each MIME
    type to its data as the daemon sent it: text for the text types
    (:func:`mime_is_text`), base64 for every other; :meth:`bytes_of` gives
    any type's bytes.

    In a notebook (IPython, Jupyter), an output shows itself:
    :meth:`_repr_mimebundle_` gives the bundle as IPython's display
    publisher takes it (text as text, a JSON type as its parsed value,
    binary types as base64 text), and the ``_repr_*_`` methods the types
    one by one (``_repr_png_`` and ``_repr_jpeg_`` raw bytes, as IPython's
    formatters take them). ``IPython.display.display(*r.outputs)`` shows a
    cell's outputs."""

    kind: str = ""
    data: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DisplayOutput":
        if not isinstance(data, Mapping):
            data = {}
        bundle = data.get("data")
        return cls(kind=data.get("kind") or "",
                   data=dict(bundle) if isinstance(bundle, Mapping) else {}, raw=dict(data))

    def __repr__(self) -> str:
        return "DisplayOutput(kind=%r, types=%r)" % (self.kind, list(self.data))

    @property
    def types(self) -> List[str]:
        """The bundle's MIME types, in the order the daemon sent them."""
        return list(self.data)

    def bytes_of(self, mime: str) -> bytes:
        """The exact bytes of ``mime``'s data: base64 decoded for a binary
        type, UTF-8 for a text type. ``KeyError`` when the bundle has no
        such type."""
        value = self.data[mime]
        if mime_is_text(mime):
            return value.encode("utf-8")
        return base64.b64decode(value + "=" * (-len(value) % 4))

    def text_of(self, mime: str) -> str:
        """The text of a text type's data (:func:`mime_is_text`);
        ``KeyError`` when the bundle has no such type, ``ValueError`` for a
        binary type (:meth:`bytes_of` gives those)."""
        value = self.data[mime]
        if not mime_is_text(mime):
            raise ValueError("plimsoll: %s is not a text type; bytes_of(%r) gives its bytes"
                             % (mime, mime))
        return value

    def _text(self, mime: str) -> Optional[str]:
        return self.data.get(mime)

    def _binary(self, mime: str) -> Optional[bytes]:
        return self.bytes_of(mime) if mime in self.data else None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
        """The bundle for IPython's display publisher: text types as text,
        ``application/json`` and ``*+json`` parsed (Jupyter takes a JSON
        value there, and IPython refuses JSON as a string; one that does not
        parse is left out), every other type as its base64 text, as
        ``IPython.display.Image`` gives it."""
        out: Dict[str, Any] = {}
        for mime, value in self.data.items():
            if (include and mime not in include) or (exclude and mime in exclude):
                continue
            if _mime_is_json(mime):
                try:
                    out[mime] = json.loads(value)
                except ValueError:
                    continue
            elif mime_is_text(mime):
                out[mime] = value
            else:
                out[mime] = base64.b64encode(self.bytes_of(mime)).decode("ascii")
        return out

    def _repr_html_(self) -> Optional[str]:
        return self._text("text/html")

    def _repr_markdown_(self) -> Optional[str]:
        return self._text("text/markdown")

    def _repr_latex_(self) -> Optional[str]:
        return self._text("text/latex")

    def _repr_svg_(self) -> Optional[str]:
        return self._text("image/svg+xml")

    def _repr_javascript_(self) -> Optional[str]:
        return self._text("application/javascript")

    def _repr_png_(self) -> Optional[bytes]:
        return self._binary("image/png")

    def _repr_jpeg_(self) -> Optional[bytes]:
        return self._binary("image/jpeg")

    def _repr_pdf_(self) -> Optional[bytes]:
        return self._binary("application/pdf")

    def _repr_json_(self) -> Any:
        if "application/json" not in self.data:
            return None
        try:
            return json.loads(self.data["application/json"])
        except ValueError:
            return None


@dataclass(frozen=True)
class StepResult(_Output):
    """One step of a project run."""

    name: str = ""
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    timed_out: bool = False
    stdout_base64: str = ""
    stderr_base64: str = ""
    #: What the step cost, where the provider measures it; else None.
    usage: Optional[Usage] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StepResult":
        return _build(cls, data, usage=_usage(data))


def _artifact_path(path: bytes) -> List[bytes]:
    """The segments of an artifact's path, or ``ValueError`` for one that
    could land outside the directory it is saved under."""
    parts = path.split(b"/")
    if not path or path.startswith(b"/") or b"\0" in path:
        raise ValueError("plimsoll: artifact path %r is empty or absolute; not saved" % path)
    if any(p in (b"", b".", b"..") for p in parts):
        raise ValueError("plimsoll: artifact path %r has an empty, '.' or '..' segment; "
                         "not saved" % path)
    return parts


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _save_under(directory: Any, path: bytes, data: bytes) -> str:
    """Write ``data`` at ``path`` (relative, checked) below ``directory``,
    making the directories between, through no symlink: each segment is
    opened relative to its parent's descriptor with ``O_NOFOLLOW``, and an
    existing symlink anywhere on the way is a ``ValueError``."""
    parts = _artifact_path(path)
    top = os.fsencode(directory)
    os.makedirs(top, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise ValueError("plimsoll: artifact %r: %r is a symlink in %s; not saved"
                                 % (path, b"/".join(parts[:i + 1]), os.fsdecode(top)))
            if last:
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW
                              | _O_CLOEXEC, 0o666, dir_fd=fd)
                with os.fdopen(out, "wb") as f:
                    f.write(data)
                break
            if st is None:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            sub = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC,
                          dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)
    return os.fsdecode(os.path.join(top, path))


@dataclass(frozen=True)
class Artifact:
    """A file a project's or snippet's ``collect`` globs matched (docs/api.md,
    "Artifacts"): its path relative to the work directory (``path_bytes``
    the exact bytes), its size, the bytes that came (all of them unless
    ``truncated``)."""

    path: str = ""
    path_bytes: bytes = b""
    size: int = 0
    content: bytes = b""
    truncated: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Artifact":
        if not isinstance(data, Mapping):
            data = {}
        path = data.get("path") or ""
        return cls(path=path, path_bytes=_bytes_of(path, data.get("path_base64") or ""),
                   size=data.get("size") or 0,
                   content=_bytes_of(data.get("content") or "",
                                     data.get("content_base64") or ""),
                   truncated=bool(data.get("truncated")), raw=dict(data))

    def save(self, directory: Any) -> str:
        """Write :attr:`content` at :attr:`path_bytes` below ``directory``
        (made if missing) and return the file's path. A path that is
        absolute, has an empty, ``.`` or ``..`` segment, or would pass
        through a symlink that exists there is a ``ValueError`` and
        nothing is written; an existing file is replaced. A truncated
        artifact is saved with the bytes that came."""
        return _save_under(directory, self.path_bytes, self.content)


@dataclass(frozen=True)
class RunResult(_Output):
    """The answer to a run that ran, whatever its exit code."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    sandbox_name: str = ""
    isolation: str = ""
    timed_out: bool = False
    out_of_memory: bool = False
    outcome: str = ""
    detail: str = ""
    steps: List[StepResult] = field(default_factory=list)
    interpreter_started: bool = False
    record: Optional[RunRecord] = None
    stdout_base64: str = ""
    stderr_base64: str = ""
    #: The files the request's ``collect`` globs matched, in the walk's
    #: order; None when the request named no globs (or they were not
    #: looked for: a setup failure, a run the deadline ended).
    artifacts: Optional[List[Artifact]] = None
    #: More files matched than came (``SANDBOX_COLLECT_FILES``, or the
    #: reader's bounds).
    artifacts_truncated: bool = False
    #: A cell's display outputs, in the order it produced them (empty when
    #: it showed nothing, and for every call but a cell).
    outputs: List[DisplayOutput] = field(default_factory=list)
    #: Outputs the daemon left out: past ``SANDBOX_DISPLAY_OUTPUTS``, larger
    #: than ``SANDBOX_DISPLAY_OUTPUT_BYTES``, past ``SANDBOX_DISPLAY_BYTES``,
    #: or not a well-formed bundle.
    outputs_dropped: int = 0
    #: What the run cost, as the provider measured it; None when it
    #: measures nothing, and then :attr:`usage_absent` says why.
    usage: Optional[Usage] = None
    usage_absent: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunResult":
        steps = data.get("steps") if isinstance(data, Mapping) else None
        rec = data.get("record") if isinstance(data, Mapping) else None
        arts = data.get("artifacts") if isinstance(data, Mapping) else None
        outs = data.get("outputs") if isinstance(data, Mapping) else None
        return _build(cls, data,
                      steps=[StepResult.from_dict(s) for s in steps or []],
                      record=RunRecord.from_dict(rec) if isinstance(rec, Mapping) else None,
                      artifacts=([Artifact.from_dict(a) for a in arts]
                                 if isinstance(arts, list) else None),
                      outputs=[DisplayOutput.from_dict(o) for o in outs or []],
                      usage=_usage(data))

    def save_artifacts(self, directory: Any) -> List[str]:
        """Save every artifact below ``directory`` (:meth:`Artifact.save`)
        and return their paths. Every path is checked before any file is
        written; a symlink met on the way stops the saving there."""
        arts = self.artifacts or []
        for a in arts:
            _artifact_path(a.path_bytes)
        return [a.save(directory) for a in arts]

    @property
    def ok(self) -> bool:
        """Exit code 0, not timed out, not out of memory."""
        return self.exit_code == 0 and not self.timed_out and not self.out_of_memory


@dataclass(frozen=True)
class OperationSupport:
    """Whether a payload kind runs here, with what engine and bounds."""

    supported: bool = False
    engine: str = ""
    max_timeout_ms: int = 0
    languages: List[str] = field(default_factory=list)
    grants: bool = False
    #: RunStream (for ``session``: RunCellStream) sends this kind's output
    #: as it comes; when False a stream carries only the result.
    streams: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "OperationSupport":
        return _build(cls, data)


@dataclass(frozen=True)
class ArtifactSupport:
    """Which payloads may name ``collect`` globs (docs/api.md, "Artifacts")."""

    project: bool = False
    snippet: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ArtifactSupport":
        return _build(cls, data)


@dataclass(frozen=True)
class DisplaySupport:
    """What a cell can show besides its text (docs/sessions.md, "Display
    outputs"), as the daemon's startup test found it."""

    #: ``display()`` and rich values in Python cells.
    python: bool = False
    #: ``display()`` in JavaScript cells.
    javascript: bool = False
    #: An open matplotlib figure comes back as ``image/png``.
    matplotlib: bool = False
    #: A pandas DataFrame comes back as ``text/html`` and ``text/plain``.
    pandas: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DisplaySupport":
        return _build(cls, data)


@dataclass(frozen=True)
class Operations:
    snippet: OperationSupport = field(default_factory=OperationSupport)
    project: OperationSupport = field(default_factory=OperationSupport)
    module: OperationSupport = field(default_factory=OperationSupport)
    session: OperationSupport = field(default_factory=OperationSupport)
    #: WriteFiles, ReadFile and ListFiles in a session.
    files: OperationSupport = field(default_factory=OperationSupport)
    #: Where a run may name ``collect`` globs.
    artifacts: ArtifactSupport = field(default_factory=ArtifactSupport)
    #: What a cell can show besides its text.
    display: DisplaySupport = field(default_factory=DisplaySupport)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Operations":
        if not isinstance(data, Mapping):
            data = {}
        kinds = {f.name: OperationSupport.from_dict(data.get(f.name) or {})
                 for f in dataclasses.fields(cls) if f.name not in ("artifacts", "display")}
        return cls(artifacts=ArtifactSupport.from_dict(data.get("artifacts") or {}),
                   display=DisplaySupport.from_dict(data.get("display") or {}), **kinds)


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 0
    total_memory_mb: int = 0
    max_concurrent: int = 0
    effective_concurrency: int = 0
    per_key_concurrent: int = 0
    rate_per_min: int = 0
    rate_burst: int = 0
    default_timeout_ms: int = 0
    output_bytes: int = 0
    max_snippet_bytes: int = 0
    max_request_bytes: int = 0
    memory_budget_applies: bool = False
    #: The least ``memory_mb`` the provider accepts; 0: no minimum.
    min_memory_mb: int = 0
    #: ``SANDBOX_FILE_READ_BYTES``: the most one ReadFile reads.
    file_read_bytes: int = 0
    #: ``SANDBOX_FILE_LIST_ENTRIES``: the most entries one ListFiles gives.
    file_list_entries: int = 0
    #: ``SANDBOX_SESSION_MAX_LIFETIME``: the most a session lives from its open.
    session_max_lifetime_s: int = 0
    #: ``SANDBOX_COLLECT_FILES``: the most artifacts one run gives.
    collect_files: int = 0
    #: ``SANDBOX_COLLECT_BYTES``: their bytes in all.
    collect_bytes: int = 0
    #: ``SANDBOX_DISPLAY_OUTPUTS``: the most display outputs one cell keeps.
    display_outputs: int = 0
    #: ``SANDBOX_DISPLAY_OUTPUT_BYTES``: the largest one output may be.
    display_output_bytes: int = 0
    #: ``SANDBOX_DISPLAY_BYTES``: one cell's outputs in all.
    display_bytes: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Limits":
        return _build(cls, data)


@dataclass(frozen=True)
class Description:
    """The answer to Describe: what this daemon is (configuration and
    startup proof, not attestation)."""

    version: str = ""
    provider: str = ""
    isolation: str = ""
    runtime: str = ""
    ready: bool = False
    ready_detail: str = ""
    supports_sessions: bool = False
    languages: List[str] = field(default_factory=list)
    operations: Operations = field(default_factory=Operations)
    limits: Limits = field(default_factory=Limits)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Description":
        ops = data.get("operations") if isinstance(data, Mapping) else None
        lim = data.get("limits") if isinstance(data, Mapping) else None
        return _build(cls, data, operations=Operations.from_dict(ops or {}),
                      limits=Limits.from_dict(lim or {}))


# ---- sessions ------------------------------------------------------------------

#: The states a session is in (SessionInfo ``state``).
SESSION_STATES = ("ready", "paused", "ended")

_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")


def parse_time(text: str) -> Optional[datetime.datetime]:
    """An instant of the daemon's, RFC 3339 in UTC (``2026-11-30T01:02:03.000000001Z``),
    as an aware ``datetime`` in UTC, cut to the microsecond; None for ``""``
    (no such instant). Any other text is a ``ValueError``."""
    if text == "":
        return None
    m = _TIME.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError("not an RFC 3339 time in UTC: %r" % (text[:40] if isinstance(text, str)
                                                               else text,))
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "0").ljust(9, "0")[:6])
    return datetime.datetime(y, mo, d, h, mi, sec, micro, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class SessionInterpreter:
    """An interpreter a session keeps, as the last cleanup between calls
    found it (at open: those started)."""

    language: str = ""
    alive: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SessionInterpreter":
        return _build(cls, data)


@dataclass(frozen=True)
class SessionInfo:
    """One of the caller's sessions as the daemon holds it (ListSessions,
    GetSession, ExtendSession).

    The times are the daemon's text, RFC 3339 in UTC with nine fraction
    digits, or ``""`` for none; each has a ``datetime`` twin, ``None`` for
    none (``created_at`` → :attr:`created_time`, ``last_call_at`` →
    :attr:`last_call_time`, ``idle_deadline`` → :attr:`idle_deadline_time`,
    ``lifetime_deadline`` → :attr:`lifetime_deadline_time`, ``ended_at`` →
    :attr:`ended_time`). ``previous_digest`` is the last record's digest,
    what the session's next record names (``""`` before any call): a
    client that reconnects starts its chain there.
    """

    session_id: str = ""
    #: ``ready``, ``paused`` (its container paused while idle) or ``ended``.
    state: str = ""
    #: Why it ended; ``""`` unless ``state`` is ``ended``.
    ended_reason: str = ""
    created_at: str = ""
    #: The end of its last call; ``""`` before any.
    last_call_at: str = ""
    #: When it is paused if no call comes; ``""`` when paused, ended, busy,
    #: or on a provider that cannot pause.
    idle_deadline: str = ""
    #: When it ends; ``""`` once ended.
    lifetime_deadline: str = ""
    ended_at: str = ""
    #: Calls that made a record (runs and cells).
    calls: int = 0
    #: Calls running or waiting their turn now.
    calls_waiting: int = 0
    previous_digest: str = ""
    #: The languages hint given at open.
    languages: List[str] = field(default_factory=list)
    interpreters: List[SessionInterpreter] = field(default_factory=list)
    disk_used_kib: int = 0
    #: ``SANDBOX_SESSION_DISK_MB`` in KiB; 0: none reported.
    disk_budget_kib: int = 0
    #: ``SANDBOX_SESSION_MAX_LIFETIME``: the most a session lives from its open.
    max_lifetime_s: int = 0
    #: The route of the daemon that holds it (its ``PLIMSOLL_INSTANCE``);
    #: ``""`` from a daemon older than routes. Behind a proxy, ``route=``
    #: of the client's calls by id sends a call there.
    route: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SessionInfo":
        interp = data.get("interpreters") if isinstance(data, Mapping) else None
        return _build(cls, data,
                      interpreters=[SessionInterpreter.from_dict(i) for i in interp or []])

    @property
    def ended(self) -> bool:
        """Whether the session has ended (``state == "ended"``)."""
        return self.state == "ended"

    @property
    def created_time(self) -> Optional[datetime.datetime]:
        """``created_at`` as an aware ``datetime`` (UTC)."""
        return parse_time(self.created_at)

    @property
    def last_call_time(self) -> Optional[datetime.datetime]:
        """``last_call_at`` as an aware ``datetime``; None before any call."""
        return parse_time(self.last_call_at)

    @property
    def idle_deadline_time(self) -> Optional[datetime.datetime]:
        """``idle_deadline`` as an aware ``datetime``; None when there is none."""
        return parse_time(self.idle_deadline)

    @property
    def lifetime_deadline_time(self) -> Optional[datetime.datetime]:
        """``lifetime_deadline`` as an aware ``datetime``; None once ended."""
        return parse_time(self.lifetime_deadline)

    @property
    def ended_time(self) -> Optional[datetime.datetime]:
        """``ended_at`` as an aware ``datetime``; None unless ended."""
        return parse_time(self.ended_at)


# ---- a session's files -----------------------------------------------------------

#: The types of a :class:`FileEntry`.
FILE_TYPES = ("file", "directory", "symlink", "fifo", "socket", "device", "other")


def _record_of(data: Any) -> Optional[RunRecord]:
    rec = data.get("record") if isinstance(data, Mapping) else None
    return RunRecord.from_dict(rec) if isinstance(rec, Mapping) else None


@dataclass(frozen=True)
class WriteFilesResult:
    """WriteFiles' answer: how many files were written, their bytes in
    all, and the call's record."""

    files: int = 0
    bytes: int = 0
    record: Optional[RunRecord] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WriteFilesResult":
        return _build(cls, data, record=_record_of(data))


@dataclass(frozen=True)
class ReadFileResult:
    """ReadFile's answer: ``length`` bytes of the file ``path`` from
    ``offset``, as exact ``bytes`` in ``content`` (the answer's
    ``content_base64`` when the bytes are not UTF-8, else its ``content``).
    ``size`` is the file's size, ``more`` whether bytes remain past
    ``offset + length``."""

    path: str = ""
    size: int = 0
    offset: int = 0
    content: bytes = b""
    length: int = 0
    more: bool = False
    record: Optional[RunRecord] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ReadFileResult":
        if not isinstance(data, Mapping):
            data = {}
        return _build(cls, data, record=_record_of(data),
                      content=_bytes_of(data.get("content") or "",
                                        data.get("content_base64") or ""))


@dataclass(frozen=True)
class FileEntry:
    """One entry of ListFiles: ``path`` relative to the work directory
    (a lossy copy when the name is not UTF-8; ``path_bytes`` is exact),
    ``type`` (one of :data:`FILE_TYPES`), ``size``, ``mode`` (the
    permission bits) and ``modified_at`` (RFC 3339 in UTC; as a
    ``datetime``: :attr:`modified_time`)."""

    path: str = ""
    path_bytes: bytes = b""
    type: str = ""
    #: 4294967295 for that size or more.
    size: int = 0
    mode: int = 0
    modified_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FileEntry":
        if not isinstance(data, Mapping):
            data = {}
        return _build(cls, data, path_bytes=_bytes_of(data.get("path") or "",
                                                      data.get("path_base64") or ""))

    @property
    def modified_time(self) -> Optional[datetime.datetime]:
        """``modified_at`` as an aware ``datetime`` (UTC); None when there is none."""
        return parse_time(self.modified_at)


@dataclass(frozen=True)
class ListFilesResult:
    """ListFiles' answer: ``entries`` depth first, each directory's sorted
    by name; ``truncated`` when more were left out (past the daemon's
    ``file_list_entries``). Iterating it iterates ``entries``."""

    entries: List[FileEntry] = field(default_factory=list)
    truncated: bool = False
    record: Optional[RunRecord] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ListFilesResult":
        entries = data.get("entries") if isinstance(data, Mapping) else None
        return _build(cls, data, record=_record_of(data),
                      entries=[FileEntry.from_dict(e) for e in entries or []])

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
