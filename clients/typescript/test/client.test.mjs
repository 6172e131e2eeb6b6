// SPDX-License-Identifier: Apache-2.0
// The client against fake daemons: what goes on the wire, how answers are
// read, the retry policy, the tier re-check.  No daemon needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as P from "../dist/index.js";
import { answerFor, connectError, fakeFetch, RESPONSE } from "./helpers.mjs";

const { Client } = P;

function client(fetch, opts = {}) {
  return new Client({ url: "http://daemon.test/", apiKey: "plk_k", fetch, ...opts });
}

/** A fetch answering every run with a right record. */
function okFetch(response = RESPONSE, record = {}) {
  return fakeFetch(async (call) => {
    const { session_id, ...rest } = call.body;
    const req = call.method === "RunInSession" ? rest.run : rest;
    return { body: await answerFor(req, response, { record }) };
  });
}

test("wire: proto names, only the fields set, the three headers", async () => {
  const f = okFetch();
  const c = client(f);
  await c.runSnippet({ code: "console.log(2)", language: "javascript" });
  await c.runSnippet({
    code: "x",
    language: "python",
    stdin: "",
    timeoutMs: 500,
    memoryMb: 64,
    minimumIsolation: "process",
    grantProfile: "items",
  });
  assert.equal(f.calls[0].url, "http://daemon.test/plimsoll.v1.SandboxService/Run");
  assert.deepEqual(f.calls[0].body, { snippet: { code: "console.log(2)", language: "javascript" } });
  assert.equal(f.calls[0].text, P.canonical(f.calls[0].body));
  assert.ok(!("timeout_ms" in f.calls[0].body), "an unset timeout is not sent");
  assert.deepEqual(f.calls[1].body, {
    minimum_isolation: "process",
    grant_profile: "items",
    timeout_ms: 500,
    memory_mb: 64,
    snippet: { code: "x", language: "python", stdin: "" },
  });
  assert.deepEqual(f.calls[0].headers, {
    "Content-Type": "application/json",
    "Connect-Protocol-Version": "1",
    Authorization: "Bearer plk_k",
  });
});

test("wire: project, module and cell shapes", async () => {
  const f = okFetch();
  const c = client(f);
  await c.runProject({
    files: [
      { path: "a.py", content: "print(1)" },
      { path: "b.bin", content: new Uint8Array([0, 255]) },
      { path: "c.txt", contentBase64: "eA==" },
    ],
    steps: [{ name: "t", argv: ["python3", "a.py"] }, ["true"]],
    timeoutMs: 0,
  });
  assert.deepEqual(f.calls[0].body, {
    timeout_ms: 0,
    project: {
      files: [
        { path: "a.py", content: "print(1)" },
        { path: "b.bin", content_base64: "AP8=" },
        { path: "c.txt", content_base64: "eA==" },
      ],
      steps: [{ name: "t", argv: ["python3", "a.py"] }, { argv: ["true"] }],
    },
  });
  await c.runModule({ wasm: new Uint8Array([0, 0x61, 0x73, 0x6d]), args: ["a"] });
  assert.deepEqual(f.calls[1].body, { module: { wasm_base64: "AGFzbQ==", args: ["a"] } });
  await c.runCell("s1", { code: "x", language: "python" });
  assert.deepEqual(f.calls[2].body, { session_id: "s1", cell: { code: "x", language: "python" } });
  await c.runCell("s1", { code: "x", language: "python" }, 900);
  assert.deepEqual(f.calls[3].body, { session_id: "s1", cell: { code: "x", language: "python" }, timeout_ms: 900 });
  await c.runInSession("s1", { snippet: { language: "python", code: "1" } });
  assert.deepEqual(f.calls[4].body, { session_id: "s1", run: { snippet: { language: "python", code: "1" } } });
});

test("a cell's record covers {cell, timeout_ms} without the session id", async () => {
  const f = fakeFetch(async (call) => {
    const { session_id, ...rest } = call.body;
    assert.equal(session_id, "s1");
    return { body: await answerFor(rest, RESPONSE) };
  });
  const r = await client(f).runCell("s1", { code: "x", language: "python" }, 900);
  assert.equal(r.exitCode, 0);
});

