// SPDX-License-Identifier: Apache-2.0
// The plimsoll client: Connect unary calls with JSON bodies over fetch
// (docs/api.md), checked as docs/clients.md says.

import {
  checkAnswer,
  checkShape,
  CONNECT_ERROR,
  DeadlinePassed,
  DEFAULT_MAX_ANSWER_BYTES,
  Malformed,
  mediaTypeIsJson,
  parse,
  ROUTE,
} from "./answer.js";
import {
  ChainError,
  type ConnectErrorFields,
  type ErrorMetadata,
  errorFromConnect,
  InfrastructureError,
  IsolationEvidenceMismatchError,
  PlimsollError,
  ProtocolError,
  SessionEndedError,
} from "./errors.js";
import { Chain, canonical, checkRecord } from "./record.js";
import { readKeyFile, resolveKey, resolveUrl } from "./config.js";
import { packFiles, readLocal, remoteDirOf, walkUpload, writeLocal } from "./files.js";
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  envelope,
  mediaTypeIsStream,
  type OnOutput,
  STREAM_MEDIA_TYPE,
  StreamDecoder,
} from "./stream.js";
import {
  backoffMs,
  isRetryable,
  resolveRetry,
  type ResolvedRetryPolicy,
  type RetryPolicy,
  sleep,
} from "./retry.js";
import {
  type CellInput,
  type Description,
  description,
  encodeBase64,
  type FileInput,
  type ListFilesOptions,
  type ListFilesResult,
  listFilesResult,
  type ModuleInput,
  type ProjectInput,
  type ReadFileOptions,
  type ReadFileResult,
  readFileResult,
  type RunOptions,
  RunResult,
  type SessionInfo,
  sessionInfo,
  type SnippetInput,
  type StepInput,
  type UploadResult,
  tierRank,
  TIERS,
  type WireCell,
  type WireFile,
  type WireRunRequest,
  type WireStep,
  type WriteFilesResult,
  writeFilesResult,
} from "./types.js";

const SERVICE = "/plimsoll.v1.SandboxService/";

type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /**
   * The daemon's base URL, e.g. `http://127.0.0.1:7475`.  Not given:
   * `PLIMSOLL_URL`, else `http://127.0.0.1:7475`, where there is a
   * `process.env`; in a browser it must be given.
   */
  url?: string | undefined;
  /**
   * The API key, sent as `Authorization: Bearer <key>`.  Not given:
   * `PLIMSOLL_KEY`, else the first line of the file `PLIMSOLL_KEY_FILE`,
   * where there is a `process.env`; else none is sent.  Trimmed of
   * surrounding whitespace; never shown by an error or by the client.
   */
  apiKey?: string | undefined;
  /**
   * One attempt, in ms, from the request to the decoded answer however
   * slowly it comes (default 120000).
   */
  timeoutMs?: number | undefined;
  /**
   * The most bytes one answer's body may have (default
   * `DEFAULT_MAX_ANSWER_BYTES`, 256 MiB); a longer one is a `ProtocolError`.
   */
  maxAnswerBytes?: number | undefined;
  /**
   * The most bytes one message of a stream may have (`runStream`,
   * `runCellStream`; default `DEFAULT_MAX_MESSAGE_BYTES`, 16 MiB); a longer
   * one is a `ProtocolError`, refused from its header.  `maxAnswerBytes`
   * bounds the whole stream.
   */
  maxMessageBytes?: number | undefined;
  /** Retry `AT_CAPACITY` and `RATE_LIMITED` (off by default; `true` for the defaults). */
  retry?: RetryPolicy | boolean | undefined;
  /**
   * Check every answer's record (default true).  A `Session` checks its
   * chain whatever this says: keeping the chain is what it is for.
   */
  verifyRecords?: boolean | undefined;
  /** The fetch to use (default the global one). */
  fetch?: FetchLike | undefined;
}

export interface OpenSessionOptions {
  /** Cell languages to start at open (a hint). */
  languages?: string[] | undefined;
  /**
   * The weakest tier the session's calls accept: sent with each
   * `runSnippet`/`runProject` (so the daemon refuses before running) and
   * re-checked on every answer, cells included.
   */
  minimumIsolation?: string | undefined;
}

/**
 * The route of a call by session id (`getSession`, `runCell`, `writeFiles`,
 * …): behind a proxy in front of many daemons, the session's daemon.
 */
export interface RouteOptions {
  /**
   * The daemon's route (its PLIMSOLL_INSTANCE, as `Session.route` or
   * `SessionInfo.route` has it), sent as the `Plimsoll-Route` header: 1 to
   * 63 of `[A-Za-z0-9._-]`, else a `RangeError` before anything is sent.
   * Unset or `""`: none.  A daemon reached that is not the route's
   * refuses with `WrongRouteError`; nothing ran.
   */
  route?: string | undefined;
}

/** How `connectSession` takes up an existing session. */
export interface ConnectSessionOptions extends RouteOptions {
  /**
   * The weakest tier the handle's calls accept, as `openSession`'s: sent
   * with each `runSnippet`/`runProject` and re-checked on every answer.
   * The daemon keeps no floor of the session's, so give it again here.
   */
  minimumIsolation?: string | undefined;
}

type Json = Record<string, unknown>;

/** A numeric option: `fallback` when undefined, else a number (not `"5000"`). */
function number(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") throw new TypeError(`Client: ${name} must be a number, not ${typeof value}`);
  return value;
}

/**
 * A uint32 field of a request (`timeout_ms`, `memory_mb`): unset, or an
 * integer from 0 to 2^32-1.  A `"5000"` would be read by the daemon as
 * 5000 and hashed as a number, so the record could never match what was
 * sent: it is refused here, naming the field.
 */
function checkUint32(name: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== "number") throw new TypeError(`${name} must be a number, not ${value === null ? "null" : typeof value}`);
  if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw new RangeError(`${name} must be an integer from 0 to 4294967295, not ${value}`);
  }
}

/** A session id argument: a string that is not empty, before anything is sent. */
function checkSessionId(value: unknown): void {
  if (typeof value !== "string") {
    throw new TypeError(`sessionId must be a string, not ${value === null ? "null" : typeof value}`);
  }
  if (value === "") throw new RangeError("sessionId must not be empty");
}

/** The request header that names a session's daemon behind a proxy. */
const ROUTE_HEADER = "Plimsoll-Route";

/**
 * A route argument: unset or `""` (none: `undefined`), else a string of 1
 * to 63 of `[A-Za-z0-9._-]`, checked before anything is sent.
 */
function checkRoute(value: unknown): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (typeof value !== "string") {
    throw new TypeError(`route must be a string, not ${value === null ? "null" : typeof value}`);
  }
  if (!ROUTE.test(value)) {
    throw new RangeError(
      `route must be 1 to 63 of A-Z, a-z, 0-9, '.', '_' and '-' (a daemon's PLIMSOLL_INSTANCE), not ${JSON.stringify(value.slice(0, 80))}`,
    );
  }
  return value;
}

