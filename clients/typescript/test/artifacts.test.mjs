// SPDX-License-Identifier: Apache-2.0
// A project's and a snippet's artifacts (`collect`): what comes back from
// the docker (runc) daemon of tests/clients/harness.py, one-shot and in a
// session, with the bounds the harness sets (8 files, 64 KiB), skipped,
// saying so, without PLIMSOLL_TEST_SESSION_URL; and saveArtifacts, which
// never writes outside its directory.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as P from "../dist/index.js";
import { env, needs } from "./helpers.mjs";

const { Client, RunResult } = P;
const utf8 = new TextEncoder();

const temps = [];
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), "plimsoll-ts-artifacts-"));
  temps.push(d);
  return d;
}
after(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

const BINARY = new Uint8Array(1024).map((_, i) => i & 0xff);
const TEXT = utf8.encode("h\u00e9llo, artifacts\n");
const BIG = new Uint8Array(70000).map((_, i) => (i * 7) % 251);
// One step: three files under out/ (walked first: small, small, big) and
// ten under zz/, past the harness's 8 files.
const SCRIPT = `import os
os.makedirs('out'); os.makedirs('zz')
open('out/a.bin', 'wb').write(bytes(range(256)) * 4)
open('out/b.txt', 'w', encoding='utf-8').write('h\\u00e9llo, artifacts\\n')
open('out/z.bin', 'wb').write(bytes((i * 7) % 251 for i in range(70000)))
[open('zz/%02d' % i, 'w').write('x') for i in range(10)]
`;
const PROJECT = { steps: [["python3", "-c", SCRIPT]], collect: ["out/*", "zz/*"] };

async function check(r) {
  assert.equal(r.exitCode, 0, r.stderr);
  assert.deepEqual(
    r.artifacts.map((a) => a.path),
    ["out/a.bin", "out/b.txt", "out/z.bin", "zz/00", "zz/01", "zz/02", "zz/03", "zz/04"],
  );
  assert.equal(r.artifactsTruncated, true);
  const [a, b, z] = r.artifacts;
  assert.deepEqual([a.content, a.size, a.truncated], [BINARY, 1024, false]);
  assert.deepEqual([b.content, b.size, b.truncated], [TEXT, TEXT.length, false]);
  // the 64 KiB budget runs out in z.bin: its first bytes, then none
  const n = 65536 - BINARY.length - TEXT.length;
  assert.deepEqual([z.content.length, z.size, z.truncated], [n, 70000, true]);
  assert.deepEqual(z.content, BIG.subarray(0, n));
  for (const x of r.artifacts.slice(3)) assert.deepEqual([x.size, x.content.length, x.truncated], [1, 0, true]);
  const dir = join(tempDir(), "got");
  const saved = await r.saveArtifacts(dir);
  assert.equal(saved[0], join(dir, "out/a.bin"));
  assert.deepEqual(new Uint8Array(readFileSync(saved[0])), BINARY);
  assert.deepEqual(new Uint8Array(readFileSync(saved[1])), TEXT);
}

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY");
if (skip) console.log(`# artifacts against a daemon skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);
const live = () => new Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY });

test("daemon: describe says where collect goes, and its bounds", { skip }, async () => {
  const d = await live().describe();
  assert.equal(d.operations.artifacts.project, true);
  assert.deepEqual([d.limits.collectFiles, d.limits.collectBytes], [8, 65536]);
});

test("daemon: a one-shot project's artifacts, their bytes and both bounds", { skip }, async () => {
  await check(await live().runProject(PROJECT));
});

test("daemon: a session project's artifacts; none without globs", { skip }, async () => {
  const s = await live().openSession();
  try {
    await check(await s.runProject(PROJECT));
    const r = await s.runProject({ steps: [["true"]] });
    assert.equal(r.artifacts, undefined);
    assert.equal(r.artifactsTruncated, false);
  } finally {
    await s.close();
  }
});

test("daemon: a python snippet's artifact, one-shot and in a session", { skip }, async () => {
  assert.equal((await live().describe()).operations.artifacts.snippet, true);
  const input = {
    language: "python",
    code: "import os\nos.makedirs('out', exist_ok=True)\nopen('out/s.bin', 'wb').write(bytes(range(256)))\nprint('done')\n",
    collect: ["out/*"],
  };
  const want = new Uint8Array(256).map((_, i) => i);
  const checkSnippet = (r) => {
    assert.deepEqual([r.exitCode, r.stdout], [0, "done\n"], r.stderr);
    assert.deepEqual(
      r.artifacts.map((a) => [a.path, a.size, a.content, a.truncated]),
      [["out/s.bin", 256, want, false]],
    );
    assert.equal(r.artifactsTruncated, false);
  };
  checkSnippet(await live().runSnippet(input));
  const s = await live().openSession();
  try {
    checkSnippet(await s.runSnippet(input));
  } finally {
    await s.close();
  }
});

test("a snippet request carries collect only when given, and only strings", () => {
  const base = { language: "python", code: "1" };
  assert.deepEqual(P.snippetRequest({ ...base, collect: ["a/*"] }).snippet.collect, ["a/*"]);
  assert.equal("collect" in P.snippetRequest(base).snippet, false);
  assert.throws(() => P.snippetRequest({ ...base, collect: "a/*" }), /runSnippet: collect/);
});

test("a project request carries collect only when given, and only strings", () => {
  assert.deepEqual(P.projectRequest({ steps: [["true"]], collect: ["a/*"] }).project.collect, ["a/*"]);
  assert.equal("collect" in P.projectRequest({ steps: [["true"]] }).project, false);
  assert.throws(() => P.projectRequest({ steps: [["true"]], collect: "a/*" }), TypeError);
});

const result = (...artifacts) => new RunResult({ exit_code: 0, artifacts });

test("saveArtifacts: the exact bytes of path_base64 and content_base64", async () => {
  const dir = tempDir();
  const name = Buffer.from("d/caf\xe9.bin", "latin1");
  const r = result(
    { path: "d/caf\ufffd.bin", path_base64: name.toString("base64"), size: 3, content: "\ufffd", content_base64: "/wD+" },
    { path: "t.txt", size: 2, content: "hi" },
  );
  assert.deepEqual(r.artifacts[0].content, new Uint8Array([0xff, 0, 0xfe]));
  await r.saveArtifacts(dir);
  assert.deepEqual(new Uint8Array(readFileSync(Buffer.concat([Buffer.from(dir + "/"), name]))), new Uint8Array([0xff, 0, 0xfe]));
  assert.equal(readFileSync(join(dir, "t.txt"), "utf8"), "hi");
});

test("saveArtifacts: a hostile path is refused before anything is written", async () => {
  const top = tempDir();
  const target = join(top, "target");
  mkdirSync(target);
  for (const bad of ["../x", "a/../../x", "/etc/x", "", "a//b", "./x", "a/."]) {
    const r = result({ path: "ok.txt", content: "ok" }, { path: bad, content: "x" });
    await assert.rejects(r.saveArtifacts(target), RangeError, bad);
    assert.deepEqual(readdirSync(target), [], bad);
  }
  assert.equal(existsSync(join(top, "x")), false);
});

test("saveArtifacts: a symlink planted in the target is not followed", async () => {
  const top = tempDir();
  const target = join(top, "target");
  const outside = join(top, "outside");
  mkdirSync(target);
  mkdirSync(outside);
  symlinkSync(outside, join(target, "link"));
  symlinkSync(join(outside, "f"), join(target, "f"));
  for (const path of ["link/x", "f"]) {
    await assert.rejects(result({ path, content: "x" }).saveArtifacts(target), /symlink/);
  }
  assert.deepEqual(readdirSync(outside), []);
});

test("an answer's artifacts are checked: types and base64", async () => {
  const fetch = async () =>
    new Response(JSON.stringify({ exit_code: 0, artifacts: [{ path: "a", content_base64: "%%" }] }), {
      status: 200,
      headers: { "Content-Type": "application/json" },
    });
  const c = new Client({ url: "http://daemon.test/", apiKey: "plk_k", fetch, verifyRecords: false });
  await assert.rejects(c.runProject({ steps: [["true"]], collect: ["a"] }), (e) => e instanceof P.ProtocolError || /base64/.test(String(e)));
});

test("daemon: the README's example of artifacts runs as written", { skip }, async () => {
  const { execFile } = await import("node:child_process");
  const { writeFileSync } = await import("node:fs");
  const { outputPattern, readmeExamples } = await import("./helpers.mjs");
  const examples = readmeExamples("A project's artifacts");
  assert.equal(examples.length, 1);
  // inside the package, so that "@plimsoll/client" resolves to this build
  const dir = new URL("../dist/readme-artifacts/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const keyFile = new URL("key", dir);
  writeFileSync(keyFile, env.PLIMSOLL_TEST_KEY + "\n");
  const file = new URL("example.mjs", dir);
  writeFileSync(file, examples[0].code);
  const { PLIMSOLL_KEY: _, ...rest } = process.env;
  const cwd = tempDir();
  const out = await new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [file.pathname],
      { cwd, env: { ...rest, PLIMSOLL_URL: env.PLIMSOLL_TEST_SESSION_URL, PLIMSOLL_KEY_FILE: keyFile.pathname } },
      (err, stdout, stderr) => (err ? reject(new Error(`example: ${stderr || err}`)) : resolve(stdout)),
    ),
  );
  assert.match(out, outputPattern(examples[0].output), `the example printed:\n${out}`);
  assert.equal(readFileSync(join(cwd, "built", "dist", "report.csv"), "utf8"), "total,42\n");
});