test("results: camelCase fields, raw, exact bytes", async () => {
  const resp = {
    ...RESPONSE,
    exit_code: 3,
    stdout: "\ufffd",
    stdout_base64: "/w==",
    stderr: "é",
    steps: [{ name: "s", exit_code: 1, stdout: "o", stderr: "", duration_ms: 2 }],
  };
  const r = await client(okFetch(resp)).runSnippet({ code: "x", language: "python" });
  assert.ok(r instanceof P.RunResult);
  assert.equal(r.exitCode, 3);
  assert.equal(r.ok, false);
  assert.equal(r.sandboxName, "plimsoll-test");
  assert.deepEqual([...r.stdoutBytes()], [0xff]);
  assert.deepEqual([...r.stderrBytes()], [0xc3, 0xa9]);
  assert.equal(r.steps[0].exitCode, 1);
  assert.deepEqual([...r.steps[0].stdoutBytes()], [0x6f]);
  assert.equal(r.raw.exit_code, 3);
  assert.equal(r.record.version, 1);
});

const REASONS = [
  ["INVALID_REQUEST", "invalid_argument", 400, P.InvalidRequestError],
  ["UNAUTHENTICATED", "unauthenticated", 401, P.UnauthenticatedError],
  ["DISABLED", "failed_precondition", 400, P.DisabledError],
  ["INSUFFICIENT_ISOLATION", "failed_precondition", 400, P.InsufficientIsolationError],
  ["UNSUPPORTED", "unimplemented", 501, P.UnsupportedError],
  ["CALLER_NOT_ALLOWED", "permission_denied", 403, P.CallerNotAllowedError],
  ["NOT_READY", "unavailable", 503, P.NotReadyError],
  ["SHUTTING_DOWN", "unavailable", 503, P.ShuttingDownError],
  ["RATE_LIMITED", "resource_exhausted", 429, P.RateLimitedError],
  ["AT_CAPACITY", "resource_exhausted", 429, P.AtCapacityError],
  ["SESSION_ENDED", "failed_precondition", 400, P.SessionEndedError],
  ["NOT_FOUND", "not_found", 404, P.NotFoundError],
];

test("every reason has its own refusal type", async () => {
  const seen = new Set();
  for (const [reason, code, status, cls] of REASONS) {
    const f = fakeFetch(() => ({ status, body: connectError(code, reason, `no: ${reason}`) }));
    const err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
    assert.ok(err instanceof cls, `${reason}: ${err}`);
    assert.ok(err instanceof P.RefusalError);
    assert.ok(err instanceof P.PlimsollError);
    assert.ok(err instanceof Error);
    assert.equal(err.name, cls.name);
    assert.equal(err.reason, reason);
    assert.equal(err.code, code);
    assert.equal(err.message, `no: ${reason}`);
    assert.equal(err.dispatched, false);
    assert.equal(err.httpStatus, status);
    assert.equal(err.metadata.isolation, "process");
    for (const [, , , other] of REASONS) if (other !== cls) assert.ok(!(err instanceof other));
    seen.add(cls);
  }
  assert.equal(seen.size, REASONS.length);
  const f = fakeFetch(() => ({ status: 400, body: connectError("failed_precondition", "SOMETHING_NEW", "new") }));
  const err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.equal(err.constructor, P.RefusalError);
  assert.equal(err.reason, "SOMETHING_NEW");
});

test("SESSION_ENDED carries why the session ended", async () => {
  let f = fakeFetch(() => ({
    status: 400,
    body: connectError("failed_precondition", "SESSION_ENDED", "session ended: closed by its owner", {
      dispatched: "false",
      isolation: "container",
      ended_reason: "closed",
    }),
  }));
  let err = await client(f).closeSession("s").catch((e) => e);
  assert.ok(err instanceof P.SessionEndedError);
  assert.equal(err.endedReason, "closed");
  f = fakeFetch(() => ({ status: 400, body: connectError("failed_precondition", "SESSION_ENDED", "lifetime over") }));
  err = await client(f).closeSession("s").catch((e) => e);
  assert.equal(err.endedReason, "lifetime over");
});

test("the reason is read from the protobuf ErrorInfo when there is no debug", async () => {
  // ErrorInfo{reason: "NOT_FOUND", domain: "plimsoll", metadata: {dispatched: "false"}}
  const enc = new TextEncoder();
  const field = (n, bytes) => [(n << 3) | 2, bytes.length, ...bytes];
  const entry = [...field(1, enc.encode("dispatched")), ...field(2, enc.encode("false"))];
  const bytes = new Uint8Array([
    ...field(1, enc.encode("NOT_FOUND")),
    ...field(2, enc.encode("plimsoll")),
    ...field(3, entry),
  ]);
  const value = P.encodeBase64(bytes).replace(/=+$/, "");
  const f = fakeFetch(() => ({
    status: 404,
    body: { code: "not_found", message: "no such session", details: [{ type: "google.rpc.ErrorInfo", value }] },
  }));
  const err = await client(f).closeSession("s").catch((e) => e);
  assert.ok(err instanceof P.NotFoundError, String(err));
  assert.equal(err.metadata.dispatched, "false");
  assert.equal(err.dispatched, false);
});

