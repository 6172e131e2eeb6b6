// SPDX-License-Identifier: Apache-2.0
// Where a client's URL and key come from (docs/clients.md, "Configuration").
//
// An option given wins; else, where there is a `process.env` (Node, Deno,
// Bun), PLIMSOLL_URL (default http://127.0.0.1:7475) and PLIMSOLL_KEY, or
// the first line of the file PLIMSOLL_KEY_FILE.  Both are trimmed of
// surrounding whitespace.  No error made here contains any part of a key.

import { ConfigurationError } from "./errors.js";

/** The daemon's address when none is given or set. */
export const DEFAULT_URL = "http://127.0.0.1:7475";

/** The most bytes of a key file read to find its first line. */
const MAX_KEY_FILE_BYTES = 65536;

const WHITESPACE = /^[ \t\r\n\v\f]+|[ \t\r\n\v\f]+$/g;

/** `s` without the whitespace around it (spaces, tabs, line breaks). */
export function trimmed(s: string): string {
  return s.replace(WHITESPACE, "");
}

type Env = Record<string, string | undefined>;

interface FsSync {
  openSync(path: string, flags: string): number;
  readSync(fd: number, buffer: Uint8Array, offset: number, length: number, position: null): number;
  closeSync(fd: number): void;
}

interface FsPromises {
  open(path: string, flags: string): Promise<{
    read(buffer: Uint8Array, offset: number, length: number, position: null): Promise<{ bytesRead: number }>;
    close(): Promise<void>;
  }>;
}

interface ProcessLike {
  env: Env;
  getBuiltinModule?: ((id: string) => unknown) | undefined;
}

declare const process: unknown;

/** The runtime's `process`, when it has one with an `env` (not a browser). */
function runtimeProcess(): ProcessLike | undefined {
  const p: unknown = typeof process === "undefined" ? undefined : process;
  if (typeof p !== "object" || p === null) return undefined;
  const env = (p as { env?: unknown }).env;
  if (typeof env !== "object" || env === null) return undefined;
  return p as ProcessLike;
}

/** The environment, or undefined where there is none (a browser). */
export function environment(): Env | undefined {
  return runtimeProcess()?.env;
}

/** Why `key` (trimmed) cannot be sent as a bearer key, or undefined: the daemon takes visible ASCII only. */
function whatIsWrong(key: string): string | undefined {
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c === 0x0a || c === 0x0d) return "contains a line break";
    if (c < 0x20 || c === 0x7f) return "contains a control character";
    if (c === 0x20) return "contains a space";
    if (c > 0x7f) return "contains a character that is not ASCII";
  }
  return undefined;
}

/** `key` trimmed, or a ConfigurationError that says what is wrong with it (never the key). */
export function checkKey(key: unknown, source: string): string {
  if (typeof key !== "string") {
    throw new TypeError(`Client: the API key ${source} must be a string, not ${key === null ? "null" : typeof key}`);
  }
  const k = trimmed(key);
  const why = whatIsWrong(k);
  if (why !== undefined) throw new ConfigurationError(`Client: the API key ${source} ${why} (the key is not shown)`);
  return k;
}

/** The OS's reason in a Node file error ("no such file or directory (ENOENT)"). */
function reasonOf(e: unknown): string {
  const code = typeof (e as { code?: unknown })?.code === "string" ? (e as { code: string }).code : "";
  const message = e instanceof Error ? e.message : String(e);
  const m = /^[A-Z0-9_]+: ([^,]+)/.exec(message);
  if (m) return code ? `${m[1]} (${code})` : m[1]!;
  return code || message;
}

function unreadable(path: string, e: unknown): ConfigurationError {
  return new ConfigurationError(
    `Client: PLIMSOLL_KEY_FILE: cannot read the key file ${path}: ${reasonOf(e)}`,
    path,
    { cause: e },
  );
}

