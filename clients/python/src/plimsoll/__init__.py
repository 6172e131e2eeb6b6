# SPDX-License-Identifier: Apache-2.0
"""plimsoll: the Python client of plimsolld (docs/clients.md).

    import plimsoll
    c = plimsoll.Client()   # PLIMSOLL_URL, PLIMSOLL_KEY or PLIMSOLL_KEY_FILE
    r = c.run_snippet("console.log(6 * 7)", minimum_isolation="process")
    print(r.exit_code, r.stdout, r.record.digest)

:class:`AsyncClient` (``plimsoll.aio``) has the same methods as coroutines.
"""
from __future__ import annotations

from . import aio, errors, record
from ._config import DEFAULT_URL
from ._answer import DEFAULT_MAX_ANSWER_BYTES, MAX_ANSWER_DEPTH, MAX_ANSWER_INTEGER
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, OutputChunk
from .aio import AsyncClient, AsyncSession
from .client import (TIERS, Client, RetryPolicy, Session, check_tier, module_request,
                     project_request, snippet_request, tier_rank)
from .errors import (AtCapacityError, CallerNotAllowedError, ConfigurationError, DisabledError,
                     FileChangedError, InfrastructureError, InsufficientIsolationError,
                     InvalidRequestError, IsolationEvidenceMismatchError, NotFoundError,
                     NotReadyError, PlimsollError, ProtocolError, RateLimitedError, RefusalError,
                     SessionEndedError, ShuttingDownError, UnauthenticatedError,
                     UnsupportedError, WrongRouteError)
from .record import Chain, ChainError, canonical, check_record, sha256_hex, verify_chain
from .results import (DISPLAY_KINDS, FILE_TYPES, USAGE_SOURCES, Artifact, ArtifactSupport,
                      Description, DisplayOutput, DisplaySupport, FileEntry, Limits,
                      ListFilesResult, OperationSupport, Operations, ReadFileResult, RunRecord,
                      RunResult, SessionInfo, SessionInterpreter, StepResult, Usage,
                      WriteFilesResult, mime_is_text)

__version__ = "0.1.0"

__all__ = [
    "Client", "Session", "AsyncClient", "AsyncSession", "RetryPolicy", "DEFAULT_URL",
    "DEFAULT_MAX_ANSWER_BYTES", "DEFAULT_MAX_MESSAGE_BYTES", "MAX_ANSWER_DEPTH", "MAX_ANSWER_INTEGER", "TIERS", "tier_rank",
    "check_tier", "snippet_request", "project_request", "module_request", "OutputChunk",
    "RunResult", "StepResult", "Artifact", "ArtifactSupport", "DisplayOutput", "DISPLAY_KINDS",
    "DisplaySupport", "Usage", "USAGE_SOURCES", "mime_is_text", "RunRecord", "Description", "Operations",
    "OperationSupport", "Limits", "SessionInfo", "SessionInterpreter", "WriteFilesResult",
    "ReadFileResult", "ListFilesResult", "FileEntry", "FILE_TYPES",
    "Chain", "ChainError", "canonical", "check_record", "sha256_hex", "verify_chain",
    "PlimsollError", "RefusalError", "InvalidRequestError", "UnauthenticatedError",
    "DisabledError", "InsufficientIsolationError", "UnsupportedError",
    "CallerNotAllowedError", "NotReadyError", "ShuttingDownError", "RateLimitedError",
    "AtCapacityError", "SessionEndedError", "NotFoundError", "WrongRouteError",
    "InfrastructureError",
    "ProtocolError", "IsolationEvidenceMismatchError", "ConfigurationError", "aio", "errors", "record",
    "FileChangedError", "__version__",
]
