// SPDX-License-Identifier: Apache-2.0
// Shared by the tests: the harness's environment and fake daemons.
import { readFileSync } from "node:fs";
import { canonical, sha256Hex } from "../dist/index.js";

export const env = process.env;

/** The skip reason when a harness variable is missing (false when it is set). */
export function needs(...names) {
  const missing = names.filter((n) => !env[n]);
  if (missing.length === 0) return false;
  return `${missing.join(", ")} not set: run under python3 tests/clients/harness.py -- clients/typescript/run-tests`;
}

export const STARTED = "2026-11-30T01:02:03.000000001Z";
export const ENDED = "2026-11-30T01:02:03.001000001Z";

/** A 200 answer whose record is right for `request`, naming `previous`. */
export async function answerFor(request, response, { previous = "", record = {} } = {}) {
  const rec = {
    version: 1,
    request_sha256: await sha256Hex(canonical(request)),
    response_sha256: await sha256Hex(canonical(response)),
    provider: "wasm",
    isolation: "process",
    runtime: "test",
    started_at: STARTED,
    ended_at: ENDED,
    previous_digest: previous,
    broker_calls: 0,
    broker_refused: 0,
    ...record,
  };
  rec.digest = await sha256Hex(canonical(rec));
  return { ...response, record: rec };
}

export const RESPONSE = {
  exit_code: 0,
  stdout: "2\n",
  stderr: "",
  stdout_truncated: false,
  stderr_truncated: false,
  duration_ms: 1,
  sandbox_name: "plimsoll-test",
  isolation: "process",
  timed_out: false,
  out_of_memory: false,
  outcome: "completed",
  detail: "",
  steps: [],
};

/** A Connect error body. */
export function connectError(code, reason, message, metadata = { dispatched: "false", isolation: "process" }) {
  return {
    code,
    message,
    details: [
      {
        type: "google.rpc.ErrorInfo",
        value: "",
        debug: { reason, domain: "plimsoll", metadata },
      },
    ],
  };
}

/**
 * A fake fetch: `answer(call)` gets {method, url, headers, body (parsed),
 * text} and returns {status, body} (body an object or a string), or throws.
 * `calls` records every call.
 */
export function fakeFetch(answer) {
  const calls = [];
  const f = async (url, init) => {
    const call = {
      url,
      method: url.slice(url.lastIndexOf("/") + 1),
      headers: init.headers,
      text: init.body,
      body: JSON.parse(init.body),
      signal: init.signal,
    };
    calls.push(call);
    const a = await answer(call, calls.length - 1);
    const text = typeof a.body === "string" ? a.body : JSON.stringify(a.body);
    return new Response(text, { status: a.status ?? 200, headers: { "Content-Type": "application/json" } });
  };
  f.calls = calls;
  return f;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The README's ts blocks under the section `title`, each with the output
 * block after it: what a reader would run and see.
 */
export function readmeExamples(title) {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const section = new RegExp(`^## ${title}\\n([\\s\\S]*?)(?=^## )`, "m").exec(readme);
  if (!section) throw new Error(`README.md has no ${title} section`);
  const out = [];
  const re = /<!-- doc: run docker-sessions -->\n```ts\n([\s\S]*?)```\n+<!-- doc: output -->\n```\n([\s\S]*?)```/g;
  for (let m; (m = re.exec(section[1])); ) out.push({ code: m[1], output: m[2] });
  return out;
}

/** docs' output rules: `…` alone is any lines, inside a line any text. */
export function outputPattern(shown) {
  const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const lines = shown.replace(/\n+$/, "").split("\n").map((l) => l.trimEnd());
  const body = lines.map((l) => (l === "…" ? "(?:.*\\n)*?" : l.split("…").map(esc).join(".*") + "\\n")).join("");
  return new RegExp(`^${body}\\n*$`);
}
