#!/usr/bin/env python3
"""Regenerate the canonical-form, record, chain, hostile-answer and reason
vectors in this folder.

This is a second, independent implementation of docs/records.md in Python's
standard library (json.dumps with sorted keys and no whitespace matches
RFC 8785 for the values plimsoll's messages use: objects with ASCII keys,
arrays, strings, integers, booleans, null). The C tests check that the
daemon's implementation agrees with it byte for byte.

reasons.json is not written from this file: it is read out of the daemon's
own table, the X-macros of src/core/errors.h, so a reason added there
reaches every client's suite (which fails until that client knows it) and
tests/unit/test_errors.c (which fails until this is run again).

Run: python3 tests/vectors/make_vectors.py   (rewrites the .json files)
"""
import base64
import hashlib
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ERRORS_H = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src", "core", "errors.h")


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
    write_hostile()
    write_reasons()


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



# ---- hostile answers (docs/clients.md, "What a client reads") -------------

MAX_ANSWER_BYTES = 256 << 20  # every client's default cap on one answer's body
MAX_DEPTH = 64                # objects and arrays nested, the answer itself counting 1
MAX_INTEGER = 2 ** 53 - 1     # the largest magnitude of a number in an answer
MARGIN_MS = 8000              # what a deadline case allows past the client's timeout
DRIP_TIMEOUT_MS = 1500        # the client's timeout in the deadline cases

HOSTILE_REQUEST = {"snippet": {"language": "javascript", "code": "console.log('hostile')"}}


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def hostile_response(**fields):
    r = {"exit_code": 0, "stdout": "hostile\n", "stderr": "", "stdout_truncated": False,
         "stderr_truncated": False, "duration_ms": 3, "sandbox_name": "plimsoll-0123456789ab",
         "isolation": "process", "timed_out": False, "out_of_memory": False,
         "outcome": "completed", "detail": "", "steps": []}
    r.update(fields)
    return r


def answered(resp, request=HOSTILE_REQUEST, isolation="process"):
    """resp with a record that checks against request."""
    rec = record(request, resp, "wasm", isolation, "wasm2c",
                 "2026-11-30T03:00:00.000000000Z", "2026-11-30T03:00:00.003000000Z")
    return dict(resp, record=rec)


def nested(depth):
    """Arrays nested so that the innermost sits at `depth` when the value is
    a member of the answer (the answer is depth 1)."""
    v = []
    for _ in range(depth - 2):
        v = [v]
    return v


def b64(data):
    return base64.b64encode(data).decode("ascii")


def ok_answer(status=200, body="", content_type="application/json", **more):
    a = {"status": status, "headers": [["Content-Type", content_type]] if content_type else [],
         "body": body}
    a.update(more)
    return a


def error_body(reason, code, message="refused"):
    return compact({"code": code, "message": message,
                    "details": [{"type": "google.rpc.ErrorInfo", "value": "",
                                 "debug": {"reason": reason, "domain": "plimsoll",
                                           "metadata": {"dispatched": "false",
                                                        "isolation": "process"}}}]})


def pb(num, data):
    """One length-delimited protobuf field (short lengths only)."""
    assert len(data) < 128
    return bytes([num << 3 | 2, len(data)]) + data


