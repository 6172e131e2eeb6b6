// SPDX-License-Identifier: Apache-2.0
// Managing sessions: listSessions, getSession, extendSession, and
// connectSession (a Session for a session opened earlier, its chain going
// on from the session's previous_digest).  Against fake daemons first (what
// goes on the wire, how answers are read and refused), then against the
// docker (runc) daemon of tests/clients/harness.py, skipped, saying so,
// without PLIMSOLL_TEST_SESSION_URL; the README's examples of these calls
// run there too.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import * as P from "../dist/index.js";
import { answerFor, connectError, env, fakeFetch, needs, outputPattern, readmeExamples, RESPONSE } from "./helpers.mjs";

const { Client } = P;

function client(fetch, opts = {}) {
  return new Client({ url: "http://daemon.test/", apiKey: "plk_k", fetch, ...opts });
}

const ID = "5e".repeat(32);
const DIGEST = "d1".repeat(32);

/** A SessionInfo as the daemon sends it: every field present. */
function wireInfo(over = {}) {
  return {
    session_id: ID,
    state: "ready",
    ended_reason: "",
    created_at: "2026-11-30T01:02:03.000000001Z",
    last_call_at: "2026-11-30T01:02:04.500000000Z",
    idle_deadline: "2026-11-30T01:03:04.500000000Z",
    lifetime_deadline: "2026-11-30T02:02:03.000000001Z",
    ended_at: "",
    calls: 2,
    calls_waiting: 0,
    previous_digest: DIGEST,
    languages: ["python"],
    interpreters: [{ language: "python", alive: true }],
    disk_used_kib: 301,
    disk_budget_kib: 8192,
    max_lifetime_s: 86400,
    ...over,
  };
}

/** A fetch answering the three calls with `info`'s SessionInfo (the id asked for). */
function infoFetch(over = {}) {
  return fakeFetch((call) => {
    if (call.method === "ListSessions") return { body: { sessions: [wireInfo(over), wireInfo({ ...over, session_id: "0".repeat(64) })] } };
    return { body: wireInfo({ session_id: call.body.session_id, ...over }) };
  });
}

// ---- offline --------------------------------------------------------------

test("manage: the wire of ListSessions, GetSession and ExtendSession", async () => {
  const f = infoFetch();
  const c = client(f);
  await c.listSessions();
  await c.getSession(ID);
  await c.extendSession(ID, 900);
  assert.deepEqual(
    f.calls.map((x) => [x.url, x.text]),
    [
      ["http://daemon.test/plimsoll.v1.SandboxService/ListSessions", "{}"],
      ["http://daemon.test/plimsoll.v1.SandboxService/GetSession", `{"session_id":"${ID}"}`],
      ["http://daemon.test/plimsoll.v1.SandboxService/ExtendSession", `{"ends_in_s":900,"session_id":"${ID}"}`],
    ],
  );
  for (const x of f.calls) {
    assert.equal(x.headers["Content-Type"], "application/json");
    assert.equal(x.headers.Authorization, "Bearer plk_k");
  }
});

test("manage: a SessionInfo in camelCase, times as the daemon's strings, raw as sent", async () => {
  const i = await client(infoFetch()).getSession(ID);
  const raw = wireInfo();
  assert.deepEqual(i, {
    sessionId: ID,
    state: "ready",
    endedReason: "",
    createdAt: raw.created_at,
    lastCallAt: raw.last_call_at,
    idleDeadline: raw.idle_deadline,
    lifetimeDeadline: raw.lifetime_deadline,
    endedAt: "",
    calls: 2,
    callsWaiting: 0,
    previousDigest: DIGEST,
    languages: ["python"],
    interpreters: [{ language: "python", alive: true }],
    diskUsedKib: 301,
    diskBudgetKib: 8192,
    maxLifetimeS: 86400,
    route: "",
    raw,
  });
});

