// SPDX-License-Identifier: Apache-2.0
// What an answer may be (docs/clients.md, "What a client reads"): JSON text
// in UTF-8, no deeper than MAX_ANSWER_DEPTH, no member twice, integers only and
// none past MAX_ANSWER_INTEGER, and the known members of each message of their
// proto type.  Anything else is `Malformed`, which the client turns into a
// `ProtocolError`.
//
// `JSON.parse` alone cannot tell `1.0` from `1`, keeps the last of two
// members of one name, and takes `"\ud800"`: a scan of the text catches
// those first, then `JSON.parse` builds the value.

/** The default cap on one answer's body, the same in every official client (256 MiB). */
export const DEFAULT_MAX_ANSWER_BYTES = 256 * 1024 * 1024;
/** Objects and arrays nested in an answer, the answer itself counting 1. */
export const MAX_ANSWER_DEPTH = 64;
/** The largest magnitude of a number in an answer (2^53 - 1). */
export const MAX_ANSWER_INTEGER = Number.MAX_SAFE_INTEGER;

/** An answer that breaks the rules above. */
export class Malformed extends Error {
  constructor(message: string) {
    super(message);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "Malformed";
  }
}

/** Decoding ran past the call's deadline (`performance.now()` time). */
export class DeadlinePassed extends Error {
  constructor() {
    super("the deadline passed while decoding the answer");
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "DeadlinePassed";
  }
}

const HEX4 = /^[0-9a-fA-F]{4}$/;
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const LARGEST = String(MAX_ANSWER_INTEGER);

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** A `\uXXXX` escape's code unit at `i` (the backslash), or Malformed. */
function escapedUnit(text: string, i: number): number {
  const hex = text.slice(i + 2, i + 6);
  if (text.charCodeAt(i + 1) !== 0x75 || !HEX4.test(hex)) throw new Malformed("a bad \\u escape");
  return parseInt(hex, 16);
}

/**
 * Check the text of an answer: depth, duplicate members, number lexemes,
 * lone surrogates.  Not a full JSON grammar check: `JSON.parse` does that.
 */
export function scan(text: string, deadline?: number): void {
  const n = text.length;
  // one entry per open container: its member names (objects) or null (arrays)
  const open: (Set<string> | null)[] = [];
  const STRIDE = 1 << 20;
  let next = STRIDE;
  let i = 0;
  const tick = (): void => {
    if (deadline !== undefined && performance.now() > deadline) throw new DeadlinePassed();
    next = i + STRIDE;
  };
  while (i < n) {
    if (i >= next) tick();
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const start = i++;
      let escapes = false;
      for (;;) {
        if (i >= n) throw new Malformed("a string does not end");
        if (i >= next) tick();
        const d = text.charCodeAt(i);
        if (d === 0x22) break;
        if (d !== 0x5c) {
          i++;
          continue;
        }
        escapes = true;
        if (text.charCodeAt(i + 1) !== 0x75) {
          i += 2;
          continue;
        }
        const unit = escapedUnit(text, i);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = text.charCodeAt(i + 6) === 0x5c ? escapedUnit(text, i + 6) : -1;
          if (low < 0xdc00 || low > 0xdfff) throw new Malformed("a string holds a lone surrogate");
          i += 12;
        } else if (unit >= 0xdc00 && unit <= 0xdfff) {
          throw new Malformed("a string holds a lone surrogate");
        } else {
          i += 6;
        }
      }
      const end = i++;
      const names = open.length > 0 ? open[open.length - 1] : null;
      if (names) {
        let k = i;
        while (k < n && isSpace(text.charCodeAt(k))) k++;
        if (text.charCodeAt(k) === 0x3a) {
          let name: string;
          try {
            name = escapes ? (JSON.parse(text.slice(start, end + 1)) as string) : text.slice(start + 1, end);
          } catch {
            throw new Malformed("a member name is not a JSON string");
          }
          if (names.has(name)) throw new Malformed(`the member ${JSON.stringify(name.slice(0, 40))} appears twice`);
          names.add(name);
        }
      }
      continue;
    }
    if (c === 0x7b || c === 0x5b) {
      open.push(c === 0x7b ? new Set<string>() : null);
      if (open.length > MAX_ANSWER_DEPTH) throw new Malformed(`nested deeper than ${MAX_ANSWER_DEPTH}`);
      i++;
      continue;
    }
    if (c === 0x7d || c === 0x5d) {
      open.pop();
      i++;
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i++;
      for (; i < n; i++) {
        const d = text.charCodeAt(i);
        if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d)) break;
      }
      const lexeme = text.slice(start, i);
      if (!INTEGER.test(lexeme)) throw new Malformed(`a number that is not an integer (${lexeme.slice(0, 40)})`);
      const digits = lexeme[0] === "-" ? lexeme.slice(1) : lexeme;
      if (digits.length > LARGEST.length || (digits.length === LARGEST.length && digits > LARGEST)) {
        throw new Malformed(`the integer ${lexeme.slice(0, 40)} is past 2^53-1`);
      }
      continue;
    }
    i++;
  }
}

