// SPDX-License-Identifier: Apache-2.0
// The client against the hostile daemon of tests/clients/harness.py, which
// serves tests/vectors/hostile_answers.json: huge, nested, wrong-typed,
// NUL-holding and slow answers (docs/clients.md, "What a client reads").
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as P from "../dist/index.js";
import { env, needs } from "./helpers.mjs";

const HOSTILE = JSON.parse(readFileSync(new URL("../../../tests/vectors/hostile_answers.json", import.meta.url), "utf8"));
const skip = needs("PLIMSOLL_TEST_HOSTILE_URL");

/** Make the case's call: ["result", answer] or [the kind of error, it]. */
async function outcomeOf(c) {
  const settings = c.client ?? {};
  const client = new P.Client({
    url: `${env.PLIMSOLL_TEST_HOSTILE_URL}/${c.name}`,
    apiKey: "plk_hostile",
    ...(settings.timeout_ms !== undefined ? { timeoutMs: settings.timeout_ms } : {}),
    ...(settings.max_answer_bytes !== undefined ? { maxAnswerBytes: settings.max_answer_bytes } : {}),
  });
  try {
    if (c.call === "Run") return ["result", await client.run(c.request)];
    if (c.call === "Describe") return ["result", await client.describe()];
    if (c.call === "OpenSession") return ["result", await client.openSession()];
    throw new Error(`no such call in the vectors: ${c.call}`);
  } catch (e) {
    if (e instanceof P.ProtocolError) return ["protocol", e];
    if (e instanceof P.IsolationEvidenceMismatchError) return ["mismatch", e];
    if (e instanceof P.RefusalError) return ["refusal", e];
    if (e instanceof P.InfrastructureError) return [e.code === "deadline_exceeded" ? "timeout" : "transport", e];
    return [`untyped ${e?.name ?? typeof e}`, e];
  }
}

test("the limits are the shared ones", () => {
  assert.equal(P.DEFAULT_MAX_ANSWER_BYTES, HOSTILE.limits.max_answer_bytes);
  assert.equal(new P.Client({ url: "http://x", apiKey: "k" }).maxAnswerBytes, HOSTILE.limits.max_answer_bytes);
  assert.equal(P.MAX_ANSWER_DEPTH, HOSTILE.limits.max_depth);
  assert.equal(P.MAX_ANSWER_INTEGER, HOSTILE.limits.max_integer);
});

test("every hostile answer", { skip }, async (t) => {
  assert.ok(HOSTILE.cases.length > 40);
  for (const c of HOSTILE.cases) {
    await t.test(c.name, async () => {
      const want = c.expect;
      const t0 = performance.now();
      const [got, value] = await outcomeOf(c);
      const took = performance.now() - t0;
      assert.ok(want.outcomes.includes(got), `${c.what}: want ${want.outcomes.join(" or ")}, got ${got}: ${value?.message ?? ""}`);
      if (want.within_ms !== undefined) assert.ok(took <= want.within_ms, `${c.what}: took ${took.toFixed(0)} ms`);
      if (got === "result" && want.result) {
        assert.deepEqual(
          [value.exitCode, value.stdout, value.stderr],
          [want.result.exit_code, want.result.stdout, want.result.stderr],
        );
        assert.equal(value.record.digest, value.raw.record.digest);
      }
      if (got === "refusal") {
        assert.equal(value.reason, want.reason);
        assert.equal(value.dispatched, false);
      }
      if (["protocol", "mismatch", "timeout", "transport"].includes(got)) assert.equal(value.dispatched, true);
    });
  }
});