test("manage: listSessions gives each session in the daemon's order; none when the list is left out", async () => {
  const list = await client(infoFetch({ state: "ended", ended_reason: "its owner closed it", lifetime_deadline: "" })).listSessions();
  assert.deepEqual(list.map((i) => [i.sessionId, i.state, i.endedReason]), [
    [ID, "ended", "its owner closed it"],
    ["0".repeat(64), "ended", "its owner closed it"],
  ]);
  // proto3 JSON: an empty list may be left out, or null
  for (const body of [{}, { sessions: null }, { sessions: [] }]) {
    assert.deepEqual(await client(fakeFetch(() => ({ body }))).listSessions(), []);
  }
  // fields left out (or null) are their defaults
  const sparse = await client(fakeFetch(() => ({ body: { sessions: [{ session_id: ID, state: "paused", calls: null }] } }))).listSessions();
  assert.deepEqual(
    [sparse[0].state, sparse[0].calls, sparse[0].previousDigest, sparse[0].languages, sparse[0].interpreters, sparse[0].createdAt],
    ["paused", 0, "", [], [], ""],
  );
});

const MALFORMED = [
  ["a session_id that is not a string", { session_id: 5 }],
  ["no session_id", { session_id: undefined }],
  ["an empty session_id", { session_id: "" }],
  ["a null session_id", { session_id: null }],
  ["a state the client does not know", { state: "running" }],
  ["no state", { state: undefined }],
  ["a state that is not a string", { state: true }],
  ["calls as a string", { calls: "2" }],
  ["calls below 0", { calls: -1 }],
  ["calls_waiting past uint32", { calls_waiting: 2 ** 32 }],
  ["disk_used_kib not an integer", { disk_used_kib: 1.5 }],
  ["a time that is not a string", { created_at: 1764464523 }],
  ["ended_reason not a string", { ended_reason: ["closed"] }],
  ["languages not an array", { languages: "python" }],
  ["a language not a string", { languages: [1] }],
  ["interpreters not an array", { interpreters: { language: "python", alive: true } }],
  ["an interpreter's alive not a bool", { interpreters: [{ language: "python", alive: "yes" }] }],
  ["a null interpreter", { interpreters: [null] }],
  ["previous_digest not a digest", { previous_digest: "D1".repeat(32) }],
  ["previous_digest not a string", { previous_digest: 0 }],
];

for (const [name, over] of MALFORMED) {
  test(`manage: ${name} is a ProtocolError of each call`, async () => {
    const bad = JSON.parse(JSON.stringify(wireInfo(over)));
    const calls = [
      ["GetSession", (c) => c.getSession(ID)],
      ["ExtendSession", (c) => c.extendSession(ID, 60)],
      ["ListSessions", (c) => c.listSessions()],
      ["GetSession", (c) => c.connectSession(ID)],
    ];
    for (const [method, call] of calls) {
      const f = fakeFetch((x) => ({ body: x.method === "ListSessions" ? { sessions: [wireInfo(), bad] } : bad }));
      const err = await call(client(f)).catch((e) => e);
      assert.ok(err instanceof P.ProtocolError, `${method}: ${err}`);
      assert.ok(err instanceof P.InfrastructureError);
      assert.equal(err.code, "unknown");
      assert.equal(err.httpStatus, 200);
      assert.match(err.message, new RegExp(`^${method}: HTTP 200 with an answer that breaks the protocol`));
      // the member that breaks it is named (a number's lexeme is refused before, by the scan)
      if (method === "ListSessions") assert.match(err.message, /sessions\[1\]|not an integer/);
      assert.equal(f.calls.length, 1, "connectSession made no handle of it");
    }
  });
}

test("manage: a list that is not a list of objects is a ProtocolError", async () => {
  for (const body of [{ sessions: {} }, { sessions: [null] }, { sessions: ["x"] }, [], "x"]) {
    const err = await client(fakeFetch(() => ({ body }))).listSessions().catch((e) => e);
    assert.ok(err instanceof P.ProtocolError, `${JSON.stringify(body)}: ${err}`);
  }
});

