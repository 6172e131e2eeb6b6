// SPDX-License-Identifier: Apache-2.0
// The shared vectors (tests/vectors, docs/clients.md): every client passes them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { canonical, sha256Hex, checkRecord, verifyChain, Chain, ChainError } from "../dist/index.js";

const VECTORS = new URL("../../../tests/vectors/", import.meta.url);
const load = (name) => JSON.parse(readFileSync(new URL(name, VECTORS), "utf8"));

const canon = load("canonical.json");
const records = load("records.json");
const chains = load("chains.json");

test("the vector files are there and not empty", () => {
  assert.ok(canon.length >= 8);
  assert.ok(records.length >= 5);
  assert.ok(chains.length >= 11);
});

for (const v of canon) {
  test(`canonical: ${v.name}`, async () => {
    const text = canonical(v.input);
    assert.equal(text, v.canonical);
    assert.equal(await sha256Hex(text), v.sha256);
  });
}

test("canonical refuses what has no canonical form", () => {
  assert.throws(() => canonical({ a: 1.5 }), TypeError);
  assert.throws(() => canonical({ a: Number.NaN }), TypeError);
  assert.throws(() => canonical({ a: 2 ** 53 }), TypeError);
  assert.throws(() => canonical([undefined]), TypeError);
  assert.equal(canonical({ b: undefined, a: [1, "x", null, true] }), '{"a":[1,"x",null,true]}');
});

for (const v of records) {
  test(`record alone: ${v.name} (${v.valid ? "valid" : "invalid"})`, async () => {
    if (v.valid) {
      const rec = await checkRecord(v.request, v.response, v.record);
      assert.equal(rec.digest, v.record.digest);
      // the record may also ride inside the response
      await checkRecord(v.request, { ...v.response, record: v.record });
    } else {
      await assert.rejects(checkRecord(v.request, v.response, v.record), ChainError);
    }
  });
}

test("record alone: each alteration fails at the check that names it", async () => {
  const v = records.find((r) => r.valid);
  const cases = [
    [{ ...v.record, version: 2 }, "version"],
    [undefined, "version"],
    [{ ...v.record, provider: "docker" }, "digest"],
  ];
  for (const [rec, broken] of cases) {
    const err = await checkRecord(v.request, v.response, rec ?? null).catch((e) => e);
    assert.ok(err instanceof ChainError, String(err));
    assert.equal(err.broken, broken);
    assert.equal(err.index, 0);
  }
  let err = await checkRecord({ ...v.request, timeout_ms: 1 }, v.response, v.record).catch((e) => e);
  assert.equal(err.broken, "request_sha256");
  err = await checkRecord(v.request, { ...v.response, exit_code: 1 }, v.record).catch((e) => e);
  assert.equal(err.broken, "response_sha256");
  err = await checkRecord(v.request, v.response, v.record, "00".repeat(32)).catch((e) => e);
  assert.equal(err.broken, "previous_digest");
  await checkRecord(v.request, v.response, v.record, v.record.previous_digest);
});

for (const c of chains) {
  test(`chain: ${c.name}`, async () => {
    // verifyChain over the kept list
    const got = await verifyChain(c.entries).then(
      (head) => ({ ok: true, head }),
      (e) => ({ ok: false, e }),
    );
    // and the chain keeper, one answer at a time
    const chain = new Chain();
    let keeperErr;
    for (const e of c.entries) {
      try {
        await chain.append(e.request, { ...e.response, record: e.record });
      } catch (err) {
        keeperErr = err;
        break;
      }
    }
    if (c.valid) {
      assert.ok(got.ok, got.e && got.e.message);
      const last = c.entries[c.entries.length - 1].record.digest;
      assert.equal(got.head, last);
      assert.equal(keeperErr, undefined);
      assert.equal(chain.head, last);
      assert.equal(chain.entries.length, c.entries.length);
      assert.equal(await chain.verify(), last);
    } else {
      assert.ok(!got.ok, "the broken chain verified");
      assert.ok(got.e instanceof ChainError, String(got.e));
      assert.equal(got.e.index, c.fails_at);
      assert.equal(got.e.broken, c.broken);
      assert.ok(keeperErr instanceof ChainError, String(keeperErr));
      assert.equal(keeperErr.index, c.fails_at);
      assert.equal(keeperErr.broken, c.broken);
      // the keeper kept exactly what came before the break
      assert.equal(chain.entries.length, c.fails_at);
      assert.equal(chain.head, c.fails_at === 0 ? "" : c.entries[c.fails_at - 1].record.digest);
    }
  });
}
