# SPDX-License-Identifier: Apache-2.0
"""Shared test helpers: the harness's environment, the vectors, a fake
Connect server for the offline tests."""
from __future__ import annotations

import http.server
import json
import os
import threading
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple

from plimsoll.record import sha256_hex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VECTORS = os.path.join(ROOT, "tests", "vectors")


def vectors(name: str) -> Any:
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        return json.load(f)


def env(name: str, why: str = "") -> str:
    """A harness variable, or skip the test (the harness is
    tests/clients/harness.py; docs/clients.md lists its variables)."""
    value = os.environ.get(name, "")
    if not value:
        raise unittest.SkipTest(why or "%s is not set: run under python3 "
                                "tests/clients/harness.py -- clients/python/run-tests" % name)
    return value


def make_record(request: Any, response: Dict[str, Any], previous: str = "",
                isolation: str = "process",
                started: str = "2026-11-30T01:02:03.000000001Z",
                ended: str = "2026-11-30T01:02:03.001000001Z") -> Dict[str, Any]:
    rec: Dict[str, Any] = {
        "version": 1, "request_sha256": sha256_hex(request),
        "response_sha256": sha256_hex({k: v for k, v in response.items() if k != "record"}),
        "provider": "wasm", "isolation": isolation, "runtime": "test", "started_at": started,
        "ended_at": ended, "previous_digest": previous, "broker_calls": 0,
        "broker_refused": 0,
    }
    rec["digest"] = sha256_hex(rec)
    return rec


def run_answer(request: Any, stdout: str = "ok\n", exit_code: int = 0,
               isolation: str = "process", previous: str = "") -> Dict[str, Any]:
    """A 200 RunResponse with a valid record for ``request``."""
    resp: Dict[str, Any] = {
        "exit_code": exit_code, "stdout": stdout, "stderr": "", "stdout_truncated": False,
        "stderr_truncated": False, "duration_ms": 1, "sandbox_name": "plimsoll-fake",
        "isolation": isolation, "timed_out": False, "out_of_memory": False,
        "outcome": "completed", "detail": "", "steps": [],
    }
    resp["record"] = make_record(request, resp, previous, isolation)
    return resp


#: A session id as the daemon makes them (64 lowercase hex characters).
SESSION_ID = "5e" * 32


def session_info(session_id: str = SESSION_ID, **fields: Any) -> Dict[str, Any]:
    """A SessionInfo as the daemon answers it (every member present), with
    ``fields`` changed."""
    info: Dict[str, Any] = {
        "session_id": session_id, "state": "ready", "ended_reason": "",
        "created_at": "2026-11-30T01:02:03.123456789Z",
        "last_call_at": "2026-11-30T01:02:04.000000000Z",
        "idle_deadline": "2026-11-30T01:07:04.000000000Z",
        "lifetime_deadline": "2026-11-30T02:02:03.123456789Z", "ended_at": "",
        "calls": 2, "calls_waiting": 0, "previous_digest": "ab" * 32,
        "languages": ["python"], "interpreters": [{"language": "python", "alive": True}],
        "disk_used_kib": 12, "disk_budget_kib": 8192, "max_lifetime_s": 86400,
    }
    info.update(fields)
    return info


def connect_error(reason: str, code: str, message: str = "refused", status: int = 400,
                  **metadata: str) -> Tuple[int, bytes]:
    md = dict({"dispatched": "false"}, **metadata)
    body = {"code": code, "message": message,
            "details": [{"type": "google.rpc.ErrorInfo", "value": "",
                         "debug": {"reason": reason, "domain": "plimsoll", "metadata": md}}]}
    return status, json.dumps(body).encode()


class FakeDaemon:
    """A local HTTP server that answers each POST with the next queued
    ``(status, body)``, or with what ``respond(path, body)`` returns when it
    is set, and keeps what it received."""

    def __init__(self) -> None:
        self.answers: List[Tuple[int, bytes]] = []
        self.received: List[Dict[str, Any]] = []
        self.respond: Optional[Callable[[str, bytes], Tuple[int, Any]]] = None
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with fake.lock:
                    fake.received.append({"path": self.path, "headers": dict(self.headers),
                                          "body": body})
                if fake.respond is not None:
                    status, answer = fake.respond(self.path, body)
                    if not isinstance(answer, bytes):
                        answer = json.dumps(answer).encode()
                else:
                    with fake.lock:
                        status, answer = (fake.answers.pop(0) if fake.answers
                                          else (500, b"no answer"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def answer(self, status: int, body: Any) -> None:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.answers.append((status, body))

    def sent(self, i: int = -1) -> Any:
        return json.loads(self.received[i]["body"])

    def __enter__(self) -> "FakeDaemon":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = ["ROOT", "VECTORS", "vectors", "env", "make_record", "run_answer",
           "SESSION_ID", "session_info", "connect_error", "FakeDaemon"]