/** The route of an options argument, checked (`undefined`: none). */
function routeOf(options: unknown): string | undefined {
  checkOptions("options", options);
  return checkRoute((options as RouteOptions | undefined)?.route);
}

/** ExtendSession's `ends_in_s`: required, an integer from 1 to 2^32-1. */
function checkEndsIn(value: unknown): void {
  if (typeof value !== "number") {
    throw new TypeError(`endsInS must be a number, not ${value === null ? "null" : typeof value}`);
  }
  if (!Number.isInteger(value) || value < 1 || value > 0xffffffff) {
    throw new RangeError(`endsInS must be an integer from 1 to 4294967295, not ${value}`);
  }
}

/** A path argument of a file call: a string (the daemon judges the rest). */
function checkPath(name: string, value: unknown): void {
  if (typeof value !== "string") {
    throw new TypeError(`${name} must be a string, not ${value === null ? "null" : typeof value}`);
  }
}

/** An options argument: undefined, or an object. */
function checkOptions(name: string, value: unknown): void {
  if (value !== undefined && (typeof value !== "object" || value === null || Array.isArray(value))) {
    throw new TypeError(`${name} must be an object, not ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`);
  }
}

/**
 * WriteFiles' files: an array of files, each with a string path and
 * `content` (text or bytes) or `contentBase64`, not both.  The daemon
 * judges the count, the bytes and the paths.
 */
function checkFiles(files: unknown): void {
  if (!Array.isArray(files)) {
    throw new TypeError(`files must be an array, not ${files === null ? "null" : typeof files}`);
  }
  files.forEach((f: unknown, i: number) => {
    if (typeof f !== "object" || f === null) throw new TypeError(`files[${i}] must be an object`);
    const w = f as { path?: unknown; content?: unknown; contentBase64?: unknown; content_base64?: unknown };
    checkPath(`files[${i}].path`, w.path);
    const b64 = w.contentBase64 ?? w.content_base64;
    if (w.content !== undefined && typeof w.content !== "string" && !(w.content instanceof Uint8Array)) {
      throw new TypeError(`files[${i}].content must be a string or a Uint8Array`);
    }
    if (b64 !== undefined && typeof b64 !== "string") throw new TypeError(`files[${i}].contentBase64 must be a string`);
    if (w.content !== undefined && b64 !== undefined) {
      throw new TypeError(`files[${i}] has both content and contentBase64; give one`);
    }
  });
}

/** A RunRequest's numeric settings of their type, before it is sent. */
function checkRunFields(request: WireRunRequest): void {
  checkUint32("timeout_ms", request.timeout_ms);
  checkUint32("memory_mb", request.memory_mb);
}

const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Drop the members whose value is `undefined`: they are not set. */
function compact<T extends Json>(o: T): T {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}

function wireFile(f: FileInput | WireFile): WireFile {
  const w = f as { path: string; content?: unknown; contentBase64?: string; content_base64?: string };
  if (w.content instanceof Uint8Array) {
    return { path: w.path, content_base64: encodeBase64(w.content) };
  }
  return compact({
    path: w.path,
    content: w.content as string | undefined,
    content_base64: w.contentBase64 ?? w.content_base64,
  });
}

function wireStep(s: StepInput | WireStep | string[]): WireStep {
  if (Array.isArray(s)) return { argv: s };
  return compact({ name: s.name, argv: s.argv });
}

/** The settings of a run in proto names; only those set. */
function wireOptions(o: RunOptions): WireRunRequest {
  return compact({
    minimum_isolation: o.minimumIsolation,
    grant_profile: o.grantProfile,
    timeout_ms: o.timeoutMs,
    memory_mb: o.memoryMb,
  });
}

/** The RunRequest of a snippet (proto names, only the fields set). */
export function snippetRequest(input: SnippetInput): WireRunRequest {
  return {
    ...wireOptions(input),
    snippet: compact({
      language: input.language,
      code: input.code,
      stdin: input.stdin,
      collect: input.collect === undefined ? undefined : collectOf(input.collect, "runSnippet"),
    }),
  };
}

function collectOf(globs: unknown, call: string): string[] {
  if (!Array.isArray(globs) || !globs.every((g) => typeof g === "string")) {
    throw new TypeError(`${call}: collect must be an array of glob strings`);
  }
  return [...globs];
}

/** The RunRequest of a project. */
export function projectRequest(input: ProjectInput): WireRunRequest {
  return {
    ...wireOptions(input),
    project: compact({
      files: input.files?.map(wireFile),
      steps: input.steps.map(wireStep),
      collect: input.collect === undefined ? undefined : collectOf(input.collect, "runProject"),
    }),
  };
}

/** The RunRequest of a WASI module. */
export function moduleRequest(input: ModuleInput): WireRunRequest {
  return {
    ...wireOptions(input),
    module: compact({
      wasm_base64: encodeBase64(input.wasm),
      args: input.args,
      stdin: input.stdin,
    }),
  };
}

/** The wire cell (proto names) of a cell input. */
export function cellMessage(cell: CellInput | WireCell): WireCell {
  return compact({
    language: cell.language,
    code: cell.code,
    files: cell.files?.map(wireFile),
  });
}

// ---- google.rpc.ErrorInfo, binary ------------------------------------------

/** Decode a google.rpc.ErrorInfo from its protobuf bytes (base64). */
export function decodeErrorInfo(
  b64: string,
): { reason: string; domain: string; metadata: ErrorMetadata } | undefined {
  let bytes: Uint8Array;
  try {
    const bin = atob(b64.replace(/-/g, "+").replace(/_/g, "/"));
    bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  } catch {
    return undefined;
  }
  const dec = new TextDecoder();
  const fields = (buf: Uint8Array): [number, Uint8Array][] | undefined => {
    const out: [number, Uint8Array][] = [];
    let i = 0;
    const varint = (): number | undefined => {
      let v = 0;
      for (let shift = 0; shift < 35; shift += 7) {
        if (i >= buf.length) return undefined;
        const b = buf[i++]!;
        v += (b & 0x7f) * 2 ** shift;
        if (!(b & 0x80)) return v;
      }
      return undefined;
    };
    while (i < buf.length) {
      const tag = varint();
      if (tag === undefined) return undefined;
      const wt = tag % 8;
      if (wt === 2) {
        const n = varint();
        if (n === undefined || i + n > buf.length) return undefined;
        out.push([Math.floor(tag / 8), buf.subarray(i, i + n)]);
        i += n;
      } else if (wt === 0) {
        if (varint() === undefined) return undefined;
      } else if (wt === 1) {
        i += 8;
      } else if (wt === 5) {
        i += 4;
      } else {
        return undefined;
      }
    }
    return i === buf.length ? out : undefined;
  };
  const top = fields(bytes);
  if (!top) return undefined;
  const info = { reason: "", domain: "", metadata: {} as ErrorMetadata };
  for (const [num, val] of top) {
    if (num === 1) info.reason = dec.decode(val);
    else if (num === 2) info.domain = dec.decode(val);
    else if (num === 3) {
      const entry = fields(val);
      if (!entry) return undefined;
      let key = "";
      let value = "";
      for (const [n, v] of entry) {
        if (n === 1) key = dec.decode(v);
        else if (n === 2) value = dec.decode(v);
      }
      info.metadata[key] = value;
    }
  }
  return info;
}

