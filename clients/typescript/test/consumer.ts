// SPDX-License-Identifier: Apache-2.0
// Type-checked only (tsconfig.consumer.json): what a TypeScript caller
// writes, resolved through package.json's "exports" and "types".
import {
  Client,
  ConfigurationError,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_URL,
  RefusalError,
  SessionEndedError,
  type OnOutput,
  type OutputChunk,
  DisplayOutput,
  mimeIsText,
  type DisplayKind,
  type DisplaySupport,
  type Usage,
  type RunResult,
  type SessionInfo,
  type SessionInterpreter,
  type SessionState,
  type ConnectSessionOptions,
  type FileEntry,
  type FileType,
  type ListFilesResult,
  type ReadFileOptions,
  type ReadFileResult,
  type UploadResult,
  type WriteFilesResult,
  WRITE_FILES_MAX_BYTES,
} from "@plimsoll/client";
import { ChainError, IsolationEvidenceMismatchError } from "@plimsoll/client/errors";
import { Chain, canonical, verifyChain, type ChainEntry } from "@plimsoll/client/record";

export function fromEnvironment(): string {
  try {
    return String(new Client()) + new Client({ timeoutMs: 1000 }).url;
  } catch (e) {
    if (e instanceof ConfigurationError) return `${e.code} ${e.path ?? DEFAULT_URL}`;
    throw e;
  }
}

export async function use(url: string, apiKey: string): Promise<string> {
  const c = new Client({ url, apiKey, retry: { maxAttempts: 6 }, timeoutMs: 30_000 });
  const r: RunResult = await c.runSnippet({ code: "1", language: "python", timeoutMs: 100 });
  const n: number = r.exitCode;
  const seen: OutputChunk[] = [];
  const onOutput: OnOutput = async (chunk) => {
    seen.push(chunk);
  };
  const streamed: RunResult = await new Client({ url, maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES }).runStream(
    { snippet: { language: "javascript", code: "1" } },
    (chunk: OutputChunk) => void seen.push({ stdout: chunk.stdout, stderr: chunk.stderr, step: chunk.step }),
  );
  await c.runCellStream("id", { language: "python", code: "1" }, onOutput, 100);
  const bytes: Uint8Array = r.stdoutBytes();
  const shown: DisplayOutput[] = r.outputs;
  const kind: DisplayKind | undefined = shown[0]?.kind;
  const png: Uint8Array | undefined = shown[0]?.bytes("image/png");
  const html: string | undefined = shown[0]?.data["text/html"];
  const dropped: number = r.outputsDropped;
  const usage: Usage | undefined = r.usage ?? r.steps[0]?.usage;
  const why: string = r.usageAbsent;
  const display: DisplayOutput | undefined = seen[0]?.display;
  const can: DisplaySupport = (await c.describe()).operations.display;
  void [kind, png, html, dropped, usage?.cpuUserMs, usage?.source, why, display, can.matplotlib, mimeIsText("image/png")];
  const s = await c.openSession({ languages: ["python"], minimumIsolation: "container" });
  try {
    await s.cell({ code: "x = 1", language: "python", files: [{ path: "a", content: new Uint8Array(1) }] });
    await s.cellStream({ code: "x", language: "python" }, onOutput);
  } catch (e) {
    if (e instanceof ChainError) return e.broken + e.index;
    if (e instanceof IsolationEvidenceMismatchError) return e.code;
    if (e instanceof SessionEndedError) return e.endedReason;
    if (e instanceof RefusalError) return e.reason + e.metadata["isolation"];
    throw e;
  }
  const entries: ChainEntry[] = s.chain.entries;
  const head: string = await verifyChain(entries);
  const k = new Chain(head);
  return canonical({ n, len: bytes.length, head: k.head, streamed: streamed.exitCode, seen: seen.length });
}