test("manage: an answer about another session than the one asked for is a ProtocolError", async () => {
  const f = fakeFetch(() => ({ body: wireInfo({ session_id: "0".repeat(64) }) }));
  for (const call of [(c) => c.getSession(ID), (c) => c.extendSession(ID, 60), (c) => c.connectSession(ID)]) {
    const err = await call(client(f)).catch((e) => e);
    assert.ok(err instanceof P.ProtocolError, String(err));
    assert.match(err.message, /not the one asked for/);
  }
});

test("manage: members the client does not know are kept in raw, not refused", async () => {
  const i = await client(fakeFetch(() => ({ body: wireInfo({ owner_note: { x: 1 } }) }))).getSession(ID);
  assert.deepEqual(i.raw.owner_note, { x: 1 });
});

test("manage: a bad session id or endsInS is refused before anything is sent", async () => {
  const f = infoFetch();
  const c = client(f);
  for (const id of [undefined, null, 5, { id: ID }]) {
    await assert.rejects(c.getSession(id), TypeError);
    await assert.rejects(c.extendSession(id, 60), TypeError);
    await assert.rejects(c.connectSession(id), TypeError);
  }
  for (const call of [() => c.getSession(""), () => c.extendSession("", 60), () => c.connectSession("")]) {
    await assert.rejects(call(), RangeError);
  }
  for (const n of [undefined, null, "60", 60n]) {
    await assert.rejects(c.extendSession(ID, n), (e) => e instanceof TypeError && /endsInS must be a number/.test(e.message));
  }
  for (const n of [0, -1, 1.5, 2 ** 32, Number.NaN, Infinity]) {
    await assert.rejects(c.extendSession(ID, n), (e) => e instanceof RangeError && /endsInS must be an integer from 1 to 4294967295/.test(e.message));
  }
  await assert.rejects(c.connectSession(ID, { minimumIsolation: "steel" }), RangeError);
  assert.equal(f.calls.length, 0);
  // the bounds themselves are sent
  await c.extendSession(ID, 1);
  await c.extendSession(ID, 2 ** 32 - 1);
  assert.deepEqual(f.calls.map((x) => x.body.ends_in_s), [1, 2 ** 32 - 1]);
});

test("manage: refusals are the typed errors (NOT_FOUND, SESSION_ENDED, INVALID_REQUEST, UNSUPPORTED)", async () => {
  const cases = [
    [404, connectError("not_found", "NOT_FOUND", "session_id: no such session for this caller", { dispatched: "false" }), P.NotFoundError],
    [400, connectError("failed_precondition", "SESSION_ENDED", "the session has ended: its owner closed it", { dispatched: "false", ended_reason: "its owner closed it" }), P.SessionEndedError],
    [400, connectError("invalid_argument", "INVALID_REQUEST", "ends_in_s: 90000 s from now is past this daemon's SANDBOX_SESSION_MAX_LIFETIME (86400 s from the session's open); at most 86390", { dispatched: "false" }), P.InvalidRequestError],
    [501, connectError("unimplemented", "UNSUPPORTED", "sessions are off", { dispatched: "false" }), P.UnsupportedError],
  ];
  for (const [status, body, cls] of cases) {
    const f = fakeFetch(() => ({ status, body }));
    for (const call of [(c) => c.listSessions(), (c) => c.getSession(ID), (c) => c.extendSession(ID, 90000), (c) => c.connectSession(ID)]) {
      const err = await call(client(f)).catch((e) => e);
      assert.ok(err instanceof cls, `${body.details[0].debug.reason}: ${err}`);
      assert.equal(err.dispatched, false);
      assert.equal(err.httpStatus, status);
      if (cls === P.SessionEndedError) assert.equal(err.endedReason, "its owner closed it");
    }
  }
});

