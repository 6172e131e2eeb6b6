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
  type RunResult,
  type SessionInfo,
  type SessionInterpreter,
  type SessionState,
  type ConnectSessionOptions,
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
