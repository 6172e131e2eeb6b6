// SPDX-License-Identifier: Apache-2.0
// Run records and session chains (docs/records.md, docs/clients.md).
//
// The daemon only computes the hashes; this module checks them.  SHA-256 is
// WebCrypto's (`globalThis.crypto.subtle`), so every check is async and the
// module works in browsers as well as in Node 18+.

import { ChainError, type ChainCheck } from "./errors.js";

export { ChainError, type ChainCheck } from "./errors.js";

/** A run record as the daemon sends it (proto field names). */
export interface RunRecord {
  version: number;
  request_sha256: string;
  response_sha256: string;
  provider: string;
  isolation: string;
  runtime: string;
  started_at: string;
  ended_at: string;
  previous_digest: string;
  broker_calls: number;
  broker_refused: number;
  digest: string;
  [field: string]: unknown;
}

/** One accepted call of a chain: what was sent, the answer without its record, the record. */
export interface ChainEntry {
  request: unknown;
  response: Record<string, unknown>;
  record: RunRecord;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/**
 * The canonical form (RFC 8785 for plimsoll's values): members sorted by
 * key (UTF-16 order), no whitespace, strings escaped as `JSON.stringify`
 * does, integers in plain decimal.  A number that is not a safe integer has
 * no canonical form here and is refused with a `TypeError`, as are values
 * JSON cannot carry.  Object members whose value is `undefined` are left
 * out, as `JSON.stringify` leaves them out of what is sent.
 */
export function canonical(value: unknown): string {
  const out: string[] = [];
  write(value, out, "$");
  return out.join("");
}

function write(v: unknown, out: string[], where: string): void {
  if (v === null) {
    out.push("null");
    return;
  }
  switch (typeof v) {
    case "boolean":
      out.push(v ? "true" : "false");
      return;
    case "string":
      out.push(JSON.stringify(v));
      return;
    case "number":
      if (!Number.isSafeInteger(v)) {
        throw new TypeError(`${where}: ${String(v)} is not an integer; it has no canonical form`);
      }
      out.push(Object.is(v, -0) ? "0" : String(v));
      return;
    case "bigint":
      out.push(v.toString());
      return;
    case "object":
      break;
    default:
      throw new TypeError(`${where}: a ${typeof v} has no canonical form`);
  }
  if (Array.isArray(v)) {
    out.push("[");
    v.forEach((item, i) => {
      if (item === undefined) throw new TypeError(`${where}[${i}]: undefined has no canonical form`);
      if (i > 0) out.push(",");
      write(item, out, `${where}[${i}]`);
    });
    out.push("]");
    return;
  }
  if (!isPlainObject(v)) throw new TypeError(`${where}: this object has no canonical form`);
  const keys = Object.keys(v)
    .filter((k) => v[k] !== undefined)
    .sort();
  out.push("{");
  keys.forEach((k, i) => {
    if (i > 0) out.push(",");
    out.push(JSON.stringify(k), ":");
    write(v[k], out, `${where}.${k}`);
  });
  out.push("}");
}

type Subtle = Pick<SubtleCrypto, "digest">;
let subtlePromise: Promise<Subtle> | undefined;

function subtle(): Promise<Subtle> {
  const s = globalThis.crypto?.subtle;
  if (s) return Promise.resolve(s);
  // Node 18 without the global: its WebCrypto is in node:crypto.  The
  // specifier is a variable so that bundlers for browsers leave it alone.
  const mod = "node:crypto";
  subtlePromise ??= import(mod).then((m: { webcrypto?: { subtle?: Subtle } }) => {
    if (!m.webcrypto?.subtle) throw new Error("no WebCrypto SubtleCrypto in this runtime");
    return m.webcrypto.subtle;
  });
  return subtlePromise;
}

const encoder = new TextEncoder();

/** SHA-256 of a string's UTF-8 bytes (or of the bytes), as lowercase hex. */
export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  const buf = await (await subtle()).digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  let hex = "";
  for (const b of new Uint8Array(buf)) hex += b.toString(16).padStart(2, "0");
  return hex;
}

/** SHA-256 (hex) of the canonical form of a value. */
export async function canonicalSha256(value: unknown): Promise<string> {
  return sha256Hex(canonical(value));
}

function without(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) if (k !== key) copy[k] = obj[k];
  return copy;
}

/** RFC 3339 UTC with nine fraction digits, the daemon's only time format. */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/;

async function hashOrNull(value: unknown): Promise<string | null> {
  try {
    return await canonicalSha256(value);
  } catch (e) {
    if (e instanceof TypeError) return null;
    throw e;
  }
}

/**
 * The six checks of docs/clients.md, in order; throws `ChainError(index,
 * check)` naming the first that fails.  `previous === undefined` skips
 * check 5 (a record checked alone).
 */