def write_hostile():
    """What a hostile daemon sends, and what every client must make of it."""
    valid = answered(hostile_response())
    valid_body = compact(valid)
    cases = []

    def case(name, what, answer, outcomes, call="Run", client=None, request=HOSTILE_REQUEST,
             **expect):
        c = {"name": name, "what": what, "call": call}
        if call == "Run":
            c["request"] = request
        if client:
            c["client"] = client
        c["answer"] = answer
        c["expect"] = dict(outcomes=outcomes, **expect)
        cases.append(c)

    def result_of(resp):
        return {"exit_code": resp["exit_code"], "stdout": resp["stdout"],
                "stderr": resp["stderr"]}

    # -- valid answers a client must accept ---------------------------------
    case("valid", "a plain valid answer: the hostile daemon itself is sound",
         ok_answer(body=valid_body), ["result"], result=result_of(valid))
    nul = answered(hostile_response(stdout="before\u0000after\n", stderr="\u0000\u0000",
                                    detail="a\u0000b"))
    case("nul-in-output", "stdout, stderr and detail hold NUL characters (valid JSON, valid "
         "UTF-8); every byte reaches the caller and the record checks",
         ok_answer(body=compact(nul)), ["result"], result=result_of(nul))
    floor_vm = dict(HOSTILE_REQUEST, minimum_isolation="vm")
    nul_tier = answered(hostile_response(isolation="vm\u0000"), floor_vm, "vm\u0000")
    case("nul-in-isolation", "the request's floor is vm; the answer and its record say "
         "\"vm\\u0000\", which is no tier: below every floor, though its record checks",
         ok_answer(body=compact(nul_tier)), ["mismatch"], request=floor_vm)
    case("charset-utf-8", "Content-Type: application/json; charset=utf-8",
         ok_answer(body=valid_body, content_type="application/json; charset=utf-8"),
         ["result"], result=result_of(valid))
    case("media-type-case-and-quotes", "the media type and its parameter in other cases, the "
         "charset quoted",
         ok_answer(body=valid_body, content_type='Application/JSON;Charset="UTF-8"'),
         ["result"], result=result_of(valid))
    deep_ok = answered(hostile_response(future=nested(MAX_DEPTH)))
    case("nested-to-the-limit", "an unknown member nested so that the innermost array is at "
         "depth %d, the limit" % MAX_DEPTH,
         ok_answer(body=compact(deep_ok)), ["result"], result=result_of(deep_ok))
    big_ok = answered(hostile_response(future={"n": MAX_INTEGER, "m": -MAX_INTEGER}))
    case("largest-integer", "unknown members holding +/-(2^53-1), the largest integers allowed",
         ok_answer(body=compact(big_ok)), ["result"], result=result_of(big_ok))
    unknown = answered(hostile_response(future={"a": [1, "x", True, None, {}], "b": ""}))
    case("unknown-members", "members no client knows, of every JSON type: kept, hashed, "
         "ignored", ok_answer(body=compact(unknown)), ["result"], result=result_of(unknown))
    nulls = answered(hostile_response(detail=None, steps=None))
    case("null-is-the-default", "known members sent as null, which proto3 JSON reads as the "
         "default", ok_answer(body=compact(nulls)), ["result"],
         result={"exit_code": 0, "stdout": "hostile\n", "stderr": ""})
    case("trailing-whitespace", "whitespace after the object",
         ok_answer(body=valid_body + " \r\n\t"), ["result"], result=result_of(valid))

    # -- size -------------------------------------------------------------
    pad = answered(hostile_response())
    pad["stdout"] = ""
    base = len(compact(answered(pad)).encode())
    at_cap = 16384
    pad = hostile_response(stdout="x" * (at_cap - base))
    pad_body = compact(answered(pad))
    assert len(pad_body.encode()) == at_cap, len(pad_body.encode())
    case("at-the-cap", "an answer of exactly the client's cap (16 KiB, set by the caller)",
         ok_answer(body=pad_body), ["result"], client={"max_answer_bytes": at_cap},
         result=result_of(pad))
    case("over-the-cap", "the same answer with the cap one byte smaller",
         ok_answer(body=pad_body), ["protocol"], client={"max_answer_bytes": at_cap - 1})
    filler = "A" * 1024
    case("over-the-cap-chunked", "4 MiB of a JSON object sent chunked (no length) to a client "
         "whose cap is 1 MiB: it stops reading and fails",
         {"status": 200, "headers": [["Content-Type", "application/json"]], "length": "chunked",
          "body_parts": [{"text": '{"stdout":"'}, {"text": filler, "repeat": 4096},
                         {"text": '"}'}]},
         ["protocol"], client={"max_answer_bytes": 1 << 20})
    over = MAX_ANSWER_BYTES + 1
    head, tail = '{"stdout":"', '"}'
    n_fill = over - len(head) - len(tail)
    case("over-the-default-cap", "an answer of the default cap plus one byte, its length "
         "declared, to a client left at its defaults",
         {"status": 200, "headers": [["Content-Type", "application/json"]],
          "body_parts": [{"text": head}, {"text": filler, "repeat": n_fill // len(filler)},
                         {"text": "A" * (n_fill % len(filler))}, {"text": tail}]},
         ["protocol"])

    # -- media type ---------------------------------------------------------
    case("not-application-json", "a valid answer labelled text/plain",
         ok_answer(body=valid_body, content_type="text/plain"), ["protocol"])
    case("no-content-type", "a valid answer without a Content-Type",
         ok_answer(body=valid_body, content_type=None), ["protocol"])
    case("json-prefix-media-type", "application/jsonx: a type that only starts like JSON's",
         ok_answer(body=valid_body, content_type="application/jsonx"), ["protocol"])
    case("other-charset", "application/json in a charset other than UTF-8",
         ok_answer(body=valid_body, content_type="application/json; charset=iso-8859-1"),
         ["protocol"])

    # -- not JSON, not an object ----------------------------------------------
    case("not-json", "an HTML page", ok_answer(body="<html><body>hello</body></html>"),
         ["protocol"])
    case("empty-body", "no body at all", ok_answer(body=""), ["protocol"])
    case("truncated", "the first half of a valid answer, its length declared as sent",
         ok_answer(body=valid_body[:len(valid_body) // 2]), ["protocol"])
    case("trailing-data", "a valid answer followed by more text",
         ok_answer(body=valid_body + " {}"), ["protocol"])
    bad_utf8 = valid_body.encode().replace(b"hostile\\n", b"host\xffle\\n", 1)
    assert bad_utf8 != valid_body.encode()
    case("invalid-utf8", "a byte that is not UTF-8 inside stdout",
         dict(ok_answer(), body_base64=b64(bad_utf8), body=None), ["protocol"])
    case("lone-surrogate", "stdout holds \\ud800 alone: JSON text, but no Unicode string",
         ok_answer(body=valid_body.replace('"hostile\\n"', '"\\ud800"', 1)), ["protocol"])
    case("array", "a JSON array", ok_answer(body="[]"), ["protocol"])
    case("null", "JSON null", ok_answer(body="null"), ["protocol"])
    case("string", "a JSON string", ok_answer(body='"ok"'), ["protocol"])
    case("nan", "NaN, which some parsers take", ok_answer(
        body=valid_body.replace('"exit_code":0', '"exit_code":NaN', 1)), ["protocol"])

    # -- nesting ------------------------------------------------------------
    case("nested-past-the-limit", "one level past the limit: the innermost array at depth %d"
         % (MAX_DEPTH + 1),
         ok_answer(body=compact(answered(hostile_response(future=nested(MAX_DEPTH + 1))))),
         ["protocol"])
    deep = 100000
    case("nested-arrays", "%d arrays nested in an unknown member" % deep,
         {"status": 200, "headers": [["Content-Type", "application/json"]],
          "body_parts": [{"text": valid_body[:-1] + ',"future":'}, {"text": "[", "repeat": deep},
                         {"text": "]", "repeat": deep}, {"text": "}"}]}, ["protocol"])
    case("nested-objects", "%d objects nested as the answer's stdout" % deep,
         {"status": 200, "headers": [["Content-Type", "application/json"]],
          "body_parts": [{"text": '{"exit_code":0,"stdout":'}, {"text": '{"a":', "repeat": deep},
                         {"text": "1"}, {"text": "}", "repeat": deep}, {"text": "}"}]},
         ["protocol"])

    # -- numbers --------------------------------------------------------------
    def swap(old, new):
        b = valid_body.replace(old, new, 1)
        assert b != valid_body, old
        return ok_answer(body=b)

    case("int32-overflow", "exit_code 2^31", swap('"exit_code":0', '"exit_code":2147483648'),
         ["protocol"])
    case("negative-uint32", "duration_ms -1", swap('"duration_ms":3', '"duration_ms":-1'),
         ["protocol"])
    case("huge-integer", "exit_code with 30 digits",
         swap('"exit_code":0', '"exit_code":123456789012345678901234567890'), ["protocol"])
    case("huge-exponent", "exit_code 1e400", swap('"exit_code":0', '"exit_code":1e400'),
         ["protocol"])
    case("fraction", "an unknown member 1.5",
         swap('"exit_code":0', '"future":1.5,"exit_code":0'), ["protocol"])
    case("integral-fraction", "exit_code 0.0: integral, but not an integer literal",
         swap('"exit_code":0', '"exit_code":0.0'), ["protocol"])
    case("exponent", "duration_ms 3e0", swap('"duration_ms":3', '"duration_ms":3e0'),
         ["protocol"])
    case("past-the-largest-integer", "an unknown member 2^53",
         swap('"exit_code":0', '"future":9007199254740992,"exit_code":0'), ["protocol"])

    # -- duplicate members, wrong types ----------------------------------------
    case("duplicate-member", "isolation twice, process then vm",
         swap('"isolation":"process"', '"isolation":"process","isolation":"vm"'),
         ["protocol"])
    wrong = [
        ("exit-code-string", "exit_code is a string", '"exit_code":0', '"exit_code":"0"'),
        ("stdout-number", "stdout is a number", '"stdout":"hostile\\n"', '"stdout":5'),
        ("flag-string", "timed_out is a string", '"timed_out":false', '"timed_out":"false"'),
        ("isolation-number", "isolation is a number", '"isolation":"process"',
         '"isolation":3'),
        ("steps-object", "steps is an object", '"steps":[]', '"steps":{}'),
        ("step-number", "a step is a number", '"steps":[]', '"steps":[5]'),
        ("step-field", "a step's exit_code is a string", '"steps":[]',
         '"steps":[{"name":"t","exit_code":"1"}]'),
        ("record-string", "record is a string", '"record":{', '"record":"x","r":{'),
        ("record-field", "record.broker_calls is a string", '"broker_calls":0',
         '"broker_calls":"0"'),
    ]
    for name, what, old, new in wrong:
        case("wrong-type-" + name, what, swap(old, new), ["protocol"])
    case("describe-wrong-type", "Describe: provider is a number",
         ok_answer(body='{"version":"0.1.0","provider":7,"isolation":"process"}'),
         ["protocol"], call="Describe")
    case("describe-wrong-nested-type", "Describe: limits.memory_mb is a string",
         ok_answer(body='{"provider":"wasm","isolation":"process","limits":{"memory_mb":"x"}}'),
         ["protocol"], call="Describe")
    case("describe-languages-numbers", "Describe: languages holds a number",
         ok_answer(body='{"provider":"wasm","languages":["python",1]}'),
         ["protocol"], call="Describe")
    case("open-session-wrong-type", "OpenSession: session_id is a number",
         ok_answer(body='{"session_id":5}'), ["protocol"], call="OpenSession")

    # -- error answers ----------------------------------------------------------
    case("error-with-nul", "a Connect error whose message holds a NUL",
         ok_answer(status=400, body=error_body("INVALID_REQUEST", "invalid_argument",
                                               "bad\u0000request")),
         ["refusal"], reason="INVALID_REQUEST")
    case("error-not-connect", "HTTP 502 with an HTML page",
         ok_answer(status=502, body="<html>bad gateway</html>", content_type="text/html"),
         ["protocol"])
    case("error-code-not-string", "HTTP 400 whose code is a number",
         ok_answer(status=400, body='{"code":5,"message":"x"}'), ["protocol"])
    case("error-message-not-string", "HTTP 400 whose message is an object",
         ok_answer(status=400, body='{"code":"invalid_argument","message":{}}'), ["protocol"])
    case("error-nested", "HTTP 400 whose details nest %d arrays" % deep,
         {"status": 400, "headers": [["Content-Type", "application/json"]],
          "body_parts": [{"text": '{"code":"invalid_argument","message":"x","details":'},
                         {"text": "[", "repeat": deep}, {"text": "]", "repeat": deep},
                         {"text": "}"}]}, ["protocol"])
    # An ErrorInfo only as protobuf, its reason first, then millions of
    # fields that mean nothing: a client must not decode past its deadline.
    info = pb(1, b"INVALID_REQUEST") + pb(3, pb(1, b"dispatched") + pb(2, b"false"))
    head_bytes = info + b"\x78\x00" * 2
    assert len(head_bytes) % 3 == 0
    junk_fields = 16 << 20
    case("huge-error-detail", "HTTP 400 whose ErrorInfo (protobuf only) holds %d empty fields "
         "after its reason: the refusal, or the timeout error by the deadline" % junk_fields,
         {"status": 400, "headers": [["Content-Type", "application/json"]],
          "body_parts": [{"text": '{"code":"invalid_argument","message":"refused","details":'
                                  '[{"type":"google.rpc.ErrorInfo","value":"' + b64(head_bytes)},
                         {"text": b64(b"\x78\x00" * 3), "repeat": junk_fields // 3},
                         {"text": '"}]}'}]},
         ["refusal", "timeout"], reason="INVALID_REQUEST",
         client={"timeout_ms": DRIP_TIMEOUT_MS}, within_ms=DRIP_TIMEOUT_MS + MARGIN_MS)

    # -- deadlines --------------------------------------------------------------
    drip = {"bytes": 1, "interval_ms": 100}
    case("slow-drip-body", "the headers at once, then the body one byte every 100 ms",
         dict(ok_answer(body=valid_body), drip=dict(drip, phase="body")), ["timeout"],
         client={"timeout_ms": DRIP_TIMEOUT_MS}, within_ms=DRIP_TIMEOUT_MS + MARGIN_MS)
    case("slow-drip-headers", "the status line and headers one byte every 100 ms (a long "
         "header keeps it going)",
         dict(ok_answer(body=valid_body), drip=dict(drip, phase="headers"),
              headers=[["Content-Type", "application/json"], ["X-Pad", "p" * 4000]]),
         ["timeout"], client={"timeout_ms": DRIP_TIMEOUT_MS},
         within_ms=DRIP_TIMEOUT_MS + MARGIN_MS)
    case("slow-drip-error", "a Connect error's body one byte every 100 ms",
         dict(ok_answer(status=400, body=error_body("INVALID_REQUEST", "invalid_argument",
                                                    "x" * 2000)),
              drip=dict(drip, phase="body")),
         ["timeout"], client={"timeout_ms": DRIP_TIMEOUT_MS},
         within_ms=DRIP_TIMEOUT_MS + MARGIN_MS)
    case("no-answer", "the request is read and nothing comes back",
         dict(ok_answer(body=valid_body), stall_ms=120000), ["timeout"],
         client={"timeout_ms": DRIP_TIMEOUT_MS}, within_ms=DRIP_TIMEOUT_MS + MARGIN_MS)
    case("closed-mid-body", "a length of %d declared, half of it sent, the connection closed"
         % len(valid_body.encode()),
         dict(ok_answer(body=valid_body[:len(valid_body) // 2]),
              length=len(valid_body.encode())), ["transport"])

    for c in cases:
        a = c["answer"]
        if a.get("body") is None:
            a.pop("body", None)
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names))
    doc = {
        "about": "Answers a hostile daemon sends and what every official client must make "
                 "of them (docs/clients.md, \"What a client reads\"). tests/clients/harness.py "
                 "serves case NAME under PLIMSOLL_TEST_HOSTILE_URL + \"/NAME\"; each suite "
                 "makes the case's call there with the case's request and client settings. "
                 "outcomes: result (the call returns; compare result), protocol (the typed "
                 "protocol error), refusal (the typed refusal of reason), mismatch (the "
                 "isolation evidence mismatch), timeout (the "
                 "timeout error: infrastructure, code deadline_exceeded), transport (an "
                 "infrastructure error that is neither of those). within_ms bounds the call's "
                 "time. An answer is body, body_base64 (bytes) or body_parts (each text "
                 "repeated), sent with its exact length unless length says chunked or a "
                 "number; drip sends one phase a few bytes at a time; stall_ms sends nothing.",
        "limits": {"max_answer_bytes": MAX_ANSWER_BYTES, "max_depth": MAX_DEPTH,
                   "max_integer": MAX_INTEGER},
        "cases": cases,
    }
    with open(os.path.join(HERE, "hostile_answers.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


# ---- the reasons (docs/api.md, "Reasons"; docs/clients.md, "Typed refusals") --

# The clients' retry policy, not the daemon's: the reasons an opt-in retry
# policy retries (docs/clients.md, "Retries").
RETRIED = ("RATE_LIMITED", "AT_CAPACITY")


def c_strings(text):
    """The value of one or more adjacent C string literals."""
    out = ""
    for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', text):
        out += re.sub(r"\\(.)", r"\1", lit)
    return out


def x_macro(header, name):
    """The X(...) rows of `#define NAME(X)`, each a list of its arguments
    as written (string literals decoded)."""
    m = re.search(r"^#define %s\(X\)((?:[^\n]*\\\n)*[^\n]*)$" % name, header, re.M)
    if not m:
        raise SystemExit("%s: no #define %s(X)" % (ERRORS_H, name))
    body = m.group(1).replace("\\\n", " ")
    rows = []
    for args in re.findall(r'X\(((?:[^()"]|"(?:[^"\\]|\\.)*")*)\)', body):
        parts = re.findall(r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+|[^,]+?)\s*(?:,|$)', args)
        rows.append([c_strings(p) if p.startswith('"') else p for p in parts])
    if not rows:
        raise SystemExit("%s: %s has no rows" % (ERRORS_H, name))
    return rows


def write_reasons():
    """Every reason of the daemon's table (src/core/errors.h), in its order."""
    with open(ERRORS_H, encoding="utf-8") as f:
        header = f.read()
    codes = {}
    for sym, wire, http in x_macro(header, "PL_CONNECT_CODES"):
        codes[sym] = (wire, int(http))
    reasons = []
    for sym, code, dispatched, meaning in x_macro(header, "PL_REASONS"):
        assert dispatched in ("true", "false"), (sym, dispatched)
        wire, http = codes[code]
        reasons.append({
            "reason": sym,
            "code": wire,
            "http_status": http,
            "dispatched": dispatched == "true",
            "channel": "infrastructure" if dispatched == "true" else "refusal",
            "retried": sym in RETRIED,
            "meaning": meaning,
        })
    names = [r["reason"] for r in reasons]
    assert len(names) == len(set(names)), names
    assert all(r in names for r in RETRIED), RETRIED
    doc = {
        "about": "Every reason the daemon sends, read out of its table (src/core/errors.h) by "
                 "tests/vectors/make_vectors.py. reason: details[0].debug.reason of the Connect "
                 "error; code and http_status: what it is sent with; dispatched: what "
                 "metadata.dispatched says (true: the code may have run); channel: refusal (a "
                 "typed refusal, one type per reason in every client) or infrastructure; "
                 "retried: whether a client's opt-in retry policy retries it "
                 "(docs/clients.md, \"Retries\"). tests/unit/test_errors.c checks the daemon's "
                 "table against this file and every official client's suite checks its own, "
                 "entry for entry both ways; tests/clients/harness.py's hostile daemon answers "
                 "each reason as the daemon sends it at PLIMSOLL_TEST_HOSTILE_URL + "
                 "\"/reason/REASON\".",
        "reasons": reasons,
    }
    with open(os.path.join(HERE, "reasons.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
