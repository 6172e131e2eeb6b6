// SPDX-License-Identifier: Apache-2.0
// The client against real daemons started by tests/clients/harness.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as P from "../dist/index.js";
import { env, needs, sleep } from "./helpers.mjs";

const { Client } = P;
const skip = needs("PLIMSOLL_TEST_URL", "PLIMSOLL_TEST_KEY");

const mk = (url, opts = {}) => new Client({ url, apiKey: env.PLIMSOLL_TEST_KEY, ...opts });
const wasm = (opts) => mk(env.PLIMSOLL_TEST_URL, opts);

test("describe: a wasm daemon at tier process", { skip }, async () => {
  const d = await wasm().describe();
  assert.equal(d.provider, "wasm");
  assert.equal(d.isolation, "process");
  assert.equal(d.ready, true);
  assert.equal(d.supportsSessions, false);
  assert.equal(d.limits.maxSnippetBytes, 262144);
  assert.equal(d.operations.snippet.supported, true);
  assert.ok(d.operations.snippet.languages.includes("javascript"));
  assert.equal(d.raw.provider, "wasm");
});

test("a JavaScript snippet exits 0 and its record is verified", { skip }, async () => {
  const r = await wasm().runSnippet({ code: "console.log(1 + 1)", language: "javascript" });
  assert.ok(r instanceof P.RunResult);
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "2\n");
  assert.equal(r.outcome, "completed");
  assert.equal(r.isolation, "process");
  assert.equal(r.record.version, 1);
  assert.equal(r.record.previous_digest, "");
  assert.equal(r.record.provider, "wasm");
  // the record binds exactly what was sent and what came back
  const sent = { snippet: { code: "console.log(1 + 1)", language: "javascript" } };
  await P.checkRecord(sent, r.raw, r.record, "");
  await assert.rejects(P.checkRecord({ snippet: { ...sent.snippet, stdin: "" } }, r.raw), P.ChainError);
});

test("a floor the daemon meets, a timeout and stdin are sent and checked", { skip }, async () => {
  const r = await wasm().runSnippet({
    code: "console.log('ok')",
    language: "javascript",
    stdin: "",
    timeoutMs: 5000,
    minimumIsolation: "process",
  });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout, "ok\n");
});

test("a snippet that throws is a result with a non-zero exit code", { skip }, async () => {
  const r = await wasm().runSnippet({ code: "throw new Error('boom')", language: "javascript" });
  assert.notEqual(r.exitCode, 0);
  assert.match(r.stderr, /boom/);
  assert.equal(r.record.version, 1);
});

test("a WASI module prints hello, world", { skip: skip || needs("PLIMSOLL_TEST_WASM_MODULE") }, async () => {
  const wasmBytes = new Uint8Array(readFileSync(env.PLIMSOLL_TEST_WASM_MODULE));
  const r = await wasm().runModule({ wasm: wasmBytes });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout.trim(), "hello, world");
  assert.equal(new TextDecoder().decode(r.stdoutBytes()).trim(), "hello, world");
});

test("floor vm on a process daemon: InsufficientIsolationError, not dispatched", { skip }, async () => {
  const err = await wasm()
    .runSnippet({ code: "console.log(1)", language: "javascript", minimumIsolation: "vm" })
    .catch((e) => e);
  assert.ok(err instanceof P.InsufficientIsolationError, String(err));
  assert.ok(err instanceof P.RefusalError);
  assert.equal(err.reason, "INSUFFICIENT_ISOLATION");
  assert.equal(err.code, "failed_precondition");
  assert.equal(err.dispatched, false);
  assert.equal(err.metadata.isolation, "process");
  assert.equal(err.httpStatus, 400);
});

test("a snippet over 262144 bytes: InvalidRequestError", { skip }, async () => {
  const code = "//" + "x".repeat(262144);
  const err = await wasm().runSnippet({ code, language: "javascript" }).catch((e) => e);
  assert.ok(err instanceof P.InvalidRequestError, String(err));
  assert.equal(err.dispatched, false);
});

test("a bad key: UnauthenticatedError", { skip }, async () => {
  const c = new Client({ url: env.PLIMSOLL_TEST_URL, apiKey: "plk_not-a-key" });
  const err = await c.runSnippet({ code: "console.log(1)", language: "javascript" }).catch((e) => e);
  assert.ok(err instanceof P.UnauthenticatedError, String(err));
  assert.equal(err.httpStatus, 401);
  const err2 = await c.describe().catch((e) => e);
  assert.ok(err2 instanceof P.UnauthenticatedError, String(err2));
});

test("the Disabled provider: DisabledError", { skip: skip || needs("PLIMSOLL_TEST_DISABLED_URL") }, async () => {
  const err = await mk(env.PLIMSOLL_TEST_DISABLED_URL)
    .runSnippet({ code: "console.log(1)", language: "javascript" })
    .catch((e) => e);
  assert.ok(err instanceof P.DisabledError, String(err));
  assert.equal(err.dispatched, false);
});

test("openSession on the wasm daemon: UnsupportedError", { skip }, async () => {
  const err = await wasm().openSession({ languages: ["python"] }).catch((e) => e);
  assert.ok(err instanceof P.UnsupportedError, String(err));
  assert.equal(err.code, "unimplemented");
});

test("nothing listens: InfrastructureError, dispatched", { skip: skip || needs("PLIMSOLL_TEST_DEAD_URL") }, async () => {
  const err = await mk(env.PLIMSOLL_TEST_DEAD_URL, { retry: true })
    .runSnippet({ code: "console.log(1)", language: "javascript" })
    .catch((e) => e);
  assert.ok(err instanceof P.InfrastructureError, String(err));
  assert.equal(err.dispatched, true);
  assert.equal(err.httpStatus, 0);
});

