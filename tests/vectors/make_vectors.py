#!/usr/bin/env python3
"""Regenerate the canonical-form and record vectors in this folder.

This is a second, independent implementation of docs/records.md in Python's
standard library (json.dumps with sorted keys and no whitespace matches
RFC 8785 for the values plimsoll's messages use: objects with ASCII keys,
arrays, strings, integers, booleans, null). The C tests check that the
daemon's implementation agrees with it byte for byte.

Run: python3 tests/vectors/make_vectors.py   (rewrites the .json files)
"""
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


CANON_INPUTS = [
    ("empty object", {}),
    ("snippet request", {"snippet": {"language": "javascript", "code": "console.log(1+1)"}}),
    ("key order", {"timeout_ms": 500, "snippet": {"stdin": "", "code": "x", "language": "python"},
                   "minimum_isolation": "kernel"}),
    ("escapes", {"s": "quote\" back\\ nl\n cr\r tab\t bs\b ff\f nul\u0000 us\u001f del\u007f slash/"}),
    ("unicode", {"s": "h\u00e9llo \u2028 \U0001F600 \u4e2d"}),
    ("numbers", {"a": 0, "b": -1, "c": 4294967295, "d": 9007199254740991}),
    ("nesting", {"project": {"files": [{"path": "a.py", "content": ""}],
                             "steps": [{"name": "t", "argv": ["python3", "-m", "unittest"]}]}}),
    ("literals", {"t": True, "f": False, "n": None, "arr": [1, [2, []], {}]}),
]


def record(req, resp, provider, isolation, runtime, started, ended, previous="", calls=0,
           refused=0):
    r = {
        "version": 1,
        "request_sha256": sha(canon(req)),
        "response_sha256": sha(canon(resp)),
        "provider": provider,
        "isolation": isolation,
        "runtime": runtime,
        "started_at": started,
        "ended_at": ended,
        "previous_digest": previous,
        "broker_calls": calls,
        "broker_refused": refused,
    }
    r["digest"] = sha(canon(r))
    return r


def main():
    canon_vectors = [{"name": n, "input": v, "canonical": canon(v), "sha256": sha(canon(v))}
                     for n, v in CANON_INPUTS]
    with open(os.path.join(HERE, "canonical.json"), "w", encoding="utf-8") as f:
        json.dump(canon_vectors, f, indent=2, ensure_ascii=False)
        f.write("\n")

    req = {"snippet": {"language": "javascript", "code": "console.log(2)"}}
    resp = {"exit_code": 0, "stdout": "2\n", "stderr": "", "stdout_truncated": False,
            "stderr_truncated": False, "duration_ms": 1, "sandbox_name": "plimsoll-0123456789ab",
            "isolation": "process", "timed_out": False, "out_of_memory": False,
            "outcome": "completed", "detail": "", "steps": []}
    r1 = record(req, resp, "wasm", "process", "wasm2c", "2026-11-30T01:02:03.000000001Z",
                "2026-11-30T01:02:03.001000001Z")
    r2 = record(req, resp, "wasm", "process", "wasm2c", "2026-11-30T01:02:04.999999999Z",
                "2026-11-30T01:02:05.000000000Z", previous=r1["digest"])
    greq = {"snippet": {"language": "javascript", "code": "plimsoll.request({path: '/items/1'})"},
            "grant_profile": "items-read"}
    r3 = record(greq, resp, "docker", "kernel", "runsc", "2026-11-30T01:02:06.000000000Z",
                "2026-11-30T01:02:06.250000000Z", calls=3, refused=1)
    altered = dict(r2)
    altered["isolation"] = "kernel"
    records = [
        {"name": "first record", "request": req, "response": resp, "record": r1, "valid": True},
        {"name": "second record names the first", "request": req, "response": resp,
         "record": r2, "valid": True},
        {"name": "a run with a grant counts its broker calls", "request": greq, "response": resp,
         "record": r3, "valid": True},
        {"name": "altered broker count", "request": greq, "response": resp,
         "record": dict(r3, broker_refused=0), "valid": False},
        {"name": "altered isolation", "request": req, "response": resp, "record": altered,
         "valid": False},
    ]
    with open(os.path.join(HERE, "records.json"), "w", encoding="utf-8") as f:
        json.dump(records, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