function protocolError(method: string, status: number, why: string, cause?: unknown): ProtocolError {
  return new ProtocolError(
    {
      reason: "",
      code: "unknown",
      message: `${method}: HTTP ${status} with an answer that breaks the protocol: ${why} (the code may have run)`,
      dispatched: true,
      metadata: {},
      httpStatus: status,
    },
    cause === undefined ? undefined : { cause },
  );
}

function deadlineError(method: string, timeoutMs: number, why: string, cause?: unknown): InfrastructureError {
  return new InfrastructureError(
    {
      reason: "",
      code: "deadline_exceeded",
      message: `${method}: no whole answer within ${timeoutMs} ms (${why}; the code may have run)`,
      dispatched: true,
      metadata: {},
      httpStatus: 0,
    },
    cause === undefined ? undefined : { cause },
  );
}

/** The error of a non-200 answer: a refusal, infrastructure, or a ProtocolError. */
function errorOfAnswer(method: string, status: number, bytes: Uint8Array, deadline?: number): PlimsollError {
  let value: unknown;
  try {
    value = parse(bytes, deadline);
  } catch (e) {
    if (e instanceof DeadlinePassed) throw e;
    const text = new TextDecoder().decode(bytes.subarray(0, 120));
    const why = e instanceof Error ? e.message : String(e);
    return protocolError(method, status, `not a Connect error (${why}): ${JSON.stringify(text)}`);
  }
  return errorOfConnect(method, status, value, bytes);
}

/**
 * The error of a Connect error object: a non-200 answer's, or the `error`
 * of a stream's end-of-stream message (then `status` is the stream's 200).
 */
function errorOfConnect(method: string, status: number, value: unknown, bytes?: Uint8Array): PlimsollError {
  let body: Record<string, unknown>;
  try {
    body = checkShape(value, CONNECT_ERROR, "the error");
    if (typeof body["code"] !== "string") throw new Malformed("it has no code");
  } catch (e) {
    const text = bytes ? `: ${JSON.stringify(new TextDecoder().decode(bytes.subarray(0, 120)))}` : "";
    const why = e instanceof Error ? e.message : String(e);
    return protocolError(method, status, `not a Connect error (${why})${text}`);
  }
  let reason = "";
  let metadata: ErrorMetadata = {};
  const details = body["details"];
  const d0: unknown = Array.isArray(details) ? details[0] : undefined;
  if (isObject(d0)) {
    const debug = d0["debug"];
    if (isObject(debug) && typeof debug["reason"] === "string") {
      reason = debug["reason"];
      if (isObject(debug["metadata"])) {
        for (const [k, v] of Object.entries(debug["metadata"])) {
          if (typeof v === "string") metadata[k] = v;
        }
      }
    } else if (typeof d0["value"] === "string") {
      const info = decodeErrorInfo(d0["value"]);
      if (info) {
        reason = info.reason;
        metadata = info.metadata;
      }
    }
  }
  const code = body["code"] as string;
  const internal = reason === "INTERNAL" || (reason === "" && code === "internal");
  const d = metadata["dispatched"];
  const fields: ConnectErrorFields = {
    reason,
    code,
    message: typeof body["message"] === "string" ? body["message"] : "",
    // a refusal ran nothing; an internal failure may have run the code
    // unless the daemon says it struck before dispatch
    dispatched: d === "true" ? true : d === "false" ? false : internal,
    metadata,
    httpStatus: status,
  };
  return errorFromConnect(fields);
}

/**
 * The body of an answer, read no further than `max` bytes: past them (or a
 * Content-Length past them) it is a ProtocolError.
 */