test("manage: connectSession takes the session up with its chain at previous_digest", async () => {
  const f = fakeFetch(async (call) => {
    if (call.method === "GetSession") return { body: wireInfo({ session_id: call.body.session_id }) };
    const { session_id, ...rest } = call.body;
    assert.equal(session_id, ID);
    // the first call names the last record made before the handle; the next names the first
    const previous = call.method === "RunCell" ? DIGEST : f.calls.at(-2).digest;
    const body = await answerFor(rest.run ?? rest, RESPONSE, { previous });
    call.digest = body.record.digest;
    return { body };
  });
  const s = await client(f).connectSession(ID, { minimumIsolation: "process" });
  assert.ok(s instanceof P.Session);
  assert.equal(s.id, ID);
  assert.equal(s.minimumIsolation, "process");
  assert.deepEqual([s.chain.start, s.chain.head, s.chain.length], [DIGEST, DIGEST, 0]);
  const r1 = await s.cell({ language: "python", code: "x" });
  assert.equal(r1.record.previous_digest, DIGEST);
  const r2 = await s.runSnippet({ language: "python", code: "print(2)" });
  assert.equal(f.calls[2].body.run.minimum_isolation, "process", "the floor is sent");
  assert.equal(r2.record.previous_digest, r1.record.digest);
  assert.deepEqual([s.chain.head, s.chain.length], [r2.record.digest, 2]);
  assert.equal(await s.chain.verify(), r2.record.digest, "the kept entries verify from the start digest");
  assert.equal(await P.verifyChain(s.chain.entries, s.chain.start), r2.record.digest);
});

test("manage: a reconnected handle checks the chain: a record not naming previous_digest is a ChainError", async () => {
  const f = fakeFetch(async (call) => {
    if (call.method === "GetSession") return { body: wireInfo() };
    const { session_id, ...rest } = call.body;
    return { body: await answerFor(rest, RESPONSE, { previous: "" }) };
  });
  const s = await client(f).connectSession(ID);
  const err = await s.cell({ language: "python", code: "x" }).catch((e) => e);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.deepEqual([err.broken, err.index], ["previous_digest", 0]);
  assert.equal(s.chain.head, DIGEST);
  assert.equal(s.broken, err);
});

test("manage: a fresh session (no call yet) is taken up with an empty chain", async () => {
  const f = fakeFetch(async (call) => {
    if (call.method === "GetSession") return { body: wireInfo({ previous_digest: "", calls: 0 }) };
    const { session_id, ...rest } = call.body;
    return { body: await answerFor(rest, RESPONSE, { previous: "" }) };
  });
  const s = await client(f).connectSession(ID);
  assert.equal(s.chain.start, "");
  const r = await s.cell({ language: "python", code: "x" });
  assert.equal(s.chain.head, r.record.digest);
});

test("manage: connectSession refuses an ended session with SessionEndedError, sending nothing more", async () => {
  const f = fakeFetch(() => ({ body: wireInfo({ state: "ended", ended_reason: "the session reached SANDBOX_SESSION_LIFETIME", lifetime_deadline: "", ended_at: "2026-11-30T02:02:03.100000000Z" }) }));
  const err = await client(f).connectSession(ID).catch((e) => e);
  assert.ok(err instanceof P.SessionEndedError, String(err));
  assert.ok(err instanceof P.RefusalError);
  assert.deepEqual(
    [err.reason, err.code, err.dispatched, err.endedReason, err.metadata.ended_reason, err.httpStatus],
    ["SESSION_ENDED", "failed_precondition", false, "the session reached SANDBOX_SESSION_LIFETIME", "the session reached SANDBOX_SESSION_LIFETIME", 200],
  );
  assert.equal(err.message, "the session has ended: the session reached SANDBOX_SESSION_LIFETIME");
  assert.equal(f.calls.length, 1);
  // a paused one is taken up: its next call resumes it
  const paused = await client(infoFetch({ state: "paused", idle_deadline: "" })).connectSession(ID);
  assert.equal(paused.chain.start, DIGEST);
});

