// SPDX-License-Identifier: Apache-2.0
// The shapes of plimsoll's messages (proto/plimsoll/v1/sandbox.proto): the
// wire objects in proto field names, and the client's camelCase views.

import { FILE_ENTRY_TYPES, mimeIsText } from "./answer.js";
import { artifactSegments, saveUnder } from "./files.js";
import type { RunRecord } from "./record.js";

/** Tiers, weakest first: `none < process < container < kernel < vm`. */
export const TIERS = ["none", "process", "container", "kernel", "vm"] as const;
export type Tier = (typeof TIERS)[number];

/** A tier's rank; an unknown tier ranks below every tier (-1). */
export function tierRank(tier: unknown): number {
  return typeof tier === "string" ? (TIERS as readonly string[]).indexOf(tier) : -1;
}

export type Language = "javascript" | "python" | (string & {});

// ---- wire requests (proto names) -----------------------------------------

export interface WireFile {
  path: string;
  content?: string | undefined;
  content_base64?: string | undefined;
}

export interface WireStep {
  name?: string | undefined;
  argv: string[];
}

export interface WireRunRequest {
  minimum_isolation?: string | undefined;
  grant_profile?: string | undefined;
  timeout_ms?: number | undefined;
  memory_mb?: number | undefined;
  snippet?: {
    language?: string | undefined;
    code?: string | undefined;
    stdin?: string | undefined;
    collect?: string[] | undefined;
  };
  project?: { files?: WireFile[] | undefined; steps?: WireStep[] | undefined; collect?: string[] | undefined };
  module?: { wasm_base64?: string | undefined; args?: string[] | undefined; stdin?: string | undefined };
  cell?: WireCell | undefined;
  [field: string]: unknown;
}

export interface WireCell {
  language?: string | undefined;
  code?: string | undefined;
  files?: WireFile[] | undefined;
}

// ---- the client's inputs (camelCase) -------------------------------------

/** Settings every run may carry; an unset one is not sent. */
export interface RunOptions {
  /** The weakest tier accepted: refused before dispatch when the daemon is weaker, re-checked on the answer. */
  minimumIsolation?: Tier | (string & {}) | undefined;
  /** The sandbox's time limit (0 or unset: the daemon's default). */
  timeoutMs?: number | undefined;
  /** A lower memory allowance than the daemon's per-run one. */
  memoryMb?: number | undefined;
  /** The name of an operator's grant profile. */
  grantProfile?: string | undefined;
}

export interface SnippetInput extends RunOptions {
  code: string;
  language: Language;
  stdin?: string | undefined;
  /**
   * Globs relative to the work directory whose regular files come back in
   * the result's `artifacts` once the guest ended (docs/api.md,
   * "Artifacts"; Describe's `operations.artifacts.snippet` says where).
   */
  collect?: string[] | undefined;
}

/**
 * A file of a project or cell: `content` as text, or as bytes (sent as
 * `content_base64`), or `contentBase64` already encoded.
 */
export interface FileInput {
  path: string;
  content?: string | Uint8Array | undefined;
  contentBase64?: string | undefined;
}

export interface StepInput {
  name?: string | undefined;
  argv: string[];
}

export interface ProjectInput extends RunOptions {
  files?: FileInput[] | undefined;
  steps: (StepInput | string[])[];
  /**
   * Globs relative to the work directory whose regular files come back in
   * the result's `artifacts` once the steps ended (docs/api.md,
   * "Artifacts"; Describe's `operations.artifacts.project` says where).
   */
  collect?: string[] | undefined;
}

export interface ModuleInput extends RunOptions {
  wasm: Uint8Array;
  args?: string[] | undefined;
  stdin?: string | undefined;
}

export interface CellInput {
  code: string;
  language: Language;
  files?: FileInput[] | undefined;
  /** The cell's time limit (unset: the daemon's default; not sent). */
  timeoutMs?: number | undefined;
}

// ---- results --------------------------------------------------------------