async function readCapped(method: string, resp: Response, max: number): Promise<Uint8Array> {
  const declared = resp.headers.get("content-length");
  if (declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > max) {
    await resp.body?.cancel().catch(() => undefined);
    throw protocolError(method, resp.status, `its length, ${declared.trim()} bytes, is past the client's maxAnswerBytes (${max})`);
  }
  if (!resp.body) return new Uint8Array(0);
  const reader = resp.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw protocolError(method, resp.status, `it is longer than the client's maxAnswerBytes (${max})`);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

interface Accept {
  /** The floor to re-check the answer against. */
  floor?: string | undefined;
  /** Check the record (with `previous`, or against `chain`). */
  verify: boolean;
  /** The digest the record must name; `undefined` skips that check. */
  previous?: string | undefined;
  /** A session's chain keeper: the record must extend it. */
  chain?: Chain | undefined;
  /** The session's route, sent as `Plimsoll-Route` (checked already). */
  route?: string | undefined;
}

/** What the caller's `onOutput` threw, on its way out of the exchange. */
class CallerError {
  constructor(readonly error: unknown) {}
}

/** A plimsoll daemon's client. */

/** A failure of the exchange itself (no answer to judge): the code may have run. */
function transportFailure(method: string, e: unknown, httpStatus: number): InfrastructureError {
  const why = e instanceof Error ? e.message : String(e);
  const cause = e instanceof Error && e.cause instanceof Error ? `: ${e.cause.message}` : "";
  return new InfrastructureError(
    {
      reason: "",
      code: "unavailable",
      message: `${method}: transport failure: ${why}${cause} (the code may have run)`,
      dispatched: true,
      metadata: {},
      httpStatus,
    },
    { cause: e },
  );
}

export class Client {
  readonly url: string;
  readonly timeoutMs: number;
  readonly maxAnswerBytes: number;
  readonly maxMessageBytes: number;
  readonly retry: ResolvedRetryPolicy | undefined;
  readonly verifyRecords: boolean;
  #apiKey: string | undefined;
  /** A key file still to read (where the runtime could not read it in the constructor). */
  #keyFile: Promise<string> | string | undefined;
  readonly #fetch: FetchLike;

  /**
   * A client of the daemon at `options.url`; with no options, or without
   * `url` or `apiKey`, they come from the environment (PLIMSOLL_URL,
   * PLIMSOLL_KEY, PLIMSOLL_KEY_FILE; docs/clients.md, "Configuration").
   * A key file that cannot be read, or a key that cannot be sent, is a
   * `ConfigurationError`, which never shows the key.
   */
  constructor(options: ClientOptions = {}) {
    if (typeof options !== "object" || options === null) {
      throw new TypeError("Client: options must be an object");
    }
    this.url = resolveUrl(options.url).replace(/\/+$/, "");
    const key = resolveKey(options.apiKey);
    this.#apiKey = key.key;
    this.#keyFile = key.file;
    this.timeoutMs = number("timeoutMs", options.timeoutMs, 120_000);
    if (!(this.timeoutMs > 0)) throw new RangeError("Client: timeoutMs must be > 0");
    this.maxAnswerBytes = number("maxAnswerBytes", options.maxAnswerBytes, DEFAULT_MAX_ANSWER_BYTES);
    if (!(this.maxAnswerBytes >= 1)) throw new RangeError("Client: maxAnswerBytes must be at least 1");
    this.maxMessageBytes = number("maxMessageBytes", options.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES);
    if (!(this.maxMessageBytes >= 1)) throw new RangeError("Client: maxMessageBytes must be at least 1");
    this.retry = resolveRetry(options.retry);
    this.verifyRecords = options.verifyRecords ?? true;
    const f = options.fetch ?? (globalThis.fetch as FetchLike | undefined);
    if (typeof f !== "function") throw new TypeError("Client: no fetch in this runtime; pass one");
    this.#fetch = options.fetch ? f : (input, init) => globalThis.fetch(input, init);
  }

  /** What the client is, without its key. */
  toString(): string {
    return `Client(${this.url})`;
  }

  // ---- the calls ----------------------------------------------------------

  /** What this daemon is. */
  async describe(): Promise<Description> {
    return description(await this.call("Describe", {}));
  }

  /** Run a snippet (`javascript` or `python`). */
  runSnippet(input: SnippetInput): Promise<RunResult> {
    return this.run(snippetRequest(input));
  }

  /** Run a project: files, then steps in order. */
  runProject(input: ProjectInput): Promise<RunResult> {
    return this.run(projectRequest(input));
  }

  /** Run a WASI preview 1 module. */
  runModule(input: ModuleInput): Promise<RunResult> {
    return this.run(moduleRequest(input));
  }

  /**
   * Run a RunRequest as given, in proto field names (`timeout_ms`), with
   * integers and without nulls: the record's `request_sha256` is checked
   * against the canonical form of exactly this object.
   */
  async run(request: WireRunRequest): Promise<RunResult> {
    checkRunFields(request);
    const answer = await this.call("Run", request);
    return this.#accept(request, answer, {
      floor: request.minimum_isolation,
      verify: this.verifyRecords,
      previous: "",
    });
  }

  /**
   * RunStream: run a RunRequest as `run` does and call `onOutput` with each
   * chunk of output as the guest writes it; resolve to the result, checked
   * as `run` checks it (the tier re-check, the record).  Joined in order,
   * the chunks are the result's output byte for byte (a project's: its
   * step's), which the client checks.  A kind that does not stream
   * (`describe().operations.snippet.streams` false) gives no chunk, only
   * the result.  `timeoutMs` bounds the whole stream, `onOutput`'s time
   * included.
   */
  async runStream(request: WireRunRequest, onOutput?: OnOutput): Promise<RunResult> {
    checkRunFields(request);
    const answer = await this.stream("RunStream", request, onOutput);
    return this.#accept(request, answer, {
      floor: request.minimum_isolation,
      verify: this.verifyRecords,
      previous: "",
    });
  }

  /**
   * Open a session (docs/sessions.md); the returned object keeps its chain
   * and the answer's `route`, which each of its calls sends.
   */
  async openSession(options: OpenSessionOptions = {}): Promise<Session> {
    const floor = options.minimumIsolation;
    if (floor !== undefined && tierRank(floor) < 0) {
      throw new RangeError(`minimumIsolation must be one of ${TIERS.join(", ")}`);
    }
    const answer = await this.call("OpenSession", compact({ languages: options.languages }));
    const id = answer["session_id"];
    if (typeof id !== "string" || id === "") {
      throw new ProtocolError({
        reason: "",
        code: "unknown",
        message: "OpenSession answered without a session_id",
        dispatched: true,
        metadata: {},
        httpStatus: 200,
      });
    }
    const route = answer["route"];
    return new Session(this, id, floor, new Chain(""), typeof route === "string" ? route : "");
  }

  /**
   * RunInSession without a Session object: the record is checked alone
   * (its `previous_digest` is not: this call does not know the chain).
   * `options.route` (every call by session id takes it) names the
   * session's daemon behind a proxy.
   */
  async runInSession(sessionId: string, run: WireRunRequest, options?: RouteOptions): Promise<RunResult> {
    const route = routeOf(options);
    return this._runInSession(sessionId, run, { floor: run.minimum_isolation, verify: this.verifyRecords, route });
  }

  /**
   * RunCell without a Session object: the record is checked alone.
   * `timeoutMs` (or the cell's) is sent only when set.
   */
  async runCell(
    sessionId: string,
    cell: CellInput | WireCell,
    timeoutMs?: number,
    options?: RouteOptions,
  ): Promise<RunResult> {
    const route = routeOf(options);
    const t = timeoutMs ?? (cell as CellInput).timeoutMs;
    return this._runCell(sessionId, cell, t, { verify: this.verifyRecords, route });
  }

  /**
   * RunCellStream without a Session object: `runCell` with its output as
   * it comes, as `runStream` gives it; the record is checked alone.
   */
  async runCellStream(
    sessionId: string,
    cell: CellInput | WireCell,
    onOutput?: OnOutput,
    timeoutMs?: number,
    options?: RouteOptions,
  ): Promise<RunResult> {
    const route = routeOf(options);
    const t = timeoutMs ?? (cell as CellInput).timeoutMs;
    return this._runCell(sessionId, cell, t, { verify: this.verifyRecords, route }, onOutput ?? null);
  }

  /** Close a session: its sandbox is deleted; later calls get SESSION_ENDED. */
  async closeSession(sessionId: string, options?: RouteOptions): Promise<void> {
    const route = routeOf(options);
    await this.call("CloseSession", { session_id: sessionId }, route);
  }

  /**
   * ListSessions: the caller's own sessions, oldest open first: the open
   * ones, and the ended ones the daemon still keeps (`state` `ended`, with
   * `endedReason`).  Another caller's never appear.
   */
  async listSessions(): Promise<SessionInfo[]> {
    const answer = await this.call("ListSessions", {});
    const sessions = answer["sessions"];
    return Array.isArray(sessions) ? sessions.map((s: Json) => sessionInfo(s)) : [];
  }

  /**
   * GetSession: one of the caller's sessions as the daemon holds it.  It
   * waits for no call: it answers while the session's calls run
   * (`callsWaiting`).  An unknown id and another caller's are both
   * `NotFoundError`.
   */
  async getSession(sessionId: string, options?: RouteOptions): Promise<SessionInfo> {
    checkSessionId(sessionId);
    const route = routeOf(options);
    const answer = await this.call("GetSession", { session_id: sessionId }, route);
    return this.#sessionInfo("GetSession", sessionId, answer);
  }

  /**
   * ExtendSession: the session now ends `endsInS` seconds (an integer from
   * 1) from this call, later or sooner than it would have.  Past the
   * daemon's SANDBOX_SESSION_MAX_LIFETIME from the session's open (the
   * answer's `maxLifetimeS`) it is an `InvalidRequestError` whose message
   * ends "at most K", the most it may ask now; an ended session is a
   * `SessionEndedError`.  Resolves to the session as it now is.
   */
  async extendSession(sessionId: string, endsInS: number, options?: RouteOptions): Promise<SessionInfo> {
    checkSessionId(sessionId);
    checkEndsIn(endsInS);
    const route = routeOf(options);
    const answer = await this.call("ExtendSession", { session_id: sessionId, ends_in_s: endsInS }, route);
    return this.#sessionInfo("ExtendSession", sessionId, answer);
  }

  /**
   * A `Session` for a session opened earlier (by another handle, process
   * or run of the program): GetSession, then a handle whose chain starts
   * at the session's `previous_digest`, so that each later call's record
   * must name the last one and extend the chain from there.  An ended
   * session is a `SessionEndedError` (`endedReason` the daemon's;
   * `httpStatus` GetSession's 200).  Take it up while no other handle
   * makes calls in it: a call that lands between GetSession and this
   * handle's first call breaks the chain (`ChainError`), as any call made
   * around a `Session` does.
   *
   * Behind a proxy, `options.route` names the session's daemon (the
   * `route` of the handle that opened it, or of its `SessionInfo`):
   * GetSession and every call of the handle send it, and a session whose
   * daemon is out of reach is a `WrongRouteError`.  Without it, the handle
   * takes the route GetSession answers.
   */
  async connectSession(sessionId: string, options: ConnectSessionOptions = {}): Promise<Session> {
    const route = routeOf(options);
    const floor = options.minimumIsolation;
    if (floor !== undefined && tierRank(floor) < 0) {
      throw new RangeError(`minimumIsolation must be one of ${TIERS.join(", ")}`);
    }
    const info = await this.getSession(sessionId, { route });
    if (info.state === "ended") {
      throw new SessionEndedError({
        reason: "SESSION_ENDED",
        code: "failed_precondition",
        message: `the session has ended: ${info.endedReason}`,
        dispatched: false,
        metadata: info.endedReason === "" ? {} : { ended_reason: info.endedReason },
        httpStatus: 200,
      });
    }
    return new Session(this, sessionId, floor, new Chain(info.previousDigest), route ?? info.route);
  }

  /** A SessionInfo answer, which must be about the session asked for. */
  #sessionInfo(method: string, sessionId: string, answer: Json): SessionInfo {
    const info = sessionInfo(answer);
    if (info.sessionId !== sessionId) {
      throw protocolError(method, 200, `it is about session ${JSON.stringify(info.sessionId.slice(0, 80))}, not the one asked for`);
    }
    return info;
  }

  /**
   * WriteFiles without a Session object: `files` (as a project's: `content`
   * text or bytes, or `contentBase64`; 1 to 256, 4 MiB in all) written into
   * the session's work directory, each replacing a file there, the
   * directories on its path made.  The record is checked alone.
   */
  async writeFiles(
    sessionId: string,
    files: (FileInput | WireFile)[],
    options?: RouteOptions,
  ): Promise<WriteFilesResult> {
    const route = routeOf(options);
    return this._writeFiles(sessionId, files, { verify: this.verifyRecords, route });
  }

  /**
   * ReadFile without a Session object: up to `limit` bytes (0 or unset: the
   * daemon's `limits.fileReadBytes`, also the most) of the session's file
   * `path` from `offset`.  The record is checked alone.
   */
  async readFile(
    sessionId: string,
    path: string,
    options: ReadFileOptions & RouteOptions = {},
  ): Promise<ReadFileResult> {
    const route = routeOf(options);
    return this._readFile(sessionId, path, options, { verify: this.verifyRecords, route });
  }

  /**
   * ListFiles without a Session object: the entries of the session's
   * directory `path` (unset: the work directory), `depth` levels down.
   * The record is checked alone.
   */
  listFiles(sessionId: string, options?: ListFilesOptions & RouteOptions): Promise<ListFilesResult>;
  listFiles(
    sessionId: string,
    path: string | undefined,
    options?: ListFilesOptions & RouteOptions,
  ): Promise<ListFilesResult>;
  async listFiles(
    sessionId: string,
    path?: string | (ListFilesOptions & RouteOptions),
    options?: ListFilesOptions & RouteOptions,
  ): Promise<ListFilesResult> {
    const route = routeOf(typeof path === "object" && path !== null && options === undefined ? path : options);
    return this._listFiles(sessionId, path, options, { verify: this.verifyRecords, route });
  }

  /** @internal */
  async _writeFiles(sessionId: string, files: (FileInput | WireFile)[], accept: Accept): Promise<WriteFilesResult> {
    checkSessionId(sessionId);
    checkFiles(files);
    const digestOf = { files: files.map(wireFile) };
    const answer = await this.call("WriteFiles", { session_id: sessionId, ...digestOf }, accept.route);
    await this.#acceptRecord(digestOf, answer, accept);
    return writeFilesResult(answer);
  }

  /** @internal */
  async _readFile(sessionId: string, path: string, options: ReadFileOptions, accept: Accept): Promise<ReadFileResult> {
    checkSessionId(sessionId);
    checkPath("path", path);
    checkOptions("options", options);
    const { offset, limit } = options ?? {};
    checkUint32("offset", offset);
    checkUint32("limit", limit);
    const digestOf = compact({ path, offset, limit });
    const answer = await this.call("ReadFile", { session_id: sessionId, ...digestOf }, accept.route);
    // the record first: the daemon made it, and a session's chain must hold it
    await this.#acceptRecord(digestOf, answer, accept);
    const r = readFileResult(answer);
    const why =
      r.path !== path
        ? `it is about ${JSON.stringify(r.path.slice(0, 80))}, not the path asked for`
        : r.offset !== (offset ?? 0)
          ? `it starts at offset ${r.offset}, not at ${offset ?? 0} as asked`
          : limit !== undefined && limit > 0 && r.length > limit
            ? `it holds ${r.length} bytes, past the limit asked, ${limit}`
            : undefined;
    if (why !== undefined) throw protocolError("ReadFile", 200, why);
    return r;
  }

  /** @internal */
  async _listFiles(
    sessionId: string,
    pathOrOptions: string | ListFilesOptions | undefined,
    options: ListFilesOptions | undefined,
    accept: Accept,
  ): Promise<ListFilesResult> {
    checkSessionId(sessionId);
    let path: string | undefined;
    if (typeof pathOrOptions === "object" && pathOrOptions !== null && options === undefined) {
      options = pathOrOptions;
    } else if (pathOrOptions !== undefined) {
      checkPath("path", pathOrOptions);
      path = pathOrOptions as string;
    }
    checkOptions("options", options);
    const depth = options?.depth;
    checkUint32("depth", depth);
    const digestOf = compact({ path, depth });
    const answer = await this.call("ListFiles", { session_id: sessionId, ...digestOf }, accept.route);
    await this.#acceptRecord(digestOf, answer, accept);
    return listFilesResult(answer);
  }

  /** @internal */
  async _runInSession(sessionId: string, run: WireRunRequest, accept: Accept): Promise<RunResult> {
    checkRunFields(run);
    const answer = await this.call("RunInSession", { session_id: sessionId, run }, accept.route);
    return this.#accept(run, answer, accept);
  }

  /** @internal */
  async _runCell(
    sessionId: string,
    cell: CellInput | WireCell,
    timeoutMs: number | undefined,
    accept: Accept,
    onOutput?: OnOutput | null,
  ): Promise<RunResult> {
    checkUint32("timeoutMs", timeoutMs);
    const digestOf = compact({ cell: cellMessage(cell), timeout_ms: timeoutMs });
    const body = { session_id: sessionId, ...digestOf };
    const answer =
      onOutput === undefined
        ? await this.call("RunCell", body, accept.route)
        : await this.stream("RunCellStream", body, onOutput ?? undefined, accept.route);
    return this.#accept(digestOf, answer, accept);
  }

  // ---- the machinery ------------------------------------------------------

  /**
   * One Connect call with the retry policy: the parsed 200 answer, or the
   * error (a refusal, or infrastructure).  Only AT_CAPACITY and
   * RATE_LIMITED are retried, and only when a policy is set.  `route`
   * (checked by the caller) is sent as `Plimsoll-Route`.
   */
  async call(method: string, body: Json, route?: string): Promise<Json> {
    // The body is the canonical form: what is hashed is exactly what is sent.
    const text = canonical(body);
    const policy = this.retry;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#attempt(method, text, route);
      } catch (e) {
        if (!policy || !isRetryable(e) || attempt + 1 >= policy.maxAttempts) throw e;
        await sleep(backoffMs(policy, attempt));
      }
    }
  }

  /**
   * One streaming call (Connect server streaming) with the retry policy,
   * which retries only while no chunk has been given: the result message,
   * its members of their types and the streamed output checked against
   * it, or the error (the end-of-stream error, a refusal, infrastructure,
   * a ProtocolError).  What `onOutput` throws is thrown as it is.
   */
  async stream(method: string, body: Json, onOutput?: OnOutput, route?: string): Promise<Json> {
    const payload = envelope(new TextEncoder().encode(canonical(body)));
    const policy = this.retry;
    for (let attempt = 0; ; attempt++) {
      const given = { chunks: 0 };
      try {
        return await this.#streamAttempt(method, payload, onOutput, given, route);
      } catch (e) {
        if (given.chunks > 0 || !policy || !isRetryable(e) || attempt + 1 >= policy.maxAttempts) throw e;
        await sleep(backoffMs(policy, attempt));
      }
    }
  }

  async #streamAttempt(
    method: string,
    payload: Uint8Array<ArrayBuffer>,
    onOutput: OnOutput | undefined,
    given: { chunks: number },
    route: string | undefined,
  ): Promise<Json> {
    const headers = await this.#headers(STREAM_MEDIA_TYPE, route);
    const deadline = performance.now() + this.timeoutMs;
    const ctl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, this.timeoutMs);
    const cut = new Promise<never>((_, reject) => {
      ctl.signal.addEventListener("abort", () => reject(new Error("the call's deadline passed")), { once: true });
    });
    cut.catch(() => undefined);
    const decoder = new StreamDecoder(
      this.maxMessageBytes,
      {
        protocol: (why) => protocolError(method, 200, why),
        connect: (error) => errorOfConnect(method, 200, error),
      },
      deadline,
    );
    let status = 0;
    let contentType: string | null = null;
    let answer: Uint8Array | undefined;
    try {
      const resp = await this.#fetch(this.url + SERVICE + method, {
        method: "POST",
        headers,
        body: payload,
        signal: ctl.signal,
      });
      status = resp.status;
      contentType = resp.headers.get("content-type");
      if (status !== 200 || !mediaTypeIsStream(contentType)) {
        answer = await readCapped(method, resp, this.maxAnswerBytes);
      } else {
        const declared = resp.headers.get("content-length");
        if (declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > this.maxAnswerBytes) {
          throw protocolError(method, 200, `its length, ${declared.trim()} bytes, is past the client's maxAnswerBytes (${this.maxAnswerBytes})`);
        }
        if (resp.body) {
          const reader = resp.body.getReader();
          let total = 0;
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            total += value.byteLength;
            if (total > this.maxAnswerBytes) {
              throw protocolError(method, 200, `it is longer than the client's maxAnswerBytes (${this.maxAnswerBytes})`);
            }
            for (const chunk of decoder.feed(value)) {
              given.chunks++;
              if (onOutput) {
                try {
                  // the deadline does not wait for a slow onOutput
                  await Promise.race([onOutput(chunk), cut]);
                } catch (e) {
                  if (timedOut) throw e;
                  throw new CallerError(e);
                }
              }
            }
          }
        }
      }
    } catch (e) {
      if (e instanceof CallerError) throw e.error;
      if (e instanceof DeadlinePassed) throw deadlineError(method, this.timeoutMs, "still decoding the stream", e);
      if (e instanceof PlimsollError) throw e;
      if (timedOut) throw deadlineError(method, this.timeoutMs, "the exchange was cut", e);
      throw transportFailure(method, e, status);
    } finally {
      clearTimeout(timer);
      // ends the exchange when it broke off (a no-op once the body was read)
      ctl.abort();
    }
    try {
      if (answer !== undefined) {
        if (status !== 200) {
          const err = errorOfAnswer(method, status, answer, deadline);
          if (performance.now() > deadline) throw deadlineError(method, this.timeoutMs, "still decoding the error");
          throw err;
        }
        throw protocolError(method, 200, `its Content-Type is ${JSON.stringify(contentType)}, not ${STREAM_MEDIA_TYPE}`);
      }
      return decoder.finish();
    } catch (e) {
      if (e instanceof DeadlinePassed) throw deadlineError(method, this.timeoutMs, "still decoding the stream", e);
      throw e;
    }
  }

  /** A call's headers: its media type, Connect's version, the key and the route. */
  async #headers(contentType: string, route: string | undefined): Promise<Record<string, string>> {
    if (this.#keyFile !== undefined) {
      // read once, at the first call; a failure fails every call alike
      if (typeof this.#keyFile === "string") this.#keyFile = readKeyFile(this.#keyFile);
      this.#apiKey = await this.#keyFile;
      this.#keyFile = undefined;
    }
    const headers: Record<string, string> = {
      "Content-Type": contentType,
      "Connect-Protocol-Version": "1",
    };
    if (this.#apiKey !== undefined) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    if (route !== undefined && route !== "") headers[ROUTE_HEADER] = route;
    return headers;
  }

  async #attempt(method: string, text: string, route: string | undefined): Promise<Json> {
    const headers = await this.#headers("application/json", route);
    // One deadline for the whole attempt: the abort ends a slow exchange,
    // and decoding is checked against it after.
    const deadline = performance.now() + this.timeoutMs;
    const ctl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, this.timeoutMs);
    let status: number;
    let contentType: string | null;
    let answer: Uint8Array;
    try {
      const resp = await this.#fetch(this.url + SERVICE + method, {
        method: "POST",
        headers,
        body: text,
        signal: ctl.signal,
      });
      status = resp.status;
      contentType = resp.headers.get("content-type");
      answer = await readCapped(method, resp, this.maxAnswerBytes);
    } catch (e) {
      if (e instanceof PlimsollError) throw e;
      if (timedOut) throw deadlineError(method, this.timeoutMs, "the exchange was cut", e);
      throw transportFailure(method, e, 0);
    } finally {
      clearTimeout(timer);
    }
    let parsed: Json;
    try {
      if (status !== 200) {
        const err = errorOfAnswer(method, status, answer, deadline);
        if (performance.now() > deadline) throw deadlineError(method, this.timeoutMs, "still decoding the error");
        throw err;
      }
      if (!mediaTypeIsJson(contentType)) {
        throw protocolError(method, 200, `its Content-Type is ${JSON.stringify(contentType)}, not application/json`);
      }
      try {
        parsed = checkAnswer(parse(answer, deadline), method);
      } catch (e) {
        if (e instanceof Malformed) throw protocolError(method, 200, e.message, e);
        throw e;
      }
    } catch (e) {
      if (e instanceof DeadlinePassed) throw deadlineError(method, this.timeoutMs, "still decoding the answer", e);
      throw e;
    }
    if (performance.now() > deadline) throw deadlineError(method, this.timeoutMs, "still decoding the answer");
    return parsed;
  }

  /** The tier re-check, then the record checks, of a 200 run answer. */
  async #accept(request: unknown, answer: Json, how: Accept): Promise<RunResult> {
    if (how.floor !== undefined && how.floor !== "") {
      const need = tierRank(how.floor);
      const iso = answer["isolation"];
      const rec = answer["record"];
      const recIso = isObject(rec) ? rec["isolation"] : undefined;
      const low = tierRank(iso) < need || need < 0;
      // A missing record's tier is unknown, below every floor (docs/clients.md).
      const recLow = tierRank(recIso) < need || need < 0;
      if (low || recLow) {
        const which = low
          ? `the answer's isolation ${JSON.stringify(iso)}`
          : `the record's isolation ${JSON.stringify(recIso)}`;
        throw new IsolationEvidenceMismatchError(
          `${which} is below the floor ${JSON.stringify(how.floor)}; the code may have run`,
          how.floor,
          typeof iso === "string" ? iso : "",
          typeof recIso === "string" ? recIso : undefined,
          answer,
        );
      }
    }
    await this.#record(request, answer, how);
    return new RunResult(answer);
  }

  /**
   * The checks of a file call's 200 answer, which has no `isolation` of its
   * own: its record's tier against the floor, then the record.
   */
  async #acceptRecord(request: unknown, answer: Json, how: Accept): Promise<void> {
    if (how.floor !== undefined && how.floor !== "") {
      const need = tierRank(how.floor);
      const rec = answer["record"];
      const recIso = isObject(rec) ? rec["isolation"] : undefined;
      if (tierRank(recIso) < need || need < 0) {
        throw new IsolationEvidenceMismatchError(
          `the record's isolation ${JSON.stringify(recIso)} is below the floor ${JSON.stringify(how.floor)}`,
          how.floor,
          "",
          typeof recIso === "string" ? recIso : undefined,
          answer,
        );
      }
    }
    await this.#record(request, answer, how);
  }

  /** The record of a 200 answer: appended to `how.chain`, or checked alone when `how.verify`. */
  async #record(request: unknown, answer: Json, how: Accept): Promise<void> {
    if (how.chain) {
      await how.chain.append(request, answer);
    } else if (how.verify) {
      await checkRecord(request, answer, answer["record"], how.previous);
    }
  }
}

