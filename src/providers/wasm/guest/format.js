// SPDX-License-Identifier: Apache-2.0
// Node-like value formatting for console.* and uncaught errors in the guest
// (qjs_guest.c evaluates this file, embedded by scripts/build/embed, on first
// use only).  The script's value is format(args): one line, without the
// trailing newline, for console.log(...args).
(function () {
'use strict';
const isId = /^[A-Za-z_$][\w$]*$/;
function quote(s) {
  return "'" + s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")
    .replace(/\n/g, '\\n') + "'";
}
function key(k) {
  return typeof k === 'symbol' ? '[' + k.toString() + ']' : isId.test(k) ? k : quote(k);
}
function errStr(e) {
  let head;
  try { head = String(e); } catch (_) { head = '[object Error]'; }
  const st = e.stack;
  if (typeof st !== 'string' || !st.length) return head;
  const lines = st.replace(/\n$/, '').split('\n');
  if (lines.length > 10)
    lines.splice(10, lines.length - 10, '    ... ' + (lines.length - 10) + ' more frames');
  return head + '\n' + lines.join('\n');
}
function join(open, parts, close, depth) {
  if (parts.length === 0) return open + close;
  const one = open + ' ' + parts.join(', ') + ' ' + close;
  if (one.length <= 72 && !one.includes('\n')) return one;
  const pad = '  '.repeat(depth + 1);
  return open + '\n' + pad + parts.join(',\n' + pad) + '\n' + '  '.repeat(depth) + close;
}
function fmt(v, depth, seen, top) {
  switch (typeof v) {
  case 'string': return top ? v : quote(v);
  case 'number': return Object.is(v, -0) ? '-0' : String(v);
  case 'bigint': return String(v) + 'n';
  case 'symbol': return v.toString();
  case 'undefined': return 'undefined';
  case 'boolean': return String(v);
  case 'function':
    return v.name ? '[Function: ' + v.name + ']' : '[Function (anonymous)]';
  }
  if (v === null) return 'null';
  if (seen.includes(v)) return '[Circular]';
  if (v instanceof Error) return errStr(v);
  if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
  if (v instanceof RegExp) return String(v);
  if (v instanceof Promise) return 'Promise {}';
  const isArr = Array.isArray(v);
  if (depth > 2) return isArr ? '[Array]' : '[Object]';
  seen.push(v);
  try {
    const parts = [];
    if (isArr || ArrayBuffer.isView(v)) {
      const n = Math.min(v.length, 100);
      for (let i = 0; i < n; i++)
        parts.push(i in v ? fmt(v[i], depth + 1, seen) : '<empty>');
      if (v.length > 100) parts.push('... ' + (v.length - 100) + ' more items');
      const pre = isArr ? '' : v.constructor.name + '(' + v.length + ') ';
      return pre + join('[', parts, ']', depth);
    }
    if (v instanceof Map) {
      for (const [k, x] of v) parts.push(fmt(k, depth + 1, seen) + ' => ' + fmt(x, depth + 1, seen));
      return 'Map(' + v.size + ') ' + join('{', parts, '}', depth);
    }
    if (v instanceof Set) {
      for (const x of v) parts.push(fmt(x, depth + 1, seen));
      return 'Set(' + v.size + ') ' + join('{', parts, '}', depth);
    }
    for (const k of Reflect.ownKeys(v)) {
      const d = Object.getOwnPropertyDescriptor(v, k);
      if (!d || !d.enumerable) continue;
      const x = 'value' in d ? fmt(d.value, depth + 1, seen) : '[Getter/Setter]';
      parts.push(key(k) + ': ' + x);
    }
    const proto = Object.getPrototypeOf(v);
    let pre = '';
    if (proto === null) pre = '[Object: null prototype] ';
    else if (proto !== Object.prototype && proto.constructor && proto.constructor.name)
      pre = proto.constructor.name + ' ';
    return pre + join('{', parts, '}', depth);
  } finally { seen.pop(); }
}
return function format(args) {
  let out = '';
  let i = 0;
  if (typeof args[0] === 'string' && args.length > 1 && args[0].includes('%')) {
    const f = args[0];
    i = 1;
    for (let j = 0; j < f.length; j++) {
      const c = f[j];
      if (c !== '%' || j + 1 >= f.length) { out += c; continue; }
      const t = f[++j];
      if (t === '%') { out += '%'; continue; }
      if (i >= args.length || !'sdifjoOc'.includes(t)) { out += '%' + t; continue; }
      const a = args[i++];
      switch (t) {
      case 's': out += typeof a === 'string' ? a : fmt(a, 1, [], false); break;
      case 'd': case 'i': out += typeof a === 'bigint' ? a + 'n' :
        String(t === 'i' ? Math.trunc(Number(a)) : Number(a)); break;
      case 'f': out += String(parseFloat(a)); break;
      case 'j': out += JSON.stringify(a); break;
      case 'c': break;
      default: out += fmt(a, 0, [], false);
      }
    }
    if (i < args.length) out += ' ';
  }
  for (let k = i; k < args.length; k++)
    out += (k > i ? ' ' : '') + fmt(args[k], 0, [], true);
  return out;
};
})()
