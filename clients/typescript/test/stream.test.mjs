// SPDX-License-Identifier: Apache-2.0
// runStream and runCellStream against a fake daemon that writes the bytes
// each case says (Connect server streaming, application/connect+json): what
// is sent, the chunks given, and every way a stream can be wrong.  Then the
// same calls against the harness's real wasm daemon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as P from "../dist/index.js";
import { answerFor, connectError, env, needs, RESPONSE } from "./helpers.mjs";

const { Client } = P;
const STREAM = "application/connect+json";
const REQUEST = { snippet: { language: "javascript", code: "console.log(1)" } };
const REASONS = JSON.parse(readFileSync(new URL("../../../tests/vectors/reasons.json", import.meta.url), "utf8"));

const enc = (s) => new TextEncoder().encode(s);
const b64 = (s) => Buffer.from(s, "latin1").toString("base64");

function env_(flags, payload) {
  const body = typeof payload === "string" ? Buffer.from(payload, "latin1") : Buffer.from(JSON.stringify(payload));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}
const out = (stdout = "", stderr = "", step = 0) => {
  const o = {};
  if (stdout) o.stdout = b64(stdout);
  if (stderr) o.stderr = b64(stderr);
  if (step) o.step = step;
  return env_(0, { output: o });
};
const result = (answer) => env_(0, { result: answer });
const end = (error) => env_(2, error ? { error } : {});
const cat = (...parts) => Buffer.concat(parts);

async function answer(request, stdout, { stderr = "", steps, isolation = "process" } = {}) {
  const resp = { ...RESPONSE, stdout, stderr, isolation };
  if (steps) resp.steps = steps;
  return answerFor(request, resp, { record: { isolation } });
}

/** An answer's bytes: the head, then the body in `pieces` (chunked, a Content-Length, or to the close). */
function http(body, { status = 200, ctype = STREAM, framing = "chunked", pieces = 3 } = {}) {
  const head = [`HTTP/1.1 ${status} X`, `Content-Type: ${ctype}`, "Connection: close"];
  if (framing === "chunked") head.push("Transfer-Encoding: chunked");
  else if (framing === "length") head.push(`Content-Length: ${body.length}`);
  const parts = [Buffer.from(head.join("\r\n") + "\r\n\r\n")];
  const step = Math.floor(body.length / pieces) + 1;
  for (let i = 0; i < body.length; i += step) {
    const p = body.subarray(i, i + step);
    parts.push(framing === "chunked" ? cat(Buffer.from(p.length.toString(16) + "\r\n"), p, Buffer.from("\r\n")) : p);
  }
  if (framing === "chunked") parts.push(Buffer.from("0\r\n\r\n"));
  return parts;
}

/**
 * A raw server: each request gets the parts `respond(n, req)` returns
 * (a Buffer is written, a number is a pause in ms, null hangs up).
 */