/**
 * An open session: one sandbox for many calls (`Client.openSession`, or
 * `Client.connectSession` for one opened earlier, whose chain then starts
 * at its last record's digest).  Its calls run one at a
 * time, in the order they were made, and each answer must extend `chain`;
 * a call that breaks it throws `ChainError` and leaves the chain as it was.
 * After a `ChainError` or an `IsolationEvidenceMismatchError`, open a new
 * session (`broken` keeps the first).
 */
export class Session {
  readonly id: string;
  readonly chain: Chain;
  /**
   * The route of the daemon that holds the session (its
   * PLIMSOLL_INSTANCE), sent as `Plimsoll-Route` with each of its calls so
   * that a proxy in front of many daemons sends them there; `""` (a daemon
   * older than routes): none is sent.
   */
  readonly route: string;
  /** The session's floor, re-checked on every answer. */
  readonly minimumIsolation: string | undefined;
  readonly #client: Client;
  #queue: Promise<unknown> = Promise.resolve();
  #broken: PlimsollError | undefined;

  constructor(client: Client, id: string, minimumIsolation?: string, chain: Chain = new Chain(""), route?: string) {
    this.#client = client;
    this.id = id;
    this.minimumIsolation = minimumIsolation;
    this.chain = chain;
    this.route = checkRoute(route) ?? "";
  }