async function proxyCount() {
  const r = await fetch(env.PLIMSOLL_TEST_LOWERING_URL + "/__proxy/count");
  return (await r.json()).count;
}

test("a lowered tier: IsolationEvidenceMismatchError, never retried", { skip: skip || needs("PLIMSOLL_TEST_LOWERING_URL") }, async () => {
  const run = { code: "console.log(1)", language: "javascript", minimumIsolation: "process" };
  let err = await mk(env.PLIMSOLL_TEST_LOWERING_URL).runSnippet(run).catch((e) => e);
  assert.ok(err instanceof P.IsolationEvidenceMismatchError, String(err));
  assert.equal(err.code, "data_loss");
  assert.equal(err.dispatched, true);
  assert.equal(err.isolation, "none");
  assert.equal(err.recordIsolation, "process");
  const before = await proxyCount();
  err = await mk(env.PLIMSOLL_TEST_LOWERING_URL, { retry: { maxAttempts: 4, baseMs: 10, capMs: 20 } })
    .runSnippet(run)
    .catch((e) => e);
  assert.ok(err instanceof P.IsolationEvidenceMismatchError, String(err));
  assert.equal((await proxyCount()) - before, 1);
  // without a floor the lowered answer still fails its record
  err = await mk(env.PLIMSOLL_TEST_LOWERING_URL)
    .runSnippet({ code: "console.log(1)", language: "javascript" })
    .catch((e) => e);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.equal(err.broken, "response_sha256");
});

test("rate limited: refused without a retry policy, served with one", { skip: skip || needs("PLIMSOLL_TEST_RATE_URL", "PLIMSOLL_TEST_KEY_B") }, async () => {
  const run = { code: "console.log(1)", language: "javascript" };
  // one run per second per principal: use key A without retry
  const a = mk(env.PLIMSOLL_TEST_RATE_URL);
  let first = await a.runSnippet(run).catch((e) => e);
  if (first instanceof P.RateLimitedError) {
    await sleep(1100);
    first = await a.runSnippet(run);
  }
  assert.equal(first.exitCode, 0);
  const err = await a.runSnippet(run).catch((e) => e);
  assert.ok(err instanceof P.RateLimitedError, String(err));
  assert.equal(err.reason, "RATE_LIMITED");
  assert.equal(err.dispatched, false);
  // key B with a retry policy: the second quick run waits its turn
  const b = new Client({
    url: env.PLIMSOLL_TEST_RATE_URL,
    apiKey: env.PLIMSOLL_TEST_KEY_B,
    retry: { maxAttempts: 6, baseMs: 250, capMs: 2000 },
  });
  const r1 = await b.runSnippet(run);
  const r2 = await b.runSnippet(run);
  assert.equal(r1.exitCode, 0);
  assert.equal(r2.exitCode, 0);
});

test("at capacity: refused without a retry policy, served with one", { skip: skip || needs("PLIMSOLL_TEST_CAPACITY_URL") }, async () => {
  const c = mk(env.PLIMSOLL_TEST_CAPACITY_URL);
  const busy = () => c.runSnippet({ code: "for(;;){}", language: "javascript", timeoutMs: 1500 });
  let first = busy();
  await sleep(300);
  const err = await c.runSnippet({ code: "console.log(1)", language: "javascript" }).catch((e) => e);
  assert.ok(err instanceof P.AtCapacityError, String(err));
  assert.equal(err.code, "resource_exhausted");
  assert.equal(err.dispatched, false);
  const r = await first;
  assert.equal(r.timedOut, true);
  assert.notEqual(r.exitCode, 0);

  first = busy();
  await sleep(300);
  const t0 = Date.now();
  const retrying = mk(env.PLIMSOLL_TEST_CAPACITY_URL, { retry: { maxAttempts: 6, baseMs: 250, capMs: 2000 } });
  const r2 = await retrying.runSnippet({ code: "console.log(1)", language: "javascript" });
  assert.equal(r2.exitCode, 0);
  assert.equal(r2.stdout, "1\n");
  assert.ok(Date.now() - t0 >= 500, "it waited for the first run");
  await first;
});

test("the README's first example runs as written", { skip }, async () => {
  const { execFile } = await import("node:child_process");
  const { writeFileSync, mkdirSync } = await import("node:fs");
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const code = readme.match(/```ts\n([\s\S]*?)```/)[1];
  assert.ok(code.split("\n").filter(Boolean).length <= 11, "about ten lines");
  // inside the package, so that "@plimsoll/client" resolves to this build
  const dir = new URL("../dist/readme/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL("example.mjs", dir);
  writeFileSync(file, code);
  // what the README's reader has: PLIMSOLL_URL and a key file ending in a
  // newline, as keygen writes it; no PLIMSOLL_KEY
  const keyFile = new URL("key", dir);
  writeFileSync(keyFile, env.PLIMSOLL_TEST_KEY + "\n");
  const { PLIMSOLL_KEY: _, ...rest } = process.env;
  const out = await new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [file.pathname],
      { env: { ...rest, PLIMSOLL_URL: env.PLIMSOLL_TEST_URL, PLIMSOLL_KEY_FILE: keyFile.pathname } },
      (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout)),
    ),
  );
  assert.match(out, /^0 "42\\n" process [0-9a-f]{64}\nrefused; the daemon's tier is process\n$/);
});