/** The bytes of base64 text (the standard alphabet or the URL-safe one, padded or not). */
export function decodeBase64(s: string): Uint8Array {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const BASE64_ALPHABET = new TextEncoder().encode("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");

/** Bytes as base64 (the standard alphabet, padded); by table, since btoa of a large binary string is slow. */
export function encodeBase64(bytes: Uint8Array): string {
  const t = BASE64_ALPHABET;
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  let i = 0;
  let j = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out[j++] = t[n >> 18]!;
    out[j++] = t[(n >> 12) & 63]!;
    out[j++] = t[(n >> 6) & 63]!;
    out[j++] = t[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest > 0) {
    const n = (bytes[i]! << 16) | (rest > 1 ? bytes[i + 1]! << 8 : 0);
    out[j++] = t[n >> 18]!;
    out[j++] = t[(n >> 12) & 63]!;
    out[j++] = rest > 1 ? t[(n >> 6) & 63]! : 0x3d;
    out[j++] = 0x3d;
  }
  return new TextDecoder().decode(out);
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const num = (v: unknown): number => (typeof v === "number" ? v : typeof v === "string" && v !== "" ? Number(v) : 0);
const bool = (v: unknown): boolean => v === true;
const optStr = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function bytesOf(text: string, b64: string | undefined): Uint8Array {
  return b64 !== undefined ? decodeBase64(b64) : new TextEncoder().encode(text);
}

/** What a `Usage`'s figures cover. */
export type UsageSource = "cgroup" | "gvisor" | "worker" | "service" | (string & {});

/**
 * What a run, or a project's step, cost as the provider measured it
 * (docs/api.md, "Usage").  Each figure saturates at 4294967295.
 */
export interface Usage {
  cpuUserMs: number;
  cpuSystemMs: number;
  /** The most memory in use at once; 0 when not measured. */
  memoryPeakKib: number;
  wallMs: number;
  /**
   * What the figures cover: `cgroup` (the sandbox's cgroup, every process
   * in it), `gvisor` (the same with gVisor's own Sentry and Gofer),
   * `worker` (the wasm worker process), `service` (the hosted service's
   * own metrics).
   */
  source: UsageSource;
}

function usageOf(v: unknown): Usage | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const u = v as Record<string, unknown>;
  return {
    cpuUserMs: num(u["cpu_user_ms"]),
    cpuSystemMs: num(u["cpu_system_ms"]),
    memoryPeakKib: num(u["memory_peak_kib"]),
    wallMs: num(u["wall_ms"]),
    source: str(u["source"]),
  };
}

export { mimeIsText };

/** What a display output is: from `display()` or a figure left open, or the cell's last expression. */
export type DisplayKind = "display" | "result";

/**
 * One display output of a cell (docs/sessions.md, "Display outputs"): a
 * MIME bundle, as Jupyter's display_data.  `data` maps each MIME type to its
 * data as the daemon sent it: text for the text types (`mimeIsText`),
 * base64 for every other; `bytes(mime)` gives any type's exact bytes.
 */
export class DisplayOutput {
  readonly kind: DisplayKind;
  readonly data: Readonly<Record<string, string>>;
  readonly raw: Record<string, unknown>;

  constructor(raw: Record<string, unknown>) {
    this.raw = raw;
    this.kind = str(raw["kind"]) as DisplayKind;
    const data = raw["data"];
    const out: Record<string, string> = {};
    if (typeof data === "object" && data !== null && !Array.isArray(data)) {
      for (const [k, v] of Object.entries(data)) if (typeof v === "string") out[k] = v;
    }
    this.data = out;
  }

  /** The bundle's MIME types, in the order the daemon sent them. */
  get types(): string[] {
    return Object.keys(this.data);
  }

  /**
   * The exact bytes of `mime`'s data: base64 decoded for a binary type, the
   * text's UTF-8 for a text type.  A type the bundle does not hold is a
   * RangeError.
   */
  bytes(mime: string): Uint8Array {
    if (!Object.prototype.hasOwnProperty.call(this.data, mime)) {
      throw new RangeError(`plimsoll: the display output has no ${mime} data`);
    }
    const v = this.data[mime]!;
    return mimeIsText(mime) ? new TextEncoder().encode(v) : decodeBase64(v);
  }
}

/** One project step's result. */
export class StepResult {
  readonly name: string;
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  readonly durationMs: number;
  readonly timedOut: boolean;
  readonly stdoutBase64: string | undefined;
  readonly stderrBase64: string | undefined;
  /** What the step cost, where the provider measures it; else undefined. */
  readonly usage: Usage | undefined;
  /** The step as the daemon sent it. */
  readonly raw: Record<string, unknown>;

  constructor(raw: Record<string, unknown>) {
    this.raw = raw;
    this.name = str(raw["name"]);
    this.exitCode = num(raw["exit_code"]);
    this.stdout = str(raw["stdout"]);
    this.stderr = str(raw["stderr"]);
    this.stdoutTruncated = bool(raw["stdout_truncated"]);
    this.stderrTruncated = bool(raw["stderr_truncated"]);
    this.durationMs = num(raw["duration_ms"]);
    this.timedOut = bool(raw["timed_out"]);
    this.stdoutBase64 = optStr(raw["stdout_base64"]);
    this.stderrBase64 = optStr(raw["stderr_base64"]);
    this.usage = usageOf(raw["usage"]);
  }

  /** The exact stdout bytes (`stdout_base64` when the daemon sent it). */
  stdoutBytes(): Uint8Array {
    return bytesOf(this.stdout, this.stdoutBase64);
  }

  stderrBytes(): Uint8Array {
    return bytesOf(this.stderr, this.stderrBase64);
  }
}

/**
 * A file a project's or a snippet's `collect` globs matched, read once the
 * last step or the guest ended:
 * its path relative to the work directory (`pathBytes` the exact bytes when
 * the name is not UTF-8), its size, and the bytes that came (all of them
 * unless `truncated`).
 */
export class Artifact {
  readonly path: string;
  readonly pathBytes: Uint8Array;
  /** The file's size (4294967295 for that size or more). */
  readonly size: number;
  readonly content: Uint8Array;
  /** Fewer bytes came than the file holds: the run's SANDBOX_COLLECT_BYTES ran out. */
  readonly truncated: boolean;
  readonly raw: Record<string, unknown>;

  constructor(raw: Record<string, unknown>) {
    this.raw = raw;
    this.path = str(raw["path"]);
    this.pathBytes = bytesOf(this.path, optStr(raw["path_base64"]));
    this.size = num(raw["size"]);
    this.content = bytesOf(str(raw["content"]), optStr(raw["content_base64"]));
    this.truncated = bool(raw["truncated"]);
  }

  /**
   * Write `content` at `pathBytes` below `dir` (made if missing), making the
   * directories between, and return the file's path (Node, Deno or Bun).  A
   * path that is absolute or has an empty, `.` or `..` segment, or that
   * would pass through a symlink that exists below `dir` (its last name
   * included), is a RangeError and nothing is written; an existing file is
   * replaced.  A truncated artifact is saved with the bytes that came.
   */
  save(dir: string): Promise<string> {
    return saveUnder(dir, this.pathBytes, this.content);
  }
}

/**
 * The answer of a run that ran: a non-zero `exitCode` is a result, never an
 * error.  The fields are the RunResponse's in camelCase; `raw` is the
 * answer as the daemon sent it.
 */
export class RunResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  readonly durationMs: number;
  readonly sandboxName: string;
  /** The tier that actually ran. */
  readonly isolation: string;
  readonly timedOut: boolean;
  readonly outOfMemory: boolean;
  /** `completed`, `setup_failed`, `timed_out` or `protocol_error`. */
  readonly outcome: string;
  readonly detail: string;
  readonly steps: StepResult[];
  /** The run record (checked unless `verifyRecords` was off). */
  readonly record: RunRecord | undefined;
  readonly stdoutBase64: string | undefined;
  readonly stderrBase64: string | undefined;
  /** RunCell only: the call began with a fresh interpreter. */
  readonly interpreterStarted: boolean;
  /**
   * The files the request's `collect` globs matched, in the walk's order;
   * undefined when it named none (or they were not looked for: a setup
   * failure, a run the deadline ended).
   */
  readonly artifacts: Artifact[] | undefined;
  /** More files matched than came (SANDBOX_COLLECT_FILES, or the reader's bounds). */
  readonly artifactsTruncated: boolean;
  /** A cell's display outputs, in the order it produced them; empty when it showed nothing. */
  readonly outputs: DisplayOutput[];
  /**
   * Outputs the daemon left out: past SANDBOX_DISPLAY_OUTPUTS, larger than
   * SANDBOX_DISPLAY_OUTPUT_BYTES, past SANDBOX_DISPLAY_BYTES, or not a
   * well-formed bundle.
   */
  readonly outputsDropped: number;
  /** What the run cost; undefined when the provider measures nothing, and then `usageAbsent` says why. */
  readonly usage: Usage | undefined;
  readonly usageAbsent: string;
  readonly raw: Record<string, unknown>;

  constructor(raw: Record<string, unknown>) {
    this.raw = raw;
    this.exitCode = num(raw["exit_code"]);
    this.stdout = str(raw["stdout"]);
    this.stderr = str(raw["stderr"]);
    this.stdoutTruncated = bool(raw["stdout_truncated"]);
    this.stderrTruncated = bool(raw["stderr_truncated"]);
    this.durationMs = num(raw["duration_ms"]);
    this.sandboxName = str(raw["sandbox_name"]);
    this.isolation = str(raw["isolation"]);
    this.timedOut = bool(raw["timed_out"]);
    this.outOfMemory = bool(raw["out_of_memory"]);
    this.outcome = str(raw["outcome"]);
    this.detail = str(raw["detail"]);
    const steps = raw["steps"];
    this.steps = Array.isArray(steps)
      ? steps.filter((s): s is Record<string, unknown> => typeof s === "object" && s !== null).map((s) => new StepResult(s))
      : [];
    const rec = raw["record"];
    this.record = typeof rec === "object" && rec !== null ? (rec as RunRecord) : undefined;
    this.stdoutBase64 = optStr(raw["stdout_base64"]);
    this.stderrBase64 = optStr(raw["stderr_base64"]);
    this.interpreterStarted = bool(raw["interpreter_started"]);
    const arts = raw["artifacts"];
    this.artifacts = Array.isArray(arts)
      ? arts.filter((a): a is Record<string, unknown> => typeof a === "object" && a !== null).map((a) => new Artifact(a))
      : undefined;
    this.artifactsTruncated = bool(raw["artifacts_truncated"]);
    const outs = raw["outputs"];
    this.outputs = Array.isArray(outs)
      ? outs.filter((o): o is Record<string, unknown> => typeof o === "object" && o !== null).map((o) => new DisplayOutput(o))
      : [];
    this.outputsDropped = num(raw["outputs_dropped"]);
    this.usage = usageOf(raw["usage"]);
    this.usageAbsent = str(raw["usage_absent"]);
  }

  /**
   * Save every artifact below `dir` (`Artifact.save`) and return their
   * paths.  Every path is checked before any file is written; a symlink met
   * on the way stops the saving there.
   */
  async saveArtifacts(dir: string): Promise<string[]> {
    const arts = this.artifacts ?? [];
    for (const a of arts) artifactSegments(a.pathBytes);
    const out: string[] = [];
    for (const a of arts) out.push(await a.save(dir));
    return out;
  }

  /** Whether the code exited 0. */
  get ok(): boolean {
    return this.exitCode === 0;
  }

  /** The exact stdout bytes (`stdout_base64` when the daemon sent it). */
  stdoutBytes(): Uint8Array {
    return bytesOf(this.stdout, this.stdoutBase64);
  }

  /** The exact stderr bytes (`stderr_base64` when the daemon sent it). */
  stderrBytes(): Uint8Array {
    return bytesOf(this.stderr, this.stderrBase64);
  }
}

