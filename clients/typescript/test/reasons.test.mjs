// SPDX-License-Identifier: Apache-2.0
// The client's reasons against tests/vectors/reasons.json, the daemon's
// table: entry for entry, both ways (docs/clients.md, "Typed refusals").
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as P from "../dist/index.js";
import { env, needs } from "./helpers.mjs";

const FILE = JSON.parse(readFileSync(new URL("../../../tests/vectors/reasons.json", import.meta.url), "utf8"));
const REASONS = new Map(FILE.reasons.map((r) => [r.reason, r]));
const skip = needs("PLIMSOLL_TEST_HOSTILE_URL");

test("every reason the client has a type for is a refusal in the file", () => {
  for (const [reason, cls] of Object.entries(P.REFUSALS)) {
    assert.ok(REASONS.has(reason), `the client has ${cls.name} for ${reason}, which the daemon does not send`);
    assert.equal(REASONS.get(reason).channel, "refusal", reason);
    assert.ok(cls.prototype instanceof P.RefusalError, reason);
  }
  assert.equal(new Set(Object.values(P.REFUSALS)).size, Object.keys(P.REFUSALS).length);
});

test("the reasons the client retries are the file's", () => {
  const fields = (reason) => ({ reason, code: "", message: "", dispatched: false, metadata: {}, httpStatus: 0 });
  const retried = Object.entries(P.REFUSALS)
    .filter(([reason, cls]) => P.isRetryable(new cls(fields(reason))))
    .map(([reason]) => reason)
    .sort();
  const want = FILE.reasons.filter((r) => r.retried).map((r) => r.reason).sort();
  assert.deepEqual(retried, want);
});

test("each reason of the file, as the daemon sends it, is the typed error the file says", { skip }, async () => {
  assert.ok(REASONS.size > 10);
  for (const want of FILE.reasons) {
    const client = new P.Client({ url: `${env.PLIMSOLL_TEST_HOSTILE_URL}/reason/${want.reason}`, apiKey: "plk_reasons" });
    const err = await client.run({ snippet: { language: "javascript", code: "console.log(1)" } }).then(
      () => assert.fail(`${want.reason}: a result`),
      (e) => e,
    );
    if (want.channel === "refusal") {
      assert.ok(err instanceof P.RefusalError, `${want.reason}: ${err}`);
      assert.notEqual(err.constructor, P.RefusalError, `${want.reason} has no type of its own in the client`);
      assert.equal(err.constructor, P.REFUSALS[want.reason], want.reason);
    } else {
      assert.equal(want.channel, "infrastructure");
      assert.equal(err.constructor, P.InfrastructureError, `${want.reason}: ${err}`);
    }
    assert.deepEqual(
      [err.reason, err.code, err.httpStatus, err.dispatched],
      [want.reason, want.code, want.http_status, want.dispatched],
      want.reason,
    );
    assert.equal(P.isRetryable(err), want.retried, `${want.reason}: retried`);
  }
});
