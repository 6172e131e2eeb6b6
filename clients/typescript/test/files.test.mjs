// SPDX-License-Identifier: Apache-2.0
// A session's files: writeFiles, readFile, listFiles (on Session, their
// records joining its chain, and on Client, each record checked alone),
// and Session's readAll, download and upload.  Against fake daemons first
// (what goes on the wire, how answers are read and refused, how an upload
// is packed into calls), then against the docker (runc) daemon of
// tests/clients/harness.py, skipped, saying so, without
// PLIMSOLL_TEST_SESSION_URL; the README's examples of these calls run there
// too.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as P from "../dist/index.js";
import { answerFor, connectError, env, fakeFetch, needs, outputPattern, readmeExamples, RESPONSE } from "./helpers.mjs";

const { Client } = P;

function client(fetch, opts = {}) {
  return new Client({ url: "http://daemon.test/", apiKey: "plk_k", fetch, ...opts });
}

const ID = "f1".repeat(32);
const MiB = 1024 * 1024;
const utf8 = new TextEncoder();

const temps = [];
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), "plimsoll-ts-files-"));
  temps.push(d);
  return d;
}
after(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

/** Is `bytes` UTF-8? */
function isUtf8(bytes) {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/**
 * A fake session daemon: a work directory in memory (path -> bytes) and a
 * chain (each record names the last one's digest).  It answers WriteFiles,
 * ReadFile (`pageLimit` the default and most), ListFiles (the files, and
 * the directories on their paths) and RunCell, with records right for
 * what was sent; `tamper(method, body)` may change an answer before its
 * record is made.
 */
function fileDaemon({ pageLimit = 4 * MiB, tamper = (m, b) => b, isolation = "container" } = {}) {
  const files = new Map();
  let head = "";
  const f = fakeFetch(async (call) => {
    const { session_id, ...rest } = call.body;
    assert.equal(session_id, ID);
    let body;
    if (call.method === "WriteFiles") {
      let bytes = 0;
      for (const w of rest.files) {
        const b = w.content_base64 !== undefined ? Buffer.from(w.content_base64, "base64") : utf8.encode(w.content ?? "");
        files.set(w.path, new Uint8Array(b));
        bytes += b.length;
      }
      body = { files: rest.files.length, bytes };
    } else if (call.method === "ReadFile") {
      const all = files.get(rest.path);
      if (!all) return { status: 404, body: connectError("not_found", "NOT_FOUND", "path: nothing of that name in the work directory") };
      const offset = rest.offset ?? 0;
      const limit = rest.limit || pageLimit;
      const part = all.subarray(Math.min(offset, all.length), Math.min(offset + limit, all.length));
      body = { path: rest.path, size: all.length, offset, content: new TextDecoder().decode(part), length: part.length, more: offset + part.length < all.length };
      if (!isUtf8(part)) body.content_base64 = Buffer.from(part).toString("base64");
    } else if (call.method === "ListFiles") {
      const dirs = new Set();
      for (const p of files.keys()) {
        const segs = p.split("/");
        for (let i = 1; i < segs.length; i++) dirs.add(segs.slice(0, i).join("/"));
      }
      const entries = [...dirs].map((p) => ({ path: p, type: "directory", size: 4096, mode: 0o755, modified_at: "2026-11-30T01:02:03.000000001Z" }));
      for (const [p, b] of files) entries.push({ path: p, type: "file", size: b.length, mode: 0o644, modified_at: "2026-11-30T01:02:03.000000001Z" });
      entries.sort((a, b) => (a.path < b.path ? -1 : 1));
      body = { entries, truncated: false };
    } else {
      body = { ...RESPONSE };
    }
    body = tamper(call.method, body, rest);
    const answer = await answerFor(rest, body, { previous: head, record: { provider: "docker", isolation } });
    head = answer.record.digest;
    return { body: answer };
  });
  f.files = files;
  return f;
}

// ---- offline: the wire -------------------------------------------------------

test("files: the wire of WriteFiles, ReadFile and ListFiles: proto names, only what was set", async () => {
  const f = fileDaemon();
  const c = client(f);
  await c.writeFiles(ID, [
    { path: "a.txt", content: "hi\n" },
    { path: "b.bin", content: new Uint8Array([0, 255]) },
    { path: "c.bin", contentBase64: "AQI=" },
    { path: "empty" },
  ]);
  await c.readFile(ID, "a.txt");
  await c.readFile(ID, "a.txt", { offset: 1, limit: 1 });
  await c.readFile(ID, "a.txt", { offset: 0 });
  await c.listFiles(ID);
  await c.listFiles(ID, "");
  await c.listFiles(ID, { depth: 2 });
  await c.listFiles(ID, "sub", { depth: 0 });
  await c.listFiles(ID, undefined, { depth: 3 });
  const at = (m) => `http://daemon.test/plimsoll.v1.SandboxService/${m}`;
  assert.deepEqual(
    f.calls.map((x) => [x.url, x.text]),
    [
      [at("WriteFiles"), `{"files":[{"content":"hi\\n","path":"a.txt"},{"content_base64":"AP8=","path":"b.bin"},{"content_base64":"AQI=","path":"c.bin"},{"path":"empty"}],"session_id":"${ID}"}`],
      [at("ReadFile"), `{"path":"a.txt","session_id":"${ID}"}`],
      [at("ReadFile"), `{"limit":1,"offset":1,"path":"a.txt","session_id":"${ID}"}`],
      [at("ReadFile"), `{"offset":0,"path":"a.txt","session_id":"${ID}"}`],
      [at("ListFiles"), `{"session_id":"${ID}"}`],
      [at("ListFiles"), `{"path":"","session_id":"${ID}"}`],
      [at("ListFiles"), `{"depth":2,"session_id":"${ID}"}`],
      [at("ListFiles"), `{"depth":0,"path":"sub","session_id":"${ID}"}`],
      [at("ListFiles"), `{"depth":3,"session_id":"${ID}"}`],
    ],
  );
  for (const x of f.calls) {
    assert.equal(x.headers["Content-Type"], "application/json");
    assert.equal(x.headers.Authorization, "Bearer plk_k");
  }
});

test("files: the typed answers: bytes exact, text when UTF-8, path bytes exact", async () => {
  const f = fileDaemon();
  const c = client(f);
  const w = await c.writeFiles(ID, [
    { path: "t/a.txt", content: "héllo\n" },
    { path: "t/b.bin", content: new Uint8Array([0x68, 0xff, 0x00, 0x0a]) },
  ]);
  assert.deepEqual([w.files, w.bytes, w.raw.files], [2, 11, 2]);
  assert.equal(w.record.request_sha256, await P.sha256Hex(P.canonical({ files: f.calls[0].body.files })));
  const t = await c.readFile(ID, "t/a.txt");
  assert.deepEqual([t.path, t.size, t.offset, t.length, t.more, t.text], ["t/a.txt", 7, 0, 7, false, "héllo\n"]);
  assert.deepEqual(t.content, utf8.encode("héllo\n"));
  assert.ok(t.content instanceof Uint8Array);
  const b = await c.readFile(ID, "t/b.bin", { offset: 1, limit: 2 });
  assert.deepEqual([b.size, b.offset, b.length, b.more, b.text], [4, 1, 2, true, undefined]);
  assert.deepEqual(b.content, new Uint8Array([0xff, 0x00]));
  assert.equal(b.raw.content, "\ufffd\u0000", "content is the lossy copy; content_base64 the bytes");
  const l = await c.listFiles(ID, { depth: 2 });
  assert.deepEqual(
    l.entries.map((e) => [e.path, e.type, e.size, e.mode, e.modifiedAt]),
    [
      ["t", "directory", 4096, 0o755, "2026-11-30T01:02:03.000000001Z"],
      ["t/a.txt", "file", 7, 0o644, "2026-11-30T01:02:03.000000001Z"],
      ["t/b.bin", "file", 4, 0o644, "2026-11-30T01:02:03.000000001Z"],
    ],
  );
  assert.deepEqual(l.entries[1].pathBytes, utf8.encode("t/a.txt"));
  assert.equal(l.truncated, false);
  assert.equal(l.record.isolation, "container");
  // a name that is not UTF-8: path is lossy, pathBytes exact (from path_base64)
  const odd = client(fakeFetch(async ({ body: { session_id, ...rest } }) => ({
    body: await answerFor(rest, { entries: [{ path: "n\ufffd", path_base64: "bv8=", type: "file", size: 1, mode: 420, modified_at: "" }], truncated: true }),
  })));
  const o = await odd.listFiles(ID);
  assert.deepEqual([o.entries[0].path, o.entries[0].pathBytes, o.truncated], ["n\ufffd", new Uint8Array([0x6e, 0xff]), true]);
  // proto3 JSON: members left out (or null) are their defaults
  const sparse = client(fakeFetch(async ({ method, body: { session_id, ...rest } }) => ({
    body: await answerFor(rest, method === "ReadFile" ? { path: "e", content: null } : method === "ListFiles" ? { entries: null } : {}),
  })));
  const e = await sparse.readFile(ID, "e");
  assert.deepEqual([e.size, e.length, e.more, e.text, e.content], [0, 0, false, "", new Uint8Array(0)]);
  assert.deepEqual((await sparse.listFiles(ID)).entries, []);
  assert.deepEqual([(await sparse.writeFiles(ID, [{ path: "x" }])).files], [0]);
});

test("files: describe gives operations.files and the new limits", async () => {
  const d = await client(
    fakeFetch(() => ({
      body: {
        operations: { files: { supported: true, engine: "plimsoll's files reader", max_timeout_ms: 60000 } },
        limits: { file_read_bytes: 4194304, file_list_entries: 1000, session_max_lifetime_s: 86400 },
      },
    })),
  ).describe();
  assert.deepEqual([d.operations.files.supported, d.operations.files.engine, d.operations.files.maxTimeoutMs], [true, "plimsoll's files reader", 60000]);
  assert.deepEqual([d.limits.fileReadBytes, d.limits.fileListEntries, d.limits.sessionMaxLifetimeS], [4194304, 1000, 86400]);
  const none = await client(fakeFetch(() => ({ body: {} }))).describe();
  assert.deepEqual([none.operations.files.supported, none.limits.fileReadBytes], [false, 0]);
  for (const body of [
    { operations: { files: { supported: "yes" } } },
    { operations: { files: [] } },
    { limits: { file_read_bytes: -1 } },
    { limits: { file_list_entries: "1000" } },
    { limits: { session_max_lifetime_s: 2 ** 32 } },
  ]) {
    const err = await client(fakeFetch(() => ({ body }))).describe().catch((x) => x);
    assert.ok(err instanceof P.ProtocolError, `${JSON.stringify(body)}: ${err}`);
  }
});

// ---- offline: what an answer may be ----------------------------------------------

const READ = { path: "a", size: 3, offset: 0, content: "abc", length: 3, more: false };
const ENTRY = { path: "a", type: "file", size: 3, mode: 420, modified_at: "2026-11-30T01:02:03.000000001Z" };

const MALFORMED = [
  ["ReadFile", "length not the bytes of content", { ...READ, length: 2 }],
  ["ReadFile", "length not the bytes of content in UTF-8", { ...READ, content: "é", length: 1 }],
  ["ReadFile", "length not the bytes of content_base64", { ...READ, content: "\ufffd", content_base64: "/w==", length: 3 }],
  ["ReadFile", "no length for bytes that came", { ...READ, length: undefined }],
  ["ReadFile", "content_base64 not base64", { ...READ, content_base64: "a*b=", length: 2 }],
  ["ReadFile", "content_base64 of a bad length", { ...READ, content_base64: "AAAAA", length: 3 }],
  ["ReadFile", "content_base64 padded wrong", { ...READ, content_base64: "AA=", length: 1 }],
  ["ReadFile", "content_base64 not a string", { ...READ, content_base64: 5 }],
  ["ReadFile", "size as a string", { ...READ, size: "3" }],
  ["ReadFile", "size past uint32", { ...READ, size: 2 ** 32 }],
  ["ReadFile", "offset below 0", { ...READ, offset: -1 }],
  ["ReadFile", "more not a bool", { ...READ, more: 0 }],
  ["ReadFile", "content not a string", { ...READ, content: ["abc"] }],
  ["ListFiles", "an entry of an unknown type", { entries: [{ ...ENTRY, type: "door" }] }],
  ["ListFiles", "an entry with no type", { entries: [{ ...ENTRY, type: undefined }] }],
  ["ListFiles", "an entry with no path", { entries: [{ ...ENTRY, path: "" }] }],
  ["ListFiles", "path_base64 not base64", { entries: [{ ...ENTRY, path_base64: "n?==" }] }],
  ["ListFiles", "path_base64 of a bad length", { entries: [{ ...ENTRY, path_base64: "bv8=b" }] }],
  ["ListFiles", "path_base64 not a string", { entries: [{ ...ENTRY, path_base64: true }] }],
  ["ListFiles", "mode as a string", { entries: [{ ...ENTRY, mode: "0644" }] }],
  ["ListFiles", "size not an integer", { entries: [{ ...ENTRY, size: 1.5 }] }],
  ["ListFiles", "modified_at not a string", { entries: [{ ...ENTRY, modified_at: 0 }] }],
  ["ListFiles", "entries not an array", { entries: ENTRY }],
  ["ListFiles", "a null entry", { entries: [null] }],
  ["ListFiles", "truncated not a bool", { entries: [], truncated: "no" }],
  ["WriteFiles", "files as a string", { files: "1", bytes: 1 }],
  ["WriteFiles", "bytes below 0", { files: 1, bytes: -1 }],
  ["WriteFiles", "a record that is not an object", { files: 1, bytes: 1, record: "r" }],
];

for (const [method, name, over] of MALFORMED) {
  test(`files: ${method}: ${name} is a ProtocolError, on Client and on Session`, async () => {
    const bad = JSON.parse(JSON.stringify(over));
    const call = { WriteFiles: (x) => x.writeFiles(ID, [{ path: "a" }]), ReadFile: (x) => x.readFile(ID, "a"), ListFiles: (x) => x.listFiles(ID) }[method];
    const onSession = { WriteFiles: (s) => s.writeFiles([{ path: "a" }]), ReadFile: (s) => s.readFile("a"), ListFiles: (s) => s.listFiles() }[method];
    for (const run of [(c) => call(c), (c) => onSession(new P.Session(c, ID))]) {
      const f = fakeFetch(() => ({ body: bad }));
      const err = await run(client(f)).catch((e) => e);
      assert.ok(err instanceof P.ProtocolError, `${err}`);
      assert.equal(err.code, "unknown");
      assert.equal(err.httpStatus, 200);
      assert.match(err.message, new RegExp(`^${method}: HTTP 200 with an answer that breaks the protocol`));
    }
  });
}

test("files: the ProtocolError names what broke", async () => {
  const say = async (method, body) => {
    const call = { ReadFile: (c) => c.readFile(ID, "a"), ListFiles: (c) => c.listFiles(ID) }[method];
    return (await call(client(fakeFetch(() => ({ body })))).catch((e) => e)).message;
  };
  assert.match(await say("ReadFile", { ...READ, length: 2 }), /ReadFile\.length is 2, but 3 bytes came/);
  assert.match(await say("ReadFile", { ...READ, content_base64: "a*b=" }), /ReadFile\.content_base64 is not base64/);
  assert.match(await say("ListFiles", { entries: [ENTRY, { ...ENTRY, type: "door" }] }), /ListFiles\.entries\[1\]\.type is "door", not one of file, directory, symlink, fifo, socket, device, other/);
  assert.match(await say("ListFiles", { entries: [{ ...ENTRY, path_base64: "n?==" }] }), /entries\[0\]\.path_base64 is not base64/);
});

test("files: base64 in either alphabet, padded or not, is read", async () => {
  for (const [b64, bytes] of [["/w==", [255]], ["/w", [255]], ["_w", [255]], ["-_8", [251, 255]], ["", []]]) {
    const f = fakeFetch(async ({ body: { session_id, ...rest } }) => ({
      body: await answerFor(rest, { path: "a", size: bytes.length, content: "\ufffd", content_base64: b64, length: b64 === "" ? 3 : bytes.length }),
    }));
    const r = await client(f).readFile(ID, "a");
    assert.deepEqual(r.content, b64 === "" ? utf8.encode("\ufffd") : new Uint8Array(bytes), b64);
    assert.equal(r.text, b64 === "" ? "\ufffd" : undefined);
  }
});

test("files: a ReadFile answer about another path or offset, or past the limit, is a ProtocolError; its record is kept on the chain", async () => {
  const cases = [
    [(m, b) => ({ ...b, path: "other" }), {}, /it is about "other", not the path asked for/],
    [(m, b) => ({ ...b, offset: 1 }), {}, /it starts at offset 1, not at 0 as asked/],
    [(m, b) => ({ ...b, offset: 0, content: "abc", length: 3, more: false }), { offset: 2 }, /it starts at offset 0, not at 2 as asked/],
    [(m, b) => ({ ...b, content: "abc", length: 3, more: false }), { limit: 2 }, /it holds 3 bytes, past the limit asked, 2/],
  ];
  for (const [tamper, options, why] of cases) {
    const f = fileDaemon({ tamper: (m, b) => (m === "ReadFile" ? tamper(m, b) : b) });
    const s = new P.Session(client(f), ID);
    await s.writeFiles([{ path: "a", content: "abc" }]);
    const err = await s.readFile("a", options).catch((e) => e);
    assert.ok(err instanceof P.ProtocolError, String(err));
    assert.match(err.message, why);
    assert.equal(s.chain.length, 2, "the daemon's record of the call is on the chain");
    assert.equal(s.broken, undefined);
    // and the next call's chain check passes
    await s.listFiles();
    assert.equal(s.chain.length, 3);
  }
});

test("files: refusals are the typed errors", async () => {
  const cases = [
    [404, connectError("not_found", "NOT_FOUND", "path: nothing of that name in the work directory", { dispatched: "false" }), P.NotFoundError],
    [400, connectError("invalid_argument", "INVALID_REQUEST", "path: a symlink is on the way or at the end; the file calls follow none", { dispatched: "false" }), P.InvalidRequestError],
    [400, connectError("failed_precondition", "SESSION_ENDED", "the session has ended: its owner closed it", { dispatched: "false", ended_reason: "its owner closed it" }), P.SessionEndedError],
    [501, connectError("unimplemented", "UNSUPPORTED", "the docker provider's files are off", { dispatched: "false" }), P.UnsupportedError],
  ];
  for (const [status, body, cls] of cases) {
    const f = fakeFetch(() => ({ status, body }));
    const c = client(f);
    const s = new P.Session(c, ID);
    for (const call of [
      () => c.writeFiles(ID, [{ path: "a" }]),
      () => c.readFile(ID, "a"),
      () => c.listFiles(ID),
      () => s.writeFiles([{ path: "a" }]),
      () => s.readFile("a"),
      () => s.listFiles("d"),
      () => s.readAll("a"),
    ]) {
      const err = await call().catch((e) => e);
      assert.ok(err instanceof cls, `${body.details[0].debug.reason}: ${err}`);
      assert.deepEqual([err.dispatched, err.httpStatus, err.message], [false, status, body.message]);
    }
    assert.equal(s.chain.length, 0);
  }
});

test("files: bad arguments are refused before anything is sent", async () => {
  const f = fileDaemon();
  const c = client(f);
  const s = new P.Session(c, ID);
  const type = (e) => e instanceof TypeError;
  const range = (e) => e instanceof RangeError;
  for (const id of [undefined, null, 5]) {
    await assert.rejects(c.writeFiles(id, [{ path: "a" }]), type);
    await assert.rejects(c.readFile(id, "a"), type);
    await assert.rejects(c.listFiles(id), type);
  }
  await assert.rejects(c.readFile("", "a"), range);
  for (const files of [undefined, null, "a", { path: "a" }]) {
    await assert.rejects(s.writeFiles(files), (e) => type(e) && /files must be an array/.test(e.message));
  }
  await assert.rejects(s.writeFiles([null]), (e) => type(e) && /files\[0\] must be an object/.test(e.message));
  await assert.rejects(s.writeFiles([{ path: "a" }, { content: "x" }]), (e) => type(e) && /files\[1\]\.path must be a string/.test(e.message));
  await assert.rejects(s.writeFiles([{ path: "a", content: 5 }]), (e) => type(e) && /content must be a string or a Uint8Array/.test(e.message));
  await assert.rejects(s.writeFiles([{ path: "a", content: "x", contentBase64: "eA==" }]), (e) => type(e) && /both content and contentBase64/.test(e.message));
  for (const path of [undefined, null, 5, ["a"]]) {
    await assert.rejects(s.readFile(path), (e) => type(e) && /path must be a string/.test(e.message));
    await assert.rejects(s.readAll(path), type);
  }
  await assert.rejects(s.listFiles(5), (e) => type(e) && /path must be a string/.test(e.message));
  for (const [name, options] of [["offset", { offset: "1" }], ["limit", { limit: 1n }], ["limit", { limit: null }]]) {
    await assert.rejects(s.readFile("a", options), (e) => type(e) && new RegExp(`${name} must be a number`).test(e.message));
  }
  for (const [name, options] of [["offset", { offset: -1 }], ["limit", { limit: 1.5 }], ["offset", { offset: 2 ** 32 }], ["limit", { limit: Number.NaN }]]) {
    await assert.rejects(s.readFile("a", options), (e) => range(e) && new RegExp(`${name} must be an integer from 0 to 4294967295`).test(e.message));
  }
  await assert.rejects(s.readFile("a", null), (e) => type(e) && /options must be an object/.test(e.message));
  await assert.rejects(s.readFile("a", "x"), type);
  await assert.rejects(s.listFiles("", { depth: -1 }), (e) => range(e) && /depth must be an integer/.test(e.message));
  await assert.rejects(s.listFiles({ depth: "2" }), (e) => type(e) && /depth must be a number/.test(e.message));
  await assert.rejects(s.listFiles("", []), type);
  await assert.rejects(s.readAll("a", { limit: -1 }), range);
  await assert.rejects(s.download("a", 5), (e) => type(e) && /localPath must be a string/.test(e.message));
  await assert.rejects(s.upload(undefined), (e) => type(e) && /localPath must be a string/.test(e.message));
  for (const dir of ["/abs", "a/../b", "./a", "a//b", "/", "..", "."]) {
    await assert.rejects(s.upload(tempDir(), dir), (e) => range(e) && /remoteDir .* must be relative|is not relative/.test(e.message), dir);
  }
  await assert.rejects(s.upload(tempDir(), 5), (e) => type(e) && /remoteDir must be a string/.test(e.message));
  assert.equal(f.calls.length, 0);
  assert.equal(s.chain.length, 0);
  assert.equal(s.broken, undefined);
  // the bounds themselves are sent
  await c.readFile(ID, "x", { offset: 2 ** 32 - 1, limit: 0 }).catch(() => undefined);
  assert.deepEqual(f.calls[0].body, { session_id: ID, path: "x", offset: 2 ** 32 - 1, limit: 0 });
});

// ---- offline: records and the chain ------------------------------------------------

test("files: a Session appends each file call's record to its chain, between cells and runs", async () => {
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  const c1 = await s.cell({ language: "python", code: "x = 1" });
  const w = await s.writeFiles([{ path: "d/a.txt", content: "abc" }]);
  const r = await s.readFile("d/a.txt", { limit: 2 });
  const l = await s.listFiles("d", { depth: 1 });
  const all = await s.readAll("d/a.txt", { limit: 2 });
  const c2 = await s.cell({ language: "python", code: "x" });
  assert.deepEqual(all, utf8.encode("abc"));
  assert.equal(s.chain.length, 7, "cell, write, read, list, two pages, cell");
  assert.equal(w.record.previous_digest, c1.record.digest);
  assert.equal(r.record.previous_digest, w.record.digest);
  assert.equal(l.record.previous_digest, r.record.digest);
  assert.equal(c2.record.digest, s.chain.head);
  // each entry's request is the message without session_id, as sent
  assert.deepEqual(
    s.chain.entries.map((e) => e.request),
    [
      { cell: { language: "python", code: "x = 1" } },
      { files: [{ path: "d/a.txt", content: "abc" }] },
      { path: "d/a.txt", limit: 2 },
      { path: "d", depth: 1 },
      { path: "d/a.txt", limit: 2 },
      { path: "d/a.txt", offset: 2, limit: 2 },
      { cell: { language: "python", code: "x" } },
    ],
  );
  assert.equal(await s.chain.verify(), s.chain.head);
  assert.equal(await P.verifyChain(s.chain.entries), s.chain.head);
});

test("files: a file call's record that does not extend the chain is a ChainError; on Client it is checked alone", async () => {
  const foreign = fakeFetch(async ({ body: { session_id, ...rest } }) => ({
    body: await answerFor(rest, { files: 1, bytes: 0 }, { previous: "ab".repeat(32) }),
  }));
  const s = new P.Session(client(foreign), ID);
  const err = await s.writeFiles([{ path: "a" }]).catch((e) => e);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.deepEqual([err.broken, err.index, s.chain.length, s.broken], ["previous_digest", 0, 0, err]);
  // Client: previous_digest is not checked, the rest is
  assert.equal((await client(foreign).writeFiles(ID, [{ path: "a" }])).files, 1);
  const wrong = fakeFetch(async ({ body: { session_id, ...rest } }) => ({ body: await answerFor({ ...rest, path: "b" }, { ...READ }) }));
  const bad = await client(wrong).readFile(ID, "a").catch((e) => e);
  assert.ok(bad instanceof P.ChainError, String(bad));
  assert.equal(bad.broken, "request_sha256");
  // a request hashed with session_id is not the file call's digest
  const withId = fakeFetch(async ({ body }) => ({ body: await answerFor(body, { entries: [] }) }));
  assert.equal((await client(withId).listFiles(ID).catch((e) => e)).broken, "request_sha256");
  // verifyRecords off: not checked
  assert.equal((await client(wrong, { verifyRecords: false }).readFile(ID, "a")).text, "abc");
  const none = await client(fakeFetch(() => ({ body: { entries: [] } })), { verifyRecords: false }).listFiles(ID);
  assert.equal(none.record, undefined);
  assert.equal((await client(fakeFetch(() => ({ body: { entries: [] } }))).listFiles(ID).catch((e) => e)).broken, "version");
});

test("files: a Session's floor is re-checked against a file call's record", async () => {
  const f = fileDaemon({ isolation: "process" });
  const s = new P.Session(client(f), ID, "container");
  const err = await s.listFiles().catch((e) => e);
  assert.ok(err instanceof P.IsolationEvidenceMismatchError, String(err));
  assert.deepEqual([err.minimumIsolation, err.recordIsolation, err.isolation], ["container", "process", ""]);
  assert.match(err.message, /the record's isolation "process" is below the floor "container"/);
  assert.equal(s.broken, err);
  const ok = new P.Session(client(fileDaemon({ isolation: "container" })), ID, "container");
  await ok.writeFiles([{ path: "a" }]);
  assert.equal(ok.chain.length, 1);
});

// ---- offline: readAll and download -------------------------------------------------

test("files: readAll pages by offset until more is false", async () => {
  const f = fileDaemon({ pageLimit: 4 });
  const s = new P.Session(client(f), ID);
  const bytes = new Uint8Array(10).map((_, i) => (i * 37) & 0xff);
  await s.writeFiles([{ path: "b", content: bytes }, { path: "empty" }, { path: "four", content: "1234" }]);
  assert.deepEqual(await s.readAll("b"), bytes);
  assert.deepEqual(f.calls.slice(1).map((x) => [x.body.offset, x.body.limit]), [[undefined, undefined], [4, undefined], [8, undefined]]);
  assert.deepEqual(await s.readAll("empty"), new Uint8Array(0));
  assert.deepEqual(await s.readAll("four"), utf8.encode("1234"));
  const n = f.calls.length;
  assert.deepEqual(await s.readAll("b", { limit: 3 }), bytes);
  assert.deepEqual(f.calls.slice(n).map((x) => x.body.offset ?? 0), [0, 3, 6, 9]);
  assert.equal(await s.chain.verify(), s.chain.head);
  assert.equal(s.chain.length, f.calls.length);
});

test("files: readAll refuses an inconsistent page", async () => {
  const run = async (tamper) => {
    let page = 0;
    const f = fileDaemon({ pageLimit: 4, tamper: (m, b) => (m === "ReadFile" ? tamper(b, page++) : b) });
    const s = new P.Session(client(f), ID);
    await s.writeFiles([{ path: "b", content: "0123456789" }]);
    const err = await s.readAll("b").catch((e) => e);
    return [err, s];
  };
  // no bytes, yet more
  let [err, s] = await run((b, i) => (i === 1 ? { ...b, content: "", length: 0, more: true } : b));
  assert.ok(err instanceof P.ProtocolError, String(err));
  assert.match(err.message, /a page at offset 4 holds no bytes, yet more is true/);
  assert.equal(s.chain.length, 3, "each page's record is on the chain");
  // the size changes between pages: the file changed
  [err] = await run((b, i) => (i === 1 ? { ...b, size: 12, more: true } : b));
  assert.ok(err instanceof P.PlimsollError && !(err instanceof P.InfrastructureError), String(err));
  assert.match(err.message, /readAll: "b" changed while it was read: 10 bytes, then 12 at offset 4/);
  // the last page ends short of the size
  [err] = await run((b, i) => (i === 1 ? { ...b, more: false } : b));
  assert.ok(err instanceof P.ProtocolError, String(err));
  assert.match(err.message, /the last page ends at byte 8 of a file of 10 bytes/);
  // more past the end
  [err] = await run((b, i) => (i === 2 ? { ...b, more: true } : b));
  assert.ok(err instanceof P.ProtocolError, String(err));
  assert.match(err.message, /more is true at offset 10, the end of a file of 10 bytes/);
  // past the size
  [err] = await run((b, i) => (i === 0 ? { ...b, size: 3, more: true } : b));
  assert.ok(err instanceof P.ProtocolError, String(err));
});

test("files: readAll's pages run with no call of the handle between them", async () => {
  const f = fileDaemon({ pageLimit: 2 });
  const s = new P.Session(client(f), ID);
  await s.writeFiles([{ path: "a", content: "abcdef" }]);
  const all = s.readAll("a");
  const list = s.listFiles();
  await Promise.all([all, list]);
  assert.deepEqual(f.calls.map((x) => x.method), ["WriteFiles", "ReadFile", "ReadFile", "ReadFile", "ListFiles"]);
});

test("files: download writes the file's exact bytes, making its directories", async () => {
  const f = fileDaemon({ pageLimit: 5 });
  const s = new P.Session(client(f), ID);
  const bytes = new Uint8Array(23).map((_, i) => 255 - i);
  await s.writeFiles([{ path: "out/b.bin", content: bytes }]);
  const dir = tempDir();
  const to = join(dir, "new", "deeper", "b.bin");
  assert.equal(await s.download("out/b.bin", to), 23);
  assert.deepEqual(new Uint8Array(readFileSync(to)), bytes);
  // a missing file writes nothing
  const err = await s.download("nope", join(dir, "nope")).catch((e) => e);
  assert.ok(err instanceof P.NotFoundError, String(err));
  assert.throws(() => readFileSync(join(dir, "nope")), /ENOENT/);
});

// ---- offline: upload ------------------------------------------------------------------

test("files: upload of 300 small files makes 2 calls (256 files a call)", async () => {
  const dir = tempDir();
  const top = join(dir, "many");
  mkdirSync(join(top, "sub"), { recursive: true });
  for (let i = 0; i < 300; i++) writeFileSync(join(top, i % 2 ? "sub" : "", `f${String(i).padStart(3, "0")}.txt`), `file ${i}\n`);
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  const up = await s.upload(top, "in");
  assert.equal(f.calls.length, 2);
  assert.deepEqual(f.calls.map((x) => x.body.files.length), [256, 44]);
  assert.deepEqual([up.files, up.calls.length, up.skipped], [300, 2, []]);
  assert.equal(up.bytes, [...f.files.values()].reduce((n, b) => n + b.length, 0));
  assert.equal(f.files.size, 300);
  assert.deepEqual(f.files.get("in/many/sub/f001.txt"), utf8.encode("file 1\n"));
  assert.deepEqual(f.files.get("in/many/f000.txt"), utf8.encode("file 0\n"));
  assert.deepEqual(up.paths.slice(0, 2), ["in/many/f000.txt", "in/many/f002.txt"], "each directory's entries by name");
  assert.deepEqual(up.calls.map((r) => r.files), [256, 44]);
  assert.equal(s.chain.length, 2);
  assert.equal(await s.chain.verify(), s.chain.head);
});

test("files: upload of five 2 MiB files makes 3 calls (4 MiB a call)", async () => {
  const dir = tempDir();
  const top = join(dir, "big");
  mkdirSync(top);
  for (let i = 0; i < 5; i++) writeFileSync(join(top, `b${i}`), Buffer.alloc(2 * MiB, i));
  writeFileSync(join(top, "small"), "s");
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  const up = await s.upload(top);
  assert.equal(f.calls.length, 3);
  const decoded = (call) => call.body.files.reduce((n, x) => n + Buffer.from(x.content_base64, "base64").length, 0);
  for (const call of f.calls) assert.ok(decoded(call) <= 4 * MiB, String(decoded(call)));
  assert.deepEqual(f.calls.map((x) => x.body.files.map((y) => y.path)), [["big/b0", "big/b1"], ["big/b2", "big/b3"], ["big/b4", "big/small"]]);
  assert.deepEqual([up.files, up.bytes, up.calls.length], [6, 10 * MiB + 1, 3]);
  assert.deepEqual(f.files.get("big/b3"), new Uint8Array(Buffer.alloc(2 * MiB, 3)));
});

test("files: upload packs first fit, largest first", async () => {
  // 3, 2, 3, 2 MiB in the walk's order: taken in order they would make four calls; packed, three
  const dir = tempDir();
  const top = join(dir, "mix");
  mkdirSync(top);
  [3, 2, 3, 2].forEach((m, i) => writeFileSync(join(top, "abcd"[i]), Buffer.alloc(m * MiB)));
  const f = fileDaemon();
  const up = await new P.Session(client(f), ID).upload(top);
  assert.deepEqual(f.calls.map((x) => x.body.files.map((y) => y.path)), [["mix/a"], ["mix/b", "mix/d"], ["mix/c"]]);
  assert.equal(up.calls.length, 3);
  assert.deepEqual([P.WRITE_FILES_MAX_BYTES, P.WRITE_FILES_MAX_FILES, P.FILE_PATH_MAX_BYTES], [4 * MiB, 256, 256]);
});

test("files: upload of one file puts it in remoteDir under its name", async () => {
  const dir = tempDir();
  const file = join(dir, "one.bin");
  writeFileSync(file, Buffer.from([1, 2, 3]));
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  assert.deepEqual((await s.upload(file)).paths, ["one.bin"]);
  assert.deepEqual((await s.upload(file, "a/b/")).paths, ["a/b/one.bin"]);
  assert.deepEqual(f.calls.map((x) => x.body.files), [[{ path: "one.bin", content_base64: "AQID" }], [{ path: "a/b/one.bin", content_base64: "AQID" }]]);
  // an empty directory: nothing to send, no call
  mkdirSync(join(dir, "empty"));
  const none = await s.upload(join(dir, "empty"));
  assert.deepEqual([none.files, none.calls, f.calls.length], [0, [], 2]);
});

test("files: upload skips symlinks, special files and names that are not UTF-8, and says so", async () => {
  const dir = tempDir();
  const top = join(dir, "tree");
  mkdirSync(join(top, "d"), { recursive: true });
  writeFileSync(join(top, "d", "real.txt"), "real");
  symlinkSync(join(top, "d", "real.txt"), join(top, "link.txt"));
  symlinkSync(join(top, "d"), join(top, "linkdir"));
  let fifo = true;
  try {
    execFileSync("mkfifo", [join(top, "pipe")]);
  } catch {
    fifo = false;
  }
  writeFileSync(Buffer.concat([Buffer.from(top + "/bad-"), Buffer.from([0xff])]), "x");
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  const up = await s.upload(top, "t");
  assert.deepEqual(up.paths, ["t/tree/d/real.txt"]);
  assert.deepEqual(
    up.skipped.map((x) => [x.path.slice(top.length + 1), x.why]),
    [
      ["bad-\ufffd", "its name is not UTF-8"],
      ["link.txt", "a symlink"],
      ["linkdir", "a symlink"],
      ...(fifo ? [["pipe", "not a regular file or a directory"]] : []),
    ],
  );
  // a symlink given as localPath is followed
  const via = join(dir, "via");
  symlinkSync(join(top, "d"), via);
  assert.deepEqual((await s.upload(via)).paths, ["via/real.txt"]);
});

test("files: upload refuses a file over 4 MiB or a path over 256 bytes before sending anything", async () => {
  const dir = tempDir();
  const top = join(dir, "over");
  mkdirSync(top);
  writeFileSync(join(top, "a"), "small");
  writeFileSync(join(top, "huge"), Buffer.alloc(4 * MiB + 1));
  const f = fileDaemon();
  const s = new P.Session(client(f), ID);
  const err = await s.upload(top).catch((e) => e);
  assert.ok(err instanceof RangeError, String(err));
  assert.match(err.message, /huge is 4194305 bytes, past the 4194304 bytes \(4 MiB\) one WriteFiles call may carry; nothing was sent/);
  // exactly 4 MiB goes, alone
  writeFileSync(join(top, "huge"), Buffer.alloc(4 * MiB));
  assert.equal((await s.upload(top)).calls.length, 2);
  const deep = join(dir, "deep");
  mkdirSync(deep);
  writeFileSync(join(deep, "n".repeat(200)), "x");
  const n = f.calls.length;
  const long = await s.upload(deep, "d".repeat(60)).catch((e) => e);
  assert.ok(long instanceof RangeError, String(long));
  assert.match(long.message, /is 266 bytes, past the 256 bytes a path in a session may have; nothing was sent/);
  assert.equal(f.calls.length, n);
  // a missing local path is Node's error
  const missing = await s.upload(join(dir, "missing")).catch((e) => e);
  assert.equal(missing.code, "ENOENT");
});

// ---- against the docker session daemon ------------------------------------------

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY", "PLIMSOLL_TEST_KEY_B");
if (skip) console.log(`# session files against a daemon skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);

const live = (key = env.PLIMSOLL_TEST_KEY) => new Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: key });
const opened = [];
after(async () => {
  for (const s of opened) await s.close().catch(() => undefined);
});
async function open(c = live()) {
  const s = await c.openSession({ languages: ["python"] });
  opened.push(s);
  return s;
}

test("daemon: describe says the file calls are there, with their limits", { skip }, async () => {
  const d = await live().describe();
  assert.equal(d.operations.files.supported, true);
  assert.ok(d.limits.fileReadBytes >= 1024, String(d.limits.fileReadBytes));
  assert.ok(d.limits.fileListEntries >= 1, String(d.limits.fileListEntries));
  assert.ok(d.limits.sessionMaxLifetimeS >= 600, String(d.limits.sessionMaxLifetimeS));
});

test("daemon: write, then read back text and binary, page by page, and list with depth", { skip }, async () => {
  const s = await open();
  const bin = new Uint8Array(300).map((_, i) => (i * 7) & 0xff);
  const w = await s.writeFiles([
    { path: "notes/a.txt", content: "héllo\nworld\n" },
    { path: "notes/deep/b.bin", content: bin },
    { path: "c.txt", contentBase64: "YWJj" },
  ]);
  assert.deepEqual([w.files, w.bytes], [3, 13 + 300 + 3]);
  const t = await s.readFile("notes/a.txt");
  assert.deepEqual([t.text, t.size, t.offset, t.length, t.more, t.path], ["héllo\nworld\n", 13, 0, 13, false, "notes/a.txt"]);
  assert.deepEqual(t.content, utf8.encode("héllo\nworld\n"));
  const b = await s.readFile("notes/deep/b.bin");
  assert.deepEqual(b.content, bin);
  assert.equal(b.text, undefined);
  assert.equal((await s.readFile("c.txt")).text, "abc");
  // paging with a small limit
  const p1 = await s.readFile("notes/deep/b.bin", { limit: 128 });
  const p2 = await s.readFile("notes/deep/b.bin", { offset: 128, limit: 128 });
  const p3 = await s.readFile("notes/deep/b.bin", { offset: 256, limit: 128 });
  assert.deepEqual([p1.length, p1.more, p2.offset, p2.more, p3.length, p3.more], [128, true, 128, true, 44, false]);
  assert.deepEqual(new Uint8Array([...p1.content, ...p2.content, ...p3.content]), bin);
  const past = await s.readFile("notes/a.txt", { offset: 100 });
  assert.deepEqual([past.length, past.more, past.text], [0, false, ""]);
  // a character split by a page: the lossy text, the exact bytes
  const split = await s.readFile("notes/a.txt", { offset: 1, limit: 1 });
  assert.deepEqual([split.content, split.text], [new Uint8Array([0xc3]), undefined]);
  assert.deepEqual(await s.readAll("notes/deep/b.bin", { limit: 100 }), bin);
  // list with depth
  const top = await s.listFiles();
  assert.deepEqual(top.entries.map((e) => [e.path, e.type]), [["c.txt", "file"], ["notes", "directory"]]);
  const all = await s.listFiles("", { depth: 3 });
  assert.deepEqual(all.entries.map((e) => e.path), ["c.txt", "notes", "notes/a.txt", "notes/deep", "notes/deep/b.bin"]);
  const sub = await s.listFiles("notes", { depth: 1 });
  assert.deepEqual(sub.entries.map((e) => [e.path, e.type, e.type === "file" ? e.size : -1]), [["notes/a.txt", "file", 13], ["notes/deep", "directory", -1]]);
  const e = sub.entries[0];
  assert.deepEqual(e.pathBytes, utf8.encode("notes/a.txt"));
  assert.equal(e.mode & 0o777, e.mode);
  assert.match(e.modifiedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
  assert.equal(all.truncated, false);
  await s.close();
});

test("daemon: upload a tree, list it, readAll each file, download and compare", { skip }, async () => {
  const s = await open();
  const dir = tempDir();
  const top = join(dir, "tree");
  mkdirSync(join(top, "src", "lib"), { recursive: true });
  const want = {
    "README.md": utf8.encode("# tree\n"),
    "src/main.py": utf8.encode("print('main')\n"),
    "src/lib/data.bin": new Uint8Array(5000).map((_, i) => (i * 31 + 7) & 0xff),
    "src/lib/empty": new Uint8Array(0),
  };
  for (const [p, b] of Object.entries(want)) writeFileSync(join(top, p), b);
  symlinkSync("main.py", join(top, "src", "link.py"));
  const up = await s.upload(top, "up");
  assert.deepEqual(up.paths, ["up/tree/README.md", "up/tree/src/lib/data.bin", "up/tree/src/lib/empty", "up/tree/src/main.py"]);
  assert.deepEqual(up.skipped.map((x) => [x.path, x.why]), [[join(top, "src", "link.py"), "a symlink"]]);
  assert.equal(up.calls.length, 1);
  assert.deepEqual([up.calls[0].files, up.calls[0].bytes], [4, up.bytes]);
  const list = await s.listFiles("up", { depth: 4 });
  assert.deepEqual(
    list.entries.map((e) => [e.path, e.type]),
    [
      ["up/tree", "directory"],
      ["up/tree/README.md", "file"],
      ["up/tree/src", "directory"],
      ["up/tree/src/lib", "directory"],
      ["up/tree/src/lib/data.bin", "file"],
      ["up/tree/src/lib/empty", "file"],
      ["up/tree/src/main.py", "file"],
    ],
  );
  for (const [p, b] of Object.entries(want)) {
    assert.deepEqual(await s.readAll(`up/tree/${p}`, { limit: 1024 }), b, p);
    const to = join(dir, "back", p);
    assert.equal(await s.download(`up/tree/${p}`, to), b.length);
    assert.deepEqual(new Uint8Array(readFileSync(to)), b, p);
  }
  // the guest sees them too
  const r = await s.runSnippet({ language: "python", code: "exec(open('up/tree/src/main.py').read())" });
  assert.equal(r.stdout, "main\n", r.stderr);
  await s.close();
});

test("daemon: an upload at the 4 MiB bound: two 2 MiB files in one call, the rest in another", { skip }, async () => {
  const s = await open();
  const dir = tempDir();
  const top = join(dir, "pair");
  mkdirSync(top);
  writeFileSync(join(top, "x"), Buffer.alloc(2 * MiB, 0x78));
  writeFileSync(join(top, "y"), Buffer.alloc(2 * MiB, 0x79));
  writeFileSync(join(top, "z"), "z");
  const up = await s.upload(top);
  assert.deepEqual(up.calls.map((c) => [c.files, c.bytes]), [[2, 4 * MiB], [1, 1]]);
  const y = await s.readAll("pair/y");
  assert.equal(y.length, 2 * MiB);
  assert.ok(y.every((b) => b === 0x79));
  await s.close();
});

test("daemon: a missing path is NotFoundError; a symlink the guest made is InvalidRequestError", { skip }, async () => {
  const s = await open();
  const missing = await s.readFile("no/such.txt").catch((e) => e);
  assert.ok(missing instanceof P.NotFoundError, String(missing));
  assert.match(missing.message, /^path:/);
  assert.equal(missing.dispatched, false);
  assert.ok((await s.listFiles("no/such").catch((e) => e)) instanceof P.NotFoundError);
  const r = await s.runSnippet({
    language: "python",
    code: "import os; os.makedirs('real'); open('real/f.txt', 'w').write('x'); os.symlink('real/f.txt', 'ln.txt'); os.symlink('real', 'lndir')",
  });
  assert.equal(r.exitCode, 0, r.stderr);
  const l = await s.listFiles();
  assert.deepEqual(l.entries.map((e) => [e.path, e.type]), [["ln.txt", "symlink"], ["lndir", "symlink"], ["real", "directory"]]);
  for (const call of [() => s.readFile("ln.txt"), () => s.readFile("lndir/f.txt"), () => s.readAll("ln.txt"), () => s.writeFiles([{ path: "lndir/new.txt", content: "x" }])]) {
    const err = await call().catch((e) => e);
    assert.ok(err instanceof P.InvalidRequestError, String(err));
    assert.equal(err.dispatched, false);
  }
  const dirErr = await s.readFile("real").catch((e) => e);
  assert.ok(dirErr instanceof P.InvalidRequestError, String(dirErr));
  // refusals made no record: the chain goes on
  assert.equal((await s.readFile("real/f.txt")).text, "x");
  assert.equal((await s.info()).previousDigest, s.chain.head);
  await s.close();
});

test("daemon: the chain stays unbroken across runs, cells and file calls", { skip }, async () => {
  const c = live();
  const s = await open(c);
  await s.cell({ language: "python", code: "x = 41" });
  await s.writeFiles([{ path: "in.txt", content: "41" }]);
  const r = await s.runSnippet({ language: "python", code: "open('out.txt', 'w').write(str(int(open('in.txt').read()) + 1))" });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal((await s.readFile("out.txt")).text, "42");
  await s.cell({ language: "python", code: "x += 1; open('cell.txt', 'w').write(str(x))" });
  assert.deepEqual((await s.listFiles()).entries.map((e) => e.path), ["cell.txt", "in.txt", "out.txt"]);
  assert.deepEqual(await s.readAll("cell.txt"), utf8.encode("42"));
  assert.equal(s.chain.length, 7);
  assert.equal(await s.chain.verify(), s.chain.head);
  assert.equal(await P.verifyChain(s.chain.entries), s.chain.head);
  const i = await s.info();
  assert.deepEqual([i.calls, i.previousDigest], [7, s.chain.head]);
  // the Client's calls check each record alone; made around the handle, they break its chain
  const w = await c.writeFiles(s.id, [{ path: "side.txt", content: "side" }]);
  assert.equal(w.record.previous_digest, s.chain.head);
  const side = await c.readFile(s.id, "side.txt");
  assert.equal(side.record.previous_digest, w.record.digest);
  assert.deepEqual((await c.listFiles(s.id, { depth: 1 })).entries.map((e) => e.path), ["cell.txt", "in.txt", "out.txt", "side.txt"]);
  const err = await s.listFiles().catch((e) => e);
  assert.ok(err instanceof P.ChainError, String(err));
  assert.equal(err.broken, "previous_digest");
  // a handle taken up again goes on from there
  const again = await c.connectSession(s.id);
  assert.equal((await again.readFile("side.txt")).text, "side");
  assert.equal(again.chain.length, 1);
  await again.close();
});

test("daemon: another caller's session id is NotFoundError, as an unknown one, for each file call", { skip }, async () => {
  const s = await open();
  await s.writeFiles([{ path: "mine.txt", content: "mine" }]);
  const b = live(env.PLIMSOLL_TEST_KEY_B);
  for (const call of [(id) => b.writeFiles(id, [{ path: "theirs.txt", content: "x" }]), (id) => b.readFile(id, "mine.txt"), (id) => b.listFiles(id)]) {
    const theirs = await call(s.id).catch((e) => e);
    const unknown = await call("0".repeat(64)).catch((e) => e);
    assert.ok(theirs instanceof P.NotFoundError, String(theirs));
    assert.ok(unknown instanceof P.NotFoundError, String(unknown));
    assert.deepEqual([theirs.code, theirs.message, theirs.httpStatus, theirs.dispatched], [unknown.code, unknown.message, unknown.httpStatus, false]);
  }
  // their tries changed nothing
  assert.deepEqual((await s.listFiles()).entries.map((e) => e.path), ["mine.txt"]);
  assert.equal(s.chain.length, 2);
  await s.close();
});

// ---- the README's examples of these calls -------------------------------------------

test("files: the README shows each new call in a run example with its output", () => {
  const examples = readmeExamples("Session files");
  assert.ok(examples.length >= 2, String(examples.length));
  const all = examples.map((e) => e.code).join("\n");
  for (const name of [".writeFiles(", ".readFile(", ".listFiles(", ".readAll(", ".download(", ".upload("]) {
    assert.ok(all.includes(name), `the README's examples use ${name}`);
  }
  assert.ok(!/from "node:/.test(all), "the examples need no Node types (tsc --init's project has none)");
});

test("daemon: the README's examples of session files run as written", { skip }, async () => {
  // inside the package, so that "@plimsoll/client" resolves to this build
  const dir = new URL("../dist/readme-files/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const keyFile = new URL("key", dir);
  writeFileSync(keyFile, env.PLIMSOLL_TEST_KEY + "\n");
  const { PLIMSOLL_KEY: _, ...rest } = process.env;
  for (const [n, { code, output }] of readmeExamples("Session files").entries()) {
    const file = new URL(`example${n}.mjs`, dir);
    writeFileSync(file, code);
    const cwd = tempDir(); // the examples write local files where they run
    const out = await new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        [file.pathname],
        { cwd, env: { ...rest, PLIMSOLL_URL: env.PLIMSOLL_TEST_SESSION_URL, PLIMSOLL_KEY_FILE: keyFile.pathname } },
        (err, stdout, stderr) => (err ? reject(new Error(`example ${n}: ${stderr || err}`)) : resolve(stdout)),
      ),
    );
    assert.match(out, outputPattern(output), `example ${n} printed:\n${out}`);
  }
});