// ---- Describe -------------------------------------------------------------

export interface OperationSupport {
  supported: boolean;
  engine: string;
  maxTimeoutMs: number;
  languages: string[];
  grants: boolean;
  /**
   * RunStream (for `session`: RunCellStream) sends this kind's output as it
   * comes; when false a stream carries only the result.
   */
  streams: boolean;
}

export interface Limits {
  memoryMb: number;
  totalMemoryMb: number;
  maxConcurrent: number;
  effectiveConcurrency: number;
  perKeyConcurrent: number;
  ratePerMin: number;
  rateBurst: number;
  defaultTimeoutMs: number;
  outputBytes: number;
  maxSnippetBytes: number;
  maxRequestBytes: number;
  memoryBudgetApplies: boolean;
  /** SANDBOX_FILE_READ_BYTES: the most one ReadFile gives (its `limit` when 0 or unset). */
  fileReadBytes: number;
  /** SANDBOX_FILE_LIST_ENTRIES: the most entries one ListFiles gives. */
  fileListEntries: number;
  /** SANDBOX_SESSION_MAX_LIFETIME: the most a session may live from its open. */
  sessionMaxLifetimeS: number;
  /** SANDBOX_COLLECT_FILES: the most artifacts one run gives. */
  collectFiles: number;
  /** SANDBOX_COLLECT_BYTES: their bytes in all. */
  collectBytes: number;
  /** SANDBOX_DISPLAY_OUTPUTS: the most display outputs one cell keeps. */
  displayOutputs: number;
  /** SANDBOX_DISPLAY_OUTPUT_BYTES: the largest one output may be. */
  displayOutputBytes: number;
  /** SANDBOX_DISPLAY_BYTES: one cell's outputs in all. */
  displayBytes: number;
}

