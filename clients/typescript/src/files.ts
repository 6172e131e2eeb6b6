// SPDX-License-Identifier: Apache-2.0
// A session's files on the client's side: WriteFiles' bounds, an upload
// packed into as few calls as they allow, and the local files of
// `Session.upload` and `Session.download`.  Those two read and write with
// node:fs, loaded only when they run (`process.getBuiltinModule`, else an
// import whose specifier is a variable, which bundlers for browsers leave
// alone), so this module loads in a browser as the rest of the client does.

import type { SkippedFile } from "./types.js";

/** The most files one WriteFiles call may carry. */
export const WRITE_FILES_MAX_FILES = 256;
/** The most bytes (decoded) the files of one WriteFiles call may hold in all: 4 MiB. */
export const WRITE_FILES_MAX_BYTES = 4 * 1024 * 1024;
/** The longest path (UTF-8 bytes) a file in a session may have. */
export const FILE_PATH_MAX_BYTES = 256;

/** A local file to upload: where it is, where it goes in the session, its size when walked. */
export interface LocalFile {
  local: string;
  remote: string;
  size: number;
}

/**
 * `files` packed into batches of at most `maxFiles` files and `maxBytes`
 * bytes each, as few as this finds: the files in order, each batch taking
 * the next until one more would break a bound, or, when that makes more
 * batches, first fit with the largest first (which reaches the fewest the
 * bounds allow but in rare mixes of sizes).  Each batch keeps the files'
 * order, and the batches are in the order of their first file.  A file
 * larger than `maxBytes` has a batch of its own (the caller refuses it
 * first).
 */
export function packFiles<T extends { size: number }>(
  files: readonly T[],
  maxFiles = WRITE_FILES_MAX_FILES,
  maxBytes = WRITE_FILES_MAX_BYTES,
): T[][] {
  const inOrder: T[][] = [];
  let bytes = 0;
  for (const f of files) {
    const last = inOrder[inOrder.length - 1];
    if (last && last.length < maxFiles && bytes + f.size <= maxBytes) {
      last.push(f);
      bytes += f.size;
    } else {
      inOrder.push([f]);
      bytes = f.size;
    }
  }
  const order = files.map((_, i) => i).sort((a, b) => files[b]!.size - files[a]!.size || a - b);
  const batches: { items: number[]; bytes: number }[] = [];
  for (const i of order) {
    const size = files[i]!.size;
    let batch = batches.find((b) => b.items.length < maxFiles && b.bytes + size <= maxBytes);
    if (!batch) {
      batch = { items: [], bytes: 0 };
      batches.push(batch);
    }
    batch.items.push(i);
    batch.bytes += size;
  }
  if (batches.length >= inOrder.length) return inOrder;
  for (const b of batches) b.items.sort((x, y) => x - y);
  batches.sort((x, y) => x.items[0]! - y.items[0]!);
  return batches.map((b) => b.items.map((i) => files[i]!));
}

const utf8 = new TextEncoder();

/**
 * A remote directory argument made plain: `""` (the work directory) or
 * `a/b`, without trailing slashes; anything else (absolute, `.`, `..`, an
 * empty segment) is a RangeError before anything is sent.
 */
export function remoteDirOf(what: string, dir: unknown): string {
  if (dir === undefined) return "";
  if (typeof dir !== "string") {
    throw new TypeError(`${what}: remoteDir must be a string, not ${dir === null ? "null" : typeof dir}`);
  }
  const d = dir.replace(/\/+$/, "");
  if (d === "") {
    if (dir !== "") throw new RangeError(`${what}: remoteDir ${JSON.stringify(dir)} is not relative to the work directory`);
    return "";
  }
  for (const seg of d.split("/")) {
    if (seg === "" || seg === "." || seg === "..") {
      throw new RangeError(
        `${what}: remoteDir ${JSON.stringify(dir)} must be relative to the work directory, without ".", ".." or empty segments`,
      );
    }
  }
  return d;
}

// ---- node:fs, where there is one ---------------------------------------------

interface Stats {
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  size: number;
}

interface FileHandle {
  write(data: Uint8Array): Promise<unknown>;
  close(): Promise<void>;
}