async function fake(t, respond) {
  const reqs = [];
  const sockets = new Set();
  const server = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => undefined);
    let data = Buffer.alloc(0);
    let done = false;
    sock.on("data", async (d) => {
      if (done) return;
      data = Buffer.concat([data, d]);
      const at = data.indexOf("\r\n\r\n");
      if (at < 0) return;
      const lines = data.subarray(0, at).toString("latin1").split("\r\n");
      const headers = Object.fromEntries(
        lines.slice(1).map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
      );
      const n = Number(headers["content-length"] ?? 0);
      if (data.length < at + 4 + n) return;
      done = true;
      const req = { path: lines[0].split(" ")[1], headers, body: data.subarray(at + 4, at + 4 + n) };
      reqs.push(req);
      for (const p of respond(reqs.length - 1, req)) {
        if (p === null || sock.destroyed) break;
        if (typeof p === "number") await new Promise((r) => setTimeout(r, p));
        else sock.write(p);
      }
      sock.end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { url: `http://127.0.0.1:${server.address().port}`, reqs };
}

/** The chunks and the result (or the error) of runStream against `body`. */
async function stream(t, respond, { request = REQUEST, ...opts } = {}) {
  const f = await fake(t, typeof respond === "function" ? respond : () => http(respond));
  const chunks = [];
  const c = new Client({ url: f.url, apiKey: "plk_stream", timeoutMs: 10_000, ...opts });
  let res;
  let err;
  try {
    res = await c.runStream(request, async (ch) => {
      await new Promise((r) => setImmediate(r));
      chunks.push(ch);
    });
  } catch (e) {
    err = e;
  }
  return { chunks, res, err, f };
}

function protocol(o, match = "") {
  assert.ok(o.err instanceof P.ProtocolError, `want a ProtocolError, got ${o.err} (result ${o.res?.stdout})`);
  assert.ok(o.err instanceof P.InfrastructureError);
  assert.equal(o.err.dispatched, true);
  assert.ok(o.err.message.includes(match), `${o.err.message} does not say ${match}`);
}

const text = (b) => Buffer.from(b).toString("latin1");

test("stream: chunks as they come, then the checked result, in every framing", async (t) => {
  const ans = await answer(REQUEST, "a\nb\n", { stderr: "e\n" });
  const body = cat(out("a\n"), out("", "e\n"), out("b\n"), result(ans), end());
  for (const framing of ["chunked", "length", "close"]) {
    const o = await stream(t, () => http(body, { framing, pieces: body.length }));
    assert.equal(o.err, undefined, String(o.err));
    assert.deepEqual(
      o.chunks.map((c) => [text(c.stdout), text(c.stderr), c.step]),
      [["a\n", "", 0], ["", "e\n", 0], ["b\n", "", 0]],
    );
    assert.ok(o.res instanceof P.RunResult);
    assert.equal(o.res.stdout, "a\nb\n");
    assert.equal(o.res.record.digest, ans.record.digest);
    const r = o.f.reqs[0];
    assert.equal(r.path, "/plimsoll.v1.SandboxService/RunStream");
    assert.equal(r.headers["content-type"], STREAM);
    assert.equal(r.headers["authorization"], "Bearer plk_stream");
    assert.equal(r.headers["connect-protocol-version"], "1");
    assert.deepEqual(r.body, env_(0, P.canonical(REQUEST)));
  }
});

test("stream: a kind that does not stream sends only the result", async (t) => {
  const o = await stream(t, cat(result(await answer(REQUEST, "all\n")), end()));
  assert.equal(o.err, undefined, String(o.err));
  assert.deepEqual([o.chunks.length, o.res.stdout], [0, "all\n"]);
});

test("stream: a project's chunks by step", async (t) => {
  const request = { project: { files: [], steps: [{ argv: ["a"] }, { argv: ["b"] }] } };
  const steps = [
    { name: "step-1", exit_code: 0, stdout: "one\n" },
    { name: "step-2", exit_code: 0, stdout: "", stderr: "two\n" },
  ];
  const ans = await answer(request, "", { steps });
  let o = await stream(t, cat(out("one\n", "", 1), out("", "two\n", 2), result(ans), end()), { request });
  assert.equal(o.err, undefined, String(o.err));
  assert.deepEqual(o.chunks.map((c) => c.step), [1, 2]);
  o = await stream(t, cat(out("one\n", "", 1), out("x", "", 3), result(ans), end()), { request });
  protocol(o, "step 3");
  o = await stream(t, cat(out("one\n", "", 1), result(ans), end()), { request });
  protocol(o, "step 2's stderr");
});

test("stream: exact bytes through base64, URL-safe and unpadded too", async (t) => {
  const ans = await answerFor(REQUEST, { ...RESPONSE, stdout: "\ufffd", stdout_base64: "/w==" });
  const o = await stream(t, cat(env_(0, { output: { stdout: "_w" } }), result(ans), end()));
  assert.equal(o.err, undefined, String(o.err));
  assert.deepEqual([...o.chunks[0].stdout], [0xff]);
  assert.deepEqual([...o.res.stdoutBytes()], [0xff]);
});

test("stream: a refusal is the end of the stream alone, typed as run's", async (t) => {
  const o = await stream(t, end(connectError("failed_precondition", "INSUFFICIENT_ISOLATION", "no")));
  assert.ok(o.err instanceof P.InsufficientIsolationError, String(o.err));
  assert.deepEqual([o.err.reason, o.err.code, o.err.dispatched, o.err.httpStatus], ["INSUFFICIENT_ISOLATION", "failed_precondition", false, 200]);
  assert.equal(o.err.metadata.isolation, "process");
  assert.equal(o.chunks.length, 0);
});

test("stream: every reason of tests/vectors/reasons.json as an end-of-stream error", async (t) => {
  for (const want of REASONS.reasons) {
    const md = { dispatched: want.dispatched ? "true" : "false" };
    const o = await stream(t, end(connectError(want.code, want.reason, "x", md)));
    if (want.channel === "refusal") assert.equal(o.err?.constructor, P.REFUSALS[want.reason], `${want.reason}: ${o.err}`);
    else assert.equal(o.err?.constructor, P.InfrastructureError, `${want.reason}: ${o.err}`);
    assert.deepEqual([o.err.reason, o.err.code, o.err.dispatched, o.err.httpStatus], [want.reason, want.code, want.dispatched, 200]);
  }
});

test("stream: an error after some chunks, and after the result", async (t) => {
  const internal = connectError("internal", "INTERNAL", "broke", { dispatched: "true" });
  let o = await stream(t, cat(out("partial\n"), end(internal)));
  assert.ok(o.err instanceof P.InfrastructureError && !(o.err instanceof P.ProtocolError), String(o.err));
  assert.deepEqual([o.err.reason, o.err.dispatched], ["INTERNAL", true]);
  assert.deepEqual(o.chunks.map((c) => text(c.stdout)), ["partial\n"]);
  o = await stream(t, cat(result(await answer(REQUEST, "")), end(internal)));
  assert.ok(o.err instanceof P.InfrastructureError, String(o.err));
});

test("stream: a non-200 answer is read as run's", async (t) => {
  for (const status of [404, 415, 502]) {
    const o = await stream(t, () => http(Buffer.from("no such method\n"), { status, ctype: "text/plain", framing: "length" }));
    protocol(o);
    assert.equal(o.err.httpStatus, status);
  }
  const body = Buffer.from(JSON.stringify(connectError("unauthenticated", "UNAUTHENTICATED", "who")));
  const o = await stream(t, () => http(body, { status: 401, ctype: "application/json", framing: "length" }));
  assert.ok(o.err instanceof P.UnauthenticatedError, String(o.err));
  assert.deepEqual([o.err.httpStatus, o.err.dispatched], [401, false]);
  const ok = Buffer.from(JSON.stringify(await answer(REQUEST, "")));
  protocol(await stream(t, () => http(ok, { ctype: "application/json", framing: "length" })), "Content-Type");
});

test("stream: retried only before any chunk", async (t) => {
  const ans = await answer(REQUEST, "ok\n");
  const capacity = end(connectError("resource_exhausted", "AT_CAPACITY", "full"));
  const retry = { maxAttempts: 2, baseMs: 1, capMs: 1 };
  let o = await stream(t, (n) => http(n === 0 ? capacity : cat(out("ok\n"), result(ans), end())), { retry });
  assert.equal(o.err, undefined, String(o.err));
  assert.deepEqual([o.f.reqs.length, o.chunks.length], [2, 1]);
  o = await stream(t, cat(out("x"), capacity), { retry });
  assert.ok(o.err instanceof P.AtCapacityError, String(o.err));
  assert.equal(o.f.reqs.length, 1);
});

test("stream: what breaks the protocol", async (t) => {
  const ans = result(await answer(REQUEST, "a"));
  const cases = [
    ["ends inside an envelope", cat(out("a"), ans.subarray(0, 40))],
    ["ends inside an envelope", cat(out("a"), ans, end().subarray(0, 3))],
    ["without a result", cat(out("a"), end())],
    ["without its end-of-stream", cat(out("a"), ans)],
    ["without its end-of-stream", Buffer.alloc(0)],
    ["breaks the protocol", Buffer.from("not an envelope at all")],
    ["after its result", cat(ans, out("a"), end())],
    ["after its end-of-stream", cat(out("a"), ans, end(), out("x"))],
    ["after its end-of-stream", cat(out("a"), ans, end(), Buffer.from([0]))],
    ["both", cat(env_(0, { output: {}, result: {} }), end())],
    ["not the result's", cat(out("b"), ans, end())],
    ["not the result's", cat(out("a"), out("b"), ans, end())],
    ["not the result's", cat(out("a", "e"), ans, end())],
    ["end-of-stream", cat(ans, env_(2, "[]"))],
    ["not a Connect error", end({ message: "no code" })],
  ];
  for (const [match, bad] of [
    ["RunStreamResponse", "[1]"],
    ["RunStreamResponse", '{"output":{"stdout":5}}'],
    ["RunStreamResponse", '{"output":{"step":-1}}'],
    ["output chunk", '{"output":{"stdout":"!!"}}'],
    ["RunStreamResponse", '{"result":{"exit_code":1.5}}'],
    ["RunStreamResponse", "\xff"],
    ["RunStreamResponse", '{"a":1,"a":2}'],
  ]) {
    cases.push([match, cat(env_(0, bad), ans, end())]);
  }
  for (const flags of [0x01, 0x04, 0x80, 0xff]) cases.push(["flags", cat(env_(flags, { output: {} }), ans, end())]);
  for (const [match, body] of cases) protocol(await stream(t, body), match);
});

test("stream: unknown members and messages are skipped", async (t) => {
  const body = cat(
    env_(0, { progress: { x: 1 } }),
    env_(0, { output: { stdout: "YQ==", later: true } }),
    result(await answer(REQUEST, "a")),
    env_(2, { metadata: { k: ["v"] } }),
  );
  const o = await stream(t, body);
  assert.equal(o.err, undefined, String(o.err));
  assert.equal(o.chunks.length, 1);
});

test("stream: cut inside an HTTP chunk is infrastructure", async (t) => {
  const o = await stream(t, () => [...http(out("a")).slice(0, 2), Buffer.from("40\r\nabc"), null]);
  assert.ok(o.err instanceof P.InfrastructureError, String(o.err));
  assert.equal(o.err.dispatched, true);
});

test("stream: an oversize envelope is refused from its header, before its bytes", async (t) => {
  assert.equal(P.DEFAULT_MAX_MESSAGE_BYTES, 16 * 1024 * 1024);
  const head = Buffer.alloc(5);
  head.writeUInt32BE(P.DEFAULT_MAX_MESSAGE_BYTES + 1, 1);
  const t0 = performance.now();
  protocol(await stream(t, () => [...http(head, { pieces: 1 }).slice(0, 2), 30_000]), "maxMessageBytes");
  assert.ok(performance.now() - t0 < 8000);
  const a = "a".repeat(100);
  protocol(await stream(t, cat(out(a), result(await answer(REQUEST, a)), end()), { maxMessageBytes: 64 }), "maxMessageBytes (64)");
  const big = cat(out("a".repeat(4000)), out("b".repeat(4000)), result(await answer(REQUEST, "")), end());
  protocol(await stream(t, big, { maxAnswerBytes: 5000 }), "maxAnswerBytes");
});

test("stream: the record and the tier are checked as run's", async (t) => {
  const ans = await answer(REQUEST, "a");
  ans.stdout = "b";
  const o = await stream(t, cat(out("b"), result(ans), end()));
  assert.ok(o.err instanceof P.ChainError, String(o.err));
  const request = { ...REQUEST, minimum_isolation: "process" };
  const low = await answer(request, "", { isolation: "none" });
  const o2 = await stream(t, cat(result(low), end()), { request });
  assert.ok(o2.err instanceof P.IsolationEvidenceMismatchError, String(o2.err));
});

test("stream: the timeout bounds the whole stream", async (t) => {
  const body = Buffer.concat(Array.from({ length: 50 }, () => out("x")));
  const t0 = performance.now();
  const o = await stream(
    t,
    () => {
      const parts = http(body, { pieces: 50 });
      return [parts[0], ...parts.slice(1).flatMap((p) => [p, 200])];
    },
    { timeoutMs: 1000 },
  );
  assert.ok(o.err instanceof P.InfrastructureError, String(o.err));
  assert.equal(o.err.code, "deadline_exceeded");
  assert.ok(o.chunks.length > 0);
  assert.ok(performance.now() - t0 < 6000);
});

test("stream: the deadline does not wait for a slow onOutput", async (t) => {
  const ans = await answer(REQUEST, "ab");
  const f = await fake(t, () => http(cat(out("a"), out("b"), result(ans), end())));
  const t0 = performance.now();
  const err = await new Client({ url: f.url, apiKey: "k", timeoutMs: 500 })
    .runStream(REQUEST, () => new Promise(() => undefined))
    .catch((e) => e);
  assert.ok(err instanceof P.InfrastructureError, String(err));
  assert.equal(err.code, "deadline_exceeded");
  assert.ok(performance.now() - t0 < 5000);
});

test("stream: what onOutput throws is thrown as it is", async (t) => {
  const ans = await answer(REQUEST, "ab");
  const f = await fake(t, () => http(cat(out("a"), out("b"), result(ans), end())));
  const mine = new Error("the caller's own");
  let n = 0;
  const err = await new Client({ url: f.url, apiKey: "k" })
    .runStream(REQUEST, () => {
      n++;
      throw mine;
    })
    .catch((e) => e);
  assert.equal(err, mine);
  assert.equal(n, 1);
});

test("stream: a session's cellStream extends its chain", async (t) => {
  const cell = { language: "python", code: "print(1)" };
  const ans = await answerFor({ cell }, { ...RESPONSE, stdout: "1\n" });
  const f = await fake(t, () => http(cat(out("1\n"), result(ans), end())));
  const c = new Client({ url: f.url, apiKey: "k" });
  const s = new P.Session(c, "s1");
  let got = 0;
  const r = await s.cellStream(cell, () => {
    got++;
  });
  assert.deepEqual([r.stdout, got, s.chain.head], ["1\n", 1, ans.record.digest]);
  assert.equal(f.reqs[0].path, "/plimsoll.v1.SandboxService/RunCellStream");
  assert.equal(f.reqs[0].body.subarray(5).toString(), P.canonical({ session_id: "s1", cell }));
  // the same record again does not extend the chain
  const again = await s.cellStream(cell).catch((e) => e);
  assert.ok(again instanceof P.ChainError, String(again));
  // the low-level call checks the record alone
  const alone = await c.runCellStream("s1", cell);
  assert.equal(alone.stdout, "1\n");
});

// ---- the harness's real wasm daemon ---------------------------------------

const skip = needs("PLIMSOLL_TEST_URL", "PLIMSOLL_TEST_KEY");
const LINES = "for (let i = 0; i < 5; i++) console.log('line ' + i);\nconsole.error('to stderr');\n";
const live = (opts = {}) => new Client({ url: env.PLIMSOLL_TEST_URL, apiKey: env.PLIMSOLL_TEST_KEY, ...opts });

test("daemon: a snippet's lines come as chunks whose joined output is the result's", { skip }, async () => {
  const c = live();
  const d = await c.describe();
  const chunks = [];
  const r = await c.runStream({ ...P.snippetRequest({ code: LINES, language: "javascript" }), minimum_isolation: "process" }, (ch) => {
    chunks.push(ch);
  });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout, "line 0\nline 1\nline 2\nline 3\nline 4\n");
  assert.equal(r.stderr, "to stderr\n");
  assert.equal(r.record.provider, "wasm");
  if (!d.operations.snippet.streams) {
    assert.equal(chunks.length, 0, "a kind that does not stream sends only the result");
    return;
  }
  assert.ok(chunks.length > 0);
  assert.deepEqual(Buffer.concat(chunks.map((c) => c.stdout)), Buffer.from(r.stdoutBytes()));
  assert.deepEqual(Buffer.concat(chunks.map((c) => c.stderr)), Buffer.from(r.stderrBytes()));
  assert.ok(chunks.every((c) => c.step === 0));
});