test("manage: Session.info and Session.extend ask about the session at once, not after its calls", async () => {
  let release;
  const held = new Promise((r) => (release = r));
  const f = fakeFetch(async (call) => {
    if (call.method === "GetSession" || call.method === "ExtendSession") {
      return { body: wireInfo({ session_id: call.body.session_id, calls_waiting: 1 }) };
    }
    await held;
    const { session_id, ...rest } = call.body;
    return { body: await answerFor(rest, RESPONSE, { previous: "" }) };
  });
  const c = client(f);
  const s = new P.Session(c, ID);
  const running = s.cell({ language: "python", code: "import time; time.sleep(9)" });
  await new Promise((r) => setTimeout(r, 10));
  const i = await s.info();
  const e = await s.extend(120);
  assert.equal(i.callsWaiting, 1);
  assert.equal(e.sessionId, ID);
  assert.deepEqual(f.calls.map((x) => x.method), ["RunCell", "GetSession", "ExtendSession"]);
  assert.deepEqual(f.calls[2].body, { session_id: ID, ends_in_s: 120 });
  release();
  await running;
  await assert.rejects(s.extend(0), RangeError);
});

test("manage: the calls go through the retry policy like any other", async () => {
  let n = 0;
  const f = fakeFetch(() =>
    n++ === 0
      ? { status: 429, body: connectError("resource_exhausted", "RATE_LIMITED", "slow down", { dispatched: "false" }) }
      : { body: wireInfo() },
  );
  const i = await client(f, { retry: { maxAttempts: 2, baseMs: 1, capMs: 1 } }).getSession(ID);
  assert.equal(i.sessionId, ID);
  assert.equal(f.calls.length, 2);
});

