// SPDX-License-Identifier: Apache-2.0
// A cell's display outputs and a run's usage: what an answer may hold, the
// display chunks of a stream (the decoder, fed here), and what the docker
// (runc) daemon of tests/clients/harness.py gives back, unary and streamed,
// with its SANDBOX_DISPLAY_OUTPUTS of 8 (skipped, saying so, without
// PLIMSOLL_TEST_SESSION_URL).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as P from "../dist/index.js";
import { checkAnswer, Malformed } from "../dist/answer.js";
import { StreamDecoder } from "../dist/stream.js";
import { env, needs } from "./helpers.mjs";

const { Client, RunResult, DisplayOutput } = P;

/** What the harness's docker daemon keeps of one cell's outputs. */
const HARNESS_DISPLAY_OUTPUTS = 8;
const PNG = new Uint8Array(256).map((_, i) => i);
const PNG_B64 = Buffer.from(PNG).toString("base64");
// A raw PNG, then an object with an HTML representation shown with
// display() and as the cell's value, output between them.
const PY_CELL = `print('before')
display({'image/png': bytes(range(256)), 'text/plain': 'a png'}, raw=True)
class Total:
    def _repr_html_(self): return '<b>42</b>'
    def __repr__(self): return 'Total(42)'
display(Total())
print('after')
Total()
`;
const TOTAL = { "text/html": "<b>42</b>", "text/plain": "Total(42)" };

test("an answer's outputs and usage are read", () => {
  const a = checkAnswer(
    {
      exit_code: 0,
      outputs: [
        { kind: "display", data: { "image/png": PNG_B64, "text/plain": "a png" } },
        { kind: "result", data: { "application/json": '{"a":1}' } },
      ],
      outputs_dropped: 2,
      usage: { cpu_user_ms: 5, cpu_system_ms: 6, memory_peak_kib: 7, wall_ms: 8, source: "cgroup" },
      steps: [{ name: "a", usage: { wall_ms: 3, source: "cgroup" } }, { name: "b" }],
    },
    "RunCell",
  );
  const r = new RunResult(a);
  assert.deepEqual(
    r.outputs.map((o) => o.kind),
    ["display", "result"],
  );
  assert.ok(r.outputs[0] instanceof DisplayOutput);
  assert.deepEqual(r.outputs[0].bytes("image/png"), PNG);
  assert.deepEqual(r.outputs[0].types, ["image/png", "text/plain"]);
  assert.deepEqual(r.outputs[1].bytes("application/json"), new TextEncoder().encode('{"a":1}'));
  assert.throws(() => r.outputs[1].bytes("image/png"), RangeError);
  assert.equal(r.outputsDropped, 2);
  assert.deepEqual(r.usage, { cpuUserMs: 5, cpuSystemMs: 6, memoryPeakKib: 7, wallMs: 8, source: "cgroup" });
  assert.equal(r.usageAbsent, "");
  assert.deepEqual(r.steps[0].usage, { cpuUserMs: 0, cpuSystemMs: 0, memoryPeakKib: 0, wallMs: 3, source: "cgroup" });
  assert.equal(r.steps[1].usage, undefined);
  const none = new RunResult(checkAnswer({ usage_absent: "not measured here" }, "Run"));
  assert.deepEqual([none.outputs, none.outputsDropped, none.usage, none.usageAbsent], [[], 0, undefined, "not measured here"]);
});

test("outputs and usage that are not what the protocol says are refused", () => {
  for (const bad of [
    { outputs: { kind: "display" } },
    { outputs: [null] },
    { outputs: [{ kind: "display", data: ["text/plain"] }] },
    { outputs: [{ kind: "display", data: { "text/plain": 1 } }] },
    { outputs: [{ kind: "display", data: { "text/plain": null } }] },
    { outputs: [{ kind: 1, data: {} }] },
    { outputs: [{ kind: "update", data: { "text/plain": "x" } }] },
    { outputs: [{ data: { "text/plain": "x" } }] },
    { outputs: [{ kind: "display", data: { "image/png": "not base64!" } }] },
    { outputs_dropped: -1 },
    { outputs_dropped: "3" },
    { usage: [] },
    { usage: { cpu_user_ms: 2 ** 32 } },
    { usage: { wall_ms: "1" } },
    { usage: { source: 1 } },
    { usage_absent: false },
    { steps: [{ usage: { memory_peak_kib: -1 } }] },
  ]) {
    assert.throws(() => checkAnswer(bad, "RunCell"), Malformed, JSON.stringify(bad));
  }
});

