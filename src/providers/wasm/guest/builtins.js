// SPDX-License-Identifier: Apache-2.0
// The ES2022/ES2023 built-ins QuickJS 2021-03-27 lacks, and a few the web
// and Node.js give code written today (structuredClone, Object.groupBy,
// Map.groupBy, Promise.withResolvers), for the snippet's global
// (docs/providers/wasm.md, "The JavaScript it runs").
//
// qjs_guest.c evaluates this file (embedded by scripts/build/embed) once,
// in plg_init; its value is a list of [where, name, function], and each
// function is put on its object as an ordinary method (writable,
// configurable, not enumerable), as a built-in is.  The engine's image
// holds them (js-worker/js_worker.c), so a run pays nothing for them, and
// every run starts from the image: nothing one run does to them reaches
// the next.
(function () {
'use strict';

function atOf(conv) {
  return function at(index) {
    const o = conv(this), n = o.length >>> 0;
    let k = Math.trunc(index) || 0;
    if (k < 0) k += n;
    return k < 0 || k >= n ? undefined : o[k];
  };
}

function findLastOf(fname, found) {
  return function (pred) { // length 1, as the standard's: thisArg is optional
    const thisArg = arguments[1];
    if (this == null) throw new TypeError(fname + ' called on null or undefined');
    if (typeof pred !== 'function') throw new TypeError(String(pred) + ' is not a function');
    const o = Object(this);
    for (let k = (o.length >>> 0) - 1; k >= 0; k--)
      if (pred.call(thisArg, o[k], k, o)) return found ? o[k] : k;
    return found ? undefined : -1;
  };
}

// The copy an array method returns: an Array, or a typed array of the
// same kind.
const arrayCopy = (o, n) => new Array(n);
const typedCopy = (o, n) => new (Object.getPrototypeOf(o).constructor)(n);
function copyOf(self, make) {
  const o = Object(self), n = o.length >>> 0;
  const a = make(o, n);
  for (let k = 0; k < n; k++) a[k] = o[k];
  return a;
}

function toReversedOf(make) {
  return function toReversed() { return copyOf(this, make).reverse(); };
}

function toSortedOf(make) {
  return function toSorted(cmp) {
    if (cmp !== undefined && typeof cmp !== 'function')
      throw new TypeError('the comparison function must be a function or undefined');
    return copyOf(this, make).sort(cmp);
  };
}

function withOf(make) {
  return function (index, value) {
    const a = copyOf(this, make), n = a.length;
    let k = Math.trunc(index) || 0;
    if (k < 0) k += n;
    if (k < 0 || k >= n) throw new RangeError('Invalid index : ' + index);
    a[k] = value;
    return a;
  };
}

function structuredClone(value) {
  const seen = new Map();
  const fail = (what) => {
    const e = new Error(what + ' could not be cloned.');
    e.name = 'DataCloneError';
    throw e;
  };
  const clone = (v) => {
    if (typeof v === 'symbol') fail(String(v));
    if (typeof v === 'function') fail('function ' + (v.name || '(anonymous)'));
    if (v === null || typeof v !== 'object') return v;
    if (seen.has(v)) return seen.get(v);
    const tag = Object.prototype.toString.call(v);
    let out;
    switch (tag) {
    case '[object Date]': out = new Date(v.getTime()); seen.set(v, out); return out;
    case '[object RegExp]': out = new RegExp(v.source, v.flags); seen.set(v, out); return out;
    case '[object Boolean]': case '[object Number]': case '[object String]':
    case '[object BigInt]':
      out = Object(v.valueOf()); seen.set(v, out); return out;
    case '[object ArrayBuffer]': out = v.slice(0); seen.set(v, out); return out;
    case '[object Map]': out = new Map(); seen.set(v, out);
      for (const [k, x] of v) out.set(clone(k), clone(x));
      return out;
    case '[object Set]': out = new Set(); seen.set(v, out);
      for (const x of v) out.add(clone(x));
      return out;
    case '[object Error]':
      out = new (globalThis[v.name] && globalThis[v.name].prototype instanceof Error ?
                 globalThis[v.name] : Error)(v.message);
      seen.set(v, out);
      if ('stack' in v) out.stack = String(v.stack);
      if ('cause' in v) out.cause = clone(v.cause);
      return out;
    case '[object Array]': out = new Array(v.length); seen.set(v, out); break;
    case '[object Object]': out = {}; seen.set(v, out); break;
    default:
      if (ArrayBuffer.isView(v)) {
        const b = clone(v.buffer);
        out = v instanceof DataView ? new DataView(b, v.byteOffset, v.byteLength)
            : new (Object.getPrototypeOf(v).constructor)(b, v.byteOffset, v.length);
        seen.set(v, out);
        return out;
      }
      fail(tag.slice(8, -1));
    }
    for (const k of Object.keys(v)) out[k] = clone(v[k]);
    return out;
  };
  if (arguments.length === 0)
    throw new TypeError('structuredClone: 1 argument required, but only 0 present.');
  return clone(value);
}

function groupBy(items, callback) {
  if (typeof callback !== 'function') throw new TypeError('callback is not a function');
  const out = Object.create(null);
  let k = 0;
  for (const x of items) {
    const key = callback(x, k++);
    const p = typeof key === 'symbol' ? key : String(key);
    (out[p] || (out[p] = [])).push(x);
  }
  return out;
}

function mapGroupBy(items, callback) {
  if (typeof callback !== 'function') throw new TypeError('callback is not a function');
  const out = new Map();
  let k = 0;
  for (const x of items) {
    let key = callback(x, k++);
    if (key === 0) key = 0; // -0 and +0 are one key
    const g = out.get(key);
    if (g) g.push(x); else out.set(key, [x]);
  }
  return out;
}

function withResolvers() {
  let resolve, reject;
  const promise = new this((a, b) => { resolve = a; reject = b; });
  return {promise, resolve, reject};
}

function stringAt(index) {
  if (this == null) throw new TypeError('String.prototype.at called on null or undefined');
  const s = String(this), n = s.length;
  let k = Math.trunc(index) || 0;
  if (k < 0) k += n;
  return k < 0 || k >= n ? undefined : s[k];
}

function hasOwn(o, key) {
  if (o == null) throw new TypeError('Cannot convert undefined or null to object');
  return Object.prototype.hasOwnProperty.call(o, key);
}

function toSpliced(start, skipCount) { // eslint-disable-line no-unused-vars
  const a = Array.prototype.slice.call(Object(this));
  Array.prototype.splice.apply(a, arguments);
  return a;
}

const array = Array.prototype, string = String.prototype;
const typed = Object.getPrototypeOf(Int8Array.prototype); // %TypedArray%.prototype
const named = (f, name) => Object.defineProperty(f, 'name', {value: name});
return [
  // ES2022
  [array, 'at', atOf(Object)],
  [string, 'at', named(stringAt, 'at')],
  [typed, 'at', atOf((o) => o)],
  [Object, 'hasOwn', hasOwn],
  // ES2023
  [array, 'findLast', named(findLastOf('findLast', true), 'findLast')],
  [array, 'findLastIndex', named(findLastOf('findLastIndex', false), 'findLastIndex')],
  [typed, 'findLast', named(findLastOf('findLast', true), 'findLast')],
  [typed, 'findLastIndex', named(findLastOf('findLastIndex', false), 'findLastIndex')],
  [array, 'toReversed', toReversedOf(arrayCopy)],
  [array, 'toSorted', toSortedOf(arrayCopy)],
  [array, 'toSpliced', toSpliced],
  [array, 'with', named(withOf(arrayCopy), 'with')],
  [typed, 'toReversed', toReversedOf(typedCopy)],
  [typed, 'toSorted', toSortedOf(typedCopy)],
  [typed, 'with', named(withOf(typedCopy), 'with')],
  // what the web and Node.js give (ES2024, HTML)
  [globalThis, 'structuredClone', structuredClone],
  [Object, 'groupBy', groupBy],
  [Map, 'groupBy', named(mapGroupBy, 'groupBy')],
  [Promise, 'withResolvers', withResolvers],
];
})()