test("daemon: a refusal is run's refusal", { skip }, async () => {
  const c = live();
  const request = { ...REQUEST, minimum_isolation: "vm" };
  const unary = await c.run(request).catch((e) => e);
  let n = 0;
  const err = await c.runStream(request, () => void n++).catch((e) => e);
  assert.ok(err instanceof P.InsufficientIsolationError, String(err));
  assert.deepEqual([err.reason, err.code, err.dispatched], [unary.reason, unary.code, unary.dispatched]);
  assert.deepEqual([err.reason, err.dispatched, err.metadata.isolation, n], ["INSUFFICIENT_ISOLATION", false, "process", 0]);
});

test("daemon: a wrong key is UNAUTHENTICATED", { skip }, async () => {
  const c = new Client({ url: env.PLIMSOLL_TEST_URL, apiKey: "plk_not-a-key" });
  const err = await c.runStream(REQUEST).catch((e) => e);
  assert.ok(err instanceof P.UnauthenticatedError, String(err));
  assert.deepEqual([err.reason, err.dispatched], ["UNAUTHENTICATED", false]);
});

test("daemon: a module streams", { skip: skip || needs("PLIMSOLL_TEST_WASM_MODULE") }, async () => {
  const wasm = new Uint8Array(readFileSync(env.PLIMSOLL_TEST_WASM_MODULE));
  const chunks = [];
  const r = await live().runStream(P.moduleRequest({ wasm }), (ch) => void chunks.push(ch));
  assert.equal(r.exitCode, 0);
  if (chunks.length) assert.deepEqual(Buffer.concat(chunks.map((c) => c.stdout)), Buffer.from(r.stdoutBytes()));
});