  /** The route as a call sends it (`undefined`: none). */
  get #route(): string | undefined {
    return this.route === "" ? undefined : this.route;
  }

  /** The first chain error or tier mismatch this session met, if any. */
  get broken(): PlimsollError | undefined {
    return this.#broken;
  }

  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn, fn);
    this.#queue = p.catch(() => undefined);
    return p.catch((e: unknown) => {
      if (!this.#broken && (e instanceof ChainError || e instanceof IsolationEvidenceMismatchError)) {
        this.#broken = e;
      }
      throw e;
    });
  }

  /** Run a RunRequest (proto names) in the session. */
  run(request: WireRunRequest): Promise<RunResult> {
    const run: WireRunRequest =
      request.minimum_isolation === undefined && this.minimumIsolation !== undefined
        ? { minimum_isolation: this.minimumIsolation, ...request }
        : request;
    return this.#enqueue(() =>
      this.#client._runInSession(this.id, run, {
        floor: run.minimum_isolation,
        verify: true,
        chain: this.chain,
        route: this.#route,
      }),
    );
  }

  /** Run a snippet in the session's sandbox (files persist between calls). */
  runSnippet(input: SnippetInput): Promise<RunResult> {
    return this.run(snippetRequest(input));
  }

  /** Run a project in the session's sandbox. */
  runProject(input: ProjectInput): Promise<RunResult> {
    return this.run(projectRequest(input));
  }

  /** Run a cell in the session's kept interpreter of its language. */
  cell(input: CellInput): Promise<RunResult> {
    return this.#enqueue(() =>
      this.#client._runCell(this.id, input, input.timeoutMs, {
        floor: this.minimumIsolation,
        verify: true,
        chain: this.chain,
        route: this.#route,
      }),
    );
  }

  /**
   * `cell` with its output as it comes (RunCellStream, as
   * `Client.runStream` gives it); the answer extends the chain alike.
   */
  cellStream(input: CellInput, onOutput?: OnOutput): Promise<RunResult> {
    return this.#enqueue(() =>
      this.#client._runCell(
        this.id,
        input,
        input.timeoutMs,
        {
          floor: this.minimumIsolation,
          verify: true,
          chain: this.chain,
          route: this.#route,
        },
        onOutput ?? null,
      ),
    );
  }

  // ---- the session's files ------------------------------------------------

  /** How this session's calls are sent and checked: its route, floor and chain. */
  #how(): Accept {
    return { floor: this.minimumIsolation, verify: true, chain: this.chain, route: this.#route };
  }

  /**
   * WriteFiles: `files` (as a project's: `content` text or bytes, or
   * `contentBase64`; 1 to 256, 4 MiB in all, paths relative to the work
   * directory) written into the session's work directory in order, each
   * replacing a file there, the directories on its path made.  A symlink
   * on the way, or past the session's disk budget
   * (SANDBOX_SESSION_DISK_MB), is an `InvalidRequestError`.
   */
  writeFiles(files: FileInput[]): Promise<WriteFilesResult> {
    return this.#enqueue(() => this.#client._writeFiles(this.id, files, this.#how()));
  }

  /**
   * ReadFile: up to `limit` bytes (0 or unset: the daemon's
   * `limits.fileReadBytes`, also the most) of the regular file `path` from
   * `offset` (default 0); `content` holds them exactly, `text` too when
   * they are UTF-8, and `more` says whether bytes remain.  A missing file
   * is a `NotFoundError`; a symlink on the path, a directory or other
   * special file, one the calls' user may not read, an
   * `InvalidRequestError`.  An answer about another path or offset than
   * asked, or longer than `limit`, is a `ProtocolError` (its record is on
   * the chain).
   */
  readFile(path: string, options: ReadFileOptions = {}): Promise<ReadFileResult> {
    return this.#enqueue(() => this.#client._readFile(this.id, path, options, this.#how()));
  }

  /**
   * ListFiles: the entries of the directory `path` (unset or `""`: the work
   * directory), `depth` levels down (0 or 1, or unset: its entries; at most
   * 16), depth first, each directory's sorted by name; symlinks are listed,
   * never followed.  At most the daemon's `limits.fileListEntries`:
   * `truncated` says more were left out.
   */
  listFiles(options?: ListFilesOptions): Promise<ListFilesResult>;
  listFiles(path: string | undefined, options?: ListFilesOptions): Promise<ListFilesResult>;
  listFiles(path?: string | ListFilesOptions, options?: ListFilesOptions): Promise<ListFilesResult> {
    return this.#enqueue(() => this.#client._listFiles(this.id, path, options, this.#how()));
  }

  /**
   * The whole file `path`: ReadFile page after page, each from where the
   * last ended (`limit` bytes a page; unset: the daemon's most), until
   * `more` is false, with no call of this handle between them.  A page that
   * breaks the protocol (no bytes while `more`, or the last ending short of
   * the size) is a `ProtocolError`; a file whose size changes between pages
   * is a `PlimsollError` (read it again).  Every page's record joins the
   * chain.
   */
  readAll(path: string, options: { limit?: number | undefined } = {}): Promise<Uint8Array> {
    checkOptions("options", options);
    const limit = options.limit;
    return this.#enqueue(() => this.#readAll(path, limit));
  }

  async #readAll(path: string, limit: number | undefined): Promise<Uint8Array> {
    const pages: Uint8Array[] = [];
    let offset = 0;
    let size: number | undefined;
    for (;;) {
      const page = await this.#client._readFile(
        this.id,
        path,
        compact({ offset: offset > 0 ? offset : undefined, limit }),
        this.#how(),
      );
      if (size === undefined) size = page.size;
      if (page.size !== size) {
        throw new PlimsollError(
          `readAll: ${JSON.stringify(path)} changed while it was read: ${size} bytes, then ${page.size} at offset ${offset}`,
        );
      }
      pages.push(page.content);
      offset += page.length;
      if (!page.more) break;
      if (page.length === 0) throw protocolError("ReadFile", 200, `a page at offset ${offset} holds no bytes, yet more is true`);
      if (offset >= size) {
        throw protocolError("ReadFile", 200, `more is true at offset ${offset}, the end of a file of ${size} bytes`);
      }
    }
    if (offset !== size && size < 0xffffffff) {
      throw protocolError("ReadFile", 200, `the last page ends at byte ${offset} of a file of ${size} bytes`);
    }
    const out = new Uint8Array(offset);
    let at = 0;
    for (const p of pages) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  /**
   * The session's file `path` (`readAll`) written to the local file
   * `localPath`, its directories made; resolves to the bytes written.  It
   * needs node:fs (Node, Deno, Bun).
   */
  async download(path: string, localPath: string): Promise<number> {
    checkPath("localPath", localPath);
    const bytes = await this.readAll(path);
    await writeLocal(localPath, bytes);
    return bytes.length;
  }

  /**
   * The local file or directory `localPath` (followed, when a symlink)
   * written into the session as `remoteDir/<its name>` (unset or `""`: the
   * work directory): a directory with every regular file under it, the
   * directories on their paths made.  Symlinks under it, special files
   * (FIFOs, sockets, devices) and names that are not UTF-8 are skipped, and
   * listed in `skipped`; empty directories are not made.  The files go in
   * as few WriteFiles calls as the bounds allow (at most 256 files and
   * 4 MiB a call: in the walk's order, or packed first fit, largest first,
   * when that makes fewer), one after another with
   * no call of this handle between them.  Before anything is sent: a file
   * over 4 MiB, or a path in the session over 256 bytes, is a `RangeError`
   * naming the bound; a local error is Node's.  A file that changes while
   * it is uploaded stops the upload (the calls made are kept).  It needs
   * node:fs (Node, Deno, Bun).
   */
  async upload(localPath: string, remoteDir?: string): Promise<UploadResult> {
    checkPath("localPath", localPath);
    const dir = remoteDirOf("Session.upload", remoteDir);
    const { files, skipped } = await walkUpload(localPath, dir);
    const batches = packFiles(files);
    return this.#enqueue(async () => {
      const calls: WriteFilesResult[] = [];
      for (const batch of batches) {
        const inputs: FileInput[] = [];
        for (const f of batch) inputs.push({ path: f.remote, content: await readLocal(f) });
        calls.push(await this.#client._writeFiles(this.id, inputs, this.#how()));
      }
      return {
        files: files.length,
        bytes: files.reduce((n, f) => n + f.size, 0),
        paths: files.map((f) => f.remote),
        skipped,
        calls,
      };
    });
  }

  /** Close the session (after the calls already made). */
  close(): Promise<void> {
    return this.#enqueue(() => this.#client.closeSession(this.id, { route: this.route }));
  }

  /**
   * The session as the daemon holds it now (`Client.getSession`).  It does
   * not wait for this handle's calls: while one runs, `callsWaiting`
   * counts it and `previousDigest` may still be behind it; once they are
   * done, `previousDigest` is `chain.head` unless a call was made around
   * this handle.
   */
  info(): Promise<SessionInfo> {
    return this.#client.getSession(this.id, { route: this.route });
  }

  /**
   * Make the session end `endsInS` seconds from now (`Client.extendSession`):
   * at once, not after this handle's calls, so a long call can be given
   * the time it needs while it runs.
   */
  extend(endsInS: number): Promise<SessionInfo> {
    return this.#client.extendSession(this.id, endsInS, { route: this.route });
  }
}