// ---- against the docker session daemon --------------------------------------

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY", "PLIMSOLL_TEST_KEY_B");
if (skip) console.log(`# managing sessions against a daemon skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);

const live = (key = env.PLIMSOLL_TEST_KEY) => new Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: key });
// each test closes its sessions; these are closed after, should a test fail first
const opened = [];

after(async () => {
  for (const s of opened) await s.close().catch(() => undefined);
});

/** RFC 3339 UTC with nine fraction digits, in ms (the fraction's first three digits). */
const ms = (t) => Date.parse(t);
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

test("daemon: listSessions shows the caller's own sessions, never another caller's", { skip }, async () => {
  const a = live();
  const b = live(env.PLIMSOLL_TEST_KEY_B);
  const a1 = await a.openSession({ languages: ["python"] });
  opened.push(a1);
  const b1 = await b.openSession();
  opened.push(b1);
  const mine = await a.listSessions();
  const theirs = await b.listSessions();
  const ids = (list) => list.map((i) => i.sessionId);
  assert.ok(ids(mine).includes(a1.id), JSON.stringify(ids(mine)));
  assert.ok(!ids(mine).includes(b1.id), "another caller's session is not listed");
  assert.ok(ids(theirs).includes(b1.id));
  assert.ok(!ids(theirs).includes(a1.id));
  const one = mine.find((i) => i.sessionId === a1.id);
  assert.equal(one.state, "ready");
  assert.deepEqual(one.languages, ["python"]);
  assert.match(one.createdAt, RFC3339);
  // oldest open first
  const created = mine.filter((i) => i.state !== "ended").map((i) => i.createdAt);
  assert.deepEqual(created, [...created].sort());
  // closed, it stays listed a while, ended, with its reason
  await b1.close();
  const after = (await b.listSessions()).find((i) => i.sessionId === b1.id);
  assert.deepEqual([after?.state, after?.endedReason, after?.lifetimeDeadline], ["ended", "its owner closed it", ""]);
  assert.match(after.endedAt, RFC3339);
  await a1.close();
});

test("daemon: getSession after calls gives calls and previous_digest, the last record's digest", { skip }, async () => {
  const c = live();
  const s = await c.openSession({ languages: ["python"] });
  opened.push(s);
  const fresh = await s.info();
  assert.deepEqual([fresh.sessionId, fresh.state, fresh.calls, fresh.callsWaiting, fresh.previousDigest, fresh.lastCallAt], [s.id, "ready", 0, 0, "", ""]);
  assert.equal(fresh.maxLifetimeS >= 600, true, String(fresh.maxLifetimeS));
  assert.equal(fresh.diskBudgetKib, 8 << 10);
  await s.cell({ language: "python", code: "x = 41" });
  const r = await s.runSnippet({ language: "python", code: "print('two')" });
  const i = await c.getSession(s.id);
  assert.equal(i.calls, 2);
  assert.equal(i.previousDigest, r.record.digest);
  assert.equal(i.previousDigest, s.chain.head);
  assert.match(i.lastCallAt, RFC3339);
  assert.ok(i.lastCallAt >= i.createdAt);
  assert.deepEqual(i.interpreters.map((x) => [x.language, x.alive]), [["python", true]]);
  assert.equal(i.raw.session_id, s.id);
  await s.close();
});

test("daemon: extendSession moves lifetime_deadline; past the maximum is InvalidRequestError", { skip }, async () => {
  const c = live();
  const s = await c.openSession();
  opened.push(s);
  const before = await s.info();
  const created = ms(before.createdAt);
  assert.ok(Math.abs(ms(before.lifetimeDeadline) - created - 600_000) < 2000, JSON.stringify(before));
  const e = await c.extendSession(s.id, 1200);
  assert.equal(e.sessionId, s.id);
  assert.ok(e.lifetimeDeadline > before.lifetimeDeadline, `${e.lifetimeDeadline} after ${before.lifetimeDeadline}`);
  assert.ok(Math.abs(ms(e.lifetimeDeadline) - created - 1_200_000) < 5000, JSON.stringify(e));
  assert.equal((await s.info()).lifetimeDeadline, e.lifetimeDeadline);
  // sooner is allowed too
  const sooner = await s.extend(300);
  assert.ok(sooner.lifetimeDeadline < e.lifetimeDeadline);
  // past SANDBOX_SESSION_MAX_LIFETIME from the open: refused, nothing changed
  const err = await s.extend(e.maxLifetimeS + 1).catch((x) => x);
  assert.ok(err instanceof P.InvalidRequestError, String(err));
  assert.deepEqual([err.reason, err.code, err.dispatched], ["INVALID_REQUEST", "invalid_argument", false]);
  assert.match(err.message, /SANDBOX_SESSION_MAX_LIFETIME/);
  const most = Number(/at most (\d+)$/.exec(err.message)?.[1]);
  assert.ok(most <= e.maxLifetimeS && most >= e.maxLifetimeS - 60, err.message);
  assert.equal((await s.info()).lifetimeDeadline, sooner.lifetimeDeadline);
  // the most it may ask now is granted
  const longest = await s.extend(most - 5);
  assert.ok(longest.lifetimeDeadline > sooner.lifetimeDeadline);
  // an ended session: SessionEndedError with the daemon's reason
  await s.close();
  const ended = await s.extend(60).catch((x) => x);
  assert.ok(ended instanceof P.SessionEndedError, String(ended));
  assert.equal(ended.endedReason, "its owner closed it");
});

test("daemon: connectSession continues the chain: a call through the new handle passes the chain check", { skip }, async () => {
  const c = live();
  const s = await c.openSession({ languages: ["python"] });
  opened.push(s);
  await s.cell({ language: "python", code: "x = 41" });
  const last = await s.cell({ language: "python", code: "x += 1" });
  // another client, as another process would have
  const again = await live().connectSession(s.id, { minimumIsolation: "container" });
  assert.ok(again instanceof P.Session);
  assert.deepEqual([again.id, again.chain.start, again.chain.head], [s.id, last.record.digest, last.record.digest]);
  const r = await again.cell({ language: "python", code: "x" });
  assert.equal(r.stdout, "42\n", r.stderr);
  assert.equal(r.record.previous_digest, last.record.digest);
  const r2 = await again.runSnippet({ language: "python", code: "print('next')" });
  assert.equal(r2.record.previous_digest, r.record.digest);
  assert.deepEqual([again.chain.length, again.chain.head], [2, r2.record.digest]);
  assert.equal(await again.chain.verify(), r2.record.digest);
  const i = await again.info();
  assert.deepEqual([i.calls, i.previousDigest], [4, again.chain.head]);
  // the first handle's chain is now behind: its next call is a ChainError
  const err = await s.cell({ language: "python", code: "x" }).catch((x) => x);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.equal(err.broken, "previous_digest");
  // once closed, it cannot be taken up again
  await again.close();
  const ended = await c.connectSession(s.id).catch((x) => x);
  assert.ok(ended instanceof P.SessionEndedError, String(ended));
  assert.equal(ended.endedReason, "its owner closed it");
});

test("daemon: another caller's id is NotFoundError, as an unknown one, for each call", { skip }, async () => {
  const a = live();
  const s = await a.openSession();
  opened.push(s);
  const b = live(env.PLIMSOLL_TEST_KEY_B);
  for (const call of [(x) => b.getSession(x), (x) => b.extendSession(x, 60), (x) => b.connectSession(x)]) {
    const theirs = await call(s.id).catch((e) => e);
    const unknown = await call("0".repeat(64)).catch((e) => e);
    assert.ok(theirs instanceof P.NotFoundError, String(theirs));
    assert.ok(unknown instanceof P.NotFoundError, String(unknown));
    assert.deepEqual([theirs.code, theirs.message, theirs.httpStatus, theirs.dispatched], [unknown.code, unknown.message, unknown.httpStatus, false]);
  }
  // their tries changed nothing
  const i = await s.info();
  assert.ok(Math.abs(ms(i.lifetimeDeadline) - ms(i.createdAt) - 600_000) < 2000, JSON.stringify(i));
  await s.close();
});

// ---- the README's examples of these calls -------------------------------------

test("manage: the README shows each new call in a run example with its output", () => {
  const examples = readmeExamples("Managing sessions");
  assert.ok(examples.length >= 2, String(examples.length));
  const all = examples.map((e) => e.code).join("\n");
  for (const name of ["listSessions(", "getSession(", "extendSession(", "connectSession(", ".info(", ".extend("]) {
    assert.ok(all.includes(name), `the README's examples use ${name}`);
  }
  assert.match("a 1 b\nx\ny\n", outputPattern("a … b\n…\n"));
});