/** The JSON value of an answer's body (its bytes), or Malformed / DeadlinePassed. */
export function parse(bytes: Uint8Array, deadline?: number): unknown {
  let text: string;
  try {
    // fatal: bytes that are not UTF-8 are an error; ignoreBOM: a BOM stays, and JSON refuses it
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new Malformed("not UTF-8");
  }
  scan(text, deadline);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new Malformed(`not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
}

// ---- the messages' shapes (proto/plimsoll/v1/sandbox.proto) ---------------

/** `map<string, string>`: a proto map of strings, an object whose every member is a string. */
type Kind = "string" | "bool" | "int32" | "uint32" | "any" | "map<string, string>";
export type Shape = { readonly [member: string]: Kind | Shape | readonly [Kind | Shape] };

const USAGE: Shape = {
  cpu_user_ms: "uint32",
  cpu_system_ms: "uint32",
  memory_peak_kib: "uint32",
  wall_ms: "uint32",
  source: "string",
};
const DISPLAY_OUTPUT: Shape = { kind: "string", data: "map<string, string>" };
const STEP_RESULT: Shape = {
  name: "string",
  exit_code: "int32",
  stdout: "string",
  stderr: "string",
  stdout_truncated: "bool",
  stderr_truncated: "bool",
  duration_ms: "uint32",
  timed_out: "bool",
  stdout_base64: "string",
  stderr_base64: "string",
  usage: USAGE,
};
const RUN_RECORD: Shape = {
  version: "int32",
  request_sha256: "string",
  response_sha256: "string",
  provider: "string",
  isolation: "string",
  runtime: "string",
  started_at: "string",
  ended_at: "string",
  previous_digest: "string",
  digest: "string",
  broker_calls: "uint32",
  broker_refused: "uint32",
};
const ARTIFACT: Shape = {
  path: "string",
  path_base64: "string",
  size: "uint32",
  content: "string",
  content_base64: "string",
  truncated: "bool",
};
const RUN_RESPONSE: Shape = {
  exit_code: "int32",
  stdout: "string",
  stderr: "string",
  stdout_truncated: "bool",
  stderr_truncated: "bool",
  duration_ms: "uint32",
  sandbox_name: "string",
  isolation: "string",
  timed_out: "bool",
  out_of_memory: "bool",
  outcome: "string",
  detail: "string",
  steps: [STEP_RESULT],
  record: RUN_RECORD,
  stdout_base64: "string",
  stderr_base64: "string",
  interpreter_started: "bool",
  artifacts: [ARTIFACT],
  artifacts_truncated: "bool",
  outputs: [DISPLAY_OUTPUT],
  outputs_dropped: "uint32",
  usage: USAGE,
  usage_absent: "string",
};
const OPERATION_SUPPORT: Shape = {
  supported: "bool",
  engine: "string",
  max_timeout_ms: "uint32",
  languages: ["string"],
  grants: "bool",
  streams: "bool",
};
const LIMITS: Shape = {
  memory_mb: "uint32",
  total_memory_mb: "uint32",
  max_concurrent: "uint32",
  effective_concurrency: "uint32",
  per_key_concurrent: "uint32",
  rate_per_min: "uint32",
  rate_burst: "uint32",
  default_timeout_ms: "uint32",
  output_bytes: "uint32",
  max_snippet_bytes: "uint32",
  max_request_bytes: "uint32",
  memory_budget_applies: "bool",
  file_read_bytes: "uint32",
  file_list_entries: "uint32",
  session_max_lifetime_s: "uint32",
  collect_files: "uint32",
  collect_bytes: "uint32",
  display_outputs: "uint32",
  display_output_bytes: "uint32",
  display_bytes: "uint32",
};
const DESCRIBE_RESPONSE: Shape = {
  version: "string",
  provider: "string",
  isolation: "string",
  runtime: "string",
  ready: "bool",
  ready_detail: "string",
  supports_sessions: "bool",
  languages: ["string"],
  operations: {
    snippet: OPERATION_SUPPORT,
    project: OPERATION_SUPPORT,
    module: OPERATION_SUPPORT,
    session: OPERATION_SUPPORT,
    files: OPERATION_SUPPORT,
    artifacts: { project: "bool", snippet: "bool" },
    display: { python: "bool", javascript: "bool", matplotlib: "bool", pandas: "bool" },
  },
  limits: LIMITS,
};

const SESSION_INTERPRETER: Shape = { language: "string", alive: "bool" };
const SESSION_INFO: Shape = {
  session_id: "string",
  state: "string",
  ended_reason: "string",
  created_at: "string",
  last_call_at: "string",
  idle_deadline: "string",
  lifetime_deadline: "string",
  ended_at: "string",
  calls: "uint32",
  calls_waiting: "uint32",
  previous_digest: "string",
  languages: ["string"],
  interpreters: [SESSION_INTERPRETER],
  disk_used_kib: "uint32",
  disk_budget_kib: "uint32",
  max_lifetime_s: "uint32",
  route: "string",
};

const WRITE_FILES_RESPONSE: Shape = { files: "uint32", bytes: "uint32", record: RUN_RECORD };
const READ_FILE_RESPONSE: Shape = {
  path: "string",
  size: "uint32",
  offset: "uint32",
  content: "string",
  content_base64: "string",
  length: "uint32",
  more: "bool",
  record: RUN_RECORD,
};
const FILE_ENTRY: Shape = {
  path: "string",
  path_base64: "string",
  type: "string",
  size: "uint32",
  mode: "uint32",
  modified_at: "string",
};
const LIST_FILES_RESPONSE: Shape = { entries: [FILE_ENTRY], truncated: "bool", record: RUN_RECORD };

/** The 200 answer of each method. */
export const RESPONSES: Readonly<Record<string, Shape>> = {
  Describe: DESCRIBE_RESPONSE,
  Run: RUN_RESPONSE,
  RunInSession: RUN_RESPONSE,
  RunCell: RUN_RESPONSE,
  OpenSession: { session_id: "string", route: "string" },
  CloseSession: {},
  ListSessions: { sessions: [SESSION_INFO] },
  GetSession: SESSION_INFO,
  ExtendSession: SESSION_INFO,
  WriteFiles: WRITE_FILES_RESPONSE,
  ReadFile: READ_FILE_RESPONSE,
  ListFiles: LIST_FILES_RESPONSE,
};

/** The states a SessionInfo may be in. */
export const SESSION_STATES = ["ready", "paused", "ended"] as const;
const DIGEST = /^[0-9a-f]{64}$/;
/** A daemon's route (its PLIMSOLL_INSTANCE): 1 to 63 of [A-Za-z0-9._-]. */
export const ROUTE = /^[A-Za-z0-9._-]{1,63}$/;

/** A `route` member that is none (`""`, absent) or one a daemon may have. */
function checkRoute(v: Record<string, unknown>, where: string): void {
  const route = v["route"];
  if (typeof route === "string" && route !== "" && !ROUTE.test(route)) {
    throw new Malformed(`${where}.route is ${JSON.stringify(route.slice(0, 80))}, not 1 to 63 of [A-Za-z0-9._-]`);
  }
}

/**
 * What a SessionInfo must hold beyond its members' types: a session_id,
 * a state the client knows, a previous_digest that is none (`""`) or a
 * SHA-256 in lowercase hex (a reconnected session's chain starts there),
 * and a route that is none or one a daemon may have.
 */
function checkSessionInfo(v: Record<string, unknown>, where: string): void {
  const id = v["session_id"];
  if (typeof id !== "string" || id === "") throw new Malformed(`${where}.session_id is missing or empty`);
  const state = v["state"];
  if (typeof state !== "string" || !(SESSION_STATES as readonly string[]).includes(state)) {
    throw new Malformed(`${where}.state is ${JSON.stringify(state ?? "")}, not ready, paused or ended`);
  }
  const previous = v["previous_digest"];
  if (typeof previous === "string" && previous !== "" && !DIGEST.test(previous)) {
    throw new Malformed(`${where}.previous_digest is not a SHA-256 in lowercase hex`);
  }
  checkRoute(v, where);
}

/** The types a FileEntry may have. */
export const FILE_ENTRY_TYPES = ["file", "directory", "symlink", "fifo", "socket", "device", "other"] as const;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * The bytes of a bytes member (`where`): base64 in the standard alphabet or
 * the URL-safe one (proto3 JSON takes both), padded or not; else Malformed.
 */
export function base64Member(text: string, where: string): Uint8Array {
  const bare = text.replace(/=+$/, "");
  const padded = text.length !== bare.length;
  if (!BASE64.test(text) || bare.length % 4 === 1 || (padded && text.length % 4 !== 0)) {
    throw new Malformed(`${where} is not base64`);
  }
  const bin = atob(bare.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const utf8Length = (s: string): number => new TextEncoder().encode(s).length;

/**
 * A ReadFile answer: `content_base64`, when set, is base64, and `length`
 * is the number of bytes that came (those of `content_base64`, else of
 * `content` in UTF-8).
 */
function checkReadFile(v: Record<string, unknown>, where: string): void {
  const b64 = v["content_base64"];
  const content = v["content"];
  const bytes =
    typeof b64 === "string" && b64 !== ""
      ? base64Member(b64, `${where}.content_base64`).length
      : utf8Length(typeof content === "string" ? content : "");
  const length = v["length"] ?? 0;
  if (length !== bytes) {
    throw new Malformed(`${where}.length is ${String(length)}, but ${bytes} bytes came`);
  }
}

/** A ListFiles answer: each entry has a path, a type of FILE_ENTRY_TYPES, and a path_base64 that is base64. */
function checkListFiles(v: Record<string, unknown>, where: string): void {
  const entries = v["entries"];
  if (!Array.isArray(entries)) return;
  entries.forEach((e: Record<string, unknown>, i: number) => {
    const at = `${where}.entries[${i}]`;
    const path = e["path"];
    if (typeof path !== "string" || path === "") throw new Malformed(`${at}.path is missing or empty`);
    const type = e["type"];
    if (typeof type !== "string" || !(FILE_ENTRY_TYPES as readonly string[]).includes(type)) {
      throw new Malformed(`${at}.type is ${JSON.stringify(type ?? "")}, not one of ${FILE_ENTRY_TYPES.join(", ")}`);
    }
    const b64 = e["path_base64"];
    if (typeof b64 === "string" && b64 !== "" && base64Member(b64, `${at}.path_base64`).length === 0) {
      throw new Malformed(`${at}.path_base64 holds no bytes`);
    }
  });
}

/** The kinds a display output may be. */
export const DISPLAY_KINDS = ["display", "result"] as const;

/**
 * Whether a display output carries `mime`'s data as text: `text/*`,
 * `application/json`, `application/javascript`, `image/svg+xml`, `*+json`
 * and `*+xml`.  Every other type comes as base64.
 */
export function mimeIsText(mime: string): boolean {
  return (
    mime.startsWith("text/") ||
    mime === "application/json" ||
    mime === "application/javascript" ||
    mime === "image/svg+xml" ||
    mime.endsWith("+json") ||
    mime.endsWith("+xml")
  );
}

/**
 * A display output: a kind of DISPLAY_KINDS, and the data of each type that
 * is not text base64.
 */
export function checkDisplay(d: Record<string, unknown>, where: string): void {
  const kind = d["kind"];
  if (typeof kind !== "string" || !(DISPLAY_KINDS as readonly string[]).includes(kind)) {
    throw new Malformed(`${where}.kind is ${JSON.stringify(typeof kind === "string" ? kind.slice(0, 40) : (kind ?? ""))}, not display or result`);
  }
  const data = d["data"];
  if (!isObject(data)) return;
  for (const [mime, v] of Object.entries(data)) {
    if (!mimeIsText(mime)) base64Member(v as string, `${where}.data[${JSON.stringify(mime.slice(0, 40))}]`);
  }
}

/** A run's artifacts (each has a path, its base64 members are base64) and display outputs (`checkDisplay`). */
export function checkRun(v: Record<string, unknown>, where: string): void {
  const outs = v["outputs"];
  if (Array.isArray(outs)) outs.forEach((d: Record<string, unknown>, i: number) => checkDisplay(d, `${where}.outputs[${i}]`));
  const arts = v["artifacts"];
  if (!Array.isArray(arts)) return;
  arts.forEach((a: Record<string, unknown>, i: number) => {
    const at = `${where}.artifacts[${i}]`;
    const b64 = a["path_base64"];
    const hasB64 = typeof b64 === "string" && b64 !== "";
    if (hasB64 ? base64Member(b64, `${at}.path_base64`).length === 0 : typeof a["path"] !== "string" || a["path"] === "") {
      throw new Malformed(`${at} has no path`);
    }
    const c = a["content_base64"];
    if (typeof c === "string" && c !== "") base64Member(c, `${at}.content_base64`);
  });
}

/** What some methods' answers must hold beyond their members' types (checkAnswer). */
const REQUIRED: Readonly<Record<string, (answer: Record<string, unknown>, where: string) => void>> = {
  Run: checkRun,
  RunInSession: checkRun,
  RunCell: checkRun,
  ListSessions: (answer, where) => {
    const sessions = answer["sessions"];
    if (Array.isArray(sessions)) {
      sessions.forEach((s: Record<string, unknown>, i: number) => checkSessionInfo(s, `${where}.sessions[${i}]`));
    }
  },
  GetSession: checkSessionInfo,
  ExtendSession: checkSessionInfo,
  OpenSession: checkRoute,
  ReadFile: checkReadFile,
  ListFiles: checkListFiles,
};

/** What of a Connect error is checked; its details are read leniently. */
export const CONNECT_ERROR: Shape = { code: "string", message: "string", details: ["any"] };

/** A message of RunStream and RunCellStream (bytes are base64 strings). */
export const RUN_STREAM_RESPONSE: Shape = {
  output: { stdout: "string", stderr: "string", step: "uint32", display: DISPLAY_OUTPUT },
  result: RUN_RESPONSE,
};
/** A stream's end-of-stream message: `{}` or `{"error": …}` (Connect's "metadata" is ignored). */
export const END_STREAM: Shape = { error: CONNECT_ERROR, metadata: "any" };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function check(value: unknown, kind: Kind | Shape | readonly [Kind | Shape], where: string): void {
  if (kind === "any") return;
  if (kind === "map<string, string>") {
    if (!isObject(value)) throw new Malformed(`${where} is not an object`);
    for (const [k, v] of Object.entries(value)) {
      if (typeof v !== "string") throw new Malformed(`${where}[${JSON.stringify(k.slice(0, 40))}] is not a string`);
    }
    return;
  }
  if (Array.isArray(kind)) {
    if (!Array.isArray(value)) throw new Malformed(`${where} is not an array`);
    value.forEach((v: unknown, i: number) => {
      if (v === null) throw new Malformed(`${where}[${i}] is null`);
      check(v, (kind as readonly [Kind | Shape])[0], `${where}[${i}]`);
    });
    return;
  }
  if (typeof kind === "object") {
    if (!isObject(value)) throw new Malformed(`${where} is not an object`);
    for (const [name, sub] of Object.entries(kind)) {
      if (!Object.prototype.hasOwnProperty.call(value, name)) continue;
      const v = value[name];
      // null is the default, as proto3 JSON says
      if (v !== null) check(v, sub, `${where}.${name}`);
    }
    return;
  }
  let ok: boolean;
  switch (kind) {
    case "string":
      ok = typeof value === "string";
      break;
    case "bool":
      ok = typeof value === "boolean";
      break;
    case "int32":
      ok = Number.isInteger(value) && (value as number) >= -(2 ** 31) && (value as number) <= 2 ** 31 - 1;
      break;
    case "uint32":
      ok = Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 2 ** 32 - 1;
      break;
  }
  if (!ok) throw new Malformed(`${where} is not ${kind === "int32" || kind === "uint32" ? "an" : "a"} ${kind}`);
}

/** `value` when it is an object whose known members have their types; else Malformed. */
export function checkShape(value: unknown, shape: Shape, what: string): Record<string, unknown> {
  if (!isObject(value)) throw new Malformed("the answer is not a JSON object");
  check(value, shape, what);
  return value;
}

/**
 * `value` when it is a 200 answer `method` may give: its known members of
 * their types (`RESPONSES`; `{}` for a method not listed) and what the
 * method's answer must hold besides (a SessionInfo's session_id and
 * state); else Malformed.
 */
export function checkAnswer(value: unknown, method: string): Record<string, unknown> {
  const answer = checkShape(value, RESPONSES[method] ?? {}, method);
  if (Object.prototype.hasOwnProperty.call(REQUIRED, method)) REQUIRED[method]!(answer, method);
  return answer;
}

/**
 * Whether a Content-Type is `application/json` (any case), with a charset,
 * if any, of UTF-8 (quoted or not); other parameters are ignored.
 */
export function mediaTypeIsJson(value: string | null | undefined): boolean {
  if (!value) return false;
  const parts = value.split(";");
  if (parts[0]!.trim().toLowerCase() !== "application/json") return false;
  for (const p of parts.slice(1)) {
    const eq = p.indexOf("=");
    const name = (eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase();
    if (name !== "charset") continue;
    let v = eq < 0 ? "" : p.slice(eq + 1).trim();
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    if (v.toLowerCase() !== "utf-8") return false;
  }
  return true;
}
