# SPDX-License-Identifier: Apache-2.0
"""Run requests as the tests send them, and the digests a record holds of
a request or an answer."""
import base64
import hashlib
import json
import os

from .harness import BUILD


def snippet(language, code, grant=None, **extra):
    """A snippet run; grant names its grant profile; extra: more fields
    (timeout_ms, memory_mb, minimum_isolation, ...)."""
    m = {"snippet": {"language": language, "code": code}}
    if grant:
        m["grant_profile"] = grant
    m.update(extra)
    return m


def py(code, grant=None, **extra):
    return snippet("python", code, grant, **extra)


def js(code, grant=None, **extra):
    return snippet("javascript", code, grant, **extra)


def built_module(name):
    """The bytes of a WASI module the test build made (tests/wasi/modules)."""
    with open(os.path.join(BUILD, "tests", name + ".wasm"), "rb") as f:
        return f.read()


def module(wasm, **fields):
    """A module run of the bytes wasm; fields: args, stdin, ..."""
    m = {"wasm_base64": base64.b64encode(wasm).decode()}
    m.update(fields)
    return {"module": m}


def canon(v):
    """The canonical JSON a record's digests are taken over."""
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(v):
    return hashlib.sha256(canon(v).encode()).hexdigest()