/** What a cell can show besides its text (docs/sessions.md, "Display outputs"), as the startup test found it. */
export interface DisplaySupport {
  /** `display()` and rich values in Python cells. */
  python: boolean;
  /** `display()` in JavaScript cells. */
  javascript: boolean;
  /** An open matplotlib figure comes back as image/png. */
  matplotlib: boolean;
  /** A pandas DataFrame comes back as text/html and text/plain. */
  pandas: boolean;
}

/** What a daemon is (Describe), in camelCase; `raw` is the answer as sent. */
export interface Description {
  version: string;
  provider: string;
  isolation: string;
  runtime: string;
  ready: boolean;
  readyDetail: string;
  supportsSessions: boolean;
  languages: string[];
  operations: {
    snippet: OperationSupport;
    project: OperationSupport;
    module: OperationSupport;
    session: OperationSupport;
    /** WriteFiles, ReadFile and ListFiles in a session. */
    files: OperationSupport;
    /** Which payloads may name `collect` globs. */
    artifacts: { project: boolean; snippet: boolean };
    /** What a cell can show besides its text. */
    display: DisplaySupport;
  };
  limits: Limits;
  raw: Record<string, unknown>;
}

const obj = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

function operation(v: unknown): OperationSupport {
  const o = obj(v);
  return {
    supported: bool(o["supported"]),
    engine: str(o["engine"]),
    maxTimeoutMs: num(o["max_timeout_ms"]),
    languages: strs(o["languages"]),
    grants: bool(o["grants"]),
    streams: bool(o["streams"]),
  };
}

