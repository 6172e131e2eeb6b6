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

    write_chains()


def session_entry(req, resp, started, ended, previous, runtime="runc"):
    rec = record(req, resp, "docker", "container", runtime, started, ended, previous=previous)
    return {"request": req, "response": resp, "record": rec}


def run_response(stdout, exit_code=0, stderr="", interpreter_started=False, steps=None):
    r = {"exit_code": exit_code, "stdout": stdout, "stderr": stderr, "stdout_truncated": False,
         "stderr_truncated": False, "duration_ms": 12, "sandbox_name": "plimsoll-s-5d41402abc4b",
         "isolation": "container", "timed_out": False, "out_of_memory": False,
         "outcome": "completed", "detail": "", "steps": steps or []}
    if interpreter_started:
        r["interpreter_started"] = True
    return r


def write_chains():
    """A session's chain and broken copies of it (docs/clients.md)."""
    calls = [
        ({"snippet": {"language": "python", "code": "open('a.txt','w').write('x')"}},
         run_response("")),
        ({"cell": {"language": "python", "code": "x = 41"}}, run_response("", interpreter_started=True)),
        ({"cell": {"language": "python", "code": "x + 1"}, "timeout_ms": 5000}, run_response("42\n")),
        ({"timeout_ms": 20000, "project": {"files": [{"path": "t.py", "content": "print(open('a.txt').read())"}],
                                           "steps": [{"name": "t", "argv": ["python3", "t.py"]}]}},
         run_response("", steps=[{"name": "t", "exit_code": 0, "stdout": "x\n", "stderr": "",
                                  "stdout_truncated": False, "stderr_truncated": False,
                                  "duration_ms": 40, "timed_out": False}])),
        ({"cell": {"language": "javascript", "code": "throw new Error('no')"}},
         run_response("", exit_code=1, stderr="Error: no\n", interpreter_started=True)),
    ]
    chain = []
    prev = ""
    for i, (req, resp) in enumerate(calls):
        e = session_entry(req, resp, "2026-11-30T02:00:%02d.000000000Z" % (i * 2),
                          "2026-11-30T02:00:%02d.500000000Z" % (i * 2), prev)
        chain.append(e)
        prev = e["record"]["digest"]
    other = session_entry(calls[0][0], calls[0][1], "2026-11-30T02:00:03.000000000Z",
                          "2026-11-30T02:00:03.500000000Z", "")
    other2 = session_entry(calls[1][0], calls[1][1], "2026-11-30T02:00:04.000000000Z",
                           "2026-11-30T02:00:04.500000000Z", other["record"]["digest"])
    altered_resp = [dict(e) for e in chain]
    altered_resp[2] = dict(chain[2], response=dict(chain[2]["response"], stdout="43\n"))
    altered_rec = [dict(e) for e in chain]
    altered_rec[3] = dict(chain[3], record=dict(chain[3]["record"], broker_calls=1))
    altered_req = [dict(e) for e in chain]
    altered_req[1] = dict(chain[1], request={"cell": {"language": "python", "code": "x = 40"}})
    backwards = [dict(e) for e in chain]
    r = dict(chain[0]["record"], ended_at="2026-11-30T01:59:59.000000000Z")
    r.pop("digest")
    r["digest"] = sha(canon(r))
    backwards[0] = dict(chain[0], record=r)
    chains = [
        {"name": "valid", "entries": chain, "valid": True, "fails_at": None, "broken": ""},
        {"name": "valid prefix", "entries": chain[:2], "valid": True, "fails_at": None,
         "broken": ""},
        {"name": "missing", "entries": [chain[0], chain[2], chain[3], chain[4]], "valid": False,
         "fails_at": 1, "broken": "previous_digest"},
        {"name": "reordered", "entries": [chain[0], chain[2], chain[1], chain[3], chain[4]],
         "valid": False, "fails_at": 1, "broken": "previous_digest"},
        {"name": "foreign first call", "entries": [chain[0], other, chain[1]], "valid": False,
         "fails_at": 1, "broken": "previous_digest"},
        {"name": "foreign chain spliced", "entries": [chain[0], chain[1], other2], "valid": False,
         "fails_at": 2, "broken": "previous_digest"},
        {"name": "does not start the session", "entries": chain[1:], "valid": False,
         "fails_at": 0, "broken": "previous_digest"},
        {"name": "altered response", "entries": altered_resp, "valid": False, "fails_at": 2,
         "broken": "response_sha256"},
        {"name": "altered record", "entries": altered_rec, "valid": False, "fails_at": 3,
         "broken": "digest"},
        {"name": "altered request", "entries": altered_req, "valid": False, "fails_at": 1,
         "broken": "request_sha256"},
        {"name": "ends before it starts", "entries": backwards, "valid": False, "fails_at": 0,
         "broken": "ended_at"},
    ]
    with open(os.path.join(HERE, "chains.json"), "w", encoding="utf-8") as f:
        json.dump(chains, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