async function checkAt(
  index: number,
  request: unknown,
  response: unknown,
  record: unknown,
  previous: string | undefined,
): Promise<RunRecord> {
  const fail = (broken: ChainCheck, why: string): never => {
    throw new ChainError(index, broken, `record ${index}: ${broken} check failed: ${why}`);
  };
  // 1. a record is present and its version is 1
  if (!isPlainObject(record)) fail("version", "the answer carries no record");
  const rec = record as Record<string, unknown>;
  if (rec["version"] !== 1) fail("version", `version is ${JSON.stringify(rec["version"])}, not 1`);
  // 2. digest covers the record without digest
  const digest = await hashOrNull(without(rec, "digest"));
  if (typeof rec["digest"] !== "string" || digest === null || rec["digest"] !== digest) {
    fail("digest", "digest is not the SHA-256 of the record's canonical form");
  }
  // 3. request_sha256 covers what the client sent
  const reqHash = await hashOrNull(request);
  if (reqHash === null || rec["request_sha256"] !== reqHash) {
    fail("request_sha256", "request_sha256 is not the SHA-256 of what was sent");
  }
  // 4. response_sha256 covers the answer without its record
  const respHash = isPlainObject(response) ? await hashOrNull(without(response, "record")) : null;
  if (respHash === null || rec["response_sha256"] !== respHash) {
    fail("response_sha256", "response_sha256 is not the SHA-256 of the answer without its record");
  }
  // 5. previous_digest is the expected previous digest
  if (previous !== undefined && rec["previous_digest"] !== previous) {
    fail(
      "previous_digest",
      `previous_digest is ${JSON.stringify(rec["previous_digest"])}, expected ${JSON.stringify(previous)}` +
        " (a call missing, reordered or foreign)",
    );
  }
  // 6. ended_at is not before started_at
  const s = rec["started_at"];
  const e = rec["ended_at"];
  if (typeof s !== "string" || typeof e !== "string" || !TIMESTAMP.test(s) || !TIMESTAMP.test(e)) {
    fail("ended_at", "started_at and ended_at are not RFC 3339 UTC with nine fraction digits");
  }
  if ((e as string) < (s as string)) fail("ended_at", `ended_at ${e} is before started_at ${s}`);
  return rec as RunRecord;
}

/**
 * Check one record against the request sent and the answer received.
 * `record` defaults to `response.record`.  With `previous` the record must
 * name it as `previous_digest` (`""` for a run outside a session); without
 * it that check is skipped.  Throws `ChainError` (index 0) naming the first
 * check that failed; returns the record.
 */
export async function checkRecord(
  request: unknown,
  response: Record<string, unknown>,
  record: unknown = isPlainObject(response) ? response["record"] : undefined,
  previous?: string,
): Promise<RunRecord> {
  return checkAt(0, request, response, record, previous);
}

/**
 * Check a kept list of entries from the start: each record as
 * `checkRecord` does, and each naming the previous one's digest (the first
 * naming `previous`, `""` for a session's first call).  Throws `ChainError`
 * with the index of the first entry that fails; returns the last digest
 * (`previous` for no entries).
 */
export async function verifyChain(
  entries: readonly { request: unknown; response: unknown; record?: unknown }[],
  previous = "",
): Promise<string> {
  let head = previous;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const resp = e.response;
    const record =
      e.record !== undefined ? e.record : isPlainObject(resp) ? resp["record"] : undefined;
    const rec = await checkAt(i, e.request, resp, record, head);
    head = rec.digest;
  }
  return head;
}

/**
 * The chain keeper: verifies each (request, response) pair of a session in
 * order and keeps the accepted entries.  Its head advances only when every
 * check holds, so a missing, reordered or foreign call fails at
 * `previous_digest` on the next answer.  A harness keeps `entries` and signs
 * `head` (which covers every earlier record) with its own key.
 */
export class Chain {
  #entries: ChainEntry[] = [];
  #head: string;
  readonly #start: string;
  #queue: Promise<unknown> = Promise.resolve();

  /** `previous` is the digest the first record must name (`""` for a new session). */
  constructor(previous = "") {
    this.#head = previous;
    this.#start = previous;
  }

  /** The last accepted record's digest (the start, `""`, before any). */
  get head(): string {
    return this.#head;
  }

  /** The digest the first entry named. */
  get start(): string {
    return this.#start;
  }

  /** The accepted entries, in order (a copy). */
  get entries(): ChainEntry[] {
    return this.#entries.slice();
  }

  get length(): number {
    return this.#entries.length;
  }

  /**
   * Verify one answer and, when every check holds, accept it.  `record`
   * defaults to `response.record`.  Appends are verified one at a time, in
   * the order they were called.  Throws `ChainError` (its `index` is the
   * position the entry would have taken).
   */
  append(
    request: unknown,
    response: Record<string, unknown>,
    record: unknown = isPlainObject(response) ? response["record"] : undefined,
  ): Promise<RunRecord> {
    const run = async (): Promise<RunRecord> => {
      const index = this.#entries.length;
      const rec = await checkAt(index, request, response, record, this.#head);
      this.#entries.push({
        request: structuredCloneOrSelf(request),
        response: without(response, "record"),
        record: rec,
      });
      this.#head = rec.digest;
      return rec;
    };
    const p = this.#queue.then(run, run);
    this.#queue = p.catch(() => undefined);
    return p;
  }

  /** Verify the kept entries again from the start; returns the head. */
  verify(): Promise<string> {
    return verifyChain(this.#entries, this.#start);
  }
}

function structuredCloneOrSelf<T>(v: T): T {
  try {
    return typeof structuredClone === "function" ? structuredClone(v) : v;
  } catch {
    return v;
  }
}