/** The key in the first line of a key file's bytes, trimmed and checked. */
function keyOfFile(path: string, bytes: Uint8Array): string {
  let end = bytes.indexOf(0x0a);
  if (end < 0) end = bytes.length;
  const line = new TextDecoder("utf-8", { fatal: false }).decode(bytes.subarray(0, end));
  const key = checkKey(line, `in the key file ${path} (PLIMSOLL_KEY_FILE)`);
  if (key === "") {
    throw new ConfigurationError(
      `Client: PLIMSOLL_KEY_FILE: the key file ${path} holds no key (its first line is empty)`,
      path,
    );
  }
  return key;
}

/** The key file read now, or undefined where the runtime has no synchronous fs to read it with. */
function readKeyFileSync(path: string): string | undefined {
  const p = runtimeProcess();
  const fs = p && typeof p.getBuiltinModule === "function" ? (p.getBuiltinModule("node:fs") as FsSync | undefined) : undefined;
  if (!fs || typeof fs.openSync !== "function") return undefined;
  const buf = new Uint8Array(MAX_KEY_FILE_BYTES);
  let n: number;
  try {
    const fd = fs.openSync(path, "r");
    try {
      n = fs.readSync(fd, buf, 0, buf.length, null);
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    throw unreadable(path, e);
  }
  return keyOfFile(path, buf.subarray(0, n));
}

/** The key file read with `node:fs/promises` (runtimes without `process.getBuiltinModule`). */
export async function readKeyFile(path: string): Promise<string> {
  const name = "node:fs/promises"; // not a static import: the module must load in a browser
  let buf: Uint8Array;
  let n: number;
  try {
    const fs = (await import(name)) as FsPromises;
    const fh = await fs.open(path, "r");
    try {
      buf = new Uint8Array(MAX_KEY_FILE_BYTES);
      n = (await fh.read(buf, 0, buf.length, null)).bytesRead;
    } finally {
      await fh.close();
    }
  } catch (e) {
    throw unreadable(path, e);
  }
  return keyOfFile(path, buf.subarray(0, n));
}

/** The URL given, else PLIMSOLL_URL, else DEFAULT_URL; trimmed.  Where there is no environment, it must be given. */
export function resolveUrl(url: unknown): string {
  if (url !== undefined && url !== null && typeof url !== "string") {
    throw new TypeError(`Client: url must be a string, not ${typeof url}`);
  }
  const given = trimmed(url ?? "");
  if (given !== "") return given;
  const env = environment();
  if (env === undefined) {
    throw new ConfigurationError(
      "Client: no url given, and this runtime has no process.env to read PLIMSOLL_URL from (a browser): pass { url, apiKey }",
    );
  }
  return trimmed(env["PLIMSOLL_URL"] ?? "") || DEFAULT_URL;
}

/**
 * What the key is: `key`, known now (undefined: none is sent), or `file`,
 * a key file the first call reads (where the runtime cannot read it now).
 */
export type ResolvedKey = { key: string | undefined; file?: undefined } | { key?: undefined; file: string };

/**
 * The key given, else PLIMSOLL_KEY, else the first line of the file
 * PLIMSOLL_KEY_FILE; trimmed and checked.  A key empty once trimmed is not
 * given.  No key anywhere (or no environment) is no key.
 */
export function resolveKey(apiKey: unknown): ResolvedKey {
  if (apiKey !== undefined && apiKey !== null) {
    const k = checkKey(apiKey, "given to the client");
    if (k !== "") return { key: k };
  }
  const env = environment();
  if (env === undefined) return { key: undefined };
  const k = checkKey(env["PLIMSOLL_KEY"] ?? "", "from PLIMSOLL_KEY");
  if (k !== "") return { key: k };
  const path = env["PLIMSOLL_KEY_FILE"] ?? "";
  if (path === "") return { key: undefined };
  const read = readKeyFileSync(path);
  return read === undefined ? { file: path } : { key: read };
}