export function description(raw: Record<string, unknown>): Description {
  const ops = obj(raw["operations"]);
  const l = obj(raw["limits"]);
  return {
    version: str(raw["version"]),
    provider: str(raw["provider"]),
    isolation: str(raw["isolation"]),
    runtime: str(raw["runtime"]),
    ready: bool(raw["ready"]),
    readyDetail: str(raw["ready_detail"]),
    supportsSessions: bool(raw["supports_sessions"]),
    languages: strs(raw["languages"]),
    operations: {
      snippet: operation(ops["snippet"]),
      project: operation(ops["project"]),
      module: operation(ops["module"]),
      session: operation(ops["session"]),
      files: operation(ops["files"]),
      artifacts: { project: bool(obj(ops["artifacts"])["project"]), snippet: bool(obj(ops["artifacts"])["snippet"]) },
      display: {
        python: bool(obj(ops["display"])["python"]),
        javascript: bool(obj(ops["display"])["javascript"]),
        matplotlib: bool(obj(ops["display"])["matplotlib"]),
        pandas: bool(obj(ops["display"])["pandas"]),
      },
    },
    limits: {
      memoryMb: num(l["memory_mb"]),
      totalMemoryMb: num(l["total_memory_mb"]),
      maxConcurrent: num(l["max_concurrent"]),
      effectiveConcurrency: num(l["effective_concurrency"]),
      perKeyConcurrent: num(l["per_key_concurrent"]),
      ratePerMin: num(l["rate_per_min"]),
      rateBurst: num(l["rate_burst"]),
      defaultTimeoutMs: num(l["default_timeout_ms"]),
      outputBytes: num(l["output_bytes"]),
      maxSnippetBytes: num(l["max_snippet_bytes"]),
      maxRequestBytes: num(l["max_request_bytes"]),
      memoryBudgetApplies: bool(l["memory_budget_applies"]),
      fileReadBytes: num(l["file_read_bytes"]),
      fileListEntries: num(l["file_list_entries"]),
      sessionMaxLifetimeS: num(l["session_max_lifetime_s"]),
      collectFiles: num(l["collect_files"]),
      collectBytes: num(l["collect_bytes"]),
      displayOutputs: num(l["display_outputs"]),
      displayOutputBytes: num(l["display_output_bytes"]),
      displayBytes: num(l["display_bytes"]),
    },
    raw,
  };
}

