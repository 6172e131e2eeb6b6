// SPDX-License-Identifier: Apache-2.0
// RunStream and RunCellStream: Connect server streaming with JSON messages
// (application/connect+json), with no I/O in it.  The request is one
// envelope (a flags byte, a 4-byte big-endian length, the JSON request);
// the answer's body is a sequence of envelopes: output chunks, then the
// result, then the end-of-stream message (flags 0x02), `{}` or
// `{"error": …}`.  `StreamDecoder` takes the body as it comes.

import { checkDisplay, checkRun, checkShape, DeadlinePassed, END_STREAM, Malformed, parse, RUN_STREAM_RESPONSE, type Shape } from "./answer.js";
import { canonical } from "./record.js";
import { DisplayOutput } from "./types.js";

/**
 * The largest message of a stream a client reads unless told otherwise
 * (16 MiB), the same in every official client: a longer one is refused from
 * its envelope's header, before its bytes are read.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** The Content-Type of a Connect stream with JSON messages. */
export const STREAM_MEDIA_TYPE = "application/connect+json";

const FLAG_COMPRESSED = 0x01;
const FLAG_END_STREAM = 0x02;
const HEADER = 5;

/**
 * What the guest wrote since the previous chunk: the exact bytes of each
 * stream (either may be empty; within a chunk nothing orders one against
 * the other) and, for a project, its `step` (from 1; 0 for a snippet, a
 * module or a cell).  Joined in order, a step's chunks are its result's
 * output byte for byte (the client checks this).  A chunk may end inside a
 * multi-byte character: decode with `new TextDecoder()` and `{stream: true}`.
 *
 * A cell's display output comes as a chunk of its own, in the order the cell
 * produced it among its output: `display` is then the output (`stdout` and
 * `stderr` empty); it is undefined in every other chunk.  In order, they are
 * the result's `outputs` (the client checks this too).
 */
export interface OutputChunk {
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  readonly step: number;
  /** A cell's display output; absent (or undefined) in a chunk of output bytes. */
  readonly display?: DisplayOutput | undefined;
}

/**
 * Called with each chunk of a stream as it comes; a promise it returns is
 * awaited before the stream is read on.  What it throws ends the call (the
 * connection is closed) and is thrown as it is.
 */
export type OnOutput = (chunk: OutputChunk) => void | Promise<void>;

/** One envelope around `payload`. */
export function envelope(payload: Uint8Array, flags = 0): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(HEADER + payload.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.length, false);
  out.set(payload, HEADER);
  return out;
}