test("daemon: the README's examples of managing sessions run as written", { skip }, async () => {
  const { execFile } = await import("node:child_process");
  const { mkdirSync, writeFileSync } = await import("node:fs");
  // inside the package, so that "@plimsoll/client" resolves to this build
  const dir = new URL("../dist/readme-manage/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const keyFile = new URL("key", dir);
  writeFileSync(keyFile, env.PLIMSOLL_TEST_KEY + "\n");
  const { PLIMSOLL_KEY: _, ...rest } = process.env;
  const examples = readmeExamples("Managing sessions");
  for (const [n, { code, output }] of examples.entries()) {
    // what tsc leaves of a TypeScript example: its type annotations, if any, are
    // the README's to avoid, so that the block runs as plain JavaScript too
    const file = new URL(`example${n}.mjs`, dir);
    writeFileSync(file, code);
    const out = await new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        [file.pathname],
        { env: { ...rest, PLIMSOLL_URL: env.PLIMSOLL_TEST_SESSION_URL, PLIMSOLL_KEY_FILE: keyFile.pathname } },
        (err, stdout, stderr) => (err ? reject(new Error(`example ${n}: ${stderr || err}`)) : resolve(stdout)),
      ),
    );
    assert.match(out, outputPattern(output), `example ${n} printed:\n${out}`);
  }
});