test("describe says what a cell can show", () => {
  const raw = checkAnswer(
    {
      operations: { display: { python: true, javascript: true, matplotlib: false, pandas: true } },
      limits: { display_outputs: 32, display_output_bytes: 4194304, display_bytes: 8388608 },
    },
    "Describe",
  );
  const fetch = async () => new Response(JSON.stringify(raw), { status: 200, headers: { "Content-Type": "application/json" } });
  return new Client({ url: "http://daemon.test/", apiKey: "plk_k", fetch }).describe().then((d) => {
    assert.deepEqual(d.operations.display, { python: true, javascript: true, matplotlib: false, pandas: true });
    assert.deepEqual([d.limits.displayOutputs, d.limits.displayOutputBytes, d.limits.displayBytes], [32, 4194304, 8388608]);
    assert.throws(() => checkAnswer({ operations: { display: { python: "yes" } } }, "Describe"), Malformed);
  });
});

test("mimeIsText", () => {
  for (const m of ["text/plain", "text/csv", "application/json", "application/javascript", "image/svg+xml", "application/vnd.plotly.v1+json", "application/rss+xml"]) {
    assert.equal(P.mimeIsText(m), true, m);
  }
  for (const m of ["image/png", "image/jpeg", "application/pdf", "application/octet-stream"]) assert.equal(P.mimeIsText(m), false, m);
});

