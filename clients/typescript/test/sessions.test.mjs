// SPDX-License-Identifier: Apache-2.0
// Sessions against the docker (runc) daemon of tests/clients/harness.py;
// skipped, saying so, when the harness has no PLIMSOLL_TEST_SESSION_URL.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as P from "../dist/index.js";
import { env, needs } from "./helpers.mjs";

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY", "PLIMSOLL_TEST_KEY_B");
if (skip) console.log(`# sessions skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);

const client = skip ? undefined : new P.Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY });
let session;
let closed = false;
const results = [];

after(async () => {
  if (session && !closed) await session.close().catch(() => undefined);
});

test("sessions: open, and describe says they are on", { skip }, async () => {
  const d = await client.describe();
  assert.equal(d.supportsSessions, true);
  assert.ok(d.languages.includes("python"), JSON.stringify(d.languages));
  session = await client.openSession({ languages: ["python"] });
  assert.ok(session instanceof P.Session);
  assert.match(session.id, /^[0-9a-f]{64}$/);
  assert.equal(session.chain.head, "");
});

test("sessions: a snippet writes a file", { skip }, async () => {
  const r = await session.runSnippet({ language: "python", code: "open('note.txt', 'w').write('kept')" });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.record.previous_digest, "");
  results.push(r);
});

test("sessions: cells keep the interpreter's state", { skip }, async () => {
  const r1 = await session.cell({ language: "python", code: "x = 41" });
  assert.equal(r1.exitCode, 0, r1.stderr);
  assert.equal(r1.interpreterStarted, true);
  const r2 = await session.cell({ language: "python", code: "x + 1", timeoutMs: 20000 });
  assert.equal(r2.exitCode, 0, r2.stderr);
  assert.equal(r2.stdout, "42\n");
  assert.equal(r2.interpreterStarted, false);
  results.push(r1, r2);
});

test("sessions: a project step reads the file an earlier call wrote", { skip }, async () => {
  const r = await session.runProject({
    steps: [{ name: "read", argv: ["python3", "-c", "print(open('note.txt').read())"] }],
  });
  assert.equal(r.exitCode, 0, r.stderr + r.steps.map((s) => s.stderr).join(""));
  assert.equal(r.steps[0].name, "read");
  assert.equal(r.steps[0].stdout, "kept\n");
  results.push(r);
});

test("sessions: a cell that raises is a result with exit code 1", { skip }, async () => {
  const r = await session.cell({ language: "python", code: "raise ValueError('nope')" });
  assert.equal(r.exitCode, 1);
  assert.match(r.stderr, /ValueError: nope/);
  results.push(r);
});

test("sessions: the chain is verified and its head is the last record's digest", { skip }, async () => {
  const entries = session.chain.entries;
  assert.equal(entries.length, results.length);
  assert.equal(session.chain.head, results.at(-1).record.digest);
  for (let i = 0; i < results.length; i++) {
    assert.equal(entries[i].record.digest, results[i].record.digest);
    assert.equal(results[i].record.previous_digest, i === 0 ? "" : results[i - 1].record.digest);
  }
  assert.equal(await P.verifyChain(entries), session.chain.head);
  // a kept list with an entry left out fails where it was taken out
  const err = await P.verifyChain([entries[0], ...entries.slice(2)]).catch((e) => e);
  assert.ok(err instanceof P.ChainError);
  assert.equal(err.index, 1);
  assert.equal(err.broken, "previous_digest");
});

test("sessions: another caller's key on the id is NotFoundError", { skip }, async () => {
  const b = new P.Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY_B });
  const err = await b.runCell(session.id, { language: "python", code: "x" }).catch((e) => e);
  assert.ok(err instanceof P.NotFoundError, String(err));
  assert.equal(err.dispatched, false);
  const err2 = await b.closeSession(session.id).catch((e) => e);
  assert.ok(err2 instanceof P.NotFoundError, String(err2));
});

test("sessions: a cell streams its output and extends the chain", { skip }, async () => {
  const streams = (await client.describe()).operations.session.streams;
  const chunks = [];
  const r = await session.cellStream({ language: "python", code: "for i in range(3): print('line', i, flush=True)" }, (c) => {
    chunks.push(c);
  });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout, "line 0\nline 1\nline 2\n");
  assert.equal(session.chain.head, r.record.digest);
  if (streams) {
    assert.ok(chunks.length > 0);
    assert.deepEqual(Buffer.concat(chunks.map((c) => c.stdout)), Buffer.from(r.stdoutBytes()));
  } else assert.equal(chunks.length, 0);
  results.push(r);
});

test("sessions: a call made around the Session object breaks its chain", { skip }, async () => {
  const head = session.chain.head;
  // the low-level call checks its record alone, so it passes
  const r = await client.runInSession(session.id, { snippet: { language: "python", code: "print('aside')" } });
  assert.equal(r.stdout, "aside\n");
  assert.equal(r.record.previous_digest, head);
  const err = await session.cell({ language: "python", code: "x" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.equal(err.broken, "previous_digest");
  assert.equal(err.index, results.length);
  assert.equal(session.chain.head, head, "the head did not advance");
  assert.equal(session.broken, err);
});

test("sessions: a closed session's calls are SessionEndedError with its reason", { skip }, async () => {
  await session.close();
  closed = true;
  const err = await session.cell({ language: "python", code: "x" }).catch((e) => e);
  assert.ok(err instanceof P.SessionEndedError, String(err));
  assert.equal(err.reason, "SESSION_ENDED");
  assert.equal(typeof err.endedReason, "string");
  assert.ok(err.endedReason.length > 0);
  if (err.metadata.ended_reason) assert.equal(err.endedReason, err.metadata.ended_reason);
  // another caller still learns nothing about it
  const b = new P.Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY_B });
  const err3 = await b.runInSession(session.id, { snippet: { language: "python", code: "print(1)" } }).catch((e) => e);
  assert.ok(err3 instanceof P.NotFoundError, String(err3));
  const err2 = await session.runSnippet({ language: "python", code: "print(1)" }).catch((e) => e);
  assert.ok(err2 instanceof P.SessionEndedError, String(err2));
});
