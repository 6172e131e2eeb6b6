// SPDX-License-Identifier: Apache-2.0
// plimsoll's Node cell server (docs/sessions.md): the JavaScript
// interpreter a session keeps between cells.  The build puts this file into
// session_agent.py as NODE_SERVER; a launch runs it as `node -e` with the
// uplink on fd 3 and the ready pipe on fd 4.  Frames both ways: a type byte,
// a 4-byte big-endian length, the data ("C" code in; "O" stdout, "E"
// stderr, "D" a display output's JSON MIME bundle, "X" the cell's status
// out).  tests/guest/test_cell_server.py runs
// it on the host.
'use strict';
const net = require('net'), vm = require('vm'), util = require('util');
const stream = require('stream'), Module = require('module');
const WORK = process.env.PLIMSOLL_WORK_DIR || '/work'; // the host test's override
process.chdir(WORK);
let cur = null, running = false, failed = false;
function send(conn, t, b) {
  if (!conn || conn.destroyed) return;
  const h = Buffer.allocUnsafe(5);
  h[0] = t; h.writeUInt32BE(b.length, 1);
  conn.write(Buffer.concat([h, b]));
}
function sink(t) {
  const s = new stream.Writable({ write(c, e, cb) { send(cur, t, c); cb(); } });
  s.isTTY = false; s.columns = 80; s.fd = t === 0x4f ? 1 : 2;
  return s;
}
const out = sink(0x4f), err = sink(0x45);
for (const [k, s] of [['stdout', out], ['stderr', err]])
  Object.defineProperty(process, k, { configurable: true, enumerable: true, get() { return s; } });
const con = new console.Console({ stdout: out, stderr: err, colorMode: false });
// display(value, mimeType): one display output (docs/sessions.md, "Display
// outputs").  Text types take a string (an object: JSON for JSON types,
// util.inspect otherwise); every other type takes bytes (a Buffer, a typed
// array, an ArrayBuffer) or their base64.  Without a type: a string is
// text/plain, bytes need one, anything else is application/json.
const MIME = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/;
const isText = m => m.startsWith('text/') || m === 'application/json' || m === 'application/javascript' ||
  m === 'image/svg+xml' || m.endsWith('+json') || m.endsWith('+xml');
function display(value, mimeType) {
  const bytes = util.types.isArrayBufferView(value) || util.types.isAnyArrayBuffer(value);
  const m = mimeType !== undefined ? mimeType
    : typeof value === 'string' ? 'text/plain' : bytes ? undefined : 'application/json';
  if (typeof m !== 'string' || m.length > 127 || !MIME.test(m))
    throw new TypeError('display: a MIME type such as "image/png" is needed, lowercase');
  const raw = () => util.types.isAnyArrayBuffer(value) ? Buffer.from(value)
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  let data;
  if (isText(m)) {
    data = typeof value === 'string' ? value : bytes ? raw().toString('utf8')
      : m === 'text/plain' ? util.inspect(value) : JSON.stringify(value);
    if (data === undefined) throw new TypeError('display: the value has no JSON form');
    data = data.replace(/\0/g, '\ufffd');
  } else if (bytes) {
    data = raw().toString('base64');
  } else if (typeof value === 'string' && Buffer.from(value, 'base64').toString('base64') === value) {
    data = value;
  } else {
    throw new TypeError('display: ' + m + ' takes bytes or their base64');
  }
  send(cur, 0x44, Buffer.from(JSON.stringify({ kind: 'display', data: { [m]: data } })));
}
const g = {
  console: con, display, require: Module.createRequire(WORK + '/'), process, Buffer,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, URL, URLSearchParams, TextEncoder, TextDecoder, structuredClone,
  AbortController, AbortSignal, Event, EventTarget, atob, btoa, performance,
  __filename: WORK + '/cell', __dirname: WORK, module: { exports: {} },
};
g.exports = g.module.exports;
const ctx = vm.createContext(g);
function fmt(e) {
  if (e && typeof e.stack === 'string')
    return e.stack.split('\n').filter(l => !/^\s+at (.*\()?(node:|\[eval\])/.test(l)).join('\n');
  return util.inspect(e);
}
process.on('uncaughtException', e => { if (running) { failed = true; err.write('Uncaught ' + fmt(e) + '\n'); } });
process.on('unhandledRejection', e => { if (running) { failed = true; err.write('Uncaught (in promise) ' + fmt(e) + '\n'); } });
function compile(code) {
  try { return new vm.Script(code, { filename: 'cell' }); }
  catch (e) {
    if (!e || e.name !== 'SyntaxError' || !/\bawait\b/.test(code)) throw e;
    // Top-level await: the cell runs as the body of an async function.  A
    // single expression is returned (its value is shown); otherwise the
    // cell's declarations are local to it.
    try { return new vm.Script('(async () => { return (' + code.replace(/[\s;]+$/, '') + '\n) })()', { filename: 'cell' }); }
    catch (e2) {}
    try { return new vm.Script('(async () => {' + code + '\n})()', { filename: 'cell' }); }
    catch (e3) { throw e; }
  }
}
async function run(conn, code, keep) {
  cur = conn; running = true; failed = false;
  try {
    let v = compile(code).runInContext(ctx);
    if (v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function') v = await v;
    if (v !== undefined) out.write(util.inspect(v) + '\n');
  } catch (e) { failed = true; err.write(fmt(e) + '\n'); }
  await new Promise(r => setImmediate(r));
  send(conn, 0x58, Buffer.from(failed ? '1' : '0'));
  running = false; cur = null;
  if (!keep) conn.end();
}
const queue = [];
let busy = false;
async function next() {
  if (busy) return;
  busy = true;
  while (queue.length) { const [c, code, keep] = queue.shift(); if (!c.destroyed) await run(c, code, keep); }
  busy = false;
}
// The uplink: the connection the launcher opened and greeted with, fd 3.
// Cells arrive on it one at a time; when plimsolld closes it (a deadline,
// the session's end), this interpreter ends.
const fs = require('fs');
const up = new net.Socket({ fd: 3, readable: true, writable: true });
let ubuf = Buffer.alloc(0);
up.on('error', () => process.exit(0));
up.on('end', () => process.exit(0));
up.on('close', () => process.exit(0));
up.on('data', d => {
  ubuf = Buffer.concat([ubuf, d]);
  while (ubuf.length >= 5) {
    const n = ubuf.readUInt32BE(1);
    if (ubuf[0] !== 0x43 || n > 64 * 1024 * 1024) { up.destroy(); return; }
    if (ubuf.length < 5 + n) return;
    queue.push([up, ubuf.subarray(5, 5 + n).toString('utf8'), true]);
    ubuf = ubuf.subarray(5 + n);
    next();
  }
});
fs.writeSync(4, '1');
fs.closeSync(4);