// ---- sessions (ListSessions, GetSession, ExtendSession) -------------------

/** A session's state: `ended` once it ended (closed, its lifetime reached, …). */
export type SessionState = "ready" | "paused" | "ended";

/** An interpreter a session keeps, as the last cleanup between calls found it. */
export interface SessionInterpreter {
  /** `python` or `javascript`. */
  language: string;
  alive: boolean;
}

/**
 * A session as the daemon holds it (SessionInfo), in camelCase; `raw` is
 * the answer as sent.  Times are the daemon's RFC 3339 UTC strings with
 * nine fraction digits (which compare as the times they are), or `""`
 * for none.
 */
export interface SessionInfo {
  sessionId: string;
  state: SessionState;
  /** Why it ended; `""` unless `state` is `ended`. */
  endedReason: string;
  createdAt: string;
  /** The end of its last call; `""` before any. */
  lastCallAt: string;
  /** When it is paused if no call comes; `""` when paused, ended, busy, or where the provider cannot pause. */
  idleDeadline: string;
  /** When it ends; `""` once ended. */
  lifetimeDeadline: string;
  endedAt: string;
  /** Calls that made a record (runs and cells). */
  calls: number;
  /** Calls running or waiting their turn now. */
  callsWaiting: number;
  /** The last record's digest, which the next call's record names; `""` before any call. */
  previousDigest: string;
  /** The languages the open named (a hint). */
  languages: string[];
  interpreters: SessionInterpreter[];
  /** Its files, as the last cleanup measured them. */
  diskUsedKib: number;
  /** SANDBOX_SESSION_DISK_MB in KiB; 0 where none is reported. */
  diskBudgetKib: number;
  /** SANDBOX_SESSION_MAX_LIFETIME: the most `extendSession` may give, from the open. */
  maxLifetimeS: number;
  /**
   * The route of the daemon that holds it (its PLIMSOLL_INSTANCE); `""`
   * from a daemon older than routes.  Behind a proxy, a call by id with
   * `{ route }` goes there.
   */
  route: string;
  raw: Record<string, unknown>;
}

/** The SessionInfo view of a checked answer (answer.ts has checked its state). */
export function sessionInfo(raw: Record<string, unknown>): SessionInfo {
  const interpreters = raw["interpreters"];
  return {
    sessionId: str(raw["session_id"]),
    state: str(raw["state"]) as SessionState,
    endedReason: str(raw["ended_reason"]),
    createdAt: str(raw["created_at"]),
    lastCallAt: str(raw["last_call_at"]),
    idleDeadline: str(raw["idle_deadline"]),
    lifetimeDeadline: str(raw["lifetime_deadline"]),
    endedAt: str(raw["ended_at"]),
    calls: num(raw["calls"]),
    callsWaiting: num(raw["calls_waiting"]),
    previousDigest: str(raw["previous_digest"]),
    languages: strs(raw["languages"]),
    interpreters: Array.isArray(interpreters)
      ? interpreters.map((i: unknown) => {
          const o = obj(i);
          return { language: str(o["language"]), alive: bool(o["alive"]) };
        })
      : [],
    diskUsedKib: num(raw["disk_used_kib"]),
    diskBudgetKib: num(raw["disk_budget_kib"]),
    maxLifetimeS: num(raw["max_lifetime_s"]),
    route: str(raw["route"]),
    raw,
  };
}

// ---- a session's files (WriteFiles, ReadFile, ListFiles) --------------------

/** What a FileEntry is; symlinks are listed, never followed. */
export const FILE_TYPES = FILE_ENTRY_TYPES;
export type FileType = (typeof FILE_TYPES)[number];

/** How a ReadFile reads: from `offset` (default 0), at most `limit` bytes (0 or unset: the daemon's `limits.fileReadBytes`). */
export interface ReadFileOptions {
  offset?: number | undefined;
  limit?: number | undefined;
}