test("INTERNAL, a non-Connect answer, a non-JSON 200 are infrastructure errors", async () => {
  const cases = [
    [{ status: 500, body: connectError("internal", "INTERNAL", "broke", { dispatched: "true", isolation: "process" }) }, true, false],
    [{ status: 500, body: connectError("internal", "INTERNAL", "broke early", { dispatched: "false", isolation: "process" }) }, false, false],
    [{ status: 502, body: "<html>bad gateway</html>" }, true, true],
    [{ status: 200, body: "not json" }, true, true],
    [{ status: 200, body: "[1]" }, true, true],
  ];
  for (const [answer, dispatched, protocol] of cases) {
    const f = fakeFetch(() => answer);
    const err = await client(f, { retry: true }).runSnippet({ code: "x", language: "python" }).catch((e) => e);
    assert.ok(err instanceof P.InfrastructureError, String(err));
    assert.ok(!(err instanceof P.RefusalError));
    assert.equal(err instanceof P.ProtocolError, protocol, String(err));
    assert.equal(err.name, protocol ? "ProtocolError" : "InfrastructureError");
    assert.equal(err.dispatched, dispatched);
    assert.equal(f.calls.length, 1, "never retried");
  }
});

test("a transport failure and a timeout are infrastructure errors, dispatched", async () => {
  let f = fakeFetch(() => {
    throw new TypeError("fetch failed");
  });
  let err = await client(f, { retry: true }).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.InfrastructureError);
  assert.equal(err.dispatched, true);
  assert.equal(f.calls.length, 1);
  f = fakeFetch(
    (call) =>
      new Promise((_, reject) => call.signal.addEventListener("abort", () => reject(new Error("aborted")))),
  );
  const t0 = Date.now();
  err = await client(f, { timeoutMs: 100 }).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.InfrastructureError);
  assert.equal(err.code, "deadline_exceeded");
  assert.equal(err.dispatched, true);
  assert.ok(Date.now() - t0 < 5000);
});

test("retry: only AT_CAPACITY and RATE_LIMITED, up to maxAttempts", async () => {
  for (const reason of ["AT_CAPACITY", "RATE_LIMITED"]) {
    const f = fakeFetch(async (call, i) =>
      i < 2
        ? { status: 429, body: connectError("resource_exhausted", reason, "busy") }
        : { body: await answerFor(call.body, RESPONSE) },
    );
    const r = await client(f, { retry: { baseMs: 1, capMs: 4 } }).runSnippet({ code: "x", language: "python" });
    assert.equal(r.exitCode, 0);
    assert.equal(f.calls.length, 3);
  }
  let f = fakeFetch(() => ({ status: 429, body: connectError("resource_exhausted", "AT_CAPACITY", "busy") }));
  let err = await client(f, { retry: { maxAttempts: 3, baseMs: 1, capMs: 2 } })
    .runSnippet({ code: "x", language: "python" })
    .catch((e) => e);
  assert.ok(err instanceof P.AtCapacityError);
  assert.equal(f.calls.length, 3);
  f = fakeFetch(() => ({ status: 429, body: connectError("resource_exhausted", "RATE_LIMITED", "slow") }));
  err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.RateLimitedError);
  assert.equal(f.calls.length, 1, "off unless asked");
  f = fakeFetch(() => ({ status: 503, body: connectError("unavailable", "NOT_READY", "later") }));
  err = await client(f, { retry: { baseMs: 1 } }).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.NotReadyError);
  assert.equal(f.calls.length, 1);
});

test("retry: equal jitter in [d/2, d], d = min(cap, base * 2^n)", () => {
  const p = P.resolveRetry(true);
  assert.deepEqual(p, { maxAttempts: 4, baseMs: 100, capMs: 2000 });
  assert.equal(P.resolveRetry(undefined), undefined);
  assert.equal(P.resolveRetry(false), undefined);
  assert.equal(P.backoffMs(p, 0, () => 0), 50);
  assert.equal(P.backoffMs(p, 0, () => 0.999999) <= 100, true);
  assert.equal(P.backoffMs(p, 2, () => 0), 200);
  assert.equal(P.backoffMs(p, 2, () => 0.5), 300);
  assert.equal(P.backoffMs(p, 10, () => 0), 1000);
  assert.ok(P.backoffMs(p, 10, () => 0.999999) <= 2000);
  for (let n = 0; n < 8; n++) {
    const d = Math.min(2000, 100 * 2 ** n);
    for (let i = 0; i < 50; i++) {
      const s = P.backoffMs(p, n);
      assert.ok(s >= d / 2 && s <= d, `${n}: ${s}`);
    }
  }
  assert.throws(() => P.resolveRetry({ maxAttempts: 0 }), RangeError);
});

