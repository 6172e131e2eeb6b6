// SPDX-License-Identifier: Apache-2.0
// Sessions behind a proxy (README.md, "Sessions behind a proxy (fleets)"): a
// Session sends its route as the Plimsoll-Route header with every later
// call, the calls by id take `{ route }`, a route is checked before
// anything is sent, and WRONG_ROUTE is WrongRouteError.  Against a fake
// fetch first, then the docker daemon of tests/clients/harness.py
// (PLIMSOLL_INSTANCE=clients-docker), skipped, saying so, without it.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as P from "../dist/index.js";
import { connectError, env, needs } from "./helpers.mjs";

const ID = "5e".repeat(32);
const HEADER = "Plimsoll-Route";
/** Every call a Session makes, in the order `everyCall` makes them. */
const SESSION_METHODS = [
  "RunInSession",
  "RunCell",
  "RunCellStream",
  "WriteFiles",
  "ReadFile",
  "ListFiles",
  "GetSession",
  "ExtendSession",
  "CloseSession",
];
const BAD_ROUTES = ["has space", "a/b", "x\r\nInjected: 1", "r".repeat(64), "é", "a:b"];

function wireInfo(over = {}) {
  return {
    session_id: ID,
    state: "ready",
    created_at: "2026-11-30T01:02:03.000000001Z",
    lifetime_deadline: "2026-11-30T02:02:03.000000001Z",
    previous_digest: "",
    ...over,
  };
}

/**
 * A fake fetch that records (method, the route header) of each call:
 * OpenSession answers `route` (none when undefined), GetSession and
 * ExtendSession a SessionInfo of it, every other call `refusal` (NOT_FOUND).
 */
function routeFetch(route, refusal = () => ({ status: 404, body: connectError("not_found", "NOT_FOUND", "no") })) {
  const calls = [];
  const f = async (url, init) => {
    const method = url.slice(url.lastIndexOf("/") + 1);
    calls.push([method, init.headers[HEADER]]);
    const extra = route === undefined ? {} : { route };
    let a;
    if (method === "OpenSession") a = { status: 200, body: { session_id: ID, ...extra } };
    else if (method === "GetSession" || method === "ExtendSession") a = { status: 200, body: wireInfo(extra) };
    else a = refusal();
    return new Response(JSON.stringify(a.body), { status: a.status, headers: { "Content-Type": "application/json" } });
  };
  f.calls = calls;
  return f;
}

function client(fetch, opts = {}) {
  return new P.Client({ url: "http://daemon.test", apiKey: "plk_k", fetch, ...opts });
}

/** Each call of `s` once; their errors are the fake's NOT_FOUND. */
async function everyCall(s) {
  for (const f of [
    () => s.runSnippet({ language: "python", code: "1" }),
    () => s.cell({ language: "python", code: "1" }),
    () => s.cellStream({ language: "python", code: "1" }),
    () => s.writeFiles([{ path: "a.txt", content: "a" }]),
    () => s.readFile("a.txt"),
    () => s.listFiles(),
  ]) {
    await assert.rejects(f(), P.NotFoundError);
  }
  await s.info();
  await s.extend(60);
  await assert.rejects(s.close(), P.NotFoundError);
}

test("routes: a Session sends its route with every later call", async () => {
  const f = routeFetch("daemon-1.eu_west");
  const s = await client(f).openSession({ languages: ["python"] });
  assert.equal(s.route, "daemon-1.eu_west");
  await everyCall(s);
  // the open itself goes anywhere
  assert.deepEqual(f.calls, [["OpenSession", undefined], ...SESSION_METHODS.map((m) => [m, "daemon-1.eu_west"])]);
});

test("routes: a daemon without routes gets no header", async () => {
  const f = routeFetch(undefined);
  const c = client(f);
  const s = await c.openSession();
  assert.equal(s.route, "");
  await everyCall(s);
  assert.deepEqual(f.calls.slice(1), SESSION_METHODS.map((m) => [m, undefined]));
  assert.equal((await c.getSession(ID)).route, "");
});

test("routes: the calls by id take a route", async () => {
  const f = routeFetch("d1");
  const c = client(f);
  const o = { route: "other-daemon" };
  assert.equal((await c.getSession(ID, o)).route, "d1");
  await c.extendSession(ID, 60, o);
  for (const call of [
    () => c.runInSession(ID, { snippet: { language: "python", code: "1" } }, o),
    () => c.runCell(ID, { language: "python", code: "1" }, undefined, o),
    () => c.runCellStream(ID, { language: "python", code: "1" }, undefined, undefined, o),
    () => c.writeFiles(ID, [{ path: "a", content: "a" }], o),
    () => c.readFile(ID, "a", { offset: 1, ...o }),
    () => c.listFiles(ID, o),
    () => c.listFiles(ID, "d", { depth: 2, ...o }),
    () => c.closeSession(ID, o),
  ]) {
    await assert.rejects(call(), P.NotFoundError);
  }
  assert.deepEqual(
    f.calls,
    ["GetSession", "ExtendSession", "RunInSession", "RunCell", "RunCellStream", "WriteFiles", "ReadFile", "ListFiles", "ListFiles", "CloseSession"].map(
      (m) => [m, "other-daemon"],
    ),
  );
  // none, or "": no header
  await c.getSession(ID);
  await c.getSession(ID, { route: "" });
  assert.deepEqual(f.calls.slice(10), [["GetSession", undefined], ["GetSession", undefined]]);
});