function frame(flags, msg) {
  const body = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** What the decoder throws for a stream that breaks the protocol (the client's own ProtocolError in a call). */
class Broken extends Error {}

/** The chunks and result of a stream of messages, fed to the decoder. */
function decode(...msgs) {
  const d = new StreamDecoder(1 << 20, { protocol: (why) => new Broken(why), connect: (e) => new Error(String(e)) });
  const chunks = d.feed(new Uint8Array(Buffer.concat([...msgs.map((m) => frame(0, m)), frame(2, {})])));
  return { chunks, result: d.finish() };
}

const PNG_OUT = { kind: "display", data: { "image/png": "AAEC" } };
const HTML_OUT = { kind: "result", data: { "text/html": "<b>42</b>" } };
const OTHER = { kind: "display", data: { "text/plain": "other" } };
const ans = (extra = {}) => ({ exit_code: 0, stdout: "", stderr: "", ...extra });

test("a stream's display chunks: in order among the output, and the result's", () => {
  const { chunks, result } = decode(
    { output: { stdout: Buffer.from("a\n").toString("base64") } },
    { output: { display: PNG_OUT } },
    { output: { stdout: Buffer.from("b\n").toString("base64") } },
    { output: { display: HTML_OUT } },
    { result: ans({ stdout: "a\nb\n", outputs: [PNG_OUT, HTML_OUT] }) },
  );
  assert.deepEqual(
    chunks.map((c) => (c.display ? `${c.display.kind} ${c.display.types[0]}` : new TextDecoder().decode(c.stdout))),
    ["a\n", "display image/png", "b\n", "result text/html"],
  );
  assert.equal(chunks[0].display, undefined);
  assert.deepEqual(chunks[1].display.bytes("image/png"), new Uint8Array([0, 1, 2]));
  assert.equal(chunks[1].stdout.length + chunks[1].stderr.length, 0);
  assert.equal(result.outputs.length, 2);
  // a stream of no chunk has nothing to check
  assert.equal(decode({ result: ans({ outputs: [PNG_OUT] }) }).chunks.length, 0);
});

test("display chunks that break the stream", () => {
  for (const msgs of [
    [{ output: { display: PNG_OUT } }, { result: ans() }],
    [{ output: { display: OTHER } }, { result: ans({ outputs: [PNG_OUT] }) }],
    [{ output: { display: HTML_OUT } }, { output: { display: PNG_OUT } }, { result: ans({ outputs: [PNG_OUT, HTML_OUT] }) }],
    [{ output: { stdout: "YQ==" } }, { result: ans({ stdout: "a", outputs: [PNG_OUT] }) }],
    [{ output: { display: PNG_OUT, stdout: "YQ==" } }, { result: ans({ stdout: "a", outputs: [PNG_OUT] }) }],
    [{ output: { display: { kind: "display", data: { "image/png": "%%" } } } }, { result: ans() }],
    [{ output: { display: { kind: "nope", data: {} } } }, { result: ans() }],
    [{ output: { display: "text/plain" } }, { result: ans() }],
  ]) {
    assert.throws(() => decode(...msgs), Broken, JSON.stringify(msgs));
  }
});

const skip = needs("PLIMSOLL_TEST_SESSION_URL", "PLIMSOLL_TEST_KEY");
if (skip) console.log(`# display outputs against a daemon skipped: ${skip} (the docker engine must run for the harness to start a session daemon)`);
const live = () => new Client({ url: env.PLIMSOLL_TEST_SESSION_URL, apiKey: env.PLIMSOLL_TEST_KEY });

function checkPythonCell(r) {
  assert.deepEqual([r.exitCode, r.stdout], [0, "before\nafter\n"], r.stderr);
  assert.deepEqual(
    r.outputs.map((o) => o.kind),
    ["display", "display", "result"],
  );
  const [png, total, value] = r.outputs;
  assert.deepEqual(png.bytes("image/png"), PNG);
  assert.equal(png.data["text/plain"], "a png");
  assert.deepEqual({ ...total.data }, TOTAL);
  assert.deepEqual({ ...value.data }, TOTAL);
  assert.equal(r.outputsDropped, 0);
}

/** Docker measures every run: a usage from the sandbox's cgroup. */
function checkCgroupUsage(u, absent = "") {
  assert.ok(u, `no usage: ${absent}`);
  assert.equal(u.source, "cgroup");
  assert.ok(u.wallMs > 0 && u.memoryPeakKib > 0, JSON.stringify(u));
  assert.equal(absent, "");
}

/** The chunks as the caller saw them: output runs joined, each display as its kind. */
function events(chunks) {
  const out = [];
  let open = false;
  for (const c of chunks) {
    if (c.display) {
      out.push(c.display.kind);
      open = false;
    } else if (c.stdout.length) {
      const s = new TextDecoder().decode(c.stdout);
      if (open) out[out.length - 1] += s;
      else out.push(s);
      open = true;
    }
  }
  return out;
}

test("daemon: describe says cells can show, and the harness's bound", { skip }, async () => {
  const d = await live().describe();
  assert.equal(d.operations.display.python, true);
  assert.equal(d.operations.display.javascript, true);
  assert.equal(d.limits.displayOutputs, HARNESS_DISPLAY_OUTPUTS);
});

test("daemon: python and javascript cells' display outputs, and usage", { skip }, async () => {
  const s = await live().openSession();
  try {
    const r = await s.cell({ language: "python", code: PY_CELL });
    checkPythonCell(r);
    checkCgroupUsage(r.usage, r.usageAbsent);
    const js = await s.cell({ language: "javascript", code: "display({a: 1}); console.log('js')" });
    assert.equal(js.stdout, "js\n");
    assert.deepEqual(
      js.outputs.map((o) => [o.kind, { ...o.data }]),
      [["display", { "application/json": '{"a":1}' }]],
    );
    const plain = await s.cell({ language: "python", code: "x = 1" });
    assert.deepEqual([plain.outputs, plain.outputsDropped], [[], 0]);
  } finally {
    await s.close();
  }
});

test("daemon: past the display bound the rest are dropped", { skip }, async () => {
  const s = await live().openSession({ languages: ["python"] });
  try {
    const n = HARNESS_DISPLAY_OUTPUTS + 3;
    const r = await s.cell({ language: "python", code: `for i in range(${n}): display({'text/plain': str(i)}, raw=True)` });
    assert.deepEqual(
      r.outputs.map((o) => o.data["text/plain"]),
      Array.from({ length: HARNESS_DISPLAY_OUTPUTS }, (_, i) => String(i)),
    );
    assert.equal(r.outputsDropped, 3);
  } finally {
    await s.close();
  }
});

test("daemon: a streamed cell gives its display outputs in order", { skip }, async () => {
  const s = await live().openSession({ languages: ["python"] });
  try {
    const chunks = [];
    const r = await s.cellStream({ language: "python", code: PY_CELL }, (c) => {
      chunks.push(c);
    });
    checkPythonCell(r);
    assert.deepEqual(events(chunks), ["before\n", "display", "display", "after\n", "result"]);
    assert.deepEqual(
      chunks.filter((c) => c.display).map((c) => ({ kind: c.display.kind, data: { ...c.display.data } })),
      r.outputs.map((o) => ({ kind: o.kind, data: { ...o.data } })),
    );
  } finally {
    await s.close();
  }
});

test("daemon: usage of a snippet and of a project's steps", { skip }, async () => {
  const r = await live().runSnippet({ language: "python", code: "print(1)" });
  checkCgroupUsage(r.usage, r.usageAbsent);
  const s = await live().openSession();
  try {
    const p = await s.runProject({ steps: [["true"], ["sh", "-c", "echo hi"]] });
    checkCgroupUsage(p.usage, p.usageAbsent);
    assert.equal(p.steps.length, 2);
    for (const st of p.steps) checkCgroupUsage(st.usage);
  } finally {
    await s.close();
  }
});

const skipWasm = needs("PLIMSOLL_TEST_URL", "PLIMSOLL_TEST_KEY");
test("daemon: the wasm daemon's usage is present with its source, or absent with why", { skip: skipWasm }, async () => {
  const r = await new Client({ url: env.PLIMSOLL_TEST_URL, apiKey: env.PLIMSOLL_TEST_KEY }).runSnippet({ language: "javascript", code: "console.log(1)" });
  if (r.usage === undefined) assert.notEqual(r.usageAbsent, "");
  else {
    assert.equal(r.usage.source, "worker");
    assert.equal(r.usageAbsent, "");
  }
});

const temps = [];
after(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

test("daemon: the README's example of display outputs runs as written", { skip }, async () => {
  const { execFile } = await import("node:child_process");
  const { outputPattern, readmeExamples } = await import("./helpers.mjs");
  const examples = readmeExamples("Display outputs and usage");
  assert.equal(examples.length, 1);
  // inside the package, so that "@plimsoll/client" resolves to this build
  const dir = new URL("../dist/readme-display/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const keyFile = new URL("key", dir);
  writeFileSync(keyFile, env.PLIMSOLL_TEST_KEY + "\n");
  const file = new URL("example.mjs", dir);
  writeFileSync(file, examples[0].code);
  const { PLIMSOLL_KEY: _, ...rest } = process.env;
  const cwd = mkdtempSync(join(tmpdir(), "plimsoll-ts-display-"));
  temps.push(cwd);
  const out = await new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [file.pathname],
      { cwd, env: { ...rest, PLIMSOLL_URL: env.PLIMSOLL_TEST_SESSION_URL, PLIMSOLL_KEY_FILE: keyFile.pathname } },
      (err, stdout, stderr) => (err ? reject(new Error(`example: ${stderr || err}`)) : resolve(stdout)),
    ),
  );
  assert.match(out, outputPattern(examples[0].output), `the example printed:\n${out}`);
});