test("daemon: the README's streaming example", { skip }, async () => {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const block = /^## Live output\n[\s\S]*?```ts\n([\s\S]*?)```/m.exec(readme);
  assert.ok(block, "README.md has a Live output example");
  const lines = [];
  const stdout = { write: (b) => void lines.push(typeof b === "string" ? b : Buffer.from(b).toString()) };
  const log = (...args) => void lines.push(args.join(" ") + "\n");
  const body = block[1].replace(/^import .*\n/gm, "");
  const fn = new Function("Client", "process", "console", `return (async () => {\n${body}\n})();`);
  const proc = { env: process.env, stdout };
  // the client reads the real environment: PLIMSOLL_URL and PLIMSOLL_KEY_FILE
  const dir = mkdtempSync(join(tmpdir(), "plimsoll-readme-"));
  const saved = { ...process.env };
  try {
    writeFileSync(join(dir, "key"), env.PLIMSOLL_TEST_KEY + "\n");
    delete process.env.PLIMSOLL_KEY;
    process.env.PLIMSOLL_URL = env.PLIMSOLL_TEST_URL;
    process.env.PLIMSOLL_KEY_FILE = join(dir, "key");
    await fn(Client, proc, { log });
  } finally {
    for (const k of ["PLIMSOLL_URL", "PLIMSOLL_KEY", "PLIMSOLL_KEY_FILE"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
    rmSync(dir, { recursive: true, force: true });
  }
  const all = lines.join("");
  assert.match(all, /^live: line 0\nlive: line 1\nlive: line 2\n0 "line 0\\nline 1\\nline 2\\n" [0-9a-f]{64}\n$/,
    JSON.stringify(lines));
});