test("routes: connectSession takes a route, else the one GetSession answers", async () => {
  const f = routeFetch("answered");
  const c = client(f);
  let s = await c.connectSession(ID, { route: "given" });
  assert.equal(s.route, "given");
  await s.info();
  assert.deepEqual(f.calls, [["GetSession", "given"], ["GetSession", "given"]]);
  s = await c.connectSession(ID);
  assert.equal(s.route, "answered");
  await s.info();
  assert.deepEqual(f.calls.slice(2), [["GetSession", undefined], ["GetSession", "answered"]]);
});

test("routes: an invalid route is refused before anything is sent", async () => {
  const f = routeFetch("d1");
  const c = client(f);
  for (const bad of [...BAD_ROUTES, 7, null]) {
    const kind = typeof bad === "string" ? RangeError : TypeError;
    const o = { route: bad };
    for (const call of [
      () => c.getSession(ID, o),
      () => c.extendSession(ID, 60, o),
      () => c.connectSession(ID, o),
      () => c.runCell(ID, { language: "python", code: "1" }, undefined, o),
      () => c.runCellStream(ID, { language: "python", code: "1" }, undefined, undefined, o),
      () => c.writeFiles(ID, [{ path: "a", content: "a" }], o),
      () => c.readFile(ID, "a", o),
      () => c.listFiles(ID, o),
      () => c.closeSession(ID, o),
    ]) {
      await assert.rejects(call(), (e) => e instanceof kind && /route/.test(e.message), `${JSON.stringify(bad)}`);
    }
    assert.throws(() => new P.Session(c, ID, undefined, undefined, bad), kind);
  }
  assert.deepEqual(f.calls, []);
  await c.getSession(ID, { route: "r".repeat(63) }); // the longest is fine
});

test("routes: a route the daemon answers is checked", async () => {
  for (const bad of ["bad route", "r".repeat(64), 7]) {
    const c = client(routeFetch(bad));
    for (const call of [() => c.openSession(), () => c.getSession(ID), () => c.extendSession(ID, 60), () => c.connectSession(ID)]) {
      await assert.rejects(call(), P.ProtocolError, JSON.stringify(bad));
    }
  }
});

test("routes: WRONG_ROUTE is a WrongRouteError, never retried", async () => {
  const f = routeFetch("d1", () => ({
    status: 503,
    body: connectError("unavailable", "WRONG_ROUTE", "the call names route 'gone'"),
  }));
  const c = client(f, { retry: true });
  const s = new P.Session(c, ID, undefined, undefined, "gone");
  const err = await s.cell({ language: "python", code: "1" }).catch((e) => e);
  assert.ok(err instanceof P.WrongRouteError, String(err));
  assert.ok(err instanceof P.RefusalError);
  assert.deepEqual([err.reason, err.code, err.httpStatus, err.dispatched], ["WRONG_ROUTE", "unavailable", 503, false]);
  assert.match(err.message, /gone/);
  assert.deepEqual(f.calls, [["RunCell", "gone"]]);
  assert.equal(s.chain.length, 0);
});

// ---- against the harness's session daemon ---------------------------------

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY", "PLIMSOLL_TEST_SESSION_ROUTE");
if (skip) console.log(`# routes (live) skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);

test("routes: a session's route, and a call elsewhere", { skip }, async () => {
  const route = env.PLIMSOLL_TEST_SESSION_ROUTE;
  const c = new P.Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY });
  const s = await c.openSession({ languages: ["python"] });
  try {
    assert.equal(s.route, route);
    // its later calls carry it, and the daemon takes them
    assert.equal((await s.cell({ language: "python", code: "x = 41" })).exitCode, 0);
    await s.writeFiles([{ path: "r.txt", content: "r" }]);
    let info = await s.info();
    assert.deepEqual([info.route, info.calls], [route, 2]);

    // elsewhere: the daemon reached is not the session's; nothing runs
    const elsewhere = { route: "elsewhere" };
    const err = await c.runCell(s.id, { language: "python", code: "x = 0" }, undefined, elsewhere).catch((e) => e);
    assert.ok(err instanceof P.WrongRouteError, String(err));
    assert.deepEqual([err.reason, err.code, err.httpStatus, err.dispatched], ["WRONG_ROUTE", "unavailable", 503, false]);
    await assert.rejects(c.connectSession(s.id, elsewhere), P.WrongRouteError);
    await assert.rejects(c.runCellStream(s.id, { language: "python", code: "x = 0" }, undefined, undefined, elsewhere), P.WrongRouteError);
    await assert.rejects(c.writeFiles(s.id, [{ path: "r.txt", content: "no" }], elsewhere), P.WrongRouteError);
    info = await c.getSession(s.id, { route });
    assert.deepEqual([info.calls, info.previousDigest], [2, s.chain.head]);

    // the right route: a handle that works, its chain going on
    const r = await c.connectSession(s.id, { route });
    assert.equal(r.route, route);
    assert.equal((await r.cell({ language: "python", code: "print(x + 1)" })).stdout, "42\n");
    assert.equal(new TextDecoder().decode(await r.readAll("r.txt")), "r");
    assert.equal((await c.runCell(s.id, { language: "python", code: "print(x)" }, undefined, { route })).stdout, "41\n");

    // a route no daemon may have: refused before sending
    await assert.rejects(c.runCell(s.id, { language: "python", code: "1" }, undefined, { route: "no such/route" }), RangeError);
    assert.equal((await r.info()).calls, 5);
  } finally {
    await s.close().catch(() => undefined);
  }
});