/** How a ListFiles lists: `depth` levels below the path (0 or 1, or unset: its entries; at most 16). */
export interface ListFilesOptions {
  depth?: number | undefined;
}

/** A WriteFiles answer: how many files and bytes were written, and its record. */
export interface WriteFilesResult {
  files: number;
  bytes: number;
  /** The record (checked, or appended to the session's chain). */
  record: RunRecord | undefined;
  raw: Record<string, unknown>;
}

/**
 * A ReadFile answer: `length` bytes of the file from `offset`, in
 * `content` exactly (decoded from `content_base64` when the daemon sent
 * it); `text` is the same bytes as text when they are UTF-8, else
 * undefined.  `more`: bytes remain past `offset + length`; `size` is the
 * file's size.
 */
export interface ReadFileResult {
  /** The path as asked. */
  path: string;
  size: number;
  offset: number;
  length: number;
  more: boolean;
  content: Uint8Array;
  text: string | undefined;
  record: RunRecord | undefined;
  raw: Record<string, unknown>;
}

/**
 * One entry of a ListFiles answer.  `path` is relative to the session's
 * work directory; when the name is not UTF-8 it is a lossy copy, and
 * `pathBytes` (always set) holds the exact bytes.  `size` is 4294967295
 * for that size or more; `mode` the permission bits; `modifiedAt` RFC 3339
 * UTC.
 */
export interface FileEntry {
  path: string;
  pathBytes: Uint8Array;
  type: FileType;
  size: number;
  mode: number;
  modifiedAt: string;
  raw: Record<string, unknown>;
}

/** A ListFiles answer: its entries depth first, each directory's by name; `truncated` when some were left out. */
export interface ListFilesResult {
  entries: FileEntry[];
  truncated: boolean;
  record: RunRecord | undefined;
  raw: Record<string, unknown>;
}

/** A file `Session.upload` skipped, and why (a symlink, a special file, a name not UTF-8). */
export interface SkippedFile {
  path: string;
  why: string;
}

/** What `Session.upload` sent. */
export interface UploadResult {
  /** The files written, and their bytes. */
  files: number;
  bytes: number;
  /** Each file's path in the session, in the order of the walk. */
  paths: string[];
  /** The local entries left out, with why. */
  skipped: SkippedFile[];
  /** Each WriteFiles call's answer, in order (none for nothing to send). */
  calls: WriteFilesResult[];
}

const recordOf = (raw: Record<string, unknown>): RunRecord | undefined => {
  const rec = raw["record"];
  return typeof rec === "object" && rec !== null ? (rec as RunRecord) : undefined;
};

/** The WriteFilesResult view of a checked answer. */
export function writeFilesResult(raw: Record<string, unknown>): WriteFilesResult {
  return { files: num(raw["files"]), bytes: num(raw["bytes"]), record: recordOf(raw), raw };
}

/** The ReadFileResult view of a checked answer (answer.ts has checked `length` against the bytes). */
export function readFileResult(raw: Record<string, unknown>): ReadFileResult {
  const b64 = optStr(raw["content_base64"]);
  const content = bytesOf(str(raw["content"]), b64);
  return {
    path: str(raw["path"]),
    size: num(raw["size"]),
    offset: num(raw["offset"]),
    length: num(raw["length"]),
    more: bool(raw["more"]),
    content,
    text: b64 === undefined ? str(raw["content"]) : undefined,
    record: recordOf(raw),
    raw,
  };
}

/** The FileEntry view of a checked entry (answer.ts has checked its type and path_base64). */
export function fileEntry(raw: Record<string, unknown>): FileEntry {
  const path = str(raw["path"]);
  return {
    path,
    pathBytes: bytesOf(path, optStr(raw["path_base64"])),
    type: str(raw["type"]) as FileType,
    size: num(raw["size"]),
    mode: num(raw["mode"]),
    modifiedAt: str(raw["modified_at"]),
    raw,
  };
}

/** The ListFilesResult view of a checked answer. */
export function listFilesResult(raw: Record<string, unknown>): ListFilesResult {
  const entries = raw["entries"];
  return {
    entries: Array.isArray(entries) ? entries.map((e: Record<string, unknown>) => fileEntry(e)) : [],
    truncated: bool(raw["truncated"]),
    record: recordOf(raw),
    raw,
  };
}