/** Whether a Content-Type is `application/connect+json`; a charset, if any, UTF-8. */
export function mediaTypeIsStream(value: string | null | undefined): boolean {
  if (!value) return false;
  const parts = value.split(";");
  if (parts[0]!.trim().toLowerCase() !== STREAM_MEDIA_TYPE) return false;
  for (const p of parts.slice(1)) {
    const eq = p.indexOf("=");
    if ((eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase() !== "charset") continue;
    let v = eq < 0 ? "" : p.slice(eq + 1).trim();
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    if (v.toLowerCase() !== "utf-8") return false;
  }
  return true;
}

const B64 = /^[A-Za-z0-9+/]*$/;

/** proto3 JSON bytes: standard or URL-safe base64, padded or not. */
export function protoBytes(s: string, where: string): Uint8Array {
  const t = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (!B64.test(t) || t.length % 4 === 1) throw new Malformed(`${where} is not base64`);
  let bin: string;
  try {
    bin = atob(t + "=".repeat((4 - (t.length % 4)) % 4));
  } catch {
    throw new Malformed(`${where} is not base64`);
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

type Json = Record<string, unknown>;

/** How the decoder makes its errors (the client's own). */
export interface StreamErrors {
  /** The ProtocolError of a stream that breaks the protocol. */
  protocol(why: string): Error;
  /** The error of an end-of-stream message's Connect error. */
  connect(error: unknown): Error;
}

class Joined {
  n = 0;
  parts: Uint8Array[] = [];
  add(b: Uint8Array): void {
    if (b.length) this.parts.push(b);
    this.n += b.length;
  }
  equals(want: Uint8Array): boolean {
    if (want.length !== this.n) return false;
    let at = 0;
    for (const p of this.parts) {
      for (let i = 0; i < p.length; i++) if (p[i] !== want[at + i]) return false;
      at += p.length;
    }
    return true;
  }
}

/**
 * The body of one RunStream or RunCellStream answer, as it comes: `feed`
 * takes the next bytes and returns the chunks they complete; `finish`, at
 * the end of the body, returns the result (the RunResponse object, the
 * streamed output checked against it) or throws the end-of-stream error or
 * a protocol error: an envelope past `maxMessageBytes` (from its header),
 * flags other than 0 and 0x02, a message that is not a RunStreamResponse,
 * anything after the result but the end of the stream or after the end, a
 * body that ends inside an envelope, without the result or without the end.
 */
export class StreamDecoder {
  /** The chunks given so far. */
  chunks = 0;
  #buf: Uint8Array = new Uint8Array(0);
  #result: Json | undefined;
  #error: Error | undefined;
  #ended = false;
  readonly #joined = new Map<string, Joined>();
  /** The display outputs given, as their canonical forms. */
  readonly #displays: string[] = [];
  #displayBytes = 0;

  constructor(
    readonly maxMessageBytes: number,
    readonly errors: StreamErrors,
    readonly deadline?: number,
  ) {}

  #protocol(why: string): Error {
    return this.errors.protocol(`the stream ${why}`);
  }

  feed(data: Uint8Array): OutputChunk[] {
    if (this.#buf.length === 0) this.#buf = data;
    else {
      const b = new Uint8Array(this.#buf.length + data.length);
      b.set(this.#buf);
      b.set(data, this.#buf.length);
      this.#buf = b;
    }
    const out: OutputChunk[] = [];
    let at = 0;
    while (this.#buf.length - at >= HEADER) {
      const flags = this.#buf[at]!;
      const size = new DataView(this.#buf.buffer, this.#buf.byteOffset + at + 1, 4).getUint32(0, false);
      if (size > this.maxMessageBytes) {
        throw this.#protocol(`announces a message of ${size} bytes, past the client's maxMessageBytes (${this.maxMessageBytes})`);
      }
      if (flags & ~FLAG_END_STREAM) {
        const why = flags === FLAG_COMPRESSED ? "compressed, which was not asked for" : "not a message nor the end of the stream";
        throw this.#protocol(`has an envelope with flags 0x${flags.toString(16).padStart(2, "0")} (${why})`);
      }
      if (this.#ended) throw this.#protocol("goes on after its end-of-stream message");
      if (this.#buf.length - at < HEADER + size) break;
      const payload = this.#buf.slice(at + HEADER, at + HEADER + size);
      at += HEADER + size;
      if (flags & FLAG_END_STREAM) this.#end(payload);
      else {
        const chunk = this.#message(payload);
        if (chunk) out.push(chunk);
      }
    }
    this.#buf = this.#buf.slice(at);
    if (this.#ended && this.#buf.length) throw this.#protocol("goes on after its end-of-stream message");
    return out;
  }

  #parse(payload: Uint8Array, shape: Shape, what: string): Json {
    try {
      return checkShape(parse(payload, this.deadline), shape, what);
    } catch (e) {
      if (e instanceof Malformed) throw this.#protocol(`has a ${what} that is not one: ${e.message}`);
      throw e; // DeadlinePassed: the client's
    }
  }

  #message(payload: Uint8Array): OutputChunk | undefined {
    if (this.#result) throw this.#protocol("has a message after its result");
    const m = this.#parse(payload, RUN_STREAM_RESPONSE, "RunStreamResponse");
    const output = m["output"] ?? null;
    const result = m["result"] ?? null;
    if (output !== null && result !== null) throw this.#protocol("has a message with both an output and a result");
    if (result !== null) {
      try {
        checkRun(result as Json, "RunStreamResponse.result");
      } catch (e) {
        if (e instanceof Malformed) throw this.#protocol(`has a result that is not one: ${e.message}`);
        throw e;
      }
      this.#result = result as Json;
      return undefined;
    }
    if (output === null) return undefined; // a kind of message this client does not know: skipped
    const o = output as Json;
    if ((o["display"] ?? null) !== null) return this.#display(o);
    let chunk: OutputChunk;
    try {
      chunk = {
        stdout: protoBytes(typeof o["stdout"] === "string" ? o["stdout"] : "", "output.stdout"),
        stderr: protoBytes(typeof o["stderr"] === "string" ? o["stderr"] : "", "output.stderr"),
        step: typeof o["step"] === "number" ? o["step"] : 0,
        display: undefined,
      };
    } catch (e) {
      if (e instanceof Malformed) throw this.#protocol(`has an output chunk that is not one: ${e.message}`);
      throw e;
    }
    for (const [name, data] of [
      ["stdout", chunk.stdout],
      ["stderr", chunk.stderr],
    ] as const) {
      const key = `${chunk.step}/${name}`;
      let j = this.#joined.get(key);
      if (!j) this.#joined.set(key, (j = new Joined()));
      j.add(data);
      if (j.n > this.maxMessageBytes) throw this.#protocol("has more output than a result could hold");
    }
    this.chunks++;
    return chunk;
  }

  /** A chunk that is a cell's display output: nothing else in it, a display the result could hold. */
  #display(o: Json): OutputChunk {
    if ((typeof o["stdout"] === "string" && o["stdout"] !== "") || (typeof o["stderr"] === "string" && o["stderr"] !== "")) {
      throw this.#protocol("has an output chunk with both a display output and output bytes");
    }
    const d = o["display"] as Json;
    try {
      checkDisplay(d, "output.display");
    } catch (e) {
      if (e instanceof Malformed) throw this.#protocol(`has an output chunk that is not one: ${e.message}`);
      throw e;
    }
    const line = canonical(d);
    this.#displayBytes += line.length + 1;
    if (this.#displayBytes > this.maxMessageBytes) throw this.#protocol("has more display outputs than a result could hold");
    this.#displays.push(line);
    this.chunks++;
    return {
      stdout: new Uint8Array(0),
      stderr: new Uint8Array(0),
      step: typeof o["step"] === "number" ? o["step"] : 0,
      display: new DisplayOutput(d),
    };
  }

  #end(payload: Uint8Array): void {
    this.#ended = true;
    const end = this.#parse(payload, END_STREAM, "end-of-stream message");
    const error = end["error"] ?? null;
    if (error !== null) this.#error = this.errors.connect(error);
  }

  /** The result, at the end of the body; or why there is none. */
  finish(): Json {
    if (this.#buf.length) throw this.#protocol(`ends inside an envelope (${this.#buf.length} bytes of it)`);
    if (this.#error) throw this.#error;
    if (!this.#ended) throw this.#protocol("ends without its end-of-stream message");
    if (!this.#result) throw this.#protocol("ends without a result or an error");
    this.#checkOutput(this.#result);
    if (this.deadline !== undefined && performance.now() > this.deadline) throw new DeadlinePassed();
    return this.#result;
  }

  /**
   * The streamed output, joined, is the result's byte for byte: a step's
   * chunks its step's output, the others the run's; the display outputs
   * given are the result's `outputs`.  A stream that sent no chunk (a kind
   * that does not stream) has nothing to check.
   */
  #checkOutput(result: Json): void {
    if (this.#joined.size === 0 && this.#displays.length === 0) return;
    const outputs = Array.isArray(result["outputs"]) ? (result["outputs"] as unknown[]) : [];
    if (outputs.length !== this.#displays.length || outputs.some((d, i) => canonical(d) !== this.#displays[i])) {
      throw this.#protocol(`display outputs are not the result's: ${this.#displays.length} streamed, ${outputs.length} kept`);
    }
    if (this.#joined.size === 0) return;
    const steps = Array.isArray(result["steps"]) ? (result["steps"] as Json[]) : [];
    const seen = new Set([...this.#joined.keys()].map((k) => Number(k.split("/")[0])));
    const top = Math.max(...seen);
    if (top > steps.length) throw this.#protocol(`has output of step ${top}, but the result has ${steps.length} steps`);
    const wanted = new Set(seen);
    if (top > 0) for (let i = 1; i <= steps.length; i++) wanted.add(i);
    for (const step of [...wanted].sort((a, b) => a - b)) {
      const where = step === 0 ? result : steps[step - 1]!;
      for (const name of ["stdout", "stderr"] as const) {
        const b64 = where[`${name}_base64`];
        const text = where[name];
        let kept: Uint8Array;
        try {
          kept =
            typeof b64 === "string" && b64 !== ""
              ? protoBytes(b64, `${name}_base64`)
              : new TextEncoder().encode(typeof text === "string" ? text : "");
        } catch (e) {
          if (e instanceof Malformed) throw this.errors.protocol(e.message);
          throw e;
        }
        const j = this.#joined.get(`${step}/${name}`) ?? new Joined();
        if (!j.equals(kept)) {
          const what = step === 0 ? name : `step ${step}'s ${name}`;
          throw this.#protocol(`output of ${what} is not the result's: ${j.n} bytes streamed, ${kept.length} kept`);
        }
      }
    }
  }
}