/** The session-management calls, and a handle on a session opened earlier. */
export async function manage(url: string, id: string, floor: string | undefined): Promise<string> {
  const c = new Client({ url });
  const all: SessionInfo[] = await c.listSessions();
  const open = all.filter((i) => i.state !== "ended").map((i) => i.sessionId);
  const one: SessionInfo = await c.getSession(id);
  const later: SessionInfo = await c.extendSession(id, 3600);
  const options: ConnectSessionOptions = { minimumIsolation: floor };
  const s = await c.connectSession(id, options);
  const head: string = s.chain.start;
  const now: SessionInfo = await s.info();
  const extended: SessionInfo = await s.extend(60);
  const state: SessionState = now.state;
  const alive: SessionInterpreter[] = one.interpreters.filter((i) => i.alive);
  const n: number = one.calls + one.callsWaiting + one.diskUsedKib + one.diskBudgetKib + one.maxLifetimeS;
  return canonical({
    open,
    head,
    state,
    alive: alive.map((i) => i.language),
    n,
    times: [one.createdAt, one.lastCallAt, one.idleDeadline, later.lifetimeDeadline, extended.endedAt],
    why: one.endedReason + one.previousDigest + one.languages.join(),
    raw: Object.keys(now.raw).length,
  });
}

/**
 * Under exactOptionalPropertyTypes (a `tsc --init` project's default), an
 * option the caller holds as `T | undefined` is passed as it is.
 */
export function optionalAsUndefined(timeoutMs: number | undefined, floor: string | undefined): Promise<RunResult> {
  return new Client({ url: "http://127.0.0.1:1", timeoutMs, retry: { maxAttempts: undefined } }).runSnippet({
    code: "1",
    language: "javascript",
    minimumIsolation: floor,
    timeoutMs,
    stdin: undefined,
  });
}

/** A session's files, on Session and on Client, with options held as `T | undefined`. */
export async function files(url: string, id: string, offset: number | undefined, depth: number | undefined): Promise<string> {
  const c = new Client({ url });
  const s = await c.connectSession(id);
  const w: WriteFilesResult = await s.writeFiles([
    { path: "a.txt", content: "text" },
    { path: "b.bin", content: new Uint8Array([0, 255]) },
    { path: "c.bin", contentBase64: "AP8=" },
  ]);
  const options: ReadFileOptions = { offset, limit: undefined };
  const r: ReadFileResult = await s.readFile("a.txt", options);
  const bytes: Uint8Array = r.content;
  const text: string | undefined = r.text;
  const l: ListFilesResult = await s.listFiles("", { depth });
  const top: ListFilesResult = await s.listFiles({ depth: 2 });
  const e: FileEntry | undefined = l.entries[0];
  const type: FileType | undefined = e?.type;
  const all: Uint8Array = await s.readAll("a.txt", { limit: 1024 });
  const n: number = await s.download("a.txt", "local/a.txt");
  const up: UploadResult = await s.upload("local", undefined);
  const alone: ReadFileResult = await c.readFile(id, "a.txt", { offset: 0 });
  const listed: ListFilesResult = await c.listFiles(id, undefined, { depth });
  const written: WriteFilesResult = await c.writeFiles(id, [{ path: "d", content: "" }]);
  const d = await c.describe();
  return canonical({
    w: w.files + w.bytes,
    r: [r.size, r.offset, r.length, r.more, bytes.length, text ?? null, r.record?.digest ?? null],
    l: [l.truncated, top.entries.length, type ?? null, e?.pathBytes.length ?? 0, e?.modifiedAt ?? "", e?.mode ?? 0],
    n: all.length + n + up.files + up.bytes + up.calls.length + up.skipped.length + up.paths.length + WRITE_FILES_MAX_BYTES,
    alone: [alone.length, listed.entries.length, written.files],
    d: [d.operations.files.supported, d.limits.fileReadBytes, d.limits.fileListEntries, d.limits.sessionMaxLifetimeS],
  });
}