interface FsPromises {
  stat(path: string): Promise<Stats>;
  lstat(path: string | Uint8Array): Promise<Stats>;
  open(path: string | Uint8Array, flags: number, mode: number): Promise<FileHandle>;
  readdir(path: string, options: { encoding: "buffer" }): Promise<Uint8Array[]>;
  readFile(path: string): Promise<Uint8Array>;
  writeFile(path: string, data: Uint8Array): Promise<void>;
  mkdir(path: string | Uint8Array, options?: { recursive: true }): Promise<unknown>;
  constants: { O_WRONLY: number; O_CREAT: number; O_TRUNC: number; O_NOFOLLOW?: number };
}

interface PathModule {
  resolve(...paths: string[]): string;
  basename(path: string): string;
  dirname(path: string): string;
  join(...paths: string[]): string;
}

/** A built-in module of Node (Deno, Bun), or an Error saying `what` needs it. */
async function builtin<T>(name: string, what: string): Promise<T> {
  const p = (globalThis as { process?: { getBuiltinModule?: unknown } }).process;
  if (p && typeof p.getBuiltinModule === "function") {
    const m = (p.getBuiltinModule as (id: string) => unknown)(name);
    if (m) return m as T;
  }
  try {
    return (await import(name)) as T;
  } catch (e) {
    throw new Error(`${what}: this runtime has no ${name} (it needs Node, Deno or Bun; in a browser, use writeFiles and readAll)`, {
      cause: e,
    });
  }
}

async function local(what: string): Promise<{ fs: FsPromises; path: PathModule }> {
  return { fs: await builtin<FsPromises>("node:fs/promises", what), path: await builtin<PathModule>("node:path", what) };
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * What `upload(localPath, remoteDir)` sends: `localPath` (followed, when a
 * symlink) as `remoteDir/<its name>`, a directory with everything under
 * it, each directory's entries by name.  Symlinks under it, special files
 * (FIFOs, sockets, devices) and names that are not UTF-8 are skipped, and
 * listed.  A file over WRITE_FILES_MAX_BYTES, or whose path in the session
 * is longer than FILE_PATH_MAX_BYTES, is a RangeError naming the bound.
 */
export async function walkUpload(
  localPath: string,
  remoteDir: string,
): Promise<{ files: LocalFile[]; skipped: SkippedFile[] }> {
  const what = "Session.upload";
  const { fs, path } = await local(what);
  const files: LocalFile[] = [];
  const skipped: SkippedFile[] = [];
  const strict = new TextDecoder("utf-8", { fatal: true });
  const lossy = new TextDecoder("utf-8");
  const under = (dir: string, name: string): string => (dir === "" ? name : `${dir}/${name}`);
  const walk = async (dir: string, remote: string): Promise<void> => {
    const names = (await fs.readdir(dir, { encoding: "buffer" })).sort(compareBytes);
    for (const raw of names) {
      let name: string;
      try {
        name = strict.decode(raw);
      } catch {
        skipped.push({ path: path.join(dir, lossy.decode(raw)), why: "its name is not UTF-8" });
        continue;
      }
      const child = path.join(dir, name);
      const st = await fs.lstat(child);
      if (st.isSymbolicLink()) skipped.push({ path: child, why: "a symlink" });
      else if (st.isDirectory()) await walk(child, under(remote, name));
      else if (st.isFile()) files.push({ local: child, remote: under(remote, name), size: st.size });
      else skipped.push({ path: child, why: "not a regular file or a directory" });
    }
  };
  const st = await fs.stat(localPath);
  const name = path.basename(path.resolve(localPath));
  const top = name === "" ? remoteDir : under(remoteDir, name);
  if (st.isFile()) {
    if (top === "") throw new RangeError(`${what}: ${localPath} has no name to give the file`);
    files.push({ local: localPath, remote: top, size: st.size });
  } else if (st.isDirectory()) {
    await walk(localPath, top);
  } else {
    throw new TypeError(`${what}: ${localPath} is neither a regular file nor a directory`);
  }
  for (const f of files) {
    if (f.size > WRITE_FILES_MAX_BYTES) {
      throw new RangeError(
        `${what}: ${f.local} is ${f.size} bytes, past the ${WRITE_FILES_MAX_BYTES} bytes (4 MiB) one WriteFiles call may carry; nothing was sent`,
      );
    }
    const n = utf8.encode(f.remote).length;
    if (n > FILE_PATH_MAX_BYTES) {
      throw new RangeError(
        `${what}: the path ${JSON.stringify(f.remote)} is ${n} bytes, past the ${FILE_PATH_MAX_BYTES} bytes a path in a session may have; nothing was sent`,
      );
    }
  }
  return { files, skipped };
}

/** The bytes of a walked file, which must still have the size it had. */
export async function readLocal(f: LocalFile): Promise<Uint8Array> {
  const { fs } = await local("Session.upload");
  const bytes = await fs.readFile(f.local);
  if (bytes.length !== f.size) {
    throw new Error(`Session.upload: ${f.local} changed while it was uploaded (${f.size} bytes when walked, ${bytes.length} when read)`);
  }
  return bytes;
}

/** Write `bytes` to the local file `localPath`, making its directories. */
export async function writeLocal(localPath: string, bytes: Uint8Array): Promise<void> {
  const { fs, path } = await local("Session.download");
  await fs.mkdir(path.dirname(path.resolve(localPath)), { recursive: true });
  await fs.writeFile(localPath, bytes);
}

// ---- a project's artifacts, saved ---------------------------------------------

const SLASH = 0x2f;

/**
 * The segments of an artifact's path (bytes), or a RangeError for one that
 * could land outside the directory it is saved below: empty, absolute, a
 * NUL, or an empty, `.` or `..` segment.
 */
export function artifactSegments(path: Uint8Array): Uint8Array[] {
  const shown = JSON.stringify(new TextDecoder().decode(path));
  if (path.length === 0 || path[0] === SLASH || path.includes(0)) {
    throw new RangeError(`saveArtifacts: artifact path ${shown} is empty or absolute; not saved`);
  }
  const segs: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i <= path.length; i++) {
    if (i === path.length || path[i] === SLASH) {
      const seg = path.subarray(start, i);
      const dots = seg.every((c) => c === 0x2e);
      if (seg.length === 0 || (dots && seg.length <= 2)) {
        throw new RangeError(`saveArtifacts: artifact path ${shown} has an empty, "." or ".." segment; not saved`);
      }
      segs.push(seg);
      start = i + 1;
    }
  }
  return segs;
}

function joinBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + 1 + b.length);
  out.set(a);
  out[a.length] = SLASH;
  out.set(b, a.length + 1);
  return out;
}

/**
 * Write `bytes` at the artifact path `path` below `dir` (made if missing),
 * making the directories between, through no symlink that exists there;
 * the path is handled as bytes, so a name that is not UTF-8 is kept.
 */
export async function saveUnder(dir: string, path: Uint8Array, bytes: Uint8Array): Promise<string> {
  const segs = artifactSegments(path);
  const { fs } = await local("saveArtifacts");
  await fs.mkdir(dir, { recursive: true });
  const shown = JSON.stringify(new TextDecoder().decode(path));
  let at: Uint8Array = new TextEncoder().encode(dir.replace(/\/+$/, "") || "/");
  for (let i = 0; i < segs.length; i++) {
    at = joinBytes(at, segs[i]!);
    let st: Stats | undefined;
    try {
      st = await fs.lstat(at);
    } catch (e) {
      if ((e as { code?: string }).code !== "ENOENT") throw e;
    }
    if (st?.isSymbolicLink()) {
      throw new RangeError(`saveArtifacts: artifact ${shown}: ${new TextDecoder().decode(at)} is a symlink; not saved`);
    }
    if (i < segs.length - 1) {
      if (st === undefined) {
        try {
          await fs.mkdir(at);
        } catch (e) {
          if ((e as { code?: string }).code !== "EEXIST") throw e;
        }
      } else if (!st.isDirectory()) {
        throw new Error(`saveArtifacts: artifact ${shown}: ${new TextDecoder().decode(at)} is not a directory`);
      }
    }
  }
  const c = fs.constants;
  const f = await fs.open(at, c.O_WRONLY | c.O_CREAT | c.O_TRUNC | (c.O_NOFOLLOW ?? 0), 0o666);
  try {
    await f.write(bytes);
  } finally {
    await f.close();
  }
  return new TextDecoder().decode(at);
}