test("tier re-check: an answer or record below the floor, checked before the record", async () => {
  const cases = [
    [{ ...RESPONSE, isolation: "none" }, {}, "none"],
    [RESPONSE, { isolation: "none" }, "process"],
    [{ ...RESPONSE, isolation: "hypervisor" }, {}, "hypervisor"],
  ];
  for (const [resp, record, iso] of cases) {
    const f = fakeFetch(async (call) => {
      const a = await answerFor(call.body, RESPONSE, { record });
      a.isolation = resp.isolation; // changed after hashing: the record would fail too
      return { body: a };
    });
    const err = await client(f, { retry: true })
      .runSnippet({ code: "x", language: "python", minimumIsolation: "process" })
      .catch((e) => e);
    assert.ok(err instanceof P.IsolationEvidenceMismatchError, String(err));
    assert.ok(err instanceof P.PlimsollError);
    assert.equal(err.name, "IsolationEvidenceMismatchError");
    assert.equal(err.code, "data_loss");
    assert.equal(err.dispatched, true);
    assert.equal(err.isolation, iso);
    assert.equal(f.calls.length, 1, "never retried");
  }
  // without a floor the same answer is a chain error (its response hash)
  const f = fakeFetch(async (call) => ({ body: { ...(await answerFor(call.body, RESPONSE)), isolation: "none" } }));
  const err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError);
  assert.equal(err.broken, "response_sha256");
  // a tier at or above the floor passes
  const r = await client(okFetch({ ...RESPONSE, isolation: "vm" }, { isolation: "kernel" })).runSnippet({
    code: "x",
    language: "python",
    minimumIsolation: "kernel",
  });
  assert.equal(r.isolation, "vm");
});

test("Run: a record that names a previous digest, or none, is a chain error", async () => {
  let f = fakeFetch(async (call) => ({ body: await answerFor(call.body, RESPONSE, { previous: "ab".repeat(32) }) }));
  let err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError);
  assert.equal(err.broken, "previous_digest");
  f = fakeFetch(() => ({ body: RESPONSE }));
  err = await client(f).runSnippet({ code: "x", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError);
  assert.equal(err.broken, "version");
  const r = await client(f, { verifyRecords: false }).runSnippet({ code: "x", language: "python" });
  assert.equal(r.record, undefined);
});

test("a Session checks every answer against its chain", async () => {
  let last = "";
  let forge = false;
  const f = fakeFetch(async (call) => {
    if (call.method === "OpenSession") return { body: { session_id: "ab".repeat(32) } };
    if (call.method === "CloseSession") return { body: {} };
    const { session_id, ...rest } = call.body;
    const req = call.method === "RunInSession" ? rest.run : rest;
    const a = await answerFor(req, { ...RESPONSE, isolation: "container" }, { previous: forge ? "00" : last, record: { isolation: "container" } });
    last = a.record.digest;
    return { body: a };
  });
  const c = client(f, { verifyRecords: false });
  const s = await c.openSession({ languages: ["python"], minimumIsolation: "container" });
  assert.ok(s instanceof P.Session);
  assert.deepEqual(f.calls[0].body, { languages: ["python"] });
  // calls made together run one at a time, in order
  const rs = await Promise.all([
    s.runSnippet({ code: "a", language: "python" }),
    s.cell({ code: "b", language: "python" }),
    s.runProject({ steps: [["true"]] }),
  ]);
  assert.equal(rs.length, 3);
  assert.equal(s.chain.entries.length, 3);
  assert.equal(s.chain.head, last);
  assert.equal(await P.verifyChain(s.chain.entries), last);
  assert.equal(f.calls[1].body.run.minimum_isolation, "container", "the floor is sent");
  forge = true;
  const err = await s.cell({ code: "c", language: "python" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError);
  assert.equal(err.broken, "previous_digest");
  assert.equal(err.index, 3);
  assert.equal(s.chain.entries.length, 3, "the chain did not advance");
  assert.equal(s.broken, err);
  await s.close();
  assert.deepEqual(f.calls.at(-1).body, { session_id: "ab".repeat(32) });
});

test("ChainError and friends are Errors with their names", () => {
  const e = new P.ChainError(2, "digest", "x");
  assert.ok(e instanceof P.ChainError && e instanceof P.PlimsollError && e instanceof Error);
  assert.equal(e.name, "ChainError");
  assert.equal(e.index, 2);
  assert.equal(e.broken, "digest");
  assert.ok(e.stack.includes("ChainError"));
});
